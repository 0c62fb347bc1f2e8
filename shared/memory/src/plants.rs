//! Planted bugs (test-only): a switch that makes this backend break one of its own conditions on
//! purpose, so the simulator can show that its checkers catch the defect. Production code never
//! sets it (no Lambda function links this crate at all, `scripts/check-deps.sh`), and
//! [`MemoryConfig::plants`](crate::MemoryConfig::plants) is empty unless a test fills it.
//!
//! Why here and not as a decorator on a port: each of these bugs removes a condition the store
//! itself checks inside its one conditional write or transaction (the seat's claim, the fencing
//! token, the shard's stock), and a decorator around the port can only bend what goes in and
//! comes out: every write it passes on still runs the store's own condition. So the backend
//! carries the switch, and the port method each bends calls in here at the one point it bends
//! (a line or two in `intents.rs` and `flights.rs`):
//! - [`StorePlant::ClaimSkipsSeat`]: a claim neither checks nor takes its seat's claim
//!   (`Intents::transition`), so a second attempt on a seat can be claimed while another is in
//!   flight or its outcome is unknown;
//! - [`StorePlant::UnfencedSettle`]: a settlement (complete, rewait, release) is applied whatever
//!   the intent's fencing token (the condition keeps `status = RESERVING` and drops
//!   `fencing_token = :t`), so a stale attempt's late settlement overwrites a newer attempt's
//!   state;
//! - [`StorePlant::BookReadThenWrite`]: a booking reads the shard's counter in one call, yields to
//!   other tasks, then writes the decrement it decided on the value it read, unconditionally, in
//!   a second call (`Flights::book`): two bookings (or a booking and a cancel) interleaved there
//!   lose an update, and the shard oversells or loses seats;
//! - [`StorePlant::ConfirmTakesSeatsAgain`]: a checkout hold's confirm written as a fresh
//!   booking (`CheckoutHolds::resolve_hold`): it takes the seats from the shard's `available`
//!   a second time and leaves them counted as `held`, so every confirm sells seats twice;
//! - [`StorePlant::OfferSkipsTheLine`]: a return serves the waiting list newest first
//!   (`crate::waitlist::serve_in`), so a later joiner is offered seats an earlier one waited for;
//! - [`StorePlant::ConfirmPastDeadline`]: a checkout hold's confirm without its deadline
//!   condition (`CheckoutHolds::resolve_hold`, as a DynamoDB update that kept `status = HELD`
//!   and dropped `expires_at > :now`), so a hold the reaper has not lapsed yet is sold to a
//!   buyer who paid after its deadline;
//! - [`StorePlant::SuppressionForgotten`]: a win's transaction without its seat's suppression
//!   (`Intents::transition`), so an intent confirmed on a seat this system already holds is sent
//!   upstream instead of being closed locally;
//! - [`StorePlant::HistorySkipped`]: a settlement to an end state written without its history
//!   record (the intent's write, in `Tx::write_intent`), so the history stops short of the
//!   state an operator is asked about;
//! - [`StorePlant::ReadingNotShared`]: a seat or room reading answered as stored and dropped
//!   (`Readings::record`, and a transition's reading), as a write to the wrong key would, so
//!   every instance reads the upstream for itself once its own copy is gone;
//! - [`StorePlant::LimitUnchecked`]: a booking's transaction without the user's count
//!   (`Flights::book`, in `crate::flights::book_in`), so a flight's per-user limit neither
//!   refuses nor counts a booking;
//! - [`StorePlant::WindowUnbounded`]: the per-user rate limit's window counted without its
//!   `< :limit` condition (`RateLimits::take`, and a confirm's admission), so it admits every
//!   request.
//!
//! Each bends only what its name says: everything else (the write log, faults, the other rules)
//! is the backend's ordinary behaviour.

use crate::faults::Op;
use crate::flights::book_in;
use crate::{MemoryBackend, MemoryConfig};
use seatgate::domain::{
    Admission, Booking, CheckoutHold, HoldAction, HoldStatus, IdempotencyKey, Intent, Millis,
    SeatClaimEffect, Transition, TransitionRequest,
};
use seatgate::ports::{BookRefusal, StoreError};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A bug planted in the backend on purpose (see the module doc). Test-only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StorePlant {
    /// A claim that neither checks nor takes the seat's claim.
    ClaimSkipsSeat,
    /// A settlement without the fencing-token condition.
    UnfencedSettle,
    /// A booking as read-then-write.
    BookReadThenWrite,
    /// A checkout hold's confirm that takes its seats from the shard's stock again instead of
    /// moving the held ones.
    ConfirmTakesSeatsAgain,
    /// A return that serves the waiting list from its back.
    OfferSkipsTheLine,
    /// A checkout hold's confirm that does not check the hold's deadline.
    ConfirmPastDeadline,
    /// A win written without its seat's suppression.
    SuppressionForgotten,
    /// A settlement to an end state written without its history record.
    HistorySkipped,
    /// A reading answered as shared and never stored.
    ReadingNotShared,
    /// A booking that neither checks nor counts the per-user limit.
    LimitUnchecked,
    /// A rate window that counts past its limit.
    WindowUnbounded,
}

