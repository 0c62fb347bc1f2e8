//! Planted bugs: defects seatgate once had or could have, each put back on purpose so a test can
//! show that a checker catches it. A checker that has never failed proves nothing; one that
//! catches a planted bug within a bounded number of seeds is known to bite.
//!
//! Where each lives: none needs a workspace feature, and the code under test stays exactly the
//! code that ships. A bug in how the services read a port's answers is a decorator on the raw
//! port the services are given ([`wrap_upstream`], [`wrap_breaker`]), which bends its answers the
//! way the buggy code would have read them. A bug that removes a condition the store checks
//! inside its own write cannot be made by a decorator (every write it passes on still runs the
//! store's condition), so it is a switch in the in-memory backend
//! ([`seatgate_memory::StorePlant`], [`store_plants`]), which the [`World`](crate::World) sets
//! when it builds the backend. The plants, and the checker that catches each:
//! - [`Plant::ConflictByStatus`]: a 409 read by its status alone: the upstream's
//!   `409 already_charged` (the user holds another charge, the seat is free) is taken for
//!   `409 seat_taken`, so the user is told they lost a race for a free seat. Caught by the truth
//!   checker's reason rule;
//! - [`Plant::RetryAfterIgnored`]: a `Retry-After` ignored: a busy answer reaches the services
//!   without its time, so the breaker counts a failure and no route is held, and calls go on
//!   into the window the upstream asked for. Caught by the spared checker (the model knows what
//!   it told);
//! - [`Plant::ChargeBlind`]: the reaper resending the reserve instead of reading the charge:
//!   the charge read answers "no charge" whatever the upstream holds, so an unknown outcome is
//!   settled as never written, and a wait goes back in line and reserves its seat again. Caught
//!   by the truth checker (a charge standing with no SUCCEEDED intent); a wait then reads its
//!   seat taken (by its own user) and mostly does not send again, so no-rewrite sees it rarely;
//! - [`Plant::UnknownAsBusy`]: an unknown outcome read as "nothing written" (a timeout or a lost
//!   201 taken for a busy answer): the attempt goes back in line and the reserve is sent again
//!   instead of the charge being read. Caught by the no-rewrite checker (a second reserve on a
//!   committed (user, seat)), by the unknown checker (the seat is written again before anyone
//!   read the charge), and by truth (the charge is then reported lost);
//! - [`Plant::ClaimSkipsSeat`] (store): a claim that neither checks nor takes the seat's claim,
//!   so while one attempt's outcome is unknown (a lost 201, a 500) the seat's next message is
//!   claimed and its reserve sent. Caught by the unknown checker (a reserve for a seat while an
//!   attempt on it has an unknown outcome);
//! - [`Plant::UnfencedSettle`] (store): a settlement without the fencing-token condition: a
//!   stale settlement is applied to the newer attempt that claimed the intent since (its status,
//!   RESERVING, is all the write still checks), sending the intent back in line or closing it
//!   while the newer attempt's reserve may commit. The default workload has no stale settler (a
//!   worker's batch is cut at its function timeout, inside its lease; the reaper's passes never
//!   overlap; a lost answer is not retried), so this plant brings one:
//!   [`WorldConfig::late_settlements`](crate::WorldConfig::late_settlements) gives every applied
//!   settlement a late twin, sent when the intent is next claimed ([`wrap_intents`]). Caught by
//!   truth (the newer attempt's charge stands, its own settlement refused, reported to nobody),
//!   often with no-rewrite (the intent, back in line, reserves its seat again); with the fence
//!   in place the twins are all refused and the run stays clean (a test says so);
//! - [`Plant::BookReadThenWrite`] (store): a booking as read-then-write: the shard's counter is
//!   read, other tasks run, and the decrement decided on the value read is written whatever the
//!   counter became meanwhile, so two bookings (or a booking and a cancel) interleaved there lose
//!   an update. The gap is a yield, not time, so only bookings of one instant meet in it: the
//!   default workload's opening rush ([`crate::workload::OPENING_RUSH`]) makes two of them meet
//!   on one shard in every seed. Caught by the bank checker (a shard whose available + booked is
//!   not its capacity);
//! - [`Plant::TwoProbes`]: a breaker that lets two probes through: the breaker-state port hides
//!   a probe in flight (a stored half-open state reads as the open state it replaced) and answers
//!   a lost probe take as won, so every instance that finds the open interval over while the
//!   probe is out sends a probe of its own. The breaker opens in the default workload during
//!   its outage without a `Retry-After` (+46 s to +54 s). Caught by the probe checker (one probe
//!   per probing phase, fleet-wide);
//! - [`Plant::KeyIgnored`]: a booking's `Idempotency-Key` ignored: the flights port answers
//!   every key as new and books without completing its record, so a client that retries (a
//!   third of the default workload's bookings are sent twice) books twice. Caught by the
//!   idempotency checker (two answers naming two bookings, or more bookings than keys);
//! - [`Plant::ShortPage`]: a bookings page cut one item short: the flights port's
//!   `bookings_of` drops the last booking of every page it reads (the cursor, when there is
//!   one, still names the dropped item), as an adapter that trimmed its over-read twice would,
//!   so the booking at each page's end is never shown. The default workload's users hold fewer
//!   bookings than a page, so the dropped one is each user's last. Caught by the listing
//!   checker (a user's final listing misses a booking the store holds);
//! - [`Plant::LeaseOutlived`] (workload): a lease the upstream's handling outlives, the
//!   assumption under invariant 5 broken (as a `lease_margin` set below the upstream's tail
//!   latency would break it): the default workload's late commits land up to three leases past
//!   their caller's timeout rather than within the lease margin, so the reaper, acting after
//!   the lease and its grace, reads no charge and settles the attempt as never written, and the
//!   commit lands after. Caught by truth (a charge standing with no SUCCEEDED intent); the same
//!   late commits inside the lease leave every seed clean;
//! - [`Plant::ConfirmTakesSeatsAgain`] (with holders): a checkout hold's confirm that takes its
//!   seats from the shard again. Caught by the bank;
//! - [`Plant::OfferSkipsTheLine`] (with waiters): a return that serves the waiting list from its
//!   back, so a later joiner is offered seats an earlier one waited for. Caught by the waitlist
//!   checker;
//! - [`Plant::WakeUpsLost`]: the breaker's wake-ups asked for and never run, as an adapter that
//!   answered the send without sending would ([`wrap_wake_ups`]): the intents parked behind an
//!   outage wait for the reaper's schedule after the upstream is back. Caught by the liveness
//!   checker's wake-up rule in the seeds on the slow schedule
//!   ([`crate::workload::SLOW_SCHEDULE`]);
//! - [`Plant::ConfirmPastDeadline`] (store, with holders): a checkout hold's confirm that does
//!   not check the hold's deadline, so a holder who pays late buys seats the reaper was about to
//!   give back. The bank stays balanced (the seats were held); caught by the hold-life checker.
//! - [`Plant::SuppressionForgotten`] (store): a win written without its seat's suppression, so
//!   an intent confirmed on a seat this system already holds goes upstream, where it can only
//!   be answered `seat_taken`. Caught by the no-wasted-write checker;
//! - [`Plant::HistorySkipped`] (store): a settlement to an end state written without its
//!   history record, so an intent's history stops short of the state it is in. Caught by the
//!   audit checker;
//! - [`Plant::ReadingNotShared`] (store): a seat or room reading answered as stored and
//!   dropped, so each instance reads the upstream again once its own short-lived copy is gone.
//!   Caught by the reads checker;
//! - [`Plant::LimitUnchecked`] (store, with the limited sale): a booking that neither checks
//!   nor counts the flight's per-user limit, so a user books past it. Caught by the per-user
//!   limit checker;
//! - [`Plant::PostFailureSwallowed`] (with failing subscribers): a webhook post's failure read
//!   as delivered, as an adapter that never looked at the answer's status would
//!   ([`wrap_subscribers`]): the event is deleted from its queue and never retried, so its
//!   subscriber never hears of it. Caught by the events checker;
//! - [`Plant::WindowUnbounded`] (store, with the eager client): the per-user rate limit's
//!   window counted without its limit, so a burst is admitted whole. Caught by the rate-window
//!   checker;
//! - [`Plant::DeadLettersUncounted`] (with the operator and failing subscribers): the queues'
//!   depths read with the event dead-letter queue's count taken from the wrong attribute (as an
//!   adapter asking SQS for `ApproximateNumberOfMessagesNotVisible` of a queue nobody receives
//!   from would), so the operator is shown no dead webhook delivery ([`wrap_queue_admin`]).
//!   Caught by the operator checker (events that never arrived, none shown dead-lettered);
//! - [`Plant::HeldPageShort`] (with the operator): a page of a flight's holds cut one item
//!   short, as [`Plant::ShortPage`] cuts a bookings page ([`wrap_holds`]): the operator is
//!   never shown the last live hold of a page. Caught by the operator checker (a hold live
//!   throughout a complete listing missing from it);
//! - [`Plant::AnsweredRecordDropped`]: an idempotency record put already answered (a keyed
//!   booking refused from the sold-out cache, `Flights::begin_request`) answered as written and
//!   never kept, as an adapter that answers before its write and loses it would: the key's
//!   replay after seats come back runs afresh and books. The default workload's refused buyer
//!   ([`crate::workload`]'s limited sale) replays such a key. Caught by the idempotency checker
//!   (a refusal, then a booking, under one key).

