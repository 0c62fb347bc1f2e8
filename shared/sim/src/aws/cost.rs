//! What each store call costs on DynamoDB: the requests `seatgate-aws`'s adapter sends for it and
//! the write units they take, counted by decorators on the ports as the simulator runs, so a
//! scenario's cost is measured rather than estimated.
//!
//! The rules follow the adapter call by call (and `infra/aws/TABLE.md`), from the call's own
//! arguments and answer:
//! - a transition is one `TransactWriteItems` of the intent and its history record, plus the
//!   seat's claim when it takes or releases one, its suppression and its reading when it
//!   records them, preceded by a `GetItem` of the intent unless the caller passed the copy it
//!   saw; refused on what it read, it is that `GetItem` alone;
//! - a confirm is one transaction of the action, intent, consent and history record (and the
//!   confirm window when admission counts it); a wait's registration one of the intent,
//!   consent and history record;
//! - a booking one transaction of the shard, the booking (and the per-user count, and the
//!   idempotency record when the request has a key); a cancel a `GetItem` of the booking, then
//!   one transaction of the booking, the shard, the flight (and the per-user count if the
//!   booking raised it);
//! - the rate limit's window, an idempotency record's begin, finish and abandon, an action's
//!   prepare: one single-item write each; every read one `GetItem` or `Query`.
//!
//! Write units: AWS bills an item write by its size rounded up to 1 KB, a transaction's items
//! twice, and a write refused by its condition as if it applied ([`Costs::billed_write_units`];
//! [`Item::units`] gives each kind's size in units). `tests/tests/cost_model.rs` runs the
//! burst, a booking, a cancel and a wait through the same services on this model and on
//! DynamoDB Local and checks that they agree exactly on the requests by operation, on the
//! units of the single-item writes that applied (what DynamoDB reports for them), on the
//! transactions that applied, and that every item left in the table fits its kind's units.
//! A transaction's own report is not compared: DynamoDB Local does not report it as AWS bills
//! it (`BENCHMARKS.md` has the experiment). A transition that meets a concurrent write (its
//! pinned version moved) costs the adapter another transaction, which this does not see: the
//! checked operations are sequential, and in the simulator's runs it is a small undercount.

use async_trait::async_trait;
use seatgate::domain::{
    Action, ActionId, Admission, Booking, BookingAnswer, BookingId, BreakerState, CacheEntry,
    ConsentRecord, Flight, FlightId, IdempotencyKey, IdempotencyRecord, Intent, IntentId,
    Inventory, Millis, Page, PageSize, RateWindow, ReadFailure, ReadKey, Reading, RefreshLease,
    RoutePauses, SeatClaimEffect, SeatId, Secret, Suppression, TransitionRecord, TransitionRequest,
    UpstreamRoute, UserId,
};
use seatgate::ports::{
    Actions, Begun, BookRefusal, BreakerStates, CancelBookingRefusal, ConfirmError, Confirmation,
    Credentials, Flights, Intents, MAX_BATCH_READ, OperatorLeases, RateLimits, Readings,
    StoreError, TransitionError,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

/// The due index's shards, one `Query` each per due scan (`seatgate_aws`'s `TABLE.due_shards`,
/// which `tests/tests/cost_model.rs` checks this equals; a shard's further pages are not seen).
pub const DUE_SHARDS: usize = 16;

/// The open index's shards, one `Query` each per look for a seat's open intents
/// (`seatgate_aws`'s `TABLE.open_shards`, which `tests/tests/cost_model.rs` checks this equals).
pub const OPEN_SHARDS: usize = 4;

/// What the calls so far cost.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Costs {
    /// Requests by DynamoDB operation name (`TransactWriteItems`, `GetItem`, ...).
    pub requests: BTreeMap<&'static str, u64>,
    /// Write units of the single-item writes that applied, by operation: what DynamoDB reports
    /// for them (a refused write reports none).
    pub applied_single_units: BTreeMap<&'static str, u64>,
    /// Transactions that applied.
    pub applied_transactions: u64,
    /// Write units of every write request, applied or refused, before the transactional
    /// factor: single-item writes, and transactions' items.
    pub single_units: u64,
    pub transaction_units: u64,
}

