//! The upstream seat system as the services see it: its calls and what its answers mean.
//!
//! The answers are read by their body ([`ReserveOutcome`], [`CallFailure`]), never by a status
//! code alone, because the upstream's statuses do not say whether a write happened.

use crate::domain::{Millis, RoomId, SeatAvailability, SeatId, Secret};
use async_trait::async_trait;
use thiserror::Error;

/// A user's current charge in the upstream system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    pub charge_id: String,
    pub seat_id: SeatId,
}

/// Why an upstream call brought no definite answer: the upstream unwell, or the way to it.
/// Each of these counts as a failure for the circuit breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum CallFailure {
    /// No whole answer within the upstream timeout.
    #[error("timed out")]
    Timeout,
    /// The connection failed, or dropped before a whole answer came.
    #[error("connection failed or dropped")]
    Dropped,
    /// An answer whose body could not be read (cut short, not the expected shape).
    #[error("unreadable answer")]
    Unreadable,
    /// A status that says the upstream failed (500, 502, 504, a 503 that gave no time, or one
    /// this client does not expect on that route).
    #[error("upstream answered {0}")]
    Status(u16),
}

impl CallFailure {
    /// The `outcome` of [`crate::metrics::Metric::UpstreamCalls`] for it.
    pub fn as_outcome(self) -> &'static str {
        match self {
            CallFailure::Timeout => "timeout",
            CallFailure::Dropped => "dropped",
            CallFailure::Unreadable => "unreadable",
            CallFailure::Status(_) => "failed",
        }
    }
}

/// What one reserve call told us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReserveOutcome {
    Reserved(Charge),
    /// The upstream says the seat is taken (`409 {"error":"seat_taken"}`).
    SeatTaken,
    /// The upstream says the user already holds a charge (`409 {"error":"already_charged"}`,
    /// one charge per user): nothing was written, and the seat is still free for others.
    AlreadyCharged,
    /// The upstream refused for load (429, 503): nothing was written; it asked to be left
    /// alone for `retry_after` when it said so. Also what a reserve held back by the breaker or
    /// a hold answers, without being sent.
    Busy {
        retry_after: Option<std::time::Duration>,
    },
    /// The upstream refused the credential (401/403).
    CredentialRejected,
    /// A definite refusal that is not about the seat or the credential (other 4xx, a 409 with
    /// another code): nothing was written upstream.
    Refused(u16),
    /// No definite answer (timeout, dropped connection, 500, 502, 504, a 201 whose body was
    /// lost): the write may or may not have happened, so it must never be sent again; a charge
    /// read settles it.
    Unknown(CallFailure),
}

impl ReserveOutcome {
    /// The answer as the `outcome` of [`crate::metrics::Metric::UpstreamCalls`] and
    /// [`crate::metrics::Metric::ReservePosts`]: ok, taken, busy, refused (a definite no that
    /// wrote nothing), or the failure's own (timeout, dropped, unreadable, failed), any of which
    /// may hide a write.
    pub fn as_outcome(&self) -> &'static str {
        match self {
            ReserveOutcome::Reserved(_) => "ok",
            ReserveOutcome::SeatTaken => "taken",
            ReserveOutcome::Busy { .. } => "busy",
            ReserveOutcome::AlreadyCharged
            | ReserveOutcome::CredentialRejected
            | ReserveOutcome::Refused(_) => "refused",
            ReserveOutcome::Unknown(f) => f.as_outcome(),
        }
    }
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ChargeReadError {
    #[error("upstream rejected the credential")]
    CredentialRejected,
    /// A definite refusal that is neither the credential nor "no charge" (another 4xx).
    #[error("upstream refused the read ({0})")]
    Refused(u16),
    /// The upstream said "not now" (429, or 503 with a `Retry-After`).
    #[error("upstream busy")]
    Busy {
        retry_after: Option<std::time::Duration>,
    },
    #[error("upstream unavailable: {0}")]
    Failed(CallFailure),
    /// Not sent: the circuit breaker is open, or a `Retry-After` pauses the route, until then.
    #[error("upstream call held back")]
    HeldBack(Millis),
}

/// Why a seat or room read has no answer.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// The upstream knows no such room (`404 room_not_found`).
    #[error("no such room")]
    NoSuchRoom,
    /// A definite refusal (a 4xx that is not "no such room"): the upstream is working.
    #[error("upstream refused the read ({0})")]
    Refused(u16),
    /// The upstream said "not now" (429, or 503 with a `Retry-After`).
    #[error("upstream busy")]
    Busy {
        retry_after: Option<std::time::Duration>,
    },
    /// A failure the breaker counts: 5xx, a timeout, a lost or undecodable answer.
    #[error("upstream unavailable: {0}")]
    Failed(CallFailure),
    /// Not sent: the circuit breaker is open, or a `Retry-After` pauses the route, until then.
    #[error("upstream call held back")]
    HeldBack(Millis),
}

/// The upstream seat system.
#[async_trait]
pub trait Upstream: Send + Sync {
    /// One reserve write. Never retried by the implementation.
    async fn reserve(&self, credential: &Secret, seat_id: &SeatId) -> ReserveOutcome;

    /// The user's current charge, `None` if they hold none. Safe to repeat.
    async fn current_charge(&self, credential: &Secret) -> Result<Option<Charge>, ChargeReadError>;

    /// Whether the seat is free now (`GET /api/seats/{id}`). Safe to repeat; needs no
    /// credential.
    async fn seat(&self, seat_id: &SeatId) -> Result<bool, ReadError>;

    /// A room's seats and whether each is free, in one call. `NoSuchRoom` for an unknown room.
    async fn room(&self, room_id: &RoomId) -> Result<Vec<SeatAvailability>, ReadError>;
}
