//! The predictions `seatgate-bench simulate --aws` prints: scenarios an operator sizes a sale
//! by, each run in a world on the AWS timing profile ([`aws_world`]), its figures read off the
//! store's own record, one scenario a module:
//! - [`burst`]: people confirming at once, on one seat or spread over many;
//! - [`sale`]: seed 004's flash sale, bookers at a constant arrival rate;
//! - [`storm`]: seed 000's bad hour, confirms and a read storm through an upstream outage.
//!
//! Here: what they share, the HTTP API's stage throttle ([`Gateway`]) every request passes,
//! the API function's execution environments ([`ApiFunction`]: Lambda's scaling rate and the
//! account's concurrency), the two as the [`Front`] a client's request goes through, and the
//! [`Summary`] of a latency distribution.

pub mod burst;
pub mod sale;
pub mod storm;

pub use burst::{Burst, BurstOutcome, burst};
pub use sale::{Sale, SaleOutcome, sale};
pub use storm::{Storm, StormOutcome, storm};

use super::profile::{AwsProfile, Dist};
use crate::client::FrontDoor;
use crate::world::{World, WorldConfig};
use rand::SeedableRng;
use rand::rngs::StdRng;
use seatgate::domain::Millis;
use seatgate_memory::MemoryConfig;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

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

/// The API function's execution environments: at most
/// [`AwsProfile::api_function_concurrency`] at once, which grows with Lambda's scaling steps
/// from the function's first invocation. A request that finds none free is throttled (Lambda's
/// 429, which the HTTP API answers with an error) and taken as sent again the moment one is,
/// in order: as at the gateway, the floor of what a client could do, and
/// [`ApiFunction::throttled`] counts requests throttled at least once. A request that needs
/// an environment beyond the most the function has had waits for its cold start.
pub struct ApiFunction {
    profile: AwsProfile,
    environments: Arc<Semaphore>,
    state: Mutex<FunctionState>,
}

struct FunctionState {
    first: Option<Millis>,
    /// Environments the semaphore was given so far (the scaling allowance reached).
    granted: u32,
    /// The most environments busy at once: those that exist, warm.
    warm: u32,
    throttled: u64,
    rng: StdRng,
}

/// An environment, held while its request runs.
pub struct Environment {
    _permit: OwnedSemaphorePermit,
}

/// How long a throttled request waits before it looks again whether Lambda has scaled
/// (environments freed wake it at once).
const SCALING_RECHECK: Duration = Duration::from_millis(500);

