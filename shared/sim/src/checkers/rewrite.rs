//! No rewrite: once the upstream committed a user's charge on a seat, seatgate never sends a
//! reserve for that (user, seat) again until the charge is released. A second write after an
//! unknown outcome is the defect seatgate exists to prevent (the reaper must settle an unknown
//! outcome by reading the charge, never by resending); the upstream answers it `seat_taken`,
//! so a rewrite also turns a won seat into a reported loss.
//!
//! Definition: for every commit `C` (user `u`, seat `s`, at `C.at`, released at `C.released_at`
//! or never), no reserve call keyed `(s, u)` arrives at the upstream strictly after `C.at` and
//! before `C.released_at` (if released; otherwise until the end of the run). Refused, timed-out
//! and abandoned calls count: each reached the upstream.
//!
//! Allowance: a call arriving in the very millisecond of the commit is not judged, because the
//! record does not order it against the commit (it may have been sent before the commit landed,
//! during its latency; the seat's claim keeps such overlaps out, and the issue's "no reserve while
//! an outcome is unknown" is a further checker, not this one).

use super::{Checker, Record, Violation, reserve_key};
use crate::upstream::{Call, Route};
use std::collections::BTreeMap;

pub fn check(record: &Record) -> Vec<Violation> {
    // Reserve calls by key, each list in arrival order.
    let mut reserves: BTreeMap<&str, Vec<(usize, &Call)>> = BTreeMap::new();
    for (i, call) in record.calls.iter().enumerate() {
        if call.route == Route::Reserve {
            reserves
                .entry(call.key.as_str())
                .or_default()
                .push((i, call));
        }
    }
    let mut out = Vec::new();
    for commit in &record.commits {
        let key = reserve_key(&commit.seat_id, &commit.user_id);
        for &(i, call) in reserves.get(key.as_str()).into_iter().flatten() {
            let inside = call.arrived > commit.at
                && commit
                    .released_at
                    .is_none_or(|released| call.arrived < released);
            if inside {
                let outcome = match (&call.outcome, call.abandoned) {
                    (_, true) => "abandoned".to_owned(),
                    (Some(o), false) => o.clone(),
                    (None, false) => "in flight".to_owned(),
                };
                let released = commit.released_at.map_or_else(
                    || "never released".to_owned(),
                    |r| format!("released at {}", record.t(r)),
                );
                out.push(Violation::new(
                    Checker::NoRewrite,
                    format!(
                        "reserve {key} sent again at {} (call #{i}, answered {outcome}) after charge {} committed at {}{} ({released})",
                        record.t(call.arrived),
                        commit.charge_id,
                        record.t(commit.at),
                        if commit.answer_lost { " with its answer lost" } else { "" },
                    ),
                ));
            }
        }
    }
    out
}
