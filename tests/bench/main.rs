//! `seatgate-bench`: load scenarios against the HTTP API, measured the way the seeds measured.
//!
//! `same-seat-burst` is seed 000's experiment: N distinct users prepare the same seat, then all
//! confirm at once. The system must send exactly one reserve write upstream, end with one
//! SUCCEEDED and N-1 FAILED_RACE, and leave nothing unsettled. Latency is measured twice: the
//! confirm call itself (what a user waits for), and time to terminal, which is the intent's
//! `updated_at` (server clock) minus the wall-clock moment its confirm was sent (same machine).
//!
//! It drives a stack over HTTP only, so the same run works against `cargo run --release -p
//! seatgate-local` in another terminal (`--api`/`--upstream`) or, by default, against an
//! in-process stack it starts on ephemeral ports with a fresh database per repetition. Exit code
//! 1 when a correctness target (the exact counts) fails; latency targets are reported, not
//! enforced, because a shared 2-core machine is noisy.
//!
//! `lost-response` is the same burst while the upstream misbehaves the way that once cost a
//! second write: the first reserve commits but its response is lost, and the charge endpoint
//! is down for `--charge-outage` (60 s). The seat's hold must keep every other confirm from
//! reaching the upstream until the reaper can read the charge; the targets are the same exact
//! counts, and it reports the time from the charge endpoint's recovery to all settled.
//!
//! `--backend aws` runs the in-process stack on DynamoDB (+ Streams) and SQS FIFO at the
//! endpoints the standard AWS variables name (`eval "$(scripts/emulators.sh start)"` for
//! DynamoDB Local and moto), with a fresh table and queue per repetition, deleted afterwards.
//! It then also reports DynamoDB write requests, from the store's request counters: over the
//! whole burst, and for one reservation alone on a fresh seat (the winner's confirm ->
//! SUCCEEDED) and one more confirm of that seat once taken (a loser's confirm -> FAILED_RACE).
//!
//! Where the stack serves `GET /__metrics` (the runner does), the burst's reserve POSTs and
//! terminal intents by status are also read from the stack's own counters (the difference of a
//! scrape before the burst and one after it) and printed beside the simulator's count and the
//! polled statuses, so each cross-checks the other.

/// The simulator allocates on every store write and every message (`seatgate-bench simulate`
/// spends a quarter of its time in glibc's malloc and free); mimalloc's thread-local pools
/// halve that. The functions keep the system allocator: this is the bench's choice only.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use anyhow::{Context as _, bail, ensure};
use clap::{Parser, ValueEnum};
use futures::StreamExt;
use seatgate::metrics::prometheus::sample;
use seatgate_aws::dynamodb::RequestCounts;
use seatgate_local::{AwsBackend, BackendKind};
pub(crate) use seatgate_testkit::flow::{
    confirm_action, dev_token, expect_status, prepare_seat, put_credential, register_upstream,
};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

