//! Fault injection for what an emulator cannot produce.
//!
//! DynamoDB Local never throttles and never reports `TransactionConflict`, yet the services must
//! cope with both. [`FaultyStore`] wraps any store (DynamoDB, embedded, an in-memory fake) and
//! makes chosen calls fail with chosen [`StoreError`]s, so service and handler tests can check
//! their retries and their failure paths against the real ports:
//!
//! - [`FaultyStore::fail_next`]: the call fails *without reaching* the store. That is what
//!   throttling and transaction conflicts mean in DynamoDB: nothing was written.
//! - [`FaultyStore::fail_after_next`]: the call reaches the store and its answer is replaced by
//!   the error. That is a timeout after the write committed: the caller cannot know it happened.
//!
//! It imitates DynamoDB's failure modes but depends only on the ports, so it wraps any backend.
//! That the real SDK errors map to these `StoreError`s is tested separately (`seatgate-aws`'s
//! `dynamodb::tests`, against a canned HTTP endpoint).

use async_trait::async_trait;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use seatgate::domain::{
    Action, ActionId, Admission, Booking, BookingAnswer, BookingId, BreakerState, CacheEntry,
    ConsentRecord, Flight, FlightId, IdempotencyKey, IdempotencyRecord, Intent, IntentId,
    Inventory, Millis, Page, PageSize, RateWindow, ReadFailure, ReadKey, Reading, RefreshLease,
    RoutePauses, SeatClaim, SeatId, Secret, Suppression, TransitionRecord, TransitionRequest,
    UpstreamRoute, UserId,
};
use seatgate::ports::{
    Actions, Begun, BookRefusal, BreakerStates, CancelBookingRefusal, ConfirmError, Confirmation,
    Credentials, Flights, Intents, OperatorLeases, RateLimits, Readings, StoreError,
    TransitionError,
};

/// A port method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StoreOp {
    PutAction,
    GetAction,
    Confirm,
    RegisterWait,
    GetIntent,
    Intents,
    OpenOnSeat,
    GetConsent,
    History,
    Transition,
    DueIntents,
    Suppression,
    SeatClaim,
    PutCredential,
    Credential,
    ReadingEntry,
    ReadingEntries,
    LeaseRefresh,
    RecordReading,
    RecordReadFailure,
    Breaker,
    SwapBreaker,
    UpstreamPauses,
    UpstreamPause,
    CreateFlight,
    Inventory,
    Book,
    MarkSoldOut,
    BookingsOf,
    CancelBooking,
    BeginRequest,
    FinishRequest,
    AbandonRequest,
    TakeRate,
    TakeLease,
    ReleaseLease,
    CreateCheckoutHold,
    CheckoutHold,
    ResolveHold,
    HoldsOf,
    FlightHolds,
    DueHolds,
    JoinWaitlist,
    WaitEntry,
    WaitingAhead,
    LeaveWaitlist,
    WaitlistSummary,
}

/// How an armed fault bends a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultKind {
    /// The call fails with this error without reaching the store (throttling, a conflict).
    Before(StoreError),
    /// The call reaches the store, then its answer is replaced by this error (a timeout after
    /// the write committed).
    After(StoreError),
    /// The call reaches the store, its answer is lost, and it is sent again, as the SDK's retry
    /// after a 5xx or a timeout does; the caller sees the second answer (for a conditional write
    /// that committed the first time, a refusal showing its own result).
    Replay,
}

/// One armed fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// Which calls it hits; `None` for any.
    pub op: Option<StoreOp>,
    pub kind: FaultKind,
    /// How many matching calls it bends.
    pub times: u32,
}

/// A store decorator that fails chosen calls. Faults are consumed in the order they were armed;
/// calls no fault matches pass straight through.
#[derive(Debug)]
pub struct FaultyStore<S> {
    inner: S,
    faults: Mutex<VecDeque<Fault>>,
    calls: Mutex<BTreeMap<StoreOp, u64>>,
    injected: Mutex<u64>,
}

