//! Waiting lists: a flight's line of users, served in order when seats come back.

use super::StoreError;
use crate::domain::{Millis, UserId};
use async_trait::async_trait;
use thiserror::Error;

/// Why a waiting-list write ([`WaitingLists::join_waitlist`], [`WaitingLists::leave_waitlist`])
/// wrote nothing.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum WaitlistError {
    /// The waiting-list rule's refusal ([`crate::domain::WaitEntry::may_join`],
    /// [`crate::domain::WaitEntry::leave`]).
    #[error(transparent)]
    Refused(#[from] crate::domain::WaitRefusal),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A flight's waiting list at a glance, for the operator.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WaitlistSummary {
    /// Entries still `WAITING`.
    pub waiting: u64,
    /// The first of them, the next to be served.
    pub oldest: Option<crate::domain::WaitEntry>,
}

/// The waiting list. Serving it is not here: every return of seats (a hold's release or lapse in
/// [`CheckoutHolds::resolve_hold`](super::CheckoutHolds::resolve_hold), a cancel in [`Flights::cancel_booking`](super::Flights::cancel_booking)) serves the list in
/// its own transaction, as those methods' docs say.
#[async_trait]
pub trait WaitingLists: Send + Sync {
    /// One transaction: `entry` (`WAITING`) put as the user's entry on its flight, under the
    /// conditions that no entry of the user on the flight is still `WAITING` (else `Refused(
    /// AlreadyWaiting)` with it) and that every shard of the flight has fewer than its head count
    /// available (else `Refused(SeatsAvailable)`): the join rule,
    /// [`crate::domain::WaitEntry::may_join`], whose `LimitReached` comes first. The shard
    /// conditions order the join with any return on the flight, so a return either sees the entry
    /// or the join sees the seats. With `max_per_user`, the entry is stored counted
    /// ([`crate::domain::WaitEntry::joining`]) and the user's count on the flight goes up by its
    /// head count in the same transaction, within the limit (else `Refused(LimitReached)`). The
    /// flight must exist.
    async fn join_waitlist(
        &self,
        entry: &crate::domain::WaitEntry,
        max_per_user: Option<u32>,
    ) -> Result<(), WaitlistError>;

    /// The user's entry `id` on `flight`; `None` if unknown, another user's, or replaced by the
    /// user's later entry on the flight.
    async fn wait_entry(
        &self,
        user: &UserId,
        flight: &crate::domain::FlightId,
        id: &crate::domain::EntryId,
    ) -> Result<Option<crate::domain::WaitEntry>, StoreError>;

    /// How many entries on `flight` are `WAITING` ahead of entry `id` in the list's order: its
    /// position is this plus one. Costs O(that count): on DynamoDB a `Query` of the list's keys up
    /// to it, 1 read unit per 4 KB of the items read.
    async fn waiting_ahead(
        &self,
        flight: &crate::domain::FlightId,
        id: &crate::domain::EntryId,
    ) -> Result<u64, StoreError>;

    /// One conditional write (a transaction when the entry was counted): the user's entry `id` on
    /// `flight` `WAITING -> LEFT` at `now`, as [`crate::domain::WaitEntry::leave`] decides (a
    /// repeat answers the left entry; `Refused(Offered)` once served, `Refused(NotFound)` when
    /// unknown), and a counted entry's seats taken off the user's count (never below zero).
    async fn leave_waitlist(
        &self,
        user: &UserId,
        flight: &crate::domain::FlightId,
        id: &crate::domain::EntryId,
        now: Millis,
    ) -> Result<crate::domain::WaitEntry, WaitlistError>;

    /// The list's length and its first entry (on DynamoDB, the list's gate item and one `Query`).
    async fn waitlist_summary(
        &self,
        flight: &crate::domain::FlightId,
    ) -> Result<WaitlistSummary, StoreError>;
}
