//! The run's report: the table as printed, the correctness verdict, the JSON line and the
//! plots' series, each target beside seatgate in the same scenario.

use super::plot::{p95_series, render, write};
use super::*;

pub(super) struct Report<'a> {
    pub(super) running: &'a [Running],
    pub(super) results: &'a BTreeMap<(Scenario, usize), Outcome>,
    pub(super) saturation: &'a [Saturation],
    pub(super) ceiling: Option<&'a Ceiling>,
    pub(super) rates: &'a [f64],
}

pub(super) fn pcts(p: &Pcts) -> String {
    format!("{:.1} / {:.1} / {:.1}", p.p50, p.p95, p.p99)
}

impl Report<'_> {
    fn seatgate(&self) -> Option<usize> {
        self.running.iter().position(|r| r.kind == Kind::Seatgate)
    }

    /// A target's saturation as the table shows it.
    fn saturation_text(&self, i: usize) -> String {
        let s = &self.saturation[i];
        let top = self.rates.last().copied().unwrap_or(0.0);
        let ceiling = self.ceiling.and_then(|c| c.last_good);
        match s.last_good {
            None => format!("< {}/s", self.rates.first().copied().unwrap_or(0.0)),
            Some(r) => {
                let mut t = format!("{r}/s");
                if s.stopped.is_none() && r >= top {
                    t = format!(">= {r}/s (top step)");
                }
                if ceiling.is_some_and(|c| r >= c) {
                    t.push_str(" (generator's ceiling)");
                } else if let (Some(c), Some(next)) = (ceiling, s.stopped_at)
                    && next >= c
                {
                    // The step that failed is one the generator alone only just sustains: the
                    // target's own limit lies somewhere past this rate, unresolved here.
                    t.push_str(&format!(
                        " (next step {next}/s is at the generator's ceiling)"
                    ));
                }
                t
            }
        }
    }

    pub(super) fn print(
        &self,
        cli: &Cli,
        started: time::OffsetDateTime,
        finished: time::OffsetDateTime,
    ) {
        let fmt = |t: time::OffsetDateTime| {
            t.format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default()
        };
        println!();
        println!(
            "compare  {} to {}  generator={:?}  duration={:?}  step-duration={:?}  demand-rate={}/s  users={}  in-flight cap={}  lateness={:?}",
            fmt(started),
            fmt(finished),
            cli.generator,
            cli.duration,
            cli.step_duration,
            cli.demand_rate,
            cli.users,
            cli.max_in_flight.unwrap_or(flash::DEFAULT_IN_FLIGHT),
            cli.lateness,
        );
        if let Some(c) = self.ceiling {
            println!(
                "generator ceiling (no-op in-memory target, same driver and HTTP stack): {}  (stopped at {})",
                c.last_good
                    .map_or("below the first step".to_owned(), |r| format!("{r}/s")),
                c.stopped
            );
            for (rate, achieved, p95, bad) in &c.steps {
                println!(
                    "  {rate}/s: achieved {achieved:.0}/s, booking p95 {p95:.1} ms, errors+drops {bad}"
                );
            }
        }
        println!("pools (connections tried: booking p95 ms, errors+drops):");
        for r in self.running {
            if r.pool.is_none() {
                continue;
            }
            let tried: Vec<String> = r
                .calibration
                .iter()
                .map(|(n, p95, bad)| {
                    if *bad == usize::MAX {
                        format!("{n}: failed")
                    } else {
                        format!("{n}: {p95:.1}, {bad}")
                    }
                })
                .collect();
            println!(
                "  {:<26} kept {:>3}  ({})",
                r.kind.name(),
                r.pool.unwrap_or(0),
                tried.join("; ")
            );
        }
        println!();
        println!(
            "| target | scenario | sold / seats | 201 | 409 | 5xx | 201 p50 / p95 / p99 ms | refusal p50 / p95 / p99 ms | dropped | saturation | p95 vs seatgate | saturation vs seatgate |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
        let sg = self.seatgate();
        for (i, r) in self.running.iter().enumerate() {
            let pool = r.pool.map_or(String::new(), |p| format!(", pool {p}"));
            for scenario in [Scenario::Seed, Scenario::Fast, Scenario::Demand] {
                let name = format!("{} (`{}`{pool})", r.kind.label(), r.kind.name());
                let sat = self.saturation_text(i);
                let sat_ratio = self.saturation_ratio(sg, i);
                match self.results.get(&(scenario, i)) {
                    Some(Ok(s)) => {
                        let mut sold = format!("{} / {}", s.stored, s.capacity);
                        if s.stored > s.capacity as usize || s.created() > s.capacity as usize {
                            sold.push_str(" **OVERSOLD**");
                            if r.kind.exempt() {
                                sold.push_str(" (seed's bug)");
                            }
                        } else if !r.kind.exempt() && !s.correctness().is_empty() {
                            sold.push_str(" (check failed)");
                        }
                        let p95_ratio = match sg.and_then(|g| self.results.get(&(scenario, g))) {
                            Some(Ok(g)) if r.kind != Kind::Seatgate => {
                                let mine = s.booking_all().p95;
                                let theirs = g.booking_all().p95;
                                if theirs > 0.0 {
                                    format!("{:.1}x", mine / theirs)
                                } else {
                                    "-".into()
                                }
                            }
                            _ => "-".into(),
                        };
                        println!(
                            "| {name} | {} | {sold} | {} | {} | {} | {} | {} | {} | {sat} | {p95_ratio} | {sat_ratio} |",
                            scenario.name(),
                            s.created(),
                            s.sold_out() + s.conflict_other(),
                            s.server(),
                            pcts(&s.booking_created()),
                            pcts(&s.booking_refused()),
                            s.dropped(),
                        );
                    }
                    Some(Err(e)) => println!(
                        "| {name} | {} | failed: {} | | | | | | | {sat} | - | {sat_ratio} |",
                        scenario.name(),
                        e.replace('|', "/")
                    ),
                    None => {}
                }
            }
        }
        println!();
        println!(
            "p95 vs seatgate: the target's booking p95 (all answers) over seatgate's in the same scenario (above 1: seatgate faster). saturation vs seatgate: seatgate's last good rate over the target's."
        );
        for (i, r) in self.running.iter().enumerate() {
            if let Some(why) = &self.saturation[i].stopped {
                println!("saturation of {}: stopped at {why}", r.kind.name());
            }
        }
        for ((scenario, i), out) in self.results {
            if let Ok(s) = out {
                let why = s.correctness();
                if !why.is_empty() {
                    println!(
                        "{} {}: {}{}",
                        self.running[*i].kind.name(),
                        scenario.name(),
                        why.join("; "),
                        if self.running[*i].kind.exempt() {
                            " (exempt: the seed's bug)"
                        } else {
                            ""
                        }
                    );
                }
            }
        }
    }

    fn saturation_ratio(&self, sg: Option<usize>, i: usize) -> String {
        let Some(g) = sg else { return "-".into() };
        if g == i {
            return "-".into();
        }
        match (self.saturation[g].last_good, self.saturation[i].last_good) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.1}x", a / b),
            (Some(_), None) => "inf (target below the first step)".into(),
            _ => "-".into(),
        }
    }

    /// Failing: seatgate incorrect in any scenario, or a non-exempt target oversold.
    pub(super) fn correct(&self) -> bool {
        self.results.iter().all(|((_, i), out)| {
            let kind = self.running[*i].kind;
            match out {
                Ok(s) if kind == Kind::Seatgate => s.correctness().is_empty(),
                Ok(s) if !kind.exempt() => {
                    s.stored <= s.capacity as usize && s.created() <= s.capacity as usize
                }
                Ok(_) => true,
                Err(_) => kind != Kind::Seatgate,
            }
        })
    }

    pub(super) fn json(&self, cli: &Cli, plots: &[PathBuf]) -> Value {
        let targets: Vec<Value> = self
            .running
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let scenarios: serde_json::Map<String, Value> =
                    [Scenario::Seed, Scenario::Fast, Scenario::Demand]
                        .into_iter()
                        .filter_map(|sc| {
                            self.results.get(&(sc, i)).map(|out| {
                                let v = match out {
                                    Ok(s) => s.json(),
                                    Err(e) => json!({ "failed": e }),
                                };
                                (sc.name().to_owned(), v)
                            })
                        })
                        .collect();
                json!({
                    "target": r.kind.name(),
                    "label": r.kind.label(),
                    "pool": r.pool,
                    "calibration": r.calibration.iter().map(|(n, p, b)| json!({"pool": n, "p95_ms": if p.is_finite() { json!(p) } else { Value::Null }, "errors_drops": if *b == usize::MAX { Value::Null } else { json!(b) }})).collect::<Vec<_>>(),
                    "scenarios": scenarios,
                    "saturation": {
                        "last_good_rate": self.saturation[i].last_good,
                        "stopped": self.saturation[i].stopped,
                        "steps": self.saturation[i].steps,
                    },
                })
            })
            .collect();
        json!({
            "scenario": "compare",
            "duration_ms": cli.duration.as_millis() as u64,
            "step_duration_ms": cli.step_duration.as_millis() as u64,
            "demand_rate": cli.demand_rate,
            "generator": format!("{:?}", cli.generator),
            "generator_ceiling": self.ceiling.map(|c| json!({ "last_good_rate": c.last_good, "stopped": c.stopped })),
            "targets": targets,
            "plots": plots.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "correct": self.correct(),
        })
    }

    /// One SVG per scenario, every target's per-100 ms booking p95 on it.
    pub(super) fn plots(&self, cli: &Cli) -> anyhow::Result<Vec<PathBuf>> {
        let base = cli
            .plot
            .clone()
            .unwrap_or_else(|| PathBuf::from("target/compare.svg"));
        let stem = base
            .file_stem()
            .map_or("compare".into(), |s| s.to_string_lossy().into_owned());
        let mut out = Vec::new();
        for scenario in [Scenario::Seed, Scenario::Fast, Scenario::Demand] {
            let series: Vec<(String, Vec<(f64, f64)>)> = self
                .running
                .iter()
                .enumerate()
                .filter_map(|(i, r)| match self.results.get(&(scenario, i)) {
                    Some(Ok(s)) => Some((r.kind.name(), p95_series(&s.booking_points()))),
                    _ => None,
                })
                .collect();
            if series.is_empty() {
                continue;
            }
            let path = base.with_file_name(format!("{stem}-{}.svg", scenario.name()));
            let title = format!(
                "compare, {}: booking p95 per 100 ms, every target ({} s)",
                scenario.name(),
                cli.duration.as_secs_f64()
            );
            write(&path, &render(&series, &title))?;
            out.push(path);
        }
        Ok(out)
    }
}
