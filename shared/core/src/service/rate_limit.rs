//! The per-user rate limit in front of the requests that cost writes: one conditional write on
//! the user's window counter per admitted request ([`crate::domain::rate_limit`] says why a
//! fixed window). A refusal carries how long until the window ends, for `Retry-After`.
//!
//! A use case whose own write is a transaction counts the request inside it instead
//! ([`RateLimiter::admission`], then [`RateLimiter::refused`] when the store says the window is
//! spent): one write request rather than two, and only requests that wrote anything count.

use super::with_retry;
use crate::domain::{Admission, LimitedRoute, RateLimit, RateWindow, UserId};
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
        Err(AdmitError::Limited(self.refused(&window)))
    }

    /// The user's place in the current window on `route`, for a write that counts the request
    /// in its own transaction.
    pub fn admission(&self, user: &UserId, route: LimitedRoute) -> Admission {
        Admission {
            window: RateWindow::at(user, route, self.clock.now(), &self.limit),
            limit: self.limit.requests,
        }
    }

    /// The store refused a request because `window` is spent: counted and logged as any
    /// refusal; how long until the window ends, for `Retry-After`.
    pub fn refused(&self, window: &RateWindow) -> Duration {
        let route = window.route.as_str();
        info!(user_id = %window.user, route, "rate limited");
        metrics::count(Metric::RateLimited, &[("route", route)], 1);
        window.retry_after(self.clock.now())
    }
}
