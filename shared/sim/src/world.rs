//! The World: one in-memory store, one upstream model, and N instances of the real services on
//! them, with the drivers that play what AWS does around the functions.
//!
//! Shaped as one value that owns everything a run touches, so a run is its seed plus its
//! scenario: the clock is tokio's (paused), every instance gets its own seeded randomness and
//! ids (derived from the world's seed and its index, so instances never share a stream and ids
//! never clash), and the services are built exactly as a deployment builds them
//! (`Services::new(Ports::from_store(..).with_determinism(..), timing)`), with the memory
//! backend's hand-back and queue admin, as the local runner wires the embedded one. Nothing here
//! stands in for a service: the simulator only plays the platform (stream, queues, schedule).
//! An instance is one execution environment per index; a restart ([`World::restart`]) builds
//! that index's services again, as Lambda replaces an environment whose invocation it killed.
//!
//! Time: drivers and clients wait only through `tokio::time`, which a paused current-thread
//! runtime advances only when every task waits, to the next timer. Each driver stops by itself
//! at the world's horizon (`WorldConfig::horizon`, simulated), so no loop is unbounded even if
//! a scenario forgets [`World::shutdown`].

use crate::aws::AwsServiceTime;
use crate::aws::capacity::{Capacity, MeteredFlights};
use crate::aws::cost::{CostMeter, Costs, costed};
use crate::checkers::Ledger;
use crate::client::Client;
use crate::clock::SteppedClock;
use crate::drivers::{self, Recording};
use crate::plant::{self, Plant};
use crate::upstream::UpstreamModel;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use seatgate::adapters::wake_timer::WakeTimer;
use seatgate::config::Timing;
use seatgate::domain::{Millis, UserId};
use seatgate::ports::Clock;
use seatgate::service::{ApiService, Ports, Reaper, Relay, Services, Worker};
use seatgate_memory::runtime::{SeededIds, SeededRandom, TokioClock};
use seatgate_memory::{MemoryBackend, MemoryConfig, Snapshot};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::task::JoinHandle;

/// What a world is made of. [`WorldConfig::new`] gives the defaults; change fields as needed.
#[derive(Debug, Clone)]
pub struct WorldConfig {
    /// Every seeded source derives from it.
    pub seed: u64,
    /// Service instances (Lambda execution environments) on the one store.
    pub instances: usize,
    pub timing: Timing,
    /// The memory backend's queue knobs and bounds (default: from `timing`).
    pub memory: MemoryConfig,
    /// What the clock reads when the world starts.
    pub epoch: Millis,
    /// Simulated time after the start at which every driver stops by itself.
    pub horizon: Duration,
    /// The relay's pause between passes, and the records one pass takes at most (a stream
    /// event source mapping's batch size).
    pub relay_interval: Duration,
    pub relay_batch: usize,
    /// A worker pump's pause after an empty receive, and its batch (at most 10, SQS FIFO's).
    pub worker_poll: Duration,
    pub worker_batch: usize,
    /// The delivery pump's pause after an empty receive.
    pub delivery_poll: Duration,
    /// The reaper's schedule (default: `timing.reaper_interval`).
    pub reaper_interval: Duration,
    /// Bugs planted in the ports the instances are given, or switched on in the backend
    /// (default: none), to show that the checkers catch them ([`crate::plant`]).
    pub plants: Vec<Plant>,
    /// The share of applied settlements given a late twin, sent once their intent is claimed
    /// again, as a stale settler would send it (default: none; [`plant::wrap_intents`]): what
    /// the fencing token exists for, and what the platform's timeouts otherwise never produce
    /// here.
    pub late_settlements: f64,
    /// The AWS timing profile ([`crate::aws`]; default: none, every store call instant and the
    /// mappings' pickups up to their poll intervals): store calls take DynamoDB's and SQS's
    /// latencies, the mappings deliver after their published delivery latencies, each worker
    /// environment's first batch pays a cold start, and the upstream answers after its
    /// latency. The worker pumps are still one per instance: set `instances` to the profile's
    /// `worker_concurrency` to play the template's.
    pub aws: Option<crate::aws::AwsProfile>,
    /// Whether the breaker's wake-ups reach the reaper (default: on, as deployed): off, parked
    /// intents wait for the schedule, as before issue 38's item 4 (kept to predict both side by
    /// side).
    pub wake_ups: bool,
}