// The baselines and `compare` need database clients; built only with `--features baselines`.
#[cfg(feature = "baselines")]
mod baselines;
mod checkout;
#[cfg(feature = "baselines")]
mod compare;
#[cfg(feature = "baselines")]
mod direct_burst;
mod flash;
mod predict_aws;
mod protect;
mod simulate;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scenario {
    /// N users confirm the same seat at once.
    SameSeatBurst,
    /// The burst, while the first reserve's response is lost and the charge endpoint is down.
    LostResponse,
    /// Many clients read one seat through several instances sharing one store.
    ReadStorm,
    /// Mixed reads and confirms at a fixed rate while the upstream fails every call for a while.
    Outage,
    /// A thousand waits on one held seat, then the seat is freed upstream.
    Waiters,
    /// Seed 004: login + book one seat at a constant arrival rate against a 300-seat flight.
    FlashSale,
    /// The deterministic simulator's default workload over many seeds, every checker judging
    /// each (`--seeds`, `--seed`, `--faults`, `--mix`, `--jobs`).
    Simulate,
    /// seatgate beside MariaDB, PostgreSQL and Redis baselines under the flash-sale driver
    /// (`--targets`, `--duration`, `--step-duration`), and seed 000's same-seat burst on the
    /// intent worker and on a direct confirm (`--burst`); needs `--features baselines`.
    Compare,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::SameSeatBurst => "same-seat-burst",
            Scenario::LostResponse => "lost-response",
            Scenario::ReadStorm => "read-storm",
            Scenario::Outage => "outage",
            Scenario::Waiters => "waiters",
            Scenario::FlashSale => "flash-sale",
            Scenario::Simulate => "simulate",
            Scenario::Compare => "compare",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TimingProfile {
    /// `Timing::local()`: 5 s worker timeout.
    Local,
    /// `Timing::fast()`: 800 ms worker timeout.
    Fast,
    /// `Timing::aws()`: the deployed numbers (30 s worker timeout).
    Aws,
}

impl TimingProfile {
    fn timing(self) -> seatgate::config::Timing {
        match self {
            TimingProfile::Local => seatgate::config::Timing::local(),
            TimingProfile::Fast => seatgate::config::Timing::fast(),
            TimingProfile::Aws => seatgate::config::Timing::aws(),
        }
    }
}

#[derive(Debug, Clone, Parser)]
#[command(
    name = "seatgate-bench",
    about = "Load scenarios against the seatgate HTTP API"
)]
struct Cli {
    /// The scenario (positional, or --scenario).
    #[arg(value_enum)]
    scenario: Option<Scenario>,
    #[arg(long = "scenario", value_enum, conflicts_with = "scenario")]
    scenario_flag: Option<Scenario>,
    /// Users (and confirms) in the burst.
    #[arg(long, default_value_t = 100)]
    n: usize,
    /// Repetitions; the summary shows medians.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// API of a running stack; without it an in-process stack is started per repetition.
    #[arg(long, requires = "upstream")]
    api: Option<String>,
    /// The running stack's upstream simulator (admin routes are used).
    #[arg(long, requires = "api")]
    upstream: Option<String>,
    /// Queue consumers of the in-process stack.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Backend of the in-process stack. `aws` uses the endpoints of AWS_ENDPOINT_URL_DYNAMODB,
    /// AWS_ENDPOINT_URL_DYNAMODB_STREAMS and AWS_ENDPOINT_URL_SQS (or AWS itself), a fresh
    /// table and queue per repetition, and reports DynamoDB write requests.
    #[arg(long, value_enum, default_value = "embedded", conflicts_with = "api")]
    backend: BackendKind,
    /// Timing profile of the in-process stack; default `local` on the embedded backend, `aws`
    /// on the AWS one. (DynamoDB Local runs one transaction at a time, so during a burst a
    /// worker's requests queue behind the confirms for seconds; `local`'s 5 s worker timeout
    /// can cut an invocation off after its claim, leaving that intent to the reaper.)
    #[arg(long, value_enum)]
    timing: Option<TimingProfile>,
    /// How long to wait for every intent to become terminal, e.g. 60s, 1500ms.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    settle_timeout: Duration,
    /// Pause between polling rounds. Time to terminal comes from `updated_at`, so this only
    /// changes how much read load the poller adds and how soon "all settled" is noticed.
    #[arg(long, default_value = "20ms", value_parser = parse_duration)]
    poll_interval: Duration,
    /// Concurrent requests during setup and polling (the burst itself is all N at once).
    #[arg(long, default_value_t = 32)]
    setup_concurrency: usize,
    /// same-seat-burst and its variants: `warm` opens each user's connection before the burst
    /// (a user about to confirm has the page and its prepare on a kept-alive connection), so
    /// the burst measures the service; `cold` opens most of the N connections during the burst
    /// itself, as the figures before this option did.
    #[arg(long, value_enum, default_value = "warm")]
    connections: Connections,
    /// `lost-response`: how long the charge endpoint is down from the burst on.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    charge_outage: Duration,
    /// read-storm, outage, waiters: runner instances (in-process stacks, each with its own
    /// caches and breaker copy) sharing one store and one upstream simulator.
    #[arg(long, default_value_t = 4)]
    instances: usize,
    /// read-storm: reads of one seat.
    #[arg(long, default_value_t = 24_000)]
    reads: usize,
    /// read-storm: the time the reads are spread over.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    storm_for: Duration,
    /// read-storm: concurrent clients (each paced to its share of the schedule).
    #[arg(long, default_value_t = 128)]
    clients: usize,
    /// outage: requests per second, open model (sent on schedule, answered or not); default
    /// 25. flash-sale: iterations (login + booking) per second; default 400.
    #[arg(long)]
    rate: Option<f64>,
    /// outage: how long the load runs.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    load_for: Duration,
    /// outage: when the upstream starts failing every call, from the load's start.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    outage_at: Duration,
    /// outage: how long it fails.
    #[arg(long, default_value = "40s", value_parser = parse_duration)]
    outage_for: Duration,
    /// outage: when above 0, the outage's 503s carry `Retry-After` of this many seconds (the
    /// routes are then held rather than the breaker opened), and the run counts the calls that
    /// reached a route before a `Retry-After` it was given had passed.
    #[arg(long, default_value_t = 0)]
    outage_retry_after: u64,
    /// outage (and the other protection scenarios): with the breaker's wake-ups (`on`, the
    /// runner's default), without them (`off`: parked intents wait for the reaper's schedule),
    /// or `both`, each repetition once with and once without, side by side in one run.
    #[arg(long, value_enum, default_value = "on")]
    wake_ups: WakeUpsArg,
    /// outage: share of the requests that are confirms (a distinct user on a distinct free
    /// seat: prepare + confirm); the rest are seat reads.
    #[arg(long, default_value_t = 0.2)]
    confirm_share: f64,
    /// outage: seats the reads go round (read once before the load, so cached).
    #[arg(long, default_value_t = 20)]
    read_seats: usize,
    /// outage: share of the reads that go to a seat never read before (nothing cached).
    #[arg(long, default_value_t = 0.05)]
    cold_read_share: f64,
    /// outage: how often the breaker item is read from the store for the timeline.
    #[arg(long, default_value = "10ms", value_parser = parse_duration)]
    breaker_poll: Duration,
    /// waiters: waits (distinct users) on the one held seat.
    #[arg(long, default_value_t = 1000)]
    waiters: usize,
    /// waiters: each wait's deadline, from its registration.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    wait_deadline: Duration,
    /// waiters: how long the seat stays held once every wait is registered.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    hold_for: Duration,
    /// waiters: how long to keep watching after the first waiter got the seat.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    observe_after: Duration,
    /// outage: requests in flight at most (a semaphore in front of the load); default 128.
    /// flash-sale: iterations in flight at most (a slot finding it full is dropped); default
    /// 2000.
    #[arg(long)]
    max_in_flight: Option<usize>,
    /// flash-sale: how long the load runs (each --find-saturation step too).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// flash-sale: seats of the flight (created fresh per run).
    #[arg(long, default_value_t = 300)]
    capacity: u32,
    /// flash-sale: counter shards of the flight (1..16).
    #[arg(long, default_value_t = 1)]
    shards: u32,
    /// flash-sale: distinct users; iteration i logs in as `u{i % users}`.
    #[arg(long, default_value_t = 300)]
    users: usize,
    /// flash-sale: an iteration that cannot start this long past its slot is dropped.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    lateness: Duration,
    /// flash-sale: step the rate up (--saturation-rates, each for --duration on a fresh
    /// flight) until booking p95 passes 100 ms or any error or drop appears.
    #[arg(long)]
    find_saturation: bool,
    /// flash-sale --find-saturation: the rates tried, in order.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "400,1000,2000,3000,5000,7500,10000"
    )]
    saturation_rates: Vec<f64>,
    /// flash-sale --find-saturation: each step's flight: `default` (--capacity seats) or
    /// `demand` (rate x duration seats, so every iteration can book).
    #[arg(long, value_enum, default_value = "default")]
    step_capacity: flash::StepCapacity,
    /// flash-sale: run the sale as a checkout (`checkout.rs`): hold, pay, confirm, a share of
    /// buyers abandoning, and a waiting list behind the sell-out. Each buyer is its own user.
    #[arg(long)]
    checkout: bool,
    /// flash-sale --checkout: the share of buyers who hold and never come back.
    #[arg(long, default_value_t = 0.2)]
    abandon_share: f64,
    /// flash-sale --checkout: how long a buyer takes to pay, between its hold (or offer) and
    /// its confirm.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pay_for: Duration,
    /// flash-sale --checkout: the flight's hold TTL (short, so abandoned seats come back within
    /// the run).
    #[arg(long, default_value_t = 5)]
    hold_ttl_secs: u32,
    /// flash-sale --checkout: the flight's offer TTL.
    #[arg(long, default_value_t = 10)]
    offer_ttl_secs: u32,
    /// flash-sale: the latency-over-time SVG (default target/flash-sale.svg; with
    /// --find-saturation one per step, named <stem>-<rate>.svg).
    #[arg(long)]
    plot: Option<PathBuf>,
    /// simulate: how many seeds.
    #[arg(long, default_value_t = 1_000)]
    seeds: u64,
    /// simulate: the first seed (the run covers seed .. seed + seeds).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// simulate: the fault kinds, `all`, `none` or a comma-separated list of latency, errors,
    /// busy, outage, lost-commits, late-commits, store, replays, crashes, restarts, clock-steps.
    #[arg(long, default_value = "all", value_parser = seatgate_sim::FaultsSpec::parse)]
    faults: seatgate_sim::FaultsSpec,
    /// simulate: who the users are besides the bookers, `all` (the default workload), `none`
    /// (the bookers alone) or a comma-separated list of holders (checkout holds), waiters (the
    /// waiting list).
    #[arg(long, default_value = "all", value_parser = seatgate_sim::workload::Mix::parse)]
    mix: seatgate_sim::workload::Mix,
    /// simulate: OS threads running seeds (0: one per core).
    #[arg(long, default_value_t = 0)]
    jobs: usize,
    /// simulate: predict the AWS path instead (`seatgate_sim::aws`): the same-seat and spread
    /// bursts, seed 000's storm and the flash sale on the published timing profile, `--seeds`
    /// seeds each (default here 21; the storm takes at most 5 and the sale sweep 3).
    #[arg(long)]
    aws: bool,
    /// compare: the targets, `all` or a comma-separated list of seatgate, maria-optimistic,
    /// maria-optimistic-retry, maria-pessimistic, maria-named-lock, maria-conditional,
    /// maria-seed-bug, postgres, redis-always, redis-everysec; `none` runs only the same-seat
    /// burst of `--burst`.
    #[arg(long, default_value = "all")]
    #[cfg_attr(not(feature = "baselines"), allow(dead_code))]
    targets: String,
    /// compare: users in seed 000's same-seat burst, run on seatgate's intent worker and on
    /// the seed's direct confirm before the flash-sale targets (`--repeat` times, the order
    /// alternating); 0 skips it.
    #[arg(long, default_value_t = 100)]
    #[cfg_attr(not(feature = "baselines"), allow(dead_code))]
    burst: usize,
    /// compare: each saturation step's (and each generator-ceiling step's) length.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    #[cfg_attr(not(feature = "baselines"), allow(dead_code))]
    step_duration: Duration,
    /// compare: the capacity-above-demand scenario's rate (a seat and a user per iteration),
    /// also the rate of the pool calibration.
    #[arg(long, default_value_t = 1000.0)]
    #[cfg_attr(not(feature = "baselines"), allow(dead_code))]
    demand_rate: f64,
    /// compare: connection pool sizes each baseline tries; it keeps the best.
    #[arg(long, value_delimiter = ',', default_value = "4,16,64")]
    #[cfg_attr(not(feature = "baselines"), allow(dead_code))]
    pool_sizes: Vec<u32>,
    /// compare: how long each pool size is tried.
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    #[cfg_attr(not(feature = "baselines"), allow(dead_code))]
    calibrate_for: Duration,
    /// compare: the rates of the generator-ceiling search against the no-op target (empty:
    /// skip it).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1000,2000,5000,10000,15000,20000"
    )]
    #[cfg_attr(not(feature = "baselines"), allow(dead_code))]
    ceiling_rates: Vec<f64>,
}

