//! A clock tests move by hand, so lease expiry, visibility timeouts and wait backoff need no
//! sleep.

use seatgate::domain::Millis;
use seatgate::ports::Clock;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

/// Starts at the given instant and moves only when told.
#[derive(Debug)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn new(start: Millis) -> Self {
        ManualClock(AtomicI64::new(start.0))
    }

    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(by.as_millis() as i64, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Millis {
        Millis(self.0.load(Ordering::SeqCst))
    }
}
