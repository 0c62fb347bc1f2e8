//! The store contract and the protection contract (several instances on one table) against
//! `DynamoStore` on DynamoDB Local, plus what only the DynamoDB
//! adapter promises: the table `create_table` builds is the one `schema::TABLE` describes, the
//! stream decodes into the relay's `IntentChange`s, concurrent writers are arbitrated by
//! conditions alone, and the number of write requests per reservation stays small.
//!
//! Needs the emulators: `eval "$(scripts/emulators.sh start)"` exports
//! `AWS_ENDPOINT_URL_DYNAMODB` (and region and dummy credentials). Without them every test here
//! fails saying so; none is skipped. Each run creates its own uniquely named tables (and drops
//! tables earlier runs left behind for more than an hour).

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{KeyType, ProjectionType, StreamViewType, TimeToLiveStatus};
use seatgate::domain::{
    Action, ActionKind, Change, ConsentRecord, Intent, IntentChange, IntentId, IntentKind,
    IntentStatus, Millis, Reason, SeatId, Suppression, Terminal, Transition, TransitionRecord,
    TransitionRequest, UserId,
};
use seatgate::ports::{
    Actions, ConfirmError, ConfirmRefusal, Confirmation, Intents, StoreError, TransitionError,
};
use seatgate_aws::dynamodb::stream::change_from_stream_record;
use seatgate_aws::dynamodb::{DynamoStore, RequestCounts, TABLE, delete_table};
use seatgate_testkit::ManualClock;
use seatgate_testkit::contract::Harness;
use seatgate_testkit::paging::whole_history;
use seatgate_testkit::setup;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OnceCell;

const TABLE_PREFIX: &str = "seatgate-test-";

/// One table for all contract cases of this run (their ids are unique, so they may share it).
async fn shared_table() -> String {
    static TABLE_NAME: OnceCell<String> = OnceCell::const_new();
    TABLE_NAME
        .get_or_init(|| async { setup::fresh_table(&setup::dynamodb().await, TABLE_PREFIX).await })
        .await
        .clone()
}

async fn store() -> DynamoStore {
    DynamoStore::new(&setup::dynamodb().await, shared_table().await)
        .with_credentials_key(setup::credentials_key().await)
}

async fn harness() -> Harness {
    // DynamoDB Local applies transactions one at a time, and a case of holders contending for
    // one flight's items is slow on it (2,000 holders took 13 minutes beside a test run, 200
    // took 103 s): 80 keep the case under a minute. Memory and SQLite take 2,000.
    Harness::from_store(store().await, Arc::new(ManualClock::new(Millis::now())))
        .with_holders(80)
        .with_changes(Arc::new(StreamLog(shared_table().await)))
}

/// The shared table's stream from its trim horizon, decoded as the relay decodes it.
struct StreamLog(String);

#[async_trait::async_trait]
impl seatgate_testkit::contract::ChangeLog for StreamLog {
    async fn recorded(&self) -> Vec<Change> {
        let config = setup::sdk_config().await;
        let client = setup::dynamodb_from(&config).await;
        stream_records(&config, &client, &self.0)
            .await
            .iter()
            // Other cases on this table write items of their own (some corrupt on purpose);
            // a case keeps its own records by their ids.
            .filter_map(|r| change_from_stream_record(r).ok().flatten())
            .collect()
    }
}

seatgate_testkit::store_contract!(harness());

/// The protection contract's fleet: `n` instances, each with its own client, on one fresh table
/// (the breaker is one item per table, so cases must not share one).
async fn protection_fleet(n: usize) -> seatgate_testkit::protection::Fleet {
    let table = setup::fresh_table(&setup::dynamodb().await, TABLE_PREFIX).await;
    let mut stores = Vec::new();
    for _ in 0..n {
        stores.push(Arc::new(DynamoStore::new(&setup::dynamodb().await, &table)));
    }
    seatgate_testkit::protection::Fleet::new(stores).await
}

seatgate_testkit::protection_contract!(protection_fleet);

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

fn user() -> UserId {
    UserId::parse(&setup::unique("user-")).unwrap()
}

fn seat() -> SeatId {
    SeatId::parse(&setup::unique("seat-")).unwrap()
}

fn confirmation(action: &Action, now: Millis) -> Confirmation {
    Confirmation::of(
        action,
        IntentId::generate(),
        &action.user_id,
        now,
        now.plus(Duration::from_secs(900)),
    )
}

