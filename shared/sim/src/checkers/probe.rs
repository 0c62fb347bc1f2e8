//! The upstream spared while the breaker is open: no call at all while it is open (once every
//! instance can have seen it open), and then one probe per probing phase, fleet-wide. A breaker
//! that lets every instance probe at once hits an upstream that is failing with as many calls as
//! there are instances, each interval.
//!
//! What the record shows: the breaker's state is one store item, and every change to it is one
//! conditional write (`BreakerStates::swap_breaker`), so the store's write log holds every phase
//! the fleet went through, each with the time it began (`since`): [`Record::breaker`]. The calls
//! are the upstream model's record. (Whether the breaker *should* have opened is each instance's
//! own count of its own calls, which no record shows; this checker judges what happened while it
//! was open, not when it opened.)
//!
//! Definition: the breaker's writes `W1, W2, ..` in order give its phases, `Wi` holding from
//! `Wi.since` until the next write's `since` (or the end of the run). Then:
//! - open: in an open phase `Wi`, no call (any route) arrives at a time `t` with
//!   `Wi.since + allowance < t < end`, where the allowance is `timing.instance_cache_ttl` if the
//!   breaker opened from closed (an instance trusts the closed state it read for that long), and
//!   none if it reopened after a probe (every instance then knew a probe was out: a probing
//!   state is not trusted past its reading, and an open one only shuts);
//! - probing: in a probing phase `Wi` (one instance won the write that lets it send one call),
//!   at most one call arrives at a time `t` with `Wi.since <= t < end`. A probe whose holder died
//!   leaves a lease that runs out, and the next probe is a new probing write, so each probing
//!   phase has its own one call.
//!
//! Phases begin when their writes land (true time), not at the `since` the writer read off its
//! own clock, so clock steps do not move them; the one allowance they need is in the trust of a
//! cached closed state, which each instance times by its own clock: `instance_cache_ttl` plus
//! `Record::clock_skew`.
//!
//! Allowances, each stated: a call arriving in the very millisecond an open phase began is not
//! judged (the record does not order it against the write); a call arriving in the millisecond a
//! phase ends is judged in the next one (the write that closes the breaker comes before the call
//! the prober then sends); the users' releases are not calls from seatgate and are never judged.

use super::{Checker, Record, Violation};
use crate::upstream::{Call, Route};
use seatgate::domain::{BreakerPhase, Millis};
use std::time::Duration;

pub fn check(record: &Record) -> Vec<Violation> {
    let mut out = Vec::new();
    let calls: Vec<(usize, &Call)> = record
        .calls
        .iter()
        .enumerate()
        .filter(|(_, c)| c.route != Route::Release)
        .collect();
    let mut previous_closed = true;
    for (w, state) in record.breaker.iter().enumerate() {
        let from = state.since;
        let end = record.breaker.get(w + 1).map(|next| next.since);
        let inside = |t: Millis| end.is_none_or(|end| t < end);
        match &state.phase {
            BreakerPhase::Closed => {}
            BreakerPhase::Open { until } => {
                let allowance = if previous_closed {
                    record.timing.instance_cache_ttl + record.clock_skew
                } else {
                    Duration::ZERO
                };
                let after = from.plus(allowance);
                for &(c, call) in &calls {
                    if call.arrived > after && inside(call.arrived) {
                        out.push(Violation::new(
                            Checker::Probe,
                            format!(
                                "{} {} (call #{c}) arrived at {} while the breaker was open (generation {}, opened at {} until {}{})",
                                call.route,
                                call.key,
                                record.t(call.arrived),
                                state.generation,
                                record.t(from),
                                record.t(*until),
                                if allowance.is_zero() {
                                    ", reopened after a probe".to_owned()
                                } else {
                                    format!(", {} ms allowed after it opened", allowance.as_millis())
                                },
                            ),
                        ));
                    }
                }
            }
            BreakerPhase::Probing { holder, until } => {
                let sent: Vec<String> = calls
                    .iter()
                    .filter(|(_, call)| call.arrived >= from && inside(call.arrived))
                    .map(|(c, call)| {
                        format!(
                            "#{c} {} {} at {}",
                            call.route,
                            call.key,
                            record.t(call.arrived)
                        )
                    })
                    .collect();
                if sent.len() > 1 {
                    out.push(Violation::new(
                        Checker::Probe,
                        format!(
                            "{} calls during one probing phase (generation {}, probe taken by {holder} at {}, lease until {}{}): {}",
                            sent.len(),
                            state.generation,
                            record.t(from),
                            record.t(*until),
                            end.map_or_else(
                                || ", never settled".to_owned(),
                                |e| format!(", settled at {}", record.t(e))
                            ),
                            sent.join("; ")
                        ),
                    ));
                }
            }
        }
        previous_closed = state.is_closed();
    }
    out
}
