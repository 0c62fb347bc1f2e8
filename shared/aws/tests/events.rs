//! The event fixtures in `tests/events/` (what `cargo lambda invoke --data-file` sends to each
//! function, see `docs/lambda-invoke.md`) still fit the code: each is deserialized into the type
//! its function's `main.rs` takes and run through that function's handler, on the embedded
//! backend and the in-process upstream simulator (no emulators needed).

use aws_lambda_events::event::dynamodb::Event as DynamoDbEvent;
use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::Body;
use seatgate::adapters::upstream_http::HttpUpstream;
use seatgate::config::Timing;
use seatgate::domain::{
    Action, ActionId, ActionKind, ActionStatus, Intent, IntentId, IntentStatus, Millis, Reason,
    SeatId, SeatMessage, Terminal, Transition, TransitionRequest, UserId,
};
use seatgate::handlers::{http, queue, schedule, stream};
use seatgate::ports::{Actions, Clock, Confirmation, Credentials, Intents, QueueConsumer};
use seatgate::service::{ApiService, Ports, Services};
use seatgate_aws::dynamodb::item::intent_to_item;
use seatgate_aws::dynamodb::stream::change_records;
use seatgate_embedded::{EmbeddedBackend, EmbeddedConfig};
use seatgate_testkit::ManualClock;
use seatgate_testkit::setup::{self, POSTS};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use upstream_sim::Simulator;

const API_PREPARE: &str = include_str!("../../../tests/events/api-prepare.json");
const API_CONFIRM: &str = include_str!("../../../tests/events/api-confirm.json");
const WORKER_SQS: &str = include_str!("../../../tests/events/worker-sqs-fifo.json");
const RELAY_STREAM: &str = include_str!("../../../tests/events/relay-dynamodb-stream.json");
const REAPER_SCHEDULE: &str = include_str!("../../../tests/events/reaper-schedule.json");

/// The ids the fixtures use.
const ACTION: &str = "019a4f2e-3b00-7c10-9d2e-5f6a7b8c9d01";
const INTENT_1: &str = "019a4f2e-3c5d-7e10-8a2b-4c6d8e0f1a21";
const INTENT_2: &str = "019a4f2e-3c5d-7e10-8a2b-4c6d8e0f1a22";

struct Local {
    backend: Arc<EmbeddedBackend>,
    clock: Arc<ManualClock>,
    timing: Timing,
    sim: Simulator,
    upstream: Arc<HttpUpstream>,
}

async fn local() -> Local {
    let timing = Timing::fast();
    // The fixtures' own time, so their timestamps are "now".
    let clock = Arc::new(ManualClock::new(Millis(1_764_534_000_000)));
    let backend =
        EmbeddedBackend::open_in_memory(clock.clone(), EmbeddedConfig::for_timing(&timing))
            .unwrap();
    let setup::Upstream {
        sim,
        http: upstream,
        ..
    } = setup::upstream(&timing).await;
    Local {
        backend: Arc::new(backend),
        clock,
        timing,
        sim,
        upstream,
    }
}

impl Local {
    fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    fn services(&self) -> Services {
        Services::new(
            Ports::from_store(self.backend.clone(), self.upstream.clone(), self.clock()),
            self.timing.clone(),
        )
    }

    fn api(&self) -> ApiService {
        self.services().api()
    }

    /// A prepared action with a chosen id, as `POST /actions` would have written it.
    async fn seed_action(&self, id: &str, user: &str, seat: &str) -> Action {
        let now = self.clock.now();
        let action = Action {
            action_id: ActionId::parse(id).unwrap(),
            user_id: UserId::parse(user).unwrap(),
            kind: ActionKind::ReserveSeat,
            seat_id: SeatId::parse(seat).unwrap(),
            status: ActionStatus::Prepared,
            intent_id: None,
            created_at: now,
            expires_at: now.plus(self.timing.action_ttl),
        };
        self.backend.put_action(&action).await.unwrap();
        action
    }

