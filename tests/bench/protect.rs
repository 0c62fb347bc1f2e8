//! The upstream-protection scenarios: `read-storm`, `outage` and `waiters`.
//!
//! Each runs a fleet of `--instances` in-process `seatgate_local` stacks that share one store
//! (one SQLite file on the embedded backend, one DynamoDB table and SQS queue on the AWS one) and
//! one upstream simulator (started by the first stack; the others get its URL). Every stack has
//! its own services, so its own moka cache, breaker copy and call window, exactly as separate
//! processes would; only the tokio runtime is shared with the load generator. On the AWS backend
//! only the first stack runs the relay, workers and reaper (one DynamoDB stream poller, as on
//! Lambda) and the others serve the API.
//!
//! The breaker is read straight from the shared store (`BreakerStates::breaker`) every
//! `--breaker-poll` to build its timeline, which is then laid over the simulator's call log
//! (`GET /__admin/calls`, arrival times in wall-clock ms on the same machine).

use super::{
    Cli, Pcts, Scenario, TERMINAL, dev_token, expect_status, for_each, pcts_json, percentiles,
    register_upstream, round, timing_profile, wall_ms,
};
use anyhow::{Context as _, bail, ensure};
use seatgate::config::Timing;
use seatgate::domain::{BreakerPhase, BreakerState};
use seatgate::ports::BreakerStates;
use seatgate_local::{Backend, BackendKind, Role, RunnerConfig};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Runs the scenario `--repeat` times; `Ok(false)` when a correctness target failed.
pub(crate) async fn run(cli: &Cli) -> anyhow::Result<bool> {
    ensure!(
        cli.api.is_none(),
        "{} starts its own fleet of instances (it reads the breaker from the store); --api is not supported",
        cli.scenario().name()
    );
    ensure!(cli.instances >= 1, "--instances must be at least 1");
    let mut all_correct = true;
    // Outage: (wake-ups, the last outage confirm's end after the upstream came back, the
    // longest confirm to terminal; s) per run, for the summary.
    let mut settled: Vec<(bool, f64, f64)> = Vec::new();
    for run in 1..=cli.repeat {
        for &wake_ups in cli.wake_ups.settings() {
            let fleet = Fleet::start(cli, wake_ups).await?;
            eprintln!(
                "run {run}: {} instances on one {} store; upstream {}; wake-ups {}",
                fleet.apis.len(),
                match fleet.kind {
                    BackendKind::Embedded => "SQLite",
                    BackendKind::Aws => "DynamoDB + SQS",
                },
                fleet.upstream,
                if wake_ups { "on" } else { "off" }
            );
            let client = reqwest::Client::builder()
                .pool_max_idle_per_host(
                    cli.max_in_flight.unwrap_or(128).max(cli.clients) + cli.setup_concurrency,
                )
                .timeout(Duration::from_secs(30))
                .build()?;
            let result = match cli.scenario() {
                Scenario::ReadStorm => read_storm(cli, &fleet, &client).await,
                Scenario::Outage => {
                    outage(cli, &fleet, &client)
                        .await
                        .map(|(ok, after_s, longest_s)| {
                            settled.push((wake_ups, after_s, longest_s));
                            ok
                        })
                }
                Scenario::Waiters => waiters(cli, &fleet, &client).await,
                other => bail!("{} is not a protection scenario", other.name()),
            };
            fleet.close().await;
            all_correct &= result?;
        }
    }
    if cli.wake_ups == crate::WakeUpsArg::Both && !settled.is_empty() {
        let median_of = |on: bool, pick: fn(&(bool, f64, f64)) -> f64| {
            let mut v: Vec<f64> = settled.iter().filter(|r| r.0 == on).map(pick).collect();
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
        };
        let (with, without) = (median_of(true, |r| r.1), median_of(false, |r| r.1));
        let (longest_with, longest_without) = (median_of(true, |r| r.2), median_of(false, |r| r.2));
        println!(
            "side by side, medians over {} runs each: the last outage confirm ended {with:.1} s after the upstream came back with wake-ups, {without:.1} s without; the longest confirm to terminal {longest_with:.1} s with, {longest_without:.1} s without",
            cli.repeat
        );
        println!(
            "{}",
            json!({"scenario": "outage wake-ups side by side", "runs": cli.repeat,
                   "settled_after_recovery_s_with": with, "settled_after_recovery_s_without": without,
                   "longest_confirm_to_terminal_s_with": longest_with,
                   "longest_confirm_to_terminal_s_without": longest_without})
        );
    }
    Ok(all_correct)
}

/// Several stacks on one store and one simulator.
struct Fleet {
    stacks: Vec<seatgate_local::Stack>,
    apis: Vec<String>,
    upstream: String,
    breaker: Arc<dyn BreakerStates>,
    dir: Option<PathBuf>,
    timing: Timing,
    kind: BackendKind,
    wake_ups: bool,
}

impl Fleet {
    async fn start(cli: &Cli, wake_ups: bool) -> anyhow::Result<Fleet> {
        let timing = timing_profile(cli).timing();
        let (first, dir) = match cli.backend {
            BackendKind::Embedded => {
                let dir =
                    std::env::temp_dir().join(format!("seatgate-bench-{}", uuid::Uuid::new_v4()));
                let config = RunnerConfig {
                    workers: cli.workers,
                    timing: timing.clone(),
                    wake_ups,
                    ..RunnerConfig::ephemeral(Some(dir.join("seatgate.sqlite3")))
                };
                (config, Some(dir))
            }
            BackendKind::Aws => (
                RunnerConfig {
                    workers: cli.workers,
                    timing: timing.clone(),
                    wake_ups,
                    ..RunnerConfig::ephemeral_aws("seatgate-bench")
                },
                None,
            ),
        };
        let stack0 = seatgate_local::start(first.clone()).await?;
        let upstream = stack0.upstream_url.clone();
        let breaker: Arc<dyn BreakerStates> = match &stack0.backend {
            Backend::Embedded(b) => Arc::new(b.clone()),
            Backend::Aws(a) => Arc::new(a.store.clone()),
        };
        let mut fleet = Fleet {
            apis: vec![stack0.api_url.clone()],
            stacks: vec![stack0],
            upstream: upstream.clone(),
            breaker,
            dir,
            timing,
            kind: cli.backend,
            wake_ups,
        };
        for _ in 1..cli.instances {
            let mut config = first.clone();
            config.upstream_url = Some(upstream.clone());
            if cli.backend == BackendKind::Aws {
                config.aws.create = false;
                config.role = Role::Api;
            }
            match seatgate_local::start(config).await {
                Ok(stack) => {
                    fleet.apis.push(stack.api_url.clone());
                    fleet.stacks.push(stack);
                }
                Err(e) => {
                    fleet.close().await;
                    return Err(e.context("starting another instance on the shared store"));
                }
            }
        }
        Ok(fleet)
    }

    fn api(&self, i: usize) -> &str {
        &self.apis[i % self.apis.len()]
    }

    /// Stops the extra instances (together), then the first (it runs the simulator), then
    /// removes the store.
    async fn close(mut self) {
        let first = self.stacks.remove(0);
        futures::future::join_all(self.stacks.into_iter().map(|s| s.shutdown())).await;
        let aws = first.backend.aws().cloned();
        first.shutdown().await;
        if let Some(aws) = aws
            && let Err(e) = aws.delete_resources().await
        {
            eprintln!("cleaning up the table and queues: {e:#}");
        }
        if let Some(dir) = self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn tag() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_owned()
}

fn mark(ok: bool) -> &'static str {
    if ok { "PASS" } else { "FAIL" }
}

/// A token with its upstream credential stored.
async fn member(
    client: &reqwest::Client,
    api: &str,
    sub: &str,
    credential: &str,
) -> anyhow::Result<String> {
    let token = dev_token(client, api, sub, false).await?;
    expect_status(
        client
            .put(format!("{api}/me/credential"))
            .bearer_auth(&token)
            .json(&json!({ "upstream_token": credential }))
            .send()
            .await?,
        reqwest::StatusCode::NO_CONTENT,
        "put credential",
    )
    .await?;
    Ok(token)
}

async fn upstream_stats(client: &reqwest::Client, upstream: &str) -> anyhow::Result<Value> {
    expect_status(
        client
            .get(format!("{upstream}/__admin/stats"))
            .send()
            .await?,
        reqwest::StatusCode::OK,
        "upstream stats",
    )
    .await
}

fn route_count(stats: &Value, route: &str) -> u64 {
    stats["calls"][route].as_u64().unwrap_or(0)
}

/// One upstream call as the simulator logged it.
#[derive(Debug, Clone)]
struct Call {
    at_ms: i64,
    route: String,
}

async fn calls_since(
    client: &reqwest::Client,
    upstream: &str,
    since_ms: i64,
) -> anyhow::Result<Vec<Call>> {
    let body = expect_status(
        client
            .get(format!(
                "{upstream}/__admin/calls?since_ms={}",
                since_ms.max(0)
            ))
            .send()
            .await?,
        reqwest::StatusCode::OK,
        "upstream call log",
    )
    .await?;
    body["calls"]
        .as_array()
        .context("calls array")?
        .iter()
        .map(|c| {
            Ok(Call {
                at_ms: c["at_ms"].as_i64().context("at_ms")?,
                route: c["route"].as_str().context("route")?.to_owned(),
            })
        })
        .collect()
}

