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
//! is down for `--charge-outage` (60 s). The seat's claim must keep every other confirm from
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
mod burst;
mod checkout;
mod cli;
#[cfg(feature = "baselines")]
mod compare;
#[cfg(feature = "baselines")]
mod direct_burst;
mod flash;
mod predict_aws;
mod protect;
mod simulate;

#[cfg(feature = "baselines")]
use burst::{burst_on, prepare_user, warm_connections};
use burst::{counted_json, intent_polls, print_counted, print_run, print_table, same_seat_burst};
use cli::{Cli, Scenario, TimingProfile};

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

/// Percentiles in milliseconds to 0.01 ms: the sale's answers differ by tens of microseconds
/// between targets (a 0.1 ms step hid which of two p95s near 0.5 ms was lower).
fn pcts_json(p: &Pcts) -> Value {
    let r = |x: f64| (x * 100.0).round() / 100.0;
    json!({ "p50": r(p.p50), "p95": r(p.p95), "p99": r(p.p99), "max": r(p.max) })
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
    if scenario == Scenario::Drive {
        return flash::drive::run(&cli).await;
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
    use crate::cli::parse_duration;

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