    /// A REQUESTED intent with a chosen id, written by the one confirm transaction.
    async fn seed_intent(&self, intent_id: &str, user: &str, seat: &str) {
        let action = self
            .seed_action(&ActionId::generate().to_string(), user, seat)
            .await;
        let now = self.clock.now();
        let confirmation = Confirmation::of(
            &action,
            IntentId::parse(intent_id).unwrap(),
            &action.user_id,
            now,
            now.plus(self.timing.requeue_after),
        );
        self.backend.confirm(&confirmation).await.unwrap();
    }

    async fn enrol(&self, user: &str) {
        let credential = format!("cred-{user}");
        self.sim.register_user(user, &credential);
        self.backend
            .put_credential(
                &UserId::parse(user).unwrap(),
                &seatgate::domain::Secret::new(credential),
            )
            .await
            .unwrap();
    }

    async fn intent(&self, id: &str) -> Intent {
        self.backend
            .get_intent(&IntentId::parse(id).unwrap())
            .await
            .unwrap()
            .unwrap()
    }
}

fn body_json(response: &lambda_http::Response<Body>) -> Value {
    match response.body() {
        Body::Text(t) => serde_json::from_str(t).unwrap(),
        Body::Binary(b) => serde_json::from_slice(b).unwrap(),
        _ => Value::Null,
    }
}

// ---------------------------------------------------------------------------------------------
// api
// ---------------------------------------------------------------------------------------------

#[test]
fn api_fixtures_are_http_api_v2_requests_with_jwt_claims() {
    for (name, fixture) in [("api-prepare", API_PREPARE), ("api-confirm", API_CONFIRM)] {
        let request = lambda_http::request::from_str(fixture)
            .unwrap_or_else(|e| panic!("{name}: not an API Gateway request: {e}"));
        let caller = http::caller(&request).unwrap_or_else(|| panic!("{name}: no sub claim"));
        assert_eq!(caller.user_id.as_str(), "u1", "{name}");
        assert!(!caller.admin);
        let raw: Value = serde_json::from_str(fixture).unwrap();
        assert_eq!(raw["version"], "2.0", "{name}: payload format 2.0");
        assert_eq!(raw["routeKey"], raw["requestContext"]["routeKey"], "{name}");
        assert_eq!(
            raw["rawPath"], raw["requestContext"]["http"]["path"],
            "{name}"
        );
        assert_eq!(
            request.uri().path(),
            raw["rawPath"].as_str().unwrap(),
            "{name}"
        );
        let declared = raw["headers"]["content-length"].as_str().unwrap();
        let body_len = raw["body"].as_str().map_or(0, str::len);
        assert_eq!(declared, body_len.to_string(), "{name}: content-length");
    }
}

#[tokio::test]
async fn the_api_fixtures_prepare_and_confirm_through_the_handler() {
    let l = local().await;
    let api = l.api();

    let prepared = http::handle(&api, lambda_http::request::from_str(API_PREPARE).unwrap()).await;
    assert_eq!(prepared.status(), 201, "{:?}", body_json(&prepared));
    let body = body_json(&prepared);
    assert_eq!(body["seat_id"], "A-12");
    assert_eq!(body["kind"], "reserve_seat");

    // The confirm fixture names a fixed action: unknown here, so the route and the caller were
    // understood and the store said no.
    let missing = http::handle(&api, lambda_http::request::from_str(API_CONFIRM).unwrap()).await;
    assert_eq!(missing.status(), 404);
    assert_eq!(body_json(&missing)["error"], "not_found");

    // Once that action exists (u1's, prepared), the same fixture confirms it; again -> 200.
    l.seed_action(ACTION, "u1", "A-12").await;
    let confirmed = http::handle(&api, lambda_http::request::from_str(API_CONFIRM).unwrap()).await;
    assert_eq!(confirmed.status(), 202, "{:?}", body_json(&confirmed));
    let intent = body_json(&confirmed);
    assert_eq!(intent["status"], "REQUESTED");
    let again = http::handle(&api, lambda_http::request::from_str(API_CONFIRM).unwrap()).await;
    assert_eq!(again.status(), 200);
    assert_eq!(body_json(&again)["intent_id"], intent["intent_id"]);
}

