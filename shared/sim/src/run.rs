//! One seed of the default workload, judged: [`check_seed`] runs it and every checker over its
//! record and returns a [`Verdict`]; [`first_caught`] scans seeds until a checker fails (how a
//! planted bug is shown to be caught, and how a long hunt looks for real ones).
//!
//! Why a verdict rather than a panic: a long run wants counts by checker and the failing seeds,
//! a test wants to assert which checker caught what, and a failing seed must print itself, the
//! checker and its message, and how to replay it. A run is a function of its seed, its faults
//! and its plants, so the same three give the same verdict (the digest of its records says so).

use crate::checkers::idempotency::KeyedAnswers;
use crate::checkers::listing::{BookingsListing, HistoryRead};
use crate::checkers::{self, Checker, Record, Violation};
use crate::plant::Plant;
use crate::simulate;
use crate::window::{History, Window};
use crate::workload;
pub use crate::workload::FaultsSpec;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// How many violations [`Verdict`]'s display lists per checker (the rest are counted).
const SHOWN_PER_CHECKER: usize = 3;

/// What the checkers found in one seed's run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub seed: u64,
    pub faults: FaultsSpec,
    /// Who the users were besides the bookers.
    pub mix: workload::Mix,
    pub plants: Vec<Plant>,
    pub violations: Vec<Violation>,
    /// The digest of the run's write log, call log and deliveries: equal for a replay.
    pub digest: String,
    /// Whether the world got quiet after the faults stopped.
    pub quiet: bool,
    /// Simulated time the run covered.
    pub elapsed: Duration,
    pub calls: usize,
    pub commits: usize,
    pub intents: usize,
    pub requests: usize,
    /// Checkout holds made, and users' waiting-list entries (each user's latest per flight),
    /// in the store at the end: how much of the run the holders and waiters drove.
    pub checkout_holds: usize,
    pub wait_entries: usize,
    /// Writes that brought a user to a flight's per-user limit (the limit checker's count).
    pub writes_at_limit: usize,
    /// Events the subscribers accepted, and posts they refused first.
    pub events_delivered: usize,
    pub posts_refused: u64,
    /// API calls, relay passes and delivery batches killed mid-flight.
    pub edge_kills: u64,
    /// Rate windows a user filled to the limit (the rate-window checker's count).
    pub windows_filled: usize,
    /// Dead letters (seat messages and webhook deliveries) the operator redrove after the sale.
    pub dead_letters_redriven: u64,
    /// What the replay fault did: relay passes whose ack was lost, records replayed, seat
    /// sends passed past deduplication.
    pub replays: crate::memory::ReplayCounts,
    /// Worker batches and reaper passes killed mid-flight, and instances restarted after.
    pub crashes: u64,
    pub restarts: usize,
    /// Instance clocks stepped to a new offset.
    pub clock_steps: u64,
    /// Reaper wake runs (the breaker's wake-ups that came due).
    pub wake_runs: u64,
    /// Parks the liveness checker's wake-up rule judged.
    pub parks_judged: usize,
    /// The history the first violation cites, to read without a replay ([`crate::window`]).
    pub window: Option<Window>,
}