impl<S> FaultyStore<S> {
    pub fn new(inner: S) -> Self {
        FaultyStore {
            inner,
            faults: Mutex::new(VecDeque::new()),
            calls: Mutex::new(BTreeMap::new()),
            injected: Mutex::new(0),
        }
    }

    pub fn inner(&self) -> &S {
        &self.inner
    }

    pub fn arm(&self, fault: Fault) {
        lock(&self.faults).push_back(fault);
    }

    /// The next `times` calls of `op` (any op if `None`) fail with `error` and write nothing.
    pub fn fail_next(&self, op: impl Into<Option<StoreOp>>, error: StoreError, times: u32) {
        self.arm(Fault {
            op: op.into(),
            kind: FaultKind::Before(error),
            times,
        });
    }

    /// The next `times` calls of `op` go through, then report `error` (a lost response).
    pub fn fail_after_next(&self, op: impl Into<Option<StoreOp>>, error: StoreError, times: u32) {
        self.arm(Fault {
            op: op.into(),
            kind: FaultKind::After(error),
            times,
        });
    }

    /// The next `times` calls of `op` go through, lose their answer and are sent again: the
    /// caller sees what the repeat was told.
    pub fn replay_next(&self, op: impl Into<Option<StoreOp>>, times: u32) {
        self.arm(Fault {
            op: op.into(),
            kind: FaultKind::Replay,
            times,
        });
    }

    /// Drops every armed fault.
    pub fn heal(&self) {
        lock(&self.faults).clear();
    }

    /// Calls made of `op`, failed ones included.
    pub fn calls(&self, op: StoreOp) -> u64 {
        lock(&self.calls).get(&op).copied().unwrap_or(0)
    }

    /// Calls failed by an armed fault.
    pub fn injected(&self) -> u64 {
        *lock(&self.injected)
    }

    /// Counts the call and takes the fault that hits it, if any.
    fn take(&self, op: StoreOp) -> Option<Fault> {
        *lock(&self.calls).entry(op).or_default() += 1;
        let mut faults = lock(&self.faults);
        let i = faults.iter().position(|f| f.op.is_none_or(|o| o == op))?;
        let fault = faults[i].clone();
        if faults[i].times <= 1 {
            faults.remove(i);
        } else {
            faults[i].times -= 1;
        }
        *lock(&self.injected) += 1;
        Some(fault)
    }

