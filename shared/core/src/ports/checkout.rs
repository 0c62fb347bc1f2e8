//! Checkout holds: seats held for a user for a bounded time, then confirmed, released or lapsed.

use super::StoreError;
use crate::domain::{Millis, Page, PageSize, UserId};
use async_trait::async_trait;
use thiserror::Error;

/// Why a checkout hold's creation was refused.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CreateHoldRefusal {
    /// The shard has fewer seats than asked; how many it had.
    #[error("the shard has {available} seats left")]
    ShardShort { available: u32 },
    /// The user would hold and own more than the flight's `max_per_user`.
    #[error("the per-user limit would be passed")]
    LimitReached,
    /// The user already holds seats on this flight (one live hold per user per flight).
    #[error("the user already holds seats on this flight")]
    HoldExists,
    /// The idempotency record is no longer this request's: nothing was written.
    #[error("the idempotency record moved on")]
    RequestTakenOver,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<crate::domain::BookingRefusal> for CreateHoldRefusal {
    fn from(refusal: crate::domain::BookingRefusal) -> Self {
        match refusal {
            crate::domain::BookingRefusal::LimitReached => CreateHoldRefusal::LimitReached,
            crate::domain::BookingRefusal::ShardShort { available } => {
                CreateHoldRefusal::ShardShort { available }
            }
        }
    }
}

/// Why [`CheckoutHolds::resolve_hold`] wrote nothing.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ResolveHoldError {
    /// The hold rule's refusal ([`crate::domain::CheckoutHold::resolve`]).
    #[error(transparent)]
    Refused(#[from] crate::domain::HoldRefusal),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Checkout holds: seats taken for a bounded time, then confirmed into a booking or given back,
/// once. Every method is one conditional write or one transaction; the hold rule
/// ([`crate::domain::CheckoutHold::resolve`]) decides, the store's conditions enforce it.
#[async_trait]
pub trait CheckoutHolds: Send + Sync {
    /// One transaction: shard `hold.shard`'s `available` down and `held` up by the head count
    /// (else `ShardShort` with what it had); the hold put (an existing id is
    /// `Store(Unavailable)`); the user's count on the flight up within `max_per_user` when
    /// given (else `LimitReached`); the user's one live hold on the flight set to this one
    /// (else `HoldExists`); with `answer_to`, that in-progress idempotency record completed with
    /// [`BookingAnswer::Held`](crate::domain::BookingAnswer::Held) (else `RequestTakenOver`).
    /// Refusals checked in that order. The flight must exist.
    async fn create_hold(
        &self,
        hold: &crate::domain::CheckoutHold,
        max_per_user: Option<u32>,
        answer_to: Option<(&crate::domain::IdempotencyKey, &str)>,
    ) -> Result<(), CreateHoldRefusal>;

    /// The user's hold under `id`; `None` if unknown (or another user's).
    async fn hold(
        &self,
        user: &UserId,
        id: &crate::domain::HoldId,
    ) -> Result<Option<crate::domain::CheckoutHold>, StoreError>;

    /// `action` on hold `id` of `user` on `flight` at `now` (the reaper lapses in the hold's
    /// owner's name, from [`CheckoutHolds::due_holds`]), as the hold
    /// rule decides, in one transaction conditioned on the stored hold being `HELD` and on the
    /// same side of its deadline as the rule saw it. What it writes besides the hold:
    /// - `CONFIRMED`: the shard's `held` down; the booking ([`CheckoutHold::booking`]) put; the
    ///   user's live hold cleared (their count stays: the seats are now booked).
    /// - `RELEASED` or `LAPSED`: the shard's `held` down and `available` up; the user's count
    ///   down (never below zero); the live hold cleared (an offer, which never took it, leaves
    ///   it be); the flight's sold-out mark removed; then the flight's waiting list served from
    ///   the seats now free on that shard ([`crate::domain::waitlist::serve`] over its first
    ///   entries): each served entry `OFFERED` with its offer, the offer's hold put (`HELD`, due
    ///   at the flight's offer lifetime), the shard's `available` down and `held` up by its head
    ///   count. All in the one transaction, so no booking can take returned seats while someone
    ///   whom they fit waits.
    /// - an extension: only the hold's `expires_at`.
    ///
    /// Refusals: `Refused` with the rule's answer for the hold as stored when the write lost.
    ///
    /// [`CheckoutHold::booking`]: crate::domain::CheckoutHold::booking
    async fn resolve_hold(
        &self,
        user: &UserId,
        flight: &crate::domain::FlightId,
        id: &crate::domain::HoldId,
        action: crate::domain::HoldAction,
        now: Millis,
    ) -> Result<crate::domain::CheckoutHold, ResolveHoldError>;

    /// One page of the user's holds (any flight, any status) in hold id order (UUIDv7, oldest
    /// first), after `after`, at most `size`. One bounded `Query`.
    async fn holds_of(
        &self,
        user: &UserId,
        after: Option<&crate::domain::HoldId>,
        size: PageSize,
    ) -> Result<Page<crate::domain::CheckoutHold, crate::domain::HoldId>, StoreError>;

    /// One page of `flight`'s holds in `status` (offers among them: an offer is a hold), in
    /// [`FlightHoldKey`](crate::domain::FlightHoldKey) order (the shard their seats came from,
    /// then hold id), after `after`, at most `size`: the operator's view of a flight's live holds
    /// and its lapses. Bounded: at most `size + 1` holds read, and on DynamoDB at most one
    /// `Query` a page per shard of the flight's (`flight.shards`) on its flight-side index.
    async fn flight_holds(
        &self,
        flight: &crate::domain::Flight,
        status: crate::domain::HoldStatus,
        after: Option<&crate::domain::FlightHoldKey>,
        size: PageSize,
    ) -> Result<Page<crate::domain::CheckoutHold, crate::domain::FlightHoldKey>, StoreError>;

    /// Holds still `HELD` whose deadline is at or before `now`, at most `limit`, soonest due
    /// first (within a due shard on DynamoDB): the reaper's work. A hold resolved since may
    /// still be listed; resolving it then answers `NotDue`.
    async fn due_holds(
        &self,
        now: Millis,
        limit: usize,
    ) -> Result<Vec<crate::domain::CheckoutHold>, StoreError>;
}