impl Verdict {
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty()
    }

    /// Violations counted by checker (checkers with none left out).
    pub fn by_checker(&self) -> BTreeMap<Checker, usize> {
        let mut counts = BTreeMap::new();
        for v in &self.violations {
            *counts.entry(v.checker).or_insert(0) += 1;
        }
        counts
    }

    /// The checkers that failed, in [`Checker::ALL`]'s order.
    pub fn failed(&self) -> Vec<Checker> {
        self.by_checker().into_keys().collect()
    }

    /// The call that replays this run.
    pub fn replay(&self) -> String {
        if self.mix != workload::Mix::default() {
            return format!(
                "seatgate_sim::check_mix({}, &FaultsSpec::parse(\"{}\"), &{:?}, Mix::parse(\"{}\").unwrap())",
                self.seed, self.faults, self.plants, self.mix
            );
        }
        match self.plants.as_slice() {
            [] => format!(
                "seatgate_sim::check_seed({}, &FaultsSpec::parse(\"{}\"))",
                self.seed, self.faults
            ),
            [plant] => format!(
                "seatgate_sim::check_planted({}, &FaultsSpec::parse(\"{}\"), Plant::{plant:?})",
                self.seed, self.faults
            ),
            plants => format!(
                "seatgate_sim::run::check({}, &FaultsSpec::parse(\"{}\"), &{plants:?})",
                self.seed, self.faults
            ),
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plants = if self.plants.is_empty() {
            String::new()
        } else {
            let names: Vec<&str> = self.plants.iter().map(|p| p.name()).collect();
            format!(", planted {}", names.join("+"))
        };
        let mix = if self.mix == workload::Mix::default() {
            String::new()
        } else {
            format!(", mix {}", self.mix)
        };
        write!(
            f,
            "seed {} (faults {}{mix}{plants}): {} violations; digest {}, {} calls, {} commits, {} intents, {} requests, {} checkout holds, {} waiting-list entries, {} writes at a per-user limit, {} events delivered ({} posts refused), {} rate windows filled, {:?} simulated, replays {}/{}/{}/{} (lost acks/records/duplicates/event duplicates), {} crashes, {} edge kills, {} restarts, {} clock steps{}",
            self.seed,
            self.faults,
            self.violations.len(),
            self.digest,
            self.calls,
            self.commits,
            self.intents,
            self.requests,
            self.checkout_holds,
            self.wait_entries,
            self.writes_at_limit,
            self.events_delivered,
            self.posts_refused,
            self.windows_filled,
            self.elapsed,
            self.replays.lost_acks,
            self.replays.replayed_records,
            self.replays.duplicates,
            self.replays.event_duplicates,
            self.crashes,
            self.edge_kills,
            self.restarts,
            self.clock_steps,
            if self.quiet {
                ""
            } else {
                ", NOT quiet at the end"
            }
        )?;
        for (checker, count) in self.by_checker() {
            writeln!(f)?;
            write!(f, "  {checker}: {count}")?;
            for v in self
                .violations
                .iter()
                .filter(|v| v.checker == checker)
                .take(SHOWN_PER_CHECKER)
            {
                writeln!(f)?;
                write!(f, "    - {}", v.message)?;
            }
        }
        if let Some(window) = &self.window {
            writeln!(f)?;
            write!(f, "{window}")?;
        }
        if !self.is_clean() {
            writeln!(f)?;
            write!(f, "  replay: {}", self.replay())?;
        }
        Ok(())
    }
}

/// Runs the default workload from `seed` with `faults` and judges it.
pub fn check_seed(seed: u64, faults: &FaultsSpec) -> Verdict {
    check(seed, faults, &[])
}

/// The same, with `plant` planted.
pub fn check_planted(seed: u64, faults: &FaultsSpec, plant: Plant) -> Verdict {
    check(seed, faults, &[plant])
}

/// The same, with any plants; a failing verdict is printed (stderr), with its replay.
pub fn check(seed: u64, faults: &FaultsSpec, plants: &[Plant]) -> Verdict {
    check_mix(seed, faults, plants, workload::Mix::default())
}

