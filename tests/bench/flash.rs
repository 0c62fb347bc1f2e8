//! `flash-sale`: seed 004's k6 experiment as an open-model load harness.
//!
//! Iteration `i` is due at `start + i / rate`, whatever the server is doing: a scheduler spawns
//! each iteration at its time without waiting for earlier ones. An iteration that cannot start
//! within `--lateness` of its slot (the scheduler itself fell behind) or finds the in-flight cap
//! (`--max-in-flight`, 2,000 here) full is counted as dropped, never silently skipped. Each
//! iteration logs in (`POST /dev/token` as `u{i % users}`) and books one seat
//! (`POST /flights/{id}/bookings {"headCount":1}`) of a flight created fresh for the run.
//!
//! Afterwards every user's `GET /me/bookings` is read (the bookings stored for this flight,
//! matched id by id against the 201s) and the flight's `available`. Correctness (exit 1): no
//! 5xx, no oversell, stored bookings are exactly the 201s, `available == capacity - stored`, and
//! the flight sold out when more bookings were answered than it had seats. Latency targets are
//! reported, not enforced. `--find-saturation` steps the rate up until booking p95 passes
//! 100 ms or any error or drop appears. A latency-over-time SVG is written to `--plot`.

use super::dev_token;
use super::{Cli, Pcts, Target, expect_status, for_each, pcts_json, percentiles, round};
use anyhow::{Context as _, ensure};
use clap::ValueEnum;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The flight of each `--find-saturation` step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum StepCapacity {
    /// `--capacity` seats (300): the seats go in the first moments, then the load is the
    /// sold-out path, as in the seed's experiment.
    Default,
    /// As many seats as the step has iterations: every booking is a real transaction.
    Demand,
}

pub(crate) const DEFAULT_RATE: f64 = 400.0;
pub(crate) const DEFAULT_IN_FLIGHT: usize = 2_000;
/// `--find-saturation`: a step is good while booking p95 stays at or under this.
pub(crate) const SATURATION_P95_MS: f64 = 100.0;

/// How one iteration ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Created,
    SoldOut,
    /// 409 with another error code.
    Conflict(String),
    /// Booking answered 4xx other than 409.
    Client(u16),
    /// Booking answered 5xx.
    Server(u16),
    /// The booking request got no HTTP answer.
    Transport(String),
    /// Login answered something other than 200 (its status).
    LoginStatus(u16),
    /// Login got no HTTP answer.
    LoginTransport(String),
}

#[derive(Debug, Clone)]
struct Sample {
    /// When the iteration started, ms since the run's start.
    start_ms: f64,
    login_ms: f64,
    /// The booking request alone; `None` when it was never sent or got no answer.
    booking_ms: Option<f64>,
    /// Login + booking, when the booking was answered.
    iteration_ms: Option<f64>,
    /// How long a booking that got no answer took to fail (a timeout is the client's 30 s).
    failed_after_ms: Option<f64>,
    outcome: Outcome,
    booking_id: Option<String>,
}

/// One run at one rate.
#[derive(Debug, Clone)]
pub(crate) struct StepResult {
    pub(crate) rate: f64,
    duration: Duration,
    pub(crate) capacity: u32,
    shards: u32,
    flight_id: String,
    scheduled: usize,
    started: usize,
    dropped_late: usize,
    dropped_full: usize,
    /// Offsets (ms since start) of the dropped slots, for the picture.
    dropped_at: Vec<f64>,
    /// From the first slot to the scheduler's last decision.
    issued_for: Duration,
    max_lag_ms: f64,
    samples: Vec<Sample>,
    pub(crate) stored: usize,
    stored_missing_201: usize,
    created_not_stored: usize,
    duplicate_201_ids: usize,
    pub(crate) available: i64,
}

