//! Liveness: once the faults stop, every intent ends, within a bound of simulated time that
//! follows from [`Timing`] alone. Safety checkers are content with a world that does nothing;
//! this one is not: an intent left RESERVING or REQUESTED forever is a user never answered.
//!
//! The bound ([`bound`]) is the longest chain of waits the design allows an intent that is
//! pending when the faults stop, each link a setting, added up as if they came one after the
//! other (they partly overlap, so the sum is an upper bound, not an estimate):
//! - its queue message was lost: the reaper sends it again `requeue_after` after the intent's
//!   last write;
//! - the upstream held the route with a `Retry-After`: at most `retry_after_max`;
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

use super::{Checker, Record, Violation};
use seatgate::config::Timing;
use seatgate::domain::{Intent, IntentKind, Millis};
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

pub fn check(record: &Record) -> Vec<Violation> {
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
