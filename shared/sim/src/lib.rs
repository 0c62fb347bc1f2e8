//! seatgate's deterministic simulator (dev-only; `scripts/check-deps.sh` keeps it out of every
//! Lambda function): the real services, as several instances on one in-memory store and an
//! in-process upstream model, on simulated time, so that a run is a function of its seed.
//!
//! Why this shape: the guarantees hold under faults only if every history that can happen keeps
//! them, and a history can be searched, replayed and judged only if nothing in it is left to
//! chance. So:
//! - time is tokio's, paused ([`runtime`]): it moves only when every task waits, straight to
//!   the next timer, so waits cost nothing and a second run sees the same instants;
//! - one thread ([`runtime`] is current-thread): tasks run in a fixed order;
//! - randomness and ids are seeded per instance ([`WorldConfig::instance_seed`]), the in-process
//!   caches are the deterministic `OrderedCache` (`Ports::with_determinism`);
//! - the store is `seatgate-memory` (ordered maps, counters for ids, a write log), and the
//!   upstream is [`UpstreamModel`] (ordered maps, a seeded fault plan, a call log).
//!
//! Modules, one concern each:
//! - [`aws`]: the AWS timing profile (published latencies and limits) and the predictions
//!   `seatgate-bench simulate --aws` prints;
//! - [`upstream`]: the upstream's truth (seats, charges), its faults and its call record;
//! - [`world`]: the [`World`] (store, upstream, instances) and its [`WorldConfig`];
//! - [`clock`]: each instance's clock, which the fault plan steps away from true time;
//! - `drivers`: the platform's loops (stream, queues, schedule), each bounded;
//! - [`client`]: users' requests through an instance's API, every route a user or an admin
//!   reads or writes (paged listings followed to their end), with real clients' retries;
//! - [`compare`]: comparing two runs' records line by line;
//! - [`checkers`]: the promises, each judged over a finished run's record (bank, truth,
//!   no-rewrite, no-wasted-write, unknown, spared, probe, reads, audit, liveness, idempotency,
//!   listing; `checkers`' doc defines each);
//! - [`workload`]: the default workload (users, seats, a room, a flight, every route, every
//!   fault kind);
//! - [`run`]: one seed of it, judged by every checker ([`check_seed`]), and seed scans;
//! - [`plant`]: planted bugs, as decorators on the ports, that the checkers must catch;
//! - [`window`]: the stretch of history a violation cites, printed under a failing seed.
//!
//! Writing a scenario: build a [`WorldConfig`], then [`simulate`] it with an async closure that
//! takes the [`World`], enrols users ([`World::enrol`]), spawns client tasks (`tokio::spawn`;
//! they run on the same thread), and waits for them and for [`World::settle`]. `simulate` shuts
//! the drivers down and returns the [`Run`]: the scenario's value, the store's write log, the
//! upstream's call log, the subscribers' deliveries and the final snapshot. Everything a client
//! or scenario does must wait only through `tokio::time` and take no randomness but from the
//! seed, or the run stops being a function of it.

pub mod aws;
pub mod checkers;
pub mod client;
pub mod clock;
pub mod compare;
mod drivers;
pub mod plant;
pub mod run;
pub mod upstream;
pub mod window;
pub mod workload;
pub mod world;

/// The backend the world runs on, for its fault knobs (`Chaos`, `Fault`) and `Snapshot`.
pub use seatgate_memory as memory;

pub use checkers::{Checker, Record, Violation};
pub use client::Client;
pub use compare::{digest, first_difference};
pub use drivers::{DELIVERY_LOG_CAPACITY, SubscriberFaults};
pub use plant::Plant;
pub use run::{FaultsSpec, Verdict, check_mix, check_planted, check_seed, first_caught};
pub use upstream::{Call, Commit, Faults, Route, UpstreamModel, Window, WindowKind};
pub use world::{Instance, Killed, World, WorldConfig};

use seatgate_memory::{AuditTrail, Snapshot};
use std::future::Future;

/// What a run leaves behind for comparison and checkers.
#[derive(Debug, Clone)]
pub struct Run<T> {
    /// What the scenario returned.
    pub value: T,
    /// Every write the store applied, in order (`MemoryBackend::write_log`).
    pub writes: Vec<String>,
    /// When each of `writes` was applied, index for index (`MemoryBackend::write_times`).
    pub write_times: Vec<seatgate::domain::Millis>,
    /// Every upstream call, in arrival order (`UpstreamModel::call_log`).
    pub calls: Vec<String>,
    /// The same calls as records, for checkers (`UpstreamModel::calls`).
    pub call_record: Vec<Call>,
    /// Every committed reserve, in commit order (`UpstreamModel::commits`).
    pub commits: Vec<Commit>,
    /// Every event the subscribers received, in order.
    pub deliveries: Vec<String>,
    /// The bodies of the events dead-lettered by the end, oldest first.
    pub dead_events: Vec<String>,
    /// The store at the end.
    pub snapshot: Snapshot,
    /// Every intent's history and consent record at the end.
    pub audit: AuditTrail,
    /// Simulated time the run covered.
    pub elapsed: std::time::Duration,
    /// The runs killed mid-flight (`World::set_crash_rate`), in order.
    pub killed: Vec<world::Killed>,
    /// Every store fault that struck, in order (`MemoryBackend::injected`).
    pub store_faults: Vec<seatgate_memory::Injected>,
}

impl<T> Run<T> {
    /// The digest of the write log, the call log and the deliveries ([`digest`]).
    pub fn digest(&self) -> String {
        digest([
            self.writes.as_slice(),
            self.calls.as_slice(),
            self.deliveries.as_slice(),
        ])
    }
}

/// A current-thread runtime with paused time and only the timer enabled (no I/O driver: a
/// simulated run touches no socket).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime")
}

/// Runs `scenario` in a fresh world built from `config`, on a fresh [`runtime`], then shuts
/// the world's drivers down and returns the run's records.
pub fn simulate<T, F, Fut>(config: WorldConfig, scenario: F) -> Run<T>
where
    F: FnOnce(World) -> Fut,
    Fut: Future<Output = T>,
{
    runtime().block_on(async move {
        let world = World::start(config);
        let value = scenario(world.clone()).await;
        world.shutdown().await;
        // The world is over: its log moves into the run rather than being copied.
        let (writes, write_times) = world.backend().take_write_log();
        Run {
            value,
            writes,
            write_times,
            calls: world.upstream().call_log(),
            call_record: world.upstream().calls(),
            commits: world.upstream().commits(),
            deliveries: world.deliveries(),
            dead_events: world
                .backend()
                .events()
                .dead()
                .into_iter()
                .map(|d| d.body)
                .collect(),
            snapshot: world.snapshot(),
            audit: world.backend().audit_trail(),
            elapsed: world.elapsed(),
            killed: world.killed(),
            store_faults: world.backend().injected(),
        }
    })
}
