//! Rate windows: no user is admitted past the per-user rate limit, `rate_limit_requests` a
//! window of `rate_limit_window`, on each limited route (confirms, waits, bookings).
//!
//! Judged on the store's write log: every request the limit admits is counted by a write to
//! its window's counter (a wait's or a hold's own take, or inside a confirm's or a booking's
//! transaction), logged with its user, route and window start and `"counted": true`. For every
//! (user, route, window), the counted writes are at most the limit. No allowance: the count is one conditional write,
//! whatever the timing (the window's start is the writer's clock reading, so a stepped clock
//! may count a request in a neighbouring window, which is still one window's count).

use super::{Checker, Record, Violation};
use seatgate::domain::Millis;
use std::collections::BTreeMap;

/// One request counted in a rate window, as the store took it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateTake {
    /// When the write landed (true time).
    pub at: Millis,
    pub user: String,
    pub route: String,
    /// The window's start.
    pub start: Millis,
}

/// The counted takes in a store write log (`times[i]` is `writes[i]`'s landing time): the
/// lines of `take_rate` and of a transaction's `<op>.rate_window` (a confirm's, a booking's)
/// with `"counted": true`.
pub fn rate_takes(writes: &[String], times: &[Millis]) -> Vec<RateTake> {
    assert_eq!(writes.len(), times.len(), "a time for every write");
    writes
        .iter()
        .zip(times)
        .filter_map(|(line, &at)| {
            let (op, json) = line.split_once(' ')?;
            if op != "take_rate" && !op.ends_with(".rate_window") {
                return None;
            }
            let v: serde_json::Value = serde_json::from_str(json).unwrap_or_else(|e| {
                panic!("a rate window write the log cannot give back ({e}): {json}")
            });
            if v.get("counted") != Some(&serde_json::Value::Bool(true)) {
                return None;
            }
            Some(RateTake {
                at,
                user: v.get("user")?.as_str()?.to_owned(),
                route: v.get("route")?.as_str()?.to_owned(),
                start: Millis(v.get("start")?.as_i64()?),
            })
        })
        .collect()
}

pub fn check(record: &Record) -> Vec<Violation> {
    judge(record).0
}

/// Windows whose count reached the limit (printed by `simulate`, so the default histories are
/// seen to fill windows, where the limit refuses).
pub fn windows_filled(record: &Record) -> usize {
    judge(record).1
}

fn judge(record: &Record) -> (Vec<Violation>, usize) {
    let limit = record.timing.rate_limit_requests as usize;
    let mut counts: BTreeMap<(&str, &str, Millis), (usize, Millis)> = BTreeMap::new();
    for take in &record.rate_takes {
        let c = counts
            .entry((take.user.as_str(), take.route.as_str(), take.start))
            .or_insert((0, take.at));
        c.0 += 1;
        c.1 = take.at;
    }
    let mut out = Vec::new();
    let mut filled = 0;
    for ((user, route, start), (count, last)) in counts {
        if count > limit {
            out.push(Violation::new(
                Checker::RateWindow,
                format!(
                    "user {user} was admitted {count} {route} requests in the window from {}, past the limit of {limit} (the last counted at {})",
                    record.t(start),
                    record.t(last)
                ),
            ));
        } else if count == limit {
            filled += 1;
        }
    }
    (out, filled)
}