impl Cli {
    fn scenario(&self) -> Scenario {
        self.scenario
            .or(self.scenario_flag)
            .unwrap_or(Scenario::SameSeatBurst)
    }

    /// How long to wait for all terminal: a lost-response run first waits out the outage.
    fn settle_limit(&self) -> Duration {
        match self.scenario() {
            Scenario::LostResponse => self.charge_outage + self.settle_timeout,
            _ => self.settle_timeout,
        }
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let (number, unit) = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .map_or((s, "s"), |i| s.split_at(i));
    let value: f64 = number.parse().map_err(|_| format!("bad duration {s:?}"))?;
    let secs = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        _ => return Err(format!("bad duration unit in {s:?}; use ms, s or m")),
    };
    Ok(Duration::from_secs_f64(secs))
}

const TERMINAL: &[&str] = &[
    "SUCCEEDED",
    "FAILED_RACE",
    "FAILED_AUTH",
    "FAILED_UPSTREAM",
    "CANCELLED",
    "WAIT_EXPIRED",
];

/// What one repetition measured.
#[derive(Debug, Clone)]
struct RunResult {
    n: usize,
    upstream_posts: u64,
    outcomes: BTreeMap<String, usize>,
    non_terminal: usize,
    confirm_failures: usize,
    confirm_ms: Vec<f64>,
    terminal_ms: Vec<f64>,
    settle_wall_ms: f64,
    /// DynamoDB requests, on the AWS backend in-process.
    dynamo: Option<DynamoCost>,
    /// `lost-response`: from the charge endpoint's recovery to the last intent's terminal
    /// write (its `updated_at`), in ms; negative if all settled before the recovery.
    recovery_to_settled_ms: Option<f64>,
    /// The same figures from the stack's own `GET /__metrics`, when it serves one.
    counted: Option<Counted>,
}

/// What the stack's metrics counted over a burst (the difference of two scrapes).
#[derive(Debug, Clone, Default, PartialEq)]
struct Counted {
    reserve_posts: u64,
    /// Terminal intents by status.
    terminal: BTreeMap<String, u64>,
}

impl Counted {
    /// The runner's `GET /__metrics` (`None` if the API serves none, as a deployed one does).
    async fn scrape(client: &reqwest::Client, api: &str) -> Option<Counted> {
        let resp = client.get(format!("{api}/__metrics")).send().await.ok()?;
        if !resp.status().is_success() {
            return None;
        }
        let text = resp.text().await.ok()?;
        let read = |name: &str, labels: &[(&str, &str)]| sample(&text, name, labels) as u64;
        Some(Counted {
            reserve_posts: read("seatgate_reserve_posts_total", &[]),
            terminal: TERMINAL
                .iter()
                .map(|s| {
                    let n = read("seatgate_intents_terminal_total", &[("status", s)]);
                    ((*s).to_owned(), n)
                })
                .filter(|(_, n)| *n > 0)
                .collect(),
        })
    }

    fn since(&self, before: &Counted) -> Counted {
        Counted {
            reserve_posts: self.reserve_posts.saturating_sub(before.reserve_posts),
            terminal: self
                .terminal
                .iter()
                .map(|(s, n)| {
                    let was = before.terminal.get(s).copied().unwrap_or(0);
                    (s.clone(), n.saturating_sub(was))
                })
                .filter(|(_, n)| *n > 0)
                .collect(),
        }
    }

    fn terminal_total(&self) -> u64 {
        self.terminal.values().sum()
    }

