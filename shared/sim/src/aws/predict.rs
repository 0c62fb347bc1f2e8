//! The predictions `seatgate-bench simulate --aws` prints: a scenario an operator sizes a sale
//! by, run in a world on the AWS timing profile, its figures read off the store's own record.
//!
//! A burst: `users` people confirm at the same instant, user `i` seat `i % seats` (one seat:
//! the same-seat burst of seed 000, where a hundred confirms must cost the upstream one
//! write). Each reaches the API through the HTTP API's stage throttle ([`Gateway`]), prepares
//! and confirms, as the HTTP contract's client does; the pipeline then runs as deployed (the
//! stream to the relay, the FIFO queue to `worker_concurrency` worker pumps, the upstream).
//! Time to terminal is read from each intent's history in the store: from its confirm's write
//! to its terminal write ("confirm to terminal"), and from the burst's instant
//! ("burst to terminal", which adds the wait at the gateway). Clients' polls are not sent
//! through the gateway: a client of a burst this size should take the webhook, or poll at the
//! contract's pace, and either way its polls do not move the pipeline.
//!
//! Bounds: a burst is at most [`MAX_USERS`] users and settles within [`SETTLE_WITHIN`] of
//! simulated time (a prediction that does not is reported as unsettled, not waited on).

use super::cost::Costs;
use super::profile::AwsProfile;
use crate::world::{World, WorldConfig};
use seatgate::domain::{IntentStatus, Millis, RoomId, SeatId};
use seatgate_memory::MemoryConfig;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The most users a burst takes.
pub const MAX_USERS: usize = 10_000;

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