impl Costs {
    pub fn requests(&self, op: &str) -> u64 {
        self.requests.get(op).copied().unwrap_or(0)
    }

    pub fn total_requests(&self) -> u64 {
        self.requests.values().sum()
    }

    /// Write units AWS bills: refused writes included, a transaction's items twice.
    pub fn billed_write_units(&self) -> u64 {
        2 * self.transaction_units + self.single_units
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &Costs) -> Costs {
        let minus = |now: &BTreeMap<&'static str, u64>, then: &BTreeMap<&'static str, u64>| {
            now.iter()
                .map(|(k, v)| (*k, v - then.get(k).copied().unwrap_or(0)))
                .filter(|(_, v)| *v > 0)
                .collect()
        };
        Costs {
            requests: minus(&self.requests, &earlier.requests),
            applied_single_units: minus(&self.applied_single_units, &earlier.applied_single_units),
            applied_transactions: self.applied_transactions - earlier.applied_transactions,
            single_units: self.single_units - earlier.single_units,
            transaction_units: self.transaction_units - earlier.transaction_units,
        }
    }
}

/// The running count, shared by every decorator of one world, and the bookings that raised a
/// per-user count (the booking item's `counted` attribute, which a cancel on any instance
/// reads back), for their cancels' cost.
#[derive(Default)]
pub struct CostMeter {
    costs: Mutex<Costs>,
    counted: Mutex<BTreeSet<BookingId>>,
    /// The table whose bucket every billed unit is charged to, if one is metered.
    table: Option<Arc<super::capacity::Capacity>>,
}

impl std::fmt::Debug for CostMeter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CostMeter")
            .field("costs", &self.costs)
            .finish_non_exhaustive()
    }
}

/// Read units a read is charged to the table: a strongly consistent read of under 4 KB (an
/// eventually consistent one costs half: an upper bound).
const READ_UNITS: f64 = 1.0;

/// An item seatgate writes, by kind (`infra/aws/TABLE.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Item {
    Action,
    Intent,
    Consent,
    History,
    /// A rate-limit window's counter (the confirm window, the booking window).
    Window,
    SeatClaim,
    Suppression,
    Reading,
    Flight,
    Shard,
    UserCount,
    Booking,
    Idempotency,
    Credential,
    /// The breaker's state and the routes' pauses (one small item each).
    Breaker,
    Lease,
    /// A flight's waiting-list gate (its length and join count), conditioned by every return.
    WaitlistGate,
}

impl Item {
    pub const ALL: [Item; 17] = [
        Item::Action,
        Item::Intent,
        Item::Consent,
        Item::History,
        Item::Window,
        Item::SeatClaim,
        Item::Suppression,
        Item::Reading,
        Item::Flight,
        Item::Shard,
        Item::UserCount,
        Item::Booking,
        Item::Idempotency,
        Item::Credential,
        Item::Breaker,
        Item::Lease,
        Item::WaitlistGate,
    ];

    /// Write units one write of this item takes (its size rounded up to 1 KB): one for every
    /// kind, each under 1 KB. `tests/tests/cost_model.rs` measures the items its operations
    /// leave in DynamoDB Local's table (the largest, an idempotency record, 486 bytes) and
    /// fails if one outgrows this; seat claims, readings, credentials, the breaker and leases are
    /// not among them (small fixed-shape items, by `infra/aws/TABLE.md`).
    pub const fn units(self) -> u64 {
        1
    }
}

