//! The outage's figures and verdict, drawn from what one run observed: the breaker's timeline
//! and open phases laid over the simulator's call log, the reads by answer and period, the
//! failures against the targets, and the table and JSON line.

use super::*;

/// Prints the outage's timeline, call excerpts, table and JSON line; returns what
/// [`outage`] does: `(correct, after, longest)`.
pub(super) fn report(run: &OutageRun, observed: &Observed) -> (bool, f64, f64) {
    let calls = CallFigures::new(run, observed);
    print_timeline(observed);
    print_open_phases(observed, &calls.phases);
    print_excerpts(observed, &calls);
    let reads = ReadFigures::new(observed, &calls.phases);
    reads.log_examples();
    let report = Report {
        run,
        observed,
        calls,
        reads,
    };
    let why = report.failures();
    for w in &why {
        eprintln!("FAIL: {w}");
    }
    let correct = why.is_empty();
    print_rows(&report.title(), &report.rows());
    println!("correctness: {}", mark(correct));
    println!("{}", report.json(correct, why));
    let settled = &observed.settled;
    (correct, settled.after_recovery_s, settled.longest_s)
}

/// The upstream calls counted against the breaker's open phases: what the targets for
/// the onset, the open interval and the probes are judged on.
struct CallFigures {
    /// `instance_cache_ttl` (ms): calls within it of an opening may come from instances that
    /// have not seen the Open item yet.
    cache_ttl: i64,
    phases: Vec<OpenPhase>,
    /// Openings from closed (a failure rate), as against reopenings after a failed probe.
    openings: usize,
    first_open: Option<i64>,
    calls_outage_before_open: usize,
    /// With `--outage-retry-after`: the calls made before a Retry-After had passed.
    early_calls: Option<upstream_sim::judge::RetryAfterJudgement>,
    calls_open_total: usize,
    calls_rest_total: usize,
    reopen_first_ttl: usize,
    initial_first_ttl: usize,
    /// The probes of each complete half-open interval.
    probes: Vec<usize>,
    probes_ok: bool,
}