/// What a burst is.
#[derive(Debug, Clone)]
pub struct Burst {
    pub users: usize,
    pub seats: usize,
    pub seed: u64,
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

/// What a burst did.
#[derive(Debug, Clone)]
pub struct BurstOutcome {
    pub burst: Burst,
    /// Confirms the API accepted (an intent written).
    pub confirmed: usize,
    /// Of them, terminal by the end; and succeeded.
    pub terminal: usize,
    pub succeeded: usize,
    /// From each intent's confirm write to its terminal write.
    pub confirm_to_terminal: Summary,
    /// From the burst's instant to each intent's terminal write.
    pub burst_to_terminal: Summary,
    /// Upstream reserve calls the whole burst made.
    pub upstream_reserves: usize,
    /// Requests the gateway answered 429 (then sent again).
    pub gateway_refusals: u64,
    /// What the burst cost on DynamoDB (enrolment excluded).
    pub costs: Costs,
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

/// Runs `burst` on `profile`.
pub fn burst(profile: &AwsProfile, burst: &Burst) -> BurstOutcome {
    assert!(
        (1..=MAX_USERS).contains(&burst.users) && burst.seats >= 1,
        "a burst of 1 to {MAX_USERS} users on at least one seat"
    );
    let spec = burst.clone();
    let run = crate::simulate(aws_world(profile, burst.seed), move |world| async move {
        let seats: Vec<SeatId> = (0..spec.seats)
            .map(|i| SeatId::parse(&format!("S-{}", i + 1)).expect("a valid seat id"))
            .collect();
        let room = RoomId::parse("R-1").expect("a valid room id");
        world.upstream().put_room(&room, &seats);
        let instances = world.instance_count();
        let mut users = Vec::with_capacity(spec.users);
        for i in 0..spec.users {
            users.push(world.enrol(&format!("u-{i:05}"), i % instances).await);
        }
        let start = world.now();
        let enrolled = world.costs().unwrap_or_default();
        let gateway = Arc::new(Gateway::new(
            world
                .config()
                .aws
                .as_ref()
                .map_or(1_000_000, |p| p.api_rate_per_s),
            world
                .config()
                .aws
                .as_ref()
                .map_or(1_000_000, |p| p.api_burst),
        ));
        let tasks: Vec<_> = users
            .into_iter()
            .enumerate()
            .map(|(i, user)| {
                let (world, gateway, seat) = (
                    world.clone(),
                    gateway.clone(),
                    seats[i % seats.len()].clone(),
                );
                tokio::spawn(async move {
                    // Two requests: the prepare, then the confirm.
                    gateway.admit(&world).await;
                    gateway.admit(&world).await;
                    user.reserve(&seat)
                        .await
                        .ok()
                        .map(|intent| intent.intent_id)
                })
            })
            .collect();
        let mut confirmed = Vec::with_capacity(tasks.len());
        for task in tasks {
            if let Some(id) = task.await.expect("a user task panicked") {
                confirmed.push(id);
            }
        }
        world.settle(SETTLE_WITHIN).await;
        let costs = world.costs().unwrap_or_default().since(&enrolled);
        (start, confirmed, gateway.refused(), costs)
    });
    let (start, confirmed, gateway_refusals, costs) = run.value;
    let (mut to_terminal, mut from_burst) = (Vec::new(), Vec::new());
    let (mut terminal, mut succeeded) = (0, 0);
    for id in &confirmed {
        let Some(history) = run.audit.histories.get(id) else {
            continue;
        };
        let created = history.first().map(|r| r.at);
        let ended = history.iter().find(|r| r.to.is_terminal());
        if let (Some(created), Some(ended)) = (created, ended) {
            terminal += 1;
            succeeded += usize::from(ended.to == IntentStatus::Succeeded);
            to_terminal.push(ended.at.since(created).as_secs_f64() * 1000.0);
            from_burst.push(ended.at.since(start).as_secs_f64() * 1000.0);
        }
    }
    BurstOutcome {
        burst: burst.clone(),
        confirmed: confirmed.len(),
        terminal,
        succeeded,
        confirm_to_terminal: Summary::of(to_terminal),
        burst_to_terminal: Summary::of(from_burst),
        upstream_reserves: run
            .call_record
            .iter()
            .filter(|c| c.route == crate::Route::Reserve)
            .count(),
        gateway_refusals,
        costs,
    }
}

/// A flash sale: bookers arrive at a constant `rate_per_s` for `for_s` seconds (seed 004's
/// k6 shape, a constant arrival rate), each a new user booking one seat of one flight of
/// `shards` shards under an `Idempotency-Key`, through the gateway. The flight holds a seat
/// for every booker, so what limits the sale is the pipeline, never the stock.
#[derive(Debug, Clone)]
pub struct Sale {
    pub rate_per_s: u32,
    pub for_s: u32,
    pub shards: u32,
    pub max_per_user: Option<u32>,
    pub seed: u64,
}

/// The most bookers a sale takes.
pub const MAX_BOOKERS: u64 = 200_000;

/// What a sale did.
#[derive(Debug, Clone)]
pub struct SaleOutcome {
    pub sale: Sale,
    pub offered: u64,
    /// Bookings made, and of them within the sale's window (its arrivals' span plus a second).
    pub booked: u64,
    pub booked_in_window: u64,
    /// Bookers who got no booking (store errors or throttling past every retry).
    pub failed: u64,
    /// From a booker's arrival to its answer (the gateway's wait included).
    pub latency: Summary,
    /// Requests DynamoDB refused for throughput (each retried by the service or the client).
    pub throttled: u64,
    /// Write units charged on the flight's partition.
    pub flight_write_units: f64,
    /// What the sale cost on DynamoDB (the flight's creation excluded; throttled requests are
    /// counted in `throttled`, not here: AWS does not bill them).
    pub costs: Costs,
}

impl SaleOutcome {
    /// Bookings a second: those made within the sale's window (the arrivals' span plus a
    /// second), over the arrivals' span. A sale that keeps up books its arrival rate.
    pub fn booked_per_s(&self) -> f64 {
        self.booked_in_window as f64 / f64::from(self.sale.for_s.max(1))
    }

