//! The flash sale's store (`Flights`): flights, their shard counters, bookings, per-user counts
//! and idempotency records.
//!
//! A booking is DynamoDB's transaction of four items: the shard's conditional decrement and the
//! per-user count, both decided by the domain's booking rule ([`Flight::book`]: the limit, the
//! shard's stock, the user's count, in that order), the booking's put and the idempotency
//! answer. Every condition is checked on the stored items before any is written, so a refused
//! booking writes nothing, and a shard can never go below zero. The cancel is
//! [`Booking::cancel`] (once), the sold-out mark [`Inventory::is_sold_out`], the idempotency
//! record's conditions [`IdempotencyRecord::may_begin`] and
//! [`IdempotencyRecord::is_in_progress_under`]: the rules the other backends apply.
//! (`StorePlant::BookReadThenWrite`, test-only, splits the booking into a read and a blind write:
//! `plants.rs`.)

use crate::faults::Op;
use crate::state::FlightRow;
use crate::{MemoryBackend, StorePlant, Tx};
use async_trait::async_trait;
use seatgate::domain::{
    Admission, Booking, BookingAnswer, BookingId, Flight, FlightId, IdempotencyKey,
    IdempotencyRecord, Inventory, Millis, Page, PageSize, RequestState, UserId,
};
use seatgate::ports::{Begun, BookRefusal, CancelBookingRefusal, Flights, StoreError};
use std::ops::Bound::{Excluded, Unbounded};

/// The booking's transaction, on the state as the call sees it: every condition decided before
/// anything is written.
pub(crate) fn book_in(
    tx: &mut Tx<'_>,
    booking: &Booking,
    max_per_user: Option<u32>,
    answer_to: Option<(&IdempotencyKey, &str)>,
    admission: Option<&Admission>,
) -> Result<(), BookRefusal> {
    let k = booking.head_count;
    let shard = booking.shard as usize;
    let available = tx
        .state
        .flights
        .get(&booking.flight_id)
        .and_then(|row| row.available.get(shard).copied())
        .ok_or_else(|| StoreError::Unavailable("no such flight shard".into()))?;
    let user_key = (booking.flight_id.clone(), booking.user_id.clone());
    // The user's count is kept (and read) only for a flight with a per-user limit.
    let held = match max_per_user {
        None => 0,
        Some(_) => tx.state.flight_users.get(&user_key).copied().unwrap_or(0),
    };
    let limit = max_per_user.filter(|_| !tx.config.planted(crate::StorePlant::LimitUnchecked));
    let taken = Flight::book(available, held, k, limit)?;
    if tx.state.bookings.contains_key(&booking.booking_id) {
        return Err(StoreError::Unavailable("booking id already exists".into()).into());
    }
    let record = match answer_to {
        None => None,
        Some((key, token)) => {
            let stored = tx
                .state
                .idempotency
                .get(&(booking.user_id.clone(), key.clone()));
            match stored {
                Some(r) if r.is_in_progress_under(token) => {
                    let mut r = r.clone();
                    r.state = RequestState::Done {
                        answer: BookingAnswer::Booked {
                            booking: booking.clone(),
                        },
                    };
                    Some(r)
                }
                _ => return Err(BookRefusal::RequestTakenOver),
            }
        }
    };
    if let Some(a) = admission
        && !crate::rate_limits::admits(tx, &a.window, a.limit)
    {
        return Err(BookRefusal::RateLimited);
    }
    // Every condition holds: the writes, together.
    tx.log(booking);
    if let Some(row) = tx.state.flights.get_mut(&booking.flight_id) {
        row.available[shard] = taken.available;
    }
    tx.state.store_booking(booking.clone());
    if let Some(held) = taken.held {
        tx.state.flight_users.insert(user_key, held);
    }
    if let Some(record) = record {
        tx.state
            .idempotency
            .insert((record.user_id.clone(), record.key.clone()), record);
    }
    if let Some(a) = admission {
        crate::rate_limits::count(tx, &a.window, a.limit);
    }
    Ok(())
}

#[async_trait]
impl Flights for MemoryBackend {
    async fn create_flight(&self, flight: &Flight) -> Result<bool, StoreError> {
        self.timed(Op::CreateFlight, |tx| {
            if tx.state.flights.contains_key(&flight.flight_id) {
                return Ok(false);
            }
            let available = (0..flight.shards)
                .map(|s| flight.shard_capacity(s))
                .collect();
            tx.log(flight);
            tx.state.flights.insert(
                flight.flight_id.clone(),
                FlightRow {
                    flight: flight.clone(),
                    available,
                    held: vec![0; flight.shards as usize],
                    sold_out: false,
                },
            );
            Ok(true)
        })
        .await
    }

    async fn inventory(&self, id: &FlightId) -> Result<Option<Inventory>, StoreError> {
        self.timed(Op::Inventory, |tx| Ok(tx.state.inventory(id)))
            .await
    }

    async fn book(
        &self,
        booking: &Booking,
        max_per_user: Option<u32>,
        answer_to: Option<(&IdempotencyKey, &str)>,
        admission: Option<&Admission>,
    ) -> Result<(), BookRefusal> {
        if self.config().planted(StorePlant::BookReadThenWrite) {
            return crate::plants::book_read_then_write(
                self,
                booking,
                max_per_user,
                answer_to,
                admission,
            )
            .await;
        }
        self.timed(Op::Book, |tx| {
            book_in(tx, booking, max_per_user, answer_to, admission)
        })
        .await
    }

