//! DynamoDB's throughput limits on the keys a flash sale makes hot: a token bucket per key, and
//! the flights port as a deployed table would answer it once a key is over its limit.
//!
//! DynamoDB serves at most 1,000 write units and 3,000 read units a second per partition. A
//! transactional write costs 2 write units per item (items here are under 1 KB), and a write
//! refused by its condition still costs its units. Which keys share a limit is the question an
//! operator must get right, so both answers are modelled ([`Scope`]):
//! - [`Scope::Item`]: each item has its own limit, as once DynamoDB has split a hot item
//!   collection by sort key ("split for heat"): each of a flight's shard counters then takes
//!   1,000 write units a second;
//! - [`Scope::PartitionKey`]: every item of one partition key shares one limit, as at a sale's
//!   first seconds, before any split. Each shard counter has a partition key of its own and a
//!   buyer's count lives in the buyer's partition (`infra/aws/TABLE.md`, "Shard partitions"),
//!   so at the opening each shard takes 1,000 write units a second. (Before that layout they all
//!   shared `FLIGHT#<id>`'s 1,000, however many shards: 250 bookings a second.)
//!
//! Only the flight's items are metered (its shards, its buyers' counts, the flight): the other
//! items a booking writes (the booking, the idempotency record, the rate-limit window) are
//! under the user's own key, one user's
//! requests apart, and never near a limit. A throttled transaction is answered as the adapter
//! answers one (`StoreError::Throttled`: DynamoDB cancels it with a `ThrottlingError` reason,
//! which the SDK does not retry), after a round trip's time; the service's own retry
//! (`with_retry`) and the client's are what try again. A throttled inventory read is
//! answered the same way, where the SDK would retry it first (a small pessimism). Each bucket
//! holds a tenth of a second of its rate and starts full: a partition's limit is a rate, and
//! burst capacity does not lift it, so only a little slack is allowed.
//!
//! Two limits sit above the keys':
//! - the table's: what it serves at once (a new on-demand table 4,000 write units a second, a
//!   pre-warmed one its warm throughput, never past the table quota), one bucket that every
//!   write and read of the run is charged to ([`Capacity::charge_table`], from the cost
//!   meter, for what DynamoDB bills). Only the flight's transactions are refused by it (as by
//!   the keys' limits); the other requests are charged and never refused, so the bookings
//!   bear the table's throttling, which is where a sale's writes are;
//! - the items' transactions: a `TransactWriteItems` holds each of its items for its lock
//!   span ([`super::AwsProfile::transaction_lock`]), and one reaching an item another holds is
//!   cancelled `TransactionConflict` ([`Capacity::lock`]), billed, and answered after its
//!   round trip; the service's `with_retry` tries it again, as over the adapter. The probability
//!   is not a constant: it is the overlap of the transactions' drawn spans on the item, so
//!   it grows with the item's rate.

use super::cost::{CostMeter, Item, Request};
use super::profile::Input;
use super::service_time::AwsServiceTime;
use async_trait::async_trait;
use seatgate::domain::{
    Admission, Booking, BookingAnswer, BookingId, Flight, FlightId, IdempotencyKey,
    IdempotencyRecord, Inventory, Millis, Page, PageSize, UserId,
};
use seatgate::ports::{Begun, BookRefusal, CancelBookingRefusal, Clock, Flights, StoreError};
use seatgate_memory::{Op, ServiceTime};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Which keys share a throughput limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Item,
    PartitionKey,
}

/// The share of a second's units a bucket holds.
const BUCKET_SECONDS: f64 = 0.1;

/// Write units a transactional write of one item (under 1 KB) costs.
pub const TRANSACTION_ITEM_WRITE_UNITS: f64 = 2.0;

/// Read units a strongly consistent `Query` of a flight and its shards costs (under 4 KB).
pub const INVENTORY_READ_UNITS: f64 = 1.0;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    write_units: f64,
    read_units: f64,
    at: Millis,
}

/// The table's bucket's key (no item key starts with a space).
const TABLE: &str = " table";

/// The per-key buckets and what they refused.
pub struct Capacity {
    scope: Scope,
    write_units_per_s: f64,
    read_units_per_s: f64,
    /// The table's own rates (its instant capacity within the quota).
    table_write_units_per_s: f64,
    table_read_units_per_s: f64,
    clock: Arc<dyn Clock>,
    state: Mutex<CapacityState>,
}

