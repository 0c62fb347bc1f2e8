//! What DynamoDB Local cannot produce (throttling, transaction conflicts, a timeout after a
//! write committed) injected with `FaultyStore` around a real `DynamoStore` on DynamoDB Local, so
//! the services' retries (`service::with_retry`: 4 attempts, for `Throttled` and
//! `TransactionConflict` only) and their failure paths run against the real adapter:
//!
//! - a fault that clears within the retry budget is retried and the call succeeds;
//! - one that does not fails cleanly: the API answers `503 {"error":"unavailable"}` with nothing
//!   written, the worker hands the message back with the rest of its group without calling the
//!   upstream, the reaper surfaces the error having written nothing;
//! - a timeout (`Unavailable`) is never retried by the services: the write may have happened,
//!   and the state machine (an idempotent confirm, the lease and the reaper) settles it.
//!
//! `FaultyStore::fail_next` fails a call before it reaches DynamoDB (what throttling and conflicts
//! mean: nothing written); `fail_after_next` lets it through and loses the answer.
//!
//! Needs DynamoDB Local: `eval "$(scripts/emulators.sh start)"`. Without it every test here fails
//! saying so; none is skipped.

use async_trait::async_trait;
use aws_lambda_events::event::apigw::{
    ApiGatewayRequestAuthorizer, ApiGatewayRequestAuthorizerJwtDescription,
    ApiGatewayV2httpRequestContext,
};
use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::request::RequestContext;
use lambda_http::{Body, RequestExt};
use seatgate::adapters::upstream_http::HttpUpstream;
use seatgate::config::Timing;
use seatgate::domain::{
    ActionKind, ConsentRecord, Hold, Intent, IntentId, IntentStatus, Millis, RoomId,
    SeatAvailability, SeatId, SeatMessage, Secret, Suppression, TransitionRecord,
    TransitionRequest, UserId,
};
use seatgate::domain::{Page, PageSize};
use seatgate::handlers::http;
use seatgate::ports::{
    Charge, ChargeReadError, Clock, Credentials, Intents, ReadError, ReserveOutcome, StoreError,
    TransitionError, Upstream,
};
use seatgate::service::{ApiService, Ports, QueueRecord, Reaper, Services, Worker};
use seatgate_aws::dynamodb::{DynamoStore, create_table, delete_table};
use seatgate_testkit::ManualClock;
use seatgate_testkit::setup::{self, CHARGE_READS, POSTS};
use seatgate_testkit::{FaultyStore, StoreOp};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;
use upstream_sim::{Faults, Simulator};

/// `service::with_retry`'s budget.
const ATTEMPTS: u64 = 4;

/// A table of its own, the real store on it, the same store behind `FaultyStore`, a manual
/// clock and the upstream simulator.
struct Rig {
    client: aws_sdk_dynamodb::Client,
    table: String,
    timing: Timing,
    clock: Arc<ManualClock>,
    sim: Simulator,
    upstream: Arc<HttpUpstream>,
    /// The store without faults (setting up state, reading it back). Shares its request
    /// counter with `faulty`'s inner store.
    plain: Arc<DynamoStore>,
    faulty: Arc<FaultyStore<DynamoStore>>,
}

async fn rig() -> Rig {
    let client = setup::dynamodb().await;
    let table = setup::unique("seatgate-faults-");
    create_table(&client, &table).await.expect("create_table");
    let store =
        DynamoStore::new(&client, &table).with_credentials_key(setup::credentials_key().await);
    let timing = Timing::aws();
    let setup::Upstream {
        sim,
        http: upstream,
        ..
    } = setup::upstream(&timing).await;
    Rig {
        client,
        table,
        timing,
        clock: Arc::new(ManualClock::new(Millis::now())),
        sim,
        upstream,
        faulty: Arc::new(FaultyStore::new(store.clone())),
        plain: Arc::new(store),
    }
}

impl Rig {
    fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    fn services_on<S>(&self, store: Arc<S>, upstream: Arc<dyn Upstream>) -> Services
    where
        S: seatgate::ports::Store + 'static,
    {
        Services::new(
            Ports::from_store(store, upstream, self.clock()),
            self.timing.clone(),
        )
    }