impl StepResult {
    fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.samples.iter().filter(|s| f(&s.outcome)).count()
    }
    pub(crate) fn created(&self) -> usize {
        self.count(|o| *o == Outcome::Created)
    }
    pub(crate) fn sold_out(&self) -> usize {
        self.count(|o| *o == Outcome::SoldOut)
    }
    pub(crate) fn conflict_other(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Conflict(_)))
    }
    pub(crate) fn client(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Client(_)))
    }
    pub(crate) fn server(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Server(_)))
            + self.count(|o| matches!(o, Outcome::LoginStatus(s) if *s >= 500))
    }
    pub(crate) fn transport(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Transport(_) | Outcome::LoginTransport(_)))
    }
    pub(crate) fn login_failed(&self) -> usize {
        self.count(|o| matches!(o, Outcome::LoginStatus(_) | Outcome::LoginTransport(_)))
    }
    pub(crate) fn dropped(&self) -> usize {
        self.dropped_late + self.dropped_full
    }
    pub(crate) fn achieved_rate(&self) -> f64 {
        self.started as f64 / self.issued_for.as_secs_f64().max(1e-9)
    }

    fn booking(&self, f: impl Fn(&Outcome) -> bool) -> Pcts {
        let xs: Vec<f64> = self
            .samples
            .iter()
            .filter(|s| f(&s.outcome))
            .filter_map(|s| s.booking_ms)
            .collect();
        percentiles(&xs)
    }
    pub(crate) fn booking_all(&self) -> Pcts {
        self.booking(|_| true)
    }
    /// The 201s' booking latency.
    #[cfg_attr(not(feature = "baselines"), allow(dead_code))]
    pub(crate) fn booking_created(&self) -> Pcts {
        self.booking(|o| *o == Outcome::Created)
    }
    /// The refusals' booking latency (every 409: sold out, or another code such as an
    /// optimistic baseline's `conflict`).
    #[cfg_attr(not(feature = "baselines"), allow(dead_code))]
    pub(crate) fn booking_refused(&self) -> Pcts {
        self.booking(|o| matches!(o, Outcome::SoldOut | Outcome::Conflict(_)))
    }
    /// Each answered booking as (ms from the start to its send, its latency in ms).
    #[cfg_attr(not(feature = "baselines"), allow(dead_code))]
    pub(crate) fn booking_points(&self) -> Vec<(f64, f64)> {
        self.samples
            .iter()
            .filter_map(|x| x.booking_ms.map(|b| (x.start_ms + x.login_ms, b)))
            .collect()
    }
    fn iteration(&self) -> Pcts {
        let xs: Vec<f64> = self.samples.iter().filter_map(|s| s.iteration_ms).collect();
        percentiles(&xs)
    }
    fn login(&self) -> Pcts {
        let xs: Vec<f64> = self.samples.iter().map(|s| s.login_ms).collect();
        percentiles(&xs)
    }

    /// Errors of any kind (what ends a saturation search besides latency and drops).
    pub(crate) fn errors(&self) -> usize {
        self.conflict_other()
            + self.client()
            + self.server()
            + self.transport()
            + self.login_failed()
    }

    /// The correctness targets; each failure is a reason.
    pub(crate) fn correctness(&self) -> Vec<String> {
        let mut why = Vec::new();
        let capacity = self.capacity as usize;
        let created = self.created();
        if self.server() != 0 {
            why.push(format!("{} answers were 5xx", self.server()));
        }
        if self.stored > capacity || created > capacity {
            why.push(format!(
                "oversold: {} stored, {created} answered 201, capacity {capacity}",
                self.stored
            ));
        }
        if self.stored != created {
            why.push(format!(
                "bookings stored {} != 201 answers {created}",
                self.stored
            ));
        }
        if self.stored_missing_201 != 0 || self.created_not_stored != 0 {
            why.push(format!(
                "booking ids: {} stored without a 201 seen, {} answered 201 but not stored",
                self.stored_missing_201, self.created_not_stored
            ));
        }
        if self.duplicate_201_ids != 0 {
            why.push(format!(
                "{} booking ids answered twice",
                self.duplicate_201_ids
            ));
        }
        if self.available != capacity as i64 - self.stored as i64 {
            why.push(format!(
                "available {} != capacity {capacity} - stored {}",
                self.available, self.stored
            ));
        }
        if self.demand_exceeds_capacity() && created != capacity {
            why.push(format!(
                "demand ({} answered bookings) exceeded capacity but only {created} of {capacity} sold",
                created + self.sold_out()
            ));
        }
        why
    }

    /// More bookings were answered (201 or sold out) than the flight had seats.
    fn demand_exceeds_capacity(&self) -> bool {
        self.created() + self.sold_out() > self.capacity as usize
    }

    /// Why this step is past saturation, `None` while it is good. `judge_correctness: false`
    /// leaves the correctness targets out (a baseline known to oversell is still timed).
    pub(crate) fn saturation_reason(&self, judge_correctness: bool) -> Option<String> {
        let why = self.correctness();
        if judge_correctness && !why.is_empty() {
            Some(format!("correctness: {}", why.join("; ")))
        } else if self.dropped() > 0 {
            Some(format!("{} iterations dropped", self.dropped()))
        } else if self.errors() > 0 {
            Some(format!("{} errors", self.errors()))
        } else if self.booking_all().p95 > SATURATION_P95_MS {
            Some(format!(
                "booking p95 {:.1} ms > {SATURATION_P95_MS} ms",
                self.booking_all().p95
            ))
        } else {
            None
        }
    }

    pub(crate) fn saturation_ok(&self) -> bool {
        self.saturation_reason(true).is_none()
    }

    pub(crate) fn json(&self) -> Value {
        json!({
            "rate": self.rate,
            "duration_ms": self.duration.as_millis() as u64,
            "capacity": self.capacity,
            "shards": self.shards,
            "flight_id": self.flight_id,
            "scheduled": self.scheduled,
            "started": self.started,
            "dropped_late": self.dropped_late,
            "dropped_full": self.dropped_full,
            "achieved_rate": round(self.achieved_rate()),
            "max_scheduler_lag_ms": round(self.max_lag_ms),
            "status_201": self.created(),
            "status_409_sold_out": self.sold_out(),
            "status_409_other": self.conflict_other(),
            "status_4xx_other": self.client(),
            "status_5xx": self.server(),
            "transport_errors": self.transport(),
            "login_failures": self.login_failed(),
            "stored": self.stored,
            "available": self.available,
            "booking_ms": pcts_json(&self.booking_all()),
            "booking_201_ms": pcts_json(&self.booking(|o| *o == Outcome::Created)),
            "booking_409_ms": pcts_json(&self.booking(|o| *o == Outcome::SoldOut)),
            "iteration_ms": pcts_json(&self.iteration()),
            "login_ms": pcts_json(&self.login()),
            "correct": self.correctness().is_empty(),
        })
    }
}

/// Runs `flash-sale` (or its saturation search); `Ok(false)` when a correctness target failed.
pub(crate) async fn run(cli: &Cli) -> anyhow::Result<bool> {
    ensure!(cli.capacity >= 1, "--capacity must be at least 1");
    ensure!(cli.users >= 1, "--users must be at least 1");
    let in_flight = cli.max_in_flight.unwrap_or(DEFAULT_IN_FLIGHT).max(1);
    let target = Target::open(cli).await?;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(in_flight + cli.setup_concurrency)
        .timeout(Duration::from_secs(30))
        .build()?;
    let result = if cli.find_saturation {
        saturation(cli, &target, &client, in_flight).await
    } else {
        single(cli, &target, &client, in_flight).await
    };
    target.close().await;
    result
}

