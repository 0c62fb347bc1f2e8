//! The simulator's cost model against DynamoDB Local's own counts: the same operations, through
//! the same services, on the memory backend costed by `seatgate_sim::aws::cost` and on
//! `DynamoStore` on DynamoDB Local, whose requests are counted on the wire (`RequestCounter`)
//! and whose write units are what the table reports (`ReturnConsumedCapacity`). They must
//! agree exactly, operation by operation: the burst, a booking, a cancel and a wait.
//!
//! Needs the emulators: `eval "$(scripts/emulators.sh start)"` (DynamoDB Local, and moto for
//! the KMS key that seals credentials). Without them this fails saying so; it is never
//! skipped.

use aws_sdk_dynamodb::types::AttributeValue;
use seatgate::config::Timing;
use seatgate::domain::{
    ActionKind, BookingAnswer, FlightId, IdempotencyKey, Millis, RoomId, SeatId, SeatMessage,
    UserId,
};
use seatgate::ports::Clock;
use seatgate::service::{Ports, QueueRecord, Services};
use seatgate_aws::dynamodb::DynamoStore;
use seatgate_sim::aws::cost::{CostMeter, Costs, Item, costed};
use seatgate_sim::memory::{MemoryBackend, MemoryConfig};
use seatgate_sim::upstream::{Route, UpstreamModel};
use seatgate_testkit::{ManualClock, setup};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// One backend under the same services, with an upstream of its own (the simulator's model,
/// answering at once), so the worker's reserve is the same call on both sides.
struct Side {
    services: Services,
    upstream: UpstreamModel,
    clock: Arc<ManualClock>,
}

fn side(ports: Ports, upstream: UpstreamModel, clock: Arc<ManualClock>) -> Side {
    Side {
        services: Services::new(ports, Timing::fast()),
        upstream,
        clock,
    }
}

fn upstream(clock: Arc<dyn Clock>) -> UpstreamModel {
    UpstreamModel::new(1, clock, Duration::from_secs(2))
}

/// A count in the terms both sides can give: requests by operation, the write units of the
/// single-item writes that applied (what DynamoDB reports for them), and the transactions
/// that applied. A transaction's units are left out: DynamoDB Local does not report them as
/// AWS bills them (one unit per item under 1 KB, twice; see `BENCHMARKS.md`), so the items'
/// sizes are checked instead ([`every_item_is_within_its_units`]).
#[derive(Debug, PartialEq)]
struct Counted {
    requests: BTreeMap<String, u64>,
    single_write_units: u64,
    transactions: u64,
}

fn from_model(c: &Costs) -> Counted {
    Counted {
        requests: c
            .requests
            .iter()
            .map(|(k, v)| ((*k).to_owned(), *v))
            .collect(),
        single_write_units: c.applied_single_units.values().sum(),
        transactions: c.applied_transactions,
    }
}

struct Pair {
    table: String,
    memory: Side,
    meter: Arc<CostMeter>,
    dynamo: Side,
    store: Arc<DynamoStore>,
}

impl Pair {
    async fn new() -> Pair {
        let now = Millis::now();
        let clock = Arc::new(ManualClock::new(now));
        let backend = Arc::new(MemoryBackend::new(clock.clone(), MemoryConfig::default()));
        let meter = Arc::new(CostMeter::default());
        let model = upstream(clock.clone());
        let ports = costed(
            Ports::from_store(backend, Arc::new(model.clone()), clock.clone()),
            &meter,
        );
        let memory = side(ports, model, clock);
        let client = setup::dynamodb().await;
        let table = setup::fresh_table(&client, "seatgate-cost-").await;
        let store = Arc::new(
            DynamoStore::new(&client, &table)
                .with_credentials_key(setup::credentials_key().await)
                .counting_capacity(),
        );
        let clock = Arc::new(ManualClock::new(now));
        let model = upstream(clock.clone());
        let dynamo = side(
            Ports::from_store(store.clone(), Arc::new(model.clone()), clock.clone()),
            model,
            clock,
        );
        Pair {
            table,
            memory,
            meter,
            dynamo,
            store,
        }
    }

    /// Where both counts stand now, for [`Pair::since`].
    fn mark(&self) -> Mark {
        Mark {
            model: self.meter.snapshot(),
            requests: self.store.requests(),
            capacity: self.store.capacity().expect("counting capacity"),
        }
    }

