//! Checkers over a finished run's record: each promise seatgate makes, judged mechanically from
//! what the upstream model recorded (its commits and calls, the truth) and what the store held
//! (its snapshots), never from what the API answered clients alone (a cached or retried answer
//! could repeat a lie; the record cannot). The two promises about answers ([`idempotency`],
//! [`listing`]) hold what clients were answered against the store's final state.
//!
//! One file per promise, each a plain function `fn(&Record) -> Vec<Violation>` whose doc states
//! its exact definition and every allowance it makes:
//! - [`bank`]: seats are conserved on every flight, in every snapshot;
//! - [`truth`]: an intent's outcome and reason say what the upstream did;
//! - [`rewrite`]: no second reserve for a (user, seat) whose charge stands;
//! - [`wasted`]: no reserve for a seat this system won, within its suppression window;
//! - [`unknown`]: no reserve for a seat while an attempt on it is in flight or has an unknown
//!   outcome;
//! - [`spared`]: no call into a `Retry-After` the upstream gave;
//! - [`probe`]: no call while the breaker is open, and one probe per probing phase;
//! - [`reads`]: at most one upstream read per seat or room per read TTL, fleet-wide;
//! - [`audit`]: every intent has its consent record, and its history explains it, gapless;
//! - [`liveness`]: once the faults stop, every intent ends within a bound that follows from
//!   the timing; and when the breaker closes, what was parked behind it is back in line within
//!   the wake-ups' bound;
//! - [`idempotency`]: a booking retried under its key takes effect once and answers the same;
//! - [`listing`]: the paged listings (a user's bookings, an intent's history as the admin reads
//!   it) skip, repeat and invent nothing, and a user's last listing is exactly their bookings.
//! - [`waitlist`]: seats that come back go to the waiting list's entries in the order they
//!   joined, and only a return makes an offer;
//! - [`hold_life`]: a checkout hold ends exactly once, confirmed or released before its
//!   deadline or lapsed after it, and within a reaper pass of its deadline once the faults stop;
//! - [`limit`]: on a flight with a per-user limit, no user has more seats than it, booked and
//!   held together, after any write;
//! - [`events`]: every intent that ended and every offer made or lapsed reaches the
//!   subscribers (or the dead-letter queue) under its stable id, and nothing else does;
//! - [`rate`]: no user is admitted past the per-user rate limit in any window;
//! - [`operator`]: a flight's live holds are listed as they are, and every event that never
//!   reached its subscribers is visible as a dead letter and reaches them once redriven.
//!
//! Why functions over a record rather than assertions during the run: a record can be judged
//! after the fact, by several checkers independently, and a failing seed replays to the same
//! record, so a violation can be studied at leisure.

pub mod audit;
pub mod bank;
pub mod events;
pub mod hold_life;
pub mod idempotency;
pub mod limit;
pub mod listing;
pub mod liveness;
pub mod operator;
pub mod probe;
pub mod rate;
pub mod reads;
pub mod rewrite;
pub mod sale_log;
pub mod spared;
pub mod truth;
pub mod unknown;
pub mod waitlist;
pub mod wasted;

use crate::Run;
use crate::upstream::{Call, Commit};
use seatgate::config::Timing;
use seatgate::domain::{Booking, BreakerState, Inventory, Millis, UpstreamRoute};
use seatgate_memory::{AuditTrail, Snapshot};
use std::fmt;
use std::time::Duration;

/// Which promise a violation breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Checker {
    Bank,
    Truth,
    NoRewrite,
    NoWastedWrite,
    Unknown,
    Audit,
    Liveness,
    Idempotency,
    Spared,
    Probe,
    Reads,
    Listing,
    Waitlist,
    HoldLife,
    Limit,
    Events,
    RateWindow,
    Operator,
}