async fn prepared(store: &DynamoStore, user: &UserId, seat: &SeatId, now: Millis) -> Action {
    let action = Action::prepare(
        user.clone(),
        ActionKind::ReserveSeat,
        seat.clone(),
        now,
        Duration::from_secs(300),
    );
    store.put_action(&action).await.unwrap();
    action
}

fn req(intent: &Intent, now: Millis, transition: Transition) -> TransitionRequest {
    TransitionRequest {
        seen: None,
        reading: None,
        intent_id: intent.intent_id.clone(),
        seat_id: Some(intent.seat_id.clone()),
        now,
        transition,
    }
}

fn claim(now: Millis) -> Transition {
    Transition::Claim {
        lease_until: now.plus(Duration::from_secs(45)),
        due_at: now.plus(Duration::from_secs(60)),
    }
}

fn settle(token: u64, status: Terminal, suppress: Option<Suppression>) -> Transition {
    Transition::Complete {
        token,
        status,
        charge_id: (status == Terminal::Succeeded).then(|| "charge-1".into()),
        reason: Reason::Reserved,
        suppress,
    }
}

fn suppression(intent: &Intent, now: Millis) -> Suppression {
    Suppression {
        seat_id: intent.seat_id.clone(),
        intent_id: intent.intent_id.clone(),
        until: now.plus(Duration::from_secs(300)),
        winner: None,
    }
}

// ---------------------------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn create_table_builds_what_the_schema_describes() {
    let client = setup::dynamodb().await;
    let name = shared_table().await;
    let table = client
        .describe_table()
        .table_name(&name)
        .send()
        .await
        .unwrap()
        .table
        .unwrap();
    let keys: Vec<(&str, &KeyType)> = table
        .key_schema()
        .iter()
        .map(|k| (k.attribute_name(), k.key_type()))
        .collect();
    assert_eq!(
        keys,
        [
            (TABLE.partition_key.name, &KeyType::Hash),
            (TABLE.sort_key.name, &KeyType::Range)
        ]
    );
    let mut defs: Vec<(String, String)> = table
        .attribute_definitions()
        .iter()
        .map(|d| {
            (
                d.attribute_name().to_owned(),
                d.attribute_type().as_str().to_owned(),
            )
        })
        .collect();
    defs.sort();
    let mut expected: Vec<(String, String)> = TABLE
        .key_attributes()
        .iter()
        .map(|a| (a.name.to_owned(), a.attr_type.to_owned()))
        .collect();
    expected.sort();
    assert_eq!(defs, expected);
    let gsis = table.global_secondary_indexes();
    assert_eq!(gsis.len(), 3);
    for (name, hash, range) in [
        (TABLE.due_index, TABLE.due_shard.name, TABLE.due_at.name),
        (
            TABLE.flight_holds_index,
            TABLE.hold_flight.name,
            TABLE.hold_order.name,
        ),
        (
            TABLE.open_index,
            TABLE.open_seat.name,
            TABLE.partition_key.name,
        ),
    ] {
        let index = gsis
            .iter()
            .find(|g| g.index_name() == Some(name))
            .unwrap_or_else(|| panic!("index {name} missing: {gsis:?}"));
        let keys: Vec<(&str, &KeyType)> = index
            .key_schema()
            .iter()
            .map(|k| (k.attribute_name(), k.key_type()))
            .collect();
        assert_eq!(keys, [(hash, &KeyType::Hash), (range, &KeyType::Range)]);
        assert_eq!(
            index.projection().and_then(|p| p.projection_type()),
            Some(&ProjectionType::All)
        );
    }
    let stream = table.stream_specification().unwrap();
    assert!(stream.stream_enabled());
    assert_eq!(
        stream.stream_view_type(),
        Some(&StreamViewType::NewAndOldImages)
    );
    let ttl = client
        .describe_time_to_live()
        .table_name(&name)
        .send()
        .await
        .unwrap()
        .time_to_live_description
        .unwrap();
    assert_eq!(ttl.attribute_name(), Some(TABLE.ttl_attribute));
    assert_eq!(ttl.time_to_live_status(), Some(&TimeToLiveStatus::Enabled));
}

