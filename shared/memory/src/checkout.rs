//! Checkout holds (`CheckoutHolds`): the hold items, a shard's `held` count, each user's one
//! live hold per flight, the due index the reaper reads and each flight's holds by status (the
//! operator's listing).
//!
//! Every call decides on the stored items before it writes anything, as DynamoDB's conditions
//! do: the create is the booking's transaction with a hold in place of the booking (and the
//! live-hold condition), and every resolution is [`CheckoutHold::resolve`] on the stored hold,
//! whose answer the writes then follow.

use crate::faults::Op;
use crate::{MemoryBackend, Tx};
use async_trait::async_trait;
use seatgate::domain::{
    BookingAnswer, CheckoutHold, Flight, FlightHoldKey, FlightId, HoldAction, HoldId, HoldStatus,
    IdempotencyKey, Millis, Page, PageSize, RequestState, UserId,
};
use seatgate::ports::{CheckoutHolds, CreateHoldRefusal, ResolveHoldError, StoreError};
use std::ops::Bound::{Excluded, Unbounded};

fn create_in(
    tx: &mut Tx<'_>,
    hold: &CheckoutHold,
    max_per_user: Option<u32>,
    answer_to: Option<(&IdempotencyKey, &str)>,
) -> Result<(), CreateHoldRefusal> {
    let shard = hold.shard as usize;
    let available = tx
        .state
        .flights
        .get(&hold.flight_id)
        .and_then(|row| row.available.get(shard).copied())
        .ok_or_else(|| StoreError::Unavailable("no such flight shard".into()))?;
    let user_key = (hold.flight_id.clone(), hold.user_id.clone());
    let counted = match max_per_user {
        None => 0,
        Some(_) => tx.state.flight_users.get(&user_key).copied().unwrap_or(0),
    };
    let taken = Flight::book(available, counted, hold.head_count, max_per_user)?;
    if tx.state.live_holds.contains_key(&user_key) {
        return Err(CreateHoldRefusal::HoldExists);
    }
    if tx.state.checkout_holds.contains_key(&hold.hold_id) {
        return Err(StoreError::Unavailable("hold id already exists".into()).into());
    }
    let record = match answer_to {
        None => None,
        Some((key, token)) => {
            match tx
                .state
                .idempotency
                .get(&(hold.user_id.clone(), key.clone()))
            {
                Some(r) if r.is_in_progress_under(token) => {
                    let mut r = r.clone();
                    r.state = RequestState::Done {
                        answer: BookingAnswer::Held {
                            hold: Box::new(hold.clone()),
                        },
                    };
                    Some(r)
                }
                _ => return Err(CreateHoldRefusal::RequestTakenOver),
            }
        }
    };
    tx.log(hold);
    if let Some(row) = tx.state.flights.get_mut(&hold.flight_id) {
        row.available[shard] = taken.available;
        row.held[shard] += hold.head_count;
    }
    tx.state.store_checkout_hold(hold.clone());
    if let Some(counted) = taken.held {
        tx.state.flight_users.insert(user_key, counted);
    }
    if let Some(record) = record {
        tx.state
            .idempotency
            .insert((record.user_id.clone(), record.key.clone()), record);
    }
    Ok(())
}

fn resolve_in(
    tx: &mut Tx<'_>,
    user: &UserId,
    flight: &FlightId,
    id: &HoldId,
    action: HoldAction,
    now: Millis,
) -> Result<CheckoutHold, ResolveHoldError> {
    let stored = tx.state.checkout_holds.get(id).cloned();
    let decided_at = crate::plants::decided_at(tx.config, stored.as_ref(), action, now);
    let mut hold = CheckoutHold::resolve(stored.as_ref(), Some(user), flight, action, decided_at)?;
    if decided_at != now {
        hold.resolved_at = Some(now);
    }
    if hold.status.returns_seats() {
        tx.room_for_a_return()?;
    } else if hold.offer_for.is_some() {
        // An offer's confirm or extension is recorded too (as the stream carries every write of
        // the hold item), so it needs its one record's room.
        tx.room_for_change()?;
    }
    let (shard, k) = (hold.shard as usize, hold.head_count);
    let booking = match hold.status {
        HoldStatus::Confirmed => {
            let booking = hold.booking().ok_or_else(|| {
                StoreError::Corrupt("a confirmed hold without its booking".into())
            })?;
            if tx.state.bookings.contains_key(&booking.booking_id) {
                return Err(StoreError::Unavailable("booking id already exists".into()).into());
            }
            Some(booking)
        }
        _ => None,
    };
    tx.log(&hold);
    let planted = tx.config.planted(crate::StorePlant::ConfirmTakesSeatsAgain);
    if let Some(row) = tx.state.flights.get_mut(flight)
        && hold.status != HoldStatus::Held
    {
        if planted && hold.status == HoldStatus::Confirmed {
            // The bug: the held seats stay held, and the stock pays for them again.
            row.available[shard] = row.available[shard].saturating_sub(k);
        } else {
            row.held[shard] -= k;
        }
        if hold.status.returns_seats() {
            row.available[shard] += k;
            row.sold_out = false;
        }
    }
    if hold.status.returns_seats() {
        let user_key = (flight.clone(), hold.user_id.clone());
        if let Some(counted) = tx.state.flight_users.get_mut(&user_key)
            && *counted >= k
        {
            *counted -= k;
        }
    }
    if let Some(booking) = booking {
        tx.state.store_booking(booking);
    }
    tx.record_offer(stored.as_ref(), &hold);
    tx.state.store_checkout_hold(hold.clone());
    if hold.status.returns_seats() {
        crate::waitlist::serve_in(tx, flight, hold.shard, now);
    }
    Ok(hold)
}

