//! A checkout hold's life: it is born `HELD`, may be extended within its flight's limit while
//! it lives, and ends exactly once, as `CONFIRMED` or `RELEASED` before its deadline or
//! `LAPSED` at or after it, and a hold past its deadline is lapsed within a reaper pass once
//! the faults stop.
//!
//! The bank cannot see these: a hold left `HELD` past its deadline keeps the counters
//! balanced, and so does a lapsed hold later confirmed or a hold confirmed after its deadline.
//! So this checker reads every write of every hold (a user's hold or a waiting-list offer) from
//! the store's write log ([`super::sale_log`]), each with the true time it landed, and judges,
//! per hold, in log order:
//! 1. its first write is `HELD`, with a deadline no further from its creation than its
//!    flight's hold (or offer) lifetime;
//! 2. what a hold is never changes: its flight, user, head count, shard, creation time, booking
//!    and offer;
//! 3. an extension (a `HELD` write after the first) lands before the deadline it extends,
//!    moves the deadline later, and never past creation plus the flight's `hold_max_secs`;
//! 4. it ends once: a `CONFIRMED` or `RELEASED` write lands before its deadline, a `LAPSED`
//!    write at or after it, and nothing is written after its end;
//! 5. a hold past its deadline ends by `max(deadline, faults' end)` plus one reaper interval
//!    and a pass's budget (the reaper lapses every due hold each pass), or the run's end is
//!    late for it;
//! 6. the store at the end agrees: each hold is as its last write left it, and a confirmed
//!    hold's booking is stored.
//!
//! Allowance: deadlines are the creator's clock reading plus a lifetime, and a confirm or lapse
//! is decided on its writer's reading, so every comparison of a write's true time with a
//! deadline allows the record's clock skew, as the other clock-judged promises do. Nothing
//! else is allowed: the store decides each write on the stored hold, in one conditional write.

use super::{Checker, Record, Violation};
use seatgate::domain::{CheckoutHold, CheckoutTimes, FlightId, HoldId, HoldStatus, Millis};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// One write of a checkout hold: when it landed (true time), and the hold as written.
struct CheckoutWrite<'a> {
    at: Millis,
    hold: &'a CheckoutHold,
}

/// How long after `max(deadline, faults' end)` a hold past its deadline may stay `HELD`.
pub fn lapse_bound(record: &Record) -> Duration {
    record.timing.reaper_interval + record.timing.reaper_pass_budget + record.clock_skew
}

pub fn check(record: &Record) -> Vec<Violation> {
    let writes: Vec<CheckoutWrite<'_>> = record
        .sale
        .iter()
        .filter_map(|w| {
            Some(CheckoutWrite {
                at: w.at,
                hold: w.hold()?,
            })
        })
        .collect();
    judge(record, &writes)
}

