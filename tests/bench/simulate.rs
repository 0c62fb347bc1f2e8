//! `seatgate-bench simulate`: long runs of the deterministic simulator's default workload
//! (`seatgate_sim::workload`), every seed judged by every checker, for the hunts the test
//! command has no time for (it runs a fixed handful of seeds).
//!
//! Seeds are independent runs, each on its own current-thread runtime, so they are spread over
//! `--jobs` OS threads (by default one per core) pulling the next seed from a shared counter;
//! a seed's verdict does not depend on which thread ran it or when, so the results are sorted
//! by seed and the printed report is the same for any `--jobs` (but the timings). Prints seeds
//! per second (wall clock), simulated hours covered, violations by checker with the failing
//! seeds and their replays, and the slowest seed to settle; a JSON line closes the report,
//! like every other scenario. Exits 1 if any seed failed a checker or did not get quiet.

use anyhow::{Result, bail};
use seatgate_sim::workload::Mix;
use seatgate_sim::{Checker, FaultsSpec, Verdict, check_mix};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Failing seeds printed in full (the rest are counted and listed by number).
const SHOWN_FAILURES: usize = 10;

/// Progress is printed every this many seeds.
const PROGRESS_EVERY: u64 = 1_000;

/// What `--seeds`, `--seed`, `--faults`, `--mix` and `--jobs` asked for.
pub struct Args {
    /// How many seeds.
    pub seeds: u64,
    /// The first seed; the run covers `seed .. seed + seeds`.
    pub first: u64,
    pub faults: FaultsSpec,
    /// Who the users are besides the bookers.
    pub mix: Mix,
    /// OS threads; 0 means one per core.
    pub jobs: usize,
}

/// One seed's verdict and how long it took on the wall clock.
struct Judged {
    verdict: Verdict,
    wall: Duration,
}

pub fn run(args: &Args) -> Result<bool> {
    if args.seeds == 0 {
        bail!("--seeds must be at least 1");
    }
    let last = args
        .first
        .checked_add(args.seeds - 1)
        .ok_or_else(|| anyhow::anyhow!("--seed + --seeds overflows"))?;
    let jobs = match args.jobs {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .min(args.seeds as usize);
    println!(
        "simulate: seeds {}..={last} of the default workload, faults {}, mix {}, {jobs} threads",
        args.first, args.faults, args.mix
    );
    let next = AtomicU64::new(args.first);
    let done = AtomicU64::new(0);
    let judged: Mutex<Vec<Judged>> = Mutex::new(Vec::with_capacity(args.seeds as usize));
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                loop {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed > last {
                        return;
                    }
                    let t = Instant::now();
                    let verdict = check_mix(seed, &args.faults, &[], args.mix);
                    let one = Judged {
                        verdict,
                        wall: t.elapsed(),
                    };
                    judged
                        .lock()
                        .expect("no thread panics holding it")
                        .push(one);
                    let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                    if n.is_multiple_of(PROGRESS_EVERY) {
                        let secs = started.elapsed().as_secs_f64();
                        println!(
                            "  {n} seeds in {secs:.0} s ({:.1} seeds/s)",
                            n as f64 / secs
                        );
                    }
                }
            });
        }
    });
    let wall = started.elapsed();
    let mut judged = judged.into_inner().expect("no thread panicked");
    judged.sort_by_key(|j| j.verdict.seed);
    Ok(report(args, jobs, wall, &judged))
}

