//! The per-user rate limit on the requests that cost writes and may reach the upstream: confirms,
//! waits and bookings.
//!
//! A fixed window per (user, route): the window's counter is one store item, and taking a
//! request is one conditional write (create at 1, or add 1 while below the limit). A fixed
//! window lets a user send up to twice the limit across a window boundary; a token bucket would
//! smooth that, but needs its refill computed from a read of the last state, and a conditional
//! write on that state, under contention from the same user. The limit exists to keep one client
//! from flooding the queue and the store, not to shape traffic, and the fleet-wide caps (the
//! queue mapping's maximum concurrency, the API's throttling) bound the upstream regardless, so
//! the simpler item wins. Window items expire (a TTL on DynamoDB; the embedded store drops a
//! user's older windows as it writes the new one).

use super::{Millis, UserId};
use std::time::Duration;

/// The routes the limit counts, each with a budget of its own: a user booking a flight does not
/// spend the budget of their library reservations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimitedRoute {
    Confirm,
    Wait,
    Book,
}

impl LimitedRoute {
    pub fn as_str(self) -> &'static str {
        match self {
            LimitedRoute::Confirm => "confirm",
            LimitedRoute::Wait => "wait",
            LimitedRoute::Book => "book",
        }
    }
}

/// How many requests a user may make per window, per route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub requests: u32,
    pub window: Duration,
}

impl RateLimit {
    /// The limit the timing states (`rate_limit_requests` per `rate_limit_window`).
    pub fn of(timing: &crate::config::Timing) -> RateLimit {
        RateLimit {
            requests: timing.rate_limit_requests,
            window: timing.rate_limit_window,
        }
    }
}

/// One user's window on one route: the key of its counter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateWindow {
    pub user: UserId,
    pub route: LimitedRoute,
    /// The window's start, a multiple of its length since the epoch.
    pub start: Millis,
    /// When the window ends; its counter is worthless from then on and may be deleted.
    pub ends_at: Millis,
}

impl RateWindow {
    /// The counting rule: a request is admitted, and counted, while the window has counted
    /// fewer than `limit` (a window not stored yet has counted none).
    pub fn admits(counted: Option<u32>, limit: u32) -> bool {
        counted.unwrap_or(0) < limit
    }

    /// The window `now` falls in.
    pub fn at(user: &UserId, route: LimitedRoute, now: Millis, limit: &RateLimit) -> Self {
        let length = (limit.window.as_millis() as i64).max(1);
        let start = now.0 - now.0.rem_euclid(length);
        RateWindow {
            user: user.clone(),
            route,
            start: Millis(start),
            ends_at: Millis(start + length),
        }
    }

    /// The start before which a user's earlier windows on this route may be dropped when this
    /// one is written (a store without item TTLs drops them so: `RateWindow::ends_at` is the
    /// TTL's time): the window before this one is kept. A writer whose clock runs behind the
    /// one that opened this window may still count in the window before it, and if that
    /// window were gone it would open it again at 1, admitting a second limit in it (seed 59
    /// of the simulator's default workload: 32 bookings admitted in one window of 30, two of
    /// them on an instance 70 ms behind, just after the next window opened). Clocks agree to
    /// far better than a window, so the window before that is no writer's.
    pub fn drop_before(&self) -> Millis {
        Millis(self.start.0 - (self.ends_at.0 - self.start.0))
    }

    /// How long until the window ends, for `Retry-After` (at least a millisecond).
    pub fn retry_after(&self, now: Millis) -> Duration {
        Duration::from_millis((self.ends_at.0 - now.0).max(1) as u64)
    }
}

/// A request's place in its window, taken by the write the request makes rather than by a
/// write of its own: the store counts it in the same transaction, only if that transaction
/// commits, and refuses the whole write when the window is spent ([`RateWindow::admits`]).
/// A confirm costs one write request instead of two, and a refused or replayed confirm spends
/// nothing of the budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    pub window: RateWindow,
    /// Requests the window admits.
    pub limit: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_aligned_and_retry_after_points_at_the_next() {
        let limit = RateLimit {
            requests: 5,
            window: Duration::from_secs(10),
        };
        let u = UserId::parse("u1").unwrap();
        let w = RateWindow::at(&u, LimitedRoute::Confirm, Millis(1_234_567), &limit);
        assert_eq!(w.start, Millis(1_230_000));
        assert_eq!(w.ends_at, Millis(1_240_000));
        assert_eq!(
            w.retry_after(Millis(1_234_567)),
            Duration::from_millis(5_433)
        );
        let same = RateWindow::at(&u, LimitedRoute::Confirm, Millis(1_239_999), &limit);
        assert_eq!(same, w);
        let next = RateWindow::at(&u, LimitedRoute::Confirm, Millis(1_240_000), &limit);
        assert_eq!(next.start, w.ends_at);
    }
}
