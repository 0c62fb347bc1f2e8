//! Reads spared: however many users and waits ask about one seat or room, the upstream is read
//! at most once per key per read TTL, fleet-wide (the seat-read cache's promise: a shared
//! reading with a refresh lease, in front of each instance's own short-lived copy).
//!
//! Definition: for every seat or room read `A` that arrived at `a` and was answered `200`, no
//! other read of the same key arrives at a time `t` with `a < t < a + timing.read_ttl`. (A
//! reading's age counts from when it was asked for: the answer may describe any instant of the
//! call, so the cache serves it for one TTL from the call's start, and a read sent while
//! another of the key is in flight is one the refresh lease should have spared.)
//!
//! Allowances, each stated:
//! - probes: while the breaker is probing ([`Record::breaker`]), its one probe is a seat read
//!   sent past the cache (it must reach the upstream to tell whether it recovered), so a read
//!   arriving in a probing phase is not judged (the probe checker judges those);
//! - the same millisecond: `t > a` strictly, as the record does not order calls inside one
//!   millisecond;
//! - a read that failed (an error, a busy answer) left nothing to serve, so it starts no
//!   window; failed reads are spared by the `Retry-After` and breaker checkers instead;
//! - a read whose caller's run was killed while it was in flight or after ([`Record::killed`]:
//!   a run on the caller's instance that started at or before the read and was killed after
//!   it) may have died before it shared the reading, so it too starts no window, as a failed
//!   one. Without restarts the sim keeps a crashed instance alive with its holder id, so its
//!   own refresh lease lets it read again at once (seed 1616: 401 ms later); with them, as a
//!   killed Lambda, it comes back with a new id and caller id and waits the lease out. This over-allows a little (another run on that instance
//!   killed in the span excuses the read too); crashes are a few per seed;
//! - a probe's read binds only its own instance: the probe goes past the cache and its refresh
//!   lease, so another instance holding the lease, with a stale reading in the store, reads as
//!   it must until the probe's reading is stored (seed 2859: 23 ms after the probe asked, its
//!   reading's write held up by a throttle). The probing instance itself must not read again
//!   (seed 299 stays judged);
//! - clock steps: a reading's age is each instance's own clock against the time its reader
//!   wrote, so the window ends `Record::clock_skew` early.

use super::{Checker, Record, Violation};
use crate::upstream::Route;
use seatgate::domain::{BreakerPhase, Millis};

pub fn check(record: &Record) -> Vec<Violation> {
    let ttl = record.timing.read_ttl;
    let probing = probing_spans(record);
    let in_probe = |t: Millis| probing.iter().any(|(from, to)| *from <= t && t < *to);
    let mut out = Vec::new();
    for (a, read) in record.calls.iter().enumerate() {
        let fresh = matches!(read.route, Route::Seat | Route::Room)
            && !read.abandoned
            && read
                .outcome
                .as_deref()
                .is_some_and(|o| o.starts_with("200"));
        if !fresh || killed_after(record, read) {
            continue;
        }
        let asked = read.arrived;
        let until = asked.plus(ttl).minus(record.clock_skew);
        // A probe's reading binds its own instance at once, others only through the store.
        let probe = in_probe(asked);
        for (b, again) in record.calls.iter().enumerate().skip(a + 1) {
            if again.arrived >= until {
                break;
            }
            if again.route == read.route
                && again.key == read.key
                && again.arrived > asked
                && !in_probe(again.arrived)
                && (!probe || again.caller == read.caller)
            {
                out.push(Violation::new(
                    Checker::Reads,
                    format!(
                        "{} {} read again at {} (call #{b}), {} ms after a read that arrived at {} (call #{a}: {}), inside the {} ms read TTL",
                        again.route,
                        again.key,
                        record.t(again.arrived),
                        again.arrived.since(asked).as_millis(),
                        record.t(asked),
                        read.outcome.as_deref().unwrap_or("?"),
                        ttl.as_millis()
                    ),
                ));
            }
        }
    }
    out
}

/// Whether a run on `call`'s instance that had started by its arrival was killed after it.
fn killed_after(record: &Record, call: &crate::upstream::Call) -> bool {
    record.killed.iter().any(|k| {
        Some(k.instance) == call.caller && k.started <= call.arrived && k.at >= call.arrived
    })
}

/// The spans the breaker was probing: each probing write's landing to the next write's.
fn probing_spans(record: &Record) -> Vec<(Millis, Millis)> {
    let end = record.last.at.plus(std::time::Duration::from_millis(1));
    record
        .breaker
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s.phase, BreakerPhase::Probing { .. }))
        .map(|(i, s)| (s.since, record.breaker.get(i + 1).map_or(end, |n| n.since)))
        .collect()
}