use async_trait::async_trait;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use seatgate::domain::{
    Admission, Booking, BookingAnswer, BookingId, Flight, FlightId, IdempotencyKey,
    IdempotencyRecord, Inventory, Page, PageSize, RequestState, UserId,
};
use seatgate::domain::{
    BreakerPhase, BreakerState, ConsentRecord, Intent, IntentId, Millis, RoomId, RoutePauses,
    SeatAvailability, SeatClaim, SeatId, Secret, Suppression, Transition, TransitionRecord,
    TransitionRequest, UpstreamRoute,
};
use seatgate::ports::{Begun, BookRefusal, CancelBookingRefusal, Flights};
use seatgate::ports::{
    BreakerStates, Charge, ChargeReadError, Intents, PublishError, QueueError, ReadError,
    ReserveOutcome, StoreError, Subscribers, TransitionError, Upstream, WakeUps,
};
use seatgate_memory::StorePlant;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::oneshot;

mod operator;
pub use operator::{wrap_holds, wrap_queue_admin};

/// A planted bug (see the module doc for each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Plant {
    ConflictByStatus,
    RetryAfterIgnored,
    ChargeBlind,
    UnknownAsBusy,
    ClaimSkipsSeat,
    UnfencedSettle,
    BookReadThenWrite,
    TwoProbes,
    KeyIgnored,
    ShortPage,
    LeaseOutlived,
    ConfirmTakesSeatsAgain,
    OfferSkipsTheLine,
    WakeUpsLost,
    ConfirmPastDeadline,
    SuppressionForgotten,
    HistorySkipped,
    ReadingNotShared,
    LimitUnchecked,
    PostFailureSwallowed,
    WindowUnbounded,
    DeadLettersUncounted,
    HeldPageShort,
    AnsweredRecordDropped,
}

