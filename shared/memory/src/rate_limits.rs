//! The per-user rate limit's window counters (`RateLimits`): created at 1, or raised by 1 while
//! below the limit, as DynamoDB's conditional `UpdateItem`.
//!
//! The same write drops the user's earlier windows on that route, which are worthless once a
//! newer one exists: the stand-in for the counter items' TTL, and what keeps the map as small as
//! the number of active users (as the embedded backend does).

use crate::MemoryBackend;
use crate::faults::Op;
use async_trait::async_trait;
use seatgate::domain::{Millis, RateWindow};
use seatgate::ports::{RateLimits, StoreError};

#[async_trait]
impl RateLimits for MemoryBackend {
    async fn take(&self, window: &RateWindow, limit: u32) -> Result<bool, StoreError> {
        self.call(Op::TakeRate, |tx| {
            let route = window.route.as_str();
            let key = (window.user.clone(), route, window.start);
            let earlier: Vec<_> = tx
                .state
                .rate_windows
                .range((window.user.clone(), route, Millis(i64::MIN))..key.clone())
                .map(|(k, _)| k.clone())
                .collect();
            for k in &earlier {
                tx.state.rate_windows.remove(k);
            }
            // A new window's counter is created at 1; a stored one rises while below the limit.
            let stored = tx.state.rate_windows.get(&key).copied();
            let counted = RateWindow::admits(stored, limit);
            if counted {
                tx.state.rate_windows.insert(key, stored.unwrap_or(0) + 1);
            }
            if counted || !earlier.is_empty() {
                tx.log(&serde_json::json!({
                    "user": window.user,
                    "route": route,
                    "start": window.start,
                    "counted": counted,
                    "dropped_windows": earlier.len(),
                }));
            }
            Ok(counted)
        })
    }
}