impl CallFigures {
    /// Lays the breaker's open phases over the call log and counts the calls each target
    /// judges.
    fn new(run: &OutageRun, observed: &Observed) -> CallFigures {
        let cli = run.cli;
        let calls = &observed.calls;
        let fault_sent = observed.snapshot.fault_sent;
        let cache_ttl = run.fleet.timing.instance_cache_ttl.as_millis() as i64;
        let phases = open_phases(&observed.seen, calls, cache_ttl, observed.run_end_ms);
        let openings = phases.iter().filter(|p| p.from_closed).count();
        let first_open = phases.iter().find(|p| p.from_closed).map(|p| p.since);
        let calls_outage_before_open =
            first_open.map_or(0, |o| count_in(calls, fault_sent as i64, o));
        let outage_end = fault_sent as i64 + cli.outage_for.as_millis() as i64;
        let early_calls = (cli.outage_retry_after > 0).then(|| {
            calls_before_retry_after(
                calls,
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
        // After a reopening, a call in the very millisecond of the Open write is the failed
        // probe (counted as the previous half-open interval's probe); anything later is not.
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
        let probes: Vec<usize> = phases
            .iter()
            .filter_map(|p| p.half_open.as_ref())
            .filter(|h| h.ended_by.is_some())
            .map(|h| h.probes)
            .collect();
        let one_probe_each = !probes.is_empty() && probes.iter().all(|&n| n == 1);
        // With a Retry-After on the outage's answers the routes are held and the breaker need
        // not open at all: then there is no half-open interval to judge.
        let probes_ok = one_probe_each || (phases.is_empty() && cli.outage_retry_after > 0);
        CallFigures {
            cache_ttl,
            phases,
            openings,
            first_open,
            calls_outage_before_open,
            early_calls,
            calls_open_total,
            calls_rest_total,
            reopen_first_ttl,
            initial_first_ttl,
            probes,
            probes_ok,
        }
    }
}

/// The breaker's states as the poller saw them, on the load's clock, for the record.
fn print_timeline(observed: &Observed) {
    let (start, seen) = (observed.start, &observed.seen);
    println!();
    println!(
        "breaker timeline (t = s since load start; outage set at t={:.3}, upstream back at t={:.3}; {} states seen, {} poll errors):",
        start.rel_s(observed.snapshot.fault_sent),
        start.rel_s(observed.snapshot.recovery),
        seen.len(),
        observed.poll_errors
    );
    for s in seen {
        let detail = match &s.state.phase {
            BreakerPhase::Closed => String::new(),
            BreakerPhase::Open { until } => format!(" until t={:.3}", start.rel_s(until.0 as f64)),
            BreakerPhase::Probing { holder, until } => {
                format!(
                    " holder {holder} lease until t={:.3}",
                    start.rel_s(until.0 as f64)
                )
            }
        };
        println!(
            "  gen {:>3} {:<8} since t={:>8} (seen t={:.3}){detail}",
            s.state.generation,
            phase_name(&s.state.phase),
            if s.state.since.0 == 0 {
                "-".to_owned()
            } else {
                format!("{:.3}", start.rel_s(s.state.since.0 as f64))
            },
            start.rel_s(s.seen_ms)
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
}

/// One row per open phase: the calls at its opening, in its first cache TTL and after, and
/// its half-open interval's calls and probes.
fn print_open_phases(observed: &Observed, phases: &[OpenPhase]) {
    let rel = |ms: f64| observed.start.rel_s(ms);
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
    for p in phases {
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
}

/// Call log excerpts around each transition, for the record: by route, the calls from the
/// outage's start to the first opening, just after it, and in any open phase that had some.
fn print_excerpts(observed: &Observed, figures: &CallFigures) {
    let calls = &observed.calls;
    let fault_sent = observed.snapshot.fault_sent;
    let cache_ttl = figures.cache_ttl;
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
    if let Some(o) = figures.first_open {
        println!(
            "calls from the outage's start to the first opening (t={:.3}..{:.3}): {}",
            observed.start.rel_s(fault_sent),
            observed.start.rel_s(o as f64),
            excerpt(fault_sent as i64, o)
        );
        println!(
            "calls in the first {cache_ttl} ms after it: {}",
            excerpt(o, o + cache_ttl)
        );
    }
    for p in figures
        .phases
        .iter()
        .filter(|p| p.rest > 0 || (!p.from_closed && p.first_cache_ttl > 0))
    {
        println!(
            "gen {} open: calls {}",
            p.generation,
            excerpt(p.since, p.until)
        );
    }
}

/// The answers the load got, by kind and by the run's period, and how many arrived while the
/// breaker was open.
struct ReadFigures {
    /// Reads by (answer kind, period), plus cold seats answered 200 during the outage.
    reads_by: BTreeMap<(&'static str, &'static str), usize>,
    /// Read answers neither a reading nor the upstream-unavailable 503.
    unexpected: Vec<String>,
    missing_retry_after: usize,
    read_lat: Pcts,
    /// Confirms not accepted, why each.
    confirm_errors: Vec<String>,
    confirm_lat: Pcts,
    arrived_open: usize,
    open_ms: i64,
}

impl ReadFigures {
    /// Sorts the load's answers by kind and period and takes their latencies.
    fn new(observed: &Observed, phases: &[OpenPhase]) -> ReadFigures {
        let (reads, confirms) = (&observed.load.reads, &observed.load.confirms);
        let period = |ms: f64| observed.snapshot.period(ms);
        let mut reads_by: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        let mut unexpected: Vec<String> = Vec::new();
        let mut missing_retry_after = 0;
        for r in reads {
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
        let read_lat = percentiles(&reads.iter().map(|r| r.latency_ms).collect::<Vec<_>>());
        let confirm_errors: Vec<String> = confirms.iter().filter_map(|c| c.error.clone()).collect();
        let confirm_lat = percentiles(&confirms.iter().map(|c| c.latency_ms).collect::<Vec<_>>());
        let arrived_open: usize = reads
            .iter()
            .map(|r| r.sent_ms)
            .chain(confirms.iter().map(|c| c.sent_ms))
            .filter(|&t| {
                phases
                    .iter()
                    .any(|p| t >= p.since as f64 && t < p.until as f64)
            })
            .count();
        let open_ms: i64 = phases.iter().map(|p| p.until - p.since).sum();
        ReadFigures {
            reads_by,
            unexpected,
            missing_retry_after,
            read_lat,
            confirm_errors,
            confirm_lat,
            arrived_open,
            open_ms,
        }
    }

    /// The first few refused confirms and unexpected read answers, to say what went wrong.
    fn log_examples(&self) {
        for e in self.confirm_errors.iter().take(5) {
            eprintln!("confirm failed: {e}");
        }
        for e in self.unexpected.iter().take(5) {
            eprintln!("unexpected read answer: {e}");
        }
    }

    /// One period's reads by answer kind, for the table.
    fn line(&self, period: &str) -> String {
        ["200 fresh", "200 stale", "503", "other"]
            .iter()
            .map(|k| {
                format!(
                    "{k}={}",
                    self.reads_by.get(&(*k, period)).copied().unwrap_or(0)
                )
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Everything the verdict, the table and the JSON line are drawn from.
struct Report<'a> {
    run: &'a OutageRun<'a>,
    observed: &'a Observed,
    calls: CallFigures,
    reads: ReadFigures,
}

impl Report<'_> {
    /// Outage intents neither terminal nor REQUESTED at the snapshot.
    fn snapshot_bad(&self) -> usize {
        self.observed
            .snapshot
            .tally
            .iter()
            .filter(|(s, _)| !(is_terminal_status(s) || s.as_str() == "REQUESTED"))
            .map(|(_, n)| *n)
            .sum()
    }

    /// The targets missed, each said in a line; none when the run is correct.
    fn failures(&self) -> Vec<String> {
        let (cli, c, r) = (self.run.cli, &self.calls, &self.reads);
        let (snapshot, settled) = (&self.observed.snapshot, &self.observed.settled);
        let cache_ttl = c.cache_ttl;
        let snapshot_bad = self.snapshot_bad();
        let failed_upstream = settled.tally.get("FAILED_UPSTREAM").copied().unwrap_or(0);
        let snapshot_failed_upstream = snapshot.tally.get("FAILED_UPSTREAM").copied().unwrap_or(0);
        let mut why = Vec::new();
        if c.calls_rest_total > 0 {
            why.push(format!(
                "{} upstream calls while open (after the first {cache_ttl} ms)",
                c.calls_rest_total
            ));
        }
        if c.reopen_first_ttl > 0 {
            why.push(format!(
                "{} upstream calls right after a reopening",
                c.reopen_first_ttl
            ));
        }
        // With a Retry-After on the outage's answers the breaker need not open at all.
        if !c.probes_ok {
            why.push(format!(
                "probes per half-open interval {:?}, not all 1",
                c.probes
            ));
        }
        // With a Retry-After on the outage's answers the routes are held instead: not a failure.
        if c.phases.is_empty() && cli.outage_retry_after == 0 {
            why.push("the breaker never opened".into());
        }
        if cli.outage_retry_after == 0 && c.calls_outage_before_open > ONSET_BOUND {
            why.push(format!(
                "{} upstream calls from the outage's start to the breaker opening (> {ONSET_BOUND})",
                c.calls_outage_before_open
            ));
        }
        if let Some(j) = c.early_calls.filter(|j| j.early > 0) {
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
        if !snapshot.lost.is_empty() || !settled.lost.is_empty() {
            why.push(format!(
                "{} intents unreadable (lost)",
                snapshot.lost.len().max(settled.lost.len())
            ));
        }
        if !r.confirm_errors.is_empty() {
            why.push(format!("{} confirms not accepted", r.confirm_errors.len()));
        }
        if !r.unexpected.is_empty() {
            why.push(format!("{} unexpected read answers", r.unexpected.len()));
        }
        if r.missing_retry_after > 0 {
            why.push(format!(
                "{} 503 reads without Retry-After",
                r.missing_retry_after
            ));
        }
        why
    }

    /// The table's heading: the run's shape.
    fn title(&self) -> String {
        let (cli, fleet) = (self.run.cli, self.run.fleet);
        format!(
            "outage  instances={} rate={}/s for {:?} outage {:?}+{:?} backend={:?} timing={:?}",
            fleet.apis.len(),
            self.run.rate,
            cli.load_for,
            cli.outage_at,
            cli.outage_for,
            fleet.kind,
            timing_profile(cli)
        )
    }

    /// The table: the load, the breaker's phases and the calls against them, the reads, and
    /// how the confirms ended.
    fn rows(&self) -> Vec<(String, String, String, String)> {
        let (cli, c, r) = (self.run.cli, &self.calls, &self.reads);
        let (load, snapshot, settled) = (
            &self.observed.load,
            &self.observed.snapshot,
            &self.observed.settled,
        );
        let rel = |ms: f64| self.observed.start.rel_s(ms);
        let cache_ttl = c.cache_ttl;
        vec![
            row(
                "requests sent (reads + confirms)",
                format!(
                    "{} ({} + {})",
                    load.reads.len() + load.confirms.len(),
                    load.reads.len(),
                    load.confirms.len()
                ),
            ),
            row(
                "breaker open in total (s)",
                format!("{:.1}", r.open_ms as f64 / 1000.0),
            ),
            row("requests arriving while open", r.arrived_open),
            row(
                "  seed 000 (~40 s open at 25 RPS)",
                "~1,000 arrived, 0 upstream",
            ),
            row("breaker openings (from closed)", c.openings),
            row("open phases (openings + reopenings)", c.phases.len()),
            target_row(
                "upstream calls, outage start -> first opening",
                c.calls_outage_before_open,
                format!("<= {ONSET_BOUND}"),
                c.calls_outage_before_open <= ONSET_BOUND || cli.outage_retry_after > 0,
            ),
            target_row(
                "upstream calls before a Retry-After passed",
                c.early_calls
                    .map_or("n/a (no Retry-After)".to_owned(), |j| {
                        format!("{} (+{} in flight when given)", j.early, j.in_flight)
                    }),
                format!("= 0 (after {IN_FLIGHT_MS} ms)"),
                c.early_calls.is_none_or(|j| j.early == 0),
            ),
            row(
                format!("upstream calls, opening ms + first {cache_ttl} ms"),
                format!("{} (excluded)", c.initial_first_ttl),
            ),
            target_row(
                format!("upstream calls 1..{cache_ttl} ms after a reopening"),
                c.reopen_first_ttl,
                "= 0",
                c.reopen_first_ttl == 0,
            ),
            target_row(
                format!("upstream calls while open, after {cache_ttl} ms"),
                c.calls_rest_total,
                "= 0",
                c.calls_rest_total == 0,
            ),
            row("upstream calls while open, strictly", c.calls_open_total),
            target_row(
                "probes per complete half-open interval",
                format!("{:?}", c.probes),
                "all = 1",
                c.probes_ok,
            ),
            row("reads before outage", r.line("before")),
            row("reads during outage", r.line("outage")),
            row("reads after recovery", r.line("after")),
            row(
                "read latency p50/p95/p99 (ms)",
                format!(
                    "{:.1}/{:.1}/{:.1}",
                    r.read_lat.p50, r.read_lat.p95, r.read_lat.p99
                ),
            ),
            row(
                "prepare+confirm latency p50/p95/p99 (ms)",
                format!(
                    "{:.1}/{:.1}/{:.1}",
                    r.confirm_lat.p50, r.confirm_lat.p95, r.confirm_lat.p99
                ),
            ),
            target_row(
                format!(
                    "outage confirms at t={:.1} ({})",
                    rel(snapshot.taken_at),
                    snapshot.confirms
                ),
                tally_line(&snapshot.tally),
                "terminal|REQ",
                self.snapshot_bad() == 0 && snapshot.lost.is_empty(),
            ),
            target_row(
                format!("all confirms at the end ({})", settled.confirms),
                tally_line(&settled.tally),
                "no F_UPSTREAM",
                settled.tally.get("FAILED_UPSTREAM").copied().unwrap_or(0) == 0
                    && settled.lost.is_empty(),
            ),
            row("  not terminal at the end", settled.not_terminal),
            row(
                "  settled at t (s)",
                format!("{:.1}", rel(settled.settled_wall_ms)),
            ),
            row(
                "  last outage confirm ended, after the upstream came back (s)",
                format!("{:.1}", settled.after_recovery_s),
            ),
            row(
                "  longest confirm to terminal, any confirm (s)",
                format!("{:.1}", settled.longest_s),
            ),
        ]
    }

    /// The run's JSON line, for scripts comparing runs.
    fn json(&self, correct: bool, why: Vec<String>) -> Value {
        let (cli, fleet, c, r) = (self.run.cli, self.run.fleet, &self.calls, &self.reads);
        let (load, snapshot, settled) = (
            &self.observed.load,
            &self.observed.snapshot,
            &self.observed.settled,
        );
        let reads_json: BTreeMap<String, usize> = r
            .reads_by
            .iter()
            .map(|((k, p), v)| (format!("{p} {k}"), *v))
            .collect();
        json!({
            "scenario": "outage",
            "backend": format!("{:?}", fleet.kind).to_lowercase(),
            "timing": format!("{:?}", timing_profile(cli)).to_lowercase(),
            "instances": fleet.apis.len(),
            "rate": self.run.rate,
            "load_ms": cli.load_for.as_millis() as u64,
            "outage_from_ms": round(snapshot.fault_sent - self.observed.start.wall_ms),
            "outage_for_ms": cli.outage_for.as_millis() as u64,
            "requests": load.reads.len() + load.confirms.len(),
            "arrived_while_open": r.arrived_open,
            "open_ms": r.open_ms,
            "openings": c.openings,
            "open_phases": c.phases.len(),
            "calls_outage_to_first_open": c.calls_outage_before_open,
            "outage_retry_after_s": cli.outage_retry_after,
            "calls_before_retry_after": c.early_calls.map(|j| j.early),
            "calls_in_flight_when_retry_after_given": c.early_calls.map(|j| j.in_flight),
            "calls_first_cache_ttl_initial": c.initial_first_ttl,
            "calls_first_cache_ttl_reopen": c.reopen_first_ttl,
            "calls_while_open_after_cache_ttl": c.calls_rest_total,
            "calls_while_open_strict": c.calls_open_total,
            "probes_per_half_open": c.probes,
            "reads": reads_json,
            "read_ms": pcts_json(&r.read_lat),
            "snapshot_at_s": round(self.observed.start.rel_s(snapshot.taken_at)),
            "snapshot": snapshot.tally,
            "final": settled.tally,
            "not_terminal": settled.not_terminal,
            "settled_after_recovery_s": settled.after_recovery_s,
            "longest_confirm_to_terminal_s": settled.longest_s,
            "wake_ups": fleet.wake_ups,
            "correct": correct,
            "failures": why,
        })
    }
}
