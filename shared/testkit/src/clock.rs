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

/// Reads tokio's clock from a fixed epoch: on a runtime with paused time (`start_paused`, the
/// simulator's) time moves only when every task waits, by exactly the time the next timer
/// needs, so the services' `Clock` and their `tokio::time` sleeps agree and a run replays.
#[derive(Debug)]
pub struct TokioClock {
    origin: tokio::time::Instant,
    epoch: Millis,
}

impl TokioClock {
    /// Now on tokio's clock reads as `epoch`. Call it inside the runtime.
    pub fn starting_at(epoch: Millis) -> Self {
        TokioClock {
            origin: tokio::time::Instant::now(),
            epoch,
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Millis {
        self.epoch.plus(self.origin.elapsed())
    }
}
