//! IAM, what each function uses, recorded: each function's service runs its real flows against
//! DynamoDB Local and moto through recorded clients (API routes, admin routes, the flash sale, a
//! worker batch, a reaper pass, a relayed stream event), and each role must grant exactly what its
//! function used plus the allow-list (`granted == used ∪ allow-list`); the credentials key's
//! policy must grant each role exactly the KMS actions its code sends.
//!
//! Needs the emulators: `eval "$(scripts/emulators.sh start)"`. Without them it fails saying so;
//! it is never skipped.

use super::common::{FUNCTIONS, props};
use super::iam_grants::{Grants, allow_list, reaper_function_arn, role_grants};
use super::iam_recorder::{Recorder, emulators, recorded_store};
use seatgate::adapters::upstream_http::HttpUpstream;
use seatgate::config::Timing;
use seatgate::domain::{
    ActionKind, Intent, IntentId, IntentStatus, Millis, SeatId, SeatMessage, Secret, Transition,
    TransitionRequest, UserId,
};
use seatgate::handlers::stream::handle_dynamodb_event;
use seatgate::ports::{Clock, Intents, QueueConsumer, Upstream};
use seatgate::service::{ApiService, Ports, QueueRecord, Reaper, Relay, Services, Worker};
use seatgate_aws::dynamodb::stream::change_records;
use seatgate_aws::dynamodb::{DynamoStore, create_table, delete_table};
use seatgate_aws::sqs::{QueueDefinition, SqsSeatQueue, create_queues, delete_queue};
use seatgate_testkit::ManualClock;
use seatgate_testkit::setup::{self, POSTS};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use upstream_sim::Simulator;

/// What every function's flows share: a clock, the simulator, an unrecorded store for setting
/// up state, and a way to build services.
struct World {
    sdk: aws_config::SdkConfig,
    table: String,
    timing: Timing,
    clock: Arc<ManualClock>,
    sim: Simulator,
    upstream: Arc<HttpUpstream>,
    setup: Arc<DynamoStore>,
    /// The KMS key standing for the template's `CredentialsKey`.
    key_id: String,
}