impl Plant {
    pub const ALL: [Plant; 24] = [
        Plant::ConflictByStatus,
        Plant::RetryAfterIgnored,
        Plant::ChargeBlind,
        Plant::UnknownAsBusy,
        Plant::ClaimSkipsSeat,
        Plant::UnfencedSettle,
        Plant::BookReadThenWrite,
        Plant::TwoProbes,
        Plant::KeyIgnored,
        Plant::ShortPage,
        Plant::LeaseOutlived,
        Plant::ConfirmTakesSeatsAgain,
        Plant::OfferSkipsTheLine,
        Plant::WakeUpsLost,
        Plant::ConfirmPastDeadline,
        Plant::SuppressionForgotten,
        Plant::HistorySkipped,
        Plant::ReadingNotShared,
        Plant::LimitUnchecked,
        Plant::PostFailureSwallowed,
        Plant::WindowUnbounded,
        Plant::DeadLettersUncounted,
        Plant::HeldPageShort,
        Plant::AnsweredRecordDropped,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Plant::ConflictByStatus => "409-by-status",
            Plant::RetryAfterIgnored => "retry-after-ignored",
            Plant::ChargeBlind => "charge-blind-reaper",
            Plant::UnknownAsBusy => "unknown-as-busy",
            Plant::ClaimSkipsSeat => "claim-skips-seat",
            Plant::UnfencedSettle => "unfenced-settle",
            Plant::BookReadThenWrite => "book-read-then-write",
            Plant::TwoProbes => "two-probes",
            Plant::KeyIgnored => "idempotency-key-ignored",
            Plant::ShortPage => "short-bookings-page",
            Plant::LeaseOutlived => "lease-outlived",
            Plant::ConfirmTakesSeatsAgain => "confirm-takes-seats-again",
            Plant::OfferSkipsTheLine => "offer-skips-the-line",
            Plant::WakeUpsLost => "wake-ups-lost",
            Plant::ConfirmPastDeadline => "confirm-past-deadline",
            Plant::SuppressionForgotten => "suppression-forgotten",
            Plant::HistorySkipped => "history-skipped",
            Plant::ReadingNotShared => "reading-not-shared",
            Plant::LimitUnchecked => "limit-unchecked",
            Plant::PostFailureSwallowed => "post-failure-swallowed",
            Plant::WindowUnbounded => "window-unbounded",
            Plant::DeadLettersUncounted => "dead-letters-uncounted",
            Plant::HeldPageShort => "short-holds-page",
            Plant::AnsweredRecordDropped => "answered-record-dropped",
        }
    }

    /// The backend switch this plant is, if it lives in the store.
    pub fn in_store(self) -> Option<StorePlant> {
        match self {
            Plant::ClaimSkipsSeat => Some(StorePlant::ClaimSkipsSeat),
            Plant::UnfencedSettle => Some(StorePlant::UnfencedSettle),
            Plant::BookReadThenWrite => Some(StorePlant::BookReadThenWrite),
            Plant::ConfirmTakesSeatsAgain => Some(StorePlant::ConfirmTakesSeatsAgain),
            Plant::OfferSkipsTheLine => Some(StorePlant::OfferSkipsTheLine),
            Plant::ConfirmPastDeadline => Some(StorePlant::ConfirmPastDeadline),
            Plant::SuppressionForgotten => Some(StorePlant::SuppressionForgotten),
            Plant::HistorySkipped => Some(StorePlant::HistorySkipped),
            Plant::ReadingNotShared => Some(StorePlant::ReadingNotShared),
            Plant::LimitUnchecked => Some(StorePlant::LimitUnchecked),
            Plant::WindowUnbounded => Some(StorePlant::WindowUnbounded),
            _ => None,
        }
    }
}