#[derive(Debug, Default)]
struct CapacityState {
    buckets: BTreeMap<String, Bucket>,
    /// Refused for a key's limit, and for the table's.
    throttled: u64,
    table_throttled: u64,
    /// Transactions cancelled `TransactionConflict`.
    conflicts: u64,
    /// Each item's transaction lock: until when it is held (items of the flight's partition).
    locks: BTreeMap<String, Millis>,
    /// Write units charged, by key (refused requests charge nothing: DynamoDB bills the
    /// requests it runs).
    write_units: BTreeMap<String, f64>,
}

impl Capacity {
    /// Per-key limits of `write_units_per_s` and `read_units_per_s` by `scope`, under a table
    /// that serves `table_units_per_s` (write, read) at once.
    pub fn new(
        scope: Scope,
        (write_units_per_s, read_units_per_s): (u32, u32),
        (table_write, table_read): (u32, u32),
        clock: Arc<dyn Clock>,
    ) -> Self {
        Capacity {
            scope,
            write_units_per_s: f64::from(write_units_per_s.max(1)),
            read_units_per_s: f64::from(read_units_per_s.max(1)),
            table_write_units_per_s: f64::from(table_write.max(1)),
            table_read_units_per_s: f64::from(table_read.max(1)),
            clock,
            state: Mutex::new(CapacityState::default()),
        }
    }

    /// The item a transaction locks, whatever the limits' scope (a lock is an item's).
    fn item(flight: &FlightId, sort_key: &str) -> String {
        format!("FLIGHT#{flight}/{sort_key}")
    }

    /// A transaction of `items` reaching them at `now`, holding each for `span`: `true` if it
    /// locked them all; `false` if another still holds one (it is cancelled
    /// `TransactionConflict`, locks nothing and is counted).
    pub fn lock(&self, items: &[String], span: std::time::Duration) -> bool {
        let now = self.clock.now();
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if items
            .iter()
            .any(|item| s.locks.get(item).is_some_and(|until| *until > now))
        {
            s.conflicts += 1;
            return false;
        }
        let until = now.plus(span);
        for item in items {
            s.locks.insert(item.clone(), until);
        }
        true
    }

    /// Charges what DynamoDB billed to the table's bucket, never refusing (see the module).
    pub fn charge_table(&self, write_units: f64, read_units: f64) {
        let now = self.clock.now();
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut b = self.refilled_table(s.buckets.get(TABLE).copied(), now);
        b.write_units -= write_units;
        b.read_units -= read_units;
        s.buckets.insert(TABLE.into(), b);
    }

    /// Whether the table has `write_units` for a request now; counts a refusal.
    fn table_admits(&self, write_units: f64) -> bool {
        let now = self.clock.now();
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let b = self.refilled_table(s.buckets.get(TABLE).copied(), now);
        if b.write_units < write_units {
            s.table_throttled += 1;
            return false;
        }
        true
    }

    fn refilled_table(&self, bucket: Option<Bucket>, now: Millis) -> Bucket {
        refill(
            bucket,
            now,
            self.table_write_units_per_s,
            self.table_read_units_per_s,
        )
    }

    /// The limit's key for one of the flight's items, named by its kind's sort key in the
    /// layout before shard partitions (`FLIGHT`, `SHARD#<nn>`, `USER#<user>`): per item, or
    /// its partition key as `seatgate-aws` writes it (`infra/aws/TABLE.md`: each shard its own,
    /// a buyer's count in the buyer's partition, the flight under `FLIGHT#<id>`).
    fn key(&self, flight: &FlightId, sort_key: &str) -> String {
        match self.scope {
            Scope::Item => format!("FLIGHT#{flight}/{sort_key}"),
            Scope::PartitionKey => match sort_key.split_once('#') {
                Some(("SHARD", nn)) => format!("FLIGHT#{flight}#SHARD#{nn}"),
                Some(("USER", user)) => format!("USER#{user}"),
                _ => format!("FLIGHT#{flight}"),
            },
        }
    }

