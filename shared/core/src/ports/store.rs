//! Every store port at once, and the one error every store method can answer with.
//!
//! `StoreError` carries no item contents and no credentials, so it may be logged as it is.

use super::{
    Actions, BreakerStates, CheckoutHolds, Credentials, Flights, Intents, OperatorLeases,
    RateLimits, Readings, WaitingLists,
};
use thiserror::Error;

/// Infrastructure failures of a store. Never carries item contents or credentials.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// The backend refused for load (DynamoDB throttling). Safe to retry the same request.
    #[error("store throttled the request")]
    Throttled,
    /// A concurrent transaction touched the same items (DynamoDB `TransactionConflict`, SQLite
    /// `SQLITE_BUSY`). Safe to retry the same request.
    #[error("store transaction conflicted with another")]
    TransactionConflict,
    /// Anything else: unreachable, misconfigured, timed out.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// An item that does not decode into the domain.
    #[error("corrupt item: {0}")]
    Corrupt(String),
}

impl StoreError {
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            StoreError::Throttled | StoreError::TransactionConflict
        )
    }
}

/// Every store port at once: what one backend (the DynamoDB table, the embedded database, a
/// fault-injecting wrapper of either) provides.
pub trait Store:
    Actions
    + Intents
    + Credentials
    + Readings
    + BreakerStates
    + Flights
    + CheckoutHolds
    + WaitingLists
    + RateLimits
    + OperatorLeases
{
}

impl<
    S: Actions
        + Intents
        + Credentials
        + Readings
        + BreakerStates
        + Flights
        + CheckoutHolds
        + WaitingLists
        + RateLimits
        + OperatorLeases
        + ?Sized,
> Store for S
{
}