impl MemoryConfig {
    /// Whether `plant` is planted.
    pub fn planted(&self, plant: StorePlant) -> bool {
        self.plants.contains(&plant)
    }
}

/// The transition's new state, as [`Intent::apply`] decides it, but for
/// [`StorePlant::UnfencedSettle`]: a settlement carrying another token than the intent's is
/// decided as if it carried the intent's own.
pub(crate) fn apply(
    config: &MemoryConfig,
    current: &Intent,
    request: &TransitionRequest,
) -> Option<Intent> {
    if config.planted(StorePlant::UnfencedSettle)
        && let Some(unfenced) = with_token(request, current.fencing_token)
    {
        return current.apply(&unfenced);
    }
    current.apply(request)
}

/// The time a hold's resolution is decided at: `now`, but for
/// [`StorePlant::ConfirmPastDeadline`], a confirm of a live hold past its deadline is decided
/// just before the deadline (the write still records `now` as its time).
pub(crate) fn decided_at(
    config: &MemoryConfig,
    stored: Option<&CheckoutHold>,
    action: HoldAction,
    now: Millis,
) -> Millis {
    match stored {
        Some(hold)
            if config.planted(StorePlant::ConfirmPastDeadline)
                && action == HoldAction::Confirm
                && hold.status == HoldStatus::Held
                && now >= hold.expires_at =>
        {
            Millis(hold.expires_at.0 - 1)
        }
        _ => now,
    }
}

/// `request` with its settlement's token replaced by `token`; `None` for other transitions.
fn with_token(request: &TransitionRequest, token: u64) -> Option<TransitionRequest> {
    let mut unfenced = request.clone();
    match &mut unfenced.transition {
        Transition::Complete { token: t, .. }
        | Transition::Rewait { token: t, .. }
        | Transition::Release { token: t, .. } => *t = token,
        _ => return None,
    }
    Some(unfenced)
}

/// What the transition does to its seat's claim ([`TransitionRequest::seat_claim_effect`]), but
/// for [`StorePlant::ClaimSkipsSeat`]: a claim leaves the seat alone (neither checked nor
/// claimed).
pub(crate) fn seat_claim_effect(
    config: &MemoryConfig,
    request: &TransitionRequest,
) -> SeatClaimEffect {
    match request.seat_claim_effect() {
        SeatClaimEffect::Take(_) if config.planted(StorePlant::ClaimSkipsSeat) => {
            SeatClaimEffect::None
        }
        effect => effect,
    }
}

/// [`StorePlant::BookReadThenWrite`]'s booking: the shard's counter read in one call, a yield
/// to whatever else is ready (another request's store calls), then one write that decides the
/// booking on the counter as read and writes the counter it computed from it, whatever the
/// counter has become meanwhile (the booking, the per-user count and the idempotency answer are
/// written as in the real transaction).
pub(crate) async fn book_read_then_write(
    backend: &MemoryBackend,
    booking: &Booking,
    max_per_user: Option<u32>,
    answer_to: Option<(&IdempotencyKey, &str)>,
    admission: Option<&Admission>,
) -> Result<(), BookRefusal> {
    let shard = booking.shard as usize;
    let seen = backend
        .timed(Op::Inventory, |tx| {
            Ok::<_, StoreError>(
                tx.state
                    .flights
                    .get(&booking.flight_id)
                    .and_then(|row| row.available.get(shard).copied()),
            )
        })
        .await?;
    YieldNow::default().await;
    backend
        .timed(Op::Book, |tx| {
            let Some(seen) = seen else {
                // No such shard when read: the ordinary refusal.
                return book_in(tx, booking, max_per_user, answer_to, admission);
            };
            let Some(now) = tx
                .state
                .flights
                .get_mut(&booking.flight_id)
                .and_then(|row| row.available.get_mut(shard))
                .map(|counter| std::mem::replace(counter, seen))
            else {
                return book_in(tx, booking, max_per_user, answer_to, admission);
            };
            let result = book_in(tx, booking, max_per_user, answer_to, admission);
            if result.is_err() {
                // Refused: nothing written, so the counter stays what it is now.
                if let Some(counter) = tx
                    .state
                    .flights
                    .get_mut(&booking.flight_id)
                    .and_then(|row| row.available.get_mut(shard))
                {
                    *counter = now;
                }
            }
            result
        })
        .await
}

