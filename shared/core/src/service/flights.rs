//! The flash sale: flight options, bookings against their counted inventory, and cancels.
//!
//! A booking is one transaction (a conditional decrement of one shard and the booking record,
//! plus the per-user count and the idempotency answer when they apply), so nothing can oversell
//! however many requests race. What this service adds around it:
//! - Doomed requests cost nothing: once every shard is at zero the flight is marked sold out in
//!   the store (one transaction, once), and each instance keeps the flight's state for
//!   `read_ttl`, so a sold-out flight answers `sold_out` without a write (or, within the TTL,
//!   even a read). A cancel clears the mark; instances see it within the TTL.
//! - The user's rate window is counted inside the booking's own transaction (one item more):
//!   a booking's answer waits for one commit, not a window's and then its own, and a booking
//!   the transaction refuses spends nothing of the window.
//! - Shards: a booking starts at a random shard and moves to the next when one is short, so load
//!   spreads over the counters and stock left anywhere is found.
//! - `Idempotency-Key`: the first request under a key records it in progress (expiring), and its
//!   answer is stored with it (a successful booking's in the same transaction as the booking), so
//!   a retry gets exactly the first answer; another request reusing the key is refused, and one
//!   arriving while the first is still working is told so. On a flight the cache knows sold out
//!   the record is put already answered (one write, which the port may make durable after the
//!   answer: the refusal changed nothing else, so no other write waits on it).

use super::known_flights::KnownFlights;
use super::{AdmitError, with_retry};
use crate::domain::{
    Booking, BookingAnswer, BookingId, BookingStatus, CheckoutHold, CheckoutTimes, Flight,
    FlightError, FlightId, HoldId, IdempotencyKey, IdempotencyRecord, Inventory, LimitedRoute,
    MAX_HEAD_COUNT, Millis, Page, PageSize, RequestState, UserId,
};
use crate::ports::{
    Begun, BookRefusal, CancelBookingRefusal, Clock, CreateHoldRefusal, Flights, StoreError,
};
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use tracing::{info, warn};

use crate::metrics::{self, Metric};

/// How long a booking request holds its idempotency key before another may take it over: far
/// longer than one request can take (the API function's timeout is 10 s).
pub const IN_PROGRESS_FOR: Duration = Duration::from_secs(60);

#[derive(Debug, Error)]
pub enum CreateFlightError {
    #[error(transparent)]
    Invalid(#[from] FlightError),
    #[error("a flight with this id exists")]
    Exists,
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Debug, Error)]
pub enum ReadFlightError {
    #[error("no such flight")]
    NotFound,
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Debug, Error)]
pub enum BookError {
    #[error("headCount must be 1 to {MAX_HEAD_COUNT}")]
    HeadCount,
    #[error("this idempotency key was used for another request")]
    KeyReused,
    #[error("a request with this idempotency key is still in progress; retry shortly")]
    InProgress,
    #[error("too many bookings from this user; retry after Retry-After seconds")]
    RateLimited(std::time::Duration),
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Debug, Error)]
pub enum CancelBookingError {
    #[error("no such booking")]
    NotFound,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a request for seats asks for: a booking at once, or a checkout hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SaleRequest {
    Book,
    Hold,
}

pub struct FlightService {
    flights: Arc<dyn Flights>,
    /// Where a checkout hold is made (its life after that is `CheckoutService`'s).
    holds: Arc<dyn crate::ports::CheckoutHolds>,
    clock: Arc<dyn Clock>,
    random: Arc<dyn crate::ports::Random>,
    ids: Arc<dyn crate::ports::Ids>,
    limiter: super::RateLimiter,
    known: KnownFlights,
}

impl FlightService {
    pub(super) fn new(
        ports: &super::Ports,
        limiter: super::RateLimiter,
        known: KnownFlights,
    ) -> Self {
        FlightService {
            flights: ports.flights.clone(),
            holds: ports.holds.clone(),
            clock: ports.clock.clone(),
            random: ports.random.clone(),
            ids: ports.ids.clone(),
            limiter,
            known,
        }
    }

    pub async fn create(
        &self,
        flight_id: FlightId,
        capacity: u32,
        max_per_user: Option<u32>,
        shards: u32,
    ) -> Result<Inventory, CreateFlightError> {
        self.create_with_checkout(
            flight_id,
            capacity,
            max_per_user,
            shards,
            CheckoutTimes::default(),
        )
        .await
    }