async fn set_faults(client: &reqwest::Client, upstream: &str, faults: Value) -> anyhow::Result<()> {
    let resp = client
        .post(format!("{upstream}/__admin/faults"))
        .json(&faults)
        .send()
        .await?;
    ensure!(resp.status().is_success(), "set faults: {}", resp.status());
    Ok(())
}

async fn get_intent(
    client: &reqwest::Client,
    api: &str,
    token: &str,
    intent_id: &str,
) -> anyhow::Result<Result<Value, String>> {
    let resp = client
        .get(format!("{api}/intents/{intent_id}"))
        .bearer_auth(token)
        .send()
        .await?;
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    if status != reqwest::StatusCode::OK {
        return Ok(Err(format!("{status}: {text}")));
    }
    Ok(Ok(serde_json::from_str(&text).context("intent body")?))
}

fn status_of(intent: &Value) -> String {
    intent["status"].as_str().unwrap_or("?").to_owned()
}

fn is_terminal_status(s: &str) -> bool {
    TERMINAL.contains(&s)
}

fn tally_line(t: &BTreeMap<String, usize>) -> String {
    if t.is_empty() {
        return "none".into();
    }
    t.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn print_rows(title: &str, rows: &[(String, String, String, String)]) {
    println!();
    println!("{title}");
    println!("{:<46} {:>14}  {:<16} verdict", "metric", "value", "target");
    println!("{}", "-".repeat(86));
    for (name, value, target, verdict) in rows {
        println!("{name:<46} {value:>14}  {target:<16} {verdict}");
    }
    println!("{}", "-".repeat(86));
}

fn row(name: impl Into<String>, value: impl ToString) -> (String, String, String, String) {
    (name.into(), value.to_string(), String::new(), String::new())
}

fn target_row(
    name: impl Into<String>,
    value: impl ToString,
    target: impl Into<String>,
    ok: bool,
) -> (String, String, String, String) {
    (
        name.into(),
        value.to_string(),
        target.into(),
        mark(ok).into(),
    )
}

/// Upper bound on upstream reads of one key over `elapsed`: one per TTL window, plus one.
fn per_ttl_bound(elapsed: Duration, ttl: Duration) -> u64 {
    (elapsed.as_secs_f64() / ttl.as_secs_f64()).ceil() as u64 + 1
}

/// The most calls in any window of `width` ms, and the smallest gap between two calls.
fn call_spacing(times: &[i64], width: i64) -> (usize, Option<i64>) {
    let mut sorted = times.to_vec();
    sorted.sort_unstable();
    let mut most = 0;
    let mut j = 0;
    for i in 0..sorted.len() {
        while sorted[i] - sorted[j] >= width {
            j += 1;
        }
        most = most.max(i - j + 1);
    }
    let gap = sorted.windows(2).map(|w| w[1] - w[0]).min();
    (most, gap)
}

// ----------------------------------------------------------------------------------------------
// read-storm

#[derive(Default)]
struct ReadTally {
    latency_ms: Vec<f64>,
    fresh: usize,
    stale: usize,
    non_200: BTreeMap<String, usize>,
    examples: Vec<String>,
}

impl ReadTally {
    fn unexpected(&mut self, key: String, detail: String) {
        *self.non_200.entry(key).or_default() += 1;
        if self.examples.len() < 5 {
            self.examples.push(detail);
        }
    }

    fn merge(&mut self, other: ReadTally) {
        self.latency_ms.extend(other.latency_ms);
        self.fresh += other.fresh;
        self.stale += other.stale;
        for (k, v) in other.non_200 {
            *self.non_200.entry(k).or_default() += v;
        }
        for e in other.examples {
            if self.examples.len() < 5 {
                self.examples.push(e);
            }
        }
    }
}

async fn read_storm(cli: &Cli, fleet: &Fleet, client: &reqwest::Client) -> anyhow::Result<bool> {
    let count = cli.reads;
    ensure!(count >= 1, "--reads must be at least 1");
    let clients = cli.clients.clamp(1, count);
    let seat = format!("storm-{}", tag());
    let token = dev_token(client, fleet.api(0), "storm-reader", false).await?;
    let before = upstream_stats(client, &fleet.upstream).await?;
    let log_from = wall_ms() as i64;
    let spacing = cli.storm_for.as_secs_f64() / count as f64;
    eprintln!(
        "read-storm: {count} reads of {seat} over {:?} from {clients} clients on {} instances",
        cli.storm_for,
        fleet.apis.len()
    );
    let started = tokio::time::Instant::now();
    let t0 = Instant::now();
    let mut tasks = Vec::with_capacity(clients);
    for k in 0..clients {
        let client = client.clone();
        let url = format!("{}/seats/{seat}", fleet.api(k));
        let token = token.clone();
        tasks.push(tokio::spawn(async move {
            let mut tally = ReadTally::default();
            let mut i = k;
            while i < count {
                tokio::time::sleep_until(started + Duration::from_secs_f64(i as f64 * spacing))
                    .await;
                let sent = Instant::now();
                match client.get(&url).bearer_auth(&token).send().await {
                    Ok(resp) => {
                        let status = resp.status();
                        let text = resp.text().await.unwrap_or_default();
                        let ms = sent.elapsed().as_secs_f64() * 1000.0;
                        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                        if status == reqwest::StatusCode::OK && body["available"].is_boolean() {
                            tally.latency_ms.push(ms);
                            if body["stale"].as_bool() == Some(true) {
                                tally.stale += 1;
                            } else {
                                tally.fresh += 1;
                            }
                        } else {
                            tally.unexpected(
                                status.as_u16().to_string(),
                                format!("{status}: {text}"),
                            );
                        }
                    }
                    Err(e) => tally.unexpected("transport".into(), e.to_string()),
                }
                i += clients;
            }
            tally
        }));
    }
    let mut tally = ReadTally::default();
    for task in tasks {
        tally.merge(task.await?);
    }
    let elapsed = t0.elapsed();
    let after = upstream_stats(client, &fleet.upstream).await?;
    let upstream_calls = route_count(&after, "GET /api/seats")
        .saturating_sub(route_count(&before, "GET /api/seats"));
    let log: Vec<i64> = calls_since(client, &fleet.upstream, log_from)
        .await?
        .into_iter()
        .filter(|c| c.route == "GET /api/seats")
        .map(|c| c.at_ms)
        .collect();
    let ttl = fleet.timing.read_ttl;
    let (most_in_ttl, min_gap) = call_spacing(&log, ttl.as_millis() as i64);
    // The bound, ceil(duration / read_ttl) + 1, on the nominal duration unless the
    // storm overran it by more than 100 ms (a slow machine), then on the time it took.
    let nominal_bound = per_ttl_bound(cli.storm_for, ttl);
    let bound = if elapsed > cli.storm_for + Duration::from_millis(100) {
        per_ttl_bound(elapsed, ttl)
    } else {
        nominal_bound
    };
    let answered = tally.latency_ms.len();
    let non_200: usize = tally.non_200.values().sum();
    let p = percentiles(&tally.latency_ms);
    let ratio = answered as f64 / upstream_calls.max(1) as f64;
    let correct = upstream_calls <= bound && non_200 == 0;
    let embedded = fleet.kind == BackendKind::Embedded;
    let latency_ok = p.p95 < 5.0;
    for e in &tally.examples {
        eprintln!("unexpected read answer: {e}");
    }

    let rows = vec![
        row("reads sent", count),
        row(
            "storm wall time (s)",
            format!("{:.2}", elapsed.as_secs_f64()),
        ),
        row(
            "achieved rate (reads/s)",
            format!("{:.0}", count as f64 / elapsed.as_secs_f64()),
        ),
        target_row(
            "upstream GET /api/seats during the storm",
            upstream_calls,
            format!("<= {bound}"),
            upstream_calls <= bound,
        ),
        row(
            "  bound for the nominal duration",
            format!("<= {nominal_bound}"),
        ),
        row("  seed 000 figure", "~42"),
        row(
            "collapse ratio (reads / upstream call)",
            format!("{ratio:.0}"),
        ),
        row(
            format!("most upstream reads in any {} ms", ttl.as_millis()),
            most_in_ttl,
        ),
        row(
            "smallest gap between upstream reads (ms)",
            min_gap.map_or("-".into(), |g| g.to_string()),
        ),
        row("200 fresh", tally.fresh),
        row("200 stale", tally.stale),
        target_row(
            "non-200 answers",
            format!("{non_200} ({})", tally_line(&tally.non_200)),
            "= 0",
            non_200 == 0,
        ),
        row("read p50 (ms)", format!("{:.2}", p.p50)),
        if embedded {
            target_row("read p95 (ms)", format!("{:.2}", p.p95), "< 5", latency_ok)
        } else {
            row("read p95 (ms)", format!("{:.2}", p.p95))
        },
        row("read p99 (ms)", format!("{:.2}", p.p99)),
        row("read max (ms)", format!("{:.1}", p.max)),
    ];
    print_rows(
        &format!(
            "read-storm  instances={} reads={} over {:?} clients={} backend={:?} timing={:?}",
            fleet.apis.len(),
            count,
            cli.storm_for,
            clients,
            fleet.kind,
            timing_profile(cli)
        ),
        &rows,
    );
    println!(
        "correctness: {}   latency target (p95 < 5 ms, embedded): {}",
        mark(correct),
        if embedded { mark(latency_ok) } else { "n/a" }
    );
    let line = json!({
        "scenario": "read-storm",
        "backend": format!("{:?}", fleet.kind).to_lowercase(),
        "timing": format!("{:?}", timing_profile(cli)).to_lowercase(),
        "instances": fleet.apis.len(),
        "reads": count,
        "storm_ms": round(elapsed.as_secs_f64() * 1000.0),
        "clients": clients,
        "upstream_seat_reads": upstream_calls,
        "bound": bound,
        "collapse_ratio": round(ratio),
        "most_upstream_reads_in_ttl": most_in_ttl,
        "min_gap_ms": min_gap,
        "fresh": tally.fresh,
        "stale": tally.stale,
        "non_200": tally.non_200,
        "read_ms": pcts_json_fine(&p),
        "correct": correct,
        "latency_target_met": if embedded { Value::Bool(latency_ok) } else { Value::Null },
    });
    println!("{line}");
    Ok(correct)
}

fn pcts_json_fine(p: &Pcts) -> Value {
    let r = |x: f64| (x * 100.0).round() / 100.0;
    json!({ "p50": r(p.p50), "p95": r(p.p95), "p99": r(p.p99), "max": r(p.max) })
}

// ----------------------------------------------------------------------------------------------
// breaker timeline

/// A breaker state as first seen by the poller.
#[derive(Debug, Clone)]
struct Seen {
    seen_ms: f64,
    state: BreakerState,
}

struct BreakerPoller {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<(Vec<Seen>, usize)>,
}

impl BreakerPoller {
    fn start(store: Arc<dyn BreakerStates>, every: Duration) -> BreakerPoller {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let task = tokio::spawn(async move {
            let mut seen: Vec<Seen> = Vec::new();
            let mut errors = 0;
            while !flag.load(Ordering::Relaxed) {
                match store.breaker().await {
                    Ok(state) => {
                        if seen.last().is_none_or(|s| s.state != state) {
                            seen.push(Seen {
                                seen_ms: wall_ms(),
                                state,
                            });
                        }
                    }
                    Err(e) => {
                        errors += 1;
                        if errors <= 3 {
                            eprintln!("breaker poll failed: {e}");
                        }
                    }
                }
                tokio::time::sleep(every).await;
            }
            (seen, errors)
        });
        BreakerPoller { stop, task }
    }

    async fn finish(self) -> anyhow::Result<(Vec<Seen>, usize)> {
        self.stop.store(true, Ordering::Relaxed);
        Ok(self.task.await?)
    }
}

fn phase_name(p: &BreakerPhase) -> &'static str {
    match p {
        BreakerPhase::Closed => "Closed",
        BreakerPhase::Open { .. } => "Open",
        BreakerPhase::Probing { .. } => "Probing",
    }
}