impl Checker {
    pub const ALL: [Checker; 18] = [
        Checker::Bank,
        Checker::Truth,
        Checker::NoRewrite,
        Checker::NoWastedWrite,
        Checker::Unknown,
        Checker::Audit,
        Checker::Liveness,
        Checker::Idempotency,
        Checker::Spared,
        Checker::Probe,
        Checker::Reads,
        Checker::Listing,
        Checker::Waitlist,
        Checker::HoldLife,
        Checker::Limit,
        Checker::Events,
        Checker::RateWindow,
        Checker::Operator,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Checker::Bank => "bank",
            Checker::Truth => "truth",
            Checker::NoRewrite => "no-rewrite",
            Checker::NoWastedWrite => "no-wasted-write",
            Checker::Unknown => "unknown",
            Checker::Audit => "audit",
            Checker::Liveness => "liveness",
            Checker::Idempotency => "idempotency",
            Checker::Spared => "spared",
            Checker::Probe => "probe",
            Checker::Reads => "reads",
            Checker::Listing => "listing",
            Checker::Waitlist => "waitlist",
            Checker::HoldLife => "hold-life",
            Checker::Limit => "per-user-limit",
            Checker::Events => "events",
            Checker::RateWindow => "rate-window",
            Checker::Operator => "operator",
        }
    }
}

impl fmt::Display for Checker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One broken promise: which, and a message that names the records showing it (times are
/// milliseconds since the run's start, as `+<ms>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub checker: Checker,
    pub message: String,
}

impl Violation {
    pub(crate) fn new(checker: Checker, message: String) -> Self {
        Violation { checker, message }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.checker, self.message)
    }
}

/// The part of a store snapshot the bank is judged on: the flights' counters and the bookings,
/// taken in one critical section of the store, so they are consistent with each other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ledger {
    pub at: Millis,
    pub flights: Vec<Inventory>,
    pub bookings: Vec<Booking>,
    /// Checkout holds, every status.
    pub holds: Vec<seatgate::domain::CheckoutHold>,
}

impl Ledger {
    pub fn of(snapshot: &Snapshot) -> Self {
        Ledger {
            at: snapshot.at,
            flights: snapshot.flights.clone(),
            bookings: snapshot.bookings.clone(),
            holds: snapshot.checkout_holds.clone(),
        }
    }
}

