//! The per-user rate limit's counters: one conditional write per admitted request.

use super::StoreError;
use crate::domain::RateWindow;
use async_trait::async_trait;

/// The per-user rate limit's counters ([`crate::domain::rate_limit`]).
#[async_trait]
pub trait RateLimits: Send + Sync {
    /// Takes one request from `window`'s budget of `limit` requests, in one conditional write:
    /// the window's counter is created at 1, or raised by 1 while it is below `limit`. `Ok(true)`
    /// if the request was counted, `Ok(false)` if the window's budget is spent (nothing was
    /// written). The counter must expire after `window.ends_at`. Errors: [`StoreError`] as for
    /// any write (`Throttled` and `TransactionConflict` may be retried).
    async fn take(&self, window: &RateWindow, limit: u32) -> Result<bool, StoreError>;
}