impl WorldConfig {
    /// Three instances on the local runner's timing, drivers polling every 25 ms, two minutes
    /// of simulated time.
    pub fn new(seed: u64) -> Self {
        let timing = Timing::local();
        WorldConfig {
            seed,
            instances: 3,
            memory: MemoryConfig::for_timing(&timing),
            reaper_interval: timing.reaper_interval,
            timing,
            epoch: Millis(1_767_225_600_000), // 2026-01-01T00:00:00Z
            horizon: Duration::from_secs(120),
            relay_interval: Duration::from_millis(25),
            relay_batch: 100,
            worker_poll: Duration::from_millis(25),
            worker_batch: 10,
            delivery_poll: Duration::from_millis(100),
            plants: Vec::new(),
            late_settlements: 0.0,
            aws: None,
            wake_ups: true,
        }
    }

    /// The seed of instance `i`'s random source and ids: distinct per instance and per world
    /// seed (a splitmix64 step, so neighbouring seeds do not give neighbouring streams).
    pub fn instance_seed(&self, i: usize) -> u64 {
        splitmix(self.seed ^ splitmix(i as u64 + 1))
    }
}

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Killed runs the world records at most.
pub const KILLED_CAPACITY: usize = 100_000;

/// The most calls a run killed at the edges makes before it dies (an API call that writes
/// makes 2 to 6 store calls; a relay pass one per record it sends and its acknowledgement; a
/// delivery batch one per post, and a hand-back per refused one).
pub const EDGE_KILL_WITHIN_CALLS: u32 = 6;

/// A run of a function killed mid-flight (a worker batch or a reaper pass): on which instance,
/// from when, and when it was killed. What it did in between may be half done, and what it
/// learned is lost with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Killed {
    /// The execution environment killed ([`Instance::caller`]): a restarted instance is another.
    pub instance: usize,
    pub started: Millis,
    pub at: Millis,
}

/// One instance: the services as one deployment builds them, in one execution environment.
/// A kill restarts it ([`World::restart`]): the same index, a new environment.
pub struct Instance {
    pub index: usize,
    /// How many times this index was restarted before this environment (0: the first).
    pub generation: usize,
    /// This environment's id in the upstream's record (`Call::caller`) and in [`Killed`]:
    /// `generation * instances + index`, so the first generation's ids are the indices.
    pub caller: usize,
    pub services: Services,
    pub api: ApiService,
    pub worker: Worker,
    pub reaper: Reaper,
}

/// The world. Cheap to clone (one `Arc`); clones share everything.
#[derive(Clone)]
pub struct World {
    inner: Arc<Inner>,
}

struct Inner {
    config: WorldConfig,
    clock: Arc<TokioClock>,
    backend: MemoryBackend,
    upstream: UpstreamModel,
    /// Instance `i`'s current environment, replaced on a restart.
    instances: Mutex<Vec<Arc<Instance>>>,
    /// Instance `i`'s clock offset from true time in ms, shared by its environments
    /// ([`crate::clock`]); 0 unless the clocks are stepped.
    offsets: Vec<Arc<AtomicI64>>,
    /// Clock steps so far.
    steps: AtomicU64,
    /// Restarts so far, by index.
    restarts: Mutex<Vec<usize>>,
    relay: Arc<Relay>,
    /// The wake-up queue every instance's breaker sends to, and the reaper loop waits on.
    wakes: Arc<WakeTimer>,
    /// Reaper wake runs started so far (shows the default histories drive the wake-ups).
    wake_runs: AtomicU64,
    late: Option<plant::LateSettlements>,
    /// On the AWS profile: the table's throughput limits and the store's service times.
    metered: Option<Metered>,
    delivered: Recording,
    stopping: AtomicBool,
    /// Wakes idle drivers when the world stops (they wait on their feeds, not on timers).
    stop: tokio::sync::Notify,
    /// The share of worker batches and reaper passes killed mid-flight (`f64` bits; 0: none),
    /// and how many were.
    crash_rate: AtomicU64,
    /// The share of API calls, relay passes and delivery batches killed mid-flight (`f64`
    /// bits; 0: none), the kills so far, and the stream the API kills are drawn from (the
    /// clients' calls, in the order they start).
    edge_crash_rate: AtomicU64,
    edge_kills: AtomicU64,
    api_crashes: Mutex<StdRng>,
    /// Whether a killed run's instance is restarted ([`World::set_restarts`]).
    restart_on_kill: AtomicBool,
    killed: Mutex<Vec<Killed>>,
    drivers: Mutex<Vec<JoinHandle<()>>>,
}

