//! `compare --burst N`: seed 000's same-seat burst on seatgate's intent worker and on the
//! seed's direct confirm ([`baselines::direct`]), side by side in one run.
//!
//! Seed 000 measured the two paths on its own machine (confirm p95 1.50 s direct, 3.08 s
//! through its worker; 100 upstream POSTs against 1). Here both run on this machine, each
//! against a fresh `upstream-sim` of its own with nothing injected: seatgate is the in-process
//! runner stack on the embedded backend, driven by the very burst code of `same-seat-burst`
//! ([`super::burst_on`]); the direct app gets the same users, the same prepares, warm
//! connections and one barrier releasing all N confirms. The two take turns, the order
//! reversed on every repetition, so a noisy moment of this shared machine does not fall on one
//! side only.
//!
//! What is compared: confirm latency (what a user waits for), outcomes, upstream reserve POSTs
//! (the simulator's own count), and seatgate's time to terminal. A direct confirm's answer is
//! its outcome, so its time to terminal is its confirm latency. Only seatgate's exact counts
//! fail the run (1 POST, 1 SUCCEEDED, N-1 FAILED_RACE, nothing pending); the direct side is
//! expected to send N POSTs, and more than one SUCCEEDED from it is flagged, not failed.

use super::baselines::direct;
use super::{
    Cli, Connections, Pcts, RunResult, Scenario, Target, burst_on, for_each, percentiles,
    prepare_user, register_upstream, reserve_posts, timing_profile, warm_connections,
};
use anyhow::{Context as _, ensure};
use seatgate_local::BackendKind;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use upstream_sim::Simulator;

/// One side's burst, as the table shows it.
#[derive(Debug, Clone)]
struct Side {
    upstream_posts: u64,
    outcomes: BTreeMap<String, usize>,
    confirm: Pcts,
    /// seatgate only: confirm sent -> intent terminal (`updated_at`).
    terminal: Option<Pcts>,
    /// From the release of the burst to every outcome known.
    settled_ms: f64,
    /// Confirms that got no answer of the expected shape.
    failures: usize,
}

impl Side {
    fn count(&self, status: &str) -> usize {
        self.outcomes.get(status).copied().unwrap_or(0)
    }

    fn other(&self) -> usize {
        self.outcomes.values().sum::<usize>() - self.count("SUCCEEDED") - self.count("FAILED_RACE")
            + self.failures
    }

    fn json(&self) -> Value {
        let p = |p: &Pcts| json!({ "p50": p.p50, "p95": p.p95, "p99": p.p99, "max": p.max });
        json!({
            "upstream_posts": self.upstream_posts,
            "outcomes": self.outcomes,
            "confirm_failures": self.failures,
            "confirm_ms": p(&self.confirm),
            "time_to_terminal_ms": self.terminal.as_ref().map(p),
            "settled_ms": self.settled_ms,
        })
    }
}

fn seatgate_side(r: &RunResult) -> Side {
    Side {
        upstream_posts: r.upstream_posts,
        outcomes: r.outcomes.clone(),
        confirm: percentiles(&r.confirm_ms),
        terminal: Some(percentiles(&r.terminal_ms)),
        settled_ms: r.settle_wall_ms,
        failures: r.confirm_failures,
    }
}

/// An `upstream-sim` on a fresh loopback port, stopped by [`Upstream::stop`].
struct Upstream {
    url: String,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Upstream {
    async fn start() -> anyhow::Result<Upstream> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let stopped = async move {
                let _ = rx.await;
            };
            if let Err(e) = Simulator::new().run(listener, stopped).await {
                eprintln!("direct burst: upstream simulator failed: {e}");
            }
        });
        Ok(Upstream { url, stop, task })
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        // Graceful: in-flight calls are drained; the burst's are all answered by now. One
        // that still hangs after 5 s is cut off rather than left running past the bench.
        let abort = self.task.abort_handle();
        if tokio::time::timeout(Duration::from_secs(5), self.task)
            .await
            .is_err()
        {
            abort.abort();
        }
    }
}