/// The backend switches among `plants`, for `MemoryConfig::plants`.
pub fn store_plants(plants: &[Plant]) -> Vec<StorePlant> {
    plants.iter().filter_map(|p| p.in_store()).collect()
}

impl fmt::Display for Plant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `upstream` with every plant in `plants` that bends the upstream wrapped around it, in order.
pub fn wrap_upstream(upstream: Arc<dyn Upstream>, plants: &[Plant]) -> Arc<dyn Upstream> {
    plants.iter().fold(upstream, |inner, plant| {
        Arc::new(PlantedUpstream {
            inner,
            plant: *plant,
        })
    })
}

/// The upstream as the buggy adapter would have read it.
struct PlantedUpstream {
    inner: Arc<dyn Upstream>,
    plant: Plant,
}

fn forget_retry_after<T>(result: Result<T, ReadError>) -> Result<T, ReadError> {
    match result {
        Err(ReadError::Busy { .. }) => Err(ReadError::Busy { retry_after: None }),
        other => other,
    }
}

#[async_trait]
impl Upstream for PlantedUpstream {
    async fn reserve(&self, credential: &Secret, seat_id: &SeatId) -> ReserveOutcome {
        let outcome = self.inner.reserve(credential, seat_id).await;
        match (self.plant, outcome) {
            (Plant::ConflictByStatus, ReserveOutcome::AlreadyCharged) => ReserveOutcome::SeatTaken,
            (Plant::RetryAfterIgnored, ReserveOutcome::Busy { .. })
            | (Plant::UnknownAsBusy, ReserveOutcome::Unknown(_)) => {
                ReserveOutcome::Busy { retry_after: None }
            }
            (_, outcome) => outcome,
        }
    }