impl World {
    /// Builds the world and starts its drivers. Call it inside a current-thread runtime with
    /// paused time ([`crate::runtime`]); the clock reads `config.epoch` now.
    pub fn start(config: WorldConfig) -> World {
        assert!(config.instances > 0, "a world needs an instance");
        let api_crash_seed = splitmix(config.seed ^ 0x6170_695f_6b69_6c6c); // "api_kill"
        let clock = Arc::new(TokioClock::starting_at(config.epoch));
        let dyn_clock: Arc<dyn Clock> = clock.clone();
        // The backend, with any planted bug that lives in the store switched on.
        let mut memory = config.memory.clone();
        memory.plants.extend(plant::store_plants(&config.plants));
        let backend = MemoryBackend::new(dyn_clock.clone(), memory);
        let upstream = UpstreamModel::new(
            splitmix(config.seed),
            dyn_clock.clone(),
            config.timing.upstream_timeout,
        );
        let metered = config.aws.as_ref().map(|profile| {
            let seed = splitmix(config.seed ^ 0x6479_6e61_6d6f); // "dynamo"
            let service_time = Arc::new(AwsServiceTime::new(profile.clone(), seed));
            backend.set_service_time(service_time.clone());
            let capacity = Arc::new(Capacity::new(
                profile.limit_scope,
                (
                    profile.item_write_units_per_s,
                    profile.item_read_units_per_s,
                ),
                profile.table_units_per_s(),
                dyn_clock.clone(),
            ));
            Metered {
                costs: Arc::new(CostMeter::charging(capacity.clone())),
                capacity,
                service_time,
            }
        });
        if let Some(profile) = &config.aws {
            let (low, high) = profile.upstream_ms;
            upstream.set_faults(crate::upstream::Faults {
                latency: Duration::from_millis(low),
                jitter: Duration::from_millis(high.saturating_sub(low)),
                ..Default::default()
            });
        }
        let store = Arc::new(backend.clone());
        // One set of late twins for the whole fleet (any instance's claim releases them).
        let late = (config.late_settlements > 0.0).then(|| {
            plant::LateSettlements::new(
                config.late_settlements,
                splitmix(config.seed ^ 0x006c_6174_6500), // "late"
                config.timing.lease() * plant::LATE_SETTLEMENT_BOUND_LEASES,
            )
        });
        let wakes = Arc::new(WakeTimer::new());
        let offsets: Vec<Arc<AtomicI64>> = (0..config.instances)
            .map(|_| Arc::new(AtomicI64::new(0)))
            .collect();
        let instances: Vec<Arc<Instance>> = (0..config.instances)
            .map(|index| {
                let clock = SteppedClock::new(dyn_clock.clone(), offsets[index].clone());
                let fleet = Fleet {
                    upstream: &upstream,
                    store: &store,
                    late: &late,
                    metered: &metered,
                    wakes: &wakes,
                };
                Arc::new(build_instance(&config, index, 0, clock, &fleet))
            })
            .collect();
        // One stream consumer: a DynamoDB stream shard has one, and the relay is stateless.
        let relay = Arc::new(
            instances[0]
                .services
                .relay(store.clone(), Arc::new(backend.events())),
        );
        let world = World {
            inner: Arc::new(Inner {
                config,
                clock,
                backend,
                upstream,
                restarts: Mutex::new(vec![0; instances.len()]),
                instances: Mutex::new(instances),
                offsets,
                steps: AtomicU64::new(0),
                wake_runs: AtomicU64::new(0),
                relay,
                wakes,
                late,
                metered,
                delivered: Recording::default(),
                stopping: AtomicBool::new(false),
                stop: tokio::sync::Notify::new(),
                crash_rate: AtomicU64::new(0f64.to_bits()),
                edge_crash_rate: AtomicU64::new(0f64.to_bits()),
                edge_kills: AtomicU64::new(0),
                api_crashes: Mutex::new(StdRng::seed_from_u64(api_crash_seed)),
                restart_on_kill: AtomicBool::new(false),
                killed: Mutex::new(Vec::new()),
                drivers: Mutex::new(Vec::new()),
            }),
        };
        let handles = drivers::spawn_all(&world);
        *world.lock_drivers() = handles;
        world
    }

