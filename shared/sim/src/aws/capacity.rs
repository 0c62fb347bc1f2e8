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
//!   first seconds, before any split: a flight's shard counters and per-user counts all live
//!   under `FLIGHT#<id>` (`infra/aws/TABLE.md`), so they share 1,000 write units a second
//!   however many shards there are.
//!
//! Only the flight's partition is metered: the other items a booking writes (the booking, the
//! idempotency record, the rate-limit window) are under the user's own key, one user's
//! requests apart, and never near a limit. A throttled transaction is answered as the adapter
//! answers one (`StoreError::Throttled`: DynamoDB cancels it with a `ThrottlingError` reason,
//! which the SDK does not retry), after a round trip's time; the service's own retry
//! (`with_retry`) and the client's are what try again. A throttled inventory `Query` is
//! answered the same way, where the SDK would retry it first (a small pessimism). Each bucket
//! holds a tenth of a second of its rate and starts full: a partition's limit is a rate, and
//! burst capacity does not lift it, so only a little slack is allowed.

use super::service_time::AwsServiceTime;
use async_trait::async_trait;
use seatgate::domain::{
    Booking, BookingAnswer, BookingId, Flight, FlightId, IdempotencyKey, IdempotencyRecord,
    Inventory, Millis, Page, PageSize, UserId,
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

/// The per-key buckets and what they refused.
pub struct Capacity {
    scope: Scope,
    write_units_per_s: f64,
    read_units_per_s: f64,
    clock: Arc<dyn Clock>,
    state: Mutex<CapacityState>,
}

#[derive(Debug, Default)]
struct CapacityState {
    buckets: BTreeMap<String, Bucket>,
    throttled: u64,
    /// Write units charged, by key (refused requests charge nothing: DynamoDB bills the
    /// requests it runs).
    write_units: BTreeMap<String, f64>,
}

impl Capacity {
    pub fn new(
        scope: Scope,
        write_units_per_s: u32,
        read_units_per_s: u32,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Capacity {
            scope,
            write_units_per_s: f64::from(write_units_per_s.max(1)),
            read_units_per_s: f64::from(read_units_per_s.max(1)),
            clock,
            state: Mutex::new(CapacityState::default()),
        }
    }

    /// The limit's key for an item of the flight's partition.
    fn key(&self, flight: &FlightId, sort_key: &str) -> String {
        match self.scope {
            Scope::Item => format!("FLIGHT#{flight}/{sort_key}"),
            Scope::PartitionKey => format!("FLIGHT#{flight}"),
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
        let (w_cap, r_cap) = (
            self.write_units_per_s * BUCKET_SECONDS,
            self.read_units_per_s * BUCKET_SECONDS,
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
            write_units: (b.write_units + secs * self.write_units_per_s).min(w_cap),
            read_units: (b.read_units + secs * self.read_units_per_s).min(r_cap),
            at: now,
        }
    }

    /// Requests refused for throughput so far.
    pub fn throttled(&self) -> u64 {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .throttled
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

/// The flights port behind [`Capacity`]: a request over its keys' limits is refused
/// `Throttled` after a round trip; everything else is passed on.
pub struct MeteredFlights {
    pub inner: Arc<dyn Flights>,
    pub capacity: Arc<Capacity>,
    pub service_time: Arc<AwsServiceTime>,
}

impl MeteredFlights {
    /// A refused request still took its round trip.
    async fn refuse(&self, op: Op) -> StoreError {
        tokio::time::sleep(self.service_time.draw(op)).await;
        StoreError::Throttled
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
    ) -> Result<(), BookRefusal> {
        let c = &self.capacity;
        let mut items = vec![(
            c.key(&booking.flight_id, &format!("SHARD#{:02}", booking.shard)),
            TRANSACTION_ITEM_WRITE_UNITS,
            0.0,
        )];
        if max_per_user.is_some() {
            items.push((
                c.key(&booking.flight_id, &format!("USER#{}", booking.user_id)),
                TRANSACTION_ITEM_WRITE_UNITS,
                0.0,
            ));
        }
        // A head count no limit admits is refused before any request.
        if !Flight::never_fits(booking.head_count, max_per_user) && !c.charge(&items) {
            return Err(self.refuse(Op::Book).await.into());
        }
        self.inner.book(booking, max_per_user, answer_to).await
    }

    async fn mark_sold_out(&self, id: &FlightId, shards: u32) -> Result<bool, StoreError> {
        // A condition check per shard and the flight's own write, each an item of the
        // transaction.
        let c = &self.capacity;
        let mut items: Vec<(String, f64, f64)> = (0..shards)
            .map(|s| {
                (
                    c.key(id, &format!("SHARD#{s:02}")),
                    TRANSACTION_ITEM_WRITE_UNITS,
                    0.0,
                )
            })
            .collect();
        items.push((c.key(id, "FLIGHT"), TRANSACTION_ITEM_WRITE_UNITS, 0.0));
        if !c.charge(&items) {
            return Err(self.refuse(Op::MarkSoldOut).await);
        }
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
    use seatgate_testkit::TokioClock;

    fn capacity(scope: Scope) -> (Capacity, Arc<TokioClock>) {
        let clock = Arc::new(TokioClock::starting_at(Millis(0)));
        (Capacity::new(scope, 1_000, 3_000, clock.clone()), clock)
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
    async fn under_one_partition_key_every_shard_shares_the_limit() {
        let (c, _) = capacity(Scope::PartitionKey);
        let flight = FlightId::parse("F-1").unwrap();
        let shard = |n: u32| (c.key(&flight, &format!("SHARD#{n:02}")), 2.0, 0.0);
        assert!((0..50).all(|n| c.charge(&[shard(n % 16)])));
        assert!(!c.charge(&[shard(7)]));
        // A request short on one of its keys charges none of them.
        let (c, _) = capacity(Scope::Item);
        assert!((0..50).all(|_| c.charge(&[shard_of(&c, &flight, 0)])));
        assert!(!c.charge(&[shard_of(&c, &flight, 1), shard_of(&c, &flight, 0)]));
        assert!((0..50).all(|_| c.charge(&[shard_of(&c, &flight, 1)])));
    }

    fn shard_of(c: &Capacity, flight: &FlightId, n: u32) -> (String, f64, f64) {
        (c.key(flight, &format!("SHARD#{n:02}")), 2.0, 0.0)
    }
}
