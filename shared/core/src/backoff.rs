//! Exponential backoff: the one formula behind every "try again later" in seatgate (a wait whose
//! seat was taken, a store call that was throttled, an outbox row or stream record that failed).
//!
//! Doubling from a base, capped, and counted from 1 so the first retry waits the base. Jitter is
//! opt-in because some callers (a wait's next attempt, recorded in the item) must be
//! reproducible from the state alone.

use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Backoff {
    pub const fn new(base: Duration, max: Duration) -> Self {
        Backoff { base, max }
    }

    /// The delay before retry number `attempt` (1-based; 0 counts as 1): `base * 2^(attempt-1)`,
    /// at most `max`.
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = 1u32 << attempt.saturating_sub(1).min(16);
        (self.base * factor).min(self.max)
    }

    /// [`Backoff::delay`] plus a uniformly random extra of up to the same amount, so callers
    /// refused together do not come back together.
    ///
    /// `draw(max)` is a uniform draw from `0..=max`: the caller's random source (the services'
    /// injected `Random` port), so this module depends on nothing above it.
    pub fn delay_with_jitter(&self, attempt: u32, draw: impl FnOnce(u64) -> u64) -> Duration {
        let delay = self.delay(attempt);
        let extra = draw(delay.as_millis() as u64);
        delay + Duration::from_millis(extra)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_the_base_and_caps() {
        let b = Backoff::new(Duration::from_millis(100), Duration::from_secs(30));
        assert_eq!(b.delay(0), Duration::from_millis(100));
        assert_eq!(b.delay(1), Duration::from_millis(100));
        assert_eq!(b.delay(2), Duration::from_millis(200));
        assert_eq!(b.delay(5), Duration::from_millis(1_600));
        assert_eq!(b.delay(9), Duration::from_millis(25_600));
        assert_eq!(b.delay(10), Duration::from_secs(30));
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(30));
    }

    #[test]
    fn jitter_stays_within_one_more_delay() {
        let b = Backoff::new(Duration::from_millis(10), Duration::from_millis(80));
        for attempt in 1..6 {
            let d = b.delay_with_jitter(attempt, |max| rand::random_range(0..=max));
            assert!(d >= b.delay(attempt) && d <= b.delay(attempt) * 2, "{d:?}");
        }
    }
}
