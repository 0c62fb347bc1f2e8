//! What the operator is shown is what happened: a flight's live holds listed while the sale
//! runs are the holds live then, and every event that never reached its subscribers is
//! visible in the event queue's dead-letter count, and reaches them once redriven.
//!
//! Judged on the operator's record ([`OperatorRecord`], made by [`crate::workload::operator`])
//! against the store's write log and the subscribers' own record, never against another read
//! of the same store:
//! 1. a listing of a flight's `HELD` holds, read page by page from `from` to `to` (true
//!    times), lists only holds of that flight, each once and as `HELD`, each live at some
//!    instant of the read (its `HELD` write landed by `to`, and its end, if any, at or after
//!    `from`); and a listing that reached its last page lists every hold of the flight live
//!    throughout the read (written `HELD` before `from`, not ended by `to`);
//! 2. the depths read once the world got quiet show nothing ready or in flight in either
//!    queue, and a webhook dead-letter count at least the number of events that must have
//!    been announced ([`super::events`]'s list) and that the subscribers had not accepted by
//!    then: each of those is in the dead-letter queue or nowhere;
//! 3. the redrive that followed moved exactly the dead letters that read showed; once the
//!    world was quiet again, the depths show no dead letter and nothing ready or in flight,
//!    and every event that must have been announced has been accepted by the subscribers.
//!
//! Allowance: none for rule 1 beyond the read's own span (the listing is a store read, and the
//! write log's times are the store's). Rules 2 and 3 are judged at quiet instants, when no
//! delivery is in flight. A run whose operator is off has no record and nothing is judged; in
//! a run that never got quiet the round does not run (liveness judges that run).

use super::{Checker, Record, Violation};
use seatgate::domain::{FlightId, HoldId, HoldStatus, Millis};
use seatgate::ports::{QueueDepth, QueueDepths, Redriven};
use std::collections::{BTreeMap, BTreeSet};

/// One listing of a flight's live holds, every page the operator read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldListing {
    pub flight: FlightId,
    /// True times the first page was asked for and the last answered.
    pub from: Millis,
    pub to: Millis,
    /// Every hold listed, in the order the pages gave them, with the status each was shown in.
    pub holds: Vec<(HoldId, HoldStatus)>,
    pub pages: usize,
    /// Whether the operator reached the last page.
    pub complete: bool,
}

/// One read of both queues' depths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DepthsRead {
    pub at: Millis,
    pub depths: QueueDepths,
    /// How many deliveries the subscribers had accepted when the answer came (a prefix of the
    /// record's deliveries).
    pub delivered: usize,
}

/// What the operator read and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OperatorRecord {
    pub listings: Vec<HeldListing>,
    /// Depth reads made while the sale ran.
    pub looks: usize,
    /// Whether the dead-letter round ran (it runs once the world got quiet after the sale).
    pub round: bool,
    /// The depths once the world got quiet, before the redrive.
    pub quiet_read: Option<DepthsRead>,
    /// What the redrive moved in all, if any call answered.
    pub redriven: Option<Redriven>,
    /// Whether the world got quiet again after the redrive, and the depths then.
    pub quiet_again: bool,
    pub after: Option<DepthsRead>,
}

pub fn check(record: &Record) -> Vec<Violation> {
    let Some(operator) = &record.operator else {
        return Vec::new();
    };
    let mut out = listings(record, operator);
    out.extend(dead_letters(record, operator));
    out
}

/// A hold's live span from the write log: when its `HELD` write landed, and when it ended.
struct Span {
    flight: FlightId,
    born: Millis,
    ended: Option<Millis>,
}

fn spans(record: &Record) -> BTreeMap<HoldId, Span> {
    let mut spans: BTreeMap<HoldId, Span> = BTreeMap::new();
    for w in &record.sale {
        let Some(hold) = w.hold() else { continue };
        let span = spans.entry(hold.hold_id.clone()).or_insert(Span {
            flight: hold.flight_id.clone(),
            born: w.at,
            ended: None,
        });
        if hold.status != HoldStatus::Held && span.ended.is_none() {
            span.ended = Some(w.at);
        }
    }
    spans
}