    fn api_on(&self, store: Arc<FaultyStore<DynamoStore>>) -> ApiService {
        self.services_on(store, self.upstream.clone()).api()
    }

    fn api(&self) -> ApiService {
        self.api_on(self.faulty.clone())
    }

    fn plain_api(&self) -> ApiService {
        self.services_on(self.plain.clone(), self.upstream.clone())
            .api()
    }

    fn worker(&self, intents: Arc<dyn Intents>, upstream: Arc<dyn Upstream>) -> Worker {
        let ports = Ports {
            intents,
            ..Ports::from_store(self.faulty.clone(), upstream, self.clock())
        };
        Services::new(ports, self.timing.clone()).worker()
    }

    fn reaper(&self) -> Reaper {
        self.services_on(self.faulty.clone(), self.upstream.clone())
            .reaper()
    }

    async fn enrol(&self, name: &str) -> UserId {
        let user = UserId::parse(name).unwrap();
        self.sim.register_user(name, &format!("cred-{name}"));
        self.plain
            .put_credential(&user, &Secret::new(format!("cred-{name}")))
            .await
            .unwrap();
        user
    }

    async fn requested(&self, user: &UserId, seat: &str) -> Intent {
        let api = self.plain_api();
        let action = api
            .prepare(user, ActionKind::ReserveSeat, SeatId::parse(seat).unwrap())
            .await
            .unwrap();
        api.confirm(user, &action.action_id).await.unwrap().intent
    }

    async fn intent(&self, id: &IntentId) -> Intent {
        self.plain.get_intent(id).await.unwrap().unwrap()
    }

    /// Every item's `pk`, straight from the table.
    async fn keys(&self) -> Vec<String> {
        let out = self
            .client
            .scan()
            .table_name(&self.table)
            .consistent_read(true)
            .send()
            .await
            .unwrap();
        // The per-user rate limit's window counters are written before the request they count,
        // whatever becomes of it; they are not the state these cases check.
        let counter = |i: &std::collections::HashMap<String, AttributeValue>| matches!(i.get("sk"), Some(AttributeValue::S(sk)) if sk.starts_with("RATE#"));
        out.items()
            .iter()
            .filter(|i| !counter(i))
            .filter_map(|i| match i.get("pk") {
                Some(AttributeValue::S(pk)) => Some(pk.clone()),
                _ => None,
            })
            .collect()
    }

    /// DynamoDB requests of one operation that reached the emulator so far.
    fn sent(&self, operation: &str) -> u64 {
        self.plain.requests().get(operation)
    }

    async fn finish(self) {
        let _ = delete_table(&self.client, &self.table).await;
    }
}

/// An API Gateway HTTP API (v2) request as the Lambda runtime hands it to the api function, with
/// the JWT authorizer's claims in the request context.
fn request(method: &str, path: &str, body: Option<&str>, sub: &str) -> lambda_http::Request {
    let method: lambda_http::http::Method = method.parse().unwrap();
    let mut context = ApiGatewayV2httpRequestContext::default();
    context.route_key = Some(format!("{method} {path}"));
    context.stage = Some("$default".into());
    context.http.method = method.clone();
    context.http.path = Some(path.into());
    let mut jwt = ApiGatewayRequestAuthorizerJwtDescription::default();
    jwt.claims = HashMap::from([("sub".to_owned(), sub.to_owned())]);
    let mut authorizer = ApiGatewayRequestAuthorizer::default();
    authorizer.jwt = Some(jwt);
    context.authorizer = Some(authorizer);
    let mut req =
        lambda_http::http::Request::new(body.map_or(Body::Empty, |b| Body::Text(b.into())));
    *req.method_mut() = method;
    *req.uri_mut() = path.parse().unwrap();
    req.with_request_context(RequestContext::ApiGatewayV2(context))
}

fn json_body(response: &lambda_http::Response<Body>) -> Value {
    match response.body() {
        Body::Text(t) => serde_json::from_str(t).unwrap(),
        Body::Binary(b) => serde_json::from_slice(b).unwrap(),
        _ => Value::Null,
    }
}

