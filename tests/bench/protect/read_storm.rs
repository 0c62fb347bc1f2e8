//! `read-storm`: many readers of one seat across the fleet, and how few of their reads reach the
//! upstream.

use super::*;

#[derive(Default)]
pub(super) struct ReadTally {
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

/// The read-storm scenario, once on `fleet`; `Ok(false)` when a correctness target failed.
pub(super) async fn read_storm(
    cli: &Cli,
    fleet: &Fleet,
    client: &reqwest::Client,
) -> anyhow::Result<bool> {
    let count = cli.reads;
    ensure!(count >= 1, "--reads must be at least 1");
    let clients = cli.clients.clamp(1, count);
    let seat = format!("storm-{}", tag());
    let token = dev_token(client, fleet.api(0), "storm-reader", false).await?;
    let before = upstream_stats(client, &fleet.upstream).await?;
    let log_from = wall_ms() as i64;
    let storm = Storm {
        spacing_secs: cli.storm_for.as_secs_f64() / count as f64,
        seat,
        token,
        count,
        clients,
    };
    eprintln!(
        "read-storm: {count} reads of {} over {:?} from {clients} clients on {} instances",
        storm.seat,
        cli.storm_for,
        fleet.apis.len()
    );
    let (tally, elapsed) = storm.send(fleet, client).await?;
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
    let latency = percentiles(&tally.latency_ms);
    let report = StormReport {
        cli,
        fleet,
        count,
        clients,
        elapsed,
        upstream_calls,
        bound,
        nominal_bound,
        ratio: answered as f64 / upstream_calls.max(1) as f64,
        most_in_ttl,
        min_gap,
        non_200,
        latency_ok: latency.p95 < 5.0,
        latency,
        tally,
    };
    Ok(report.print())
}

/// One storm's shape: `count` reads of one seat evenly spaced over `--storm-for`, read i sent
/// by client i mod `clients`, each client on an instance of its own in turn.
struct Storm {
    seat: String,
    token: String,
    count: usize,
    clients: usize,
    /// The time between two reads' scheduled starts (s).
    spacing_secs: f64,
}

impl Storm {
    /// Sends the storm, each client on a task of its own, every read at its scheduled time;
    /// the answers merged, and how long the storm took.
    async fn send(
        &self,
        fleet: &Fleet,
        client: &reqwest::Client,
    ) -> anyhow::Result<(ReadTally, Duration)> {
        let (count, clients, spacing) = (self.count, self.clients, self.spacing_secs);
        let started = tokio::time::Instant::now();
        let t0 = Instant::now();
        let mut tasks = Vec::with_capacity(clients);
        for k in 0..clients {
            let client = client.clone();
            let url = format!("{}/seats/{}", fleet.api(k), self.seat);
            let token = self.token.clone();
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
        Ok((tally, t0.elapsed()))
    }
}

/// The storm's figures against the bound, for the verdict, the table and the JSON
/// line.
struct StormReport<'a> {
    cli: &'a Cli,
    fleet: &'a Fleet,
    count: usize,
    clients: usize,
    elapsed: Duration,
    /// Upstream `GET /api/seats` calls during the storm, by the simulator's counts.
    upstream_calls: u64,
    bound: u64,
    nominal_bound: u64,
    /// Reads answered per upstream call.
    ratio: f64,
    most_in_ttl: usize,
    min_gap: Option<i64>,
    non_200: usize,
    latency: Pcts,
    /// The latency target (p95 < 5 ms), judged on the embedded backend only.
    latency_ok: bool,
    tally: ReadTally,
}

impl StormReport<'_> {
    /// Prints the unexpected answers, the table, the verdict and the JSON line; whether the
    /// run was correct.
    fn print(&self) -> bool {
        let correct = self.upstream_calls <= self.bound && self.non_200 == 0;
        let embedded = self.embedded();
        for e in &self.tally.examples {
            eprintln!("unexpected read answer: {e}");
        }
        print_rows(&self.title(), &self.rows());
        println!(
            "correctness: {}   latency target (p95 < 5 ms, embedded): {}",
            mark(correct),
            if embedded {
                mark(self.latency_ok)
            } else {
                "n/a"
            }
        );
        println!("{}", self.json(correct));
        correct
    }