    fn lock_drivers(&self) -> std::sync::MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.inner
            .drivers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub fn config(&self) -> &WorldConfig {
        &self.inner.config
    }

    /// The fleet's wake-up queue (the reaper loop consumes it).
    pub(crate) fn wakes(&self) -> &Arc<WakeTimer> {
        &self.inner.wakes
    }

    pub fn timing(&self) -> &Timing {
        &self.inner.config.timing
    }

    pub fn clock(&self) -> Arc<dyn Clock> {
        self.inner.clock.clone()
    }

    pub fn now(&self) -> Millis {
        self.inner.clock.now()
    }

    /// Simulated time since the world started.
    pub fn elapsed(&self) -> Duration {
        self.now().since(self.inner.config.epoch)
    }

    pub fn backend(&self) -> &MemoryBackend {
        &self.inner.backend
    }

    pub fn upstream(&self) -> &UpstreamModel {
        &self.inner.upstream
    }

    /// The table's throughput limits, on the AWS profile ([`WorldConfig::aws`]).
    pub fn capacity(&self) -> Option<&Arc<Capacity>> {
        self.inner.metered.as_ref().map(|m| &m.capacity)
    }

    /// What the store calls so far cost on DynamoDB, on the AWS profile.
    pub fn costs(&self) -> Option<Costs> {
        self.inner.metered.as_ref().map(|m| m.costs.snapshot())
    }

    /// The late settlements' counts, if the world gives settlements late twins
    /// ([`WorldConfig::late_settlements`]).
    pub fn late_settlements(&self) -> Option<&plant::LateSettlements> {
        self.inner.late.as_ref()
    }

    /// How many instances the world runs.
    pub fn instance_count(&self) -> usize {
        self.inner.config.instances
    }

    /// Instance `i`'s current environment (modulo the count, so a scenario can spread users
    /// with `user_index`). A request holds it until it is done, as a Lambda invocation holds
    /// its environment; a restart meanwhile gives later requests a new one.
    pub fn instance(&self, i: usize) -> Arc<Instance> {
        let all = self
            .inner
            .instances
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        all[i % all.len()].clone()
    }

    /// Replaces instance `i`'s environment with a fresh one, as Lambda does after killing an
    /// invocation: the services built anew (a new holder id, empty instance caches, a breaker
    /// and route pauses known only from the store), from a random source and ids of their own
    /// (seeded from the world's seed, the index and the generation, so ids never clash).
    pub fn restart(&self, i: usize) {
        let i = i % self.inner.config.instances;
        let generation = {
            let mut restarts = self
                .inner
                .restarts
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            restarts[i] += 1;
            restarts[i]
        };
        let store = Arc::new(self.inner.backend.clone());
        let truth: Arc<dyn Clock> = self.inner.clock.clone();
        let clock = SteppedClock::new(truth, self.inner.offsets[i].clone());
        let fleet = Fleet {
            upstream: &self.inner.upstream,
            store: &store,
            late: &self.inner.late,
            metered: &self.inner.metered,
            wakes: &self.inner.wakes,
        };
        let fresh = Arc::new(build_instance(
            &self.inner.config,
            i,
            generation,
            clock,
            &fleet,
        ));
        self.inner
            .instances
            .lock()
            .unwrap_or_else(PoisonError::into_inner)[i] = fresh;
    }