    /// [`FlightService::create`] with the flight's hold and offer lifetimes given.
    pub async fn create_with_checkout(
        &self,
        flight_id: FlightId,
        capacity: u32,
        max_per_user: Option<u32>,
        shards: u32,
        checkout: CheckoutTimes,
    ) -> Result<Inventory, CreateFlightError> {
        let flight = Flight::new(flight_id, capacity, max_per_user, shards, self.clock.now())?
            .with_checkout(checkout);
        if !with_retry(&*self.random, || self.flights.create_flight(&flight)).await? {
            return Err(CreateFlightError::Exists);
        }
        info!(flight_id = %flight.flight_id, capacity, shards, "flight created");
        self.known.invalidate(&flight.flight_id).await;
        let available = (0..flight.shards)
            .map(|s| flight.shard_capacity(s))
            .collect();
        Ok(Inventory {
            held: vec![0; flight.shards as usize],
            flight,
            available,
            sold_out: false,
        })
    }

    /// The flight and what is left (read from the store: an exact count).
    pub async fn inventory(&self, id: &FlightId) -> Result<Inventory, ReadFlightError> {
        with_retry(&*self.random, || self.flights.inventory(id))
            .await?
            .ok_or(ReadFlightError::NotFound)
    }

    /// Books `head_count` seats on `flight_id` for `user`, under `key` if given. The answer is
    /// what the first request under the key got (`Ok` for every answer the user should see:
    /// booked, sold out, limit reached, no such flight).
    pub async fn book(
        &self,
        user: &UserId,
        flight_id: &FlightId,
        head_count: u32,
        key: Option<&IdempotencyKey>,
    ) -> Result<BookingAnswer, BookError> {
        self.sale_request(SaleRequest::Book, user, flight_id, head_count, key)
            .await
    }

    /// Holds `head_count` seats on `flight_id` for `user` for the flight's hold TTL, under `key`
    /// if given: [`BookingAnswer::Held`], or why not (sold out, limit reached, the user already
    /// holds seats here, no such flight). The same sale path and idempotency rules as a booking;
    /// the hold's life after that is [`super::CheckoutService`]'s.
    pub async fn hold(
        &self,
        user: &UserId,
        flight_id: &FlightId,
        head_count: u32,
        key: Option<&IdempotencyKey>,
    ) -> Result<BookingAnswer, BookError> {
        self.sale_request(SaleRequest::Hold, user, flight_id, head_count, key)
            .await
    }

    /// A booking or a checkout hold, under `key` if given.
    async fn sale_request(
        &self,
        request: SaleRequest,
        user: &UserId,
        flight_id: &FlightId,
        head_count: u32,
        key: Option<&IdempotencyKey>,
    ) -> Result<BookingAnswer, BookError> {
        if !(1..=MAX_HEAD_COUNT).contains(&head_count) {
            return Err(BookError::HeadCount);
        }
        let Some(key) = key else {
            return match self
                .attempt(request, user, flight_id, head_count, None)
                .await
            {
                Ok(answer) => Ok(answer),
                // Only a request with a key can lose its record.
                Err(AttemptError::TakenOver) => Err(BookError::InProgress),
                Err(AttemptError::RateLimited(after)) => Err(BookError::RateLimited(after)),
                Err(AttemptError::Store(e)) => Err(e.into()),
            };
        };
        let now = self.clock.now();
        let token = self.ids.next_uuid().to_string();
        // A flight the cache knows sold out needs no attempt: the key's record is put already
        // answered, one write where an attempt's record is two, and the port lets it answer
        // before that write is durable (`Flights::begin_request`).
        let sold_out = matches!(self.known.get(flight_id).await?, Some(k) if k.sold_out);
        let record = IdempotencyRecord {
            user_id: user.clone(),
            key: key.clone(),
            fingerprint: match request {
                SaleRequest::Book => IdempotencyRecord::fingerprint(flight_id, head_count),
                SaleRequest::Hold => IdempotencyRecord::hold_fingerprint(flight_id, head_count),
            },
            state: if sold_out {
                RequestState::Done {
                    answer: BookingAnswer::SoldOut,
                }
            } else {
                RequestState::InProgress {
                    token: token.clone(),
                    expires_at: now.plus(IN_PROGRESS_FOR),
                }
            },
            created_at: now,
        };
        match with_retry(&*self.random, || self.flights.begin_request(&record)).await? {
            Begun::Started if sold_out => {
                count_answer(&BookingAnswer::SoldOut);
                return Ok(BookingAnswer::SoldOut);
            }
            Begun::Started => {}
            Begun::Existing(found) if found.fingerprint != record.fingerprint => {
                return Err(BookError::KeyReused);
            }
            Begun::Existing(found) => {
                return match found.state {
                    RequestState::Done { answer } => Ok(answer),
                    RequestState::InProgress { .. } => Err(BookError::InProgress),
                };
            }
        }
        match self
            .attempt(request, user, flight_id, head_count, Some((key, &token)))
            .await
        {
            // Stored with the booking or the hold, in its own transaction.
            Ok(answer @ (BookingAnswer::Booked { .. } | BookingAnswer::Held { .. })) => Ok(answer),
            Ok(answer) => {
                if !with_retry(&*self.random, || {
                    self.flights.finish_request(user, key, &token, &answer)
                })
                .await?
                {
                    warn!(flight_id = %flight_id, "idempotency record taken over before its answer was stored");
                }
                Ok(answer)
            }
            Err(AttemptError::TakenOver) => Err(BookError::InProgress),
            Err(AttemptError::RateLimited(after)) => {
                // Not an answer to keep: the same request may come back when the window ends.
                if let Err(e) = self.flights.abandon_request(user, key, &token).await {
                    warn!(error = %e, "could not release the idempotency key; it expires");
                }
                Err(BookError::RateLimited(after))
            }
            Err(AttemptError::Store(e)) => {
                // No answer worth keeping: let a retry start afresh at once.
                if let Err(e) = self.flights.abandon_request(user, key, &token).await {
                    warn!(error = %e, "could not release the idempotency key; it expires");
                }
                Err(e.into())
            }
        }
    }

