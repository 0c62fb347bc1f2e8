//! The per-user rate limit's window counters (`RateLimits`): created at 1, or raised by 1 while
//! below the limit, as DynamoDB's conditional `UpdateItem`.
//!
//! The same write drops the user's windows on that route from before the previous one
//! ([`RateWindow::drop_before`]): the stand-in for the counter items' TTL, and what keeps the
//! map as small as the number of active users (as the embedded backend does).

use crate::faults::Op;
use crate::{MemoryBackend, Tx};
use async_trait::async_trait;
use seatgate::domain::{Millis, RateWindow};
use seatgate::ports::{RateLimits, StoreError};

#[async_trait]
impl RateLimits for MemoryBackend {
    async fn take(&self, window: &RateWindow, limit: u32) -> Result<bool, StoreError> {
        self.timed(Op::TakeRate, |tx| Ok(count(tx, window, limit)))
            .await
    }
}

/// Whether `window` admits one more request: the refusal a write counting in it decides before
/// it changes anything.
pub(crate) fn admits(tx: &Tx<'_>, window: &RateWindow, limit: u32) -> bool {
    let key = (window.user.clone(), window.route.as_str(), window.start);
    unbounded(tx) || RateWindow::admits(tx.state.rate_windows.get(&key).copied(), limit)
}

/// [`crate::StorePlant::WindowUnbounded`]: the window's condition dropped.
fn unbounded(tx: &Tx<'_>) -> bool {
    tx.config.planted(crate::StorePlant::WindowUnbounded)
}

/// Counts one request in `window` if it admits one; `true` when counted. Drops the user's
/// windows on the route from before the previous one either way.
pub(crate) fn count(tx: &mut Tx<'_>, window: &RateWindow, limit: u32) -> bool {
    let route = window.route.as_str();
    let key = (window.user.clone(), route, window.start);
    let drop_before = (window.user.clone(), route, window.drop_before());
    let earlier: Vec<_> = tx
        .state
        .rate_windows
        .range((window.user.clone(), route, Millis(i64::MIN))..drop_before)
        .map(|(k, _)| k.clone())
        .collect();
    for k in &earlier {
        tx.state.rate_windows.remove(k);
    }
    // A new window's counter is created at 1; a stored one rises while below the limit.
    let stored = tx.state.rate_windows.get(&key).copied();
    let counted = unbounded(tx) || RateWindow::admits(stored, limit);
    if counted {
        tx.state.rate_windows.insert(key, stored.unwrap_or(0) + 1);
    }
    if counted || !earlier.is_empty() {
        let what = match tx.op {
            Op::Confirm => "confirm.rate_window",
            Op::Book => "book.rate_window",
            op => op.name(),
        };
        tx.log_as(
            what,
            &serde_json::json!({
                "user": window.user,
                "route": route,
                "start": window.start,
                "counted": counted,
                "dropped_windows": earlier.len(),
            }),
        );
    }
    counted
}
