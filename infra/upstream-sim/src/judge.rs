//! Judging the simulator's call log against the `Retry-After` answers it gave: did any caller
//! come back before it was told it could?
//!
//! Lives with the simulator because it reads the simulator's own record ([`CallRecord`]), and
//! both the protection tests and the benchmark judge a run with it. A call that arrives within
//! `in_flight_ms` of the answer that started a hold is counted apart: it was on its way (or
//! decided) before anyone could know of the `Retry-After`, which no client can honour.

use crate::CallRecord;
use std::collections::BTreeMap;

/// What the log says of the `Retry-After`s given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetryAfterJudgement {
    /// Calls of a held route that arrived within `in_flight_ms` of the call whose answer
    /// started the hold.
    pub in_flight: usize,
    /// Calls of a held route that arrived later but before the `Retry-After` had passed.
    pub early: usize,
}

/// Judges `calls` when every call of a route arriving in `given_from..given_to` was answered
/// with a `Retry-After` of `retry_after_ms` (the simulator's outage or rate limit, answered at
/// once, so a call's arrival is when its answer was given, to the millisecond of the log).
pub fn retry_after_respected(
    calls: &[CallRecord],
    given_from: u64,
    given_to: u64,
    retry_after_ms: u64,
    in_flight_ms: u64,
) -> RetryAfterJudgement {
    let mut sorted: Vec<&CallRecord> = calls.iter().filter(|c| c.at_ms >= given_from).collect();
    sorted.sort_by_key(|c| c.at_ms);
    // Per route: when the answer that started the current hold was given, and its end.
    let mut holds: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    let mut j = RetryAfterJudgement::default();
    for c in sorted {
        let answered_with_one = c.at_ms < given_to;
        match holds.get_mut(c.route.as_str()) {
            Some((given, until)) if c.at_ms < *until => {
                if c.at_ms <= *given + in_flight_ms {
                    j.in_flight += 1;
                } else {
                    j.early += 1;
                }
                if answered_with_one {
                    *until = (*until).max(c.at_ms + retry_after_ms);
                }
            }
            _ if answered_with_one => {
                holds.insert(c.route.as_str(), (c.at_ms, c.at_ms + retry_after_ms));
            }
            _ => {}
        }
    }
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(v: &[(u64, &str)]) -> Vec<CallRecord> {
        v.iter()
            .map(|(at, r)| CallRecord {
                at_ms: *at,
                route: (*r).into(),
            })
            .collect()
    }

    #[test]
    fn calls_inside_a_retry_after_of_their_route_are_early_unless_in_flight() {
        // Answers with Retry-After: 1 s from 1000 to 5000, 20 ms in flight.
        let calls = log(&[
            (500, "a"),  // before: no Retry-After yet
            (1000, "a"), // starts a hold to 2000
            (1010, "a"), // in flight
            (1500, "a"), // early
            (1600, "b"), // another route: starts its own
            (2500, "a"), // on time: a new hold to 3500
            (4999, "b"), // hold to 5999
            (5500, "b"), // early, after the outage too
            (6000, "a"), // after everything
        ]);
        assert_eq!(
            retry_after_respected(&calls, 1000, 5000, 1000, 20),
            RetryAfterJudgement {
                in_flight: 1,
                early: 2
            }
        );
        assert_eq!(
            retry_after_respected(&calls[..3], 1000, 5000, 1000, 0),
            RetryAfterJudgement {
                in_flight: 0,
                early: 1
            },
            "with no allowance the call 10 ms later is early"
        );
    }
}