    /// One booking attempt, its answer counted by outcome ([`Metric::Bookings`]); an answer
    /// replayed from an idempotency record is not a new one and is not counted again.
    async fn attempt(
        &self,
        request: SaleRequest,
        user: &UserId,
        flight_id: &FlightId,
        head_count: u32,
        answer_to: Option<(&IdempotencyKey, &str)>,
    ) -> Result<BookingAnswer, AttemptError> {
        let answer = self
            .try_booking(request, user, flight_id, head_count, answer_to)
            .await;
        if let Ok(answer) = &answer {
            count_answer(answer);
        }
        answer
    }

    async fn try_booking(
        &self,
        request: SaleRequest,
        user: &UserId,
        flight_id: &FlightId,
        head_count: u32,
        answer_to: Option<(&IdempotencyKey, &str)>,
    ) -> Result<BookingAnswer, AttemptError> {
        let Some(known) = self.known.get(flight_id).await? else {
            return Ok(BookingAnswer::NoSuchFlight);
        };
        if known.sold_out {
            return Ok(BookingAnswer::SoldOut);
        }
        let flight = &known.flight;
        if Flight::never_fits(head_count, flight.max_per_user) {
            return Ok(BookingAnswer::LimitReached);
        }
        // Only a request that will write is counted: an answer from the sold-out cache costs
        // nothing, and must stay free of writes (one per rejection would double a sale's load).
        // A booking is counted inside its own transaction (one commit to wait for, and a
        // refused one spends nothing); a hold still takes its window first.
        let admission = match request {
            SaleRequest::Book => Some(self.limiter.admission(user, LimitedRoute::Book)),
            SaleRequest::Hold => match self.limiter.admit(user, LimitedRoute::Book).await {
                Ok(()) => None,
                Err(AdmitError::Limited(after)) => return Err(AttemptError::RateLimited(after)),
                Err(AdmitError::Store(e)) => return Err(e.into()),
            },
        };
        let now = self.clock.now();
        let start = self.random.up_to(u64::from(flight.shards - 1)) as u32;
        let mut all_empty = true;
        for shard in flight.shard_order(start) {
            if request == SaleRequest::Hold {
                let hold = CheckoutHold::new(
                    HoldId::from_uuid(self.ids.next_uuid()),
                    flight_id.clone(),
                    user.clone(),
                    head_count,
                    shard,
                    BookingId::from_uuid(self.ids.next_uuid()),
                    &flight.checkout,
                    now,
                );
                match with_retry(&*self.random, || {
                    self.holds
                        .create_hold(&hold, flight.max_per_user, answer_to)
                })
                .await
                {
                    Ok(()) => {
                        info!(flight_id = %flight_id, hold_id = %hold.hold_id, head_count, shard, "held");
                        metrics::count(Metric::Checkout, &[("event", "held")], 1);
                        return Ok(BookingAnswer::Held {
                            hold: Box::new(hold),
                        });
                    }
                    Err(CreateHoldRefusal::ShardShort { available }) => all_empty &= available == 0,
                    Err(CreateHoldRefusal::LimitReached) => return Ok(BookingAnswer::LimitReached),
                    Err(CreateHoldRefusal::HoldExists) => return Ok(BookingAnswer::HoldExists),
                    Err(CreateHoldRefusal::RequestTakenOver) => {
                        return Err(AttemptError::TakenOver);
                    }
                    Err(CreateHoldRefusal::Store(e)) => return Err(e.into()),
                }
                continue;
            }
            let booking = Booking {
                booking_id: BookingId::from_uuid(self.ids.next_uuid()),
                flight_id: flight_id.clone(),
                user_id: user.clone(),
                head_count,
                shard,
                status: BookingStatus::Booked,
                created_at: now,
                cancelled_at: None,
            };
            match with_retry(&*self.random, || {
                self.flights
                    .book(&booking, flight.max_per_user, answer_to, admission.as_ref())
            })
            .await
            {
                Ok(()) => {
                    info!(flight_id = %flight_id, booking_id = %booking.booking_id, head_count, shard = booking.shard, "booked");
                    return Ok(BookingAnswer::Booked { booking });
                }
                Err(BookRefusal::ShardShort { available }) => all_empty &= available == 0,
                Err(BookRefusal::LimitReached) => return Ok(BookingAnswer::LimitReached),
                Err(BookRefusal::RequestTakenOver) => return Err(AttemptError::TakenOver),
                Err(BookRefusal::RateLimited) => {
                    return Err(match &admission {
                        Some(a) => AttemptError::RateLimited(self.limiter.refused(&a.window)),
                        // The port refuses on a window only when given one.
                        None => AttemptError::Store(StoreError::Unavailable(
                            "a rate-window refusal without an admission".into(),
                        )),
                    });
                }
                Err(BookRefusal::Store(e)) => return Err(e.into()),
            }
        }
        if all_empty
            && with_retry(&*self.random, || {
                self.flights.mark_sold_out(flight_id, flight.shards)
            })
            .await?
        {
            info!(flight_id = %flight_id, "sold out");
        }
        if all_empty {
            self.known.sold_out(flight).await;
        }
        Ok(BookingAnswer::SoldOut)
    }

