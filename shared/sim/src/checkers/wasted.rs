//! No wasted write: once this system won a seat, no reserve for it reaches the upstream for
//! one suppression window (`action_ttl`) while the charge stands. Such a write can only be
//! answered `seat_taken`: an immediate confirm in the window is closed locally by the seat's
//! suppression, and a wait goes to the upstream only when a reading newer than the win says
//! the seat is free, which it cannot while the charge stands. A wasted write is a call the
//! fragile upstream did not need, and the promise is one upstream write per seat.
//!
//! Definition: for every commit `C` on seat `s`, no reserve for `s` (by any user) arrives at a
//! time `t` with `C.at < t < C.at + timing.action_ttl`, unless `C` was released at or before
//! `t` (a freed seat may be tried again; the design then may still close immediates locally,
//! which the truth checker allows).
//!
//! Allowances, each stated: the commit's own millisecond (`t > C.at` strictly: the record does
//! not order calls inside one millisecond); the winner's own second reserve is judged here too
//! (it is also a rewrite, for the no-rewrite checker). After the window, reserves on a standing
//! charge are the design's accepted cost (the suppression is bounded so freed seats are seen
//! again) and are not judged.
//!
//! Clock steps: the suppression is written with the winner's reading of time and ends by each
//! instance's own, so the window ends `Record::clock_skew` early. Its start needs nothing: a
//! wait orders its seat reading after the win only when the reader's stamp is more than
//! `CLOCK_TOLERANCE` past the winner's, which the simulator's skew stays inside (without that
//! margin, seeds 15 and 24 of the default workload sent a wait's reserve 1 ms and 1,018 ms
//! after a win, on a free reading taken just before it by a clock running ahead).

use super::{Checker, Record, Violation};
use crate::upstream::Route;

pub fn check(record: &Record) -> Vec<Violation> {
    let skew = record.clock_skew;
    let window = record.timing.action_ttl.saturating_sub(skew);
    let mut out = Vec::new();
    for commit in &record.commits {
        let until = commit.at.plus(window);
        let seat = format!("seat={} ", commit.seat_id);
        for (i, call) in record.calls.iter().enumerate() {
            if call.route != Route::Reserve
                || call.arrived <= commit.at
                || call.arrived >= until
                || !call.key.starts_with(&seat)
                || commit.released_at.is_some_and(|r| r <= call.arrived)
            {
                continue;
            }
            out.push(Violation::new(
                Checker::NoWastedWrite,
                format!(
                    "reserve {} (call #{i}, answered {}) arrived at {}, {} ms after charge {} of user {} committed on the seat at {} (the {} ms window; {})",
                    call.key,
                    call.outcome.as_deref().unwrap_or(if call.abandoned { "abandoned" } else { "in flight" }),
                    record.t(call.arrived),
                    call.arrived.since(commit.at).as_millis(),
                    commit.charge_id,
                    commit.user_id,
                    record.t(commit.at),
                    window.as_millis(),
                    commit
                        .released_at
                        .map_or_else(|| "never released".to_owned(), |r| format!("released at {}", record.t(r))),
                ),
            ));
        }
    }
    out
}