    async fn current_charge(&self, credential: &Secret) -> Result<Option<Charge>, ChargeReadError> {
        let result = self.inner.current_charge(credential).await;
        match (self.plant, result) {
            (Plant::ChargeBlind, Ok(_)) => Ok(None),
            (Plant::RetryAfterIgnored, Err(ChargeReadError::Busy { .. })) => {
                Err(ChargeReadError::Busy { retry_after: None })
            }
            (_, result) => result,
        }
    }

    async fn seat(&self, seat_id: &SeatId) -> Result<bool, ReadError> {
        let result = self.inner.seat(seat_id).await;
        match self.plant {
            Plant::RetryAfterIgnored => forget_retry_after(result),
            _ => result,
        }
    }

    async fn room(&self, room_id: &RoomId) -> Result<Vec<SeatAvailability>, ReadError> {
        let result = self.inner.room(room_id).await;
        match self.plant {
            Plant::RetryAfterIgnored => forget_retry_after(result),
            _ => result,
        }
    }
}

/// `wake_ups` as a lossy adapter would have sent them, if [`Plant::WakeUpsLost`] is among
/// `plants`: every wake-up answered as sent and dropped. Else `wake_ups` itself.
pub fn wrap_wake_ups(wake_ups: Arc<dyn WakeUps>, plants: &[Plant]) -> Arc<dyn WakeUps> {
    if plants.contains(&Plant::WakeUpsLost) {
        Arc::new(LostWakeUps)
    } else {
        wake_ups
    }
}

/// [`Plant::WakeUpsLost`].
struct LostWakeUps;

#[async_trait]
impl WakeUps for LostWakeUps {
    async fn wake_at(&self, _at: Millis) -> Result<(), QueueError> {
        Ok(())
    }
}

/// `subscribers` as a buggy webhook adapter would have posted to them, if
/// [`Plant::PostFailureSwallowed`] is among `plants`: every failed post answered as delivered.
/// Else `subscribers` itself.
pub fn wrap_subscribers(
    subscribers: Arc<dyn Subscribers>,
    plants: &[Plant],
) -> Arc<dyn Subscribers> {
    if plants.contains(&Plant::PostFailureSwallowed) {
        Arc::new(FailureSwallowed { inner: subscribers })
    } else {
        subscribers
    }
}

/// [`Plant::PostFailureSwallowed`].
struct FailureSwallowed {
    inner: Arc<dyn Subscribers>,
}

#[async_trait]
impl Subscribers for FailureSwallowed {
    async fn publish(&self, event: &seatgate::domain::Event) -> Result<(), PublishError> {
        let _ = self.inner.publish(event).await;
        Ok(())
    }
}

/// `breaker` as the buggy breaker store would have answered, if [`Plant::TwoProbes`] is among
/// `plants`; else `breaker` itself.
pub fn wrap_breaker(breaker: Arc<dyn BreakerStates>, plants: &[Plant]) -> Arc<dyn BreakerStates> {
    if plants.contains(&Plant::TwoProbes) {
        Arc::new(TwoProbes { inner: breaker })
    } else {
        breaker
    }
}

/// [`Plant::TwoProbes`]: the probing phase is invisible to readers and a lost probe take is
/// answered as won, so the probe is not one fleet-wide.
struct TwoProbes {
    inner: Arc<dyn BreakerStates>,
}