    /// How many bookings one page of `GET /me/bookings` holds.
    pub const BOOKINGS_PAGE: PageSize = match PageSize::new(20) {
        Some(size) => size,
        None => panic!("page size out of bounds"),
    };

    /// One page of the user's bookings, oldest first, after booking `after`.
    pub async fn bookings_of(
        &self,
        user: &UserId,
        after: Option<&BookingId>,
    ) -> Result<Page<Booking, BookingId>, StoreError> {
        with_retry(&*self.random, || {
            self.flights.bookings_of(user, after, Self::BOOKINGS_PAGE)
        })
        .await
    }

    /// Cancels the user's booking on `flight_id`: its seats go back exactly once, however often
    /// this is retried (a retry answers the cancelled booking again).
    pub async fn cancel(
        &self,
        user: &UserId,
        flight_id: &FlightId,
        booking_id: &BookingId,
    ) -> Result<Booking, CancelBookingError> {
        let now: Millis = self.clock.now();
        let result = with_retry(&*self.random, || async {
            match self
                .flights
                .cancel_booking(user, flight_id, booking_id, now)
                .await
            {
                Err(CancelBookingRefusal::Store(e)) => Err(e),
                other => Ok(other),
            }
        })
        .await?;
        let booking = match result {
            Ok(b) => {
                info!(flight_id = %flight_id, booking_id = %booking_id, "booking cancelled");
                self.known.invalidate(flight_id).await;
                b
            }
            Err(CancelBookingRefusal::AlreadyCancelled(b)) => *b,
            Err(CancelBookingRefusal::NotFound) => return Err(CancelBookingError::NotFound),
            Err(CancelBookingRefusal::Store(e)) => return Err(e.into()),
        };
        Ok(booking)
    }
}

/// Counts a new answer to a sale request by its outcome ([`Metric::Bookings`]).
fn count_answer(answer: &BookingAnswer) {
    let outcome = match answer {
        BookingAnswer::Booked { .. } => "booked",
        BookingAnswer::Held { .. } => "held",
        BookingAnswer::SoldOut => "sold_out",
        BookingAnswer::LimitReached => "limit_reached",
        BookingAnswer::HoldExists => "hold_exists",
        BookingAnswer::NoSuchFlight => "no_such_flight",
    };
    metrics::count(Metric::Bookings, &[("outcome", outcome)], 1);
}

#[derive(Debug, Error)]
enum AttemptError {
    #[error("the idempotency record was taken over")]
    TakenOver,
    #[error("rate limited")]
    RateLimited(Duration),
    #[error(transparent)]
    Store(#[from] StoreError),
}
