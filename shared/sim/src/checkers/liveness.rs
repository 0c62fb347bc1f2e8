//! Liveness: once the faults stop, every intent ends, within a bound of simulated time that
//! follows from [`Timing`] alone. Safety checkers are content with a world that does nothing;
//! this one is not: an intent left RESERVING or REQUESTED forever is a user never answered.
//!
//! The bound ([`bound`]) is the longest chain of waits the design allows an intent that is
//! pending when the faults stop, each link a setting, added up as if they came one after the
//! other (they partly overlap, so the sum is an upper bound, not an estimate):
//! - its queue message was lost: the reaper sends it again `requeue_after` after the intent's
//!   last write;
//! - the upstream paused the route with a `Retry-After`: at most `retry_after_max`;
//! - the message was handed back, or its batch failed: it returns within `visibility_timeout`;
//! - an attempt on its seat has an unknown outcome: the reaper settles it from the charge once
//!   the lease (`lease()`) and `reaper_grace` are over, on its next pass (`reaper_interval`),
//!   and a charge read that failed during the faults was postponed at most `settle_retry_max`;
//! - the breaker was open: its next probe is at most `breaker_open_interval` away.
//!
//! Definition: with `H` the instant the faults stopped ([`Record::healed_at`]) and `B` the
//! bound, an intent must be terminal by `max(H, created_at) + B`; a wait whose deadline is
//! later must be terminal by `deadline + B` (it may legitimately wait until then). An intent
//! that ended later than that, or is not terminal at the end of the run although the run
//! outlasted that time, is a violation. Not judged: an intent whose time had not come when
//! the run ended (a run that stops early decides nothing about it); the default workload waits
//! for quiet at least `B` after the faults stop, so none of its immediate intents escapes.
//! Clock steps: creation times and deadlines are their instances' readings, so `B` grows by
//! `Record::clock_skew`.
//!
//! Woken when the upstream comes back (issue 38): `B` is a bound for after the faults stop,
//! and holds with or without the breaker's wake-ups. So two more rules judge the wake-ups
//! themselves, while the faults still run, each with the bound `W` ([`woken_bound`]):
//! - a parked intent whose retry time is a wake-up its writer asked for (a `Retry-After`
//!   pause's end, the open breaker's probe time: each the `until` of a pause or breaker write in
//!   the record) and that was not written before then is written again by that time plus `W`
//!   (the wake run puts everything due back in line, whatever it finds the upstream doing).
//!   Not judged: a run killed from one lease before its park on (the asker, or the wake run),
//!   a store fault on a breaker or pause write in that span (a lost answer: the asker does not
//!   know it changed anything, and asks nothing), a time the run did not outlast. Parks behind
//!   a busy answer's own back-off (no `Retry-After`) ask no wake-up and wait for the schedule;
//! - when the breaker closes at `C` (a probe found the upstream back), every immediate intent
//!   parked behind the upstream ([`Park`]: REQUESTED with a retry time after its own write)
//!   that is still parked then, or parks before every instance's cache has seen the close
//!   (`instance_cache_ttl`), and whose retry time is within one upstream call's lease of `C`,
//!   is written again (put back in line, or moved on by anyone) by `C + W`: the closer's second
//!   wake-up, an instance cache TTL and [`STRAGGLER_MARGIN`] after the close, and a wake run
//!   waiting behind one scheduled pass in the reaper's one loop (`reaper_pass_budget`); a
//!   wake-up for a time is asked [`WAKE_AFTER`] past it (instances' clocks disagree). Not
//!   judged: a close whose window `[C, C + W]` a fault explains (a run killed in it, a breaker
//!   write or a `Retry-After` pause in force in it: the upstream is not plainly back; a store
//!   fault on the breaker's own writes from one lease before `C` on: the close or its wake-up
//!   may not have been known to its writer), or that the run did not outlast.
//!
//! Without wake-ups, parked intents wait for the schedule; the default workload runs a share
//! of its seeds on a schedule far longer than `W` ([`crate::workload::SLOW_SCHEDULE`]) so that
//! these rules can tell. Waits keep their own rules (a back-off drawn per wait) and are judged
//! by `B` only.