/// Returns pending once, asking to be polled again at once: the executor runs every other ready
/// task first (as a network round trip between two store calls would let it), and no time passes.
/// Written out here so the backend needs no runtime of its own.
#[derive(Default)]
struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seatgate::domain::{
        BookingId, BookingStatus, ConsentRecord, Flight, FlightId, IntentStatus, Millis, Reason,
        SeatId, Terminal, UserId,
    };
    use seatgate::ports::{Flights, Intents, TransitionError};
    use seatgate_testkit::ManualClock;
    use std::sync::Arc;
    use std::time::Duration;

    const START: Millis = Millis(1_767_225_600_000);

    fn backend(plants: &[StorePlant]) -> MemoryBackend {
        let config = MemoryConfig {
            plants: plants.to_vec(),
            ..MemoryConfig::default()
        };
        MemoryBackend::new(Arc::new(ManualClock::new(START)), config)
    }

    /// A wait of `user` on seat W-1, registered and due at once.
    async fn wait(store: &MemoryBackend, user: &str) -> Intent {
        let intent = Intent::waiting(
            UserId::parse(user).unwrap(),
            SeatId::parse("W-1").unwrap(),
            START.plus(Duration::from_secs(600)),
            START,
        );
        let consent = ConsentRecord::for_intent(&intent, START);
        store.register_wait(&intent, &consent).await.unwrap();
        intent
    }

    fn claim(intent: &Intent) -> TransitionRequest {
        TransitionRequest::on(
            intent,
            START,
            Transition::claim(START, &seatgate::config::Timing::local()),
        )
    }

    #[tokio::test]
    async fn a_claim_that_skips_its_seat_is_let_onto_a_claimed_seat() {
        for (plants, second_claimed) in [(vec![], false), (vec![StorePlant::ClaimSkipsSeat], true)]
        {
            let store = backend(&plants);
            let (a, b) = (wait(&store, "user-a").await, wait(&store, "user-b").await);
            store.transition(&claim(&a)).await.unwrap();
            let second = store.transition(&claim(&b)).await;
            assert_eq!(second.is_ok(), second_claimed, "{plants:?}: {second:?}");
            if !second_claimed {
                assert!(matches!(second, Err(TransitionError::SeatClaimed(_))));
            }
        }
    }

    #[tokio::test]
    async fn an_unfenced_settlement_lands_on_a_newer_attempt() {
        for (plants, stale_applied) in [(vec![], false), (vec![StorePlant::UnfencedSettle], true)] {
            let store = backend(&plants);
            let intent = wait(&store, "user-a").await;
            let first = store.transition(&claim(&intent)).await.unwrap();
            let rewait = TransitionRequest::on(
                &first,
                START,
                Transition::Rewait {
                    token: first.fencing_token,
                    next_attempt_at: START,
                    due_at: START,
                    reason: Reason::SeatTaken,
                    suppress: None,
                },
            );
            store.transition(&rewait).await.unwrap();
            let second = store.transition(&claim(&intent)).await.unwrap();
            assert_eq!(second.fencing_token, first.fencing_token + 1);
            // The first attempt's settlement, sent again late under its old token.
            let stale = TransitionRequest::on(
                &first,
                START,
                Transition::Complete {
                    token: first.fencing_token,
                    status: Terminal::FailedRace,
                    charge_id: None,
                    reason: Reason::SeatTaken,
                    suppress: None,
                },
            );
            let landed = store.transition(&stale).await;
            assert_eq!(landed.is_ok(), stale_applied, "{plants:?}: {landed:?}");
            let now = store.get_intent(&intent.intent_id).await.unwrap().unwrap();
            let expected = if stale_applied {
                IntentStatus::FailedRace
            } else {
                IntentStatus::Reserving
            };
            assert_eq!(now.status, expected, "{plants:?}");
        }
    }

    #[tokio::test]
    async fn two_bookings_read_then_written_lose_an_update() {
        for (plants, left) in [(vec![], 2), (vec![StorePlant::BookReadThenWrite], 3)] {
            let store = backend(&plants);
            let flight_id = FlightId::parse("FL-1").unwrap();
            let flight = Flight::new(flight_id.clone(), 4, None, 1, START).unwrap();
            store.create_flight(&flight).await.unwrap();
            let booking = |user: &str| Booking {
                booking_id: BookingId::generate(),
                flight_id: flight_id.clone(),
                user_id: UserId::parse(user).unwrap(),
                head_count: 1,
                shard: 0,
                status: BookingStatus::Booked,
                created_at: START,
                cancelled_at: None,
            };
            let (a, b) = (booking("user-a"), booking("user-b"));
            // Polled in turn on one task: each runs until it yields.
            let (ra, rb) = futures::join!(
                store.book(&a, None, None, None),
                store.book(&b, None, None, None)
            );
            ra.unwrap();
            rb.unwrap();
            let inventory = store.inventory(&flight_id).await.unwrap().unwrap();
            assert_eq!(
                inventory.available,
                vec![left],
                "{plants:?}: two seats booked"
            );
        }
    }
}
