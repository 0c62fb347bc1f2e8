//! `compare`: seatgate beside the baselines of issue 21, under one driver, in one run.
//!
//! Every target gets the very iteration `flash-sale` sends ([`flash::flash_step`]: login, book
//! one seat, then the stored bookings and `available` read back and checked), so the only
//! thing that differs between rows is what stands behind the HTTP routes. The scenarios run
//! target by target within each scenario, the order reversed from one scenario to the next, so
//! a noisy minute on this shared machine falls on every target rather than on one:
//!
//! 1. seed 004's: 300 seats, 400 iterations/s for `--duration` (10 s);
//! 2. the same at 2,000/s;
//! 3. capacity above demand: `--demand-rate` for `--duration`, a seat for every iteration and a
//!    user per iteration, so each 201 is a real write;
//! 4. saturation: the `--saturation-rates` steps (`--step-duration` each, 300 seats), every
//!    target still good taking the same step in turn, until its booking p95 passes 100 ms or
//!    an error or a drop appears (the flash-sale search's own rule).
//!
//! Before those, the generator's own ceiling is measured ([`baselines::noop`] under the same
//! saturation search, to `--ceiling-rates`), and each baseline picks its pool from
//! `--pool-sizes` by a short capacity-above-demand step per size (`--calibrate-for`): the size
//! with no error or drop and the lowest booking p95 wins. A saturation at or past the
//! generator's ceiling is reported as the generator's, not the target's.
//!
//! Before all of these, unless `--burst 0`, seed 000's same-seat burst runs on seatgate's
//! intent worker and on the seed's direct confirm ([`super::direct_burst`]); `--targets none`
//! runs only that.
//!
//! The generator runs in a `drive` child process per step (`--generator process`, the default:
//! `flash/drive.rs` says why), or beside the targets in this process (`--generator
//! in-process`, as the 2026-12-02 run did).
//!
//! seatgate runs as the in-process runner stack on the embedded backend (`--backend` is not
//! consulted: the table says "embedded backend"). The seed's bug (`maria-seed-bug`) is exempt
//! from the correctness checks, flagged in the table and reported as oversold.

use super::baselines::mariadb::{MariaDb, Strategy};

use super::baselines::noop::Noop;

use super::baselines::postgres::Postgres;

use super::baselines::redis::{Fsync, Redis};

use super::baselines::server::{BaselineServer, serve};

use super::flash::{self, StepResult};

use super::cli::Generator;

use super::{Cli, Pcts, Target};

use anyhow::{Context as _, bail, ensure};

use serde_json::{Value, json};

use std::collections::BTreeMap;

use std::fmt::Write as _;

use std::path::{Path, PathBuf};

use std::time::Duration;

/// Every target `--targets all` names, in table order.
const ALL: &[Kind] = &[
    Kind::Seatgate,
    Kind::Maria(Strategy::Optimistic { retry: false }),
    Kind::Maria(Strategy::Optimistic { retry: true }),
    Kind::Maria(Strategy::Pessimistic),
    Kind::Maria(Strategy::NamedLock),
    Kind::Maria(Strategy::Conditional),
    Kind::Maria(Strategy::SeedBug),
    Kind::Postgres,
    Kind::Redis(Fsync::Always),
    Kind::Redis(Fsync::EverySec),
];

/// The seed's scenario.
const SEED_SEATS: u32 = 300;

const SEED_RATE: f64 = 400.0;

const FAST_RATE: f64 = 2_000.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Seatgate,
    Maria(Strategy),
    Postgres,
    Redis(Fsync),
}

impl Kind {
    fn name(self) -> String {
        match self {
            Kind::Seatgate => "seatgate".into(),
            Kind::Maria(s) => format!("maria-{}", s.database().replace('_', "-")),
            Kind::Postgres => "postgres".into(),
            Kind::Redis(Fsync::Always) => "redis-always".into(),
            Kind::Redis(Fsync::EverySec) => "redis-everysec".into(),
        }
    }