/// `POST /actions` through the handler (no faults armed): the action id.
async fn prepare(api: &ApiService, sub: &str, seat: &str) -> String {
    let body = format!(r#"{{"kind":"reserve_seat","seat_id":"{seat}"}}"#);
    let response = http::handle(api, request("POST", "/actions", Some(&body), sub)).await;
    assert_eq!(response.status(), 201);
    json_body(&response)["action_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn confirm(api: &ApiService, sub: &str, action_id: &str) -> lambda_http::Response<Body> {
    let path = format!("/actions/{action_id}/confirm");
    http::handle(api, request("POST", &path, None, sub)).await
}

fn message(intent: &Intent) -> QueueRecord {
    QueueRecord {
        message_id: format!("m-{}", intent.intent_id),
        group_id: intent.seat_id.to_string(),
        body: serde_json::to_string(&SeatMessage::for_intent(intent)).unwrap(),
        receipt: String::new(),
    }
}

// ---------------------------------------------------------------------------------------------
// API
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn confirm_retries_throttling_that_clears_within_the_budget() {
    let r = rig().await;
    let api = r.api();
    let action = prepare(&api, "u1", "A-1").await;
    r.faulty.fail_next(
        StoreOp::Confirm,
        StoreError::Throttled,
        (ATTEMPTS - 1) as u32,
    );
    let response = confirm(&api, "u1", &action).await;
    assert_eq!(response.status(), 202, "{:?}", json_body(&response));
    assert_eq!(json_body(&response)["status"], "REQUESTED");
    assert_eq!(r.faulty.calls(StoreOp::Confirm), ATTEMPTS);
    assert_eq!(
        r.sent("TransactWriteItems"),
        1,
        "only the last attempt reached DynamoDB"
    );
    r.finish().await;
}

#[tokio::test]
async fn confirm_under_persistent_throttling_answers_503_and_writes_nothing() {
    let r = rig().await;
    let api = r.api();
    let action = prepare(&api, "u1", "A-1").await;
    let before = r.keys().await;
    r.faulty
        .fail_next(StoreOp::Confirm, StoreError::Throttled, 1000);

    let response = confirm(&api, "u1", &action).await;
    assert_eq!(response.status(), 503);
    let body = json_body(&response);
    assert_eq!(body["error"], "unavailable", "{body}");
    assert!(body["message"].is_string());
    assert_eq!(
        r.faulty.calls(StoreOp::Confirm),
        ATTEMPTS,
        "the whole budget, then stop"
    );
    assert_eq!(r.sent("TransactWriteItems"), 0);
    let after = r.keys().await;
    assert_eq!(after, before, "no intent, no consent, the action untouched");
    assert!(after.iter().all(|pk| !pk.starts_with("INTENT#")));

    // The client retries once the store recovers: the action was still PREPARED.
    r.faulty.heal();
    let retried = confirm(&api, "u1", &action).await;
    assert_eq!(retried.status(), 202);
    r.finish().await;
}

#[tokio::test]
async fn a_timeout_is_not_retried_and_the_confirm_stays_idempotent() {
    let r = rig().await;
    let api = r.api();
    let action = prepare(&api, "u1", "A-1").await;
    // The transaction commits, its answer is lost.
    r.faulty.fail_after_next(
        StoreOp::Confirm,
        StoreError::Unavailable("TransactWriteItems: timed out".into()),
        1,
    );
    let response = confirm(&api, "u1", &action).await;
    assert_eq!(response.status(), 503);
    assert_eq!(json_body(&response)["error"], "unavailable");
    assert_eq!(
        r.faulty.calls(StoreOp::Confirm),
        1,
        "Unavailable is never retried"
    );
    assert_eq!(r.sent("TransactWriteItems"), 1, "the write happened");
    let intents: Vec<String> = r
        .keys()
        .await
        .into_iter()
        .filter(|pk| pk.starts_with("INTENT#"))
        .collect();
    assert_eq!(
        intents.len(),
        3,
        "the intent, its consent record and its creation's transition record: {intents:?}"
    );

    // The client's retry learns the outcome: the same intent, 200, no second write.
    let retried = confirm(&api, "u1", &action).await;
    assert_eq!(retried.status(), 200);
    let id = json_body(&retried)["intent_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(intents[0], format!("INTENT#{id}"));
    assert_eq!(r.sent("TransactWriteItems"), 1);
    r.finish().await;
}

// ---------------------------------------------------------------------------------------------
// Worker
// ---------------------------------------------------------------------------------------------

/// The upstream, plus: right after the reserve call returns, arm `fault` on the next
/// `transition` calls. The next transition after a reserve is the worker's settle write, so this
/// targets it and not the claim before it.
struct ArmAfterReserve {
    inner: Arc<HttpUpstream>,
    store: Arc<FaultyStore<DynamoStore>>,
    error: StoreError,
    times: u32,
}

#[async_trait]
impl Upstream for ArmAfterReserve {
    async fn reserve(&self, credential: &Secret, seat_id: &SeatId) -> ReserveOutcome {
        let outcome = self.inner.reserve(credential, seat_id).await;
        self.store
            .fail_next(StoreOp::Transition, self.error.clone(), self.times);
        outcome
    }

    async fn current_charge(&self, credential: &Secret) -> Result<Option<Charge>, ChargeReadError> {
        self.inner.current_charge(credential).await
    }

    async fn seat(&self, seat_id: &SeatId) -> Result<bool, ReadError> {
        self.inner.seat(seat_id).await
    }

    async fn room(&self, room_id: &RoomId) -> Result<Vec<SeatAvailability>, ReadError> {
        self.inner.room(room_id).await
    }
}

#[tokio::test]
async fn the_worker_retries_a_conflicting_settle_write() {
    let r = rig().await;
    let user = r.enrol("u1").await;
    let intent = r.requested(&user, "S-1").await;
    let upstream = Arc::new(ArmAfterReserve {
        inner: r.upstream.clone(),
        store: r.faulty.clone(),
        error: StoreError::TransactionConflict,
        times: (ATTEMPTS - 1) as u32,
    });
    let failed = r
        .worker(r.faulty.clone(), upstream)
        .handle_batch(&[message(&intent)])
        .await;
    assert!(failed.is_empty(), "{failed:?}");
    let done = r.intent(&intent.intent_id).await;
    assert_eq!(done.status, IntentStatus::Succeeded);
    assert!(done.charge_id.is_some());
    assert_eq!(r.sim.stats().get(POSTS), 1, "exactly one upstream write");
    assert_eq!(
        r.faulty.calls(StoreOp::Transition),
        1 + ATTEMPTS,
        "the claim, then the settle write 3 times refused and once written"
    );
    assert_eq!(r.faulty.injected(), ATTEMPTS - 1);
    assert_eq!(
        r.sent("TransactWriteItems"),
        3,
        "the confirm, the claim (with the seat's hold) and the one settle that landed"
    );
    r.finish().await;
}

#[tokio::test]
async fn a_settle_write_that_keeps_conflicting_is_left_to_the_reaper() {
    let r = rig().await;
    let user = r.enrol("u1").await;
    let intent = r.requested(&user, "S-1").await;
    let upstream = Arc::new(ArmAfterReserve {
        inner: r.upstream.clone(),
        store: r.faulty.clone(),
        error: StoreError::TransactionConflict,
        times: ATTEMPTS as u32,
    });
    let worker = r.worker(r.faulty.clone(), upstream);
    let batch = [message(&intent)];
    assert_eq!(
        worker.handle_batch(&batch).await,
        vec![batch[0].message_id.clone()]
    );
    assert_eq!(
        r.intent(&intent.intent_id).await.status,
        IntentStatus::Reserving
    );
    assert_eq!(r.sim.stats().get(POSTS), 1);

    // Redelivered: the intent is RESERVING, so the claim is refused; no second write upstream.
    r.faulty.heal();
    let plain_worker = r.worker(r.faulty.clone(), r.upstream.clone());
    assert!(plain_worker.handle_batch(&batch).await.is_empty());
    assert_eq!(r.sim.stats().get(POSTS), 1);

    // Past the lease, the reaper settles it by reading the charge.
    r.clock
        .advance(r.timing.lease() + r.timing.reaper_grace + Duration::from_secs(1));
    let report = r.reaper().run_once(100).await.unwrap();
    assert_eq!(report.settled_succeeded, 1, "{report:?}");
    assert_eq!(
        r.intent(&intent.intent_id).await.status,
        IntentStatus::Succeeded
    );
    assert_eq!(r.sim.stats().get(POSTS), 1);
    assert_eq!(r.sim.stats().get(CHARGE_READS), 1);
    r.finish().await;
}

/// Routes `transition` calls for chosen intents through the faulty store, everything else to
/// the plain one: a fault that hits one message group and not the others.
struct Targeted {
    plain: Arc<DynamoStore>,
    faulty: Arc<FaultyStore<DynamoStore>>,
    targets: BTreeSet<IntentId>,
}

#[async_trait]
impl Intents for Targeted {
    async fn register_wait(
        &self,
        intent: &Intent,
        consent: &ConsentRecord,
    ) -> Result<(), StoreError> {
        self.plain.register_wait(intent, consent).await
    }

    async fn get_intent(&self, id: &IntentId) -> Result<Option<Intent>, StoreError> {
        self.plain.get_intent(id).await
    }

    async fn get_consent(&self, id: &IntentId) -> Result<Option<ConsentRecord>, StoreError> {
        self.plain.get_consent(id).await
    }

    async fn history(
        &self,
        id: &IntentId,
        after: Option<u64>,
        size: PageSize,
    ) -> Result<Page<TransitionRecord, u64>, StoreError> {
        self.plain.history(id, after, size).await
    }

    async fn transition(&self, request: &TransitionRequest) -> Result<Intent, TransitionError> {
        if self.targets.contains(&request.intent_id) {
            self.faulty.transition(request).await
        } else {
            self.plain.transition(request).await
        }
    }

    async fn due_intents(&self, now: Millis, limit: usize) -> Result<Vec<Intent>, StoreError> {
        self.plain.due_intents(now, limit).await
    }

    async fn hold(&self, seat_id: &SeatId) -> Result<Option<Hold>, StoreError> {
        self.plain.hold(seat_id).await
    }

    async fn suppression(
        &self,
        seat_id: &SeatId,
        now: Millis,
    ) -> Result<Option<Suppression>, StoreError> {
        self.plain.suppression(seat_id, now).await
    }

    async fn last_taken(&self, seat_id: &SeatId) -> Result<Option<Suppression>, StoreError> {
        self.plain.last_taken(seat_id).await
    }
}

#[tokio::test]
async fn a_claim_that_keeps_failing_hands_back_its_group_without_an_upstream_call() {
    let r = rig().await;
    let (u1, u2, u3) = (
        r.enrol("u1").await,
        r.enrol("u2").await,
        r.enrol("u3").await,
    );
    let first = r.requested(&u1, "G-1").await;
    let second = r.requested(&u2, "G-1").await;
    let other_seat = r.requested(&u3, "G-2").await;
    let intents = Arc::new(Targeted {
        plain: r.plain.clone(),
        faulty: r.faulty.clone(),
        targets: BTreeSet::from([first.intent_id.clone()]),
    });
    r.faulty
        .fail_next(StoreOp::Transition, StoreError::Throttled, 1000);
    let batch = [message(&first), message(&second), message(&other_seat)];
    let failed: BTreeSet<String> = r
        .worker(intents, r.upstream.clone())
        .handle_batch(&batch)
        .await
        .into_iter()
        .collect();
    assert_eq!(
        failed,
        BTreeSet::from([batch[0].message_id.clone(), batch[1].message_id.clone()]),
        "the failed message and the rest of its group, nothing of the other group"
    );
    assert_eq!(
        r.faulty.calls(StoreOp::Transition),
        ATTEMPTS,
        "the first claim, retried"
    );
    assert_eq!(
        r.intent(&first.intent_id).await.status,
        IntentStatus::Requested
    );
    assert_eq!(
        r.intent(&second.intent_id).await.status,
        IntentStatus::Requested
    );
    assert_eq!(
        r.sim.occupant("G-1"),
        None,
        "no upstream call for the failed group"
    );
    assert_eq!(
        r.intent(&other_seat.intent_id).await.status,
        IntentStatus::Succeeded
    );
    assert_eq!(r.sim.stats().get(POSTS), 1, "only the other seat's");
    r.finish().await;
}

#[tokio::test]
async fn a_claim_whose_answer_is_lost_is_not_retried_and_never_reaches_the_upstream() {
    let r = rig().await;
    let user = r.enrol("u1").await;
    let intent = r.requested(&user, "T-1").await;
    r.faulty.fail_after_next(
        StoreOp::Transition,
        StoreError::Unavailable("UpdateItem: timed out".into()),
        1,
    );
    let batch = [message(&intent)];
    let worker = r.worker(r.faulty.clone(), r.upstream.clone());
    assert_eq!(
        worker.handle_batch(&batch).await,
        vec![batch[0].message_id.clone()]
    );
    assert_eq!(
        r.faulty.calls(StoreOp::Transition),
        1,
        "Unavailable is never retried"
    );
    // The claim did land: the lease now decides, not a second claim.
    assert_eq!(
        r.intent(&intent.intent_id).await.status,
        IntentStatus::Reserving
    );
    assert_eq!(r.sim.stats().get(POSTS), 0);
    r.finish().await;
}

// ---------------------------------------------------------------------------------------------
// Reaper
// ---------------------------------------------------------------------------------------------

/// An intent whose worker claimed it, reserved upstream and died.
async fn expired_lease(r: &Rig) -> Intent {
    let user = r.enrol("u1").await;
    let intent = r.requested(&user, "L-1").await;
    let now = r.clock.now();
    let lease_until = now.plus(r.timing.lease());
    r.plain
        .transition(&TransitionRequest {
            intent_id: intent.intent_id.clone(),
            seat_id: Some(intent.seat_id.clone()),
            now,
            transition: seatgate::domain::Transition::Claim {
                lease_until,
                due_at: lease_until.plus(r.timing.reaper_grace),
            },
        })
        .await
        .unwrap();
    let reserved = r
        .upstream
        .reserve(&Secret::new("cred-u1"), &intent.seat_id)
        .await;
    assert!(matches!(reserved, ReserveOutcome::Reserved(_)));
    r.clock
        .advance(r.timing.lease() + r.timing.reaper_grace + Duration::from_secs(1));
    intent
}

#[tokio::test]
async fn the_reaper_retries_a_throttled_query_that_clears() {
    let r = rig().await;
    let intent = expired_lease(&r).await;
    r.faulty.fail_next(
        StoreOp::DueIntents,
        StoreError::Throttled,
        (ATTEMPTS - 1) as u32,
    );
    let report = r.reaper().run_once(100).await.unwrap();
    assert_eq!(report.settled_succeeded, 1, "{report:?}");
    assert_eq!(r.faulty.calls(StoreOp::DueIntents), ATTEMPTS);
    assert_eq!(
        r.intent(&intent.intent_id).await.status,
        IntentStatus::Succeeded
    );
    r.finish().await;
}

#[tokio::test]
async fn a_reaper_pass_whose_query_stays_throttled_fails_and_writes_nothing() {
    let r = rig().await;
    let intent = expired_lease(&r).await;
    let writes_before = r.plain.write_requests();
    r.faulty
        .fail_next(StoreOp::DueIntents, StoreError::Throttled, 1000);

    let result = r.reaper().run_once(100).await;
    assert_eq!(
        result,
        Err(StoreError::Throttled),
        "the error reaches the function"
    );
    assert_eq!(r.faulty.calls(StoreOp::DueIntents), ATTEMPTS);
    assert_eq!(
        r.sent("Query"),
        0,
        "refused before DynamoDB, as throttling is"
    );
    assert_eq!(r.plain.write_requests(), writes_before, "nothing written");
    assert_eq!(r.faulty.calls(StoreOp::Transition), 0);
    assert_eq!(r.sim.stats().get(CHARGE_READS), 0);
    assert_eq!(
        r.intent(&intent.intent_id).await.status,
        IntentStatus::Reserving
    );

    // The next tick, with the store back, settles it.
    r.faulty.heal();
    let report = r.reaper().run_once(100).await.unwrap();
    assert_eq!(report.settled_succeeded, 1, "{report:?}");
    r.finish().await;
}

/// Issue 7 on DynamoDB Local: a lost response holds the seat; later confirms of that seat,
/// in batches of their own, are handed back (not claimed, no upstream call) while the charge
/// endpoint is down, across several reaper passes; once it reads again, one settlement frees
/// the seat and the rest close as lost races. Exactly one reserve throughout.
#[tokio::test]
async fn a_lost_response_holds_the_seat_on_dynamodb_until_the_charge_read_settles_it() {
    let r = rig().await;
    let seat = SeatId::parse("DH-1").unwrap();
    let (u1, u2, u3) = (
        r.enrol("dh1").await,
        r.enrol("dh2").await,
        r.enrol("dh3").await,
    );
    r.sim.set_faults(Faults {
        drop_response_after_commit: 1,
        ..Faults::default()
    });
    let first = r.requested(&u1, "DH-1").await;
    let worker = r.worker(r.plain.clone(), r.upstream.clone());
    assert!(worker.handle_batch(&[message(&first)]).await.is_empty());
    assert_eq!(
        r.intent(&first.intent_id).await.status,
        IntentStatus::Reserving
    );
    let hold = r.plain.hold(&seat).await.unwrap().expect("held");
    assert_eq!(hold.intent_id, first.intent_id);
    r.sim.set_faults(Faults {
        outage_for_ms: 120_000,
        routes: Some(vec![CHARGE_READS.into()]),
        ..Faults::default()
    });
    let later = [
        r.requested(&u2, "DH-1").await,
        r.requested(&u3, "DH-1").await,
    ];
    let reaper = r.reaper();
    for round in 0..3 {
        // Each later confirm arrives in a batch of its own, every round (redeliveries).
        for intent in &later {
            let failed = worker.handle_batch(&[message(intent)]).await;
            assert_eq!(
                failed,
                vec![message(intent).message_id],
                "round {round}: handed back"
            );
            assert_eq!(
                r.intent(&intent.intent_id).await.status,
                IntentStatus::Requested
            );
        }
        r.clock
            .advance(r.timing.lease() + r.timing.reaper_grace + r.timing.settle_retry_max);
        let report = reaper.run_once(100).await.unwrap();
        assert_eq!(report.postponed, 1, "round {round}: {report:?}");
        assert_eq!(
            r.sim.stats().get(POSTS),
            1,
            "round {round}: one reserve while unsettled"
        );
    }
    r.sim.set_faults(Faults::default());
    r.clock.advance(r.timing.settle_retry_max);
    let report = reaper.run_once(100).await.unwrap();
    assert_eq!(report.settled_succeeded, 1, "{report:?}");
    assert_eq!(r.plain.hold(&seat).await.unwrap(), None, "released");
    let failed = worker
        .handle_batch(&[message(&later[0]), message(&later[1])])
        .await;
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(
        r.intent(&first.intent_id).await.status,
        IntentStatus::Succeeded
    );
    for intent in &later {
        assert_eq!(
            r.intent(&intent.intent_id).await.status,
            IntentStatus::FailedRace
        );
    }
    assert_eq!(r.sim.stats().get(POSTS), 1);
    r.finish().await;
}

/// A settlement whose first try committed and whose answer was lost, sent again by the SDK's
/// retry, on DynamoDB Local: the refusal shows the write's own result (same version and
/// fencing token), which the reaper takes as its success.
#[tokio::test]
async fn a_committed_then_retried_settlement_is_recognised_on_dynamodb() {
    let r = rig().await;
    let u = r.enrol("dr1").await;
    r.sim.set_faults(Faults {
        drop_response_after_commit: 1,
        ..Faults::default()
    });
    let intent = r.requested(&u, "DR-1").await;
    let worker = r.worker(r.plain.clone(), r.upstream.clone());
    assert!(worker.handle_batch(&[message(&intent)]).await.is_empty());
    r.clock
        .advance(r.timing.lease() + r.timing.reaper_grace + Duration::from_secs(1));
    r.faulty.replay_next(StoreOp::Transition, 1);
    let report = r.reaper().run_once(100).await.unwrap();
    assert_eq!(r.faulty.injected(), 1);
    assert_eq!(report.settled_succeeded, 1, "{report:?}");
    let done = r.intent(&intent.intent_id).await;
    assert_eq!(done.status, IntentStatus::Succeeded);
    assert_eq!(done.fencing_token, 1);
    r.finish().await;
}

/// On DynamoDB Local: a user who already holds a charge confirms, and waits on, another seat.
/// Both end FAILED_UPSTREAM `already_charged`, no suppression or hold is left on that seat, and
/// the next user gets it with one write.
#[tokio::test]
async fn already_charged_ends_that_users_intents_and_leaves_the_seat_open_on_dynamodb() {
    let r = rig().await;
    let (u1, u2) = (r.enrol("dc1").await, r.enrol("dc2").await);
    let worker = r.worker(r.plain.clone(), r.upstream.clone());
    let held = r.requested(&u1, "DC-1").await;
    assert!(worker.handle_batch(&[message(&held)]).await.is_empty());
    assert_eq!(
        r.intent(&held.intent_id).await.status,
        IntentStatus::Succeeded
    );

    let again = r.requested(&u1, "DC-2").await;
    let api = r.plain_api();
    let until = r.clock.now().plus(Duration::from_secs(600));
    let wait = api
        .register_wait(&u1, SeatId::parse("DC-2").unwrap(), until)
        .await
        .unwrap();
    assert!(
        worker
            .handle_batch(&[message(&again), message(&wait)])
            .await
            .is_empty()
    );
    for id in [&again.intent_id, &wait.intent_id] {
        let i = r.intent(id).await;
        assert_eq!(
            (i.status, i.reason.map(String::from).as_deref()),
            (IntentStatus::FailedUpstream, Some("already_charged")),
            "{i:?}"
        );
    }
    let seat = SeatId::parse("DC-2").unwrap();
    assert_eq!(
        r.plain.suppression(&seat, r.clock.now()).await.unwrap(),
        None
    );
    assert_eq!(r.plain.hold(&seat).await.unwrap(), None);
    let posts = r.sim.stats().get(POSTS);
    let other = r.requested(&u2, "DC-2").await;
    assert!(worker.handle_batch(&[message(&other)]).await.is_empty());
    assert_eq!(
        r.intent(&other.intent_id).await.status,
        IntentStatus::Succeeded
    );
    assert_eq!(r.sim.stats().get(POSTS), posts + 1);
    r.finish().await;
}

/// On DynamoDB Local: a 429 storm fails no one. Each attempt goes back in line not before the
/// upstream's Retry-After, releasing the seat's hold, and the reaper puts it back on the queue
/// once that time has come; when the upstream relents, it succeeds.
#[tokio::test]
async fn a_429_storm_fails_no_one_on_dynamodb() {
    let r = rig().await;
    let u = r.enrol("dz1").await;
    r.sim.set_faults(Faults {
        rate_limited_for_ms: 60_000,
        retry_after_secs: 7,
        routes: Some(vec![POSTS.into()]),
        ..Faults::default()
    });
    let worker = r.worker(r.plain.clone(), r.upstream.clone());
    let intent = r.requested(&u, "DZ-1").await;
    let before = r.clock.now();
    assert!(worker.handle_batch(&[message(&intent)]).await.is_empty());
    let back = r.intent(&intent.intent_id).await;
    assert_eq!(
        (back.status, back.reason.map(String::from).as_deref()),
        (IntentStatus::Requested, Some("upstream_busy"))
    );
    let retry_at = back.next_attempt_at.expect("a retry time");
    assert!(
        retry_at >= before.plus(Duration::from_secs(7)),
        "at least Retry-After"
    );
    assert_eq!(
        r.plain.hold(&SeatId::parse("DZ-1").unwrap()).await.unwrap(),
        None
    );
    // Not claimable before its time.
    let early = QueueRecord {
        message_id: "m-early".into(),
        group_id: "DZ-1".into(),
        body: serde_json::to_string(&SeatMessage::for_intent(&back)).unwrap(),
        receipt: String::new(),
    };
    assert!(worker.handle_batch(&[early]).await.is_empty());
    assert_eq!(
        r.sim.stats().get(POSTS),
        1,
        "nothing sent before Retry-After"
    );

    r.sim.set_faults(Faults::default());
    r.clock.advance(Duration::from_secs(7));
    let report = r.reaper().run_once(100).await.unwrap();
    assert_eq!(report.woken, 1, "{report:?}");
    let woken = r.intent(&intent.intent_id).await;
    assert!(worker.handle_batch(&[message(&woken)]).await.is_empty());
    assert_eq!(
        r.intent(&intent.intent_id).await.status,
        IntentStatus::Succeeded
    );
    assert_eq!(r.sim.stats().get(POSTS), 2);
    r.finish().await;
}
