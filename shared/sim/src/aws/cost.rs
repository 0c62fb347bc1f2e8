//! What each store call costs on DynamoDB: the requests `seatgate-aws`'s adapter sends for it and
//! the write units they take, counted by decorators on the ports as the simulator runs, so a
//! scenario's cost is measured rather than estimated.
//!
//! The rules follow the adapter call by call (and `infra/aws/TABLE.md`), from the call's own
//! arguments and answer:
//! - a transition is one `TransactWriteItems` of the intent and its history record, plus the
//!   seat's hold when it takes or releases one, its suppression and its reading when it
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
    Action, ActionId, Booking, BookingAnswer, BookingId, ConsentRecord, Flight, FlightId,
    HoldEffect, IdempotencyKey, IdempotencyRecord, Intent, IntentId, Inventory, Millis, Page,
    PageSize, RateWindow, SeatId, Suppression, TransitionRecord, TransitionRequest, UserId,
};
use seatgate::ports::{
    Actions, Begun, BookRefusal, CancelBookingRefusal, ConfirmError, Confirmation, Flights,
    Intents, RateLimits, StoreError, TransitionError,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

/// The due index's shards, one `Query` each per due scan (`infra/aws/TABLE.md`: `DUE#0` to
/// `DUE#15`).
pub const DUE_SHARDS: usize = 16;

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

/// The running count, shared by every decorator of one world.
#[derive(Debug, Default)]
pub struct CostMeter {
    costs: Mutex<Costs>,
}

/// An item seatgate writes, by kind (`infra/aws/TABLE.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Item {
    Action,
    Intent,
    Consent,
    History,
    /// A rate-limit window's counter (the confirm window, the booking window).
    Window,
    Hold,
    Suppression,
    Reading,
    Flight,
    Shard,
    UserCount,
    Booking,
    Idempotency,
}

impl Item {
    pub const ALL: [Item; 13] = [
        Item::Action,
        Item::Intent,
        Item::Consent,
        Item::History,
        Item::Window,
        Item::Hold,
        Item::Suppression,
        Item::Reading,
        Item::Flight,
        Item::Shard,
        Item::UserCount,
        Item::Booking,
        Item::Idempotency,
    ];

    /// Write units one write of this item takes (its size rounded up to 1 KB): every kind is
    /// under 1 KB but the intent, whose item carries the intent as JSON beside its key
    /// attributes. Measured from DynamoDB Local's items by `tests/tests/cost_model.rs`,
    /// which fails if an item kind outgrows its figure here.
    pub const fn units(self) -> u64 {
        match self {
            Item::Intent => INTENT_UNITS,
            _ => 1,
        }
    }
}

/// Write units of one intent item write (see [`Item::units`]).
pub const INTENT_UNITS: u64 = 1;

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
    pub fn snapshot(&self) -> Costs {
        self.costs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn add(&self, requests: &[Request]) {
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
    if request.hold_effect() != HoldEffect::None {
        items.push(Item::Hold);
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

    async fn transition(&self, request: &TransitionRequest) -> Result<Intent, TransitionError> {
        let out = self.inner.transition(request).await;
        let mut requests = Vec::with_capacity(3);
        let seen = request.seen();
        if seen.is_none() {
            requests.push(Request::Read("GetItem"));
        }
        match &out {
            Ok(_) => requests.push(Request::Transaction(transition_items(request), true)),
            // Refused on the copy it was given: the transaction failed on its condition, and
            // the adapter decided again on the item the failure returned.
            Err(TransitionError::Refused(_)) if seen.is_some() => {
                requests.push(Request::Transaction(transition_items(request), false))
            }
            // Refused on what it read: no write was sent.
            Err(TransitionError::Refused(_) | TransitionError::NotFound) => {}
            Err(_) => requests.push(Request::Transaction(transition_items(request), false)),
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

    async fn hold(&self, seat_id: &SeatId) -> Result<Option<seatgate::domain::Hold>, StoreError> {
        self.meter.add(&[Request::Read("GetItem")]);
        self.inner.hold(seat_id).await
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

/// The flights port, costed. It remembers which bookings raised a per-user count, as the
/// booking item's `counted` attribute does, for their cancels' cost.
pub struct CostedFlights {
    pub inner: Arc<dyn Flights>,
    pub meter: Arc<CostMeter>,
    pub counted: Mutex<BTreeSet<BookingId>>,
}

impl CostedFlights {
    pub fn new(inner: Arc<dyn Flights>, meter: Arc<CostMeter>) -> Self {
        CostedFlights {
            inner,
            meter,
            counted: Mutex::new(BTreeSet::new()),
        }
    }

    fn counted(&self) -> std::sync::MutexGuard<'_, BTreeSet<BookingId>> {
        self.counted.lock().unwrap_or_else(PoisonError::into_inner)
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
        self.meter.add(&[Request::Read("Query")]);
        self.inner.inventory(id).await
    }

    async fn book(
        &self,
        booking: &Booking,
        max_per_user: Option<u32>,
        answer_to: Option<(&IdempotencyKey, &str)>,
    ) -> Result<(), BookRefusal> {
        let out = self.inner.book(booking, max_per_user, answer_to).await;
        // A head count no limit admits is refused before any request.
        if !Flight::never_fits(booking.head_count, max_per_user) {
            let mut items = vec![Item::Shard, Item::Booking];
            if max_per_user.is_some() {
                items.push(Item::UserCount);
            }
            if answer_to.is_some() {
                items.push(Item::Idempotency);
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
        // Only a booked booking of this user is written; the rest are refused on the read.
        if let Ok(b) = &out {
            let mut items = vec![Item::Booking, Item::Shard, Item::Flight];
            if self.counted().contains(&b.booking_id) {
                items.push(Item::UserCount);
            }
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
    ports
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transaction_bills_its_items_twice_and_a_refused_write_is_billed_but_unreported() {
        let meter = CostMeter::default();
        meter.add(&[
            Request::Transaction(vec![Item::Shard, Item::Booking, Item::Idempotency], true),
            Request::Write("UpdateItem", Item::Window, true),
            Request::Write("PutItem", Item::Idempotency, false),
            Request::Read("Query"),
        ]);
        let c = meter.snapshot();
        assert_eq!(c.billed_write_units(), 2 * 3 + 1 + 1);
        assert_eq!(c.applied_single_units.values().sum::<u64>(), 1);
        assert_eq!(c.applied_transactions, 1);
        assert_eq!(c.total_requests(), 4);
        let before = c.clone();
        meter.add(&[Request::Transaction(vec![Item::Shard, Item::Flight], false)]);
        let since = meter.snapshot().since(&before);
        assert_eq!(since.requests("TransactWriteItems"), 1);
        assert_eq!(
            (since.applied_transactions, since.billed_write_units()),
            (0, 4)
        );
    }
}