    /// Whether the latency target applies: it is set for the embedded backend; on the AWS one
    /// the read latency is reported, not judged.
    fn embedded(&self) -> bool {
        self.fleet.kind == BackendKind::Embedded
    }

    /// The table's heading: the storm's shape.
    fn title(&self) -> String {
        format!(
            "read-storm  instances={} reads={} over {:?} clients={} backend={:?} timing={:?}",
            self.fleet.apis.len(),
            self.count,
            self.cli.storm_for,
            self.clients,
            self.fleet.kind,
            timing_profile(self.cli)
        )
    }

    /// The table: the storm, the upstream reads against the bound, and the answers.
    fn rows(&self) -> Vec<(String, String, String, String)> {
        let (p, tally, non_200) = (&self.latency, &self.tally, self.non_200);
        let (upstream_calls, bound) = (self.upstream_calls, self.bound);
        vec![
            row("reads sent", self.count),
            row(
                "storm wall time (s)",
                format!("{:.2}", self.elapsed.as_secs_f64()),
            ),
            row(
                "achieved rate (reads/s)",
                format!("{:.0}", self.count as f64 / self.elapsed.as_secs_f64()),
            ),
            target_row(
                "upstream GET /api/seats during the storm",
                upstream_calls,
                format!("<= {bound}"),
                upstream_calls <= bound,
            ),
            row(
                "  bound for the nominal duration",
                format!("<= {}", self.nominal_bound),
            ),
            row("  seed 000 figure", "~42"),
            row(
                "collapse ratio (reads / upstream call)",
                format!("{:.0}", self.ratio),
            ),
            row(
                format!(
                    "most upstream reads in any {} ms",
                    self.fleet.timing.read_ttl.as_millis()
                ),
                self.most_in_ttl,
            ),
            row(
                "smallest gap between upstream reads (ms)",
                self.min_gap.map_or("-".into(), |g| g.to_string()),
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
            if self.embedded() {
                target_row(
                    "read p95 (ms)",
                    format!("{:.2}", p.p95),
                    "< 5",
                    self.latency_ok,
                )
            } else {
                row("read p95 (ms)", format!("{:.2}", p.p95))
            },
            row("read p99 (ms)", format!("{:.2}", p.p99)),
            row("read max (ms)", format!("{:.1}", p.max)),
        ]
    }

    /// The run's JSON line, for scripts comparing runs.
    fn json(&self, correct: bool) -> Value {
        let (cli, fleet, tally) = (self.cli, self.fleet, &self.tally);
        json!({
            "scenario": "read-storm",
            "backend": format!("{:?}", fleet.kind).to_lowercase(),
            "timing": format!("{:?}", timing_profile(cli)).to_lowercase(),
            "instances": fleet.apis.len(),
            "reads": self.count,
            "storm_ms": round(self.elapsed.as_secs_f64() * 1000.0),
            "clients": self.clients,
            "upstream_seat_reads": self.upstream_calls,
            "bound": self.bound,
            "collapse_ratio": round(self.ratio),
            "most_upstream_reads_in_ttl": self.most_in_ttl,
            "min_gap_ms": self.min_gap,
            "fresh": tally.fresh,
            "stale": tally.stale,
            "non_200": tally.non_200,
            "read_ms": pcts_json_fine(&self.latency),
            "correct": correct,
            "latency_target_met": if self.embedded() { Value::Bool(self.latency_ok) } else { Value::Null },
        })
    }
}

pub(super) fn pcts_json_fine(p: &Pcts) -> Value {
    let r = |x: f64| (x * 100.0).round() / 100.0;
    json!({ "p50": r(p.p50), "p95": r(p.p95), "p99": r(p.p99), "max": r(p.max) })
}
