//! `outage`: the upstream goes down while confirms and reads arrive, and comes back; the
//! breaker's timeline laid over the simulator's call log, and each confirm's time to its end.

use super::*;

/// The outage scenario; `Ok((correct, after, longest))`: the seconds from the upstream's
/// recovery to the terminal write (its `updated_at`) of the last confirm sent during the
/// outage, and the longest any confirm took from its send to its terminal write.
pub(super) async fn outage(
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