    async fn mark_sold_out(&self, id: &FlightId, shards: u32) -> Result<bool, StoreError> {
        self.timed(Op::MarkSoldOut, |tx| {
            let Some(row) = tx.state.flights.get_mut(id) else {
                return Ok(false);
            };
            // One condition per shard named: each must exist, and the rule holds of them.
            let named = row.available.get(..shards as usize);
            if !named.is_some_and(Inventory::is_sold_out) {
                return Ok(false);
            }
            row.sold_out = true;
            tx.log(id);
            Ok(true)
        })
        .await
    }

    async fn bookings_of(
        &self,
        user: &UserId,
        after: Option<&BookingId>,
        size: PageSize,
    ) -> Result<Page<Booking, BookingId>, StoreError> {
        self.timed(Op::BookingsOf, |tx| {
            let ids = tx.state.bookings_by_user.get(user);
            let later = ids.into_iter().flat_map(|ids| match after {
                Some(after) => ids.range::<BookingId, _>((Excluded(after), Unbounded)),
                None => ids.range::<BookingId, _>(..),
            });
            let bookings = later
                .take(size.overread())
                .filter_map(|id| tx.state.bookings.get(id).cloned())
                .collect();
            Ok(Page::from_overread(bookings, size, |b: &Booking| {
                b.booking_id.clone()
            }))
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
        self.timed(Op::CancelBooking, |tx| {
            let booking = Booking::cancel(tx.state.bookings.get(id), user, flight, now)?;
            tx.room_for_a_return()?;
            tx.log(&booking);
            if let Some(row) = tx.state.flights.get_mut(flight) {
                if let Some(shard) = row.available.get_mut(booking.shard as usize) {
                    *shard += booking.head_count;
                }
                row.sold_out = false;
            }
            // The user's count goes down only if it covers the booking (`booked >= :k`): a
            // flight without a per-user limit keeps no count.
            let user_key = (flight.clone(), user.clone());
            if let Some(held) = tx.state.flight_users.get_mut(&user_key)
                && *held >= booking.head_count
            {
                *held -= booking.head_count;
            }
            tx.state.bookings.insert(id.clone(), booking.clone());
            crate::waitlist::serve_in(tx, flight, booking.shard, now);
            Ok(booking)
        })
        .await
    }

    async fn begin_request(&self, record: &IdempotencyRecord) -> Result<Begun, StoreError> {
        self.timed(Op::BeginRequest, |tx| {
            let key = (record.user_id.clone(), record.key.clone());
            let found = tx.state.idempotency.get(&key);
            if !IdempotencyRecord::may_begin(found, record.created_at) {
                let found = found.cloned().ok_or_else(|| {
                    StoreError::Corrupt("the begin rule refused an absent record".into())
                })?;
                return Ok(Begun::Existing(found));
            }
            tx.log(record);
            tx.state.idempotency.insert(key, record.clone());
            Ok(Begun::Started)
        })
        .await
    }

    async fn finish_request(
        &self,
        user: &UserId,
        key: &IdempotencyKey,
        token: &str,
        answer: &BookingAnswer,
    ) -> Result<bool, StoreError> {
        self.timed(Op::FinishRequest, |tx| {
            let Some(record) = tx.state.idempotency.get(&(user.clone(), key.clone())) else {
                return Ok(false);
            };
            if !record.is_in_progress_under(token) {
                return Ok(false);
            }
            let mut record = record.clone();
            record.state = RequestState::Done {
                answer: answer.clone(),
            };
            tx.log(&record);
            tx.state
                .idempotency
                .insert((user.clone(), key.clone()), record);
            Ok(true)
        })
        .await
    }

    async fn abandon_request(
        &self,
        user: &UserId,
        key: &IdempotencyKey,
        token: &str,
    ) -> Result<(), StoreError> {
        self.timed(Op::AbandonRequest, |tx| {
            let map_key = (user.clone(), key.clone());
            if tx
                .state
                .idempotency
                .get(&map_key)
                .is_some_and(|r| r.is_in_progress_under(token))
            {
                tx.log(&map_key);
                tx.state.idempotency.remove(&map_key);
            }
            Ok(())
        })
        .await
    }
}

/// The bank's books at one instant: every flight's inventory, every booking and every checkout
/// hold, each in key order, and how many writes to them they reflect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Books {
    pub at: Millis,
    pub writes: u64,
    pub flights: Vec<Inventory>,
    pub bookings: Vec<Booking>,
    pub holds: Vec<seatgate::domain::CheckoutHold>,
}

impl MemoryBackend {
    /// The bank's books now, in one critical section: the same as the `at`, `flights`,
    /// `bookings` and `checkout_holds` of a [`crate::Snapshot`] taken at that instant, without
    /// copying the intents a snapshot carries too (a ledger sampler takes this hundreds of times
    /// a run).
    pub fn books(&self) -> Books {
        self.books_since(None).expect("asked unconditionally")
    }

    /// [`MemoryBackend::books`], unless the count of writes to the books is still `seen`
    /// (nothing written to them since that sample: the copy is spared).
    pub fn books_since(&self, seen: Option<u64>) -> Option<Books> {
        let now = self.inner.clock.now();
        let state = crate::lock(&self.inner.state);
        if seen == Some(state.books_writes) {
            return None;
        }
        Some(Books {
            at: now,
            writes: state.books_writes,
            flights: state
                .flights
                .keys()
                .filter_map(|id| state.inventory(id))
                .collect(),
            bookings: state.bookings.values().cloned().collect(),
            holds: state.checkout_holds.values().cloned().collect(),
        })
    }
}