fn judge(record: &Record, writes: &[CheckoutWrite<'_>]) -> Vec<Violation> {
    let times: BTreeMap<&FlightId, CheckoutTimes> = record
        .last
        .flights
        .iter()
        .map(|f| (&f.flight.flight_id, f.flight.checkout))
        .collect();
    let mut lives: BTreeMap<&HoldId, Vec<&CheckoutWrite<'_>>> = BTreeMap::new();
    for w in writes {
        lives.entry(&w.hold.hold_id).or_default().push(w);
    }
    let mut out = Vec::new();
    for (id, life) in &lives {
        let Some(flight_times) = times.get(&life[0].hold.flight_id) else {
            out.push(violation(format!(
                "hold {id} is on flight {}, which the store does not hold",
                life[0].hold.flight_id
            )));
            continue;
        };
        out.extend(one_life(record, *flight_times, life));
    }
    out.extend(the_end_agrees(record, &lives));
    out
}

fn violation(message: String) -> Violation {
    Violation::new(Checker::HoldLife, message)
}

/// Rules 1 to 5 over one hold's writes, in log order.
fn one_life(record: &Record, times: CheckoutTimes, life: &[&CheckoutWrite<'_>]) -> Vec<Violation> {
    let skew = record.clock_skew;
    let mut out = Vec::new();
    let first = &life[0].hold;
    let id = &first.hold_id;
    let lifetime = if first.offer_for.is_some() {
        times.offer_ttl()
    } else {
        times.hold_ttl()
    };
    if first.status != HoldStatus::Held {
        out.push(violation(format!(
            "hold {id}'s first write at {} is {}, not HELD",
            record.t(life[0].at),
            first.status.as_str()
        )));
    }
    if first.expires_at > first.created_at.plus(lifetime) {
        out.push(violation(format!(
            "hold {id} was made at {} with a deadline {}, past its lifetime of {lifetime:?}",
            record.t(first.created_at),
            record.t(first.expires_at)
        )));
    }
    let max = first.created_at.plus(times.hold_max());
    let mut deadline = first.expires_at;
    let mut ended: Option<&CheckoutWrite<'_>> = None;
    for w in &life[1..] {
        let h = w.hold;
        let at = record.t(w.at);
        if let Some(end) = ended {
            out.push(violation(format!(
                "hold {id} ended {} at {}, then was written {} at {at}",
                end.hold.status.as_str(),
                record.t(end.at),
                h.status.as_str()
            )));
            continue;
        }
        if !same_hold(first, h) {
            out.push(violation(format!(
                "hold {id} changed what it is at {at}: {first:?} became {h:?}"
            )));
        }
        match h.status {
            HoldStatus::Held => {
                if w.at >= deadline.plus(skew) {
                    out.push(violation(format!(
                        "hold {id} was extended at {at}, past its deadline {} (allowance {skew:?})",
                        record.t(deadline)
                    )));
                }
                if h.expires_at <= deadline || h.expires_at > max {
                    out.push(violation(format!(
                        "hold {id}'s extension at {at} moved its deadline from {} to {}, which must be later and at most {} (created {} plus {:?})",
                        record.t(deadline),
                        record.t(h.expires_at),
                        record.t(max),
                        record.t(first.created_at),
                        times.hold_max()
                    )));
                }
                deadline = h.expires_at;
            }
            HoldStatus::Confirmed | HoldStatus::Released => {
                if w.at >= deadline.plus(skew) {
                    out.push(violation(format!(
                        "hold {id} was {} at {at}, past its deadline {} (allowance {skew:?})",
                        h.status.as_str(),
                        record.t(deadline)
                    )));
                }
                ended = Some(w);
            }
            HoldStatus::Lapsed => {
                if w.at.plus(skew) < deadline {
                    out.push(violation(format!(
                        "hold {id} lapsed at {at}, before its deadline {} (allowance {skew:?})",
                        record.t(deadline)
                    )));
                }
                ended = Some(w);
            }
        }
    }
    let due = deadline.max(record.healed_at).plus(lapse_bound(record));
    let (ends_at, how) = match ended {
        Some(end) => (end.at, format!("ended {}", end.hold.status.as_str())),
        None => (
            record.last.at,
            "was still HELD at the run's end".to_string(),
        ),
    };
    let lapsing = ended.is_none_or(|end| end.hold.status == HoldStatus::Lapsed);
    if lapsing && ends_at > due {
        out.push(violation(format!(
            "hold {id} (deadline {}) {how} at {}, but was due to lapse by {} (faults stopped at {}, bound {:?})",
            record.t(deadline),
            record.t(ends_at),
            record.t(due),
            record.t(record.healed_at),
            lapse_bound(record)
        )));
    }
    out
}

/// Whether `b` is the same hold as `a`: everything but its status, deadline and resolution.
fn same_hold(a: &CheckoutHold, b: &CheckoutHold) -> bool {
    a.hold_id == b.hold_id
        && a.flight_id == b.flight_id
        && a.user_id == b.user_id
        && a.head_count == b.head_count
        && a.shard == b.shard
        && a.created_at == b.created_at
        && a.booking_id == b.booking_id
        && a.offer_for == b.offer_for
}

/// Rule 6: every hold in the final store is as its last write left it (and none is unwritten),
/// and every confirmed hold's booking is stored.
fn the_end_agrees(
    record: &Record,
    lives: &BTreeMap<&HoldId, Vec<&CheckoutWrite<'_>>>,
) -> Vec<Violation> {
    let mut out = Vec::new();
    let bookings: BTreeSet<_> = record.last.bookings.iter().map(|b| &b.booking_id).collect();
    for hold in &record.last.checkout_holds {
        let last = lives.get(&hold.hold_id).and_then(|life| life.last());
        match last {
            None => out.push(violation(format!(
                "hold {} is in the store at the end, but no write made it",
                hold.hold_id
            ))),
            Some(w) if w.hold != hold => out.push(violation(format!(
                "hold {} is {:?} at the end, but its last write at {} was {:?}",
                hold.hold_id,
                hold,
                record.t(w.at),
                w.hold
            ))),
            Some(_) => {}
        }
        if hold.status == HoldStatus::Confirmed && !bookings.contains(&hold.booking_id) {
            out.push(violation(format!(
                "hold {} is CONFIRMED, but its booking {} is not in the store",
                hold.hold_id, hold.booking_id
            )));
        }
    }
    let stored: BTreeSet<_> = record
        .last
        .checkout_holds
        .iter()
        .map(|h| &h.hold_id)
        .collect();
    for id in lives.keys().filter(|id| !stored.contains(*id)) {
        out.push(violation(format!(
            "hold {id} was written, but is not in the store at the end"
        )));
    }
    out
}