    /// (the model's count, DynamoDB Local's) since `mark`.
    fn since(&self, mark: &Mark) -> (Counted, Counted) {
        let model = self.meter.snapshot().since(&mark.model);
        let requests = self.store.requests().since(&mark.requests);
        let capacity = self
            .store
            .capacity()
            .expect("counting capacity")
            .since(&mark.capacity);
        let single: f64 = ["PutItem", "UpdateItem", "DeleteItem"]
            .iter()
            .map(|op| capacity.get(op))
            .sum();
        let local = Counted {
            requests: requests.by_operation,
            single_write_units: single.round() as u64,
            transactions: capacity.reported("TransactWriteItems"),
        };
        (from_model(&model), local)
    }
}

struct Mark {
    model: Costs,
    requests: seatgate_aws::dynamodb::RequestCounts,
    capacity: seatgate_aws::dynamodb::CapacityCounts,
}

fn user(n: usize) -> UserId {
    UserId::parse(&format!("cost-user-{n}")).unwrap()
}

/// Enrols `n` users on `side`: their credentials kept (and known to the upstream), the seat
/// in the upstream's room. Not measured: it comes before a burst.
async fn enrol(side: &Side, n: usize, seat: &SeatId) {
    let api = side.services.api();
    for i in 0..n {
        let credential = format!("cred-{i}");
        side.upstream.register(&user(i), &credential);
        api.put_credential(&user(i), &credential).await.unwrap();
    }
    side.upstream.put_room(
        &RoomId::parse("COST-R-1").unwrap(),
        std::slice::from_ref(seat),
    );
}

/// The same-seat burst: `n` users prepare and confirm one seat through the API, then the
/// worker handles their messages as one batch of the seat's FIFO group, as the relay sends
/// them (each carrying its intent): it claims the first, reserves it upstream, settles it
/// and closes the others on the seat it took. Every port the real path touches is counted
/// (credentials, the breaker and route pauses, the seat-read cache, intents).
async fn burst(side: &Side, n: usize, seat: &SeatId) {
    let api = side.services.api();
    let mut records = Vec::new();
    for i in 0..n {
        let action = api
            .prepare(&user(i), ActionKind::ReserveSeat, seat.clone())
            .await
            .unwrap();
        let intent = api
            .confirm(&user(i), &action.action_id)
            .await
            .unwrap()
            .intent;
        records.push(QueueRecord {
            message_id: format!("m-{i}"),
            group_id: seat.to_string(),
            body: serde_json::to_string(&SeatMessage::for_intent(&intent)).unwrap(),
            receipt: String::new(),
        });
    }
    let failed = side.services.worker().handle_batch(&records).await;
    assert!(failed.is_empty(), "every message handled: {failed:?}");
    assert_eq!(
        side.upstream.count(Route::Reserve),
        1,
        "one reserve upstream"
    );
}

async fn book(side: &Side, flight: &FlightId) -> seatgate::domain::BookingId {
    let key = IdempotencyKey::parse("cost-key-1").unwrap();
    let answer = side
        .services
        .flights()
        .book(&user(0), flight, 1, Some(&key))
        .await
        .unwrap();
    let BookingAnswer::Booked { booking } = answer else {
        panic!("booked: {answer:?}");
    };
    booking.booking_id
}

async fn wait(side: &Side) {
    let api = side.services.api();
    let until = side.clock.now().plus(Duration::from_secs(600));
    let wait = api
        .register_wait(&user(1), SeatId::parse("COST-S-2").unwrap(), until)
        .await
        .unwrap();
    api.cancel_wait(&user(1), &wait.intent_id).await.unwrap();
}

#[tokio::test]
async fn the_cost_model_counts_what_dynamodb_local_counts() {
    let pair = Pair::new().await;
    let (memory, dynamo) = (&pair.memory, &pair.dynamo);
    let mut table = Vec::new();

    let seat = SeatId::parse("COST-S-1").unwrap();
    enrol(memory, 10, &seat).await;
    enrol(dynamo, 10, &seat).await;
    let mark = pair.mark();
    burst(memory, 10, &seat).await;
    burst(dynamo, 10, &seat).await;
    table.push(("same-seat burst of 10", pair.since(&mark)));

    let flight = FlightId::parse("COST-F-1").unwrap();
    for side in [memory, dynamo] {
        side.services
            .flights()
            .create(flight.clone(), 10, Some(2), 2)
            .await
            .unwrap();
    }
    let mark = pair.mark();
    let booked = (book(memory, &flight).await, book(dynamo, &flight).await);
    table.push((
        "a booking (the first: the flight read too)",
        pair.since(&mark),
    ));

    let mark = pair.mark();
    for (side, id) in [(memory, &booked.0), (dynamo, &booked.1)] {
        side.services
            .flights()
            .cancel(&user(0), &flight, id)
            .await
            .unwrap();
    }
    table.push(("a cancel", pair.since(&mark)));

    let mark = pair.mark();
    wait(memory).await;
    wait(dynamo).await;
    table.push(("a wait (registered, then cancelled)", pair.since(&mark)));

    for (name, (model, local)) in &table {
        println!("{name}: model {model:?}; DynamoDB Local {local:?}");
    }
    for (name, (model, local)) in table {
        assert_eq!(model, local, "{name}: the model against DynamoDB Local");
    }
    every_item_is_within_its_units(&pair).await;
    // The model's due scan is one `Query` per shard of the adapter's index.
    assert_eq!(
        seatgate_sim::aws::cost::DUE_SHARDS,
        seatgate_aws::dynamodb::TABLE.due_shards as usize
    );
    // And a look for a seat's open intents one `Query` per shard of the open index.
    assert_eq!(
        seatgate_sim::aws::cost::OPEN_SHARDS,
        seatgate_aws::dynamodb::TABLE.open_shards as usize
    );
}

