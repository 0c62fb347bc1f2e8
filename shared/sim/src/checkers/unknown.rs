//! No reserve for a seat while an attempt on it has an unknown outcome: a seat has at most one
//! attempt in flight, and once an attempt's caller could not tell whether it was written (a lost
//! 201, a 500, a timeout, a caller cut short), nothing is sent for that seat again until that
//! user's charge has been read. This is what the seat's claim promises: the claim takes it, only
//! the attempt's settlement releases it, and an unknown outcome is settled only by reading the
//! charge (the reaper), never by writing again.
//!
//! Definition: for every reserve call `R` (seat `s`, user `u`), its window is
//! - `R.arrived .. R.answered` if its caller heard a definite answer (201, 409, 401, 4xx, and a
//!   busy 429/503, which wrote nothing): the attempt was in flight;
//! - otherwise (answered `500`, `timeout`, a `201` whose answer was lost, abandoned by its
//!   caller, or still in flight at the end) from `R.arrived` until the earliest definite
//!   answer (`200` a charge, `404 no_charge`, `401`) to a charge read of `u` that arrived after
//!   `R`, or the end of the run if none was;
//!
//! and no other reserve call for `s` (any user) arrives strictly inside it:
//! `R.arrived < R2.arrived < end`.
//!
//! Allowances, each stated:
//! - a reserve arriving in the very millisecond `R` arrived is not judged: the record does not
//!   order two arrivals of one millisecond;
//! - any definite charge read of `u` closes the window, even one made for another of `u`'s
//!   attempts (the record keys a charge read by user, not by seat or intent): lenient, so a
//!   violation is never one this system could not have known better about;
//! - the users' releases are not calls from seatgate and are never judged.

use super::{Checker, Record, Violation};
use crate::upstream::{Call, Route};
use seatgate::domain::Millis;
use std::collections::BTreeMap;

pub fn check(record: &Record) -> Vec<Violation> {
    // Reserve calls by seat, in arrival order.
    let mut by_seat: BTreeMap<&str, Vec<(usize, &Call)>> = BTreeMap::new();
    for (i, call) in record.calls.iter().enumerate() {
        if call.route == Route::Reserve
            && let Some(seat) = seat_of(call)
        {
            by_seat.entry(seat).or_default().push((i, call));
        }
    }
    let mut out = Vec::new();
    for calls in by_seat.values() {
        for (k, &(r, first)) in calls.iter().enumerate() {
            let (end, why) = window(record, r, first);
            // Later calls of the seat, in arrival order, inside the window.
            for &(c, call) in calls.iter().skip(k + 1) {
                if end.is_some_and(|end| call.arrived >= end) {
                    break;
                }
                if call.arrived <= first.arrived {
                    continue;
                }
                out.push(Violation::new(
                    Checker::Unknown,
                    format!(
                        "reserve {} (call #{c}) arrived at {} while reserve {} (call #{r}, arrived at {}) {why}",
                        call.key,
                        record.t(call.arrived),
                        first.key,
                        record.t(first.arrived),
                    ),
                ));
            }
        }
    }
    out
}

/// Where the window of reserve `call` (index `i`) ends (`None`: the end of the run), and what
/// it was, for the message.
fn window(record: &Record, i: usize, call: &Call) -> (Option<Millis>, String) {
    if let (false, Some(answered), Some(outcome)) =
        (call.abandoned, call.answered, call.outcome.as_deref())
        && is_definite(outcome)
    {
        return (
            Some(answered),
            format!(
                "was still in flight (answered {outcome} at {})",
                record.t(answered)
            ),
        );
    }
    let what = match (call.abandoned, call.outcome.as_deref()) {
        (true, _) => "abandoned by its caller",
        (false, Some(o)) => o,
        (false, None) => "in flight at the end",
    };
    let user = user_of(call);
    // The earliest definite answer, not the first arrival's: two reads that arrived together
    // (two reapers) may answer out of order, and the settlement follows whichever came first.
    let read = record
        .calls
        .iter()
        .skip(i + 1)
        .filter(|c| c.route == Route::Charge && Some(c.key.as_str()) == user)
        .filter_map(|c| {
            c.answered
                .filter(|_| !c.abandoned && c.outcome.as_deref().is_some_and(is_definite_read))
        })
        .min();
    match read {
        Some(at) => (
            Some(at),
            format!(
                "had an unknown outcome ({what}) until its user's charge was read at {}",
                record.t(at)
            ),
        ),
        None => (
            None,
            format!("had an unknown outcome ({what}), its user's charge never read after it"),
        ),
    }
}

/// Whether a reserve's recorded outcome is one its caller heard and could act on: a 201 it
/// received, any 4xx (409, 401, a 429 busy), a 503 busy. A 500 or a timeout is not.
fn is_definite(outcome: &str) -> bool {
    (outcome.starts_with("201 ") && !outcome.ends_with("(answer lost)"))
        || outcome.starts_with('4')
        || outcome.starts_with("503")
}

/// Whether a charge read's recorded outcome tells whether the user holds a charge.
fn is_definite_read(outcome: &str) -> bool {
    outcome.starts_with("200 ") || outcome.starts_with("404") || outcome.starts_with("401")
}

/// `seat=S-1` of a reserve's key `"seat=S-1 user=u-01"`.
fn seat_of(call: &Call) -> Option<&str> {
    call.key.split(' ').find(|part| part.starts_with("seat="))
}

/// `user=u-01` of a reserve's key, as a charge read's key names it.
fn user_of(call: &Call) -> Option<&str> {
    call.key.split(' ').find(|part| part.starts_with("user="))
}