async fn single(
    cli: &Cli,
    target: &Target,
    client: &reqwest::Client,
    in_flight: usize,
) -> anyhow::Result<bool> {
    let rate = cli.rate.unwrap_or(DEFAULT_RATE);
    let step = flash_step(cli, &target.api, client, rate, cli.capacity, in_flight).await?;
    print_step(cli, &step);
    print_seed_table(&step);
    let plot = plot_path(cli, None);
    write_svg(&plot, &step, &plot_title(cli, &step))?;
    println!("latency over time: {}", plot.display());
    let why = step.correctness();
    for w in &why {
        eprintln!("flash-sale: {w}");
    }
    let mut line = step.json();
    line["scenario"] = json!("flash-sale");
    line["backend"] = json!(super::target_name(cli));
    line["plot"] = json!(plot.display().to_string());
    line["latency_target"] = latency_target(&step)
        .map(|(t, ok)| json!({ "target": t, "met": ok }))
        .unwrap_or(Value::Null);
    println!("{line}");
    Ok(why.is_empty())
}

async fn saturation(
    cli: &Cli,
    target: &Target,
    client: &reqwest::Client,
    in_flight: usize,
) -> anyhow::Result<bool> {
    ensure!(
        !cli.saturation_rates.is_empty(),
        "--saturation-rates is empty"
    );
    let mut steps: Vec<StepResult> = Vec::new();
    let mut last_good: Option<f64> = None;
    let mut stop_reason = "every step stayed within bounds".to_owned();
    for &rate in &cli.saturation_rates {
        let capacity = match cli.step_capacity {
            StepCapacity::Default => cli.capacity,
            StepCapacity::Demand => {
                ((rate * cli.duration.as_secs_f64()).ceil() as u32).clamp(1, 1_000_000)
            }
        };
        let step = flash_step(cli, &target.api, client, rate, capacity, in_flight).await?;
        print_step_line(&step);
        let plot = plot_path(cli, Some(rate));
        write_svg(&plot, &step, &plot_title(cli, &step))?;
        let reason = step.saturation_reason(true);
        steps.push(step);
        match reason {
            None => last_good = Some(rate),
            Some(r) => {
                stop_reason = format!("{rate}/s: {r}");
                break;
            }
        }
    }
    println!();
    println!(
        "find-saturation  duration={:?}  step capacity={}  in-flight cap={in_flight}  lateness={:?}  target={}",
        cli.duration,
        match cli.step_capacity {
            StepCapacity::Default => format!("{} (--capacity)", cli.capacity),
            StepCapacity::Demand => "rate x duration (every iteration can book)".into(),
        },
        cli.lateness,
        super::target_name(cli),
    );
    println!(
        "{:>8} {:>9} {:>8} {:>6} {:>7} {:>5} {:>5} {:>6} {:>6} {:>6} {:>7} {:>7} {:>7} {:>7}  verdict",
        "rate",
        "achieved",
        "dropped",
        "201",
        "409",
        "4xx",
        "5xx",
        "transp",
        "stored",
        "avail",
        "bk p50",
        "bk p95",
        "bk p99",
        "it p95"
    );
    for s in &steps {
        let b = s.booking_all();
        println!(
            "{:>8} {:>9.0} {:>8} {:>6} {:>7} {:>5} {:>5} {:>6} {:>6} {:>6} {:>7.1} {:>7.1} {:>7.1} {:>7.1}  {}",
            s.rate,
            s.achieved_rate(),
            s.dropped(),
            s.created(),
            s.sold_out() + s.conflict_other(),
            s.client(),
            s.server(),
            s.transport(),
            s.stored,
            s.available,
            b.p50,
            b.p95,
            b.p99,
            s.iteration().p95,
            if s.saturation_ok() { "good" } else { "over" },
        );
    }
    println!(
        "last good rate: {}  (stopped at {stop_reason})",
        last_good.map_or("none".to_owned(), |r| format!("{r}/s"))
    );
    println!(
        "plots: {}",
        plot_path(cli, Some(0.0))
            .display()
            .to_string()
            .replace("-0.svg", "-<rate>.svg")
    );
    let correct = steps.iter().all(|s| s.correctness().is_empty());
    let line = json!({
        "scenario": "flash-sale",
        "find_saturation": true,
        "backend": super::target_name(cli),
        "step_capacity": format!("{:?}", cli.step_capacity).to_lowercase(),
        "last_good_rate": last_good,
        "stopped": stop_reason,
        "steps": steps.iter().map(StepResult::json).collect::<Vec<_>>(),
        "correct": correct,
    });
    println!("{line}");
    Ok(correct)
}