    /// Charges every `(key, write units, read units)` at once, or none: `false` if any key is
    /// short (the whole request is throttled, as a transaction is).
    fn charge(&self, items: &[(String, f64, f64)]) -> bool {
        let now = self.clock.now();
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut refilled: Vec<(String, Bucket)> = Vec::with_capacity(items.len());
        for (key, w, r) in items {
            let before = refilled
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, b)| *b)
                .or_else(|| s.buckets.get(key).copied());
            let mut b = self.refilled(before, now);
            if b.write_units < *w || b.read_units < *r {
                s.throttled += 1;
                return false;
            }
            b.write_units -= w;
            b.read_units -= r;
            refilled.retain(|(k, _)| k != key);
            refilled.push((key.clone(), b));
        }
        for (key, w, _) in items {
            *s.write_units.entry(key.clone()).or_default() += w;
        }
        s.buckets.extend(refilled);
        true
    }

    /// Charges write units that were spent whatever the buckets held (a bucket may go below
    /// zero, and later requests wait for it to refill).
    fn charge_unrefused(&self, items: &[(String, f64)]) {
        let now = self.clock.now();
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        for (key, w) in items {
            let mut b = self.refilled(s.buckets.get(key).copied(), now);
            b.write_units -= w;
            s.buckets.insert(key.clone(), b);
            *s.write_units.entry(key.clone()).or_default() += w;
        }
    }

    /// A key's bucket at `now`: full if the key is new, else refilled at the rates since it
    /// was last charged, never past its slack.
    fn refilled(&self, bucket: Option<Bucket>, now: Millis) -> Bucket {
        refill(bucket, now, self.write_units_per_s, self.read_units_per_s)
    }

    /// Requests refused for throughput so far.
    pub fn throttled(&self) -> u64 {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .throttled
    }

    /// Requests refused for the table's limit so far.
    pub fn table_throttled(&self) -> u64 {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .table_throttled
    }

    /// Transactions cancelled `TransactionConflict` so far.
    pub fn conflicts(&self) -> u64 {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .conflicts
    }

    /// Write units charged so far, over every key.
    pub fn write_units(&self) -> f64 {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .write_units
            .values()
            .sum()
    }
}

/// A key's bucket at `now`: full if the key is new, else refilled at the rates since it was
/// last charged, never past its slack.
fn refill(
    bucket: Option<Bucket>,
    now: Millis,
    write_units_per_s: f64,
    read_units_per_s: f64,
) -> Bucket {
    let (w_cap, r_cap) = (
        write_units_per_s * BUCKET_SECONDS,
        read_units_per_s * BUCKET_SECONDS,
    );
    let Some(b) = bucket else {
        return Bucket {
            write_units: w_cap,
            read_units: r_cap,
            at: now,
        };
    };
    let secs = now.since(b.at).as_secs_f64();
    Bucket {
        write_units: (b.write_units + secs * write_units_per_s).min(w_cap),
        read_units: (b.read_units + secs * read_units_per_s).min(r_cap),
        at: now,
    }
}

/// The flights port behind [`Capacity`]: a transaction over its keys' or the table's limits
/// is refused `Throttled` after a round trip, one meeting another's lock on an item is
/// cancelled `TransactionConflict` (billed: `meter`); everything else is passed on.
pub struct MeteredFlights {
    pub inner: Arc<dyn Flights>,
    pub capacity: Arc<Capacity>,
    pub service_time: Arc<AwsServiceTime>,
    pub meter: Arc<CostMeter>,
}

impl MeteredFlights {
    /// A refused request still took its round trip.
    async fn refuse(&self, op: Op) -> StoreError {
        tokio::time::sleep(self.service_time.draw(op)).await;
        StoreError::Throttled
    }

    /// Admits a transaction of `items` (its flight-partition items as `(sort key, kind)`, and
    /// the kinds of its other items): its keys' and the table's units, then its items' locks.
    /// `Err` is the answer it got instead, after its round trip.
    async fn admit(
        &self,
        op: Op,
        flight: &FlightId,
        hot: &[(String, Item)],
        others: &[Item],
    ) -> Result<(), StoreError> {
        let c = &self.capacity;
        let billed = TRANSACTION_ITEM_WRITE_UNITS * (hot.len() + others.len()) as f64;
        let keyed: Vec<(String, f64, f64)> = hot
            .iter()
            .map(|(sk, _)| (c.key(flight, sk), TRANSACTION_ITEM_WRITE_UNITS, 0.0))
            .collect();
        if !c.table_admits(billed) || !c.charge(&keyed) {
            return Err(self.refuse(op).await);
        }
        let items: Vec<String> = hot
            .iter()
            .map(|(sk, _)| Capacity::item(flight, sk))
            .collect();
        if !c.lock(&items, self.service_time.draw_input(Input::TransactionLock)) {
            // Cancelled, and billed as a refused transaction of all its items.
            let mut kinds: Vec<Item> = hot.iter().map(|(_, k)| *k).collect();
            kinds.extend_from_slice(others);
            self.meter.add(&[Request::Transaction(kinds, false)]);
            tokio::time::sleep(self.service_time.draw(op)).await;
            return Err(StoreError::TransactionConflict);
        }
        Ok(())
    }
}

#[async_trait]
impl Flights for MeteredFlights {
    async fn create_flight(&self, flight: &Flight) -> Result<bool, StoreError> {
        self.inner.create_flight(flight).await
    }

