//! The sale's flights: inventories, bookings, cancels and the idempotency records of sale
//! requests.

use super::StoreError;
use crate::domain::{Millis, Page, PageSize, UserId};
use async_trait::async_trait;
use thiserror::Error;

/// Why a booking write was refused.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum BookRefusal {
    /// The shard has fewer seats than asked; how many it had (from the item the failed
    /// condition saw).
    #[error("the shard has {available} seats left")]
    ShardShort { available: u32 },
    /// The user would hold more than the flight's `max_per_user`.
    #[error("the per-user limit would be passed")]
    LimitReached,
    /// The idempotency record is no longer this request's (it expired and another request took
    /// it over): nothing was written.
    #[error("the idempotency record moved on")]
    RequestTakenOver,
    /// The user's rate window for bookings is spent (`admission`'s): nothing was written.
    #[error("the user's rate window is spent")]
    RateLimited,
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CancelBookingRefusal {
    /// No such booking of this user (another user's is indistinguishable on purpose).
    #[error("no such booking")]
    NotFound,
    /// Cancelled before: the booking as it is.
    #[error("already cancelled")]
    AlreadyCancelled(Box<crate::domain::Booking>),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<crate::domain::CancelRefusal> for CancelBookingRefusal {
    fn from(refusal: crate::domain::CancelRefusal) -> Self {
        match refusal {
            crate::domain::CancelRefusal::NotFound => CancelBookingRefusal::NotFound,
            crate::domain::CancelRefusal::AlreadyCancelled(b) => {
                CancelBookingRefusal::AlreadyCancelled(b)
            }
        }
    }
}

impl From<crate::domain::BookingRefusal> for BookRefusal {
    fn from(refusal: crate::domain::BookingRefusal) -> Self {
        match refusal {
            crate::domain::BookingRefusal::LimitReached => BookRefusal::LimitReached,
            crate::domain::BookingRefusal::ShardShort { available } => {
                BookRefusal::ShardShort { available }
            }
        }
    }
}

/// What [`Flights::begin_request`] found under the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Begun {
    /// This request now owns the key (new, or taken over from an abandoned one).
    Started,
    /// Another request's record, as stored.
    Existing(crate::domain::IdempotencyRecord),
}

/// Flight options, their counted inventory, bookings and booking idempotency.
#[async_trait]
pub trait Flights: Send + Sync {
    /// One transaction: the flight item and one counter per shard at its share of the capacity.
    /// `Ok(false)` if the flight exists (nothing written).
    async fn create_flight(&self, flight: &crate::domain::Flight) -> Result<bool, StoreError>;

    /// The flight and every shard's count, in one `Query`; `None` if unknown.
    async fn inventory(
        &self,
        id: &crate::domain::FlightId,
    ) -> Result<Option<crate::domain::Inventory>, StoreError>;

    /// One transaction: shard `booking.shard` goes down by `booking.head_count` if it has that
    /// many (else `ShardShort`); the booking is put (an existing id is `Store(Unavailable)`);
    /// with `max_per_user`, the user's count on the flight goes up if it stays within (else
    /// `LimitReached`); with `answer_to`, that in-progress idempotency record (by its token) is
    /// completed with this booking as its answer (else `RequestTakenOver`); with `admission`,
    /// the request is counted in the user's rate window if it admits one more (else
    /// `RateLimited`), so a booking costs one commit, not a window's write and then its own.
    /// Refusals checked in that order. The flight must exist.
    async fn book(
        &self,
        booking: &crate::domain::Booking,
        max_per_user: Option<u32>,
        answer_to: Option<(&crate::domain::IdempotencyKey, &str)>,
        admission: Option<&crate::domain::Admission>,
    ) -> Result<(), BookRefusal>;

    /// Marks the flight sold out if every one of its `shards` is at zero: one transaction (a
    /// condition per shard, an update of the flight). `Ok(false)` if some shard has stock.
    async fn mark_sold_out(
        &self,
        id: &crate::domain::FlightId,
        shards: u32,
    ) -> Result<bool, StoreError>;

    /// One page of the user's bookings (any flight, any status) in booking id order (ids are
    /// UUIDv7, so oldest first): those after booking `after` (from the first when `None`), at
    /// most `size`; its cursor is the last booking id when later bookings exist. One bounded
    /// `Query` (`size + 1` items).
    async fn bookings_of(
        &self,
        user: &UserId,
        after: Option<&crate::domain::BookingId>,
        size: PageSize,
    ) -> Result<Page<crate::domain::Booking, crate::domain::BookingId>, StoreError>;

    /// One transaction: the user's booking on `flight` `BOOKED -> CANCELLED` at `now`, its seats
    /// back to its shard, the user's count on the flight down, the flight's sold-out mark
    /// removed, and the flight's waiting list served from the shard's free seats as a hold's
    /// return serves it ([`CheckoutHolds::resolve_hold`](super::CheckoutHolds::resolve_hold)). Returns the cancelled booking. Refusals: `NotFound` (no such booking of this
    /// user on this flight), `AlreadyCancelled`.
    async fn cancel_booking(
        &self,
        user: &UserId,
        flight: &crate::domain::FlightId,
        id: &crate::domain::BookingId,
        now: Millis,
    ) -> Result<crate::domain::Booking, CancelBookingRefusal>;

    /// Takes the idempotency key for a request: one conditional put of `record` that applies if
    /// the key is new, or its record is abandoned (in progress past its expiry at
    /// `record.created_at`). Otherwise the stored record.
    ///
    /// `record` is in progress (its token and expiry: the request will attempt something), or
    /// already done (a refusal decided without writing anything else, such as a flight known
    /// sold out). A done record's put may be answered `Started` before it is durable, and must
    /// then be ordered before every later write of this store, so a retry that reaches the store
    /// after the answer finds it; lost in a crash, it leaves the key as if never used, and a
    /// retry is decided again. Every other write here is durable on its answer.
    async fn begin_request(
        &self,
        record: &crate::domain::IdempotencyRecord,
    ) -> Result<Begun, StoreError>;

    /// Stores `answer` on the user's record under `key` if it is still in progress under `token`
    /// (one conditional write); `Ok(false)` if not.
    async fn finish_request(
        &self,
        user: &UserId,
        key: &crate::domain::IdempotencyKey,
        token: &str,
        answer: &crate::domain::BookingAnswer,
    ) -> Result<bool, StoreError>;

    /// Deletes the record if it is still in progress under `token` (the request failed without
    /// an answer worth keeping, so a retry may start afresh). One conditional delete.
    async fn abandon_request(
        &self,
        user: &UserId,
        key: &crate::domain::IdempotencyKey,
        token: &str,
    ) -> Result<(), StoreError>;
}