    /// Whether the sale kept up: at least 99% of bookers booked, and the p99 answer within a
    /// second (what a buyer at a sale's opening waits for at most before retrying by hand).
    pub fn sustained(&self) -> bool {
        self.booked * 100 >= self.offered * 99 && self.latency.p99_ms <= 1_000.0
    }
}

/// Runs `sale` on `profile`.
pub fn sale(profile: &AwsProfile, sale: &Sale) -> SaleOutcome {
    use seatgate::domain::{BookingAnswer, FlightId, IdempotencyKey};
    let offered = u64::from(sale.rate_per_s) * u64::from(sale.for_s);
    assert!(
        (1..=MAX_BOOKERS).contains(&offered) && (1..=16).contains(&sale.shards),
        "a sale of 1 to {MAX_BOOKERS} bookers on 1 to 16 shards"
    );
    let spec = sale.clone();
    let run = crate::simulate(aws_world(profile, sale.seed), move |world| async move {
        let flight = FlightId::parse("F-1").expect("a valid flight id");
        let capacity = u32::try_from(offered).expect("bounded by MAX_BOOKERS");
        world
            .instance(0)
            .api
            .flights()
            .create(flight.clone(), capacity, spec.max_per_user, spec.shards)
            .await
            .expect("the flight is created");
        let created = world.costs().unwrap_or_default();
        let gateway = Arc::new(Gateway::new(
            world
                .config()
                .aws
                .as_ref()
                .map_or(1_000_000, |p| p.api_rate_per_s),
            world
                .config()
                .aws
                .as_ref()
                .map_or(1_000_000, |p| p.api_burst),
        ));
        let start = world.now();
        let interval = Duration::from_secs(1) / spec.rate_per_s;
        let instances = world.instance_count();
        let mut tasks = Vec::with_capacity(offered as usize);
        for i in 0..offered {
            let due = start.plus(interval * i as u32);
            let wait = due.since(world.now());
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            let client = world.client(&format!("b-{i:06}"), i as usize % instances);
            let (world, gateway, flight) = (world.clone(), gateway.clone(), flight.clone());
            tasks.push(tokio::spawn(async move {
                let arrived = world.now();
                gateway.admit(&world).await;
                let key = IdempotencyKey::parse(&format!("sale-{i}")).expect("a valid key");
                let answer = client.book(&flight, 1, Some(&key)).await;
                let booked = matches!(answer, Ok(BookingAnswer::Booked { .. }));
                (booked, arrived, world.now())
            }));
        }
        let mut answers = Vec::with_capacity(tasks.len());
        for task in tasks {
            answers.push(task.await.expect("a booker panicked"));
        }
        world.shutdown().await;
        let capacity = world.capacity().expect("an AWS world meters its table");
        let costs = world.costs().unwrap_or_default().since(&created);
        (
            start,
            answers,
            capacity.throttled(),
            capacity.write_units(),
            costs,
        )
    });
    let (start, answers, throttled, flight_write_units, costs) = run.value;
    let window_end = start.plus(Duration::from_secs(u64::from(sale.for_s) + 1));
    let booked = answers.iter().filter(|a| a.0).count() as u64;
    SaleOutcome {
        sale: sale.clone(),
        offered,
        booked,
        booked_in_window: answers.iter().filter(|a| a.0 && a.2 <= window_end).count() as u64,
        failed: offered - booked,
        latency: Summary::of(
            answers
                .iter()
                .map(|(_, arrived, answered)| answered.since(*arrived).as_secs_f64() * 1000.0)
                .collect(),
        ),
        throttled,
        flight_write_units,
        costs,
    }
}

/// Seed 000's bad hour: confirms arriving at `confirms_per_s` for `for_s` seconds, each a new
/// user on one of `seats` seats, beside a storm of seat reads at `reads_per_s` on a tenth of
/// them, while the upstream is down (503, no `Retry-After`) from `outage_at_s` for
/// `outage_for_s` seconds. The gateway is taken as raised for the storm (the template's 50
/// requests a second would refuse most of it before anything here is tried).
#[derive(Debug, Clone)]
pub struct Storm {
    pub confirms_per_s: u32,
    pub reads_per_s: u32,
    pub for_s: u32,
    pub seats: usize,
    pub outage_at_s: u32,
    pub outage_for_s: u32,
    pub seed: u64,
}

impl Storm {
    /// The seed's figures: 25 confirms a second, 24,000 reads over the minute, a 40 s outage;
    /// every confirm on a seat of its own, so each needs the upstream.
    pub fn seed_000(seed: u64) -> Storm {
        Storm {
            confirms_per_s: 25,
            reads_per_s: 400,
            for_s: 60,
            seats: 1_500,
            outage_at_s: 10,
            outage_for_s: 40,
            seed,
        }
    }
}

/// What the storm did.
#[derive(Debug, Clone)]
pub struct StormOutcome {
    pub storm: Storm,
    pub confirmed: usize,
    pub terminal: usize,
    /// Confirm to terminal, for confirms made before, during and after the outage.
    pub before: Summary,
    pub during: Summary,
    pub after: Summary,
    /// Seat reads asked, and the upstream calls they and the confirms made, in all and while
    /// the upstream was down.
    pub reads: u64,
    pub upstream_reads: usize,
    pub upstream_calls_in_outage: usize,
    /// Of those, by route (`Reserve`, `Seat`, ...).
    pub in_outage_by_route: std::collections::BTreeMap<String, usize>,
    pub upstream_reserves: usize,
}

/// The most confirms plus reads a storm sends.
pub const MAX_STORM_REQUESTS: u64 = 200_000;

/// Runs `storm` on `profile`.
pub fn storm(profile: &AwsProfile, storm: &Storm) -> StormOutcome {
    let confirms = u64::from(storm.confirms_per_s) * u64::from(storm.for_s);
    let reads = u64::from(storm.reads_per_s) * u64::from(storm.for_s);
    assert!(
        confirms + reads <= MAX_STORM_REQUESTS && storm.seats >= 10 && storm.confirms_per_s > 0,
        "a storm of at most {MAX_STORM_REQUESTS} requests on at least 10 seats"
    );
    let mut raised = profile.clone();
    (raised.api_rate_per_s, raised.api_burst) = (1_000_000, 1_000_000);
    let spec = storm.clone();
    let run = crate::simulate(aws_world(&raised, storm.seed), move |world| async move {
        let seats: Vec<SeatId> = (0..spec.seats)
            .map(|i| SeatId::parse(&format!("S-{}", i + 1)).expect("a valid seat id"))
            .collect();
        world
            .upstream()
            .put_room(&RoomId::parse("R-1").expect("a valid room id"), &seats);
        let instances = world.instance_count();
        let mut users = Vec::with_capacity(confirms as usize);
        for i in 0..confirms as usize {
            users.push(world.enrol(&format!("u-{i:06}"), i % instances).await);
        }
        let start = world.now();
        let outage_from = start.plus(Duration::from_secs(u64::from(spec.outage_at_s)));
        let outage_until = outage_from.plus(Duration::from_secs(u64::from(spec.outage_for_s)));
        {
            let world = world.clone();
            let (at, length) = (spec.outage_at_s, spec.outage_for_s);
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(u64::from(at))).await;
                world
                    .upstream()
                    .outage_for(Duration::from_secs(u64::from(length)), None);
            });
        }
        let readers = {
            let (world, seats) = (world.clone(), seats.clone());
            let (per_s, total) = (spec.reads_per_s, reads);
            tokio::spawn(async move {
                let interval = Duration::from_secs(1) / per_s.max(1);
                let hot = seats.len() / 10;
                let mut tasks = Vec::with_capacity(total as usize);
                for i in 0..total {
                    let wait = start.plus(interval * i as u32).since(world.now());
                    if !wait.is_zero() {
                        tokio::time::sleep(wait).await;
                    }
                    let client = world.client("u-000000", i as usize % world.instance_count());
                    let seat = seats[i as usize % hot].clone();
                    tasks.push(tokio::spawn(async move {
                        let _ = client.seat(&seat).await;
                    }));
                }
                for t in tasks {
                    let _ = t.await;
                }
            })
        };
        let interval = Duration::from_secs(1) / spec.confirms_per_s;
        let mut tasks = Vec::with_capacity(users.len());
        for (i, user) in users.into_iter().enumerate() {
            let wait = start.plus(interval * i as u32).since(world.now());
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            let seat = seats[i % seats.len()].clone();
            tasks.push(tokio::spawn(async move {
                user.reserve(&seat)
                    .await
                    .ok()
                    .map(|intent| intent.intent_id)
            }));
        }
        let mut confirmed = Vec::with_capacity(tasks.len());
        for task in tasks {
            if let Some(id) = task.await.expect("a user task panicked") {
                confirmed.push(id);
            }
        }
        readers.await.expect("the readers panicked");
        world.settle(SETTLE_WITHIN).await;
        (confirmed, outage_from, outage_until)
    });
    let (confirmed, outage_from, outage_until) = run.value;
    let (mut before, mut during, mut after) = (Vec::new(), Vec::new(), Vec::new());
    let mut terminal = 0;
    for id in &confirmed {
        let Some(history) = run.audit.histories.get(id) else {
            continue;
        };
        let (Some(created), Some(ended)) = (
            history.first().map(|r| r.at),
            history.iter().find(|r| r.to.is_terminal()).map(|r| r.at),
        ) else {
            continue;
        };
        terminal += 1;
        let ms = ended.since(created).as_secs_f64() * 1000.0;
        match created {
            c if c < outage_from => before.push(ms),
            c if c < outage_until => during.push(ms),
            _ => after.push(ms),
        }
    }
    let calls = &run.call_record;
    StormOutcome {
        storm: storm.clone(),
        confirmed: confirmed.len(),
        terminal,
        before: Summary::of(before),
        during: Summary::of(during),
        after: Summary::of(after),
        reads,
        upstream_reads: calls
            .iter()
            .filter(|c| matches!(c.route, crate::Route::Seat | crate::Route::Room))
            .count(),
        upstream_calls_in_outage: calls
            .iter()
            .filter(|c| c.arrived >= outage_from && c.arrived < outage_until)
            .count(),
        in_outage_by_route: calls
            .iter()
            .filter(|c| c.arrived >= outage_from && c.arrived < outage_until)
            .fold(Default::default(), |mut by, c| {
                *by.entry(format!("{:?}", c.route)).or_default() += 1;
                by
            }),
        upstream_reserves: calls
            .iter()
            .filter(|c| c.route == crate::Route::Reserve)
            .count(),
    }
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
    fn a_sale_within_one_shards_limit_keeps_up_and_one_past_it_is_throttled() {
        let mut profile = AwsProfile::published();
        (profile.api_rate_per_s, profile.api_burst) = (100_000, 100_000);
        let at = |profile: &AwsProfile, rate_per_s, shards| {
            sale(
                profile,
                &Sale {
                    rate_per_s,
                    for_s: 3,
                    shards,
                    max_per_user: None,
                    seed: 1,
                },
            )
        };
        // One shard item takes 1,000 write units a second: 500 bookings.
        let under = at(&profile, 300, 1);
        assert!(under.sustained(), "{under:?}");
        assert_eq!(under.throttled, 0, "{under:?}");
        assert_eq!(under.flight_write_units, 2.0 * under.booked as f64);
        let over = at(&profile, 1_200, 1);
        assert!(over.throttled > 0, "{over:?}");
        // At most the bucket's second of credit plus 500 a second over the window.
        assert!(over.booked <= 500 + 500 * 4, "{over:?}");
        assert!((under.booked_per_s() - 300.0).abs() < 1.0, "{under:?}");
        assert!(over.failed > 0 && !over.sustained(), "{over:?}");
        // Four shards spread the same rate under their limits.
        let spread = at(&profile, 1_200, 4);
        assert!(spread.sustained(), "{spread:?}");
        // Under one partition key, four shards share one limit.
        profile.limit_scope = super::super::capacity::Scope::PartitionKey;
        let shared = at(&profile, 1_200, 4);
        assert!(shared.throttled > 0 && !shared.sustained(), "{shared:?}");
    }

    #[test]
    fn an_outage_holds_its_confirms_until_it_ends_and_spares_the_upstream() {
        let out = storm(
            &AwsProfile::published(),
            &Storm {
                confirms_per_s: 5,
                reads_per_s: 50,
                for_s: 20,
                seats: 100,
                outage_at_s: 5,
                outage_for_s: 10,
                seed: 1,
            },
        );
        assert_eq!(out.terminal, out.confirmed, "{out:?}");
        assert_eq!(out.confirmed, 100, "{out:?}");
        // Confirms made while the upstream was down end after it is back (each needs it: a
        // seat of its own), later than any made before it ended on a healthy upstream.
        assert!(out.during.p50_ms > 5_000.0, "{out:?}");
        assert!(out.during.p50_ms > out.before.p50_ms, "{out:?}");
        // The breaker keeps the outage's calls below the confirms made in it (50), and the
        // seat-read cache the storm's reads to a tenth.
        assert!(out.upstream_calls_in_outage < 50, "{out:?}");
        assert!((out.upstream_reads as u64) * 10 < out.reads, "{out:?}");
    }

    #[test]
    fn summaries_are_nearest_rank() {
        let s = Summary::of((1..=100).map(f64::from).collect());
        assert_eq!(
            (s.p50_ms, s.p95_ms, s.p99_ms, s.max_ms),
            (50.0, 95.0, 99.0, 100.0)
        );
    }

    #[test]
    fn a_same_seat_burst_on_aws_costs_one_reserve_and_takes_the_profiles_time() {
        let profile = AwsProfile::published();
        let out = burst(
            &profile,
            &Burst {
                users: 30,
                seats: 1,
                seed: 1,
            },
        );
        assert_eq!(out.confirmed, 30);
        assert_eq!(out.terminal, 30, "{out:?}");
        assert_eq!(out.succeeded, 1, "{out:?}");
        assert_eq!(out.upstream_reserves, 1, "{out:?}");
        // The stream alone takes 213 ms at its median: no intent can end sooner than a
        // delivery plus a transaction.
        assert!(out.confirm_to_terminal.p50_ms > 100.0, "{out:?}");
        // The same burst with every store call instant and the mappings at their local
        // pickups ends far sooner: the profile is what the figure measures.
        let mut fast = profile.clone();
        for input in super::super::Input::ALL {
            fast = fast.with(input, 0.0);
        }
        let quick = burst(
            &fast,
            &Burst {
                users: 30,
                seats: 1,
                seed: 1,
            },
        );
        assert_eq!(quick.upstream_reserves, 1);
        assert!(
            quick.confirm_to_terminal.p50_ms * 2.0 < out.confirm_to_terminal.p50_ms,
            "{quick:?} against {out:?}"
        );
    }
}
