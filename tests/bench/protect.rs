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
// the outage's requests (the scenario itself is in `outage.rs`)

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

// One file per scenario; the fleet, the call log and the breaker timeline they share are above.
mod outage;
mod read_storm;
#[cfg(test)]
mod tests;
mod waiters;

use outage::outage;
use read_storm::read_storm;
use waiters::waiters;