    /// After the burst: a terminal intent is counted just after its write answers, so a poll
    /// may see it before the counter does; scrape until the counts reach what was polled (at
    /// most a second).
    async fn after(
        client: &reqwest::Client,
        api: &str,
        before: &Counted,
        terminal_seen: usize,
    ) -> Option<Counted> {
        let deadline = Instant::now() + Duration::from_secs(1);
        loop {
            let counted = Counted::scrape(client, api).await?.since(before);
            if counted.terminal_total() >= terminal_seen as u64 || Instant::now() >= deadline {
                return Some(counted);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// DynamoDB requests of one stretch of a run, counted by the stack's store, and how many of its
/// `GetItem`s were this bench's own polls of an intent.
#[derive(Debug, Clone)]
struct Cost {
    requests: RequestCounts,
    polls: u64,
}

impl Cost {
    fn since(aws: &AwsBackend, before: &RequestCounts, polls_before: u64) -> Cost {
        Cost {
            requests: aws.requests().since(before),
            polls: intent_polls().saturating_sub(polls_before),
        }
    }

    fn writes(&self) -> u64 {
        self.requests.writes()
    }

    /// The system's own `GetItem`s: the bench's polls taken out.
    fn get_items(&self) -> u64 {
        self.requests.get("GetItem").saturating_sub(self.polls)
    }

    fn json(&self) -> Value {
        json!({
            "writes": self.writes(),
            "get_items_less_polls": self.get_items(),
            "polls": self.polls,
            "by_operation": self.requests.by_operation,
        })
    }
}

/// DynamoDB requests counted by the stack's store.
#[derive(Debug, Clone)]
struct DynamoCost {
    /// From the release of the burst until every intent was seen terminal.
    burst: Cost,
    /// One reservation alone on a fresh seat: confirm -> SUCCEEDED.
    winner: Cost,
    /// Another user's confirm of that seat once it is taken: confirm -> FAILED_RACE.
    loser: Cost,
}

impl DynamoCost {
    /// The burst's losers, on average: what the burst wrote beyond one winner's cost.
    fn burst_loser_writes(&self, n: usize) -> f64 {
        if n < 2 {
            return 0.0;
        }
        (self.burst.writes() as f64 - self.winner.writes() as f64) / (n - 1) as f64
    }
}

impl RunResult {
    fn count(&self, status: &str) -> usize {
        self.outcomes.get(status).copied().unwrap_or(0)
    }

    /// The exact-count targets; each failure is a reason.
    fn correctness(&self) -> Vec<String> {
        let mut why = Vec::new();
        if self.upstream_posts != 1 {
            why.push(format!(
                "upstream reserve POSTs {} != 1",
                self.upstream_posts
            ));
        }
        if self.count("SUCCEEDED") != 1 {
            why.push(format!("SUCCEEDED {} != 1", self.count("SUCCEEDED")));
        }
        if self.count("FAILED_RACE") != self.n - 1 {
            why.push(format!(
                "FAILED_RACE {} != {}",
                self.count("FAILED_RACE"),
                self.n - 1
            ));
        }
        if self.non_terminal != 0 {
            why.push(format!("{} intents not terminal", self.non_terminal));
        }
        if self.confirm_failures != 0 {
            why.push(format!("{} confirms not accepted", self.confirm_failures));
        }
        why
    }

    fn summary(&self) -> Summary {
        let dynamo = self.dynamo.as_ref().map(|d| DynamoSummary {
            burst_get_items_per_intent: d.burst.get_items() as f64 / self.n.max(1) as f64,
            winner_get_items: d.winner.get_items() as f64,
            loser_get_items: d.loser.get_items() as f64,
            burst_writes: d.burst.writes() as f64,
            burst_writes_per_intent: d.burst.writes() as f64 / self.n.max(1) as f64,
            burst_loser_writes: d.burst_loser_writes(self.n),
            winner_writes: d.winner.writes() as f64,
            loser_writes: d.loser.writes() as f64,
        });
        Summary {
            dynamo,
            upstream_posts: self.upstream_posts as f64,
            succeeded: self.count("SUCCEEDED") as f64,
            failed_race: self.count("FAILED_RACE") as f64,
            non_terminal: self.non_terminal as f64,
            confirm: percentiles(&self.confirm_ms),
            terminal: percentiles(&self.terminal_ms),
            settle_wall_ms: self.settle_wall_ms,
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Pcts {
    p50: f64,
    p95: f64,
    p99: f64,
    max: f64,
}

/// Nearest-rank percentiles.
fn percentiles(samples: &[f64]) -> Pcts {
    if samples.is_empty() {
        return Pcts::default();
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = |p: f64| {
        let i = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted[i.clamp(1, sorted.len()) - 1]
    };
    Pcts {
        p50: rank(50.0),
        p95: rank(95.0),
        p99: rank(99.0),
        max: sorted[sorted.len() - 1],
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct DynamoSummary {
    /// The burst's `GetItem`s (less the bench's polls) per intent.
    burst_get_items_per_intent: f64,
    winner_get_items: f64,
    loser_get_items: f64,
    burst_writes: f64,
    burst_writes_per_intent: f64,
    /// (burst writes - winner's writes) / (N - 1).
    burst_loser_writes: f64,
    winner_writes: f64,
    loser_writes: f64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Summary {
    dynamo: Option<DynamoSummary>,
    upstream_posts: f64,
    succeeded: f64,
    failed_race: f64,
    non_terminal: f64,
    confirm: Pcts,
    terminal: Pcts,
    settle_wall_ms: f64,
}

fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    let mid = xs.len() / 2;
    if xs.len() % 2 == 1 {
        xs[mid]
    } else {
        (xs[mid - 1] + xs[mid]) / 2.0
    }
}

fn median_summary(all: &[Summary]) -> Summary {
    let m = |f: &dyn Fn(&Summary) -> f64| median(all.iter().map(f).collect());
    let dynamo = all.iter().all(|s| s.dynamo.is_some()).then(|| {
        let d = |f: &dyn Fn(&DynamoSummary) -> f64| {
            median(
                all.iter()
                    .filter_map(|s| s.dynamo.as_ref())
                    .map(f)
                    .collect(),
            )
        };
        DynamoSummary {
            burst_get_items_per_intent: d(&|x| x.burst_get_items_per_intent),
            winner_get_items: d(&|x| x.winner_get_items),
            loser_get_items: d(&|x| x.loser_get_items),
            burst_writes: d(&|x| x.burst_writes),
            burst_writes_per_intent: d(&|x| x.burst_writes_per_intent),
            burst_loser_writes: d(&|x| x.burst_loser_writes),
            winner_writes: d(&|x| x.winner_writes),
            loser_writes: d(&|x| x.loser_writes),
        }
    });
    Summary {
        dynamo,
        upstream_posts: m(&|s| s.upstream_posts),
        succeeded: m(&|s| s.succeeded),
        failed_race: m(&|s| s.failed_race),
        non_terminal: m(&|s| s.non_terminal),
        confirm: Pcts {
            p50: m(&|s| s.confirm.p50),
            p95: m(&|s| s.confirm.p95),
            p99: m(&|s| s.confirm.p99),
            max: m(&|s| s.confirm.max),
        },
        terminal: Pcts {
            p50: m(&|s| s.terminal.p50),
            p95: m(&|s| s.terminal.p95),
            p99: m(&|s| s.terminal.p99),
            max: m(&|s| s.terminal.max),
        },
        settle_wall_ms: m(&|s| s.settle_wall_ms),
    }
}

fn pcts_json(p: &Pcts) -> Value {
    json!({ "p50": round(p.p50), "p95": round(p.p95), "p99": round(p.p99), "max": round(p.max) })
}

fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn dynamo_json(d: &DynamoSummary) -> Value {
    json!({
        "burst_writes": round(d.burst_writes),
        "burst_writes_per_intent": (d.burst_writes_per_intent * 100.0).round() / 100.0,
        "burst_loser_writes": (d.burst_loser_writes * 100.0).round() / 100.0,
        "winner_writes": d.winner_writes,
        "loser_writes": d.loser_writes,
        "burst_get_items_per_intent": (d.burst_get_items_per_intent * 100.0).round() / 100.0,
        "winner_get_items": d.winner_get_items,
        "loser_get_items": d.loser_get_items,
    })
}

fn summary_json(s: &Summary) -> Value {
    json!({
        "dynamodb": s.dynamo.as_ref().map(dynamo_json),
        "upstream_posts": s.upstream_posts,
        "succeeded": s.succeeded,
        "failed_race": s.failed_race,
        "non_terminal": s.non_terminal,
        "confirm_ms": pcts_json(&s.confirm),
        "time_to_terminal_ms": pcts_json(&s.terminal),
        "settle_wall_ms": round(s.settle_wall_ms),
    })
}

fn wall_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0)
}

/// Milliseconds since the epoch of an RFC 3339 timestamp.
fn rfc3339_ms(s: &str) -> Option<f64> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    Some(t.unix_timestamp_nanos() as f64 / 1e6)
}

/// A stack to drive: given URLs, or one started in-process for this repetition (with its
/// database directory on the embedded backend).
struct Target {
    api: String,
    upstream: String,
    stack: Option<(seatgate_local::Stack, Option<PathBuf>)>,
}

impl Target {
    async fn open(cli: &Cli) -> anyhow::Result<Target> {
        if let (Some(api), Some(upstream)) = (&cli.api, &cli.upstream) {
            return Ok(Target {
                api: api.trim_end_matches('/').to_owned(),
                upstream: upstream.trim_end_matches('/').to_owned(),
                stack: None,
            });
        }
        let (base, dir) = match cli.backend {
            BackendKind::Embedded => {
                let dir =
                    std::env::temp_dir().join(format!("seatgate-bench-{}", uuid::Uuid::new_v4()));
                let base =
                    seatgate_local::RunnerConfig::ephemeral(Some(dir.join("seatgate.sqlite3")));
                (base, Some(dir))
            }
            BackendKind::Aws => (
                seatgate_local::RunnerConfig::ephemeral_aws("seatgate-bench"),
                None,
            ),
        };
        let config = seatgate_local::RunnerConfig {
            workers: cli.workers,
            timing: timing_profile(cli).timing(),
            ..base
        };
        let stack = seatgate_local::start(config).await?;
        Ok(Target {
            api: stack.api_url.clone(),
            upstream: stack.upstream_url.clone(),
            stack: Some((stack, dir)),
        })
    }

    /// The in-process stack's AWS backend, whose store counts DynamoDB requests.
    fn aws(&self) -> Option<&AwsBackend> {
        self.stack.as_ref().and_then(|(s, _)| s.backend.aws())
    }

    async fn close(self) {
        if let Some((stack, dir)) = self.stack {
            let aws = stack.backend.aws().cloned();
            stack.shutdown().await;
            if let Some(aws) = aws
                && let Err(e) = aws.delete_resources().await
            {
                eprintln!("cleaning up the table and queues: {e:#}");
            }
            if let Some(dir) = dir {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
}

async fn reserve_posts(client: &reqwest::Client, upstream: &str) -> anyhow::Result<u64> {
    let stats = expect_status(
        client
            .get(format!("{upstream}/__admin/stats"))
            .send()
            .await?,
        reqwest::StatusCode::OK,
        "upstream stats",
    )
    .await?;
    Ok(stats["calls"]["POST /api/reservations"]
        .as_u64()
        .unwrap_or(0))
}

/// Runs `f` over `items` with at most `limit` in flight, failing on the first error.
async fn for_each<T, R, F, Fut>(items: Vec<T>, limit: usize, f: F) -> anyhow::Result<Vec<R>>
where
    F: Fn(T) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<R>>,
{
    futures::stream::iter(items.into_iter().map(f))
        .buffered(limit.max(1))
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect()
}

/// A confirmed intent not yet seen terminal. Times are wall-clock ms since the epoch.
struct Pending {
    token: String,
    intent_id: String,
    sent: f64,
    answered: f64,
}

fn is_terminal(intent: &Value) -> bool {
    intent["status"]
        .as_str()
        .is_some_and(|s| TERMINAL.contains(&s))
}

/// `GET /intents/{id}` requests this bench sent: each is one `GetItem` of the store's, which the
/// cost figures take out so they count the system's own reads.
static INTENT_POLLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn intent_polls() -> u64 {
    INTENT_POLLS.load(std::sync::atomic::Ordering::Relaxed)
}

async fn fetch_intent(client: &reqwest::Client, api: &str, p: &Pending) -> anyhow::Result<Value> {
    INTENT_POLLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    expect_status(
        client
            .get(format!("{api}/intents/{}", p.intent_id))
            .bearer_auth(&p.token)
            .send()
            .await?,
        reqwest::StatusCode::OK,
        "get intent",
    )
    .await
}

struct User {
    token: String,
    action_id: String,
}

/// A token for `user`, its upstream credential stored, and a prepared action on `seat`.
async fn prepare_user(
    client: &reqwest::Client,
    api: &str,
    user: &str,
    credential: &str,
    seat: &str,
) -> anyhow::Result<User> {
    let token = dev_token(client, api, user, false).await?;
    put_credential(client, api, &token, credential).await?;
    let action_id = prepare_seat(client, api, &token, seat).await?;
    Ok(User { token, action_id })
}

/// Confirms `user`'s action and waits until the intent is terminal; returns its status.
async fn confirm_and_settle(
    client: &reqwest::Client,
    api: &str,
    user: &User,
    limit: Duration,
) -> anyhow::Result<String> {
    let sent = wall_ms();
    let intent_id = confirm_action(client, api, &user.token, &user.action_id).await?;
    let probe = Pending {
        token: user.token.clone(),
        intent_id,
        sent,
        answered: wall_ms(),
    };
    let deadline = Instant::now() + limit;
    loop {
        let intent = fetch_intent(client, api, &probe).await?;
        if is_terminal(&intent) {
            return Ok(intent["status"].as_str().unwrap_or("?").to_owned());
        }
        ensure!(
            Instant::now() < deadline,
            "probe intent not terminal within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// DynamoDB writes of one reservation alone on a fresh seat (the winner), then of one more
/// confirm of that seat once it is taken (a loser): `(winner, loser)` request counts.
async fn write_cost_probe(
    client: &reqwest::Client,
    api: &str,
    upstream: &str,
    aws: &AwsBackend,
    tag: &str,
    limit: Duration,
) -> anyhow::Result<(Cost, Cost)> {
    let seat = format!("probe-{tag}");
    let names = [
        (format!("probe-{tag}-w"), format!("cred-{tag}-w")),
        (format!("probe-{tag}-l"), format!("cred-{tag}-l")),
    ];
    register_upstream(client, upstream, &names).await?;
    let mut costs = Vec::with_capacity(2);
    for ((user, credential), want) in names.iter().zip(["SUCCEEDED", "FAILED_RACE"]) {
        let prepared = prepare_user(client, api, user, credential, &seat).await?;
        let (before, polls) = (aws.requests(), intent_polls());
        let status = confirm_and_settle(client, api, &prepared, limit).await?;
        costs.push(Cost::since(aws, &before, polls));
        ensure!(status == want, "probe {user}: {status}, expected {want}");
    }
    let loser = costs.pop().expect("two probes");
    let winner = costs.pop().expect("two probes");
    Ok((winner, loser))
}

/// Which runs of a protection scenario have the breaker's wake-ups (`--wake-ups`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum WakeUpsArg {
    On,
    Off,
    Both,
}

impl WakeUpsArg {
    /// The settings each repetition runs with, in order.
    fn settings(self) -> &'static [bool] {
        match self {
            WakeUpsArg::On => &[true],
            WakeUpsArg::Off => &[false],
            WakeUpsArg::Both => &[true, false],
        }
    }
}

/// How the burst's connections are opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Connections {
    Warm,
    Cold,
}

/// Leaves `n` open connections to the API idle in `client`'s pool: `n` requests at once, each
/// on a connection of its own, that the API answers `401` without touching the store. The
/// burst's `n` confirms then each take one of them.
async fn warm_connections(client: &reqwest::Client, api: &str, n: usize) -> anyhow::Result<()> {
    let barrier = Arc::new(tokio::sync::Barrier::new(n));
    let mut handles = Vec::with_capacity(n);
    for _ in 0..n {
        let (client, barrier) = (client.clone(), Arc::clone(&barrier));
        let url = format!("{api}/intents/warm-up");
        handles.push(tokio::spawn(async move {
            barrier.wait().await;
            let resp = client.get(url).send().await?;
            ensure!(
                resp.status() == reqwest::StatusCode::UNAUTHORIZED,
                "warm-up: {}",
                resp.status()
            );
            // Read to the end, so the connection goes back to the pool.
            resp.bytes().await?;
            anyhow::Ok(())
        }));
    }
    for handle in handles {
        handle.await??;
    }
    Ok(())
}

async fn same_seat_burst(cli: &Cli, run: usize) -> anyhow::Result<RunResult> {
    let n = cli.n;
    ensure!(n >= 1, "--n must be at least 1");
    let target = Target::open(cli).await?;
    let result = burst_on(cli, &target, run).await;
    target.close().await;
    result
}

async fn burst_on(cli: &Cli, target: &Target, run: usize) -> anyhow::Result<RunResult> {
    let n = cli.n;
    let (api, upstream) = (target.api.as_str(), target.upstream.as_str());
    // With `--connections warm` every confirm gets its own idle connection (opened after the
    // prepares, which run only `setup_concurrency` at a time and so leave that many), and the
    // burst measures the service, not connection set-up.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(n + cli.setup_concurrency)
        .timeout(Duration::from_secs(30))
        .build()?;

    let reset = client
        .post(format!("{upstream}/__admin/reset"))
        .send()
        .await?;
    ensure!(
        reset.status().is_success(),
        "upstream reset: {}",
        reset.status()
    );
    let tag = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let users: Vec<(String, String)> = (1..=n)
        .map(|i| (format!("bench-{tag}-u{i}"), format!("cred-{tag}-u{i}")))
        .collect();
    register_upstream(&client, upstream, &users).await?;

    let seat = format!("burst-{tag}");
    let client_ref = &client;
    let seat_ref = &seat;
    let prepared: Vec<User> = for_each(
        users,
        cli.setup_concurrency,
        |(user, credential)| async move {
            prepare_user(client_ref, api, &user, &credential, seat_ref).await
        },
    )
    .await?;

    let posts_before = reserve_posts(&client, upstream).await?;
    let counted_before = Counted::scrape(&client, api).await;
    let requests_before = target.aws().map(|a| (a.requests(), intent_polls()));
    // Lost response: the first reserve commits and its answer is dropped; the charge endpoint
    // is down from now on for the outage (one faults call, so both start together).
    let recovery_wall = match cli.scenario() {
        Scenario::SameSeatBurst
        | Scenario::ReadStorm
        | Scenario::Outage
        | Scenario::Waiters
        | Scenario::FlashSale
        | Scenario::Simulate
        | Scenario::Compare => None,
        Scenario::LostResponse => {
            let faults = json!({
                "drop_response_after_commit": 1,
                "outage_for_ms": cli.charge_outage.as_millis() as u64,
                "routes": ["GET /api/charge"],
            });
            let set_at = wall_ms();
            let resp = client
                .post(format!("{upstream}/__admin/faults"))
                .json(&faults)
                .send()
                .await?;
            ensure!(resp.status().is_success(), "set faults: {}", resp.status());
            eprintln!(
                "run {run}: first reserve's response will be lost; charge endpoint down for {:?}",
                cli.charge_outage
            );
            Some(set_at + cli.charge_outage.as_secs_f64() * 1000.0)
        }
    };
    if cli.connections == Connections::Warm {
        warm_connections(&client, api, n).await?;
    }
    eprintln!(
        "run {run}: {n} users prepared seat {seat}; releasing {n} confirms at once ({:?} connections)",
        cli.connections
    );

    // All N requests wait on one barrier, then send together.
    let barrier = Arc::new(tokio::sync::Barrier::new(n));
    let mut handles = Vec::with_capacity(n);
    for user in prepared {
        let client = client.clone();
        let barrier = Arc::clone(&barrier);
        let url = format!("{api}/actions/{}/confirm", user.action_id);
        handles.push(tokio::spawn(async move {
            let request = client.post(url).bearer_auth(&user.token);
            barrier.wait().await;
            let sent_wall = wall_ms();
            let started = Instant::now();
            let resp = request.send().await;
            let latency = started.elapsed().as_secs_f64() * 1000.0;
            let outcome = match resp {
                Ok(r) if r.status() == reqwest::StatusCode::ACCEPTED => r
                    .json::<Value>()
                    .await
                    .ok()
                    .and_then(|v| v["intent_id"].as_str().map(str::to_owned))
                    .ok_or_else(|| "no intent id".to_owned()),
                Ok(r) => Err(format!("status {}", r.status())),
                Err(e) => Err(e.to_string()),
            };
            (user.token, sent_wall, latency, outcome)
        }));
    }
    let burst_started = Instant::now();
    let mut confirms = Vec::with_capacity(n);
    for handle in handles {
        confirms.push(handle.await?);
    }
    let confirm_ms: Vec<f64> = confirms.iter().map(|c| c.2).collect();
    let mut confirm_failures = 0;
    let mut pending: Vec<Pending> = Vec::with_capacity(n);
    for (token, sent, latency, outcome) in confirms {
        match outcome {
            Ok(intent_id) => pending.push(Pending {
                token,
                intent_id,
                sent,
                answered: sent + latency,
            }),
            Err(why) => {
                confirm_failures += 1;
                eprintln!("confirm failed: {why}");
            }
        }
    }

    // Time to terminal is read from updated_at, so polling only has to see each intent once
    // it is done; but every poll is a read the workers compete with (the embedded store
    // serializes them). So one intent is probed per round, the one whose confirm was answered
    // last (about the last in its seat's queue), and all are swept only once it is terminal.
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut terminal_ms = Vec::with_capacity(n);
    let mut last_terminal_wall = f64::MIN;
    let deadline = Instant::now() + cli.settle_limit();
    while !pending.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(cli.poll_interval).await;
        let probe = pending
            .iter()
            .max_by(|a, b| a.answered.total_cmp(&b.answered))
            .expect("pending is not empty");
        if !is_terminal(&fetch_intent(&client, api, probe).await?) {
            continue;
        }
        let checked = for_each(pending, cli.setup_concurrency, |p| async move {
            let intent = fetch_intent(client_ref, api, &p).await?;
            Ok((p, intent))
        })
        .await?;
        pending = Vec::new();
        for (p, intent) in checked {
            if is_terminal(&intent) {
                let updated = intent["updated_at"]
                    .as_str()
                    .and_then(rfc3339_ms)
                    .context("updated_at")?;
                terminal_ms.push((updated - p.sent).max(0.0));
                last_terminal_wall = last_terminal_wall.max(updated);
                let status = intent["status"].as_str().unwrap_or("?").to_owned();
                *outcomes.entry(status).or_default() += 1;
            } else {
                pending.push(p);
            }
        }
    }
    let settle_wall_ms = burst_started.elapsed().as_secs_f64() * 1000.0;
    let non_terminal = pending.len();
    if non_terminal > 0 {
        *outcomes.entry("NON_TERMINAL".into()).or_default() += non_terminal;
    }
    let posts_after = reserve_posts(&client, upstream).await?;
    let counted = match &counted_before {
        Some(before) => Counted::after(&client, api, before, n - non_terminal).await,
        None => None,
    };
    let dynamo = match (target.aws(), requests_before) {
        (Some(aws), Some((before, polls))) if non_terminal == 0 && recovery_wall.is_none() => {
            let burst = Cost::since(aws, &before, polls);
            let (winner, loser) =
                write_cost_probe(&client, api, upstream, aws, tag, cli.settle_timeout).await?;
            Some(DynamoCost {
                burst,
                winner,
                loser,
            })
        }
        _ => None,
    };
    Ok(RunResult {
        dynamo,
        n,
        upstream_posts: posts_after.saturating_sub(posts_before),
        outcomes,
        non_terminal,
        confirm_failures,
        confirm_ms,
        terminal_ms,
        settle_wall_ms,
        recovery_to_settled_ms: recovery_wall
            .filter(|_| non_terminal == 0)
            .map(|recovered| last_terminal_wall - recovered),
        counted,
    })
}

/// The stack's own counts beside the simulator's and the polled ones: they must agree.
fn print_counted(run: usize, r: &RunResult) {
    let Some(c) = &r.counted else {
        println!("run {run}: /__metrics: not served by this API; nothing to cross-check");
        return;
    };
    let polled: BTreeMap<String, u64> = r
        .outcomes
        .iter()
        .filter(|(s, _)| TERMINAL.contains(&s.as_str()))
        .map(|(s, n)| (s.clone(), *n as u64))
        .collect();
    let agree = c.reserve_posts == r.upstream_posts && c.terminal == polled;
    let terminal: Vec<String> = c.terminal.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!(
        "run {run}: /__metrics: reserve POSTs {} (simulator {}) | terminal {} (polled {}) | {}",
        c.reserve_posts,
        r.upstream_posts,
        terminal.join(" "),
        polled
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" "),
        if agree { "agree" } else { "DISAGREE" },
    );
    if !agree {
        eprintln!("run {run}: the stack's metrics disagree with the simulator or the intents");
    }
}

fn counted_json(c: &Option<Counted>) -> Value {
    c.as_ref().map_or(
        Value::Null,
        |c| json!({ "reserve_posts": c.reserve_posts, "terminal": c.terminal }),
    )
}

fn print_run(run: usize, r: &RunResult) {
    let s = r.summary();
    let outcomes: Vec<String> = r.outcomes.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let verdict = if r.correctness().is_empty() {
        "PASS"
    } else {
        "FAIL"
    };
    println!(
        "run {run}: {verdict} posts={} {} | confirm p50/p95/p99 {:.1}/{:.1}/{:.1} ms | terminal p50/p95/p99 {:.1}/{:.1}/{:.1} ms | settled in {:.0} ms",
        r.upstream_posts,
        outcomes.join(" "),
        s.confirm.p50,
        s.confirm.p95,
        s.confirm.p99,
        s.terminal.p50,
        s.terminal.p95,
        s.terminal.p99,
        s.settle_wall_ms,
    );
    if let Some(ms) = r.recovery_to_settled_ms {
        println!("run {run}: charge endpoint recovered -> all settled in {ms:.0} ms");
    }
    if let Some(d) = &r.dynamo {
        let ops = |c: &RequestCounts| {
            c.by_operation
                .iter()
                .filter(|(op, _)| {
                    seatgate_aws::dynamodb::metrics::WRITE_OPERATIONS.contains(&op.as_str())
                })
                .map(|(op, n)| format!("{op}={n}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        println!(
            "run {run}: dynamodb writes: burst {} ({}; {:.2}/intent, losers {:.2} each) | winner alone {} ({}) | loser of a taken seat {} ({}) | GetItems less the bench's polls: burst {} ({:.2}/intent; {} polls), winner {}, loser {}",
            d.burst.writes(),
            ops(&d.burst.requests),
            d.burst.writes() as f64 / r.n.max(1) as f64,
            d.burst_loser_writes(r.n),
            d.winner.writes(),
            ops(&d.winner.requests),
            d.loser.writes(),
            ops(&d.loser.requests),
            d.burst.get_items(),
            d.burst.get_items() as f64 / r.n.max(1) as f64,
            d.burst.polls,
            d.winner.get_items(),
            d.loser.get_items(),
        );
    }
}

fn print_table(cli: &Cli, m: &Summary, correct: bool, latency_ok: bool) {
    let n = cli.n;
    let mark = |ok: bool| if ok { "PASS" } else { "FAIL" };
    let mut rows: Vec<(String, String, String, String)> = vec![
        (
            "upstream reserve POSTs".into(),
            format!("{}", m.upstream_posts),
            "= 1".into(),
            mark(m.upstream_posts == 1.0).into(),
        ),
        (
            "SUCCEEDED".into(),
            format!("{}", m.succeeded),
            "= 1".into(),
            mark(m.succeeded == 1.0).into(),
        ),
        (
            "FAILED_RACE".into(),
            format!("{}", m.failed_race),
            format!("= {}", n - 1),
            mark(m.failed_race == (n - 1) as f64).into(),
        ),
        (
            "non-terminal".into(),
            format!("{}", m.non_terminal),
            "= 0".into(),
            mark(m.non_terminal == 0.0).into(),
        ),
    ];
    // The latency targets are the same-seat burst's; a lost-response run waits out an outage.
    let at_100 = n == 100 && cli.scenario() == Scenario::SameSeatBurst;
    for (name, p, target) in [
        ("confirm", &m.confirm, 50.0),
        ("time to terminal", &m.terminal, 500.0),
    ] {
        rows.push((
            format!("{name} p50 (ms)"),
            format!("{:.1}", p.p50),
            String::new(),
            String::new(),
        ));
        rows.push((
            format!("{name} p95 (ms)"),
            format!("{:.1}", p.p95),
            if at_100 {
                format!("< {target}")
            } else {
                "(target at N=100)".into()
            },
            if at_100 {
                mark(p.p95 < target).into()
            } else {
                String::new()
            },
        ));
        rows.push((
            format!("{name} p99 (ms)"),
            format!("{:.1}", p.p99),
            String::new(),
            String::new(),
        ));
    }
    rows.push((
        "burst to all settled (ms)".into(),
        format!("{:.0}", m.settle_wall_ms),
        String::new(),
        String::new(),
    ));
    if let Some(d) = &m.dynamo {
        rows.push((
            "ddb writes, winner".into(),
            format!("{}", d.winner_writes),
            "<= 3".into(),
            mark(d.winner_writes <= 3.0).into(),
        ));
        rows.push((
            "ddb writes, loser".into(),
            format!("{}", d.loser_writes),
            "<= 2".into(),
            mark(d.loser_writes <= 2.0).into(),
        ));
        rows.push((
            "ddb writes, burst total".into(),
            format!("{}", d.burst_writes),
            String::new(),
            String::new(),
        ));
        rows.push((
            "ddb writes, burst losers".into(),
            format!("{:.2}", d.burst_loser_writes),
            "<= 2 each".into(),
            mark(d.burst_loser_writes <= 2.0).into(),
        ));
        rows.push((
            "ddb GetItems/intent, burst".into(),
            format!("{:.2}", d.burst_get_items_per_intent),
            "<= 1.2".into(),
            mark(d.burst_get_items_per_intent <= 1.2).into(),
        ));
        rows.push((
            "ddb GetItems, winner | loser".into(),
            format!("{} | {}", d.winner_get_items, d.loser_get_items),
            String::new(),
            String::new(),
        ));
    }
    println!();
    println!(
        "{}  n={}  repeat={}  workers={}  target={}  timing={:?}  ({})",
        cli.scenario().name(),
        n,
        cli.repeat,
        cli.workers,
        target_name(cli),
        timing_profile(cli),
        if cli.repeat > 1 {
            "medians"
        } else {
            "single run"
        },
    );
    println!("{:<28} {:>12}  {:<18} verdict", "metric", "value", "target");
    println!("{}", "-".repeat(66));
    for (name, value, target, verdict) in rows {
        println!("{name:<28} {value:>12}  {target:<18} {verdict}");
    }
    println!("{}", "-".repeat(66));
    println!(
        "correctness: {}   latency targets: {}",
        mark(correct),
        if at_100 {
            mark(latency_ok)
        } else {
            "n/a (defined at N=100)"
        }
    );
}

fn timing_profile(cli: &Cli) -> TimingProfile {
    cli.timing.unwrap_or(match cli.backend {
        BackendKind::Embedded => TimingProfile::Local,
        BackendKind::Aws => TimingProfile::Aws,
    })
}

fn target_name(cli: &Cli) -> String {
    match (&cli.api, cli.backend) {
        (Some(api), _) => api.clone(),
        (None, BackendKind::Embedded) => "in-process".into(),
        (None, BackendKind::Aws) => "in-process (aws backend)".into(),
    }
}

/// `compare`, or (built without the baselines' database clients) a refusal that says how to
/// rebuild; exit 1 when a correctness target failed, 2 when it cannot run.
#[cfg(feature = "baselines")]
async fn compare_or_explain(cli: &Cli) -> anyhow::Result<()> {
    if !compare::run(cli).await? {
        std::process::exit(1);
    }
    Ok(())
}

#[cfg(not(feature = "baselines"))]
async fn compare_or_explain(_cli: &Cli) -> anyhow::Result<()> {
    eprintln!(
        "seatgate-bench compare needs the baselines' database clients: rebuild with \
         `cargo build --release -p seatgate-tests --features baselines --bin seatgate-bench`"
    );
    std::process::exit(2);
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let scenario = cli.scenario();
    if cli.repeat == 0 {
        bail!("--repeat must be at least 1");
    }
    if scenario == Scenario::Simulate && cli.aws {
        let seeds_given = std::env::args().any(|a| a == "--seeds" || a.starts_with("--seeds="));
        let args = predict_aws::Args {
            seeds: if seeds_given { cli.seeds.max(1) } else { 21 },
            first: cli.seed,
            jobs: match cli.jobs {
                0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
                n => n,
            },
        };
        if !predict_aws::run(&args)? {
            std::process::exit(1);
        }
        return Ok(());
    }
    if scenario == Scenario::Simulate {
        let args = simulate::Args {
            seeds: cli.seeds,
            first: cli.seed,
            faults: cli.faults.clone(),
            mix: cli.mix,
            jobs: cli.jobs,
        };
        if !simulate::run(&args)? {
            std::process::exit(1);
        }
        return Ok(());
    }
    if scenario == Scenario::Compare {
        return compare_or_explain(&cli).await;
    }
    if scenario == Scenario::FlashSale {
        let ok = if cli.checkout {
            checkout::run(&cli).await?
        } else {
            flash::run(&cli).await?
        };
        if !ok {
            std::process::exit(1);
        }
        return Ok(());
    }
    if matches!(
        scenario,
        Scenario::ReadStorm | Scenario::Outage | Scenario::Waiters
    ) {
        if !protect::run(&cli).await? {
            std::process::exit(1);
        }
        return Ok(());
    }
    let mut runs = Vec::with_capacity(cli.repeat);
    for run in 1..=cli.repeat {
        let result = same_seat_burst(&cli, run).await?;
        print_run(run, &result);
        print_counted(run, &result);
        for why in result.correctness() {
            eprintln!("run {run}: {why}");
        }
        runs.push(result);
    }
    let summaries: Vec<Summary> = runs.iter().map(RunResult::summary).collect();
    let m = median_summary(&summaries);
    let correct = runs.iter().all(|r| r.correctness().is_empty());
    let latency_ok = m.confirm.p95 < 50.0 && m.terminal.p95 < 500.0;
    print_table(&cli, &m, correct, latency_ok);
    let recovery: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.recovery_to_settled_ms)
        .collect();
    if scenario == Scenario::LostResponse && !recovery.is_empty() {
        println!(
            "charge endpoint recovered -> all settled: median {:.0} ms over {} runs",
            median(recovery.clone()),
            recovery.len()
        );
    }
    let line = json!({
        "scenario": scenario.name(),
        "charge_outage_ms": (scenario == Scenario::LostResponse).then_some(cli.charge_outage.as_millis() as u64),
        "recovery_to_settled_ms": recovery,
        "n": cli.n,
        "repeat": cli.repeat,
        "workers": cli.workers,
        "target": target_name(&cli),
        "timing": format!("{:?}", timing_profile(&cli)).to_lowercase(),
        "median": summary_json(&m),
        "runs": summaries.iter().map(summary_json).collect::<Vec<_>>(),
        "dynamodb_requests": runs
            .iter()
            .map(|r| r.dynamo.as_ref().map(|d| json!({
                "burst": d.burst.json(),
                "winner": d.winner.json(),
                "loser": d.loser.json(),
            })))
            .collect::<Vec<_>>(),
        "metrics_counted": runs.iter().map(|r| counted_json(&r.counted)).collect::<Vec<_>>(),
        "correct": correct,
        "latency_targets_met": if cli.n == 100 && scenario == Scenario::SameSeatBurst { Value::Bool(latency_ok) } else { Value::Null },
    });
    println!("{line}");
    if !correct {
        std::process::exit(1);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let xs: Vec<f64> = (1..=100).map(f64::from).collect();
        let p = percentiles(&xs);
        assert_eq!((p.p50, p.p95, p.p99, p.max), (50.0, 95.0, 99.0, 100.0));
        assert_eq!(percentiles(&[7.0]).p99, 7.0);
    }

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("60s").unwrap(), Duration::from_secs(60));
        assert_eq!(
            parse_duration("1500ms").unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("5").unwrap(), Duration::from_secs(5));
        assert!(parse_duration("5h").is_err());
    }

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