/// An attribute value's size as DynamoDB counts it: strings and binaries their bytes, numbers
/// about one byte per two significant digits plus one, maps and lists 3 bytes plus their
/// elements (and a byte each), booleans and nulls one byte.
fn value_size(v: &AttributeValue) -> usize {
    match v {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => {
            let digits = n.trim_start_matches('-').replace('.', "");
            digits.trim_start_matches('0').len() / 2 + 1
        }
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::M(m) => {
            3 + m
                .iter()
                .map(|(k, v)| k.len() + value_size(v) + 1)
                .sum::<usize>()
        }
        AttributeValue::L(l) => 3 + l.iter().map(|v| value_size(v) + 1).sum::<usize>(),
        AttributeValue::Ss(ss) => ss.iter().map(String::len).sum(),
        AttributeValue::Ns(ns) => ns.iter().map(String::len).sum(),
        _ => 0,
    }
}

/// The item kind of a key, by its partition and sort key prefixes (`infra/aws/TABLE.md`).
fn kind_of(pk: &str, sk: &str) -> Option<Item> {
    let (p, s) = (pk.split('#').next()?, sk.split('#').next()?);
    Some(match (p, s) {
        ("ACTION", _) => Item::Action,
        ("INTENT", "INTENT") => Item::Intent,
        ("INTENT", "CONSENT") => Item::Consent,
        ("INTENT", "HISTORY") => Item::History,
        ("SEAT", "SUPPRESSION") => Item::Suppression,
        ("SEAT", "HOLD") => Item::SeatClaim,
        ("FLIGHT", "FLIGHT") => Item::Flight,
        ("FLIGHT", "SHARD") => Item::Shard,
        ("FLIGHT", "WAITLIST") => Item::WaitlistGate,
        ("USER", "COUNT") => Item::UserCount,
        ("USER", "BOOKING") => Item::Booking,
        ("USER", "IDEM") => Item::Idempotency,
        ("USER", "RATE") => Item::Window,
        ("USER", "CREDENTIAL") => Item::Credential,
        ("READ", _) => Item::Reading,
        ("BREAKER" | "HOLDS", _) => Item::Breaker,
        ("LEASE", _) => Item::Lease,
        _ => return None,
    })
}

/// Every item the operations left in the table fits the write units the model gives its kind
/// (its size rounded up to 1 KB), so the model's billed units are AWS's.
async fn every_item_is_within_its_units(pair: &Pair) {
    let client = setup::dynamodb().await;
    let scan = client
        .scan()
        .table_name(&pair.table)
        .send()
        .await
        .expect("DynamoDB Local scans the table");
    let mut largest: BTreeMap<Item, usize> = BTreeMap::new();
    for item in scan.items() {
        let key = |k: &str| {
            item.get(k)
                .and_then(|v| v.as_s().ok())
                .cloned()
                .unwrap_or_default()
        };
        let Some(kind) = kind_of(&key("pk"), &key("sk")) else {
            panic!("an item of no known kind: {} {}", key("pk"), key("sk"));
        };
        let size: usize = item.iter().map(|(k, v)| k.len() + value_size(v)).sum();
        let l = largest.entry(kind).or_default();
        *l = (*l).max(size);
    }
    println!("largest item by kind, bytes: {largest:?}");
    for kind in [
        Item::Action,
        Item::Intent,
        Item::Consent,
        Item::History,
        Item::Booking,
        Item::Shard,
    ] {
        assert!(
            largest.contains_key(&kind),
            "the operations write a {kind:?}"
        );
    }
    for (kind, size) in largest {
        assert!(
            size.div_ceil(1024) as u64 <= kind.units(),
            "a {kind:?} item of {size} bytes takes more than the model's {} units",
            kind.units()
        );
    }
}