fn listings(record: &Record, operator: &OperatorRecord) -> Vec<Violation> {
    let spans = spans(record);
    let mut out = Vec::new();
    for l in &operator.listings {
        let read = format!(
            "the operator's listing of {}'s live holds ({} to {})",
            l.flight,
            record.t(l.from),
            record.t(l.to)
        );
        let mut listed = BTreeSet::new();
        for (id, status) in &l.holds {
            if !listed.insert(id) {
                out.push(violation(format!("{read} lists hold {id} twice")));
            }
            if *status != HoldStatus::Held {
                out.push(violation(format!("{read} lists hold {id} as {status:?}")));
            }
            match spans.get(id) {
                None => out.push(violation(format!(
                    "{read} lists hold {id}, which nothing wrote"
                ))),
                Some(s) if s.flight != l.flight => out.push(violation(format!(
                    "{read} lists hold {id}, which is on {}",
                    s.flight
                ))),
                Some(s) if s.born > l.to || s.ended.is_some_and(|e| e < l.from) => {
                    out.push(violation(format!(
                        "{read} lists hold {id}, live only from {} to {}",
                        record.t(s.born),
                        s.ended.map_or("the end".into(), |e| record.t(e))
                    )))
                }
                Some(_) => {}
            }
        }
        if !l.complete {
            continue;
        }
        for (id, s) in &spans {
            let throughout =
                s.flight == l.flight && s.born < l.from && s.ended.is_none_or(|e| e > l.to);
            if throughout && !listed.contains(id) {
                out.push(violation(format!(
                    "{read} misses hold {id}, live from {} to {}",
                    record.t(s.born),
                    s.ended.map_or("the end".into(), |e| record.t(e))
                )));
            }
        }
    }
    out
}

fn dead_letters(record: &Record, operator: &OperatorRecord) -> Vec<Violation> {
    let mut out = Vec::new();
    if !operator.round {
        return out;
    }
    let Some(quiet) = &operator.quiet_read else {
        out.push(violation(
            "the operator could not read the queues' depths once the world was quiet".into(),
        ));
        return out;
    };
    let expected = super::events::expected(record);
    let accepted = |upto: usize| -> BTreeSet<&str> {
        record.deliveries[..upto.min(record.deliveries.len())]
            .iter()
            .map(|line| line.split_once(' ').map_or(line.as_str(), |(id, _)| id))
            .collect()
    };
    let busy = |d: &QueueDepth| d.ready + d.in_flight;
    let (seats, events) = (quiet.depths.seat_messages, quiet.depths.webhook_deliveries);
    let when = format!("at {}, the world quiet", record.t(quiet.at));
    if busy(&seats) + busy(&events) > 0 {
        out.push(violation(format!(
            "{when}, the operator read work in the queues: {:?}",
            quiet.depths
        )));
    }
    let by_then = accepted(quiet.delivered);
    let unheard: Vec<&String> = expected
        .keys()
        .filter(|id| !by_then.contains(id.as_str()))
        .collect();
    if (events.dead as usize) < unheard.len() {
        out.push(violation(format!(
            "{when}, {} events had not reached the subscribers ({}), but the operator was shown {} dead-lettered",
            unheard.len(),
            first_few(&unheard),
            events.dead
        )));
    }
    let Some(moved) = operator.redriven else {
        out.push(violation(format!(
            "{when}, the operator's redrive never answered"
        )));
        return out;
    };
    if (moved.seat_messages, moved.webhook_deliveries) != (seats.dead, events.dead) || moved.more {
        out.push(violation(format!(
            "the redrive moved {moved:?}, but the operator was shown {} seat and {} webhook dead letters",
            seats.dead, events.dead
        )));
    }
    if !operator.quiet_again {
        out.push(violation(
            "the world did not get quiet again after the redrive".into(),
        ));
        return out;
    }
    match &operator.after {
        None => out.push(violation(
            "the operator could not read the queues' depths after the redrive".into(),
        )),
        Some(after) => {
            let d = after.depths;
            if d.seat_messages.dead + d.webhook_deliveries.dead > 0
                || busy(&d.seat_messages) + busy(&d.webhook_deliveries) > 0
            {
                out.push(violation(format!(
                    "at {}, after the redrive and the world quiet again, the queues read {d:?}",
                    record.t(after.at)
                )));
            }
        }
    }
    let heard = accepted(record.deliveries.len());
    let never: Vec<&String> = expected
        .keys()
        .filter(|id| !heard.contains(id.as_str()))
        .collect();
    // A change record parked dead makes no event (the events checker's allowance).
    if never.len() > record.last.changes_dead {
        out.push(violation(format!(
            "after the redrive, {} events never reached the subscribers: {}",
            never.len(),
            first_few(&never)
        )));
    }
    out
}

fn first_few(ids: &[&String]) -> String {
    let shown: Vec<&str> = ids.iter().take(3).map(|s| s.as_str()).collect();
    match ids.len() {
        n if n > 3 => format!("{} and {} more", shown.join(", "), n - 3),
        _ => shown.join(", "),
    }
}

fn violation(message: String) -> Violation {
    Violation::new(Checker::Operator, message)
}