// ---------------------------------------------------------------------------------------------
// worker
// ---------------------------------------------------------------------------------------------

#[test]
fn the_worker_fixture_is_an_sqs_fifo_batch_of_seat_messages() {
    let event: SqsEvent = serde_json::from_str(WORKER_SQS).unwrap();
    let records = queue::records(&event);
    assert_eq!(records.len(), 2);
    for (record, sqs) in records.iter().zip(&event.records) {
        let message: SeatMessage = serde_json::from_str(&record.body).unwrap();
        assert_eq!(
            record.group_id,
            message.group_id(),
            "MessageGroupId = seat id"
        );
        assert_eq!(
            sqs.attributes["MessageDeduplicationId"],
            message.dedup_id(),
            "MessageDeduplicationId = intent id + version, as the relay sends it"
        );
        assert_eq!(record.message_id, sqs.message_id.clone().unwrap());
        assert_eq!(sqs.attributes["ApproximateReceiveCount"], "1");
        assert!(
            sqs.event_source_arn.as_deref().unwrap().ends_with(".fifo"),
            "a FIFO queue"
        );
    }
    let ids: Vec<String> = records
        .iter()
        .map(|r| {
            serde_json::from_str::<SeatMessage>(&r.body)
                .unwrap()
                .intent_id
                .to_string()
        })
        .collect();
    assert_eq!(ids, [INTENT_1, INTENT_2]);
}

#[tokio::test]
async fn the_worker_fixture_reserves_the_seat_once() {
    let l = local().await;
    l.enrol("u1").await;
    l.enrol("u2").await;
    l.seed_intent(INTENT_1, "u1", "A-12").await;
    l.seed_intent(INTENT_2, "u2", "A-12").await;
    let worker = l.services().worker();
    let event: SqsEvent = serde_json::from_str(WORKER_SQS).unwrap();
    let response = queue::handle(&worker, event).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(l.intent(INTENT_1).await.status, IntentStatus::Succeeded);
    assert_eq!(l.intent(INTENT_2).await.status, IntentStatus::FailedRace);
    assert_eq!(l.sim.stats().get(POSTS), 1);
}

// ---------------------------------------------------------------------------------------------
// relay
// ---------------------------------------------------------------------------------------------

/// A DynamoDB-JSON image (`{"attr": {"S": ..}}`) as the SDK's item map.
fn item(image: &Value) -> HashMap<String, AttributeValue> {
    image
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let value = match (v.get("S"), v.get("N")) {
                (Some(s), _) => AttributeValue::S(s.as_str().unwrap().to_owned()),
                (_, Some(n)) => AttributeValue::N(n.as_str().unwrap().to_owned()),
                _ => panic!("fixture attribute {k} is neither S nor N"),
            };
            (k.clone(), value)
        })
        .collect()
}