// ---------------------------------------------------------------------------------------------
// Concurrency: conditions alone arbitrate
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn of_many_concurrent_claims_exactly_one_wins() {
    let store = Arc::new(store().await);
    let now = Millis::now();
    let action = prepared(&store, &user(), &seat(), now).await;
    let c = confirmation(&action, now);
    store.confirm(&c).await.unwrap();

    let claims = (0..16).map(|_| {
        let store = store.clone();
        let r = req(&c.intent, now, claim(now));
        tokio::spawn(async move { store.transition(&r).await })
    });
    let results: Vec<_> = futures::future::join_all(claims)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let winners: Vec<&Intent> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    assert_eq!(winners[0].fencing_token, 1);
    for r in &results {
        match r {
            Ok(_) => {}
            // DynamoDB Local serializes writes; real DynamoDB may also answer a conflict.
            Err(TransitionError::Refused(seen)) => assert_eq!(**seen, *winners[0]),
            Err(TransitionError::Store(StoreError::TransactionConflict)) => {}
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
}

#[tokio::test]
async fn of_many_concurrent_confirms_of_one_action_exactly_one_creates_the_intent() {
    let store = Arc::new(store().await);
    let now = Millis::now();
    let action = prepared(&store, &user(), &seat(), now).await;
    let attempts: Vec<Confirmation> = (0..10).map(|_| confirmation(&action, now)).collect();
    let tasks = attempts.iter().cloned().map(|c| {
        let store = store.clone();
        tokio::spawn(async move { store.confirm(&c).await })
    });
    let results: Vec<Result<(), ConfirmError>> = futures::future::join_all(tasks)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let won: Vec<usize> = (0..results.len()).filter(|i| results[*i].is_ok()).collect();
    assert_eq!(won.len(), 1, "{results:?}");
    let winner = &attempts[won[0]].intent.intent_id;
    for (i, r) in results.iter().enumerate() {
        match r {
            Ok(()) => {}
            Err(ConfirmError::Refused(ConfirmRefusal::AlreadyConfirmed(id))) => {
                assert_eq!(id, winner)
            }
            Err(ConfirmError::Store(StoreError::TransactionConflict)) => {}
            Err(e) => panic!("unexpected {e:?}"),
        }
        if i != won[0] {
            let loser = &attempts[i].intent.intent_id;
            assert_eq!(store.get_intent(loser).await.unwrap(), None);
            assert_eq!(store.get_consent(loser).await.unwrap(), None);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Write requests per reservation
// ---------------------------------------------------------------------------------------------

fn show(counts: &RequestCounts) -> String {
    counts
        .by_operation
        .iter()
        .map(|(op, n)| format!("{op}={n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The brief's target: at most 4 write requests from confirm to terminal for the winner. Also
/// records the other paths' costs (printed; run with `--nocapture` to see them).
#[tokio::test]
async fn write_requests_per_reservation_path() {
    let store = store().await;
    let now = Millis::now();
    let seat = seat();
    let mark = |s: &DynamoStore| s.requests();

    // The winner: confirm -> claim -> SUCCEEDED with the seat's suppression.
    let winner = prepared(&store, &user(), &seat, now).await;
    let c = confirmation(&winner, now);
    let before = mark(&store);
    store.confirm(&c).await.unwrap();
    let claimed = store
        .transition(&req(&c.intent, now, claim(now)))
        .await
        .unwrap();
    let done = store
        .transition(&req(
            &c.intent,
            now,
            settle(
                claimed.fencing_token,
                Terminal::Succeeded,
                Some(suppression(&c.intent, now)),
            ),
        ))
        .await
        .unwrap();
    assert_eq!(done.status, IntentStatus::Succeeded);
    let winner_cost = mark(&store).since(&before);
    println!("winner (confirm -> SUCCEEDED): {}", show(&winner_cost));
    assert!(
        winner_cost.writes() <= 4,
        "winner took {} writes: {}",
        winner_cost.writes(),
        show(&winner_cost)
    );
    // Confirm, claim (with the seat's claim) and settlement (releasing it, with the
    // suppression): one transaction each.
    assert_eq!(winner_cost.writes(), 3);
    assert_eq!(winner_cost.get("TransactWriteItems"), 3);
    assert_eq!(winner_cost.get("UpdateItem"), 0);

    // A loser of the same seat, closed locally (suppressed) without an upstream call.
    let loser = prepared(&store, &user(), &seat, now).await;
    let l = confirmation(&loser, now);
    let before = mark(&store);
    store.confirm(&l).await.unwrap();
    assert!(store.suppression(&seat, now).await.unwrap().is_some());
    let close = Transition::Close {
        from: vec![IntentStatus::Requested],
        owner: None,
        deadline_passed: false,
        status: Terminal::FailedRace,
        reason: Reason::SeatTaken,
    };
    store.transition(&req(&l.intent, now, close)).await.unwrap();
    let loser_cost = mark(&store).since(&before);
    println!(
        "suppressed loser (confirm -> FAILED_RACE): {}",
        show(&loser_cost)
    );
    assert_eq!(loser_cost.writes(), 2);

    // An attempt whose outcome was unknown, settled by the reaper after the lease.
    let other = prepared(&store, &user(), &seat, now).await;
    let r = confirmation(&other, now);
    let before = mark(&store);
    store.confirm(&r).await.unwrap();
    let claimed = store
        .transition(&req(&r.intent, now, claim(now)))
        .await
        .unwrap();
    let later = now.plus(Duration::from_secs(120));
    store
        .transition(&req(
            &r.intent,
            later,
            settle(claimed.fencing_token, Terminal::FailedUpstream, None),
        ))
        .await
        .unwrap();
    let reaped_cost = mark(&store).since(&before);
    println!(
        "reaped (confirm -> claim -> reaper settles): {}",
        show(&reaped_cost)
    );
    assert_eq!(reaped_cost.writes(), 3);

    // A wait: register, claim, seat taken -> back off (with suppression), then cancelled.
    let wait = Intent::waiting(
        user(),
        seat.clone(),
        now.plus(Duration::from_secs(600)),
        now,
    );
    let consent = ConsentRecord {
        intent_id: wait.intent_id.clone(),
        user_id: wait.user_id.clone(),
        seat_id: wait.seat_id.clone(),
        kind: IntentKind::Wait,
        action_id: None,
        consented_at: now,
    };
    let before = mark(&store);
    store.register_wait(&wait, &consent).await.unwrap();
    let claimed = store
        .transition(&req(&wait, now, claim(now)))
        .await
        .unwrap();
    let retry = now.plus(Duration::from_secs(5));
    store
        .transition(&req(
            &wait,
            now,
            Transition::Rewait {
                token: claimed.fencing_token,
                next_attempt_at: retry,
                due_at: retry,
                reason: Reason::SeatTaken,
                suppress: Some(suppression(&wait, now)),
            },
        ))
        .await
        .unwrap();
    let cancel = Transition::Close {
        from: vec![IntentStatus::WaitingForSeat],
        owner: Some(wait.user_id.clone()),
        deadline_passed: false,
        status: Terminal::Cancelled,
        reason: Reason::Cancelled,
    };
    store.transition(&req(&wait, now, cancel)).await.unwrap();
    let wait_cost = mark(&store).since(&before);
    println!(
        "wait (register -> claim -> rewait -> cancel): {}",
        show(&wait_cost)
    );
    assert_eq!(wait_cost.writes(), 4);

    // A late settlement is refused by the read that learns the version (the state it read does
    // not admit it): one request, no write.
    let before = mark(&store);
    let stale = store
        .transition(&req(&c.intent, now, settle(1, Terminal::Succeeded, None)))
        .await;
    assert!(matches!(stale, Err(TransitionError::Refused(_))));
    let refused_cost = mark(&store).since(&before);
    println!("refused late settlement: {}", show(&refused_cost));
    assert_eq!((refused_cost.writes(), refused_cost.total()), (0, 1));
}

// ---------------------------------------------------------------------------------------------
// The stream as the outbox
// ---------------------------------------------------------------------------------------------

/// Every record of the table's stream so far, in order per shard (one shard on a new table).
async fn stream_records(
    config: &aws_config::SdkConfig,
    client: &Client,
    table: &str,
) -> Vec<aws_sdk_dynamodbstreams::types::Record> {
    let arn = client
        .describe_table()
        .table_name(table)
        .send()
        .await
        .unwrap()
        .table
        .unwrap()
        .latest_stream_arn
        .expect("the table has a stream");
    // The streams API lives on the same DynamoDB Local endpoint.
    let endpoint = std::env::var("AWS_ENDPOINT_URL_DYNAMODB").unwrap();
    let streams = aws_sdk_dynamodbstreams::Client::from_conf(
        aws_sdk_dynamodbstreams::config::Builder::from(config)
            .endpoint_url(endpoint)
            .build(),
    );
    let shards = streams
        .describe_stream()
        .stream_arn(&arn)
        .send()
        .await
        .unwrap()
        .stream_description
        .unwrap()
        .shards
        .unwrap_or_default();
    let mut records = Vec::new();
    for shard in shards {
        let mut iterator = streams
            .get_shard_iterator()
            .stream_arn(&arn)
            .shard_id(shard.shard_id().unwrap())
            .shard_iterator_type(aws_sdk_dynamodbstreams::types::ShardIteratorType::TrimHorizon)
            .send()
            .await
            .unwrap()
            .shard_iterator;
        while let Some(it) = iterator {
            let out = streams
                .get_records()
                .shard_iterator(it)
                .send()
                .await
                .unwrap();
            if out.records().is_empty() {
                break;
            }
            records.extend(out.records().iter().cloned());
            iterator = out.next_shard_iterator;
        }
    }
    records
}

#[tokio::test]
async fn the_stream_carries_each_intent_write_with_old_and_new_images() {
    let config = setup::sdk_config().await;
    let client = setup::dynamodb_from(&config).await;
    let table = setup::fresh_table(&client, TABLE_PREFIX).await;
    let store = DynamoStore::new(&client, &table);
    let now = Millis::now();
    let action = prepared(&store, &user(), &seat(), now).await;
    let c = confirmation(&action, now);
    store.confirm(&c).await.unwrap();
    let claimed = store
        .transition(&req(&c.intent, now, claim(now)))
        .await
        .unwrap();
    let done = store
        .transition(&req(
            &c.intent,
            now,
            settle(
                claimed.fencing_token,
                Terminal::Succeeded,
                Some(suppression(&c.intent, now)),
            ),
        ))
        .await
        .unwrap();
    // A refused write leaves no record.
    assert!(
        store
            .transition(&req(&c.intent, now, claim(now)))
            .await
            .is_err()
    );

    let records = stream_records(&config, &client, &table).await;
    let decoded: Vec<Option<IntentChange>> = records
        .iter()
        .map(|r| {
            change_from_stream_record(r)
                .expect("every record decodes")
                .and_then(Change::into_intent)
        })
        .collect();
    let changes: Vec<&IntentChange> = decoded.iter().flatten().collect();
    assert_eq!(
        changes,
        vec![
            &IntentChange {
                old: None,
                new: Some(c.intent.clone())
            },
            &IntentChange {
                old: Some(c.intent.clone()),
                new: Some(claimed.clone())
            },
            &IntentChange {
                old: Some(claimed),
                new: Some(done)
            },
        ]
    );
    // The action put and update, the consent, the seat claim's put and delete, the suppression
    // and the three transition records: not intents.
    assert_eq!(decoded.iter().filter(|d| d.is_none()).count(), 9);
    // The admin history lists every transition the stream carried, in order.
    let carried: Vec<TransitionRecord> = changes
        .iter()
        .map(|c| TransitionRecord::of_change(c).unwrap())
        .collect();
    assert_eq!(
        whole_history(&store, &c.intent.intent_id).await.unwrap(),
        carried
    );
    assert_eq!(
        carried.iter().map(|r| r.version).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    delete_table(&client, &table).await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Emulator checks
// ---------------------------------------------------------------------------------------------

/// DynamoDB Local answers the same error codes AWS does for the refusals the adapter decodes.
#[tokio::test]
async fn refusals_decode_from_the_emulators_own_answers() {
    let store = store().await;
    let now = Millis::now();
    let action = prepared(&store, &user(), &seat(), now).await;
    // Expired: the condition's `expires_at > :now` fails; the old item says why.
    let late = now.plus(Duration::from_secs(301));
    let c = confirmation(&action, late);
    assert_eq!(
        store.confirm(&c).await,
        Err(ConfirmError::Refused(ConfirmRefusal::Expired))
    );
    // Another user's confirm of it looks like a missing action.
    let mut theirs = confirmation(&action, now);
    theirs.user_id = user();
    assert_eq!(
        store.confirm(&theirs).await,
        Err(ConfirmError::Refused(ConfirmRefusal::NotFound))
    );
    // A duplicate action id is an error, never an overwrite.
    assert!(matches!(
        store.put_action(&action).await,
        Err(StoreError::Unavailable(_))
    ));
}

/// DynamoDB requests per booking, counted by the store's interceptor: a successful booking is
/// one `TransactWriteItems` (plus the flight's read, once per instance per TTL); once a flight
/// is sold out and marked, a rejection writes nothing at all, or, under a key, its record only.
#[tokio::test]
async fn a_booking_costs_one_transaction_and_a_rejection_once_sold_out_none() {
    use seatgate::domain::{BookingAnswer, FlightId};
    let store = Arc::new(store().await);
    // The flight's state is cached per instance for `read_ttl` of real time; a long one keeps a
    // slow machine from turning a cached answer into a read mid-test.
    let timing = seatgate::config::Timing {
        read_ttl: std::time::Duration::from_secs(300),
        ..seatgate::config::Timing::fast()
    };
    let sim_upstream = setup::upstream(&timing).await;
    let clock = Arc::new(ManualClock::new(Millis::now()));
    let services = seatgate::service::Services::new(
        seatgate::service::Ports::from_store(store.clone(), sim_upstream.http, clock),
        timing,
    );
    let flights = services.flights();
    let id = FlightId::parse(&setup::unique("F-")).unwrap();
    flights.create(id.clone(), 2, None, 1).await.unwrap();
    let user = |n: u32| UserId::parse(&format!("booker-{n}")).unwrap();

    // The first booking also reads the flight (cached afterwards).
    let before = store.requests();
    let answer = flights.book(&user(0), &id, 1, None).await.unwrap();
    assert!(matches!(answer, BookingAnswer::Booked { .. }));
    // A booking is counted by the per-user rate limit inside its own transaction: the window's
    // counter is one more item of it, not an `UpdateItem` of its own.
    let first = store.requests().since(&before);
    assert_eq!(first.writes(), 1, "{first:?}");
    assert_eq!(first.get("TransactWriteItems"), 1, "{first:?}");
    assert_eq!(first.get("UpdateItem"), 0, "{first:?}");

    let before = store.requests();
    assert!(matches!(
        flights.book(&user(1), &id, 1, None).await.unwrap(),
        BookingAnswer::Booked { .. }
    ));
    let second = store.requests().since(&before);
    assert_eq!((second.writes(), second.total()), (1, 1), "{second:?}");
    assert_eq!(second.get("TransactWriteItems"), 1, "{second:?}");

    // The first rejection finds the shard empty and marks the flight sold out: a refused
    // transaction and the marking transaction.
    let before = store.requests();
    assert_eq!(
        flights.book(&user(2), &id, 1, None).await.unwrap(),
        BookingAnswer::SoldOut
    );
    let marking = store.requests().since(&before);
    assert_eq!(marking.get("TransactWriteItems"), 2, "{marking:?}");
    assert_eq!(
        marking.get("UpdateItem"),
        0,
        "a refused booking spends nothing of its window: {marking:?}"
    );

    // From then on, nothing reaches the table.
    let before = store.requests();
    for n in 3..103 {
        assert_eq!(
            flights.book(&user(n), &id, 1, None).await.unwrap(),
            BookingAnswer::SoldOut
        );
    }
    let rejected = store.requests().since(&before);
    assert_eq!(
        (rejected.writes(), rejected.total()),
        (0, 0),
        "{rejected:?}"
    );

    // With an `Idempotency-Key`, the refusal is stored as the key's answer in one conditional
    // put (it was a begin and then a finish), and a replay reads it back from that put's refusal.
    let key = seatgate::domain::IdempotencyKey::parse("sold-out-key").unwrap();
    let before = store.requests();
    assert_eq!(
        flights.book(&user(200), &id, 1, Some(&key)).await.unwrap(),
        BookingAnswer::SoldOut
    );
    let keyed = store.requests().since(&before);
    assert_eq!((keyed.total(), keyed.get("PutItem")), (1, 1), "{keyed:?}");
    assert_eq!(
        flights.book(&user(200), &id, 1, Some(&key)).await.unwrap(),
        BookingAnswer::SoldOut
    );
}

/// The flash sale's keys on the table (`infra/aws/TABLE.md`, "Shard partitions").
#[path = "contract_dynamodb/shard_partitions.rs"]
mod shard_partitions;