/// One open phase laid over the call log.
#[derive(Debug, Clone)]
struct OpenPhase {
    generation: u64,
    /// Opened from closed (a failure rate) rather than by a failed probe.
    from_closed: bool,
    since: i64,
    until: i64,
    /// Calls arriving in the very millisecond the Open item was written.
    at_open_ms: usize,
    /// Calls after that and within the first `instance_cache_ttl`.
    first_cache_ttl: usize,
    /// Calls from `since + instance_cache_ttl` to `until` (exclusive).
    rest: usize,
    /// The half-open interval after it: from `until` to the next Open or Closed item.
    half_open: Option<HalfOpen>,
}

#[derive(Debug, Clone)]
struct HalfOpen {
    end: i64,
    /// The phase that ended it; `None` if the run ended first.
    ended_by: Option<&'static str>,
    /// Calls in [until, end).
    calls: usize,
    /// Calls in the millisecond `end` itself.
    at_end_ms: usize,
    /// Probing items seen in between (the poller may miss a short one).
    probing_seen: usize,
    /// The probes: calls in [until, end), plus those in `end`'s millisecond when a reopening
    /// ended it (nothing else can call then); when a close ended it and nothing came earlier,
    /// one call of that millisecond is the probe (the rest came after the close).
    probes: usize,
}

/// The target for a fresh outage: calls from its start to the breaker opening.
const ONSET_BOUND: usize = 10;

/// How long after a `Retry-After` was given a call counts as already on its way (decided
/// before anyone could know of it): a store write and a round trip, with room to spare.
const IN_FLIGHT_MS: u64 = 50;

fn calls_before_retry_after(
    calls: &[Call],
    from: i64,
    to: i64,
    retry_after_ms: i64,
) -> upstream_sim::judge::RetryAfterJudgement {
    let log: Vec<upstream_sim::CallRecord> = calls
        .iter()
        .map(|c| upstream_sim::CallRecord {
            at_ms: c.at_ms.max(0) as u64,
            route: c.route.clone(),
        })
        .collect();
    upstream_sim::judge::retry_after_respected(
        &log,
        from.max(0) as u64,
        to.max(0) as u64,
        retry_after_ms.max(0) as u64,
        IN_FLIGHT_MS,
    )
}

fn count_in(calls: &[Call], from: i64, to: i64) -> usize {
    calls
        .iter()
        .filter(|c| c.at_ms >= from && c.at_ms < to)
        .count()
}

fn open_phases(seen: &[Seen], calls: &[Call], cache_ttl: i64, run_end: i64) -> Vec<OpenPhase> {
    let mut phases = Vec::new();
    for (i, s) in seen.iter().enumerate() {
        let BreakerPhase::Open { until } = s.state.phase else {
            continue;
        };
        let (since, until) = (s.state.since.0, until.0);
        let from_closed = i == 0 || seen[i - 1].state.is_closed();
        let later = &seen[i + 1..];
        let end = later.iter().find(|n| {
            n.state.generation > s.state.generation
                && !matches!(n.state.phase, BreakerPhase::Probing { .. })
        });
        let probing_seen = later
            .iter()
            .take_while(|n| end.is_none_or(|e| n.state.generation < e.state.generation))
            .filter(|n| matches!(n.state.phase, BreakerPhase::Probing { .. }))
            .count();
        let (end_ms, ended_by) = match end {
            Some(e) => (e.state.since.0, Some(phase_name(&e.state.phase))),
            None => (run_end, None),
        };
        let half_calls = count_in(calls, until, end_ms);
        let at_end_ms = count_in(calls, end_ms, end_ms + 1);
        let probes = match ended_by {
            Some("Open") => half_calls + at_end_ms,
            Some(_) if half_calls == 0 => at_end_ms.min(1),
            _ => half_calls,
        };
        phases.push(OpenPhase {
            generation: s.state.generation,
            from_closed,
            since,
            until,
            at_open_ms: count_in(calls, since, since + 1),
            first_cache_ttl: count_in(calls, since + 1, (since + cache_ttl).min(until)),
            rest: count_in(calls, since + cache_ttl, until),
            half_open: Some(HalfOpen {
                end: end_ms,
                ended_by,
                calls: half_calls,
                at_end_ms,
                probing_seen,
                probes,
            }),
        });
    }
    phases
}

// ----------------------------------------------------------------------------------------------
// outage

#[derive(Debug, Clone)]
enum Slot {
    Read { seat: String, cold: bool },
    Confirm { user: usize },
}

#[derive(Debug, Clone)]
struct ReadAnswer {
    sent_ms: f64,
    status: u16,
    stale: bool,
    retry_after: bool,
    latency_ms: f64,
    detail: Option<String>,
    cold: bool,
}

#[derive(Debug, Clone)]
struct ConfirmAnswer {
    user: usize,
    sent_ms: f64,
    intent_id: Option<String>,
    error: Option<String>,
    latency_ms: f64,
}

struct Confirmer {
    token: String,
    seat: String,
    api: String,
}

