//! Clock steps: each instance reads time through a clock of its own, which the fault plan can
//! step ahead or back, as an execution environment's clock is stepped when its host resyncs.
//!
//! Why this shape: the services read time only through the `Clock` port, and every rule that
//! compares times (a lease run out, a reading gone stale, a `Retry-After` passed, a breaker's
//! open interval over) compares one instance's reading with a time another instance, or the same
//! instance before a step, wrote into the store. A stepped clock is the cheapest fault that
//! makes those comparisons disagree with true time, so it shows which promises rest on clocks
//! agreeing (the checkers then state an allowance of [`ClockSteps::skew`]) and which rest on
//! conditions and fencing tokens alone (those need none, and must hold whatever the clocks say).
//!
//! Only the instances' clocks step. Simulated true time (`tokio`'s, paused) drives sleeps, the
//! store's own clock (queue visibility, TTL) and the upstream model's record, so the checkers
//! judge against true time, as an observer outside the fleet would. An offset is an atomic the
//! world's stepping task sets, shared by every environment of one instance index (a restarted
//! environment comes back on the same host clock).

use seatgate::domain::Millis;
use seatgate::ports::Clock;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

/// How instances' clocks are stepped while the faults strike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSteps {
    /// The largest offset from true time a step sets, either way.
    pub max_offset: Duration,
    /// The shortest and longest pause between two steps of one instance's clock.
    pub every_min: Duration,
    pub every_max: Duration,
}

impl ClockSteps {
    /// The most two clock readings that should agree can differ by: one instance at
    /// `+max_offset` and another (or the same one, after a step) at `-max_offset`. Every
    /// allowance a checker makes for clock steps is this.
    pub fn skew(&self) -> Duration {
        self.max_offset * 2
    }
}

/// One instance's clock: true time plus an offset the world steps.
#[derive(Clone)]
pub struct SteppedClock {
    truth: Arc<dyn Clock>,
    offset_ms: Arc<AtomicI64>,
}

impl std::fmt::Debug for SteppedClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let offset = self.offset_ms.load(Ordering::Relaxed);
        write!(f, "SteppedClock({offset:+} ms)")
    }
}

impl SteppedClock {
    pub fn new(truth: Arc<dyn Clock>, offset_ms: Arc<AtomicI64>) -> Self {
        SteppedClock { truth, offset_ms }
    }
}

impl Clock for SteppedClock {
    fn now(&self) -> Millis {
        let t = self.truth.now();
        Millis(t.0 + self.offset_ms.load(Ordering::Relaxed))
    }
}
