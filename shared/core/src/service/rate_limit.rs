//! The per-user rate limit in front of the requests that cost writes: one conditional write on
//! the user's window counter per admitted request ([`crate::domain::rate_limit`] says why a
//! fixed window). A refusal carries how long until the window ends, for `Retry-After`.

use super::with_retry;
use crate::domain::{LimitedRoute, RateLimit, RateWindow, UserId};
use crate::metrics::{self, Metric};
use crate::ports::{Clock, RateLimits, StoreError};
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use tracing::info;

#[derive(Debug, Error)]
pub enum AdmitError {
    /// The user's budget for this route and window is spent.
    #[error("too many requests; retry in {0:?}")]
    Limited(Duration),
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Clone)]
pub struct RateLimiter {
    store: Arc<dyn RateLimits>,
    clock: Arc<dyn Clock>,
    random: Arc<dyn crate::ports::Random>,
    limit: RateLimit,
}

impl RateLimiter {
    pub fn new(
        store: Arc<dyn RateLimits>,
        clock: Arc<dyn Clock>,
        random: Arc<dyn crate::ports::Random>,
        limit: RateLimit,
    ) -> Self {
        RateLimiter {
            store,
            clock,
            random,
            limit,
        }
    }

    /// Counts one request of `user` on `route`, or refuses it.
    pub async fn admit(&self, user: &UserId, route: LimitedRoute) -> Result<(), AdmitError> {
        let now = self.clock.now();
        let window = RateWindow::at(user, route, now, &self.limit);
        if with_retry(&*self.random, || {
            self.store.take(&window, self.limit.requests)
        })
        .await?
        {
            return Ok(());
        }
        info!(user_id = %user, route = route.as_str(), "rate limited");
        metrics::count(Metric::RateLimited, &[("route", route.as_str())], 1);
        Err(AdmitError::Limited(window.retry_after(now)))
    }
}