    async fn inventory(&self, id: &FlightId) -> Result<Option<Inventory>, StoreError> {
        if !self
            .capacity
            .charge(&[(self.capacity.key(id, "FLIGHT"), 0.0, INVENTORY_READ_UNITS)])
        {
            return Err(self.refuse(Op::Inventory).await);
        }
        self.inner.inventory(id).await
    }

    async fn book(
        &self,
        booking: &Booking,
        max_per_user: Option<u32>,
        answer_to: Option<(&IdempotencyKey, &str)>,
        admission: Option<&Admission>,
    ) -> Result<(), BookRefusal> {
        // A head count no limit admits is refused before any request.
        if !Flight::never_fits(booking.head_count, max_per_user) {
            // The flight's items (`infra/aws/TABLE.md`): its shard, and the per-user count
            // when a limit is set; the booking and the idempotency record are the user's.
            let mut hot = vec![(format!("SHARD#{:02}", booking.shard), Item::Shard)];
            if max_per_user.is_some() {
                hot.push((format!("USER#{}", booking.user_id), Item::UserCount));
            }
            let mut others = vec![Item::Booking];
            if answer_to.is_some() {
                others.push(Item::Idempotency);
            }
            if admission.is_some() {
                others.push(Item::Window);
            }
            self.admit(Op::Book, &booking.flight_id, &hot, &others)
                .await?;
        }
        self.inner
            .book(booking, max_per_user, answer_to, admission)
            .await
    }

    async fn mark_sold_out(&self, id: &FlightId, shards: u32) -> Result<bool, StoreError> {
        // A condition check per shard and the flight's own write, each an item of the
        // transaction.
        let mut hot: Vec<(String, Item)> = (0..shards)
            .map(|s| (format!("SHARD#{s:02}"), Item::Shard))
            .collect();
        hot.push(("FLIGHT".into(), Item::Flight));
        self.admit(Op::MarkSoldOut, id, &hot, &[]).await?;
        self.inner.mark_sold_out(id, shards).await
    }

    async fn bookings_of(
        &self,
        user: &UserId,
        after: Option<&BookingId>,
        size: PageSize,
    ) -> Result<Page<Booking, BookingId>, StoreError> {
        self.inner.bookings_of(user, after, size).await
    }

    async fn cancel_booking(
        &self,
        user: &UserId,
        flight: &FlightId,
        id: &BookingId,
        now: Millis,
    ) -> Result<Booking, CancelBookingRefusal> {
        // Which items a cancel writes (the shard, the per-user count) is known only from the
        // booking it reads, so a cancel is charged once it is done, never refused: cancels are
        // rare beside bookings. Its flight item and shard; a per-user count is not seen here.
        let out = self.inner.cancel_booking(user, flight, id, now).await;
        if let Ok(b) = &out {
            let c = &self.capacity;
            c.charge_unrefused(&[
                (c.key(flight, "FLIGHT"), TRANSACTION_ITEM_WRITE_UNITS),
                (
                    c.key(flight, &format!("SHARD#{:02}", b.shard)),
                    TRANSACTION_ITEM_WRITE_UNITS,
                ),
            ]);
        }
        out
    }

    async fn begin_request(&self, record: &IdempotencyRecord) -> Result<Begun, StoreError> {
        self.inner.begin_request(record).await
    }

    async fn finish_request(
        &self,
        user: &UserId,
        key: &IdempotencyKey,
        token: &str,
        answer: &BookingAnswer,
    ) -> Result<bool, StoreError> {
        self.inner.finish_request(user, key, token, answer).await
    }