/// What the checkers judge: the upstream's truth and the store's states.
#[derive(Debug, Clone)]
pub struct Record {
    /// The run's start (its clock's epoch): times in messages are shown relative to it.
    pub origin: Millis,
    pub timing: Timing,
    /// Every committed reserve, in commit order, with its release if any.
    pub commits: Vec<Commit>,
    /// Every upstream call (and user release), in arrival order.
    pub calls: Vec<Call>,
    /// Ledgers taken during the run, in time order, the final one last.
    pub ledgers: Vec<Ledger>,
    /// The breaker's states as the store took them, in write order, from the store's write
    /// log: the phases the fleet went through. Each `since` is the time its write landed (true
    /// time, when the fleet could first see it; the writer's own reading, which the state was
    /// written with, may be stepped).
    pub breaker: Vec<BreakerState>,
    /// The runs killed mid-flight, in order: what they learned died with them.
    pub killed: Vec<crate::world::Killed>,
    /// The `Retry-After` pauses the store took, in write order, each with the time it landed:
    /// when the rest of the fleet could first know of it.
    pub pauses: Vec<PauseWrite>,
    /// The waiting lists' joins, leaves and servings, in write order, from the store's write log.
    pub waitlist: Vec<waitlist::ListWrite>,
    /// Every event the subscribers accepted, in order, as `"<event id> <type>"`.
    pub deliveries: Vec<String>,
    /// The bodies of the events dead-lettered by the end.
    pub dead_events: Vec<String>,
    /// Every request a rate window counted, in write order, from the store's write log.
    pub rate_takes: Vec<rate::RateTake>,
    /// Every booking and checkout hold the store wrote, in write order, from its write log.
    pub sale: Vec<sale_log::SaleWrite>,
    /// Every immediate intent parked behind the upstream, in write order, from the store's
    /// write log, each with the time of its next write.
    pub parks: Vec<liveness::Park>,
    /// Every store fault that struck, in order (the liveness checker's wake-up rule excuses
    /// what one of them explains).
    pub store_faults: Vec<seatgate_memory::Injected>,
    /// The store at the end.
    pub last: Snapshot,
    /// Every intent's history and consent record at the end.
    pub audit: AuditTrail,
    /// When the faults stopped (the liveness checker's start); the run's start unless the
    /// scenario says otherwise (the default workload heals at the end of its active minute).
    pub healed_at: Millis,
    /// Every answer the clients got per (user, `Idempotency-Key`); empty unless the scenario
    /// records them (the default workload does).
    pub keyed: Vec<idempotency::KeyedAnswers>,
    /// Every bookings listing the clients read, in the order they finished; empty unless the
    /// scenario records them (the default workload does, and lists every user at the end).
    pub listings: Vec<listing::BookingsListing>,
    /// Every intent history the admin read, in the order the reads finished; likewise.
    pub history_reads: Vec<listing::HistoryRead>,
    /// What the operator read and did; `None` unless the scenario has an operator (the
    /// default workload's [`crate::workload::Mix::operator`]).
    pub operator: Option<operator::OperatorRecord>,
    /// How far two instances' clock readings that should agree may differ
    /// ([`crate::clock::ClockSteps::skew`]; zero unless the clocks were stepped). The checkers
    /// whose promise compares one instance's reading of time with a time written by another,
    /// or by itself before a step (a `Retry-After` passed, a reading stale, a suppression
    /// over, a deadline reached), allow this much; those judged by order alone allow none.
    pub clock_skew: Duration,
}

impl Record {
    /// The record of `run`, with `ledgers` sampled during it (the final snapshot's ledger is
    /// appended).
    pub fn of<T>(run: &Run<T>, origin: Millis, timing: &Timing, ledgers: Vec<Ledger>) -> Self {
        let taken = Taken {
            commits: run.commits.clone(),
            calls: run.call_record.clone(),
            killed: run.killed.clone(),
            audit: run.audit.clone(),
            store_faults: run.store_faults.clone(),
        };
        Self::assemble(run, taken, origin, timing, ledgers)
    }

    /// [`Record::of`], moving the run's records into it rather than copying them: for a run
    /// judged once and then dropped, as a seed scan's are. `run` keeps its logs (the write
    /// and call logs a failing seed's window is printed from) and its snapshot, and loses its
    /// commits, calls, kills and audit trail.
    pub fn taken_from<T>(
        run: &mut Run<T>,
        origin: Millis,
        timing: &Timing,
        ledgers: Vec<Ledger>,
    ) -> Self {
        let taken = Taken {
            commits: std::mem::take(&mut run.commits),
            calls: std::mem::take(&mut run.call_record),
            killed: std::mem::take(&mut run.killed),
            audit: std::mem::take(&mut run.audit),
            store_faults: std::mem::take(&mut run.store_faults),
        };
        Self::assemble(run, taken, origin, timing, ledgers)
    }

    /// The record of `run` from its `taken` parts, its logs and its snapshot (whose ledger is
    /// appended to `ledgers`).
    fn assemble<T>(
        run: &Run<T>,
        taken: Taken,
        origin: Millis,
        timing: &Timing,
        mut ledgers: Vec<Ledger>,
    ) -> Self {
        ledgers.push(Ledger::of(&run.snapshot));
        Record {
            origin,
            timing: timing.clone(),
            commits: taken.commits,
            calls: taken.calls,
            ledgers,
            breaker: breaker_writes(&run.writes, &run.write_times),
            pauses: pause_writes(&run.writes, &run.write_times),
            waitlist: waitlist::list_writes(&run.writes, &run.write_times),
            sale: sale_log::sale_writes(&run.writes, &run.write_times),
            deliveries: run.deliveries.clone(),
            dead_events: run.dead_events.clone(),
            rate_takes: rate::rate_takes(&run.writes, &run.write_times),
            parks: liveness::parks(&run.writes, &run.write_times),
            store_faults: taken.store_faults,
            killed: taken.killed,
            last: run.snapshot.clone(),
            audit: taken.audit,
            healed_at: origin,
            keyed: Vec::new(),
            listings: Vec::new(),
            history_reads: Vec::new(),
            operator: None,
            clock_skew: Duration::ZERO,
        }
    }