#[test]
fn the_stream_fixture_decodes_to_the_intent_changes_the_adapter_writes() {
    let event: DynamoDbEvent = serde_json::from_str(RELAY_STREAM).unwrap();
    let raw: Value = serde_json::from_str(RELAY_STREAM).unwrap();
    let records = change_records(&event);
    assert_eq!(records.len(), 4);
    for r in &raw["Records"].as_array().unwrap()[..] {
        assert_eq!(r["dynamodb"]["StreamViewType"], "NEW_AND_OLD_IMAGES");
    }

    // INSERT: the confirm's intent.
    let intent = |i: usize| {
        records[i]
            .change
            .clone()
            .unwrap()
            .unwrap()
            .into_intent()
            .expect("an intent's record")
    };
    let inserted = intent(0);
    assert!(inserted.old.is_none());
    let requested = inserted.new.unwrap();
    assert_eq!(requested.status, IntentStatus::Requested);
    assert_eq!(requested.intent_id.as_str(), INTENT_1);
    // Same transaction, not an intent: the relay ignores it (the mapping's filter drops it on AWS).
    assert_eq!(records[1].change, Ok(None), "the consent record");

    // MODIFY: the worker's claim, exactly as Intent::apply says.
    let claim = intent(2);
    let reserving = claim.new.unwrap();
    assert_eq!(claim.old.as_ref(), Some(&requested));
    let t = Timing::aws();
    let now = reserving.updated_at;
    let lease_until = now.plus(t.lease());
    let expected = requested
        .apply(&TransitionRequest {
            seen: None,
            reading: None,
            intent_id: requested.intent_id.clone(),
            seat_id: Some(requested.seat_id.clone()),
            now,
            transition: Transition::Claim {
                lease_until,
                due_at: lease_until.plus(t.reaper_grace),
            },
        })
        .unwrap();
    assert_eq!(reserving, expected);

    // MODIFY: the fenced terminal write.
    let settle = intent(3);
    assert_eq!(settle.old.as_ref(), Some(&reserving));
    let succeeded = settle.new.unwrap();
    let expected = reserving
        .apply(&TransitionRequest {
            seen: None,
            reading: None,
            intent_id: reserving.intent_id.clone(),
            seat_id: Some(reserving.seat_id.clone()),
            now: succeeded.updated_at,
            transition: Transition::Complete {
                token: reserving.fencing_token,
                status: Terminal::Succeeded,
                charge_id: succeeded.charge_id.clone(),
                reason: Reason::Reserved,
                suppress: None,
            },
        })
        .unwrap();
    assert_eq!(succeeded, expected);

    // Every intent image is attribute for attribute what the adapter writes for that state.
    let intents = [(0, &requested), (2, &reserving), (3, &succeeded)];
    for (i, intent) in intents {
        assert_eq!(
            item(&raw["Records"][i]["dynamodb"]["NewImage"]),
            intent_to_item(intent),
            "record {i}"
        );
    }
}

#[tokio::test]
async fn the_stream_fixture_enqueues_the_requested_intent() {
    let l = local().await;
    let relay = l
        .services()
        .relay(l.backend.clone(), Arc::new(l.backend.events()));
    let event: DynamoDbEvent = serde_json::from_str(RELAY_STREAM).unwrap();
    let response = stream::handle_dynamodb_event(&relay, change_records(&event)).await;
    assert!(response.batch_item_failures.is_empty());
    let queued = l.backend.receive(10).await.unwrap();
    assert_eq!(
        queued.len(),
        1,
        "only the REQUESTED insert goes to the seat queue"
    );
    assert_eq!(queued[0].group_id, "A-12");
    let message: SeatMessage = serde_json::from_str(&queued[0].body).unwrap();
    assert_eq!((message.intent_id.as_str(), message.version), (INTENT_1, 1));
}

// ---------------------------------------------------------------------------------------------
// reaper
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn the_schedule_fixture_runs_one_reaper_pass() {
    let event: EventBridgeEvent<Value> = serde_json::from_str(REAPER_SCHEDULE).unwrap();
    assert_eq!(event.detail_type, "Scheduled Event");
    assert_eq!(event.source, "aws.scheduler");
    // What the reaper's main takes: any JSON (it works from "now", not from the event).
    let _: Value = serde_json::from_str(REAPER_SCHEDULE).unwrap();

    let l = local().await;
    l.enrol("u1").await;
    l.seed_intent(INTENT_1, "u1", "A-12").await;
    let reaper = l.services().reaper();
    let report = schedule::handle(&reaper).await.unwrap();
    assert_eq!(report.examined, 0, "nothing is due yet");
    l.clock
        .advance(l.timing.requeue_after + Duration::from_millis(1));
    let report = schedule::handle(&reaper).await.unwrap();
    assert_eq!(
        report.requeued, 1,
        "a REQUESTED intent without progress is requeued"
    );
    assert_eq!(l.intent(INTENT_1).await.requeues, 1);
}