#[async_trait]
impl BreakerStates for TwoProbes {
    async fn breaker(&self) -> Result<BreakerState, StoreError> {
        let state = self.inner.breaker().await?;
        Ok(match state.phase {
            // The open phase the probe replaced, over since the probe began: probe again.
            BreakerPhase::Probing { .. } => BreakerState {
                phase: BreakerPhase::Open { until: state.since },
                generation: state.generation.saturating_sub(1),
                since: state.since,
            },
            _ => state,
        })
    }

    async fn swap_breaker(&self, next: &BreakerState) -> Result<bool, StoreError> {
        if self.inner.swap_breaker(next).await? {
            return Ok(true);
        }
        if !matches!(next.phase, BreakerPhase::Probing { .. }) {
            return Ok(false);
        }
        // A probe take lost to another probe of the same generation: taken as won.
        let stored = self.inner.breaker().await?;
        Ok(matches!(stored.phase, BreakerPhase::Probing { .. })
            && stored.generation == next.generation)
    }

    async fn pauses(&self) -> Result<RoutePauses, StoreError> {
        self.inner.pauses().await
    }

    async fn pause(&self, route: UpstreamRoute, until: Millis) -> Result<bool, StoreError> {
        self.inner.pause(route, until).await
    }
}

/// The share of applied settlements [`Plant::UnfencedSettle`]'s world gives a late twin
/// ([`WorldConfig::late_settlements`](crate::WorldConfig::late_settlements)): every one (with
/// the fence in place a twin changes nothing, so there is no reason to spare any).
pub const LATE_SETTLEMENT_RATE: f64 = 1.0;

/// How long a late twin waits for its intent to be claimed again before it is sent wherever the
/// intent is ([`wrap_intents`]), in leases: far past any retry or reaper pass of the attempt it
/// belonged to.
pub const LATE_SETTLEMENT_BOUND_LEASES: u32 = 3;

/// `intents` with a late twin for a share of the settlements it applies, as a stale settler
/// would send it: the settlement lands and is answered as usual, and a copy of the same request
/// (its first try, slow on the network, which the retry overtook; or the write of a worker that
/// outlived its lease) arrives later, once the intent has been claimed again under a newer
/// fencing token by any instance, or after [`LATE_SETTLEMENT_BOUND_LEASES`] leases if no claim
/// comes. Nobody hears its answer. With the fencing-token condition every twin is refused (the
/// intent is no longer RESERVING under its token), so the run is the run without them; without
/// it ([`Plant::UnfencedSettle`]) a twin overwrites the newer attempt. One draw per applied
/// settlement, from the shared [`LateSettlements`]' seed, in call order.
pub fn wrap_intents(intents: Arc<dyn Intents>, late: &LateSettlements) -> Arc<dyn Intents> {
    Arc::new(LateIntents {
        inner: intents,
        late: late.clone(),
    })
}

/// The late twins' shared state: the draws and the twins waiting for their intent's next
/// claim. Cheap to clone; clones share it (one for the whole fleet: any instance's claim
/// releases a twin).
#[derive(Clone)]
pub struct LateSettlements {
    shared: Arc<Mutex<Late>>,
    bound: Duration,
}

struct Late {
    rate: f64,
    rng: StdRng,
    /// Twins waiting, by intent: each one's wake-up.
    waiting: BTreeMap<IntentId, Vec<oneshot::Sender<()>>>,
    /// Twins made so far.
    held: usize,
    /// Twins sent because their intent was claimed again (the rest go at the bound).
    met_a_claim: usize,
}