/// seatgate's side: the `same-seat-burst` code on a fresh in-process stack (embedded backend).
async fn seatgate_burst(cli: &Cli, n: usize, run: usize) -> anyhow::Result<Side> {
    let mut c = cli.clone();
    c.api = None;
    c.upstream = None;
    c.backend = BackendKind::Embedded;
    c.n = n;
    c.scenario = Some(Scenario::SameSeatBurst);
    c.scenario_flag = None;
    let target = Target::open(&c).await?;
    let result = burst_on(&c, &target, run).await;
    target.close().await;
    Ok(seatgate_side(&result?))
}

/// The direct side: the same users and prepares against the direct-confirm app, all N
/// confirms released at once, each answered with its outcome.
async fn direct_burst(cli: &Cli, n: usize, run: usize) -> anyhow::Result<Side> {
    let upstream = Upstream::start().await?;
    let out = direct_burst_on(cli, n, run, &upstream.url).await;
    upstream.stop().await;
    out
}

async fn direct_burst_on(cli: &Cli, n: usize, run: usize, upstream: &str) -> anyhow::Result<Side> {
    // The runner's own bound on a reserve, from the timing profile the seatgate side runs.
    let server = direct::serve(upstream, timing_profile(cli).timing().upstream_timeout).await?;
    let api = server.url.as_str();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(n + cli.setup_concurrency)
        .timeout(Duration::from_secs(30))
        .build()?;
    let tag = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let users: Vec<(String, String)> = (1..=n)
        .map(|i| (format!("direct-{tag}-u{i}"), format!("cred-{tag}-u{i}")))
        .collect();
    register_upstream(&client, upstream, &users).await?;
    let seat = format!("burst-{tag}");
    let (client_ref, seat_ref) = (&client, &seat);
    let prepared = for_each(
        users,
        cli.setup_concurrency,
        |(user, credential)| async move {
            prepare_user(client_ref, api, &user, &credential, seat_ref).await
        },
    )
    .await?;
    let posts_before = reserve_posts(&client, upstream).await?;
    if cli.connections == Connections::Warm {
        warm_connections(&client, api, n).await?;
    }
    eprintln!("direct run {run}: {n} users prepared seat {seat}; releasing {n} direct confirms");

    let barrier = Arc::new(tokio::sync::Barrier::new(n));
    let mut handles = Vec::with_capacity(n);
    for user in prepared {
        let (client, barrier) = (client.clone(), Arc::clone(&barrier));
        let url = format!("{api}/actions/{}/confirm", user.action_id);
        handles.push(tokio::spawn(async move {
            let request = client.post(url).bearer_auth(&user.token);
            barrier.wait().await;
            let started = Instant::now();
            let resp = request.send().await;
            let outcome = match resp {
                Ok(r) if r.status() == reqwest::StatusCode::OK => r
                    .json::<Value>()
                    .await
                    .ok()
                    .and_then(|v| v["status"].as_str().map(str::to_owned))
                    .ok_or_else(|| "no status in the answer".to_owned()),
                Ok(r) => Err(format!("status {}", r.status())),
                Err(e) => Err(format!("request failed (timeout: {})", e.is_timeout())),
            };
            (started.elapsed().as_secs_f64() * 1000.0, outcome)
        }));
    }
    let released = Instant::now();
    let mut confirm_ms = Vec::with_capacity(n);
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = 0;
    for handle in handles {
        let (ms, outcome) = handle.await?;
        confirm_ms.push(ms);
        match outcome {
            Ok(status) => *outcomes.entry(status).or_default() += 1,
            Err(why) => {
                failures += 1;
                eprintln!("direct confirm failed: {why}");
            }
        }
    }
    let settled_ms = released.elapsed().as_secs_f64() * 1000.0;
    let posts_after = reserve_posts(&client, upstream).await?;
    drop(server);
    Ok(Side {
        upstream_posts: posts_after.saturating_sub(posts_before),
        outcomes,
        confirm: percentiles(&confirm_ms),
        terminal: None,
        settled_ms,
        failures,
    })
}