impl ApiFunction {
    pub fn new(profile: &AwsProfile, seed: u64) -> Self {
        ApiFunction {
            profile: profile.clone(),
            environments: Arc::new(Semaphore::new(0)),
            state: Mutex::new(FunctionState {
                first: None,
                granted: 0,
                warm: 0,
                throttled: 0,
                rng: StdRng::seed_from_u64(seed ^ 0x6c61_6d62_6461), // "lambda"
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FunctionState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Grants the environments Lambda's scaling allows at `now`.
    fn scale(&self, now: Millis) {
        let mut s = self.lock();
        let first = *s.first.get_or_insert(now);
        let allowed = self.profile.api_function_concurrency(now.since(first));
        if allowed > s.granted {
            self.environments
                .add_permits((allowed - s.granted) as usize);
            s.granted = allowed;
        }
    }

    /// Waits (simulated) for an environment, and for its cold start if it is a new one.
    pub async fn admit(&self, world: &World) -> Environment {
        self.scale(world.now());
        let permit = match self.environments.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                self.lock().throttled += 1;
                // Bounded by the simulated horizon: each pass waits until an environment frees
                // or the scaling step may have come.
                loop {
                    if let Ok(acquired) = tokio::time::timeout(
                        SCALING_RECHECK,
                        self.environments.clone().acquire_owned(),
                    )
                    .await
                    {
                        break acquired.expect("the semaphore is never closed");
                    }
                    self.scale(world.now());
                }
            }
        };
        let cold = {
            let mut s = self.lock();
            let busy = s.granted - self.environments.available_permits() as u32;
            if busy > s.warm {
                s.warm = busy;
                let cold_start: Dist = self.profile.cold_start;
                Some(cold_start.draw(&mut s.rng))
            } else {
                None
            }
        };
        if let Some(wait) = cold {
            tokio::time::sleep(wait).await;
        }
        Environment { _permit: permit }
    }

    /// Requests throttled at least once so far.
    pub fn throttled(&self) -> u64 {
        self.lock().throttled
    }

    /// The most environments the function had at once.
    pub fn environments(&self) -> u32 {
        self.lock().warm
    }
}

/// What a client's request passes on a deployed stack: the HTTP API's throttle, then an
/// environment of the API function, held while the request runs.
pub struct Front {
    pub gateway: Gateway,
    pub function: ApiFunction,
    world: World,
}

impl Front {
    /// The front of `world`'s AWS profile for the stage's routes (a world without one: an open
    /// door, nothing throttled).
    pub fn of(world: &World) -> Arc<Front> {
        let profile = Front::profile(world);
        Front::new(world, &profile, profile.api_throttle())
    }

    /// The front a booking or a hold meets: its route's own throttle.
    pub fn of_sale(world: &World) -> Arc<Front> {
        let profile = Front::profile(world);
        Front::new(world, &profile, profile.sale_throttle())
    }

    fn profile(world: &World) -> AwsProfile {
        world.config().aws.clone().unwrap_or_else(|| {
            let mut open = AwsProfile::published().throttled_at(1_000_000, 1_000_000);
            (open.api_account_rate_per_s, open.api_account_burst) = (1_000_000, 1_000_000);
            open.account_concurrency = u32::MAX;
            open
        })
    }

    fn new(world: &World, profile: &AwsProfile, (rate, burst): (u32, u32)) -> Arc<Front> {
        Arc::new(Front {
            gateway: Gateway::new(rate, burst),
            function: ApiFunction::new(profile, world.config().seed),
            world: world.clone(),
        })
    }
}

#[async_trait::async_trait]
impl FrontDoor for Front {
    async fn admit(&self) -> Box<dyn Send> {
        self.gateway.admit(&self.world).await;
        Box::new(self.function.admit(&self.world).await)
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
    fn the_api_function_gets_the_accounts_concurrency_less_the_reserved_in_scaling_steps() {
        let mut p = AwsProfile::published();
        // 1,000 less the worker's 20 and the relay's, deliverer's and reaper's 64.
        assert_eq!(p.api_function_concurrency(Duration::ZERO), 916);
        assert_eq!(p.api_function_concurrency(Duration::from_secs(60)), 916);
        // A raised quota is reached in Lambda's steps of 1,000 every 10 s.
        p.account_concurrency = 5_000;
        let at = |s| p.api_function_concurrency(Duration::from_secs(s));
        assert_eq!(
            (at(0), at(9), at(10), at(25), at(60)),
            (1_000, 1_000, 2_000, 3_000, 4_916)
        );
        // The stage's throttle is capped by the account's.
        let raised = p.throttled_at(100_000, 100_000);
        assert_eq!(raised.api_throttle(), (10_000, 5_000));
        assert_eq!(raised.sale_throttle(), (10_000, 5_000));
        // The template's sale routes have their own bucket.
        assert_eq!(p.sale_throttle(), (500, 1_000));
    }

    #[test]
    fn a_request_past_the_functions_environments_waits_for_one_to_free() {
        let mut profile = AwsProfile::published();
        // Three environments for the API function.
        profile.account_concurrency =
            profile.worker_concurrency as u32 + crate::aws::profile::PIPELINE_RESERVED + 3;
        let config = aws_world(&profile, 1);
        let run = crate::simulate(config, |world| async move {
            let function = Arc::new(ApiFunction::new(world.config().aws.as_ref().unwrap(), 1));
            let start = world.now();
            let tasks: Vec<_> = (0..5)
                .map(|_| {
                    let (function, world) = (function.clone(), world.clone());
                    tokio::spawn(async move {
                        let held = function.admit(&world).await;
                        let admitted = world.now().since(start);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        drop(held);
                        admitted
                    })
                })
                .collect();
            let mut admitted = Vec::new();
            for t in tasks {
                admitted.push(t.await.unwrap());
            }
            world.shutdown().await;
            (admitted, function.throttled(), function.environments())
        });
        let (mut admitted, throttled, environments) = run.value;
        admitted.sort();
        // Three at once (after a 2 ms cold start), two once the first three are done.
        assert!(admitted[2] < Duration::from_millis(10), "{admitted:?}");
        assert!(admitted[3] >= Duration::from_millis(100), "{admitted:?}");
        assert_eq!((throttled, environments), (2, 3));
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
