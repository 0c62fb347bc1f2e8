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

pub(super) fn pcts_json_fine(p: &Pcts) -> Value {
    let r = |x: f64| (x * 100.0).round() / 100.0;
    json!({ "p50": r(p.p50), "p95": r(p.p95), "p99": r(p.p99), "max": r(p.max) })
}