    async fn abandon_request(
        &self,
        user: &UserId,
        key: &IdempotencyKey,
        token: &str,
    ) -> Result<(), StoreError> {
        self.inner.abandon_request(user, key, token).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seatgate_memory::runtime::TokioClock;

    fn capacity(scope: Scope) -> (Capacity, Arc<TokioClock>) {
        let clock = Arc::new(TokioClock::starting_at(Millis(0)));
        (
            Capacity::new(scope, (1_000, 3_000), (40_000, 40_000), clock.clone()),
            clock,
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_takes_its_rate_and_refuses_past_it_until_time_refills_it() {
        let (c, _) = capacity(Scope::Item);
        let flight = FlightId::parse("F-1").unwrap();
        let shard = |n: u32| (c.key(&flight, &format!("SHARD#{n:02}")), 2.0, 0.0);
        // 1,000 units a second, a tenth of a second of slack: 50 transactional writes of one
        // item at once, then a refusal.
        assert!((0..50).all(|_| c.charge(&[shard(0)])));
        assert!(!c.charge(&[shard(0)]));
        // Another item has its own limit.
        assert!(c.charge(&[shard(1)]));
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        // 10 ms refill 10 units: five more writes.
        assert!((0..5).all(|_| c.charge(&[shard(0)])));
        assert!(!c.charge(&[shard(0)]));
        assert_eq!(c.throttled(), 2);
        assert_eq!(c.write_units(), 2.0 * 56.0);
        // Over a second, writes as fast as they are admitted come to the rate: 500 more.
        let mut admitted = 0;
        for _ in 0..1_000 {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            while c.charge(&[shard(2)]) {
                admitted += 1;
            }
        }
        // (The key's bucket starts at its first write, 1 ms in: 999 ms of refill.)
        assert!(
            (548..=550).contains(&admitted),
            "the slack, then the rate: {admitted}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn by_partition_key_each_shard_has_its_own_limit_and_a_buyers_count_the_buyers() {
        let (c, _) = capacity(Scope::PartitionKey);
        let flight = FlightId::parse("F-1").unwrap();
        let shard = |n: u32| (c.key(&flight, &format!("SHARD#{n:02}")), 2.0, 0.0);
        let count = |u: &str| (c.key(&flight, &format!("USER#{u}")), 2.0, 0.0);
        assert_eq!(shard(3).0, "FLIGHT#F-1#SHARD#03");
        assert_eq!(count("u1").0, "USER#u1");
        assert_eq!(c.key(&flight, "FLIGHT"), "FLIGHT#F-1");
        // 50 writes fill one shard's partition; the next shard's and the buyers' are apart.
        assert!((0..50).all(|_| c.charge(&[shard(0)])));
        assert!(!c.charge(&[shard(0)]));
        assert!((0..50).all(|n| c.charge(&[shard(1), count(&format!("u{n}"))])));
        // A buyer's own count is one partition: a buyer's 51st write in a tenth of a second is
        // refused, and so is the transaction it is in.
        assert!((0..49).all(|_| c.charge(&[count("u0")])));
        assert!(!c.charge(&[shard(2), count("u0")]));
        assert!(c.charge(&[shard(2)]));
        // A request short on one of its keys charges none of them.
        let (c, _) = capacity(Scope::Item);
        assert!((0..50).all(|_| c.charge(&[shard_of(&c, &flight, 0)])));
        assert!(!c.charge(&[shard_of(&c, &flight, 1), shard_of(&c, &flight, 0)]));
        assert!((0..50).all(|_| c.charge(&[shard_of(&c, &flight, 1)])));
    }

    #[tokio::test(start_paused = true)]
    async fn a_transaction_reaching_an_item_another_holds_is_cancelled_and_locks_nothing() {
        let (c, _) = capacity(Scope::Item);
        let flight = FlightId::parse("F-1").unwrap();
        let (shard, user, other) = (
            Capacity::item(&flight, "SHARD#00"),
            Capacity::item(&flight, "USER#u1"),
            Capacity::item(&flight, "USER#u2"),
        );
        let span = std::time::Duration::from_millis(3);
        assert!(c.lock(&[shard.clone(), user.clone()], span));
        // Any one item held cancels the whole transaction, and it locks none of the rest.
        assert!(!c.lock(&[other.clone(), shard.clone()], span));
        assert!(c.lock(std::slice::from_ref(&other), span));
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        assert!(!c.lock(std::slice::from_ref(&user), span));
        // Released at the end of its span, whatever the limits' scope.
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        assert!(c.lock(&[shard, user], span));
        assert_eq!(c.conflicts(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn the_table_refuses_past_its_rate_whatever_the_items_and_charges_every_request() {
        let clock = Arc::new(TokioClock::starting_at(Millis(0)));
        // A new on-demand table: 4,000 write units a second, a tenth of a second's slack.
        let c = Capacity::new(Scope::Item, (1_000, 3_000), (4_000, 12_000), clock);
        assert!(c.table_admits(400.0));
        c.charge_table(390.0, 0.0);
        assert!(c.table_admits(10.0) && !c.table_admits(11.0));
        // Single-item writes the model never refuses still use the table's units.
        c.charge_table(10.0, 5.0);
        assert!(!c.table_admits(1.0));
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        assert!(c.table_admits(20.0) && !c.table_admits(21.0));
        assert_eq!(c.table_throttled(), 3);
        assert_eq!(c.throttled(), 0, "no key was short");
    }

    fn shard_of(c: &Capacity, flight: &FlightId, n: u32) -> (String, f64, f64) {
        (c.key(flight, &format!("SHARD#{n:02}")), 2.0, 0.0)
    }
}