impl World {
    async fn new(sdk: &aws_config::SdkConfig) -> World {
        let table = setup::unique("seatgate-iam-");
        let client = aws_sdk_dynamodb::Client::new(sdk);
        create_table(&client, &table).await.expect("create_table");
        let timing = Timing::aws();
        let setup::Upstream {
            sim,
            http: upstream,
            ..
        } = setup::upstream(&timing).await;
        let key = setup::credentials_key().await;
        World {
            sdk: sdk.clone(),
            key_id: key.key_id().to_owned(),
            setup: Arc::new(DynamoStore::new(&client, &table).with_credentials_key(key)),
            table,
            timing,
            clock: Arc::new(ManualClock::new(Millis::now())),
            sim,
            upstream,
        }
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    fn services(&self, store: &Arc<DynamoStore>) -> Services {
        Services::new(
            Ports::from_store(store.clone(), self.upstream.clone(), self.clock()),
            self.timing.clone(),
        )
    }

    fn api(&self, store: &Arc<DynamoStore>) -> ApiService {
        self.services(store).api()
    }

    fn worker(&self, store: &Arc<DynamoStore>) -> Worker {
        self.services(store).worker()
    }

    fn reaper(&self, store: &Arc<DynamoStore>) -> Reaper {
        self.services(store).reaper()
    }

    /// A user the upstream knows, with the credential stored in seatgate.
    async fn enrol(&self, name: &str) -> UserId {
        let user = UserId::parse(name).unwrap();
        let credential = format!("cred-{name}");
        self.sim.register_user(name, &credential);
        self.api(&self.setup)
            .put_credential(&user, &credential)
            .await
            .unwrap();
        user
    }

    async fn confirmed(&self, user: &UserId, seat: &str) -> Intent {
        let api = self.api(&self.setup);
        let action = api
            .prepare(user, ActionKind::ReserveSeat, SeatId::parse(seat).unwrap())
            .await
            .unwrap();
        api.confirm(user, &action.action_id).await.unwrap().intent
    }

    async fn status(&self, id: &IntentId) -> Intent {
        self.setup.get_intent(id).await.unwrap().unwrap()
    }

    async fn drop_table(&self) {
        let _ = delete_table(&aws_sdk_dynamodb::Client::new(&self.sdk), &self.table).await;
    }
}

fn message(intent: &Intent) -> QueueRecord {
    QueueRecord {
        message_id: format!("m-{}", intent.intent_id),
        group_id: intent.seat_id.to_string(),
        body: serde_json::to_string(&SeatMessage::for_intent(intent)).unwrap(),
        receipt: String::new(),
    }
}

/// One function's recorded requests: the recorder, the store's own request counts, the test's
/// table and credentials key, and the names standing for template resources (see
/// [`Recorder::grants`]).
type Recorded = (
    Recorder,
    BTreeMap<String, u64>,
    String,
    String,
    BTreeMap<String, String>,
);

/// What the API function's code does to the table: every route's flow.
async fn record_api(sdk: &aws_config::SdkConfig) -> Recorded {
    let w = World::new(sdk).await;
    let (store, recorder) = recorded_store(&w.sdk, &w.table, &w.key_id);
    let api = w.api(&store);
    let u = UserId::parse("api-user").unwrap();
    api.put_credential(&u, "cred-api").await.unwrap();
    let action = api
        .prepare(&u, ActionKind::ReserveSeat, SeatId::parse("A-1").unwrap())
        .await
        .unwrap();
    let first = api.confirm(&u, &action.action_id).await.unwrap();
    assert!(first.created);
    let again = api.confirm(&u, &action.action_id).await.unwrap();
    assert!(!again.created);
    assert_eq!(again.intent.intent_id, first.intent.intent_id);
    let until = w.clock.now().plus(Duration::from_secs(3600));
    let wait = api
        .register_wait(&u, SeatId::parse("A-2").unwrap(), until)
        .await
        .unwrap();
    let read = api.intent(&u, &first.intent.intent_id).await.unwrap();
    assert_eq!(read.status, IntentStatus::Requested);
    let cancelled = api.cancel_wait(&u, &wait.intent_id).await.unwrap();
    assert_eq!(cancelled.status, IntentStatus::Cancelled);
    // Seat and room reads: the shared reading (GetItem), its refresh lease and record
    // (UpdateItem), the breaker (GetItem), and a room's seat readings (BatchGetItem).
    let seat = api.seat(&SeatId::parse("A-3").unwrap()).await.unwrap();
    assert_eq!(seat.reading.seat_available(), Some(true));
    w.sim.put_room("ROOM-1", &["A-3", "A-4"]);
    let room = api
        .room(&seatgate::domain::RoomId::parse("ROOM-1").unwrap())
        .await
        .unwrap();
    assert!(!room.stale);
    record_flights(&w, &store).await;
    let names = record_admin(&w, &store, &recorder).await;
    let counts = store.requests().by_operation;
    w.drop_table().await;
    (recorder, counts, w.table.clone(), w.key_id.clone(), names)
}

/// The admin routes' flows through the API function's wiring: a seat's state with the queues'
/// depths, a redrive of dead letters in both dead-letter queues, and a reconcile, which invokes
/// the reaper function (the Lambda `Invoke` API on loopback, running the reaper's real pass on
/// an unrecorded store: those requests are the reaper's, not the API's). Returns the queue URLs
/// and the function name, mapped to the template resources they stand for.
async fn record_admin(
    w: &World,
    store: &Arc<DynamoStore>,
    recorder: &Recorder,
) -> BTreeMap<String, String> {
    use seatgate_aws::events::{EventQueueDefinition, create_event_queues};
    use seatgate_aws::queue_admin::{QueuePair, SqsQueueAdmin};
    use seatgate_aws::reaper_pass::LambdaReaper;
    use seatgate_testkit::lambda::{FakeLambda, Handler};

    let plain = aws_sdk_sqs::Client::new(&w.sdk);
    let (seat_url, seat_dlq) = create_queues(
        &plain,
        &setup::unique("seatgate-iam-"),
        &QueueDefinition::for_timing(&w.timing),
    )
    .await
    .expect("create_queues");
    let (events_url, events_dlq) = create_event_queues(
        &plain,
        &setup::unique("seatgate-iam-events-"),
        &EventQueueDefinition::default(),
    )
    .await
    .expect("create_event_queues");
    for (url, group) in [(&seat_dlq, Some("A-1")), (&events_dlq, None)] {
        plain
            .send_message()
            .queue_url(url)
            .message_body("{}")
            .set_message_group_id(group.map(str::to_owned))
            .set_message_deduplication_id(group.map(|_| "d-1".to_owned()))
            .send()
            .await
            .unwrap();
    }

    let reaper = Arc::new(w.reaper(&w.setup));
    let handler: Handler = Arc::new(move |_payload| {
        let reaper = reaper.clone();
        Box::pin(async move {
            let report = seatgate::handlers::schedule::handle(&reaper)
                .await
                .map_err(|e| e.to_string())?;
            Ok(serde_json::to_value(report).unwrap())
        })
    });
    let function = "seatgate-iam-reaper";
    let lambda = FakeLambda::start(vec![(function, handler)]).await;
    let sqs = aws_sdk_sqs::config::Builder::from(&w.sdk)
        .interceptor(recorder.clone())
        .build();
    let queues = SqsQueueAdmin::new(
        aws_sdk_sqs::Client::from_conf(sqs),
        QueuePair {
            queue_url: seat_url.clone(),
            dead_letter_url: seat_dlq.clone(),
        },
        QueuePair {
            queue_url: events_url.clone(),
            dead_letter_url: events_dlq.clone(),
        },
    );
    let invoker = aws_sdk_lambda::Client::from_conf(
        lambda.config(&w.sdk).interceptor(recorder.clone()).build(),
    );
    let ports = Ports::from_store(store.clone(), w.upstream.clone(), w.clock())
        .with_queue_admin(Arc::new(queues))
        .with_reaper_pass(Arc::new(LambdaReaper::new(invoker, function)));
    let admin = Services::new(ports, w.timing.clone()).api();
    let admin = admin.admin();

    let seat = admin.seat(&SeatId::parse("A-1").unwrap()).await.unwrap();
    assert_eq!(seat.queue.map(|q| q.dead), Some(1));
    let moved = admin.redrive().await.unwrap();
    assert_eq!((moved.seat_messages, moved.webhook_deliveries), (1, 1));
    let report = admin.reconcile().await.unwrap();
    assert_eq!(report.left, 0, "{report:?}");
    assert_eq!(lambda.invocations().len(), 1);

    for url in [&seat_url, &seat_dlq, &events_url, &events_dlq] {
        let _ = delete_queue(&plain, url).await;
    }
    BTreeMap::from([
        (seat_url, "SeatQueue.Arn".to_owned()),
        (seat_dlq, "SeatDeadLetterQueue.Arn".to_owned()),
        (events_url, "EventQueue.Arn".to_owned()),
        (events_dlq, "EventDeadLetterQueue.Arn".to_owned()),
        (function.to_owned(), reaper_function_arn()),
    ])
}

/// The flash sale's flows through the API function's code: a flight created, booked under an
/// idempotency key (its record begun and answered in the booking's transaction), sold out and
/// marked so (condition checks on the shards), a refusal answered under a key, the user's
/// bookings listed, a cancel, and a booking whose store failure releases its key.
async fn record_flights(w: &World, store: &Arc<DynamoStore>) {
    use seatgate::domain::{BookingAnswer, FlightId, IdempotencyKey};
    let flights = w.services(store).flights().clone();
    let u = UserId::parse("flyer").unwrap();
    let id = FlightId::parse(&setup::unique("F-")).unwrap();
    flights.create(id.clone(), 2, Some(2), 1).await.unwrap();
    let key = |k: &str| IdempotencyKey::parse(k).unwrap();
    let BookingAnswer::Booked { booking } =
        flights.book(&u, &id, 2, Some(&key("k1"))).await.unwrap()
    else {
        panic!("booked");
    };
    let other = UserId::parse("late").unwrap();
    assert_eq!(
        flights
            .book(&other, &id, 1, Some(&key("k2")))
            .await
            .unwrap(),
        BookingAnswer::SoldOut
    );
    assert_eq!(flights.bookings_of(&u, None).await.unwrap().items.len(), 1);
    assert_eq!(flights.inventory(&id).await.unwrap().available(), 0);
    flights.cancel(&u, &id, &booking.booking_id).await.unwrap();
    // A checkout hold, and the operator's listing of the flight's holds (the `flight_holds`
    // index).
    let BookingAnswer::Held { hold } = flights.hold(&other, &id, 1, None).await.unwrap() else {
        panic!("held");
    };
    let listed = w
        .services(store)
        .checkout()
        .flight_holds(&id, seatgate::domain::HoldStatus::Held, None)
        .await
        .unwrap();
    assert_eq!(listed.items, vec![*hold]);

    let faulty = Arc::new(seatgate_testkit::FaultyStore::new((**store).clone()));
    faulty.fail_next(
        seatgate_testkit::StoreOp::Book,
        seatgate::ports::StoreError::TransactionConflict,
        10,
    );
    let failing = Services::new(
        Ports::from_store(faulty, w.upstream.clone(), w.clock()),
        w.timing.clone(),
    );
    assert!(
        failing
            .flights()
            .book(&u, &id, 1, Some(&key("k3")))
            .await
            .is_err()
    );
}

/// The worker's code on one batch: a winner that writes a suppression, a raced intent of the
/// same seat, and an intent of a seat suppressed earlier.
async fn record_worker(sdk: &aws_config::SdkConfig) -> Recorded {
    let w = World::new(sdk).await;
    let (winner_user, raced_user, earlier_user, late_user) = (
        w.enrol("w1").await,
        w.enrol("w2").await,
        w.enrol("w3").await,
        w.enrol("w4").await,
    );
    // Seat S-2 was taken a moment ago (an unrecorded worker run): it is suppressed now.
    let earlier = w.confirmed(&earlier_user, "S-2").await;
    assert!(
        w.worker(&w.setup)
            .handle_batch(&[message(&earlier)])
            .await
            .is_empty()
    );
    assert_eq!(
        w.status(&earlier.intent_id).await.status,
        IntentStatus::Succeeded
    );

    let winner = w.confirmed(&winner_user, "S-1").await;
    let raced = w.confirmed(&raced_user, "S-1").await;
    let suppressed = w.confirmed(&late_user, "S-2").await;
    let (store, recorder) = recorded_store(&w.sdk, &w.table, &w.key_id);
    let failed = w
        .worker(&store)
        .handle_batch(&[message(&winner), message(&raced), message(&suppressed)])
        .await;
    assert!(failed.is_empty(), "{failed:?}");
    let winner = w.status(&winner.intent_id).await;
    assert_eq!(winner.status, IntentStatus::Succeeded);
    assert_eq!(
        w.status(&raced.intent_id).await.status,
        IntentStatus::FailedRace
    );
    assert_eq!(
        w.status(&suppressed.intent_id).await.status,
        IntentStatus::FailedRace
    );
    assert_eq!(w.sim.stats().get(POSTS), 2, "one per seat");
    let counts = store.requests().by_operation;
    w.drop_table().await;
    (
        recorder,
        counts,
        w.table.clone(),
        w.key_id.clone(),
        BTreeMap::new(),
    )
}

/// The reaper's code on one pass: an expired lease settled by a charge read, a due wait woken,
/// a REQUESTED intent whose message was lost requeued.
async fn record_reaper(sdk: &aws_config::SdkConfig) -> Recorded {
    let w = World::new(sdk).await;
    let (leased_user, waiting_user, lost_user) = (
        w.enrol("r1").await,
        w.enrol("r2").await,
        w.enrol("r3").await,
    );
    // A worker claimed this one, its reserve landed upstream, then the worker died.
    let leased = w.confirmed(&leased_user, "L-1").await;
    let now = w.clock.now();
    let lease_until = now.plus(w.timing.lease());
    w.setup
        .transition(&TransitionRequest {
            seen: None,
            reading: None,
            intent_id: leased.intent_id.clone(),
            seat_id: Some(leased.seat_id.clone()),
            now,
            transition: Transition::Claim {
                lease_until,
                due_at: lease_until.plus(w.timing.reaper_grace),
            },
        })
        .await
        .unwrap();
    let reserved = w
        .upstream
        .reserve(&Secret::new("cred-r1"), &leased.seat_id)
        .await;
    assert!(matches!(
        reserved,
        seatgate::ports::ReserveOutcome::Reserved(_)
    ));
    let wait = w
        .api(&w.setup)
        .register_wait(
            &waiting_user,
            SeatId::parse("W-1").unwrap(),
            now.plus(Duration::from_secs(7200)),
        )
        .await
        .unwrap();
    let lost = w.confirmed(&lost_user, "Q-1").await;
    // A checkout hold of a flight's one seat, walked away from, with someone waiting behind
    // it: its lapse serves the list (the gate, the inventory, the list's first entries).
    let flight = {
        use seatgate::domain::{BookingAnswer, CheckoutTimes, FlightId};
        let flights = w.services(&w.setup).flights().clone();
        let id = FlightId::parse(&setup::unique("F-")).unwrap();
        let times = CheckoutTimes {
            hold_ttl_secs: 1,
            ..CheckoutTimes::default()
        };
        flights
            .create_with_checkout(id.clone(), 1, None, 1, times)
            .await
            .unwrap();
        let (holder, waiter) = (w.enrol("r4").await, w.enrol("r5").await);
        let held = flights.hold(&holder, &id, 1, None).await.unwrap();
        assert!(matches!(held, BookingAnswer::Held { .. }), "{held:?}");
        w.services(&w.setup)
            .waitlist()
            .join_waitlist(&waiter, &id, 1)
            .await
            .unwrap();
        id
    };
    w.clock
        .advance(w.timing.requeue_after + Duration::from_secs(1));

    let (store, recorder) = recorded_store(&w.sdk, &w.table, &w.key_id);
    let report = w.reaper(&store).run_once(500).await.unwrap();
    assert_eq!(
        (
            report.settled_succeeded,
            report.woken,
            report.requeued,
            report.holds_lapsed
        ),
        (1, 1, 1, 1),
        "{report:?}"
    );
    // The lapsed seat went to the waiter as an offer, not back on sale.
    let inventory = w
        .services(&w.setup)
        .flights()
        .inventory(&flight)
        .await
        .unwrap();
    assert_eq!((inventory.available(), inventory.held()), (0, 1));
    assert_eq!(
        w.status(&leased.intent_id).await.status,
        IntentStatus::Succeeded
    );
    assert_eq!(w.status(&wait.intent_id).await.version, wait.version + 1);
    assert_eq!(w.status(&lost.intent_id).await.requeues, 1);
    assert_eq!(w.sim.stats().get(POSTS), 1, "never re-sent");
    let counts = store.requests().by_operation;
    w.drop_table().await;
    (
        recorder,
        counts,
        w.table.clone(),
        w.key_id.clone(),
        BTreeMap::new(),
    )
}

/// The relay's code on a stream event (the fixture the function is invoked with locally): sends
/// to the seat queue on moto.
async fn record_relay(sdk: &aws_config::SdkConfig) -> (Recorder, String) {
    let plain = aws_sdk_sqs::Client::new(sdk);
    let (queue_url, dlq_url) = create_queues(
        &plain,
        &setup::unique("seatgate-iam-"),
        &QueueDefinition::for_timing(&Timing::aws()),
    )
    .await
    .expect("create_queues");
    let recorder = Recorder::default();
    let config = aws_sdk_sqs::config::Builder::from(sdk)
        .interceptor(recorder.clone())
        .build();
    let queue = SqsSeatQueue::new(aws_sdk_sqs::Client::from_conf(config), &queue_url);
    let relay = Relay::new(
        Arc::new(queue),
        Arc::new(NoEvents),
        Arc::new(ManualClock::new(Millis::now())),
    );
    let event: aws_lambda_events::event::dynamodb::Event = serde_json::from_str(include_str!(
        "../../../../tests/events/relay-dynamodb-stream.json"
    ))
    .unwrap();
    let response = handle_dynamodb_event(&relay, change_records(&event)).await;
    assert!(response.batch_item_failures.is_empty());
    let received = SqsSeatQueue::new(plain.clone(), &queue_url)
        .with_wait(Duration::ZERO)
        .receive(10)
        .await
        .unwrap();
    assert_eq!(
        received.len(),
        1,
        "the REQUESTED insert is enqueued, nothing else"
    );
    assert_eq!(received[0].group_id, "A-12");
    let _ = delete_queue(&plain, &queue_url).await;
    let _ = delete_queue(&plain, &dlq_url).await;
    (recorder, queue_url)
}

/// The actions `CredentialsKey`'s policy grants `role`, after checking that no other principal
/// than the account (administration only) and the function roles is named, and that every
/// cryptographic grant is conditioned on the user's encryption context.
fn key_policy_grants(role: &str) -> BTreeSet<String> {
    let statements = props("CredentialsKey")["KeyPolicy"]["Statement"]
        .as_array()
        .expect("a key policy");
    let mut granted = BTreeSet::new();
    for st in statements {
        assert_eq!(st["Effect"], "Allow");
        let actions: Vec<&str> = match &st["Action"] {
            Value::String(a) => vec![a.as_str()],
            Value::Array(a) => a.iter().map(|v| v.as_str().expect("an action")).collect(),
            other => panic!("Action {other}"),
        };
        let principal = &st["Principal"]["AWS"];
        let roles: Vec<&str> = match principal {
            Value::Array(p) => p.iter().collect::<Vec<_>>(),
            p => vec![p],
        }
        .into_iter()
        .filter_map(|p| p["Fn::GetAtt"][0].as_str())
        .collect();
        if roles.is_empty() {
            // The account's statement: administration, and nothing that touches data.
            assert!(
                principal["Fn::Sub"]
                    .as_str()
                    .is_some_and(|s| s.ends_with(":root"))
            );
            for action in &actions {
                let crypto = ["Decrypt", "Encrypt", "GenerateDataKey", "ReEncrypt", "*"]
                    .iter()
                    .any(|c| action.trim_start_matches("kms:").starts_with(c));
                assert!(!crypto, "the account must not be granted {action}");
            }
            continue;
        }
        assert_eq!(
            st["Condition"]["Null"]["kms:EncryptionContext:seatgate:user_id"], "false",
            "{st}"
        );
        if roles.contains(&role) {
            granted.extend(actions.iter().map(|a| a.to_string()));
        }
    }
    granted
}

fn show(g: &Grants) -> String {
    if g.is_empty() {
        return "  (none)".to_owned();
    }
    g.iter()
        .map(|(a, r)| format!("  {a} on {r}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_role_grants_exactly_what_its_function_uses() {
    let sdk = emulators().await;
    let mut used: BTreeMap<&str, Grants> = BTreeMap::new();
    let mut kms_used: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (role, (recorder, counts, table, key_id, names)) in [
        ("ApiRole", record_api(&sdk).await),
        ("WorkerRole", record_worker(&sdk).await),
        ("ReaperRole", record_reaper(&sdk).await),
    ] {
        // The recorder saw exactly what the adapter's own request counter saw.
        assert_eq!(recorder.operation_counts(), counts, "{role}");
        used.insert(role, recorder.grants(&table, &names));
        kms_used.insert(role, recorder.kms_actions(&key_id));
    }
    // The credentials key's policy grants each role exactly the KMS actions its code sends.
    for (_, role, _) in FUNCTIONS {
        let used = kms_used.remove(role).unwrap_or_default();
        assert_eq!(
            key_policy_grants(role),
            used,
            "{role}: CredentialsKey's policy differs from what the code sends to KMS"
        );
    }
    let (recorder, queue_url) = record_relay(&sdk).await;
    used.insert(
        "RelayRole",
        recorder.grants(
            "<no table>",
            &BTreeMap::from([(queue_url, "SeatQueue.Arn".to_owned())]),
        ),
    );
    // The deliverer's requests are all its mapping's and its hand-backs (declared above).
    used.insert("DeliverRole", Grants::new());

    let mut report = Vec::new();
    for (_, role, logs) in FUNCTIONS {
        let granted = role_grants(role).always;
        let used_here = &used[role];
        let expected: Grants = used_here.union(&allow_list(role, logs)).cloned().collect();
        eprintln!("{role} recorded:\n{}", show(used_here));
        if granted != expected {
            report.push(format!(
                "{role}:\n granted but unused:\n{}\n used but not granted:\n{}",
                show(&granted.difference(&expected).cloned().collect()),
                show(&expected.difference(&granted).cloned().collect()),
            ));
        }
    }
    assert!(
        report.is_empty(),
        "roles in template.yaml differ from what the code uses:\n{}",
        report.join("\n")
    );
}

/// An event queue that drops what it is given: the recorded relay here only relays REQUESTED
/// intents, and the event queue's grants are declared, not recorded (no SQS recorder on it).
struct NoEvents;

#[async_trait::async_trait]
impl seatgate::ports::EventQueue for NoEvents {
    async fn enqueue(
        &self,
        _: &seatgate::domain::Event,
    ) -> Result<(), seatgate::ports::QueueError> {
        Ok(())
    }
}
