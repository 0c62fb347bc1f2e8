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

use serde::{Deserialize, Serialize};

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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

#[derive(Debug, Clone, Serialize, Deserialize)]
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

/// One run at one rate (whole, with every sample, across `drive`'s process boundary).
#[derive(Debug, Clone, Serialize, Deserialize)]
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
        let key = cli.keys.then(|| format!("{tag}-{i}"));
        tasks.push(tokio::spawn(async move {
            let sample = iteration(&client, &login_url, &book_url, &user, key, t0).await;
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

/// Login, then one booking of one seat (under `key` if given).
async fn iteration(
    client: &reqwest::Client,
    login_url: &str,
    book_url: &str,
    user: &str,
    key: Option<String>,
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
    let mut request = client
        .post(book_url)
        .bearer_auth(&token)
        .json(&json!({ "headCount": 1 }));
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    let resp = request.send().await;
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

pub(crate) mod drive;
mod plot;
mod report;
#[cfg(test)]
mod tests;

use plot::{plot_path, plot_title, write_svg};
use report::{latency_target, print_seed_table, print_step, print_step_line};