    /// Restarts so far, over every instance.
    pub fn restarts(&self) -> usize {
        self.inner
            .restarts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .sum()
    }

    pub(crate) fn relay(&self) -> &Arc<Relay> {
        &self.inner.relay
    }

    pub(crate) fn recording(&self) -> &Recording {
        &self.inner.delivered
    }

    /// The events the subscribers received, in delivery order, as `"<event id> <type>"`.
    pub fn deliveries(&self) -> Vec<String> {
        self.inner.delivered.lines()
    }

    /// Sets how the subscribers misbehave from now on (`None`: they accept every post).
    pub fn set_subscriber_faults(&self, faults: Option<crate::drivers::SubscriberFaults>) {
        self.inner.delivered.set_faults(faults);
    }

    /// Posts the subscribers refused so far.
    pub fn refused_posts(&self) -> u64 {
        self.inner.delivered.refused()
    }

    /// Kills a share `rate` (0 to 1) of worker batches and reaper passes from now on, each at
    /// a seeded instant, as a Lambda killed mid-flight: its in-flight work dropped at whatever
    /// await it had reached, nothing deleted (`drivers`). 0 stops it.
    pub fn set_crash_rate(&self, rate: f64) {
        store_rate(&self.inner.crash_rate, rate);
    }

    pub(crate) fn crash_rate(&self) -> f64 {
        f64::from_bits(self.inner.crash_rate.load(Ordering::SeqCst))
    }

    /// Kills a share `rate` (0 to 1) of the functions' runs at the system's edges from now on,
    /// each between two of its calls at a seeded point, as a Lambda killed mid-flight: API
    /// calls that write (the client hears a 502 and retries as it retries a store failure),
    /// relay passes (what they had not acknowledged the stream hands again) and delivery
    /// batches (nothing deleted: the events come back after their visibility timeout). 0 stops
    /// it.
    pub fn set_edge_crash_rate(&self, rate: f64) {
        store_rate(&self.inner.edge_crash_rate, rate);
    }

    pub(crate) fn edge_crash_rate(&self) -> f64 {
        f64::from_bits(self.inner.edge_crash_rate.load(Ordering::SeqCst))
    }

    /// Whether the API call starting now is killed, and where: `Some(n)`, after its first `n`
    /// store calls (`seatgate_memory::kill`). Draws nothing while edge crashes are off, so a
    /// world without them runs as before.
    pub(crate) fn draw_api_crash(&self) -> Option<u32> {
        let rate = self.edge_crash_rate();
        if rate <= 0.0 {
            return None;
        }
        let mut rng = self
            .inner
            .api_crashes
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        rng.random_bool(rate)
            .then(|| rng.random_range(0..=EDGE_KILL_WITHIN_CALLS))
    }

    /// Counts a run killed at the edges.
    pub(crate) fn record_edge_kill(&self) {
        self.inner.edge_kills.fetch_add(1, Ordering::SeqCst);
    }

    /// API calls, relay passes and delivery batches killed so far.
    pub fn edge_kills(&self) -> u64 {
        self.inner.edge_kills.load(Ordering::SeqCst)
    }