fn report(args: &Args, jobs: usize, wall: Duration, judged: &[Judged]) -> bool {
    let n = judged.len() as f64;
    let simulated: Duration = judged.iter().map(|j| j.verdict.elapsed).sum();
    let mut by_checker: BTreeMap<Checker, usize> = BTreeMap::new();
    for j in judged {
        for (checker, count) in j.verdict.by_checker() {
            *by_checker.entry(checker).or_insert(0) += count;
        }
    }
    let failing: Vec<&Verdict> = judged
        .iter()
        .map(|j| &j.verdict)
        .filter(|v| !v.is_clean() || !v.quiet)
        .collect();
    let slowest_settle = judged
        .iter()
        .max_by_key(|j| (j.verdict.elapsed, std::cmp::Reverse(j.verdict.seed)))
        .expect("at least one seed");
    let slowest_wall = judged
        .iter()
        .max_by_key(|j| (j.wall, std::cmp::Reverse(j.verdict.seed)))
        .expect("at least one seed");
    let mut walls: Vec<f64> = judged.iter().map(|j| j.wall.as_secs_f64() * 1e3).collect();
    walls.sort_by(f64::total_cmp);
    let median_wall_ms = walls[walls.len() / 2];
    let seeds_per_s = n / wall.as_secs_f64();
    let totals = |f: fn(&Verdict) -> usize| judged.iter().map(|j| f(&j.verdict)).sum::<usize>();

    println!();
    println!(
        "{} seeds in {:.1} s on {jobs} threads: {seeds_per_s:.1} seeds/s ({:.1} per thread), median {median_wall_ms:.1} ms per seed",
        judged.len(),
        wall.as_secs_f64(),
        seeds_per_s / jobs as f64
    );
    println!(
        "simulated: {:.2} h in all ({:.1} s per seed on average); {} requests, {} intents, {} upstream calls, {} commits, {} reaper wake runs, {} parks judged by the wake-up rule",
        simulated.as_secs_f64() / 3600.0,
        simulated.as_secs_f64() / n,
        totals(|v| v.requests),
        totals(|v| v.intents),
        totals(|v| v.calls),
        totals(|v| v.commits),
        judged.iter().map(|j| j.verdict.wake_runs).sum::<u64>(),
        totals(|v| v.parks_judged),
    );
    let without = |f: fn(&Verdict) -> usize| judged.iter().filter(|j| f(&j.verdict) == 0).count();
    println!(
        "features: {} checkout holds ({} seeds without one), {} waiting-list entries ({} seeds without one), {} writes bringing a user to a per-user limit ({} seeds without one), {} events delivered ({} seeds without one; {} posts refused first), {} API calls, relay passes and delivery batches killed, {} rate windows filled ({} seeds without one), {} dead letters the operator redrove ({} seeds without one)",
        totals(|v| v.checkout_holds),
        without(|v| v.checkout_holds),
        totals(|v| v.wait_entries),
        without(|v| v.wait_entries),
        totals(|v| v.writes_at_limit),
        without(|v| v.writes_at_limit),
        totals(|v| v.events_delivered),
        without(|v| v.events_delivered),
        judged.iter().map(|j| j.verdict.posts_refused).sum::<u64>(),
        judged.iter().map(|j| j.verdict.edge_kills).sum::<u64>(),
        totals(|v| v.windows_filled),
        without(|v| v.windows_filled),
        judged
            .iter()
            .map(|j| j.verdict.dead_letters_redriven)
            .sum::<u64>(),
        judged
            .iter()
            .filter(|j| j.verdict.dead_letters_redriven == 0)
            .count(),
    );
    println!(
        "slowest to settle: seed {} ({:.1} s simulated); slowest on the wall clock: seed {} ({:.0} ms)",
        slowest_settle.verdict.seed,
        slowest_settle.verdict.elapsed.as_secs_f64(),
        slowest_wall.verdict.seed,
        slowest_wall.wall.as_secs_f64() * 1e3
    );
    if by_checker.is_empty() {
        println!("violations: none");
    } else {
        println!("violations by checker:");
        for (checker, count) in &by_checker {
            let seeds: Vec<u64> = failing
                .iter()
                .filter(|v| v.failed().contains(checker))
                .map(|v| v.seed)
                .collect();
            println!("  {checker}: {count} in {} seeds {seeds:?}", seeds.len());
        }
    }
    let unquiet: Vec<u64> = judged
        .iter()
        .filter(|j| !j.verdict.quiet)
        .map(|j| j.verdict.seed)
        .collect();
    if !unquiet.is_empty() {
        println!("not quiet at the end: seeds {unquiet:?}");
    }
    for v in failing.iter().take(SHOWN_FAILURES) {
        println!("{v}");
    }
    if failing.len() > SHOWN_FAILURES {
        println!(
            "(and {} more failing seeds)",
            failing.len() - SHOWN_FAILURES
        );
    }
    let line = json!({
        "scenario": "simulate",
        "first_seed": args.first,
        "seeds": judged.len(),
        "faults": args.faults.to_string(),
        "mix": args.mix.to_string(),
        "threads": jobs,
        "wall_s": wall.as_secs_f64(),
        "seeds_per_s": seeds_per_s,
        "median_ms_per_seed": median_wall_ms,
        "simulated_hours": simulated.as_secs_f64() / 3600.0,
        "wake_runs": judged.iter().map(|j| j.verdict.wake_runs).sum::<u64>(),
        "parks_judged": totals(|v| v.parks_judged),
        "checkout_holds": totals(|v| v.checkout_holds),
        "seeds_without_checkout_holds": without(|v| v.checkout_holds),
        "wait_entries": totals(|v| v.wait_entries),
        "seeds_without_wait_entries": without(|v| v.wait_entries),
        "writes_at_limit": totals(|v| v.writes_at_limit),
        "seeds_without_writes_at_limit": without(|v| v.writes_at_limit),
        "events_delivered": totals(|v| v.events_delivered),
        "posts_refused": judged.iter().map(|j| j.verdict.posts_refused).sum::<u64>(),
        "edge_kills": judged.iter().map(|j| j.verdict.edge_kills).sum::<u64>(),
        "windows_filled": totals(|v| v.windows_filled),
        "seeds_without_windows_filled": without(|v| v.windows_filled),
        "dead_letters_redriven": judged.iter().map(|j| j.verdict.dead_letters_redriven).sum::<u64>(),
        "seeds_without_dead_letters": judged.iter().filter(|j| j.verdict.dead_letters_redriven == 0).count(),
        "violations": by_checker.iter().map(|(c, n)| (c.name(), *n)).collect::<BTreeMap<_, _>>(),
        "failing_seeds": failing.iter().map(|v| v.seed).collect::<Vec<_>>(),
        "slowest_settle": { "seed": slowest_settle.verdict.seed, "simulated_s": slowest_settle.verdict.elapsed.as_secs_f64() },
    });
    println!("{line}");
    failing.is_empty()
}
