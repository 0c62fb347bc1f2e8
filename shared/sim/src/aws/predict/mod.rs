//! The predictions `seatgate-bench simulate --aws` prints: scenarios an operator sizes a sale
//! by, each run in a world on the AWS timing profile ([`aws_world`]), its figures read off the
//! store's own record, one scenario a module:
//! - [`burst`]: people confirming at once, on one seat or spread over many;
//! - [`sale`]: seed 004's flash sale, bookers at a constant arrival rate;
//! - [`storm`]: seed 000's bad hour, confirms and a read storm through an upstream outage.
//!
//! Here: what they share, the HTTP API's stage throttle ([`Gateway`]) every request passes,
//! and the [`Summary`] of a latency distribution.

pub mod burst;
pub mod sale;
pub mod storm;

pub use burst::{Burst, BurstOutcome, burst};
pub use sale::{Sale, SaleOutcome, sale};
pub use storm::{Storm, StormOutcome, storm};

use super::profile::AwsProfile;
use crate::world::{World, WorldConfig};
use seatgate::domain::Millis;
use seatgate_memory::MemoryConfig;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// The simulated time a burst is given to settle after its last confirm.
pub const SETTLE_WITHIN: Duration = Duration::from_secs(600);

/// The HTTP API's stage throttle: a token bucket of `burst` tokens refilled at `rate_per_s`,
/// one token per request, kept as its generic cell rate form (a theoretical arrival time, so
/// no timer refills it). A request the bucket refuses (429) is taken as sent again the moment
/// a token is free, in the order the requests came, the best any client could do: the
/// figures are the throttle's floor, and [`Gateway::refused`] counts requests refused at
/// least once, not the retries a real client's backoff would add.
#[derive(Debug)]
pub struct Gateway {
    /// One token's worth of time, and how far ahead of it a burst may run, in microseconds.
    interval_us: u64,
    tolerance_us: u64,
    state: Mutex<GatewayState>,
}

#[derive(Debug)]
struct GatewayState {
    /// When the bucket would be full again were no request to come (µs since the epoch).
    theoretical_us: u64,
    refused: u64,
}

impl Gateway {
    pub fn new(rate_per_s: u32, burst: u32) -> Self {
        let interval_us = 1_000_000 / u64::from(rate_per_s.max(1));
        Gateway {
            interval_us: interval_us.max(1),
            tolerance_us: interval_us * u64::from(burst.max(1) - 1),
            state: Mutex::new(GatewayState {
                theoretical_us: 0,
                refused: 0,
            }),
        }
    }

    /// Admits a request arriving at `now`: how long it waits for its token (zero: at once).
    fn take(&self, now: Millis) -> Duration {
        let now_us = now.0.max(0) as u64 * 1_000;
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let admitted_us = now_us.max(s.theoretical_us.saturating_sub(self.tolerance_us));
        s.theoretical_us = s.theoretical_us.max(admitted_us) + self.interval_us;
        if admitted_us > now_us {
            s.refused += 1;
        }
        Duration::from_micros(admitted_us - now_us)
    }

    /// Waits (simulated) until the gateway admits a request.
    pub async fn admit(&self, world: &World) {
        let wait = self.take(world.now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }

    /// Requests refused at least once so far.
    pub fn refused(&self) -> u64 {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .refused
    }
}

/// A distribution's summary, in ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Summary {
    /// Nearest-rank percentiles of `ms`; all zero for none.
    pub fn of(mut ms: Vec<f64>) -> Summary {
        if ms.is_empty() {
            return Summary {
                p50_ms: 0.0,
                p95_ms: 0.0,
                p99_ms: 0.0,
                max_ms: 0.0,
            };
        }
        ms.sort_by(f64::total_cmp);
        let at = |p: f64| ms[((p * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1];
        Summary {
            p50_ms: at(0.50),
            p95_ms: at(0.95),
            p99_ms: at(0.99),
            max_ms: ms[ms.len() - 1],
        }
    }
}

/// The world a prediction runs in: the profile, the production timing, one worker pump per
/// unit of the mapping's concurrency.
pub fn aws_world(profile: &AwsProfile, seed: u64) -> WorldConfig {
    let timing = profile.timing.clone();
    let mut config = WorldConfig::new(seed);
    config.instances = profile.worker_concurrency.max(1);
    config.memory = MemoryConfig::for_timing(&timing);
    config.reaper_interval = timing.reaper_interval;
    config.timing = timing;
    config.horizon = SETTLE_WITHIN * 2;
    config.aws = Some(profile.clone());
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateway_admits_its_burst_then_its_rate() {
        let g = Gateway::new(50, 200);
        let t = Millis(1_000_000);
        assert!((0..200).all(|_| g.take(t).is_zero()));
        // The next waits one token's time, the one after two; in order, never together.
        assert_eq!(g.take(t), Duration::from_millis(20));
        assert_eq!(g.take(t), Duration::from_millis(40));
        assert_eq!(g.refused(), 2);
        // A quiet second refills 50 tokens.
        let later = Millis(t.0 + 1_040);
        assert!((0..50).all(|_| g.take(later).is_zero()));
        assert!(!g.take(later).is_zero());
    }

    #[test]
    fn summaries_are_nearest_rank() {
        let s = Summary::of((1..=100).map(f64::from).collect());
        assert_eq!(
            (s.p50_ms, s.p95_ms, s.p99_ms, s.max_ms),
            (50.0, 95.0, 99.0, 100.0)
        );
    }
}