impl LateSettlements {
    /// A late twin for a share `rate` (clamped to `0..=1`) of applied settlements, drawn from
    /// `seed`; each is held at most `bound`.
    pub fn new(rate: f64, seed: u64, bound: Duration) -> Self {
        LateSettlements {
            shared: Arc::new(Mutex::new(Late {
                rate: if rate.is_nan() {
                    0.0
                } else {
                    rate.clamp(0.0, 1.0)
                },
                rng: StdRng::seed_from_u64(seed),
                waiting: BTreeMap::new(),
                held: 0,
                met_a_claim: 0,
            })),
            bound,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Late> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Twins made so far.
    pub fn held(&self) -> usize {
        self.lock().held
    }

    /// Twins sent so far because their intent was claimed again: each met a newer attempt.
    pub fn met_a_claim(&self) -> usize {
        self.lock().met_a_claim
    }
}

struct LateIntents {
    inner: Arc<dyn Intents>,
    late: LateSettlements,
}

impl LateIntents {
    /// Draws whether the settlement `request` (just applied) has a late twin, and if so sends
    /// the twin once the intent is claimed again (or at the bound), answered to nobody.
    fn maybe_late(&self, request: &TransitionRequest) {
        let woken = {
            let mut late = self.late.lock();
            let rate = late.rate;
            if rate == 0.0 || !late.rng.random_bool(rate) {
                return;
            }
            let (tx, rx) = oneshot::channel();
            late.waiting
                .entry(request.intent_id.clone())
                .or_default()
                .push(tx);
            late.held += 1;
            rx
        };
        let (inner, request, bound) = (self.inner.clone(), request.clone(), self.late.bound);
        tokio::spawn(async move {
            // Woken by the intent's next claim, or sent at the bound; nobody hears the answer.
            let _ = tokio::time::timeout(bound, woken).await;
            let _ = inner.transition(&request).await;
        });
    }
}

fn is_settlement(request: &TransitionRequest) -> bool {
    matches!(
        request.transition,
        Transition::Complete { .. } | Transition::Rewait { .. } | Transition::Release { .. }
    )
}

#[async_trait]
impl Intents for LateIntents {
    async fn register_wait(
        &self,
        intent: &Intent,
        consent: &ConsentRecord,
    ) -> Result<(), StoreError> {
        self.inner.register_wait(intent, consent).await
    }

    async fn get_intent(&self, id: &IntentId) -> Result<Option<Intent>, StoreError> {
        self.inner.get_intent(id).await
    }

    async fn get_consent(&self, id: &IntentId) -> Result<Option<ConsentRecord>, StoreError> {
        self.inner.get_consent(id).await
    }

    async fn intents(&self, ids: &[IntentId]) -> Result<Vec<Intent>, StoreError> {
        self.inner.intents(ids).await
    }

    async fn open_on_seat(
        &self,
        seat_id: &SeatId,
        limit: usize,
    ) -> Result<Vec<Intent>, StoreError> {
        self.inner.open_on_seat(seat_id, limit).await
    }

    async fn transition(&self, request: &TransitionRequest) -> Result<Intent, TransitionError> {
        let result = self.inner.transition(request).await;
        match &request.transition {
            Transition::Claim { .. } if result.is_ok() => {
                // The intent's next attempt: its stale settlements arrive now.
                let waiting = {
                    let mut late = self.late.lock();
                    let waiting = late.waiting.remove(&request.intent_id).unwrap_or_default();
                    late.met_a_claim += waiting.len();
                    waiting
                };
                for wake in waiting {
                    let _ = wake.send(());
                }
            }
            _ if result.is_ok() && is_settlement(request) => self.maybe_late(request),
            _ => {}
        }
        result
    }

    async fn history(
        &self,
        id: &IntentId,
        after: Option<u64>,
        size: PageSize,
    ) -> Result<Page<TransitionRecord, u64>, StoreError> {
        self.inner.history(id, after, size).await
    }

    async fn seat_claim(&self, seat_id: &SeatId) -> Result<Option<SeatClaim>, StoreError> {
        self.inner.seat_claim(seat_id).await
    }

    async fn due_intents(&self, now: Millis, limit: usize) -> Result<Vec<Intent>, StoreError> {
        self.inner.due_intents(now, limit).await
    }

    async fn suppression(
        &self,
        seat_id: &SeatId,
        now: Millis,
    ) -> Result<Option<Suppression>, StoreError> {
        self.inner.suppression(seat_id, now).await
    }

    async fn last_taken(&self, seat_id: &SeatId) -> Result<Option<Suppression>, StoreError> {
        self.inner.last_taken(seat_id).await
    }
}

/// `flights` as a store that ignores idempotency keys would answer, if [`Plant::KeyIgnored`] is
/// among `plants`, as one that cuts each bookings page short, if [`Plant::ShortPage`] is, and as
/// one that loses a record put already answered, if [`Plant::AnsweredRecordDropped`] is; else
/// `flights` itself.
pub fn wrap_flights(flights: Arc<dyn Flights>, plants: &[Plant]) -> Arc<dyn Flights> {
    plants.iter().fold(flights, |inner, plant| match plant {
        Plant::KeyIgnored | Plant::ShortPage | Plant::AnsweredRecordDropped => {
            Arc::new(PlantedFlights {
                inner,
                plant: *plant,
            })
        }
        _ => inner,
    })
}

/// The flights port as a buggy adapter would answer it, one plant per decorator:
/// - [`Plant::KeyIgnored`]: every key begins afresh, and a booking completes no record;
/// - [`Plant::ShortPage`]: every bookings page loses its last item;
/// - [`Plant::AnsweredRecordDropped`]: a record put already answered is answered `Started` and
///   never written.
///
/// Everything the plant does not bend is passed on.
struct PlantedFlights {
    inner: Arc<dyn Flights>,
    plant: Plant,
}

impl PlantedFlights {
    fn keys_ignored(&self) -> bool {
        self.plant == Plant::KeyIgnored
    }
}

#[async_trait]
impl Flights for PlantedFlights {
    async fn create_flight(&self, flight: &Flight) -> Result<bool, StoreError> {
        self.inner.create_flight(flight).await
    }

    async fn inventory(&self, id: &FlightId) -> Result<Option<Inventory>, StoreError> {
        self.inner.inventory(id).await
    }

    async fn book(
        &self,
        booking: &Booking,
        max_per_user: Option<u32>,
        answer_to: Option<(&IdempotencyKey, &str)>,
        admission: Option<&Admission>,
    ) -> Result<(), BookRefusal> {
        let answer_to = if self.keys_ignored() { None } else { answer_to };
        self.inner
            .book(booking, max_per_user, answer_to, admission)
            .await
    }

    async fn mark_sold_out(&self, id: &FlightId, shards: u32) -> Result<bool, StoreError> {
        self.inner.mark_sold_out(id, shards).await
    }

    async fn bookings_of(
        &self,
        user: &UserId,
        after: Option<&BookingId>,
        size: PageSize,
    ) -> Result<Page<Booking, BookingId>, StoreError> {
        let mut page = self.inner.bookings_of(user, after, size).await?;
        if self.plant == Plant::ShortPage {
            page.items.pop();
        }
        Ok(page)
    }

    async fn cancel_booking(
        &self,
        user: &UserId,
        flight: &FlightId,
        id: &BookingId,
        now: Millis,
    ) -> Result<Booking, CancelBookingRefusal> {
        self.inner.cancel_booking(user, flight, id, now).await
    }

    async fn begin_request(&self, record: &IdempotencyRecord) -> Result<Begun, StoreError> {
        let answered = matches!(record.state, RequestState::Done { .. });
        if self.keys_ignored() || (self.plant == Plant::AnsweredRecordDropped && answered) {
            return Ok(Begun::Started);
        }
        self.inner.begin_request(record).await
    }

    async fn finish_request(
        &self,
        user: &UserId,
        key: &IdempotencyKey,
        token: &str,
        answer: &BookingAnswer,
    ) -> Result<bool, StoreError> {
        if self.keys_ignored() {
            return Ok(true);
        }
        self.inner.finish_request(user, key, token, answer).await
    }

    async fn abandon_request(
        &self,
        user: &UserId,
        key: &IdempotencyKey,
        token: &str,
    ) -> Result<(), StoreError> {
        if self.keys_ignored() {
            return Ok(());
        }
        self.inner.abandon_request(user, key, token).await
    }
}