use super::{Checker, Record, Violation};
use seatgate::config::Timing;
use seatgate::domain::{BreakerPhase, Intent, IntentId, IntentKind, IntentStatus, Millis};
use seatgate::service::breaker::{STRAGGLER_MARGIN, WAKE_AFTER};
use seatgate_memory::Op;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The longest an intent pending when the faults stop may take to end (the module doc's
/// chain).
pub fn bound(t: &Timing) -> Duration {
    t.requeue_after
        + t.retry_after_max
        + t.visibility_timeout
        + t.lease()
        + t.reaper_grace
        + t.reaper_interval
        + t.settle_retry_max
        + t.breaker_open_interval
}

/// How long after the breaker closes an intent parked behind it may wait for its next write
/// (the module doc's wake-up rule), before clock steps.
pub fn woken_bound(t: &Timing) -> Duration {
    t.instance_cache_ttl + STRAGGLER_MARGIN + WAKE_AFTER + t.reaper_pass_budget
}

pub fn check(record: &Record) -> Vec<Violation> {
    let mut out = ended_in_time(record);
    out.extend(woken(record).0);
    out
}

/// How many parks the wake-up rule judged in `record` (printed by `simulate`, so the default
/// histories are seen to drive it).
pub fn parks_judged(record: &Record) -> usize {
    woken(record).1
}

/// The first rule: every intent ends within `B` of the faults' end.
fn ended_in_time(record: &Record) -> Vec<Violation> {
    // Deadlines and creation times are their instances' readings, which may be stepped.
    let b = bound(&record.timing) + record.clock_skew;
    let mut out = Vec::new();
    for intent in &record.last.intents {
        let due = due_by(record.healed_at, intent, b);
        let late = if intent.status.is_terminal() {
            intent.updated_at > due
        } else {
            record.last.at > due
        };
        if late {
            out.push(Violation::new(
                Checker::Liveness,
                format!(
                    "intent {} ({:?}, user {} seat {}, created {}) {} but was due to end by {} (faults stopped at {}, bound {b:?})",
                    intent.intent_id,
                    intent.kind,
                    intent.user_id,
                    intent.seat_id,
                    record.t(intent.created_at),
                    if intent.status.is_terminal() {
                        format!("ended {} at {}", intent.status.as_str(), record.t(intent.updated_at))
                    } else {
                        format!("is still {} at the end, {}", intent.status.as_str(), record.t(record.last.at))
                    },
                    record.t(due),
                    record.t(record.healed_at),
                ),
            ));
        }
    }
    out
}

/// When `intent` must have ended (the module doc's definition).
fn due_by(healed_at: Millis, intent: &Intent, bound: Duration) -> Millis {
    let from = healed_at.max(intent.created_at);
    let from = match (intent.kind, intent.deadline) {
        (IntentKind::Wait, Some(deadline)) => from.max(deadline),
        _ => from,
    };
    from.plus(bound)
}

/// An immediate intent parked behind the upstream (REQUESTED with a retry time after its own
/// write: the breaker's probe time, a probe's lease, a `Retry-After` pause's end, a busy
/// answer's back-off), as the store took it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Park {
    pub intent_id: IntentId,
    /// When the parking write landed (true time).
    pub at: Millis,
    /// Its retry time (`next_attempt_at`, the parker's reading).
    pub retry_at: Millis,
    /// When the intent's next write landed; `None` if none did.
    pub next_write: Option<Millis>,
}

/// The parks in a store write log (`"<op>.intent <json>"` entries), in write order, each with
/// its intent's next write (`times[i]` is `writes[i]`'s). Only REQUESTED images are parsed.
pub(crate) fn parks(writes: &[String], times: &[Millis]) -> Vec<Park> {
    assert_eq!(writes.len(), times.len(), "a time for every write");
    let mut out: Vec<Park> = Vec::new();
    // Intent id -> its park in `out` still waiting for a next write. At most one per intent.
    let mut open: BTreeMap<&str, usize> = BTreeMap::new();
    for (w, at) in writes.iter().zip(times) {
        let Some((what, json)) = w.split_once(' ') else {
            continue;
        };
        if !what.ends_with(".intent") {
            continue;
        }
        let Some(id) = json
            .split_once("\"intent_id\":\"")
            .and_then(|(_, rest)| rest.split_once('"'))
            .map(|(id, _)| id)
        else {
            continue;
        };
        if let Some(i) = open.remove(id) {
            out[i].next_write = Some(*at);
        }
        if !json.contains("\"status\":\"REQUESTED\"") {
            continue;
        }
        // The backend wrote it from an `Intent`; one it cannot read back is a bug here.
        let intent: Intent = serde_json::from_str(json)
            .unwrap_or_else(|e| panic!("an intent write the log cannot give back ({e}): {json}"));
        if let Some(retry_at) = parked_until(&intent) {
            open.insert(id, out.len());
            out.push(Park {
                intent_id: intent.intent_id,
                at: *at,
                retry_at,
                next_write: None,
            });
        }
    }
    out
}

/// `intent`'s retry time if it is an immediate intent parked behind the upstream (the reaper's
/// own test: a retry time after its last write).
fn parked_until(intent: &Intent) -> Option<Millis> {
    (intent.kind == IntentKind::Immediate && intent.status == IntentStatus::Requested)
        .then_some(intent.next_attempt_at?)
        .filter(|t| *t > intent.updated_at)
}