/// One run at `rate` on a fresh flight of `capacity` seats, against the API at `api` (a
/// seatgate stack or a `compare` baseline: only the routes the iteration uses are needed).
pub(crate) async fn flash_step(
    cli: &Cli,
    api: &str,
    client: &reqwest::Client,
    rate: f64,
    capacity: u32,
    in_flight: usize,
) -> anyhow::Result<StepResult> {
    ensure!(rate > 0.0, "--rate must be positive");
    let tag = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let flight_id = format!("flash-{tag}-{}", rate as u64);
    let admin = dev_token(client, api, "bench-admin", true).await?;
    create_flight(
        client,
        api,
        &admin,
        json!({ "flight_id": flight_id, "capacity": capacity, "shards": cli.shards }),
    )
    .await?;

    let scheduled = (rate * cli.duration.as_secs_f64()).round() as usize;
    eprintln!(
        "flash-sale: {scheduled} iterations at {rate}/s over {:?} on flight {flight_id} ({capacity} seats, {} shards), {} users, in-flight cap {in_flight}",
        cli.duration, cli.shards, cli.users
    );
    let login_url: Arc<str> = format!("{api}/dev/token").into();
    let book_url: Arc<str> = format!("{api}/flights/{flight_id}/bookings").into();
    let semaphore = Arc::new(tokio::sync::Semaphore::new(in_flight));
    let mut tasks = Vec::with_capacity(scheduled);
    let (mut dropped_late, mut dropped_full) = (0, 0);
    let mut dropped_at = Vec::new();
    let mut max_lag_ms: f64 = 0.0;
    let booked_before = booked_counter(client, api).await;
    let t0 = Instant::now();
    for i in 0..scheduled {
        let due = t0 + Duration::from_secs_f64(i as f64 / rate);
        if due > Instant::now() {
            tokio::time::sleep_until(due).await;
        }
        let now = Instant::now();
        let lag = now.saturating_duration_since(due);
        max_lag_ms = max_lag_ms.max(lag.as_secs_f64() * 1000.0);
        if lag > cli.lateness {
            dropped_late += 1;
            dropped_at.push(ms_between(t0, due));
            continue;
        }
        let Ok(permit) = Arc::clone(&semaphore).try_acquire_owned() else {
            dropped_full += 1;
            dropped_at.push(ms_between(t0, due));
            continue;
        };
        let client = client.clone();
        let login_url = Arc::clone(&login_url);
        let book_url = Arc::clone(&book_url);
        let user = format!("u{}", i % cli.users);
        tasks.push(tokio::spawn(async move {
            let sample = iteration(&client, &login_url, &book_url, &user, t0).await;
            drop(permit);
            sample
        }));
    }
    let issued_for = t0.elapsed();
    let started = tasks.len();
    let mut samples = Vec::with_capacity(started);
    for t in tasks {
        samples.push(t.await?);
    }
    eprintln!(
        "flash-sale: {started} started, {} dropped, all answered {:.1} s after the start",
        dropped_late + dropped_full,
        t0.elapsed().as_secs_f64()
    );

    // What the store holds: every user's bookings of this flight, id by id.
    let users: Vec<usize> = (0..cli.users).collect();
    let flight_ref = flight_id.as_str();
    let per_user: Vec<Vec<String>> = for_each(users, cli.setup_concurrency, |u| async move {
        let token = dev_token(client, api, &format!("u{u}"), false).await?;
        let mine = expect_status(
            client
                .get(format!("{api}/me/bookings"))
                .bearer_auth(&token)
                .send()
                .await?,
            reqwest::StatusCode::OK,
            "my bookings",
        )
        .await?;
        Ok(mine["bookings"]
            .as_array()
            .map(|list| {
                list.iter()
                    .filter(|b| b["flight_id"] == flight_ref && b["status"] == "BOOKED")
                    .filter_map(|b| b["booking_id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default())
    })
    .await?;
    let stored_ids: BTreeSet<String> = per_user.into_iter().flatten().collect();
    // The stack's own count of bookings, where it serves `/__metrics` (the runner does).
    if let (Some(before), Some(after)) = (booked_before, booked_counter(client, api).await) {
        let counted = after.saturating_sub(before);
        let answered = samples.iter().filter(|s| s.booking_id.is_some()).count() as u64;
        println!(
            "flash-sale: /__metrics: {counted} booked (201 answers {answered}, stored {}): {}",
            stored_ids.len(),
            if counted == answered && counted == stored_ids.len() as u64 {
                "agree"
            } else {
                "DISAGREE"
            }
        );
    }
    let mut created_ids = BTreeSet::new();
    let mut duplicate_201_ids = 0;
    for id in samples.iter().filter_map(|s| s.booking_id.clone()) {
        if !created_ids.insert(id) {
            duplicate_201_ids += 1;
        }
    }
    let flight = read_flight(client, api, &admin, &flight_id).await?;
    Ok(StepResult {
        rate,
        duration: cli.duration,
        capacity,
        shards: cli.shards,
        flight_id: flight_id.clone(),
        scheduled,
        started,
        dropped_late,
        dropped_full,
        dropped_at,
        issued_for,
        max_lag_ms,
        samples,
        stored: stored_ids.len(),
        stored_missing_201: stored_ids.difference(&created_ids).count(),
        created_not_stored: created_ids.difference(&stored_ids).count(),
        duplicate_201_ids,
        available: flight["available"].as_i64().context("available")?,
    })
}

/// `POST /admin/flights` with `body`, which must answer 201.
pub(crate) async fn create_flight(
    client: &reqwest::Client,
    api: &str,
    admin: &str,
    body: Value,
) -> anyhow::Result<()> {
    let resp = client
        .post(format!("{api}/admin/flights"))
        .bearer_auth(admin)
        .json(&body)
        .send()
        .await?;
    expect_status(resp, reqwest::StatusCode::CREATED, "create flight").await?;
    Ok(())
}

/// `GET /flights/{id}`: the flight's stock now.
pub(crate) async fn read_flight(
    client: &reqwest::Client,
    api: &str,
    admin: &str,
    flight_id: &str,
) -> anyhow::Result<Value> {
    let resp = client
        .get(format!("{api}/flights/{flight_id}"))
        .bearer_auth(admin)
        .send()
        .await?;
    expect_status(resp, reqwest::StatusCode::OK, "get flight").await
}

/// `seatgate_bookings_total{outcome="booked"}` from the stack's `GET /__metrics`, if it serves
/// one (a deployed API does not).
async fn booked_counter(client: &reqwest::Client, api: &str) -> Option<u64> {
    let resp = client.get(format!("{api}/__metrics")).send().await.ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let text = resp.text().await.ok()?;
    Some(seatgate::metrics::prometheus::sample(
        &text,
        "seatgate_bookings_total",
        &[("outcome", "booked")],
    ) as u64)
}

fn ms_between(from: Instant, to: Instant) -> f64 {
    to.saturating_duration_since(from).as_secs_f64() * 1000.0
}

/// Login, then one booking of one seat.
async fn iteration(
    client: &reqwest::Client,
    login_url: &str,
    book_url: &str,
    user: &str,
    t0: Instant,
) -> Sample {
    let started = Instant::now();
    let start_ms = ms_between(t0, started);
    let since = |at: Instant| at.elapsed().as_secs_f64() * 1000.0;
    let fail = |outcome: Outcome, login_ms: f64, failed_after_ms: Option<f64>| Sample {
        start_ms,
        login_ms,
        booking_ms: None,
        iteration_ms: None,
        failed_after_ms,
        outcome,
        booking_id: None,
    };
    let login = client
        .post(login_url)
        .json(&json!({ "sub": user }))
        .send()
        .await;
    let token = match login {
        Ok(r) if r.status() == reqwest::StatusCode::OK => match r.json::<Value>().await {
            Ok(v) => match v["token"].as_str() {
                Some(t) => t.to_owned(),
                None => return fail(Outcome::LoginStatus(200), since(started), None),
            },
            Err(e) => return fail(Outcome::LoginTransport(e.to_string()), since(started), None),
        },
        Ok(r) => {
            return fail(
                Outcome::LoginStatus(r.status().as_u16()),
                since(started),
                None,
            );
        }
        Err(e) => return fail(Outcome::LoginTransport(e.to_string()), since(started), None),
    };
    let login_ms = since(started);
    let sent = Instant::now();
    let resp = client
        .post(book_url)
        .bearer_auth(&token)
        .json(&json!({ "headCount": 1 }))
        .send()
        .await;
    let (outcome, booking_id) = match resp {
        Ok(r) => {
            let status = r.status().as_u16();
            let body: Value = match r.bytes().await {
                Ok(b) => serde_json::from_slice(&b).unwrap_or(Value::Null),
                Err(e) => {
                    return fail(
                        Outcome::Transport(e.to_string()),
                        login_ms,
                        Some(since(sent)),
                    );
                }
            };
            match status {
                201 => match body["booking_id"].as_str() {
                    Some(id) => (Outcome::Created, Some(id.to_owned())),
                    None => (Outcome::Server(201), None),
                },
                409 if body["error"] == "sold_out" => (Outcome::SoldOut, None),
                409 => (
                    Outcome::Conflict(body["error"].as_str().unwrap_or("?").to_owned()),
                    None,
                ),
                s if s >= 500 => (Outcome::Server(s), None),
                s => (Outcome::Client(s), None),
            }
        }
        Err(e) => {
            return fail(
                Outcome::Transport(e.to_string()),
                login_ms,
                Some(since(sent)),
            );
        }
    };
    let booking_ms = since(sent);
    Sample {
        start_ms,
        login_ms,
        booking_ms: Some(booking_ms),
        iteration_ms: Some(since(started)),
        failed_after_ms: None,
        outcome,
        booking_id,
    }
}

/// The latency target of this rate, if one is defined: (text, met).
fn latency_target(s: &StepResult) -> Option<(String, bool)> {
    let p95 = s.booking_all().p95;
    if s.rate == 400.0 {
        Some(("booking p95 <= 10 ms".into(), p95 <= 10.0))
    } else if s.rate == 2000.0 {
        Some((
            "booking p95 <= 20 ms, 0 dropped".into(),
            p95 <= 20.0 && s.dropped() == 0,
        ))
    } else {
        None
    }
}

fn print_step_line(s: &StepResult) {
    let b = s.booking_all();
    println!(
        "{}/s: started {} of {} ({:.0}/s achieved), dropped {} | 201={} 409={} other4xx={} 5xx={} transport={} | stored {} available {} | booking p50/p95/p99 {:.1}/{:.1}/{:.1} ms | iteration p95 {:.1} ms | {}",
        s.rate,
        s.started,
        s.scheduled,
        s.achieved_rate(),
        s.dropped(),
        s.created(),
        s.sold_out() + s.conflict_other(),
        s.client(),
        s.server(),
        s.transport(),
        s.stored,
        s.available,
        b.p50,
        b.p95,
        b.p99,
        s.iteration().p95,
        if s.correctness().is_empty() {
            "correct"
        } else {
            "INCORRECT"
        }
    );
}

fn print_step(cli: &Cli, s: &StepResult) {
    let mark = |ok: bool| if ok { "PASS" } else { "FAIL" };
    let capacity = s.capacity as usize;
    let mut rows: Vec<(String, String, String, String)> = Vec::new();
    let mut row = |name: &str, value: String, target: String, verdict: &str| {
        rows.push((name.into(), value, target, verdict.into()))
    };
    row(
        "iterations scheduled",
        s.scheduled.to_string(),
        String::new(),
        "",
    );
    row(
        "iterations started",
        s.started.to_string(),
        String::new(),
        "",
    );
    row(
        "dropped (late / cap full)",
        format!("{} / {}", s.dropped_late, s.dropped_full),
        String::new(),
        "",
    );
    row(
        "achieved rate (it/s)",
        format!("{:.1}", s.achieved_rate()),
        format!("= {}", s.rate),
        "",
    );
    row(
        "max scheduler lag (ms)",
        format!("{:.1}", s.max_lag_ms),
        format!("drop past {}", cli.lateness.as_millis()),
        "",
    );
    row("201 booked", s.created().to_string(), String::new(), "");
    row("409 sold_out", s.sold_out().to_string(), String::new(), "");
    row(
        "409 other",
        s.conflict_other().to_string(),
        String::new(),
        "",
    );
    row("other 4xx", s.client().to_string(), String::new(), "");
    row(
        "5xx",
        s.server().to_string(),
        "= 0".into(),
        mark(s.server() == 0),
    );
    row(
        "transport errors",
        s.transport().to_string(),
        String::new(),
        "",
    );
    row(
        "login failures",
        s.login_failed().to_string(),
        String::new(),
        "",
    );
    let sold_target = if s.demand_exceeds_capacity() {
        format!("= 201s = {capacity}")
    } else {
        "= 201s".into()
    };
    let sold_ok = s.stored == s.created()
        && s.stored_missing_201 == 0
        && s.created_not_stored == 0
        && (!s.demand_exceeds_capacity() || s.stored == capacity);
    row(
        "bookings stored",
        s.stored.to_string(),
        sold_target,
        mark(sold_ok),
    );
    row(
        "no oversell",
        format!("{} <= {capacity}", s.stored.max(s.created())),
        "<= capacity".into(),
        mark(s.stored <= capacity && s.created() <= capacity),
    );
    row(
        "available",
        s.available.to_string(),
        format!("= {}", capacity as i64 - s.stored as i64),
        mark(s.available == capacity as i64 - s.stored as i64),
    );
    let target = latency_target(s);
    for (name, p) in [
        ("booking (all answers)", s.booking_all()),
        ("booking 201", s.booking(|o| *o == Outcome::Created)),
        ("booking 409", s.booking(|o| *o == Outcome::SoldOut)),
        ("login", s.login()),
        ("login+booking", s.iteration()),
    ] {
        let first = name == "booking (all answers)";
        let (t, v) = match (&target, first) {
            (Some((t, ok)), true) => (t.clone(), mark(*ok)),
            _ => (String::new(), ""),
        };
        row(
            &format!("{name} p50/p95/p99 ms"),
            format!("{:.1}/{:.1}/{:.1}", p.p50, p.p95, p.p99),
            t,
            v,
        );
    }
    println!();
    println!(
        "flash-sale  rate={}/s  duration={:?}  capacity={}  shards={}  users={}  target={}  flight={}",
        s.rate,
        s.duration,
        s.capacity,
        s.shards,
        cli.users,
        super::target_name(cli),
        s.flight_id
    );
    println!("{:<30} {:>18}  {:<24} verdict", "metric", "value", "target");
    println!("{}", "-".repeat(84));
    for (name, value, target, verdict) in rows {
        println!("{name:<30} {value:>18}  {target:<24} {verdict}");
    }
    println!("{}", "-".repeat(84));
    println!(
        "correctness: {}   latency target: {}",
        mark(s.correctness().is_empty()),
        target.map_or("n/a (defined at 400/s and 2000/s)".to_owned(), |(t, ok)| {
            format!("{} ({t})", mark(ok))
        })
    );
}

/// Seed 004's results beside this run's.
fn print_seed_table(s: &StepResult) {
    let b = s.booking_all();
    println!();
    println!(
        "beside seed 004 (k6 constant-arrival-rate 400 it/s for 10 s, login + booking, 300 seats)"
    );
    println!(
        "{:<28} {:>14}  {:<44}",
        "approach", "sold of 300", "latency"
    );
    println!("{}", "-".repeat(90));
    for (name, sold, latency) in [
        ("seed: synchronized", "497 (oversold)", "-"),
        ("seed: optimistic lock", "13", "-"),
        (
            "seed: pessimistic lock",
            "300",
            "~350 ms (k6 http_req_duration)",
        ),
        ("seed: MySQL named lock", "300", "~303 ms"),
        ("seed: Redis spin lock", "300", "~1 s"),
        ("seed: Redisson", "300", "~378 ms"),
    ] {
        println!("{name:<28} {sold:>14}  {latency:<44}");
    }
    println!(
        "{:<28} {:>14}  {:<44}",
        format!("seatgate ({}/s)", s.rate),
        format!("{} of {}", s.stored, s.capacity),
        format!(
            "booking p50/p95 {:.1}/{:.1} ms; login+booking p95 {:.1} ms",
            b.p50,
            b.p95,
            s.iteration().p95
        )
    );
}

fn plot_path(cli: &Cli, rate: Option<f64>) -> PathBuf {
    let base = cli
        .plot
        .clone()
        .unwrap_or_else(|| PathBuf::from("target/flash-sale.svg"));
    match rate {
        None => base,
        Some(r) => {
            let stem = base
                .file_stem()
                .map_or("flash-sale".into(), |s| s.to_string_lossy().into_owned());
            base.with_file_name(format!("{stem}-{}.svg", r as u64))
        }
    }
}

fn plot_title(cli: &Cli, s: &StepResult) -> String {
    format!(
        "flash-sale: booking latency over time ({}/s for {:.0} s, {} seats, {} shard(s), {})",
        s.rate,
        s.duration.as_secs_f64(),
        s.capacity,
        s.shards,
        super::target_name(cli)
    )
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Hand-written SVG: booking latency (log scale) against time since the start; a scatter of
/// the answers (201 blue, 409 grey, other red) under per-100 ms p50 / p95 / max lines, dropped
/// slots as red ticks on the time axis.
fn write_svg(path: &Path, s: &StepResult, title: &str) -> anyhow::Result<()> {
    let svg = render_svg(s, title);
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))
}

fn render_svg(s: &StepResult, title: &str) -> String {
    let (w, h) = (1000.0_f64, 520.0_f64);
    let (left, right, top, bottom) = (70.0, 20.0, 40.0, 60.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    // Points: (x ms of the booking's send ~ iteration start, latency ms, class).
    let points: Vec<(f64, f64, &Outcome)> = s
        .samples
        .iter()
        .filter_map(|x| {
            x.booking_ms
                .map(|b| (x.start_ms + x.login_ms, b, &x.outcome))
        })
        .collect();
    // Bookings that got no answer, at the time they failed.
    let failures: Vec<(f64, f64)> = s
        .samples
        .iter()
        .filter_map(|x| x.failed_after_ms.map(|f| (x.start_ms + x.login_ms, f)))
        .collect();
    // x is when the booking was sent.
    let x_max_ms = points
        .iter()
        .map(|p| p.0)
        .chain(failures.iter().map(|f| f.0))
        .fold(s.duration.as_secs_f64() * 1000.0, f64::max);
    let x_max_s = (x_max_ms / 1000.0).ceil().max(1.0);
    let y_max = points
        .iter()
        .map(|p| p.1)
        .chain(failures.iter().map(|f| f.1))
        .fold(1.0, f64::max);
    let y_min = points.iter().map(|p| p.1).fold(y_max, f64::min).max(0.01);
    let (lo, hi) = (
        y_min.log10().floor(),
        y_max.log10().ceil().max(y_min.log10().floor() + 1.0),
    );
    let x = |ms: f64| left + pw * (ms / 1000.0 / x_max_s);
    let y = |v: f64| top + ph * (1.0 - (v.max(0.01).log10() - lo) / (hi - lo));
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
        w / 2.0,
        esc(title)
    );
    // Grid and axes.
    let mut decade = lo;
    while decade <= hi + 1e-9 {
        let v = 10f64.powf(decade);
        let yy = y(v);
        let _ = writeln!(
            o,
            r##"<line x1="{left}" y1="{yy:.1}" x2="{}" y2="{yy:.1}" stroke="#ddd"/>"##,
            left + pw
        );
        let label = if v >= 1.0 {
            format!("{v:.0}")
        } else {
            format!("{v}")
        };
        let _ = writeln!(
            o,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{label}</text>"#,
            left - 6.0,
            yy + 4.0
        );
        decade += 1.0;
    }
    let step_s = if x_max_s > 30.0 { 5.0 } else { 1.0 };
    let mut t = 0.0;
    while t <= x_max_s + 1e-9 {
        let xx = x(t * 1000.0);
        let _ = writeln!(
            o,
            r##"<line x1="{xx:.1}" y1="{top}" x2="{xx:.1}" y2="{}" stroke="#eee"/>"##,
            top + ph
        );
        let _ = writeln!(
            o,
            r#"<text x="{xx:.1}" y="{}" text-anchor="middle">{t:.0}</text>"#,
            top + ph + 18.0
        );
        t += step_s;
    }
    let _ = writeln!(
        o,
        r#"<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="black"/>"#
    );
    let _ = writeln!(
        o,
        r#"<text x="{}" y="{}" text-anchor="middle">time since start (s)</text>"#,
        left + pw / 2.0,
        h - 22.0
    );
    let _ = writeln!(
        o,
        r#"<text x="18" y="{}" text-anchor="middle" transform="rotate(-90 18 {})">booking latency (ms, log scale)</text>"#,
        top + ph / 2.0,
        top + ph / 2.0
    );
    // Scatter, thinned to at most 20,000 points.
    let stride = (points.len() / 20_000).max(1);
    let _ = writeln!(o, r#"<g fill-opacity="0.35">"#);
    for (px, py, outcome) in points.iter().step_by(stride) {
        let colour = match outcome {
            Outcome::Created => "#1f77b4",
            Outcome::SoldOut => "#888",
            _ => "#d62728",
        };
        let _ = writeln!(
            o,
            r#"<circle cx="{:.1}" cy="{:.1}" r="1.5" fill="{colour}"/>"#,
            x(*px),
            y(*py)
        );
    }
    let _ = writeln!(o, "</g>");
    for (px, py) in failures.iter().step_by((failures.len() / 5_000).max(1)) {
        let (cx, cy) = (x(*px), y(*py));
        let _ = writeln!(
            o,
            r##"<path d="M{:.1},{:.1}l6,6m0,-6l-6,6" stroke="#d62728" fill="none"/>"##,
            cx - 3.0,
            cy - 3.0
        );
    }
    // Per-100 ms lines, broken where a bucket had no answer.
    let mut buckets: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for (px, py, _) in &points {
        buckets.entry((px / 100.0) as u64).or_default().push(*py);
    }
    let lines: Vec<(u64, Pcts)> = buckets
        .into_iter()
        .map(|(b, xs)| (b, percentiles(&xs)))
        .collect();
    for (pick, colour, dash) in [
        (0usize, "#2ca02c", ""),
        (1, "#ff7f0e", ""),
        (2, "#d62728", r#" stroke-dasharray="4 3""#),
    ] {
        let mut d = String::new();
        let mut previous: Option<u64> = None;
        for (b, p) in &lines {
            let v = [p.p50, p.p95, p.max][pick];
            let cmd = if previous.is_some_and(|q| q + 1 == *b) {
                'L'
            } else {
                'M'
            };
            let _ = write!(d, "{cmd}{:.1},{:.1} ", x(*b as f64 * 100.0 + 50.0), y(v));
            previous = Some(*b);
        }
        let _ = writeln!(
            o,
            r#"<path class="line" d="{}" fill="none" stroke="{colour}" stroke-width="1.5"{dash}/>"#,
            d.trim_end()
        );
    }
    // Dropped slots.
    for d in &s.dropped_at {
        let xx = x(*d);
        let _ = writeln!(
            o,
            r##"<line x1="{xx:.1}" y1="{}" x2="{xx:.1}" y2="{}" stroke="#d62728"/>"##,
            top + ph - 8.0,
            top + ph
        );
    }
    // Legend.
    let items = [
        ("#1f77b4", "201 booked"),
        ("#888", "409 sold out"),
        ("#d62728", "error: dot, x no answer, | dropped"),
        ("#2ca02c", "p50 per 100 ms"),
        ("#ff7f0e", "p95 per 100 ms"),
        ("#d62728", "max per 100 ms (dashed)"),
    ];
    let mut lx = left;
    for (colour, label) in items {
        let _ = writeln!(
            o,
            r#"<rect x="{lx}" y="{}" width="10" height="10" fill="{colour}"/><text x="{}" y="{}">{}</text>"#,
            h - 12.0,
            lx + 14.0,
            h - 3.0,
            esc(label)
        );
        lx += 24.0 + 6.6 * label.len() as f64;
    }
    let b = s.booking_all();
    let _ = writeln!(
        o,
        r#"<text x="{}" y="{}" text-anchor="end" font-size="11">{} answers, {} dropped; booking p50/p95/p99 {:.1}/{:.1}/{:.1} ms</text>"#,
        left + pw - 6.0,
        top + 14.0,
        points.len(),
        s.dropped(),
        b.p50,
        b.p95,
        b.p99
    );
    let _ = writeln!(o, "</svg>");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(start_ms: f64, booking_ms: f64, outcome: Outcome) -> Sample {
        let booking_id = (outcome == Outcome::Created).then(|| format!("b{start_ms}"));
        Sample {
            start_ms,
            login_ms: 0.5,
            booking_ms: Some(booking_ms),
            iteration_ms: Some(booking_ms + 0.5),
            failed_after_ms: None,
            outcome,
            booking_id,
        }
    }

    fn step(samples: Vec<Sample>, capacity: u32, stored: usize, available: i64) -> StepResult {
        StepResult {
            rate: 400.0,
            duration: Duration::from_secs(1),
            capacity,
            shards: 1,
            flight_id: "f".into(),
            scheduled: samples.len(),
            started: samples.len(),
            dropped_late: 0,
            dropped_full: 0,
            dropped_at: vec![],
            issued_for: Duration::from_secs(1),
            max_lag_ms: 0.0,
            samples,
            stored,
            stored_missing_201: 0,
            created_not_stored: 0,
            duplicate_201_ids: 0,
            available,
        }
    }

    #[test]
    fn a_sold_out_run_is_correct_and_an_oversold_one_is_not() {
        let mut xs: Vec<Sample> = (0..3)
            .map(|i| sample(i as f64, 2.0, Outcome::Created))
            .collect();
        xs.push(sample(5.0, 1.0, Outcome::SoldOut));
        let ok = step(xs.clone(), 3, 3, 0);
        assert!(ok.correctness().is_empty(), "{:?}", ok.correctness());
        assert!(ok.saturation_ok());

        let oversold = step(xs.clone(), 2, 3, -1);
        assert!(!oversold.correctness().is_empty());

        // Demand above capacity but a seat left unsold.
        let mut short = xs.clone();
        short[0].outcome = Outcome::SoldOut;
        short[0].booking_id = None;
        let unsold = step(short, 3, 2, 1);
        assert!(
            unsold
                .correctness()
                .iter()
                .any(|w| w.contains("exceeded capacity"))
        );

        let mut broken = xs;
        broken.push(sample(6.0, 1.0, Outcome::Server(500)));
        assert!(!step(broken, 3, 3, 0).correctness().is_empty());
    }

    #[test]
    fn the_svg_has_a_title_axes_and_lines() {
        let xs: Vec<Sample> = (0..500)
            .map(|i| sample(i as f64 * 2.0, 1.0 + (i % 7) as f64, Outcome::Created))
            .collect();
        let svg = render_svg(&step(xs, 500, 500, 0), "t <1>");
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("t &lt;1&gt;"));
        assert!(svg.contains("time since start (s)"));
        assert_eq!(svg.matches(r#"class="line""#).count(), 3);
    }

    #[test]
    fn saturation_plots_are_named_by_rate() {
        assert_eq!(
            plot_path_from(Some(PathBuf::from("target/x.svg")), Some(2000.0)),
            PathBuf::from("target/x-2000.svg")
        );
        assert_eq!(
            plot_path_from(None, None),
            PathBuf::from("target/flash-sale.svg")
        );
    }

    fn plot_path_from(plot: Option<PathBuf>, rate: Option<f64>) -> PathBuf {
        use clap::Parser as _;
        let mut cli = Cli::parse_from(["seatgate-bench", "flash-sale"]);
        cli.plot = plot;
        plot_path(&cli, rate)
    }
}