    /// Steps instance `i`'s clock to read `offset_ms` from true time (0: true time again).
    pub fn step_clock(&self, i: usize, offset_ms: i64) {
        let offsets = &self.inner.offsets;
        let before = offsets[i % offsets.len()].swap(offset_ms, Ordering::SeqCst);
        if before != offset_ms {
            self.inner.steps.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// How many times an instance's clock was stepped to a new offset.
    pub fn clock_steps(&self) -> u64 {
        self.inner.steps.load(Ordering::SeqCst)
    }

    /// Counts a reaper wake run started by the reaper loop.
    pub(crate) fn record_wake_run(&self) {
        self.inner.wake_runs.fetch_add(1, Ordering::SeqCst);
    }

    /// Reaper wake runs started so far (a wake-up that came due, [`World::wakes`]).
    pub fn wake_runs(&self) -> u64 {
        self.inner.wake_runs.load(Ordering::SeqCst)
    }

    /// From now on, a killed run's instance is restarted (`true`) or lives on as it was.
    pub fn set_restarts(&self, on: bool) {
        self.inner.restart_on_kill.store(on, Ordering::SeqCst);
    }

    /// What follows a kill of a run on instance `i`: a new environment if restarts are on.
    pub(crate) fn after_kill(&self, i: usize) {
        if self.inner.restart_on_kill.load(Ordering::SeqCst) {
            self.restart(i);
        }
    }

    /// Records that environment `instance`'s run that started at `started` was killed now.
    pub(crate) fn record_kill(&self, instance: usize, started: Millis) {
        let killed = Killed {
            instance,
            started,
            at: self.now(),
        };
        let mut all = self
            .inner
            .killed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Bounded as the record of calls is: a run past it is still killed, not recorded.
        if all.len() < KILLED_CAPACITY {
            all.push(killed);
        }
    }

    /// The runs killed so far ([`World::set_crash_rate`]), in the order they were.
    pub fn killed(&self) -> Vec<Killed> {
        self.inner
            .killed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Worker batches and reaper passes killed so far.
    pub fn crashes(&self) -> u64 {
        self.inner
            .killed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len() as u64
    }

    /// Notified when the world is told to stop ([`World::shutdown`]).
    pub(crate) fn stop_signal(&self) -> &tokio::sync::Notify {
        &self.inner.stop
    }

    /// Whether the drivers should stop: told to, or past the horizon.
    pub(crate) fn stopping(&self) -> bool {
        self.inner.stopping.load(Ordering::SeqCst) || self.elapsed() >= self.inner.config.horizon
    }

    /// Enrols `user` (its credential known to the upstream and stored through instance
    /// `instance`'s API, as a user would put it) and returns a client on that instance.
    pub async fn enrol(&self, user: &str, instance: usize) -> Client {
        let user_id = UserId::parse(user).expect("a valid user id");
        let credential = format!("cred-{user}");
        self.inner.upstream.register(&user_id, &credential);
        let client = Client::new(self.clone(), user_id, instance);
        client.put_credential(&credential).await;
        client
    }

    /// A client for an enrolled user on another instance (a user's requests may land anywhere).
    pub fn client(&self, user: &str, instance: usize) -> Client {
        Client::new(
            self.clone(),
            UserId::parse(user).expect("a valid user id"),
            instance,
        )
    }

    /// The store's state now.
    pub fn snapshot(&self) -> Snapshot {
        self.inner.backend.snapshot()
    }

    /// The bank's books now (the flights and bookings of [`World::snapshot`], taken without
    /// copying the rest of the store).
    pub fn ledger(&self) -> Ledger {
        self.ledger_since(None).expect("asked unconditionally").1
    }

    /// The books as a [`Ledger`], with the count of writes to them it reflects, unless that
    /// count is still `seen`: a sampler then already holds this ledger, and the copy is spared.
    pub fn ledger_since(&self, seen: Option<u64>) -> Option<(u64, Ledger)> {
        let books = self.inner.backend.books_since(seen)?;
        Some((
            books.writes,
            Ledger {
                at: books.at,
                flights: books.flights,
                bookings: books.bookings,
                holds: books.holds,
            },
        ))
    }

    /// Whether nothing is left to do: every intent terminal, every checkout hold resolved, the
    /// change stream relayed, both queues empty.
    pub fn is_quiet(&self) -> bool {
        self.inner.backend.quiet()
    }

    /// Waits (simulated) until [`World::is_quiet`], looking every 50 ms, at most `within`.
    /// `true` if it got quiet.
    pub async fn settle(&self, within: Duration) -> bool {
        const LOOK: Duration = Duration::from_millis(50);
        let deadline = self.elapsed() + within;
        // Bounded: at most within / LOOK + 1 looks.
        loop {
            if self.is_quiet() {
                return true;
            }
            if self.elapsed() >= deadline {
                return false;
            }
            tokio::time::sleep(LOOK).await;
        }
    }

    /// Stops the drivers and waits for them: each ends at once if idle (they wait on the stop
    /// signal too), or after the batch it is in.
    pub async fn shutdown(&self) {
        self.inner.stopping.store(true, Ordering::SeqCst);
        self.inner.stop.notify_waiters();
        let handles = std::mem::take(&mut *self.lock_drivers());
        for handle in handles {
            // A driver that panicked has failed the run; say so.
            handle.await.expect("a driver panicked");
        }
    }
}

/// Stores a share (0 to 1; NaN as 0) as its `f64` bits.
fn store_rate(cell: &AtomicU64, rate: f64) {
    let rate = if rate.is_nan() {
        0.0
    } else {
        rate.clamp(0.0, 1.0)
    };
    cell.store(rate.to_bits(), Ordering::SeqCst);
}

/// What the AWS profile meters, shared by every instance: one table, one set of limits.
#[derive(Clone)]
struct Metered {
    capacity: Arc<Capacity>,
    service_time: Arc<AwsServiceTime>,
    costs: Arc<CostMeter>,
}

/// What every instance's environment is built on, whatever its index: the one upstream and
/// store, and the decorators the world puts on every instance's ports.
#[derive(Clone, Copy)]
struct Fleet<'a> {
    upstream: &'a UpstreamModel,
    store: &'a Arc<MemoryBackend>,
    wakes: &'a Arc<WakeTimer>,
    late: &'a Option<plant::LateSettlements>,
    metered: &'a Option<Metered>,
}

/// Instance `index`'s environment of generation `generation`: the services as a deployment
/// builds them, on the world's store and upstream (its calls recorded under the environment's
/// caller id), bent by any planted bug.
fn build_instance(
    config: &WorldConfig,
    index: usize,
    generation: usize,
    clock: SteppedClock,
    fleet: &Fleet<'_>,
) -> Instance {
    let Fleet {
        upstream,
        store,
        late,
        metered,
        wakes,
    } = *fleet;
    // The first generation keeps the seed it always had, so worlds without restarts replay
    // the histories they did before restarts existed.
    let seed = match generation {
        0 => config.instance_seed(index),
        g => splitmix(config.instance_seed(index) ^ splitmix(g as u64)),
    };
    let caller = generation * config.instances + index;
    let clock: Arc<dyn Clock> = Arc::new(clock);
    let seen_upstream = plant::wrap_upstream(Arc::new(upstream.as_caller(caller)), &config.plants);
    let mut ports = Ports::from_store(store.clone(), seen_upstream, clock.clone())
        .with_determinism(
            Arc::new(SeededRandom::new(seed)),
            Arc::new(SeededIds::new(seed, clock)),
        )
        .with_hand_back(store.clone())
        .with_queue_admin(plant::wrap_queue_admin(store.clone(), &config.plants));
    if config.wake_ups {
        ports = ports.with_wake_ups(plant::wrap_wake_ups(wakes.clone(), &config.plants));
    }
    // The breaker's store as a planted bug would answer it (itself if none).
    ports.breaker = plant::wrap_breaker(ports.breaker, &config.plants);
    ports.flights = plant::wrap_flights(ports.flights, &config.plants);
    ports.holds = plant::wrap_holds(ports.holds, &config.plants);
    if let Some(m) = metered {
        ports = costed(ports, &m.costs);
        ports.flights = Arc::new(MeteredFlights {
            inner: ports.flights,
            capacity: m.capacity.clone(),
            service_time: m.service_time.clone(),
            meter: m.costs.clone(),
        });
    }
    if let Some(late) = late {
        ports.intents = plant::wrap_intents(ports.intents, late);
    }
    let services = Services::new(ports, config.timing.clone());
    Instance {
        index,
        generation,
        caller,
        api: services.api(),
        worker: services.worker(),
        reaper: services.reaper(),
        services,
    }
}