    fn label(self) -> &'static str {
        match self {
            Kind::Seatgate => "seatgate (in-process runner, embedded backend, synchronous=FULL)",
            Kind::Maria(Strategy::Optimistic { retry: false }) => {
                "MariaDB optimistic version, no retry"
            }
            Kind::Maria(Strategy::Optimistic { retry: true }) => {
                "MariaDB optimistic version, 5 tries 50 ms apart (seed)"
            }
            Kind::Maria(Strategy::Pessimistic) => "MariaDB SELECT ... FOR UPDATE (seed, 15 s wait)",
            Kind::Maria(Strategy::NamedLock) => {
                "MariaDB GET_LOCK + conditional UPDATE (seed's pick)"
            }
            Kind::Maria(Strategy::Conditional) => "MariaDB conditional UPDATE, row count checked",
            Kind::Maria(Strategy::SeedBug) => {
                "MariaDB conditional UPDATE, row count NOT checked (SEED'S BUG)"
            }
            Kind::Postgres => "PostgreSQL conditional UPDATE, synchronous_commit=on",
            Kind::Redis(Fsync::Always) => "Redis Lua check-and-decrement, appendfsync always",
            Kind::Redis(Fsync::EverySec) => {
                "Redis Lua, appendfsync everysec (NOT durable on return)"
            }
        }
    }

    fn exempt(self) -> bool {
        self == Kind::Maria(Strategy::SeedBug)
    }

    fn parse(list: &str) -> anyhow::Result<Vec<Kind>> {
        if list.trim() == "all" {
            return Ok(ALL.to_vec());
        }
        let mut out = Vec::new();
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let kind = ALL
                .iter()
                .copied()
                .find(|k| k.name() == name)
                .with_context(|| {
                    let names: Vec<String> = ALL.iter().map(|k| k.name()).collect();
                    format!("unknown target {name:?}; known: all, {}", names.join(", "))
                })?;
            if !out.contains(&kind) {
                out.push(kind);
            }
        }
        ensure!(!out.is_empty(), "--targets names no target");
        Ok(out)
    }
}

/// The database servers of this run, started once and stopped when dropped.
#[derive(Default)]
struct Servers {
    maria: Option<MariaDb>,
    postgres: Option<Postgres>,
    redis_always: Option<Redis>,
    redis_everysec: Option<Redis>,
}

impl Servers {
    async fn start(kinds: &[Kind]) -> anyhow::Result<Servers> {
        let mut s = Servers::default();
        for &kind in kinds {
            match kind {
                Kind::Seatgate => {}
                Kind::Maria(strategy) => {
                    if s.maria.is_none() {
                        eprintln!("compare: starting mariadbd");
                        s.maria = Some(MariaDb::start().await?);
                    }
                    if let Some(m) = &s.maria {
                        m.prepare(strategy).await?;
                    }
                }
                Kind::Postgres => {
                    eprintln!("compare: starting postgres");
                    s.postgres = Some(Postgres::start().await?);
                }
                Kind::Redis(Fsync::Always) => {
                    eprintln!("compare: starting redis-server (appendfsync always)");
                    s.redis_always = Some(Redis::start(Fsync::Always).await?);
                }
                Kind::Redis(Fsync::EverySec) => {
                    eprintln!("compare: starting redis-server (appendfsync everysec)");
                    s.redis_everysec = Some(Redis::start(Fsync::EverySec).await?);
                }
            }
        }
        Ok(s)
    }

    /// The baseline `kind` served over a pool of `pool` connections.
    async fn serve(&self, kind: Kind, pool: u32) -> anyhow::Result<BaselineServer> {
        let missing = || anyhow::anyhow!("{} was not started", kind.name());
        match kind {
            Kind::Seatgate => bail!("seatgate is not a baseline"),
            Kind::Maria(strategy) => {
                let m = self.maria.as_ref().ok_or_else(missing)?;
                serve(m.inventory(strategy, pool).await?).await
            }
            Kind::Postgres => {
                let p = self.postgres.as_ref().ok_or_else(missing)?;
                serve(p.inventory(pool).await?).await
            }
            Kind::Redis(f) => {
                let r = match f {
                    Fsync::Always => self.redis_always.as_ref(),
                    Fsync::EverySec => self.redis_everysec.as_ref(),
                }
                .ok_or_else(missing)?;
                serve(r.inventory(pool as usize).await?).await
            }
        }
    }
}

/// A target ready to drive.
struct Running {
    kind: Kind,
    url: String,
    pool: Option<u32>,
    /// How each pool size did in calibration: (size, booking p95 ms, errors + drops).
    calibration: Vec<(u32, f64, usize)>,
    _server: Option<BaselineServer>,
}

/// What one target did in one scenario: its step, or why the step could not run.
type Outcome = Result<StepResult, String>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Scenario {
    Seed,
    Fast,
    Demand,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::Seed => "seed-400",
            Scenario::Fast => "seed-2000",
            Scenario::Demand => "demand",
        }
    }
}

/// A target's saturation search.
#[derive(Debug, Clone, Default)]
struct Saturation {
    last_good: Option<f64>,
    /// The rate of the first step past saturation.
    stopped_at: Option<f64>,
    stopped: Option<String>,
    steps: Vec<Value>,
}