    /// `at` as `+<ms since the run's start>`.
    pub(crate) fn t(&self, at: Millis) -> String {
        format!("+{}", at.since(self.origin).as_millis())
    }
}

/// The parts of a run a record owns outright, copied or moved out of it.
struct Taken {
    commits: Vec<Commit>,
    calls: Vec<Call>,
    killed: Vec<crate::world::Killed>,
    audit: AuditTrail,
    store_faults: Vec<seatgate_memory::Injected>,
}

/// Every checker over `record`, in [`Checker::ALL`]'s order.
pub fn check_all(record: &Record) -> Vec<Violation> {
    let mut all = bank::check(record);
    all.extend(truth::check(record));
    all.extend(rewrite::check(record));
    all.extend(wasted::check(record));
    all.extend(unknown::check(record));
    all.extend(spared::check(record));
    all.extend(probe::check(record));
    all.extend(audit::check(record));
    all.extend(liveness::check(record));
    all.extend(idempotency::check(record));
    all.extend(reads::check(record));
    all.extend(listing::check(record));
    all.extend(waitlist::check(record));
    all.extend(hold_life::check(record));
    all.extend(limit::check(record));
    all.extend(events::check(record));
    all.extend(rate::check(record));
    all.extend(operator::check(record));
    all
}

/// The breaker states in a store write log (`"swap_breaker <json>"` entries), in order, each
/// `since` the time its write landed (`times[i]` is `writes[i]`'s).
fn breaker_writes(writes: &[String], times: &[Millis]) -> Vec<BreakerState> {
    assert_eq!(writes.len(), times.len(), "a time for every write");
    writes
        .iter()
        .zip(times)
        .filter_map(|(w, at)| Some((w.strip_prefix("swap_breaker ")?, *at)))
        .map(|(json, at)| {
            // The backend wrote it from a `BreakerState`; one it cannot read back is a bug here.
            let state: BreakerState = serde_json::from_str(json).unwrap_or_else(|e| {
                panic!("a breaker write the log cannot give back ({e}): {json}")
            });
            BreakerState { since: at, ..state }
        })
        .collect()
}

/// A `Retry-After` pause as the store took it (`"upstream_pause [route, until]"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PauseWrite {
    /// When the write landed.
    pub at: Millis,
    pub route: UpstreamRoute,
    pub until: Millis,
}

/// The pause writes in a store write log, with their times (`times[i]` is `writes[i]`'s).
fn pause_writes(writes: &[String], times: &[Millis]) -> Vec<PauseWrite> {
    assert_eq!(writes.len(), times.len(), "a time for every write");
    writes
        .iter()
        .zip(times)
        .filter_map(|(w, at)| Some((w.strip_prefix("upstream_pause ")?, *at)))
        .map(|(json, at)| {
            let (route, until): (UpstreamRoute, Millis) = serde_json::from_str(json)
                .unwrap_or_else(|e| panic!("a pause write the log cannot give back ({e}): {json}"));
            PauseWrite { at, route, until }
        })
        .collect()
}

/// The key a reserve call is recorded under (`UpstreamModel::reserve`).
pub(crate) fn reserve_key(seat: &impl fmt::Display, user: &impl fmt::Display) -> String {
    format!("seat={seat} user={user}")
}