/// [`check`] with the users of `mix` (checkout holders, ...).
pub fn check_mix(seed: u64, faults: &FaultsSpec, plants: &[Plant], mix: workload::Mix) -> Verdict {
    let config = workload::config(seed, plants);
    let (origin, timing) = (config.epoch, config.timing.clone());
    let spec = faults.clone();
    let mut run = simulate(config, move |world| workload::run_mix(world, spec, mix));
    // Counted before the record takes the run's records over.
    let digest = run.digest();
    let (calls, commits, intents) = (
        run.call_record.len(),
        run.commits.len(),
        run.snapshot.intents.len(),
    );
    let (checkout_holds, wait_entries) = (
        run.snapshot.checkout_holds.len(),
        run.snapshot.wait_entries.len(),
    );
    let record = taken_record(&mut run, origin, &timing, faults);
    let violations = checkers::check_all(&record);
    let parks_judged = checkers::liveness::parks_judged(&record);
    let writes_at_limit = checkers::limit::writes_at_limit(&record);
    let events_delivered = record.deliveries.len();
    let windows_filled = checkers::rate::windows_filled(&record);
    let dead_letters_redriven = record
        .operator
        .as_ref()
        .and_then(|o| o.redriven)
        .map_or(0, |r| r.seat_messages + r.webhook_deliveries);
    let history = History {
        origin,
        call_log: &run.calls,
        calls: &record.calls,
        writes: &run.writes,
        write_times: &run.write_times,
    };
    let window = violations.first().and_then(|v| history.window(v));
    let verdict = Verdict {
        seed,
        faults: faults.clone(),
        mix,
        plants: plants.to_vec(),
        violations,
        window,
        digest,
        quiet: run.value.quiet,
        elapsed: run.elapsed,
        calls,
        commits,
        intents,
        requests: run.value.requests,
        checkout_holds,
        wait_entries,
        writes_at_limit,
        events_delivered,
        posts_refused: run.value.refused_posts,
        edge_kills: run.value.edge_kills,
        windows_filled,
        dead_letters_redriven,
        replays: run.value.replays,
        crashes: run.value.crashes,
        restarts: run.value.restarts,
        clock_steps: run.value.clock_steps,
        wake_runs: run.value.wake_runs,
        parks_judged,
    };
    if !verdict.is_clean() {
        eprintln!("{verdict}");
    }
    verdict
}

/// The record the checkers judge for a run of the default workload under `faults` (`observed`
/// is what the workload returned, inside `run`'s value): the world's records, with what the
/// users saw, the instant the faults healed, and the clock skew the faults allow.
pub fn workload_record<T>(
    run: &crate::Run<T>,
    observed: &workload::Observed,
    origin: seatgate::domain::Millis,
    timing: &seatgate::config::Timing,
    faults: &FaultsSpec,
) -> Record {
    let mut record = Record::of(run, origin, timing, observed.ledgers.clone());
    record.operator = observed.operator.clone();
    with_workload(
        record,
        faults,
        observed.keyed.clone(),
        observed.listings.clone(),
        observed.history_reads.clone(),
    )
}

/// [`workload_record`], moving the run's records and what the users saw into the record
/// ([`Record::taken_from`]) instead of copying them: what a seed scan judges once and drops.
fn taken_record(
    run: &mut crate::Run<workload::Observed>,
    origin: seatgate::domain::Millis,
    timing: &seatgate::config::Timing,
    faults: &FaultsSpec,
) -> Record {
    let ledgers = std::mem::take(&mut run.value.ledgers);
    let keyed = std::mem::take(&mut run.value.keyed);
    let listings = std::mem::take(&mut run.value.listings);
    let history_reads = std::mem::take(&mut run.value.history_reads);
    let operator = run.value.operator.take();
    let mut record = Record::taken_from(run, origin, timing, ledgers);
    record.operator = operator;
    with_workload(record, faults, keyed, listings, history_reads)
}

/// What the default workload adds to a run's record: when the faults healed, the clock skew
/// they allow, and what the users were answered.
fn with_workload(
    mut record: Record,
    faults: &FaultsSpec,
    keyed: Vec<KeyedAnswers>,
    listings: Vec<BookingsListing>,
    history_reads: Vec<HistoryRead>,
) -> Record {
    record.healed_at = record.origin.plus(workload::ACTIVE);
    if faults.clock_steps {
        record.clock_skew = workload::CLOCK_STEPS.skew();
    }
    record.keyed = keyed;
    record.listings = listings;
    record.history_reads = history_reads;
    record
}

/// Scans `seeds` with `plants` until a verdict has a violation: that verdict, or `None` if every
/// seed came out clean.
pub fn first_caught(
    seeds: impl IntoIterator<Item = u64>,
    faults: &FaultsSpec,
    plants: &[Plant],
) -> Option<Verdict> {
    seeds
        .into_iter()
        .map(|seed| check(seed, faults, plants))
        .find(|v| !v.is_clean())
}