/// One request's shape.
#[derive(Debug, Clone)]
pub enum Request {
    Read(&'static str),
    /// A single-item write (`PutItem`, `UpdateItem`, `DeleteItem`) of an item, and whether it
    /// applied.
    Write(&'static str, Item, bool),
    /// A transaction of these items, and whether it applied.
    Transaction(Vec<Item>, bool),
}

impl CostMeter {
    /// A meter that also charges every billed unit to `table`'s bucket.
    pub fn charging(table: Arc<super::capacity::Capacity>) -> Self {
        CostMeter {
            table: Some(table),
            ..CostMeter::default()
        }
    }

    pub fn snapshot(&self) -> Costs {
        self.costs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn add(&self, requests: &[Request]) {
        if let Some(table) = &self.table {
            let (mut write_units, mut read_units) = (0.0, 0.0);
            for r in requests {
                match r {
                    Request::Read(_) => read_units += READ_UNITS,
                    Request::Write(_, item, _) => write_units += item.units() as f64,
                    Request::Transaction(items, _) => {
                        write_units += 2.0 * items.iter().map(|i| i.units()).sum::<u64>() as f64
                    }
                }
            }
            table.charge_table(write_units, read_units);
        }
        let mut c = self.costs.lock().unwrap_or_else(PoisonError::into_inner);
        for r in requests {
            match r {
                Request::Read(op) => *c.requests.entry(op).or_default() += 1,
                Request::Write(op, item, applied) => {
                    *c.requests.entry(op).or_default() += 1;
                    c.single_units += item.units();
                    if *applied {
                        *c.applied_single_units.entry(op).or_default() += item.units();
                    }
                }
                Request::Transaction(items, applied) => {
                    *c.requests.entry("TransactWriteItems").or_default() += 1;
                    c.transaction_units += items.iter().map(|i| i.units()).sum::<u64>();
                    if *applied {
                        c.applied_transactions += 1;
                    }
                }
            }
        }
    }
}

/// The actions port, costed.
pub struct CostedActions {
    pub inner: Arc<dyn Actions>,
    pub meter: Arc<CostMeter>,
}

#[async_trait]
impl Actions for CostedActions {
    async fn put_action(&self, action: &Action) -> Result<(), StoreError> {
        let out = self.inner.put_action(action).await;
        self.meter
            .add(&[Request::Write("PutItem", Item::Action, out.is_ok())]);
        out
    }

    async fn get_action(&self, id: &ActionId) -> Result<Option<Action>, StoreError> {
        self.meter.add(&[Request::Read("GetItem")]);
        self.inner.get_action(id).await
    }

    async fn confirm(&self, confirmation: &Confirmation) -> Result<(), ConfirmError> {
        let out = self.inner.confirm(confirmation).await;
        let mut items = vec![Item::Action, Item::Intent, Item::Consent, Item::History];
        if confirmation.admission.is_some() {
            items.push(Item::Window);
        }
        self.meter.add(&[Request::Transaction(items, out.is_ok())]);
        out
    }
}

/// The intents port, costed.
pub struct CostedIntents {
    pub inner: Arc<dyn Intents>,
    pub meter: Arc<CostMeter>,
}

/// The items a transition's transaction writes.
fn transition_items(request: &TransitionRequest) -> Vec<Item> {
    let mut items = vec![Item::Intent, Item::History];
    if request.seat_claim_effect() != SeatClaimEffect::None {
        items.push(Item::SeatClaim);
    }
    if request.suppression().is_some() {
        items.push(Item::Suppression);
    }
    if request.reading.is_some() {
        items.push(Item::Reading);
    }
    items
}

#[async_trait]
impl Intents for CostedIntents {
    async fn register_wait(
        &self,
        intent: &Intent,
        consent: &ConsentRecord,
    ) -> Result<(), StoreError> {
        let out = self.inner.register_wait(intent, consent).await;
        self.meter.add(&[Request::Transaction(
            vec![Item::Intent, Item::Consent, Item::History],
            out.is_ok(),
        )]);
        out
    }

    async fn get_intent(&self, id: &IntentId) -> Result<Option<Intent>, StoreError> {
        self.meter.add(&[Request::Read("GetItem")]);
        self.inner.get_intent(id).await
    }

    async fn get_consent(&self, id: &IntentId) -> Result<Option<ConsentRecord>, StoreError> {
        self.meter.add(&[Request::Read("GetItem")]);
        self.inner.get_consent(id).await
    }

    async fn intents(&self, ids: &[IntentId]) -> Result<Vec<Intent>, StoreError> {
        if !ids.is_empty() {
            self.meter.add(&[Request::Read("BatchGetItem")]);
        }
        self.inner.intents(ids).await
    }

    async fn open_on_seat(
        &self,
        seat_id: &SeatId,
        limit: usize,
    ) -> Result<Vec<Intent>, StoreError> {
        // One `Query` of the open index per shard (`infra/aws/TABLE.md`).
        if limit > 0 {
            self.meter.add(&vec![Request::Read("Query"); OPEN_SHARDS]);
        }
        self.inner.open_on_seat(seat_id, limit).await
    }

    async fn transition(&self, request: &TransitionRequest) -> Result<Intent, TransitionError> {
        let out = self.inner.transition(request).await;
        let items = transition_items(request);
        // As the adapter goes: the caller's copy, if it admits the transition, is written on
        // at once; otherwise (no copy, or one that does not admit it) the intent is read first
        // and the transition decided on what the store holds.
        let on_copy = request
            .seen()
            .is_some_and(|copy| copy.apply(request).is_some());
        let mut requests = Vec::with_capacity(2);
        if !on_copy {
            requests.push(Request::Read("GetItem"));
        }
        match &out {
            Ok(_) => requests.push(Request::Transaction(items, true)),
            // On the copy, a refusal (or a missing intent) comes back from the transaction's
            // failed condition; read first, it was decided on the read and nothing was sent.
            Err(TransitionError::Refused(_) | TransitionError::NotFound) if on_copy => {
                requests.push(Request::Transaction(items, false))
            }
            Err(TransitionError::Refused(_) | TransitionError::NotFound) => {}
            Err(_) => requests.push(Request::Transaction(items, false)),
        }
        self.meter.add(&requests);
        out
    }

    async fn history(
        &self,
        id: &IntentId,
        after: Option<u64>,
        size: PageSize,
    ) -> Result<Page<TransitionRecord, u64>, StoreError> {
        self.meter.add(&[Request::Read("Query")]);
        self.inner.history(id, after, size).await
    }

    async fn seat_claim(
        &self,
        seat_id: &SeatId,
    ) -> Result<Option<seatgate::domain::SeatClaim>, StoreError> {
        self.meter.add(&[Request::Read("GetItem")]);
        self.inner.seat_claim(seat_id).await
    }

    async fn due_intents(&self, now: Millis, limit: usize) -> Result<Vec<Intent>, StoreError> {
        // One `Query` of the due index per shard (`infra/aws/TABLE.md`).
        if limit > 0 {
            self.meter.add(&vec![Request::Read("Query"); DUE_SHARDS]);
        }
        self.inner.due_intents(now, limit).await
    }

    async fn suppression(
        &self,
        seat_id: &SeatId,
        now: Millis,
    ) -> Result<Option<Suppression>, StoreError> {
        self.meter.add(&[Request::Read("GetItem")]);
        self.inner.suppression(seat_id, now).await
    }

    async fn last_taken(&self, seat_id: &SeatId) -> Result<Option<Suppression>, StoreError> {
        self.meter.add(&[Request::Read("GetItem")]);
        self.inner.last_taken(seat_id).await
    }
}

/// The rate limit's counters, costed.
pub struct CostedRateLimits {
    pub inner: Arc<dyn RateLimits>,
    pub meter: Arc<CostMeter>,
}

#[async_trait]
impl RateLimits for CostedRateLimits {
    async fn take(&self, window: &RateWindow, limit: u32) -> Result<bool, StoreError> {
        let out = self.inner.take(window, limit).await;
        self.meter.add(&[Request::Write(
            "UpdateItem",
            Item::Window,
            matches!(out, Ok(true)),
        )]);
        out
    }
}

/// The flights port, costed.
pub struct CostedFlights {
    pub inner: Arc<dyn Flights>,
    pub meter: Arc<CostMeter>,
}

impl CostedFlights {
    pub fn new(inner: Arc<dyn Flights>, meter: Arc<CostMeter>) -> Self {
        CostedFlights { inner, meter }
    }

    fn counted(&self) -> std::sync::MutexGuard<'_, BTreeSet<BookingId>> {
        self.meter
            .counted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl Flights for CostedFlights {
    async fn create_flight(&self, flight: &Flight) -> Result<bool, StoreError> {
        let out = self.inner.create_flight(flight).await;
        let mut items = vec![Item::Flight];
        items.extend((0..flight.shards).map(|_| Item::Shard));
        self.meter
            .add(&[Request::Transaction(items, matches!(out, Ok(true)))]);
        out
    }

    async fn inventory(&self, id: &FlightId) -> Result<Option<Inventory>, StoreError> {
        // The flight's `GetItem`, then, if it is there, one `BatchGetItem` of its shards.
        let out = self.inner.inventory(id).await;
        if matches!(out, Ok(Some(_))) {
            self.meter
                .add(&[Request::Read("GetItem"), Request::Read("BatchGetItem")]);
        } else {
            self.meter.add(&[Request::Read("GetItem")]);
        }
        out
    }

    async fn book(
        &self,
        booking: &Booking,
        max_per_user: Option<u32>,
        answer_to: Option<(&IdempotencyKey, &str)>,
        admission: Option<&Admission>,
    ) -> Result<(), BookRefusal> {
        let out = self
            .inner
            .book(booking, max_per_user, answer_to, admission)
            .await;
        // A head count no limit admits is refused before any request.
        if !Flight::never_fits(booking.head_count, max_per_user) {
            let mut items = vec![Item::Shard, Item::Booking];
            if max_per_user.is_some() {
                items.push(Item::UserCount);
            }
            if answer_to.is_some() {
                items.push(Item::Idempotency);
            }
            if admission.is_some() {
                items.push(Item::Window);
            }
            self.meter.add(&[Request::Transaction(items, out.is_ok())]);
        }
        if out.is_ok() && max_per_user.is_some() {
            self.counted().insert(booking.booking_id.clone());
        }
        out
    }

    async fn mark_sold_out(&self, id: &FlightId, shards: u32) -> Result<bool, StoreError> {
        let out = self.inner.mark_sold_out(id, shards).await;
        let mut items: Vec<Item> = (0..shards).map(|_| Item::Shard).collect();
        items.push(Item::Flight);
        self.meter
            .add(&[Request::Transaction(items, matches!(out, Ok(true)))]);
        out
    }

    async fn bookings_of(
        &self,
        user: &UserId,
        after: Option<&BookingId>,
        size: PageSize,
    ) -> Result<Page<Booking, BookingId>, StoreError> {
        self.meter.add(&[Request::Read("Query")]);
        self.inner.bookings_of(user, after, size).await
    }

    async fn cancel_booking(
        &self,
        user: &UserId,
        flight: &FlightId,
        id: &BookingId,
        now: Millis,
    ) -> Result<Booking, CancelBookingRefusal> {
        let out = self.inner.cancel_booking(user, flight, id, now).await;
        let mut requests = vec![Request::Read("GetItem")];
        // Only a booked booking of this user is written; the rest are refused on the read. A
        // cancel reads the flight's waiting-list gate and conditions it: the model's flights have
        // nobody waiting (serving the list, which reads and writes more, is not modelled).
        if let Ok(b) = &out {
            requests.push(Request::Read("GetItem"));
            let mut items = vec![Item::Booking, Item::Shard, Item::Flight];
            if self.counted().contains(&b.booking_id) {
                items.push(Item::UserCount);
            }
            items.push(Item::WaitlistGate);
            requests.push(Request::Transaction(items, true));
        }
        self.meter.add(&requests);
        out
    }

    async fn begin_request(&self, record: &IdempotencyRecord) -> Result<Begun, StoreError> {
        let out = self.inner.begin_request(record).await;
        self.meter.add(&[Request::Write(
            "PutItem",
            Item::Idempotency,
            matches!(out, Ok(Begun::Started)),
        )]);
        out
    }

    async fn finish_request(
        &self,
        user: &UserId,
        key: &IdempotencyKey,
        token: &str,
        answer: &BookingAnswer,
    ) -> Result<bool, StoreError> {
        let out = self.inner.finish_request(user, key, token, answer).await;
        self.meter.add(&[Request::Write(
            "UpdateItem",
            Item::Idempotency,
            matches!(out, Ok(true)),
        )]);
        out
    }

    async fn abandon_request(
        &self,
        user: &UserId,
        key: &IdempotencyKey,
        token: &str,
    ) -> Result<(), StoreError> {
        let out = self.inner.abandon_request(user, key, token).await;
        // The adapter answers a delete refused by its condition as `Ok` too, so a refused
        // abandon is counted as applied here; no checked operation abandons one.
        self.meter
            .add(&[Request::Write("DeleteItem", Item::Idempotency, out.is_ok())]);
        out
    }
}

/// `ports`' actions, intents, flights and rate limits, costed on `meter`.
pub fn costed(
    mut ports: seatgate::service::Ports,
    meter: &Arc<CostMeter>,
) -> seatgate::service::Ports {
    ports.actions = Arc::new(CostedActions {
        inner: ports.actions,
        meter: meter.clone(),
    });
    ports.intents = Arc::new(CostedIntents {
        inner: ports.intents,
        meter: meter.clone(),
    });
    ports.flights = Arc::new(CostedFlights::new(ports.flights, meter.clone()));
    ports.rate_limits = Arc::new(CostedRateLimits {
        inner: ports.rate_limits,
        meter: meter.clone(),
    });
    ports.credentials = Arc::new(CostedCredentials {
        inner: ports.credentials,
        meter: meter.clone(),
    });
    ports.readings = Arc::new(CostedReadings {
        inner: ports.readings,
        meter: meter.clone(),
    });
    ports.breaker = Arc::new(CostedBreaker {
        inner: ports.breaker,
        meter: meter.clone(),
    });
    ports.leases = Arc::new(CostedLeases {
        inner: ports.leases,
        meter: meter.clone(),
    });
    ports
}

/// Credentials, costed: a `PutItem` to keep one, a `GetItem` to read it (the KMS calls that
/// seal and open it are not DynamoDB's).
pub struct CostedCredentials {
    pub inner: Arc<dyn Credentials>,
    pub meter: Arc<CostMeter>,
}

#[async_trait]
impl Credentials for CostedCredentials {
    async fn put_credential(
        &self,
        user_id: &UserId,
        credential: &Secret,
    ) -> Result<(), StoreError> {
        let out = self.inner.put_credential(user_id, credential).await;
        self.meter
            .add(&[Request::Write("PutItem", Item::Credential, out.is_ok())]);
        out
    }

    async fn credential(&self, user_id: &UserId) -> Result<Option<Secret>, StoreError> {
        self.meter.add(&[Request::Read("GetItem")]);
        self.inner.credential(user_id).await
    }
}

/// The seat-read cache's shared half, costed: a `GetItem` per entry, a `BatchGetItem` per batch
/// (unprocessed keys sent again are not seen), an `UpdateItem` per lease, reading or failure
/// recorded.
pub struct CostedReadings {
    pub inner: Arc<dyn Readings>,
    pub meter: Arc<CostMeter>,
}

#[async_trait]
impl Readings for CostedReadings {
    async fn entry(&self, key: &ReadKey) -> Result<Option<CacheEntry>, StoreError> {
        self.meter.add(&[Request::Read("GetItem")]);
        self.inner.entry(key).await
    }

    async fn entries(&self, keys: &[ReadKey]) -> Result<Vec<(ReadKey, CacheEntry)>, StoreError> {
        // One request for 1 to 100 keys; the adapter refuses more, and sends none for none.
        if (1..=MAX_BATCH_READ).contains(&keys.len()) {
            self.meter.add(&[Request::Read("BatchGetItem")]);
        }
        self.inner.entries(keys).await
    }

    async fn lease_refresh(
        &self,
        key: &ReadKey,
        lease: &RefreshLease,
        stale_before: Millis,
    ) -> Result<bool, StoreError> {
        let out = self.inner.lease_refresh(key, lease, stale_before).await;
        self.meter.add(&[Request::Write(
            "UpdateItem",
            Item::Reading,
            matches!(out, Ok(true)),
        )]);
        out
    }

    async fn record(&self, reading: &Reading) -> Result<bool, StoreError> {
        let out = self.inner.record(reading).await;
        self.meter.add(&[Request::Write(
            "UpdateItem",
            Item::Reading,
            matches!(out, Ok(true)),
        )]);
        out
    }

    async fn record_failure(
        &self,
        key: &ReadKey,
        failure: &ReadFailure,
    ) -> Result<bool, StoreError> {
        let out = self.inner.record_failure(key, failure).await;
        self.meter.add(&[Request::Write(
            "UpdateItem",
            Item::Reading,
            matches!(out, Ok(true)),
        )]);
        out
    }
}

/// The breaker's state and the routes' pauses, costed: a `GetItem` to read either, a `PutItem`
/// to swap the breaker, an `UpdateItem` to pause a route.
pub struct CostedBreaker {
    pub inner: Arc<dyn BreakerStates>,
    pub meter: Arc<CostMeter>,
}

#[async_trait]
impl BreakerStates for CostedBreaker {
    async fn breaker(&self) -> Result<BreakerState, StoreError> {
        self.meter.add(&[Request::Read("GetItem")]);
        self.inner.breaker().await
    }

    async fn swap_breaker(&self, next: &BreakerState) -> Result<bool, StoreError> {
        let out = self.inner.swap_breaker(next).await;
        self.meter.add(&[Request::Write(
            "PutItem",
            Item::Breaker,
            matches!(out, Ok(true)),
        )]);
        out
    }

    async fn pauses(&self) -> Result<RoutePauses, StoreError> {
        self.meter.add(&[Request::Read("GetItem")]);
        self.inner.pauses().await
    }

    async fn pause(&self, route: UpstreamRoute, until: Millis) -> Result<bool, StoreError> {
        let out = self.inner.pause(route, until).await;
        self.meter.add(&[Request::Write(
            "UpdateItem",
            Item::Breaker,
            matches!(out, Ok(true)),
        )]);
        out
    }
}

/// Operator leases, costed: a `PutItem` to take one, a `DeleteItem` to release it (refused
/// for another holder and answered `Ok` by the adapter, so counted as applied).
pub struct CostedLeases {
    pub inner: Arc<dyn OperatorLeases>,
    pub meter: Arc<CostMeter>,
}

#[async_trait]
impl OperatorLeases for CostedLeases {
    async fn take_lease(
        &self,
        name: &str,
        holder: &str,
        now: Millis,
        until: Millis,
    ) -> Result<bool, StoreError> {
        let out = self.inner.take_lease(name, holder, now, until).await;
        self.meter.add(&[Request::Write(
            "PutItem",
            Item::Lease,
            matches!(out, Ok(true)),
        )]);
        out
    }

    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        let out = self.inner.release_lease(name, holder).await;
        self.meter
            .add(&[Request::Write("DeleteItem", Item::Lease, out.is_ok())]);
        out
    }
}

#[cfg(test)]
mod tests;