    async fn run<T, E, Fut>(&self, op: StoreOp, call: impl Fn() -> Fut) -> Result<T, E>
    where
        Fut: std::future::Future<Output = Result<T, E>>,
        E: From<StoreError>,
    {
        match self.take(op).map(|f| f.kind) {
            None => call().await,
            Some(FaultKind::Before(error)) => Err(error.into()),
            Some(FaultKind::After(error)) => {
                // The outcome is lost, whatever it was.
                let _ = call().await;
                Err(error.into())
            }
            Some(FaultKind::Replay) => {
                let _ = call().await;
                call().await
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[async_trait]
impl<S: Actions> Actions for FaultyStore<S> {
    async fn put_action(&self, action: &Action) -> Result<(), StoreError> {
        self.run(StoreOp::PutAction, || self.inner.put_action(action))
            .await
    }

    async fn get_action(&self, id: &ActionId) -> Result<Option<Action>, StoreError> {
        self.run(StoreOp::GetAction, || self.inner.get_action(id))
            .await
    }

    async fn confirm(&self, confirmation: &Confirmation) -> Result<(), ConfirmError> {
        self.run(StoreOp::Confirm, || self.inner.confirm(confirmation))
            .await
    }
}

#[async_trait]
impl<S: Intents> Intents for FaultyStore<S> {
    async fn register_wait(
        &self,
        intent: &Intent,
        consent: &ConsentRecord,
    ) -> Result<(), StoreError> {
        self.run(StoreOp::RegisterWait, || {
            self.inner.register_wait(intent, consent)
        })
        .await
    }

    async fn get_intent(&self, id: &IntentId) -> Result<Option<Intent>, StoreError> {
        self.run(StoreOp::GetIntent, || self.inner.get_intent(id))
            .await
    }

    async fn get_consent(&self, id: &IntentId) -> Result<Option<ConsentRecord>, StoreError> {
        self.run(StoreOp::GetConsent, || self.inner.get_consent(id))
            .await
    }

    async fn intents(&self, ids: &[IntentId]) -> Result<Vec<Intent>, StoreError> {
        self.run(StoreOp::Intents, || self.inner.intents(ids)).await
    }

    async fn open_on_seat(
        &self,
        seat_id: &SeatId,
        limit: usize,
    ) -> Result<Vec<Intent>, StoreError> {
        self.run(StoreOp::OpenOnSeat, || {
            self.inner.open_on_seat(seat_id, limit)
        })
        .await
    }

    async fn history(
        &self,
        id: &IntentId,
        after: Option<u64>,
        size: PageSize,
    ) -> Result<Page<TransitionRecord, u64>, StoreError> {
        self.run(StoreOp::History, || self.inner.history(id, after, size))
            .await
    }

    async fn transition(&self, request: &TransitionRequest) -> Result<Intent, TransitionError> {
        self.run(StoreOp::Transition, || self.inner.transition(request))
            .await
    }

    async fn due_intents(&self, now: Millis, limit: usize) -> Result<Vec<Intent>, StoreError> {
        self.run(StoreOp::DueIntents, || self.inner.due_intents(now, limit))
            .await
    }

    async fn suppression(
        &self,
        seat_id: &SeatId,
        now: Millis,
    ) -> Result<Option<Suppression>, StoreError> {
        self.run(StoreOp::Suppression, || {
            self.inner.suppression(seat_id, now)
        })
        .await
    }

    async fn last_taken(&self, seat_id: &SeatId) -> Result<Option<Suppression>, StoreError> {
        self.run(StoreOp::Suppression, || self.inner.last_taken(seat_id))
            .await
    }

    async fn seat_claim(&self, seat_id: &SeatId) -> Result<Option<SeatClaim>, StoreError> {
        self.run(StoreOp::SeatClaim, || self.inner.seat_claim(seat_id))
            .await
    }
}

#[async_trait]
impl<S: Credentials> Credentials for FaultyStore<S> {
    async fn put_credential(
        &self,
        user_id: &UserId,
        credential: &Secret,
    ) -> Result<(), StoreError> {
        self.run(StoreOp::PutCredential, || {
            self.inner.put_credential(user_id, credential)
        })
        .await
    }

    async fn credential(&self, user_id: &UserId) -> Result<Option<Secret>, StoreError> {
        self.run(StoreOp::Credential, || self.inner.credential(user_id))
            .await
    }
}

#[async_trait]
impl<S: Readings> Readings for FaultyStore<S> {
    async fn entry(&self, key: &ReadKey) -> Result<Option<CacheEntry>, StoreError> {
        self.run(StoreOp::ReadingEntry, || self.inner.entry(key))
            .await
    }

    async fn entries(&self, keys: &[ReadKey]) -> Result<Vec<(ReadKey, CacheEntry)>, StoreError> {
        self.run(StoreOp::ReadingEntries, || self.inner.entries(keys))
            .await
    }

    async fn lease_refresh(
        &self,
        key: &ReadKey,
        lease: &RefreshLease,
        stale_before: Millis,
    ) -> Result<bool, StoreError> {
        self.run(StoreOp::LeaseRefresh, || {
            self.inner.lease_refresh(key, lease, stale_before)
        })
        .await
    }

    async fn record(&self, reading: &Reading) -> Result<bool, StoreError> {
        self.run(StoreOp::RecordReading, || self.inner.record(reading))
            .await
    }

    async fn record_failure(
        &self,
        key: &ReadKey,
        failure: &ReadFailure,
    ) -> Result<bool, StoreError> {
        self.run(StoreOp::RecordReadFailure, || {
            self.inner.record_failure(key, failure)
        })
        .await
    }
}

#[async_trait]
impl<S: BreakerStates> BreakerStates for FaultyStore<S> {
    async fn breaker(&self) -> Result<BreakerState, StoreError> {
        self.run(StoreOp::Breaker, || self.inner.breaker()).await
    }

    async fn swap_breaker(&self, next: &BreakerState) -> Result<bool, StoreError> {
        self.run(StoreOp::SwapBreaker, || self.inner.swap_breaker(next))
            .await
    }

    async fn pauses(&self) -> Result<RoutePauses, StoreError> {
        self.run(StoreOp::UpstreamPauses, || self.inner.pauses())
            .await
    }

    async fn pause(&self, route: UpstreamRoute, until: Millis) -> Result<bool, StoreError> {
        self.run(StoreOp::UpstreamPause, || self.inner.pause(route, until))
            .await
    }
}

#[async_trait]
impl<S: RateLimits> RateLimits for FaultyStore<S> {
    async fn take(&self, window: &RateWindow, limit: u32) -> Result<bool, StoreError> {
        self.run(StoreOp::TakeRate, || self.inner.take(window, limit))
            .await
    }
}

#[async_trait]
impl<S: OperatorLeases> OperatorLeases for FaultyStore<S> {
    async fn take_lease(
        &self,
        name: &str,
        holder: &str,
        now: Millis,
        until: Millis,
    ) -> Result<bool, StoreError> {
        self.run(StoreOp::TakeLease, || {
            self.inner.take_lease(name, holder, now, until)
        })
        .await
    }

    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        self.run(StoreOp::ReleaseLease, || {
            self.inner.release_lease(name, holder)
        })
        .await
    }
}

#[async_trait]
impl<S: seatgate::ports::WaitingLists> seatgate::ports::WaitingLists for FaultyStore<S> {
    async fn join_waitlist(
        &self,
        entry: &seatgate::domain::WaitEntry,
        max_per_user: Option<u32>,
    ) -> Result<(), seatgate::ports::WaitlistError> {
        self.run(StoreOp::JoinWaitlist, || {
            self.inner.join_waitlist(entry, max_per_user)
        })
        .await
    }

    async fn wait_entry(
        &self,
        user: &UserId,
        flight: &FlightId,
        id: &seatgate::domain::EntryId,
    ) -> Result<Option<seatgate::domain::WaitEntry>, StoreError> {
        self.run(StoreOp::WaitEntry, || {
            self.inner.wait_entry(user, flight, id)
        })
        .await
    }

    async fn waiting_ahead(
        &self,
        flight: &FlightId,
        id: &seatgate::domain::EntryId,
    ) -> Result<u64, StoreError> {
        self.run(StoreOp::WaitingAhead, || {
            self.inner.waiting_ahead(flight, id)
        })
        .await
    }

    async fn leave_waitlist(
        &self,
        user: &UserId,
        flight: &FlightId,
        id: &seatgate::domain::EntryId,
        now: Millis,
    ) -> Result<seatgate::domain::WaitEntry, seatgate::ports::WaitlistError> {
        self.run(StoreOp::LeaveWaitlist, || {
            self.inner.leave_waitlist(user, flight, id, now)
        })
        .await
    }

    async fn waitlist_summary(
        &self,
        flight: &FlightId,
    ) -> Result<seatgate::ports::WaitlistSummary, StoreError> {
        self.run(StoreOp::WaitlistSummary, || {
            self.inner.waitlist_summary(flight)
        })
        .await
    }
}

#[async_trait]
impl<S: seatgate::ports::CheckoutHolds> seatgate::ports::CheckoutHolds for FaultyStore<S> {
    async fn create_hold(
        &self,
        hold: &seatgate::domain::CheckoutHold,
        max_per_user: Option<u32>,
        answer_to: Option<(&IdempotencyKey, &str)>,
    ) -> Result<(), seatgate::ports::CreateHoldRefusal> {
        self.run(StoreOp::CreateCheckoutHold, || {
            self.inner.create_hold(hold, max_per_user, answer_to)
        })
        .await
    }

    async fn hold(
        &self,
        user: &UserId,
        id: &seatgate::domain::HoldId,
    ) -> Result<Option<seatgate::domain::CheckoutHold>, StoreError> {
        self.run(StoreOp::CheckoutHold, || self.inner.hold(user, id))
            .await
    }

    async fn resolve_hold(
        &self,
        user: &UserId,
        flight: &FlightId,
        id: &seatgate::domain::HoldId,
        action: seatgate::domain::HoldAction,
        now: Millis,
    ) -> Result<seatgate::domain::CheckoutHold, seatgate::ports::ResolveHoldError> {
        self.run(StoreOp::ResolveHold, || {
            self.inner.resolve_hold(user, flight, id, action, now)
        })
        .await
    }

    async fn holds_of(
        &self,
        user: &UserId,
        after: Option<&seatgate::domain::HoldId>,
        size: PageSize,
    ) -> Result<Page<seatgate::domain::CheckoutHold, seatgate::domain::HoldId>, StoreError> {
        self.run(StoreOp::HoldsOf, || self.inner.holds_of(user, after, size))
            .await
    }

    async fn flight_holds(
        &self,
        flight: &Flight,
        status: seatgate::domain::HoldStatus,
        after: Option<&seatgate::domain::FlightHoldKey>,
        size: PageSize,
    ) -> Result<Page<seatgate::domain::CheckoutHold, seatgate::domain::FlightHoldKey>, StoreError>
    {
        self.run(StoreOp::FlightHolds, || {
            self.inner.flight_holds(flight, status, after, size)
        })
        .await
    }

    async fn due_holds(
        &self,
        now: Millis,
        limit: usize,
    ) -> Result<Vec<seatgate::domain::CheckoutHold>, StoreError> {
        self.run(StoreOp::DueHolds, || self.inner.due_holds(now, limit))
            .await
    }
}

#[async_trait]
impl<S: Flights> Flights for FaultyStore<S> {
    async fn create_flight(&self, flight: &Flight) -> Result<bool, StoreError> {
        self.run(StoreOp::CreateFlight, || self.inner.create_flight(flight))
            .await
    }

    async fn inventory(&self, id: &FlightId) -> Result<Option<Inventory>, StoreError> {
        self.run(StoreOp::Inventory, || self.inner.inventory(id))
            .await
    }

    async fn book(
        &self,
        booking: &Booking,
        max_per_user: Option<u32>,
        answer_to: Option<(&IdempotencyKey, &str)>,
        admission: Option<&Admission>,
    ) -> Result<(), BookRefusal> {
        self.run(StoreOp::Book, || {
            self.inner.book(booking, max_per_user, answer_to, admission)
        })
        .await
    }

    async fn mark_sold_out(&self, id: &FlightId, shards: u32) -> Result<bool, StoreError> {
        self.run(StoreOp::MarkSoldOut, || {
            self.inner.mark_sold_out(id, shards)
        })
        .await
    }

    async fn bookings_of(
        &self,
        user: &UserId,
        after: Option<&BookingId>,
        size: PageSize,
    ) -> Result<Page<Booking, BookingId>, StoreError> {
        self.run(StoreOp::BookingsOf, || {
            self.inner.bookings_of(user, after, size)
        })
        .await
    }

    async fn cancel_booking(
        &self,
        user: &UserId,
        flight: &FlightId,
        id: &BookingId,
        now: Millis,
    ) -> Result<Booking, CancelBookingRefusal> {
        self.run(StoreOp::CancelBooking, || {
            self.inner.cancel_booking(user, flight, id, now)
        })
        .await
    }

    async fn begin_request(&self, record: &IdempotencyRecord) -> Result<Begun, StoreError> {
        self.run(StoreOp::BeginRequest, || self.inner.begin_request(record))
            .await
    }

    async fn finish_request(
        &self,
        user: &UserId,
        key: &IdempotencyKey,
        token: &str,
        answer: &BookingAnswer,
    ) -> Result<bool, StoreError> {
        self.run(StoreOp::FinishRequest, || {
            self.inner.finish_request(user, key, token, answer)
        })
        .await
    }

    async fn abandon_request(
        &self,
        user: &UserId,
        key: &IdempotencyKey,
        token: &str,
    ) -> Result<(), StoreError> {
        self.run(StoreOp::AbandonRequest, || {
            self.inner.abandon_request(user, key, token)
        })
        .await
    }
}

#[cfg(test)]
mod tests;