/// The flash-sale settings of one step: the run's flags with this step's duration and users.
fn step_cli(cli: &Cli, duration: Duration, users: usize) -> Cli {
    let mut c = cli.clone();
    c.duration = duration;
    c.users = users.max(1);
    c
}

fn seats_for(rate: f64, duration: Duration) -> u32 {
    ((rate * duration.as_secs_f64()).ceil() as u32).clamp(1, 10_000_000)
}

/// One driver run's shape.
#[derive(Debug, Clone, Copy)]
struct Load {
    rate: f64,
    duration: Duration,
    capacity: u32,
    users: usize,
}

/// One driver run on a client of its own: dropped at the end, so the step's connections (up to
/// the in-flight cap, each an open file at both ends in this process) close before the next
/// target's open. A client shared across ten targets kept thousands of idle connections per
/// target and ran out of file descriptors.
async fn step(cli: &Cli, url: &str, load: Load, in_flight: usize) -> Outcome {
    let c = step_cli(cli, load.duration, load.users);
    if cli.generator == Generator::Process {
        return step_in_child(&c, url, load, in_flight).await;
    }
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(in_flight + cli.setup_concurrency)
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| format!("building the HTTP client: {e}"))?;
    flash::flash_step(&c, url, &client, load.rate, load.capacity, in_flight)
        .await
        .map_err(|e| format!("{e:#}"))
}

/// The step in a `drive` child process (`flash/drive.rs`), its result read from the child's
/// one line of output. Bounded: the step's length plus the client's 30 s timeout and the
/// read-back of every user's bookings; the child is killed if it runs past that.
async fn step_in_child(c: &Cli, url: &str, load: Load, in_flight: usize) -> Outcome {
    let exe = std::env::current_exe().map_err(|e| format!("finding this binary: {e}"))?;
    let mut child = tokio::process::Command::new(exe);
    child
        .args(flash::drive::args(
            c,
            url,
            load.rate,
            load.capacity,
            in_flight,
        ))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    let limit = load.duration + Duration::from_secs(120);
    // `spawn` and `wait_with_output` keep stderr inherited (`output` would capture it).
    let child = child
        .spawn()
        .map_err(|e| format!("starting the generator process: {e}"))?;
    let out = tokio::time::timeout(limit, child.wait_with_output())
        .await
        .map_err(|_| format!("the generator process ran past {limit:?}"))?
        .map_err(|e| format!("waiting for the generator process: {e}"))?;
    if !out.status.success() {
        return Err(format!("the generator process failed ({})", out.status));
    }
    // The result is the last line; what the step printed before it (the runner's own counts)
    // is passed on.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines: Vec<&str> = stdout.lines().filter(|l| !l.trim().is_empty()).collect();
    let result = lines
        .pop()
        .ok_or("the generator process printed no result")?;
    for line in lines {
        println!("{line}");
    }
    serde_json::from_str(result).map_err(|e| format!("reading the generator process's result: {e}"))
}

pub(crate) async fn run(cli: &Cli) -> anyhow::Result<bool> {
    // Seed 000's burst first: its stacks and simulators are stopped before the generator's
    // ceiling is measured, so they take no cores from it.
    let burst_ok = if cli.burst > 0 {
        super::direct_burst::run(cli).await?
    } else {
        true
    };
    if cli.targets.trim() == "none" {
        return Ok(burst_ok);
    }
    let in_flight = cli.max_in_flight.unwrap_or(flash::DEFAULT_IN_FLIGHT).max(1);
    if cli.targets.trim() == "ceiling" {
        let ceiling = generator_ceiling(cli, in_flight).await?;
        println!(
            "generator={:?}: the generator's ceiling {} (stopped at {}); load average {}",
            cli.generator,
            ceiling
                .last_good
                .map_or("below the first step".to_owned(), |r| format!("{r}/s")),
            ceiling.stopped,
            load_average()
        );
        for (rate, achieved, p95, bad) in &ceiling.steps {
            println!(
                "  {rate}/s: achieved {achieved:.0}/s, booking p95 {p95:.1} ms, errors+drops {bad}"
            );
        }
        return Ok(burst_ok);
    }
    let kinds = Kind::parse(&cli.targets)?;
    ensure!(!cli.pool_sizes.is_empty(), "--pool-sizes is empty");
    ensure!(
        !cli.saturation_rates.is_empty(),
        "--saturation-rates is empty"
    );
    let started_at = time::OffsetDateTime::now_utc();
    let load_before = load_average();

    // 1. The generator's ceiling, before any server of ours competes for the cores.
    let ceiling = if cli.ceiling_rates.is_empty() {
        None
    } else {
        Some(generator_ceiling(cli, in_flight).await?)
    };

    // 2. Servers, then each baseline's pool.
    let servers = Servers::start(&kinds).await?;
    let (running, seatgate) = start_targets(cli, &servers, &kinds, in_flight).await?;

    // 3. The scenarios, targets alternating.
    let results = run_scenarios(cli, &running, in_flight).await;

    // 4. Saturation, one step of every target still good at a time.
    let saturation = saturate(cli, &running, in_flight).await;

    let finished_at = time::OffsetDateTime::now_utc();
    println!();
    println!(
        "machine: {} cores, load average (1/5/15 min) {load_before} at the start, {} at the end",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average()
    );
    let report = Report {
        running: &running,
        results: &results,
        saturation: &saturation,
        ceiling: ceiling.as_ref(),
        rates: &cli.saturation_rates,
    };
    report.print(cli, started_at, finished_at);
    let plots = report.plots(cli)?;
    for p in &plots {
        println!("latency over time: {}", p.display());
    }
    let correct = report.correct();
    println!("{}", report.json(cli, &plots));
    drop(running);
    if let Some(t) = seatgate {
        t.close().await;
    }
    drop(servers);
    Ok(correct && burst_ok)
}