/// The second rule: what was parked behind the breaker is written again within `W` of its
/// close (the module doc's wake-up rule); and how many parks it judged.
fn woken(record: &Record) -> (Vec<Violation>, usize) {
    let t = &record.timing;
    let w = woken_bound(t) + record.clock_skew;
    let mut out = Vec::new();
    let mut judged = 0;
    for (i, state) in record.breaker.iter().enumerate() {
        let after_shut = i > 0 && record.breaker[i - 1].phase != BreakerPhase::Closed;
        if state.phase != BreakerPhase::Closed || !after_shut {
            continue;
        }
        let closed = state.since;
        let by = closed.plus(w);
        if by > record.last.at || excused(record, i, closed, by) {
            continue;
        }
        // Parked by an instance that had not yet seen the close: up to its cache's age later.
        let parked_by = closed.plus(t.instance_cache_ttl + record.clock_skew);
        let retry_by = closed.plus(t.upstream_call_lease() + record.clock_skew);
        for park in &record.parks {
            let still_parked = park.next_write.is_none_or(|n| n > closed);
            if park.at > parked_by || !still_parked || park.retry_at > retry_by {
                continue;
            }
            judged += 1;
            let why = format!("the breaker closed at {}", record.t(closed));
            out.extend(late_park(record, park, &why, by, w));
        }
    }
    // A park whose retry time is a wake-up its writer asked for: a `Retry-After` pause's end,
    // the breaker's probe time.
    let asked: BTreeSet<Millis> = record
        .pauses
        .iter()
        .map(|h| h.until)
        .chain(record.breaker.iter().filter_map(|b| match b.phase {
            BreakerPhase::Open { until } => Some(until),
            _ => None,
        }))
        .collect();
    for park in &record.parks {
        let due = park.retry_at;
        let by = due.plus(w);
        let moved_before = park.next_write.is_some_and(|n| n <= due);
        if !asked.contains(&due) || moved_before || by > record.last.at {
            continue;
        }
        if ask_excused(record, park.at, by) {
            continue;
        }
        judged += 1;
        let why = format!("a wake-up was asked for at {}", record.t(due));
        out.extend(late_park(record, park, &why, by, w));
    }
    (out, judged)
}

/// The violation, if `park` was not written again by `by`.
fn late_park(
    record: &Record,
    park: &Park,
    why: &str,
    by: Millis,
    w: Duration,
) -> Option<Violation> {
    if park.next_write.is_some_and(|n| n <= by) {
        return None;
    }
    Some(Violation::new(
        Checker::Liveness,
        format!(
            "intent {} parked behind the upstream at {} (retry at {}) {} though {why}: due to be put back in line by {} (bound {w:?}; the wake-ups did not reach it)",
            park.intent_id,
            record.t(park.at),
            record.t(park.retry_at),
            match park.next_write {
                Some(n) => format!("was next written at {}", record.t(n)),
                None => "was never written again".to_owned(),
            },
            record.t(by),
        ),
    ))
}

/// Whether a fault explains a wake-up asked for around `parked` not coming by `by`: its asker
/// or its run killed, or the store failing the write that asks (its answer lost, the asker
/// does not know it changed anything).
fn ask_excused(record: &Record, parked: Millis, by: Millis) -> bool {
    let from = parked.minus(record.timing.upstream_call_lease());
    let killed = record
        .killed
        .iter()
        .any(|k| k.at >= from && k.started <= by);
    let ask_fault = record.store_faults.iter().any(|f| {
        matches!(
            f.op,
            Op::SwapBreaker | Op::Breaker | Op::UpstreamPause | Op::UpstreamPauses
        ) && f.at >= from
            && f.at <= by
    });
    killed || ask_fault
}

/// Whether a fault explains a wait after the close at `closed` (breaker write `i`) up to `by`.
fn excused(record: &Record, i: usize, closed: Millis, by: Millis) -> bool {
    let lease_before = closed.minus(record.timing.upstream_call_lease());
    let killed = record
        .killed
        .iter()
        .any(|k| k.at >= closed && k.started <= by);
    let breaker_moved = record
        .breaker
        .get(i + 1)
        .is_some_and(|next| next.since <= by);
    let paused = record
        .pauses
        .iter()
        .any(|h| h.at <= by && h.until >= closed);
    let breaker_fault = record.store_faults.iter().any(|f| {
        matches!(f.op, Op::SwapBreaker | Op::Breaker) && f.at >= lease_before && f.at <= by
    });
    killed || breaker_moved || paused || breaker_fault
}
