//! The decisions this backend takes that the domain does not name yet: the confirm's refusal
//! order, the booking cancel, the per-user limit and the shard take (issue 18, part 1, is moving
//! each into `seatgate::domain`). One function per rule, written exactly as the embedded
//! adapter decides it today, so switching to the domain's rule is one line at each call site
//! and this file goes away.

use seatgate::domain::{Action, ActionStatus, Booking, BookingStatus, FlightId, Millis, UserId};
use seatgate::ports::{CancelBookingRefusal, ConfirmRefusal, StoreError};

/// Whether `user` may confirm `action` at `now`. Refusals in the port's order: `NotFound`
/// (missing, or another owner's: a stranger learns nothing else), `AlreadyConfirmed` (even once
/// expired), `Expired`. A confirmed action without its intent id is corrupt.
pub(crate) fn confirm_refusal(
    action: Option<&Action>,
    user: &UserId,
    now: Millis,
) -> Result<Option<ConfirmRefusal>, StoreError> {
    let Some(action) = action.filter(|a| a.user_id == *user) else {
        return Ok(Some(ConfirmRefusal::NotFound));
    };
    if action.status == ActionStatus::Confirmed {
        let intent = action
            .intent_id
            .clone()
            .ok_or_else(|| StoreError::Corrupt("confirmed action without an intent id".into()))?;
        return Ok(Some(ConfirmRefusal::AlreadyConfirmed(intent)));
    }
    if action.is_expired(now) {
        return Ok(Some(ConfirmRefusal::Expired));
    }
    Ok(None)
}

/// The booking `user` cancels on `flight` at `now`, as it becomes: cancelled once. Another
/// user's booking, or one on another flight, is `NotFound` (indistinguishable on purpose).
pub(crate) fn cancelled(
    booking: Option<&Booking>,
    user: &UserId,
    flight: &FlightId,
    now: Millis,
) -> Result<Booking, CancelBookingRefusal> {
    let booking = match booking {
        Some(b) if b.user_id == *user && b.flight_id == *flight => b,
        _ => return Err(CancelBookingRefusal::NotFound),
    };
    if booking.status == BookingStatus::Cancelled {
        return Err(CancelBookingRefusal::AlreadyCancelled(Box::new(
            booking.clone(),
        )));
    }
    let mut booking = booking.clone();
    booking.status = BookingStatus::Cancelled;
    booking.cancelled_at = Some(now);
    Ok(booking)
}

/// Whether a user holding `held` seats on a flight may book `k` more under `max_per_user`.
pub(crate) fn within_per_user_limit(held: u32, k: u32, max_per_user: u32) -> bool {
    held.saturating_add(k) <= max_per_user
}

/// A shard with `available` seats giving `k`: what it has left, or `None` if it has too few
/// (the conditional decrement `available >= :k`).
pub(crate) fn shard_take(available: u32, k: u32) -> Option<u32> {
    available.checked_sub(k)
}