/// Every target made ready to drive, in `kinds`' order: seatgate as the in-process runner on
/// the embedded backend (also returned, to be closed at the end), each baseline served over
/// the pool its calibration picked.
async fn start_targets(
    cli: &Cli,
    servers: &Servers,
    kinds: &[Kind],
    in_flight: usize,
) -> anyhow::Result<(Vec<Running>, Option<Target>)> {
    let mut running: Vec<Running> = Vec::new();
    let mut seatgate: Option<Target> = None;
    for &kind in kinds {
        if kind == Kind::Seatgate {
            let mut c = cli.clone();
            c.api = None;
            c.upstream = None;
            c.backend = seatgate_local::BackendKind::Embedded;
            let target = Target::open(&c).await?;
            running.push(Running {
                kind,
                url: target.api.clone(),
                pool: None,
                calibration: vec![],
                _server: None,
            });
            seatgate = Some(target);
            continue;
        }
        running.push(calibrate(cli, servers, kind, in_flight).await?);
    }
    Ok((running, seatgate))
}

/// The fixed scenarios (seed 004's, the same at 2,000/s, capacity above demand), each target
/// in turn, the order reversed from one scenario to the next; a step that could not run is
/// kept as its error.
async fn run_scenarios(
    cli: &Cli,
    running: &[Running],
    in_flight: usize,
) -> BTreeMap<(Scenario, usize), Outcome> {
    let mut results: BTreeMap<(Scenario, usize), Outcome> = BTreeMap::new();
    let demand_users = seats_for(cli.demand_rate, cli.duration) as usize;
    for (round, scenario) in [Scenario::Seed, Scenario::Fast, Scenario::Demand]
        .into_iter()
        .enumerate()
    {
        let (rate, capacity, users) = match scenario {
            Scenario::Seed => (SEED_RATE, SEED_SEATS, cli.users),
            Scenario::Fast => (FAST_RATE, SEED_SEATS, cli.users),
            Scenario::Demand => (
                cli.demand_rate,
                seats_for(cli.demand_rate, cli.duration),
                demand_users,
            ),
        };
        for i in order(running.len(), round) {
            let r = &running[i];
            eprintln!("compare: {} on {}", scenario.name(), r.kind.name());
            let load = Load {
                rate,
                duration: cli.duration,
                capacity,
                users,
            };
            let out = step(cli, &r.url, load, in_flight).await;
            if let Err(e) = &out {
                eprintln!(
                    "compare: {} on {} failed: {e}",
                    scenario.name(),
                    r.kind.name()
                );
            }
            results.insert((scenario, i), out);
        }
    }
    results
}