#[async_trait]
impl CheckoutHolds for MemoryBackend {
    async fn create_hold(
        &self,
        hold: &CheckoutHold,
        max_per_user: Option<u32>,
        answer_to: Option<(&IdempotencyKey, &str)>,
    ) -> Result<(), CreateHoldRefusal> {
        self.timed(Op::CreateCheckoutHold, |tx| {
            create_in(tx, hold, max_per_user, answer_to)
        })
        .await
    }

    async fn hold(&self, user: &UserId, id: &HoldId) -> Result<Option<CheckoutHold>, StoreError> {
        self.timed(Op::CheckoutHold, |tx| {
            Ok(tx
                .state
                .checkout_holds
                .get(id)
                .filter(|h| h.user_id == *user)
                .cloned())
        })
        .await
    }

    async fn resolve_hold(
        &self,
        user: &UserId,
        flight: &FlightId,
        id: &HoldId,
        action: HoldAction,
        now: Millis,
    ) -> Result<CheckoutHold, ResolveHoldError> {
        self.timed(Op::ResolveHold, |tx| {
            resolve_in(tx, user, flight, id, action, now)
        })
        .await
    }

    async fn holds_of(
        &self,
        user: &UserId,
        after: Option<&HoldId>,
        size: PageSize,
    ) -> Result<Page<CheckoutHold, HoldId>, StoreError> {
        self.timed(Op::HoldsOf, |tx| {
            let ids = tx.state.holds_by_user.get(user);
            let later = ids.into_iter().flat_map(|ids| match after {
                Some(after) => ids.range::<HoldId, _>((Excluded(after), Unbounded)),
                None => ids.range::<HoldId, _>(..),
            });
            let holds = later
                .take(size.overread())
                .filter_map(|id| tx.state.checkout_holds.get(id).cloned())
                .collect();
            Ok(Page::from_overread(holds, size, |h: &CheckoutHold| {
                h.hold_id.clone()
            }))
        })
        .await
    }

    async fn flight_holds(
        &self,
        flight: &Flight,
        status: HoldStatus,
        after: Option<&FlightHoldKey>,
        size: PageSize,
    ) -> Result<Page<CheckoutHold, FlightHoldKey>, StoreError> {
        self.timed(Op::FlightHolds, |tx| {
            let keys = tx
                .state
                .flight_holds
                .get(&(flight.flight_id.clone(), status));
            let later = keys.into_iter().flat_map(|keys| match after {
                Some(after) => keys.range::<FlightHoldKey, _>((Excluded(after), Unbounded)),
                None => keys.range::<FlightHoldKey, _>(..),
            });
            let holds = later
                .take(size.overread())
                .filter_map(|key| tx.state.checkout_holds.get(&key.hold_id).cloned())
                .collect();
            Ok(Page::from_overread(holds, size, FlightHoldKey::of))
        })
        .await
    }

    async fn due_holds(&self, now: Millis, limit: usize) -> Result<Vec<CheckoutHold>, StoreError> {
        self.timed(Op::DueHolds, |tx| {
            Ok(tx
                .state
                .holds_due
                .iter()
                .take_while(|(at, _)| *at <= now)
                .take(limit)
                .filter_map(|(_, id)| tx.state.checkout_holds.get(id).cloned())
                .collect())
        })
        .await
    }
}