async fn prepare_and_confirm(client: &reqwest::Client, c: &Confirmer) -> Result<String, String> {
    let prepared = client
        .post(format!("{}/actions", c.api))
        .bearer_auth(&c.token)
        .json(&json!({ "kind": "reserve_seat", "seat_id": c.seat }))
        .send()
        .await
        .map_err(|e| format!("prepare: {e}"))?;
    let status = prepared.status();
    let body = prepared.text().await.unwrap_or_default();
    if status != reqwest::StatusCode::CREATED {
        return Err(format!("prepare: {status}: {body}"));
    }
    let action: Value = serde_json::from_str(&body).map_err(|e| format!("prepare body: {e}"))?;
    let action_id = action["action_id"]
        .as_str()
        .ok_or("prepare: no action_id")?;
    let confirmed = client
        .post(format!("{}/actions/{action_id}/confirm", c.api))
        .bearer_auth(&c.token)
        .send()
        .await
        .map_err(|e| format!("confirm: {e}"))?;
    let status = confirmed.status();
    let body = confirmed.text().await.unwrap_or_default();
    if status != reqwest::StatusCode::ACCEPTED {
        return Err(format!("confirm: {status}: {body}"));
    }
    let v: Value = serde_json::from_str(&body).map_err(|e| format!("confirm body: {e}"))?;
    v["intent_id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| "confirm: no intent_id".to_owned())
}

async fn read_seat(
    client: &reqwest::Client,
    url: &str,
    token: &str,
) -> (u16, bool, bool, Option<String>) {
    match client.get(url).bearer_auth(token).send().await {
        Ok(resp) => {
            let status = resp.status();
            let retry_after = resp.headers().contains_key(reqwest::header::RETRY_AFTER);
            let text = resp.text().await.unwrap_or_default();
            let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            match status.as_u16() {
                200 if body["available"].is_boolean() => {
                    (200, body["stale"].as_bool() == Some(true), false, None)
                }
                503 if body["error"] == "upstream_unavailable" => (503, false, retry_after, None),
                s => (s, false, retry_after, Some(format!("{status}: {text}"))),
            }
        }
        Err(e) => (0, false, false, Some(format!("transport: {e}"))),
    }
}

/// Statuses of `confirms`' intents: tally, and the ones not readable.
async fn sweep(
    client: &reqwest::Client,
    confirms: &[(String, String, String)],
    limit: usize,
) -> anyhow::Result<(BTreeMap<String, usize>, Vec<String>, Vec<usize>)> {
    let indexed: Vec<(usize, (String, String, String))> =
        confirms.iter().cloned().enumerate().collect();
    let answers = for_each(indexed, limit, |(i, (api, token, id))| {
        let client = client.clone();
        async move { Ok((i, get_intent(&client, &api, &token, &id).await?)) }
    })
    .await?;
    let mut tally = BTreeMap::new();
    let mut lost = Vec::new();
    let mut open = Vec::new();
    for (i, a) in answers {
        match a {
            Ok(intent) => {
                let s = status_of(&intent);
                if !is_terminal_status(&s) {
                    open.push(i);
                }
                *tally.entry(s).or_default() += 1;
            }
            Err(why) => {
                lost.push(format!("{}: {why}", confirms[i].2));
                *tally.entry("UNREADABLE".into()).or_default() += 1;
            }
        }
    }
    Ok((tally, lost, open))
}

/// Each of `confirms`' terminal write (`updated_at`, server clock, ms), in order; `None` where
/// it is not terminal or not readable. Read once the final sweep found them all terminal.
async fn terminal_writes_ms(
    client: &reqwest::Client,
    confirms: &[(String, String, String)],
    limit: usize,
) -> anyhow::Result<Vec<Option<f64>>> {
    let indexed: Vec<(usize, (String, String, String))> =
        confirms.iter().cloned().enumerate().collect();
    let mut answers = for_each(indexed, limit, |(i, (api, token, id))| {
        let client = client.clone();
        async move { Ok((i, get_intent(&client, &api, &token, &id).await?)) }
    })
    .await?;
    answers.sort_by_key(|(i, _)| *i);
    Ok(answers
        .iter()
        .map(|(_, a)| {
            a.as_ref()
                .ok()
                .filter(|i| is_terminal_status(&status_of(i)))
                .and_then(|i| i["updated_at"].as_str().and_then(super::rfc3339_ms))
        })
        .collect())
}

/// The outage scenario; `Ok((correct, after, longest))`: the seconds from the upstream's
/// recovery to the terminal write (its `updated_at`) of the last confirm sent during the
/// outage, and the longest any confirm took from its send to its terminal write.
async fn outage(
    cli: &Cli,
    fleet: &Fleet,
    client: &reqwest::Client,
) -> anyhow::Result<(bool, f64, f64)> {
    let rate = cli.rate.unwrap_or(25.0);
    ensure!(rate > 0.0, "--rate must be positive");
    let tag = tag();
    let timing = fleet.timing.clone();
    let total = (rate * cli.load_for.as_secs_f64()).round() as usize;
    let share = cli.confirm_share.clamp(0.0, 1.0);
    let cold_share = cli.cold_read_share.clamp(0.0, 1.0);
    let spread =
        |i: usize, share: f64| ((i + 1) as f64 * share).floor() > (i as f64 * share).floor();
    let mut slots = Vec::with_capacity(total);
    let (mut users, mut reads) = (0, 0);
    for i in 0..total {
        if spread(i, share) {
            slots.push(Slot::Confirm { user: users });
            users += 1;
        } else {
            let cold = spread(reads, cold_share);
            let seat = if cold {
                format!("cold-{tag}-{reads}")
            } else {
                format!("warm-{tag}-{}", reads % cli.read_seats.max(1))
            };
            slots.push(Slot::Read { seat, cold });
            reads += 1;
        }
    }
    eprintln!(
        "outage: {total} requests at {}/s over {:?} ({users} confirms, {reads} reads), upstream down from {:?} for {:?}",
        rate, cli.load_for, cli.outage_at, cli.outage_for
    );

    // Set-up: users with credentials, each on its own seat, and warm readings.
    let names: Vec<(String, String)> = (0..users)
        .map(|c| (format!("bench-{tag}-c{c}"), format!("cred-{tag}-c{c}")))
        .collect();
    register_upstream(client, &fleet.upstream, &names).await?;
    let fleet_ref = fleet;
    let tag_ref = &tag;
    let confirmers: Vec<Confirmer> = for_each(
        names.into_iter().enumerate().collect(),
        cli.setup_concurrency,
        |(c, (sub, cred))| async move {
            let api = fleet_ref.api(c).to_owned();
            let token = member(client, &api, &sub, &cred).await?;
            Ok(Confirmer {
                token,
                seat: format!("conf-{tag_ref}-{c}"),
                api,
            })
        },
    )
    .await?;
    let confirmers = Arc::new(confirmers);
    let reader = dev_token(client, fleet.api(0), "outage-reader", false).await?;
    for s in 0..cli.read_seats.max(1) {
        let url = format!("{}/seats/warm-{tag}-{s}", fleet.api(s));
        let (status, _, _, detail) = read_seat(client, &url, &reader).await;
        ensure!(status == 200, "warm read: {detail:?}");
    }

    let poller = BreakerPoller::start(Arc::clone(&fleet.breaker), cli.breaker_poll);
    let t0 = tokio::time::Instant::now();
    let t0_wall = wall_ms();
    let log_from = t0_wall as i64 - 1;

    // The outage, on schedule.
    let fault_task = {
        let client = client.clone();
        let upstream = fleet.upstream.clone();
        let (at, outage_for) = (cli.outage_at, cli.outage_for);
        let retry_after = cli.outage_retry_after;
        tokio::spawn(async move {
            tokio::time::sleep_until(t0 + at).await;
            let sent = wall_ms();
            set_faults(
                &client,
                &upstream,
                json!({
                    "outage_for_ms": outage_for.as_millis() as u64,
                    "outage_retry_after_secs": retry_after,
                }),
            )
            .await?;
            Ok::<_, anyhow::Error>((sent, wall_ms()))
        })
    };

    // The snapshot at recovery + 5 s + one open interval.
    let confirmed: Arc<Mutex<Vec<ConfirmAnswer>>> = Arc::new(Mutex::new(Vec::new()));
    let snapshot_task = {
        let client = client.clone();
        let confirmed = Arc::clone(&confirmed);
        let confirmers = Arc::clone(&confirmers);
        let outage_for = cli.outage_for.as_secs_f64() * 1000.0;
        let extra = 5_000.0 + timing.breaker_open_interval.as_secs_f64() * 1000.0;
        let limit = cli.setup_concurrency;
        tokio::spawn(async move {
            let (fault_sent, _) = fault_task.await??;
            let recovery = fault_sent + outage_for;
            let at = recovery + extra;
            let wait = (at - wall_ms()).max(0.0);
            tokio::time::sleep(Duration::from_secs_f64(wait / 1000.0)).await;
            let during: Vec<(String, String, String)> = confirmed
                .lock()
                .expect("confirm log")
                .iter()
                .filter(|c| c.sent_ms >= fault_sent && c.sent_ms < recovery)
                .filter_map(|c| {
                    c.intent_id.as_ref().map(|id| {
                        let who = &confirmers[c.user];
                        (who.api.clone(), who.token.clone(), id.clone())
                    })
                })
                .collect();
            let taken_at = wall_ms();
            let (tally, lost, _) = sweep(&client, &during, limit).await?;
            Ok::<_, anyhow::Error>((fault_sent, recovery, taken_at, during.len(), tally, lost))
        })
    };

    // The load: open model, each request on its own task at its scheduled time.
    let semaphore = Arc::new(tokio::sync::Semaphore::new(
        cli.max_in_flight.unwrap_or(128).max(1),
    ));
    let mut read_tasks = Vec::new();
    let mut confirm_tasks = Vec::new();
    let mut late_ms: f64 = 0.0;
    for (i, slot) in slots.into_iter().enumerate() {
        let due = t0 + Duration::from_secs_f64(i as f64 / rate);
        tokio::time::sleep_until(due).await;
        late_ms = late_ms.max(
            tokio::time::Instant::now()
                .duration_since(due)
                .as_secs_f64()
                * 1000.0,
        );
        let client = client.clone();
        let semaphore = Arc::clone(&semaphore);
        match slot {
            Slot::Read { seat, cold } => {
                let url = format!("{}/seats/{seat}", fleet.api(i));
                let token = reader.clone();
                read_tasks.push(tokio::spawn(async move {
                    let _permit = semaphore.acquire_owned().await.expect("semaphore");
                    let sent_ms = wall_ms();
                    let started = Instant::now();
                    let (status, stale, retry_after, detail) =
                        read_seat(&client, &url, &token).await;
                    ReadAnswer {
                        sent_ms,
                        status,
                        stale,
                        retry_after,
                        latency_ms: started.elapsed().as_secs_f64() * 1000.0,
                        detail,
                        cold,
                    }
                }));
            }
            Slot::Confirm { user } => {
                let confirmers = Arc::clone(&confirmers);
                let confirmed = Arc::clone(&confirmed);
                confirm_tasks.push(tokio::spawn(async move {
                    let _permit = semaphore.acquire_owned().await.expect("semaphore");
                    let sent_ms = wall_ms();
                    let started = Instant::now();
                    let outcome = prepare_and_confirm(&client, &confirmers[user]).await;
                    let answer = ConfirmAnswer {
                        user,
                        sent_ms,
                        latency_ms: started.elapsed().as_secs_f64() * 1000.0,
                        intent_id: outcome.as_ref().ok().cloned(),
                        error: outcome.err(),
                    };
                    confirmed.lock().expect("confirm log").push(answer.clone());
                    answer
                }));
            }
        }
    }
    let mut read_answers = Vec::with_capacity(read_tasks.len());
    for t in read_tasks {
        read_answers.push(t.await?);
    }
    let mut confirm_answers = Vec::with_capacity(confirm_tasks.len());
    for t in confirm_tasks {
        confirm_answers.push(t.await?);
    }
    let load_end = wall_ms();
    eprintln!(
        "outage: load done in {:.1} s (latest start {:.0} ms behind schedule); waiting for the snapshot",
        (load_end - t0_wall) / 1000.0,
        late_ms
    );
    let (fault_sent, recovery, snapshot_at, snapshot_n, snapshot, snapshot_lost) =
        snapshot_task.await??;

    // Final settle: until every confirmed intent is terminal, bounded.
    let accepted: Vec<&ConfirmAnswer> = confirm_answers
        .iter()
        .filter(|c| c.intent_id.is_some())
        .collect();
    let all: Vec<(String, String, String)> = accepted
        .iter()
        .filter_map(|c| {
            c.intent_id.as_ref().map(|id| {
                let who = &confirmers[c.user];
                (who.api.clone(), who.token.clone(), id.clone())
            })
        })
        .collect();
    let settle_from = Instant::now();
    let (mut final_tally, mut final_lost, mut open) =
        sweep(client, &all, cli.setup_concurrency).await?;
    while !open.is_empty() && settle_from.elapsed() < cli.settle_timeout {
        tokio::time::sleep(Duration::from_secs(1)).await;
        (final_tally, final_lost, open) = sweep(client, &all, cli.setup_concurrency).await?;
    }
    let settled_wall = wall_ms();
    // From each confirm's own terminal write (not when the sweep, which starts after the
    // load, saw it): the last of those sent during the outage, after the upstream came back;
    // and the longest any confirm took.
    let ended = terminal_writes_ms(client, &all, cli.setup_concurrency).await?;
    let after_recovery_s = accepted
        .iter()
        .zip(&ended)
        .filter(|(c, _)| c.sent_ms >= fault_sent && c.sent_ms < recovery)
        .filter_map(|(_, e)| *e)
        .reduce(f64::max)
        .map_or(f64::NAN, |last| (last - recovery) / 1000.0);
    let longest_s = accepted
        .iter()
        .zip(&ended)
        .filter_map(|(c, e)| e.map(|e| (e - c.sent_ms) / 1000.0))
        .reduce(f64::max)
        .unwrap_or(f64::NAN);
    // A little past the last phase change, so the closing probe's neighbours are in the log.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (seen, poll_errors) = poller.finish().await?;
    let calls = calls_since(client, &fleet.upstream, log_from).await?;
    let run_end = wall_ms() as i64;

    // Analysis.
    let cache_ttl = timing.instance_cache_ttl.as_millis() as i64;
    let phases = open_phases(&seen, &calls, cache_ttl, run_end);
    let openings = phases.iter().filter(|p| p.from_closed).count();
    let rel = |ms: f64| (ms - t0_wall) / 1000.0;
    println!();
    println!(
        "breaker timeline (t = s since load start; outage set at t={:.3}, upstream back at t={:.3}; {} states seen, {} poll errors):",
        rel(fault_sent),
        rel(recovery),
        seen.len(),
        poll_errors
    );
    for s in &seen {
        let detail = match &s.state.phase {
            BreakerPhase::Closed => String::new(),
            BreakerPhase::Open { until } => format!(" until t={:.3}", rel(until.0 as f64)),
            BreakerPhase::Probing { holder, until } => {
                format!(" holder {holder} lease until t={:.3}", rel(until.0 as f64))
            }
        };
        println!(
            "  gen {:>3} {:<8} since t={:>8} (seen t={:.3}){detail}",
            s.state.generation,
            phase_name(&s.state.phase),
            if s.state.since.0 == 0 {
                "-".to_owned()
            } else {
                format!("{:.3}", rel(s.state.since.0 as f64))
            },
            rel(s.seen_ms)
        );
    }
    let gaps: Vec<u64> = seen
        .windows(2)
        .filter(|w| w[1].state.generation > w[0].state.generation + 1)
        .map(|w| w[0].state.generation + 1)
        .collect();
    if !gaps.is_empty() {
        println!("  (generations not seen by the poller, each a short phase: from {gaps:?})");
    }
    println!();
    println!("per open phase (calls = every /api call the simulator logged, refused ones too):");
    println!(
        "  {:>3} {:<9} {:>8} {:>8} {:>7} {:>9} {:>6} | half-open to {:>8} {:<7} {:>6} {:>8} {:>7}",
        "gen",
        "kind",
        "since",
        "until",
        "at-ms",
        "1st-ttl",
        "rest",
        "end",
        "by",
        "calls",
        "@end-ms",
        "probes"
    );
    for p in &phases {
        let h = p.half_open.as_ref().expect("set");
        println!(
            "  {:>3} {:<9} {:>8.3} {:>8.3} {:>7} {:>9} {:>6} | {:>21.3} {:<7} {:>6} {:>8} {:>7}{}",
            p.generation,
            if p.from_closed { "opened" } else { "reopened" },
            rel(p.since as f64),
            rel(p.until as f64),
            p.at_open_ms,
            p.first_cache_ttl,
            p.rest,
            rel(h.end as f64),
            h.ended_by.unwrap_or("run end"),
            h.calls,
            h.at_end_ms,
            h.probes,
            if h.probing_seen == 0 {
                "  (probing not seen)"
            } else {
                ""
            }
        );
    }
    // Call log excerpts around each transition, for the record.
    let excerpt = |from: i64, to: i64| -> String {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for c in calls.iter().filter(|c| c.at_ms >= from && c.at_ms < to) {
            *counts.entry(c.route.as_str()).or_default() += 1;
        }
        counts
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let first_open = phases.iter().find(|p| p.from_closed).map(|p| p.since);
    let calls_outage_before_open = first_open.map_or(0, |o| count_in(&calls, fault_sent as i64, o));
    let outage_end = fault_sent as i64 + cli.outage_for.as_millis() as i64;
    let early_calls = (cli.outage_retry_after > 0).then(|| {
        calls_before_retry_after(
            &calls,
            fault_sent as i64,
            outage_end,
            cli.outage_retry_after as i64 * 1000,
        )
    });
    let calls_open_total: usize = phases
        .iter()
        .map(|p| p.at_open_ms + p.first_cache_ttl + p.rest)
        .sum();
    let calls_rest_total: usize = phases.iter().map(|p| p.rest).sum();
    // After a reopening, a call in the very millisecond of the Open write is the failed probe
    // (counted as the previous half-open interval's probe); anything later is not.
    let reopen_first_ttl: usize = phases
        .iter()
        .filter(|p| !p.from_closed)
        .map(|p| p.first_cache_ttl)
        .sum();
    let initial_first_ttl: usize = phases
        .iter()
        .filter(|p| p.from_closed)
        .map(|p| p.at_open_ms + p.first_cache_ttl)
        .sum();
    let complete_half_opens: Vec<&HalfOpen> = phases
        .iter()
        .filter_map(|p| p.half_open.as_ref())
        .filter(|h| h.ended_by.is_some())
        .collect();
    let probes: Vec<usize> = complete_half_opens.iter().map(|h| h.probes).collect();
    let one_probe_each = !probes.is_empty() && probes.iter().all(|&n| n == 1);
    // With a Retry-After on the outage's answers the routes are held and the breaker need not
    // open at all: then there is no half-open interval to judge.
    let probes_ok = one_probe_each || (phases.is_empty() && cli.outage_retry_after > 0);
    if let Some(o) = first_open {
        println!(
            "calls from the outage's start to the first opening (t={:.3}..{:.3}): {}",
            rel(fault_sent),
            rel(o as f64),
            excerpt(fault_sent as i64, o)
        );
        println!(
            "calls in the first {cache_ttl} ms after it: {}",
            excerpt(o, o + cache_ttl)
        );
    }
    for p in phases
        .iter()
        .filter(|p| p.rest > 0 || (!p.from_closed && p.first_cache_ttl > 0))
    {
        println!(
            "gen {} open: calls {}",
            p.generation,
            excerpt(p.since, p.until)
        );
    }

    // Reads by status and period.
    let period = |ms: f64| {
        if ms < fault_sent {
            "before"
        } else if ms < recovery {
            "outage"
        } else {
            "after"
        }
    };
    let mut reads_by: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    let mut unexpected: Vec<String> = Vec::new();
    let mut missing_retry_after = 0;
    for r in &read_answers {
        let kind = match (r.status, r.stale) {
            (200, false) => "200 fresh",
            (200, true) => "200 stale",
            (503, _) => {
                if !r.retry_after {
                    missing_retry_after += 1;
                }
                "503"
            }
            _ => {
                unexpected.push(r.detail.clone().unwrap_or_else(|| r.status.to_string()));
                "other"
            }
        };
        *reads_by.entry((kind, period(r.sent_ms))).or_default() += 1;
        if r.cold && r.status == 200 && period(r.sent_ms) == "outage" {
            *reads_by.entry(("(cold seat 200)", "outage")).or_default() += 1;
        }
    }
    let read_lat = percentiles(
        &read_answers
            .iter()
            .map(|r| r.latency_ms)
            .collect::<Vec<_>>(),
    );
    let confirm_errors: Vec<&String> = confirm_answers
        .iter()
        .filter_map(|c| c.error.as_ref())
        .collect();
    for e in confirm_errors.iter().take(5) {
        eprintln!("confirm failed: {e}");
    }
    for e in unexpected.iter().take(5) {
        eprintln!("unexpected read answer: {e}");
    }
    let confirm_lat = percentiles(
        &confirm_answers
            .iter()
            .map(|c| c.latency_ms)
            .collect::<Vec<_>>(),
    );
    let arrived_open: usize = read_answers
        .iter()
        .map(|r| r.sent_ms)
        .chain(confirm_answers.iter().map(|c| c.sent_ms))
        .filter(|&t| {
            phases
                .iter()
                .any(|p| t >= p.since as f64 && t < p.until as f64)
        })
        .count();
    let open_ms: i64 = phases.iter().map(|p| p.until - p.since).sum();

    let snapshot_bad: usize = snapshot
        .iter()
        .filter(|(s, _)| !(is_terminal_status(s) || s.as_str() == "REQUESTED"))
        .map(|(_, n)| *n)
        .sum();
    let failed_upstream = final_tally.get("FAILED_UPSTREAM").copied().unwrap_or(0);
    let snapshot_failed_upstream = snapshot.get("FAILED_UPSTREAM").copied().unwrap_or(0);
    let not_terminal_final: usize = open.len();

    let mut why = Vec::new();
    if calls_rest_total > 0 {
        why.push(format!(
            "{calls_rest_total} upstream calls while open (after the first {cache_ttl} ms)"
        ));
    }
    if reopen_first_ttl > 0 {
        why.push(format!(
            "{reopen_first_ttl} upstream calls right after a reopening"
        ));
    }
    // With a Retry-After on the outage's answers the breaker need not open at all.
    if !probes_ok {
        why.push(format!(
            "probes per half-open interval {probes:?}, not all 1"
        ));
    }
    // With a Retry-After on the outage's answers the routes are held instead: not a failure.
    if phases.is_empty() && cli.outage_retry_after == 0 {
        why.push("the breaker never opened".into());
    }
    if cli.outage_retry_after == 0 && calls_outage_before_open > ONSET_BOUND {
        why.push(format!(
            "{calls_outage_before_open} upstream calls from the outage's start to the breaker opening (> {ONSET_BOUND})"
        ));
    }
    if let Some(j) = early_calls.filter(|j| j.early > 0) {
        why.push(format!(
            "{} upstream calls before a Retry-After had passed",
            j.early
        ));
    }
    if snapshot_bad > 0 {
        why.push(format!(
            "{snapshot_bad} outage intents neither terminal nor REQUESTED at recovery + 5 s + one open interval"
        ));
    }
    if failed_upstream > 0 || snapshot_failed_upstream > 0 {
        why.push(format!("{failed_upstream} FAILED_UPSTREAM"));
    }
    if !snapshot_lost.is_empty() || !final_lost.is_empty() {
        why.push(format!(
            "{} intents unreadable (lost)",
            snapshot_lost.len().max(final_lost.len())
        ));
    }
    if !confirm_errors.is_empty() {
        why.push(format!("{} confirms not accepted", confirm_errors.len()));
    }
    if !unexpected.is_empty() {
        why.push(format!("{} unexpected read answers", unexpected.len()));
    }
    if missing_retry_after > 0 {
        why.push(format!(
            "{missing_retry_after} 503 reads without Retry-After"
        ));
    }
    for w in &why {
        eprintln!("FAIL: {w}");
    }
    let correct = why.is_empty();

    let reads_line = |period: &str| {
        ["200 fresh", "200 stale", "503", "other"]
            .iter()
            .map(|k| format!("{k}={}", reads_by.get(&(*k, period)).copied().unwrap_or(0)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let rows = vec![
        row(
            "requests sent (reads + confirms)",
            format!(
                "{} ({} + {})",
                read_answers.len() + confirm_answers.len(),
                read_answers.len(),
                confirm_answers.len()
            ),
        ),
        row(
            "breaker open in total (s)",
            format!("{:.1}", open_ms as f64 / 1000.0),
        ),
        row("requests arriving while open", arrived_open),
        row(
            "  seed 000 (~40 s open at 25 RPS)",
            "~1,000 arrived, 0 upstream",
        ),
        row("breaker openings (from closed)", openings),
        row("open phases (openings + reopenings)", phases.len()),
        target_row(
            "upstream calls, outage start -> first opening",
            calls_outage_before_open,
            format!("<= {ONSET_BOUND}"),
            calls_outage_before_open <= ONSET_BOUND || cli.outage_retry_after > 0,
        ),
        target_row(
            "upstream calls before a Retry-After passed",
            early_calls.map_or("n/a (no Retry-After)".to_owned(), |j| {
                format!("{} (+{} in flight when given)", j.early, j.in_flight)
            }),
            format!("= 0 (after {IN_FLIGHT_MS} ms)"),
            early_calls.is_none_or(|j| j.early == 0),
        ),
        row(
            format!("upstream calls, opening ms + first {cache_ttl} ms"),
            format!("{initial_first_ttl} (excluded)"),
        ),
        target_row(
            format!("upstream calls 1..{cache_ttl} ms after a reopening"),
            reopen_first_ttl,
            "= 0",
            reopen_first_ttl == 0,
        ),
        target_row(
            format!("upstream calls while open, after {cache_ttl} ms"),
            calls_rest_total,
            "= 0",
            calls_rest_total == 0,
        ),
        row("upstream calls while open, strictly", calls_open_total),
        target_row(
            "probes per complete half-open interval",
            format!("{probes:?}"),
            "all = 1",
            probes_ok,
        ),
        row("reads before outage", reads_line("before")),
        row("reads during outage", reads_line("outage")),
        row("reads after recovery", reads_line("after")),
        row(
            "read latency p50/p95/p99 (ms)",
            format!(
                "{:.1}/{:.1}/{:.1}",
                read_lat.p50, read_lat.p95, read_lat.p99
            ),
        ),
        row(
            "prepare+confirm latency p50/p95/p99 (ms)",
            format!(
                "{:.1}/{:.1}/{:.1}",
                confirm_lat.p50, confirm_lat.p95, confirm_lat.p99
            ),
        ),
        target_row(
            format!(
                "outage confirms at t={:.1} ({snapshot_n})",
                rel(snapshot_at)
            ),
            tally_line(&snapshot),
            "terminal|REQ",
            snapshot_bad == 0 && snapshot_lost.is_empty(),
        ),
        target_row(
            format!("all confirms at the end ({})", all.len()),
            tally_line(&final_tally),
            "no F_UPSTREAM",
            failed_upstream == 0 && final_lost.is_empty(),
        ),
        row("  not terminal at the end", not_terminal_final),
        row("  settled at t (s)", format!("{:.1}", rel(settled_wall))),
        row(
            "  last outage confirm ended, after the upstream came back (s)",
            format!("{after_recovery_s:.1}"),
        ),
        row(
            "  longest confirm to terminal, any confirm (s)",
            format!("{longest_s:.1}"),
        ),
    ];
    print_rows(
        &format!(
            "outage  instances={} rate={}/s for {:?} outage {:?}+{:?} backend={:?} timing={:?}",
            fleet.apis.len(),
            rate,
            cli.load_for,
            cli.outage_at,
            cli.outage_for,
            fleet.kind,
            timing_profile(cli)
        ),
        &rows,
    );
    println!("correctness: {}", mark(correct));
    let reads_json: BTreeMap<String, usize> = reads_by
        .iter()
        .map(|((k, p), v)| (format!("{p} {k}"), *v))
        .collect();
    let line = json!({
        "scenario": "outage",
        "backend": format!("{:?}", fleet.kind).to_lowercase(),
        "timing": format!("{:?}", timing_profile(cli)).to_lowercase(),
        "instances": fleet.apis.len(),
        "rate": rate,
        "load_ms": cli.load_for.as_millis() as u64,
        "outage_from_ms": round(fault_sent - t0_wall),
        "outage_for_ms": cli.outage_for.as_millis() as u64,
        "requests": read_answers.len() + confirm_answers.len(),
        "arrived_while_open": arrived_open,
        "open_ms": open_ms,
        "openings": openings,
        "open_phases": phases.len(),
        "calls_outage_to_first_open": calls_outage_before_open,
        "outage_retry_after_s": cli.outage_retry_after,
        "calls_before_retry_after": early_calls.map(|j| j.early),
        "calls_in_flight_when_retry_after_given": early_calls.map(|j| j.in_flight),
        "calls_first_cache_ttl_initial": initial_first_ttl,
        "calls_first_cache_ttl_reopen": reopen_first_ttl,
        "calls_while_open_after_cache_ttl": calls_rest_total,
        "calls_while_open_strict": calls_open_total,
        "probes_per_half_open": probes,
        "reads": reads_json,
        "read_ms": pcts_json(&read_lat),
        "snapshot_at_s": round(rel(snapshot_at)),
        "snapshot": snapshot,
        "final": final_tally,
        "not_terminal": not_terminal_final,
        "settled_after_recovery_s": after_recovery_s,
        "longest_confirm_to_terminal_s": longest_s,
        "wake_ups": fleet.wake_ups,
        "correct": correct,
        "failures": why,
    });
    println!("{line}");
    Ok((correct, after_recovery_s, longest_s))
}

// ----------------------------------------------------------------------------------------------
// waiters

async fn waiters(cli: &Cli, fleet: &Fleet, client: &reqwest::Client) -> anyhow::Result<bool> {
    let tag = tag();
    let n = cli.waiters;
    ensure!(n >= 1, "--waiters must be at least 1");
    let timing = fleet.timing.clone();
    let seat = format!("wanted-{tag}");
    let holder = (format!("bench-{tag}-u0"), format!("cred-{tag}-u0"));
    let names: Vec<(String, String)> = (1..=n)
        .map(|i| (format!("bench-{tag}-w{i}"), format!("cred-{tag}-w{i}")))
        .collect();
    let mut everyone = vec![holder.clone()];
    everyone.extend(names.iter().cloned());
    register_upstream(client, &fleet.upstream, &everyone).await?;

    // u0 takes the seat through the system.
    let u0 = member(client, fleet.api(0), &holder.0, &holder.1).await?;
    let c = Confirmer {
        token: u0.clone(),
        seat: seat.clone(),
        api: fleet.api(0).to_owned(),
    };
    let u0_intent = prepare_and_confirm(client, &c)
        .await
        .map_err(|e| anyhow::anyhow!("u0: {e}"))?;
    let deadline = Instant::now() + cli.settle_timeout;
    loop {
        match get_intent(client, fleet.api(0), &u0, &u0_intent).await? {
            Ok(i) if status_of(&i) == "SUCCEEDED" => break,
            Ok(i) if is_terminal_status(&status_of(&i)) => {
                bail!("u0's reservation ended {}", status_of(&i))
            }
            Ok(_) => {}
            Err(why) => bail!("u0's intent: {why}"),
        }
        ensure!(
            Instant::now() < deadline,
            "u0's reservation not done in time"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("waiters: u0 holds {seat}; setting up {n} waiters");

    let fleet_ref = fleet;
    let members: Vec<(String, String)> = for_each(
        names.into_iter().enumerate().collect(),
        cli.setup_concurrency,
        |(i, (sub, cred))| async move {
            let api = fleet_ref.api(i).to_owned();
            let token = member(client, &api, &sub, &cred).await?;
            Ok((api, token))
        },
    )
    .await?;

    let before = upstream_stats(client, &fleet.upstream).await?;
    let phase_start = wall_ms();
    let until = time::OffsetDateTime::now_utc() + cli.wait_deadline;
    let until = until
        .format(&time::format_description::well_known::Rfc3339)
        .context("formatting until")?;
    let seat_ref = &seat;
    let until_ref = &until;
    let waits: Vec<(String, String, String)> =
        for_each(members, cli.setup_concurrency, |(api, token)| async move {
            let body = expect_status(
                client
                    .post(format!("{api}/waits"))
                    .bearer_auth(&token)
                    .json(&json!({ "seat_id": seat_ref, "until": until_ref }))
                    .send()
                    .await?,
                reqwest::StatusCode::ACCEPTED,
                "register wait",
            )
            .await?;
            ensure!(
                body["status"] == "WAITING_FOR_SEAT",
                "wait registered as {}",
                body["status"]
            );
            let id = body["intent_id"].as_str().context("intent id")?.to_owned();
            Ok((api, token, id))
        })
        .await?;
    let registered = wall_ms();
    eprintln!(
        "waiters: {n} waits registered in {:.1} s; holding the seat {:?} more",
        (registered - phase_start) / 1000.0,
        cli.hold_for
    );
    tokio::time::sleep(cli.hold_for).await;

    // The release, upstream, as u0 leaving.
    let mid = upstream_stats(client, &fleet.upstream).await?;
    let release = wall_ms();
    let resp = client
        .delete(format!("{}/api/reservations/current", fleet.upstream))
        .bearer_auth(&holder.1)
        .send()
        .await?;
    ensure!(
        resp.status() == reqwest::StatusCode::NO_CONTENT,
        "release: {}",
        resp.status()
    );

    // First waiter SUCCEEDED: watch the reserve count, then look for the winner.
    let posts_mid = route_count(&mid, "POST /api/reservations");
    let watch_until = Instant::now() + cli.settle_timeout;
    let mut winner: Option<(String, f64)> = None;
    let mut sweeps_tally: BTreeMap<String, usize> = BTreeMap::new();
    while winner.is_none() && Instant::now() < watch_until {
        let stats = upstream_stats(client, &fleet.upstream).await?;
        if route_count(&stats, "POST /api/reservations") > posts_mid {
            let found = for_each(waits.iter().collect(), 64, |(api, token, id)| async move {
                Ok((id.clone(), get_intent(client, api, token, id).await?))
            })
            .await?;
            sweeps_tally.clear();
            for (id, intent) in found {
                let intent = intent.map_err(|e| anyhow::anyhow!("wait {id}: {e}"))?;
                let s = status_of(&intent);
                if s == "SUCCEEDED" {
                    let at = intent["updated_at"]
                        .as_str()
                        .and_then(super::rfc3339_ms)
                        .context("updated_at")?;
                    if winner.as_ref().is_none_or(|(_, t)| at < *t) {
                        winner = Some((id.clone(), at));
                    }
                }
                *sweeps_tally.entry(s).or_default() += 1;
            }
            if winner.is_none() {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        } else {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let first_success_ms = winner.as_ref().map(|(_, at)| at - release);
    match &first_success_ms {
        Some(ms) => eprintln!("waiters: first waiter SUCCEEDED {ms:.0} ms after the release"),
        None => eprintln!(
            "waiters: no waiter SUCCEEDED within {:?}",
            cli.settle_timeout
        ),
    }
    tokio::time::sleep(cli.observe_after).await;

    // The end: how the waits stand, then cancel what still waits.
    let end = wall_ms();
    let after = upstream_stats(client, &fleet.upstream).await?;
    let (end_tally, lost, _) = sweep(client, &waits, cli.setup_concurrency).await?;
    let calls = calls_since(client, &fleet.upstream, phase_start as i64).await?;
    let seat_reads = |from: f64, to: f64| {
        calls
            .iter()
            .filter(|c| {
                c.route == "GET /api/seats" && (c.at_ms as f64) >= from && (c.at_ms as f64) < to
            })
            .map(|c| c.at_ms)
            .collect::<Vec<_>>()
    };
    let reads_before = seat_reads(phase_start, release);
    let reads_after = seat_reads(release, end);
    let ttl = timing.read_ttl;
    let span = |a: f64, b: f64| Duration::from_secs_f64(((b - a) / 1000.0).max(0.0));
    let bound_before = per_ttl_bound(span(phase_start, release), ttl);
    let bound_after = per_ttl_bound(span(release, end), ttl);
    let (most_before, gap_before) = call_spacing(&reads_before, ttl.as_millis() as i64);
    let (most_after, gap_after) = call_spacing(&reads_after, ttl.as_millis() as i64);
    let posts = route_count(&after, "POST /api/reservations")
        .saturating_sub(route_count(&before, "POST /api/reservations"));
    let charge_reads = route_count(&after, "GET /api/charge")
        .saturating_sub(route_count(&before, "GET /api/charge"));

    let still_waiting: Vec<&(String, String, String)> = {
        let statuses = for_each(
            waits.iter().collect(),
            cli.setup_concurrency,
            |w| async move { Ok((w, get_intent(client, &w.0, &w.1, &w.2).await?)) },
        )
        .await?;
        statuses
            .into_iter()
            .filter(|(_, s)| s.as_ref().is_ok_and(|i| status_of(i) == "WAITING_FOR_SEAT"))
            .map(|(w, _)| w)
            .collect()
    };
    let cancels = for_each(
        still_waiting,
        cli.setup_concurrency,
        |(api, token, id)| async move {
            let resp = client
                .delete(format!("{api}/intents/{id}"))
                .bearer_auth(token)
                .send()
                .await?;
            let status = resp.status();
            let text = resp.text().await.unwrap_or_default();
            Ok((status, text))
        },
    )
    .await?;
    let cancelled = cancels
        .iter()
        .filter(|(s, _)| *s == reqwest::StatusCode::OK)
        .count();
    let mut cancel_refused: BTreeMap<String, usize> = BTreeMap::new();
    for (s, text) in cancels
        .iter()
        .filter(|(s, _)| *s != reqwest::StatusCode::OK)
    {
        *cancel_refused.entry(s.as_u16().to_string()).or_default() += 1;
        if cancel_refused.values().sum::<usize>() <= 3 {
            eprintln!("cancel refused: {s}: {text}");
        }
    }
    let (after_cancel, _, _) = sweep(client, &waits, cli.setup_concurrency).await?;

    let succeeded = end_tally.get("SUCCEEDED").copied().unwrap_or(0);
    let acceptable_rest = end_tally
        .iter()
        .filter(|(s, _)| matches!(s.as_str(), "WAITING_FOR_SEAT" | "WAIT_EXPIRED"))
        .map(|(_, n)| *n)
        .sum::<usize>();
    let mut why = Vec::new();
    if posts != 1 {
        why.push(format!(
            "reserve POSTs during the waiters phase {posts} != 1"
        ));
    }
    if reads_before.len() as u64 > bound_before {
        why.push(format!(
            "upstream seat reads before the release {} > {bound_before}",
            reads_before.len()
        ));
    }
    if reads_after.len() as u64 > bound_after {
        why.push(format!(
            "upstream seat reads after the release {} > {bound_after}",
            reads_after.len()
        ));
    }
    if succeeded != 1 {
        why.push(format!("SUCCEEDED {succeeded} != 1"));
    }
    if succeeded + acceptable_rest != n {
        why.push(format!(
            "waits neither the one SUCCEEDED nor waiting/expired: {}",
            tally_line(&end_tally)
        ));
    }
    if !lost.is_empty() {
        why.push(format!("{} waits unreadable", lost.len()));
    }
    if first_success_ms.is_none() {
        why.push("no waiter got the seat".into());
    }
    let latency_ok = first_success_ms.is_some_and(|ms| ms <= 5_000.0);
    for w in &why {
        eprintln!("FAIL: {w}");
    }
    let correct = why.is_empty();
    let rows = vec![
        row("waits registered", n),
        row(
            "waits registered in (s)",
            format!("{:.1}", (registered - phase_start) / 1000.0),
        ),
        row(
            "seat held after registration (s)",
            format!("{:.1}", (release - registered) / 1000.0),
        ),
        target_row(
            "release -> first waiter SUCCEEDED (ms)",
            first_success_ms.map_or("none".into(), |ms| format!("{ms:.0}")),
            "<= 5000",
            latency_ok,
        ),
        target_row(
            "reserve POSTs, whole waiters phase",
            posts,
            "= 1",
            posts == 1,
        ),
        row("charge reads, whole waiters phase", charge_reads),
        target_row(
            format!(
                "upstream seat reads before release ({:.1} s)",
                (release - phase_start) / 1000.0
            ),
            reads_before.len(),
            format!("<= {bound_before}"),
            reads_before.len() as u64 <= bound_before,
        ),
        row(
            format!("  most in any {} ms / smallest gap (ms)", ttl.as_millis()),
            format!(
                "{most_before} / {}",
                gap_before.map_or("-".into(), |g| g.to_string())
            ),
        ),
        target_row(
            format!(
                "upstream seat reads after release ({:.1} s)",
                (end - release) / 1000.0
            ),
            reads_after.len(),
            format!("<= {bound_after}"),
            reads_after.len() as u64 <= bound_after,
        ),
        row(
            format!("  most in any {} ms / smallest gap (ms)", ttl.as_millis()),
            format!(
                "{most_after} / {}",
                gap_after.map_or("-".into(), |g| g.to_string())
            ),
        ),
        target_row(
            "waits at the end",
            tally_line(&end_tally),
            "1 SUCCEEDED",
            succeeded == 1 && succeeded + acceptable_rest == n,
        ),
        row("cancelled at the end", cancelled),
        row("cancel refused", tally_line(&cancel_refused)),
        row("waits after cancelling", tally_line(&after_cancel)),
    ];
    print_rows(
        &format!(
            "waiters  instances={} waiters={} deadline {:?} backend={:?} timing={:?} (read_ttl {:?}, backoff {:?}..{:?})",
            fleet.apis.len(),
            n,
            cli.wait_deadline,
            fleet.kind,
            timing_profile(cli),
            ttl,
            timing.wait_backoff_base,
            timing.wait_backoff_max
        ),
        &rows,
    );
    println!(
        "correctness: {}   latency target (first waiter within 5 s): {}",
        mark(correct),
        mark(latency_ok)
    );
    let line = json!({
        "scenario": "waiters",
        "backend": format!("{:?}", fleet.kind).to_lowercase(),
        "timing": format!("{:?}", timing_profile(cli)).to_lowercase(),
        "instances": fleet.apis.len(),
        "waiters": n,
        "release_to_first_success_ms": first_success_ms.map(round),
        "reserve_posts": posts,
        "charge_reads": charge_reads,
        "seat_reads_before_release": reads_before.len(),
        "bound_before": bound_before,
        "seat_reads_after_release": reads_after.len(),
        "bound_after": bound_after,
        "end": end_tally,
        "cancelled": cancelled,
        "cancel_refused": cancel_refused,
        "after_cancel": after_cancel,
        "correct": correct,
        "latency_target_met": latency_ok,
        "failures": why,
    });
    println!("{line}");
    Ok(correct)
}

#[cfg(test)]
mod tests {
    use super::*;
    use seatgate::domain::Millis;

    fn call(at_ms: i64) -> Call {
        Call {
            at_ms,
            route: "GET /api/seats".into(),
        }
    }

    #[test]
    fn spacing_counts_the_busiest_window() {
        assert_eq!(call_spacing(&[0, 999, 1000, 2500], 1000), (2, Some(1)));
        assert_eq!(call_spacing(&[], 1000), (0, None));
    }

    #[test]
    fn ttl_bound_is_one_per_window_plus_one() {
        assert_eq!(
            per_ttl_bound(Duration::from_secs(10), Duration::from_secs(1)),
            11
        );
        assert_eq!(
            per_ttl_bound(Duration::from_millis(10_200), Duration::from_secs(1)),
            12
        );
    }

    #[test]
    fn open_phases_count_calls_and_probes() {
        let closed = BreakerState::closed();
        let open = closed.opened(Millis(1_000), Duration::from_secs(5));
        let probing = open.probing("i-a", Millis(6_010), Duration::from_secs(3));
        let reopened = probing.opened(Millis(6_012), Duration::from_secs(5));
        let probing2 = reopened.probing("i-b", Millis(11_020), Duration::from_secs(3));
        let closed2 = probing2.closed_at(Millis(11_025));
        let seen: Vec<Seen> = [closed, open, reopened, closed2]
            .into_iter()
            .map(|state| Seen {
                seen_ms: 0.0,
                state,
            })
            .collect();
        // 1000: in the opening ms; 1050: first cache ttl; 3000: while open; 6011: probe;
        // 11025: the second probe in the closing ms, 11030 after the close.
        let calls: Vec<Call> = [999, 1000, 1050, 3000, 6011, 11025, 11030]
            .into_iter()
            .map(call)
            .collect();
        let phases = open_phases(&seen, &calls, 100, 20_000);
        assert_eq!(phases.len(), 2);
        let (a, b) = (&phases[0], &phases[1]);
        assert!(a.from_closed && !b.from_closed);
        assert_eq!((a.at_open_ms, a.first_cache_ttl, a.rest), (1, 1, 1));
        let h = a.half_open.as_ref().unwrap();
        assert_eq!((h.ended_by, h.probes), (Some("Open"), 1));
        assert_eq!((b.at_open_ms, b.first_cache_ttl, b.rest), (0, 0, 0));
        let h = b.half_open.as_ref().unwrap();
        assert_eq!(
            (h.ended_by, h.calls, h.at_end_ms, h.probes),
            (Some("Closed"), 0, 1, 1)
        );
    }
}