/// The saturation search: each `--saturation-rates` step taken by every target still good, in
/// alternating order, until each has stopped (the flash-sale search's own rule) or the rates
/// run out.
async fn saturate(cli: &Cli, running: &[Running], in_flight: usize) -> Vec<Saturation> {
    let mut saturation: Vec<Saturation> = vec![Saturation::default(); running.len()];
    for (round, &rate) in cli.saturation_rates.iter().enumerate() {
        let live: Vec<usize> = order(running.len(), round)
            .into_iter()
            .filter(|&i| saturation[i].stopped.is_none())
            .collect();
        if live.is_empty() {
            break;
        }
        for i in live {
            let r = &running[i];
            eprintln!("compare: saturation {rate}/s on {}", r.kind.name());
            let load = Load {
                rate,
                duration: cli.step_duration,
                capacity: SEED_SEATS,
                users: cli.users,
            };
            let out = step(cli, &r.url, load, in_flight).await;
            let s = &mut saturation[i];
            match out {
                Ok(st) => {
                    let reason = st.saturation_reason(!r.kind.exempt());
                    let mut line = st.json();
                    line["verdict"] = json!(reason.clone().unwrap_or_else(|| "good".into()));
                    s.steps.push(line);
                    match reason {
                        None => s.last_good = Some(rate),
                        Some(why) => {
                            s.stopped_at = Some(rate);
                            s.stopped = Some(format!("{rate}/s: {why}"));
                        }
                    }
                }
                Err(e) => {
                    s.stopped_at = Some(rate);
                    s.stopped = Some(format!("{rate}/s: step failed: {e}"));
                }
            }
        }
    }
    saturation
}

/// `/proc/loadavg`'s three averages: how busy the shared machine was around the run.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".into())
}

/// The targets' indices in the order of `round`: forward on even rounds, backward on odd.
fn order(n: usize, round: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    if round % 2 == 1 {
        v.reverse();
    }
    v
}

/// Tries each `--pool-sizes` entry on a short capacity-above-demand step and keeps the best.
async fn calibrate(
    cli: &Cli,
    servers: &Servers,
    kind: Kind,
    in_flight: usize,
) -> anyhow::Result<Running> {
    let mut tried: Vec<(u32, f64, usize)> = Vec::new();
    let mut best: Option<(bool, f64, u32)> = None;
    for &size in &cli.pool_sizes {
        let size = size.max(1);
        let server = servers.serve(kind, size).await?;
        let seats = seats_for(cli.demand_rate, cli.calibrate_for);
        eprintln!(
            "compare: calibrating {} with {size} connections",
            kind.name()
        );
        let load = Load {
            rate: cli.demand_rate,
            duration: cli.calibrate_for,
            capacity: seats,
            users: seats as usize,
        };
        let out = step(cli, &server.url, load, in_flight).await;
        drop(server);
        let (p95, bad) = match &out {
            Ok(s) => (s.booking_all().p95, s.errors() + s.dropped()),
            Err(e) => {
                eprintln!("compare: calibrating {} at {size}: {e}", kind.name());
                (f64::INFINITY, usize::MAX)
            }
        };
        tried.push((size, p95, bad));
        let candidate = (bad != 0, p95, size);
        if best.is_none_or(|b| (candidate.0, candidate.1) < (b.0, b.1)) {
            best = Some(candidate);
        }
    }
    let pool = best.map_or(cli.pool_sizes[0], |b| b.2);
    let server = servers.serve(kind, pool).await?;
    eprintln!("compare: {} keeps {pool} connections", kind.name());
    Ok(Running {
        kind,
        url: server.url.clone(),
        pool: Some(pool),
        calibration: tried,
        _server: Some(server),
    })
}

/// The generator's ceiling: the saturation search against the in-memory no-op baseline.
struct Ceiling {
    last_good: Option<f64>,
    stopped: String,
    /// (rate, achieved rate, booking p95, drops + errors)
    steps: Vec<(f64, f64, f64, usize)>,
}

async fn generator_ceiling(cli: &Cli, in_flight: usize) -> anyhow::Result<Ceiling> {
    let server = serve(Noop::default()).await?;
    let mut c = Ceiling {
        last_good: None,
        stopped: "every step stayed within bounds".into(),
        steps: vec![],
    };
    for &rate in &cli.ceiling_rates {
        eprintln!("compare: generator ceiling, {rate}/s on the no-op target");
        let seats = seats_for(rate, cli.step_duration);
        let load = Load {
            rate,
            duration: cli.step_duration,
            capacity: seats,
            users: cli.users,
        };
        let s = step(cli, &server.url, load, in_flight)
            .await
            .map_err(|e| anyhow::anyhow!("the no-op target failed: {e}"))?;
        let reason = s.saturation_reason(true);
        c.steps.push((
            rate,
            s.achieved_rate(),
            s.booking_all().p95,
            s.errors() + s.dropped(),
        ));
        match reason {
            None => c.last_good = Some(rate),
            Some(why) => {
                c.stopped = format!("{rate}/s: {why}");
                break;
            }
        }
    }
    Ok(c)
}

mod plot;
mod report;
#[cfg(test)]
mod tests;

use report::Report;