/// Runs the pair `cli.repeat` times, prints the table and a JSON line; `false` when seatgate
/// missed an exact count.
pub(crate) async fn run(cli: &Cli) -> anyhow::Result<bool> {
    let n = cli.burst;
    ensure!(n >= 1, "--burst must be at least 1");
    // Bounded: each side's burst at most this long (its own waits are bounded below it too:
    // the settle timeout, 30 s per request).
    let limit = cli.settle_timeout + Duration::from_secs(60);
    let mut rows: Vec<(usize, &'static str, Side)> = Vec::new();
    for run in 1..=cli.repeat {
        let sides: [&'static str; 2] = if run % 2 == 1 {
            ["seatgate", "direct"]
        } else {
            ["direct", "seatgate"]
        };
        for side in sides {
            eprintln!("compare: same-seat burst N={n}, run {run}, {side}");
            let out = match side {
                "seatgate" => tokio::time::timeout(limit, seatgate_burst(cli, n, run)).await,
                _ => tokio::time::timeout(limit, direct_burst(cli, n, run)).await,
            }
            .with_context(|| format!("{side} burst not done within {limit:?}"))?
            .with_context(|| format!("{side} burst"))?;
            rows.push((run, side, out));
        }
    }
    rows.sort_by_key(|(run, side, _)| (*side != "seatgate", *run));
    let correct = print(n, &rows);
    let line = json!({
        "scenario": "compare-burst",
        "n": n,
        "repeat": cli.repeat,
        "connections": format!("{:?}", cli.connections).to_lowercase(),
        "runs": rows.iter().map(|(run, side, s)| json!({ "run": run, "path": side, "result": s.json() })).collect::<Vec<_>>(),
        "correct": correct,
    });
    println!("{line}");
    Ok(correct)
}

fn seatgate_correct(n: usize, s: &Side) -> Vec<String> {
    let mut why = Vec::new();
    if s.upstream_posts != 1 {
        why.push(format!("upstream reserve POSTs {} != 1", s.upstream_posts));
    }
    if s.count("SUCCEEDED") != 1 {
        why.push(format!("SUCCEEDED {} != 1", s.count("SUCCEEDED")));
    }
    if s.count("FAILED_RACE") != n - 1 {
        why.push(format!(
            "FAILED_RACE {} != {}",
            s.count("FAILED_RACE"),
            n - 1
        ));
    }
    if s.other() != 0 {
        why.push(format!(
            "{} confirms neither SUCCEEDED nor FAILED_RACE",
            s.other()
        ));
    }
    why
}

fn print(n: usize, rows: &[(usize, &'static str, Side)]) -> bool {
    let ms = |p: &Pcts| format!("{:.1} / {:.1} / {:.1}", p.p50, p.p95, p.p99);
    println!();
    println!(
        "same-seat burst, N={n}: seatgate through its intent worker (in-process runner, embedded backend) vs seed 000's direct confirm (the request writes the upstream); each its own upstream-sim"
    );
    println!(
        "| path | run | upstream reserve POSTs | SUCCEEDED | FAILED_RACE | other | confirm p50 / p95 / p99 ms | time to terminal p50 / p95 / p99 ms | burst to all settled ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut correct = true;
    for (run, side, s) in rows {
        let label = match *side {
            "seatgate" => "seatgate, intent worker",
            _ => "direct confirm (seed 000)",
        };
        let terminal = s
            .terminal
            .as_ref()
            .map_or_else(|| "= confirm".to_owned(), ms);
        println!(
            "| {label} | {run} | {} | {} | {} | {} | {} | {terminal} | {:.0} |",
            s.upstream_posts,
            s.count("SUCCEEDED"),
            s.count("FAILED_RACE"),
            s.other(),
            ms(&s.confirm),
            s.settled_ms,
        );
        if *side == "seatgate" {
            for why in seatgate_correct(n, s) {
                correct = false;
                println!("seatgate run {run}: FAIL: {why}");
            }
        } else {
            if s.upstream_posts != n as u64 {
                println!(
                    "direct run {run}: {} upstream POSTs, not the N={n} its design sends",
                    s.upstream_posts
                );
            }
            if s.count("SUCCEEDED") > 1 {
                println!(
                    "direct run {run}: {} SUCCEEDED for one seat (flagged: the upstream let more than one write through)",
                    s.count("SUCCEEDED")
                );
            }
        }
    }
    println!(
        "seatgate's exact counts (1 POST, 1 SUCCEEDED, {} FAILED_RACE): {}",
        n - 1,
        if correct { "PASS" } else { "FAIL" }
    );
    correct
}
