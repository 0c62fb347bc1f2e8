//! The upstream spared (a first version): when the upstream answers a call with a `Retry-After`
//! (429, or a 503 that gives one), no call of that route reaches it again before that time has
//! passed, from any instance. The model knows what it told, so the check needs no knowledge of
//! seatgate's pauses: it judges the calls against the upstream's own words.
//!
//! Definition: for every call `B` on route `r` (reserve, charge read, seat read, room read)
//! answered at `B.answered = a` with a `Retry-After` of `d`, no call on `r` arrives at a time
//! `t` with `a < t < a + min(d, timing.retry_after_max)`.
//!
//! Who must know: the instance that heard the answer (`B.caller`) knows at once; every other
//! instance can only learn it from the store, where the hearer writes it as a pause (the domain's
//! `RoutePauses`, one item; `Breaker::pause`), and reads the pauses afresh before every call. So a
//! call `C` from another instance is judged only once the store could have told it: some pause
//! on `r` that lasts past `t` landed strictly before `t` ([`Record::pauses`]). Until then the
//! fleet could not know, whatever it did; the seeds 2722 and 2951 are such calls (7 and
//! 12 ms after the answer, before the hearer's pause write, retried after a refused first try,
//! had landed).
//!
//! Allowances, each stated:
//! - calls in flight: a call is decided when it is sent, and the model records its arrival at
//!   that instant (its latency is spent after), so a call that arrived at or before `a` was
//!   decided before the `Retry-After` was heard and is not judged (`t > a`, strictly: calls in
//!   the same millisecond are not ordered against the answer by the record), and likewise a
//!   pause that landed in the very millisecond of another instance's call is not held against
//!   it;
//! - the cap: seatgate pauses a route at most `retry_after_max` (so a hostile or broken upstream
//!   cannot silence it for a day); a `Retry-After` longer than that is judged up to the cap;
//! - the users' releases are not calls from seatgate and are never judged;
//! - clock steps: a pause is written with its hearer's reading of time and expires by each
//!   instance's own, so the window ends `Record::clock_skew` early, and a store pause counts
//!   until `clock_skew` before its `until`.
//!
//! Judged elsewhere: no call while the breaker is open, one probe per probing phase
//! ([`super::probe`]). Not yet judged: at most one read per key per read TTL.

use super::{Checker, Record, Violation};
use crate::upstream::{Call, Route};
use seatgate::domain::{Millis, UpstreamRoute};
use std::time::Duration;

pub fn check(record: &Record) -> Vec<Violation> {
    let cap = record.timing.retry_after_max;
    let mut out = Vec::new();
    for (b, told) in record.calls.iter().enumerate() {
        let (Some(answered), Some(after)) = (told.answered, retry_after(told)) else {
            continue;
        };
        let until = answered.plus(after.min(cap)).minus(record.clock_skew);
        // Calls are in arrival order: those after `b` that arrived inside the window.
        for (c, call) in record.calls.iter().enumerate().skip(b + 1) {
            if call.arrived >= until {
                break;
            }
            if call.route == told.route
                && call.arrived > answered
                && (call.caller == told.caller || store_held(record, call.route, call.arrived))
            {
                out.push(Violation::new(
                    Checker::Spared,
                    format!(
                        "{} {} (call #{c}, {}) arrived at {}, {} ms into the {} ms Retry-After the upstream gave at {} (call #{b} from {}: {} -> {}){}",
                        call.route,
                        call.key,
                        caller(call),
                        record.t(call.arrived),
                        call.arrived.since(answered).as_millis(),
                        after.min(cap).as_millis(),
                        record.t(answered),
                        caller(told),
                        told.key,
                        told.outcome.as_deref().unwrap_or("?"),
                        if call.caller == told.caller {
                            ", which heard it"
                        } else {
                            ", the store pausing the route"
                        },
                    ),
                ));
            }
        }
    }
    out
}

/// Whether the store paused `route` at `t`: a pause on it lasting past `t` landed before `t`.
fn store_held(record: &Record, route: Route, t: Millis) -> bool {
    let Some(route) = held_route(route) else {
        return false;
    };
    record
        .pauses
        .iter()
        .take_while(|h| h.at < t)
        .any(|h| h.route == route && h.until.minus(record.clock_skew) > t)
}

/// The pause a model route is paused under (a release is never paused).
fn held_route(route: Route) -> Option<UpstreamRoute> {
    match route {
        Route::Reserve => Some(UpstreamRoute::Reserve),
        Route::Charge => Some(UpstreamRoute::Charge),
        Route::Seat => Some(UpstreamRoute::Seat),
        Route::Room => Some(UpstreamRoute::Room),
        Route::Release => None,
    }
}

fn caller(call: &Call) -> String {
    call.caller
        .map_or_else(|| "no instance".to_owned(), |i| format!("instance {i}"))
}

/// The `Retry-After` a call was answered with, from its recorded outcome
/// (`"429 retry-after 1000ms"`, `"503 retry-after 2000ms"`).
fn retry_after(call: &Call) -> Option<Duration> {
    if call.route == Route::Release || call.abandoned {
        return None;
    }
    let outcome = call.outcome.as_deref()?;
    let rest = outcome
        .strip_prefix("429 retry-after ")
        .or_else(|| outcome.strip_prefix("503 retry-after "))?;
    let ms: u64 = rest.strip_suffix("ms")?.parse().ok()?;
    Some(Duration::from_millis(ms))
}
