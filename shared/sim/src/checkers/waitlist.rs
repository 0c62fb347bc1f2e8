//! The waiting list is served in order: seats that come back while someone waits go to the first
//! entries they fit, in the order those joined, and only a return of seats makes an offer.
//!
//! Judged on the store's write log, in commit order. The in-memory backend writes a call's lines
//! together under its one lock, so a return (a hold released or lapsed, a booking cancelled) and
//! the offers it made sit side by side: the return's line, then each served entry (`OFFERED`)
//! with its offer's hold. Joins and leaves move the list in between. For every return, with the
//! list as the log had it just before (its first [`MAX_ENTRIES_SCANNED`] entries, the rule's
//! bound):
//! - each served entry was waiting on that flight, and they were served in list order;
//! - no entry ahead of a served one was passed over unless it was larger than that one: the
//!   seats that fitted the later entry fitted it too (the rule's greedy pass takes the first fit);
//! - a return that served nobody left nobody waiting whose head count the returned seats alone
//!   covered.
//!
//! And an `OFFERED` entry outside a return is an offer nobody's seats paid for. The checker reads
//! nothing but the log, so it judges every store the simulator runs on the same terms.

use super::{Checker, Record, Violation};
use seatgate::domain::waitlist::{MAX_ENTRIES_SCANNED, MAX_OFFERS_PER_RETURN};
use seatgate::domain::{
    Booking, BookingStatus, CheckoutHold, EntryId, FlightId, HoldStatus, Millis, WaitEntry,
    WaitStatus,
};
use std::collections::BTreeMap;

/// One write of the log that moves the waiting list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListWrite {
    Join(Millis, WaitEntry),
    Leave(Millis, WaitEntry),
    /// Seats back on `shard` of `flight`, and the entries served with them, in log order.
    Return {
        at: Millis,
        flight: FlightId,
        shard: u32,
        returned: u32,
        served: Vec<WaitEntry>,
        /// For a lapse, the hold's deadline: how long its seats took to reach the list is `at`
        /// less this.
        lapsed_from: Option<Millis>,
    },
    /// An entry logged `OFFERED` with no return before it in its call.
    StrayOffer(Millis, WaitEntry),
}

/// The list's writes in a store write log (`times[i]` is `writes[i]`'s landing time).
pub fn list_writes(writes: &[String], times: &[Millis]) -> Vec<ListWrite> {
    let mut out: Vec<ListWrite> = Vec::new();
    // Whether the last line was a return or one of its offers: an offer then joins it.
    let mut serving = false;
    for (line, &at) in writes.iter().zip(times) {
        let Some((op, json)) = line.split_once(' ') else {
            serving = false;
            continue;
        };
        // Only these calls move the list; every other line ends a serving, unparsed (most of
        // a run's lines are intents and queues: parsing every line took a sixth of a seed's
        // time).
        if !matches!(
            op,
            "join_waitlist" | "leave_waitlist" | "resolve_hold" | "cancel_booking"
        ) {
            serving = false;
            continue;
        }
        let value: serde_json::Value = match serde_json::from_str(json) {
            Ok(v) => v,
            Err(_) => {
                serving = false;
                continue;
            }
        };
        let entry = || serde_json::from_value::<WaitEntry>(value.clone()).ok();
        match op {
            "join_waitlist" => {
                serving = false;
                out.extend(entry().map(|e| ListWrite::Join(at, e)));
            }
            "leave_waitlist" => {
                serving = false;
                out.extend(entry().map(|e| ListWrite::Leave(at, e)));
            }
            "resolve_hold" | "cancel_booking" if value.get("entry_id").is_some() => {
                let Some(e) = entry() else { continue };
                match out.last_mut() {
                    Some(ListWrite::Return { served, .. }) if serving => served.push(e),
                    _ => out.push(ListWrite::StrayOffer(at, e)),
                }
            }
            "resolve_hold" => {
                let hold = serde_json::from_value::<CheckoutHold>(value).ok();
                match hold {
                    Some(h) if h.status.returns_seats() => {
                        serving = true;
                        out.push(ListWrite::Return {
                            at,
                            lapsed_from: (h.status == HoldStatus::Lapsed).then_some(h.expires_at),
                            flight: h.flight_id,
                            shard: h.shard,
                            returned: h.head_count,
                            served: Vec::new(),
                        });
                    }
                    // An offer's hold, logged after its entry: still the same serving.
                    Some(h) if h.status == HoldStatus::Held && h.offer_for.is_some() => {}
                    _ => serving = false,
                }
            }
            "cancel_booking" => {
                if let Ok(b) = serde_json::from_value::<Booking>(value.clone())
                    && b.status == BookingStatus::Cancelled
                {
                    serving = true;
                    out.push(ListWrite::Return {
                        at,
                        lapsed_from: None,
                        flight: b.flight_id,
                        shard: b.shard,
                        returned: b.head_count,
                        served: Vec::new(),
                    });
                } else if serde_json::from_value::<CheckoutHold>(value)
                    .is_ok_and(|h| h.offer_for.is_some())
                {
                    // An offer's hold within the cancel's serving.
                } else {
                    serving = false;
                }
            }
            _ => serving = false,
        }
    }
    out
}

pub fn check(record: &Record) -> Vec<Violation> {
    judge(record, &record.waitlist)
}

fn judge(record: &Record, writes: &[ListWrite]) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut flag = |message: String| out.push(Violation::new(Checker::Waitlist, message));
    let mut lists: BTreeMap<FlightId, BTreeMap<EntryId, WaitEntry>> = BTreeMap::new();
    for write in writes {
        match write {
            ListWrite::Join(_, e) => {
                lists
                    .entry(e.flight_id.clone())
                    .or_default()
                    .insert(e.entry_id.clone(), e.clone());
            }
            ListWrite::Leave(_, e) => {
                if let Some(list) = lists.get_mut(&e.flight_id) {
                    list.remove(&e.entry_id);
                }
            }
            ListWrite::StrayOffer(at, e) => flag(format!(
                "at {}: entry {} ({}) was offered seats no return gave back",
                record.t(*at),
                e.entry_id,
                e.user_id
            )),
            ListWrite::Return {
                at,
                flight,
                shard,
                returned,
                served,
                ..
            } => {
                let list = lists.entry(flight.clone()).or_default();
                let first: Vec<WaitEntry> =
                    list.values().take(MAX_ENTRIES_SCANNED).cloned().collect();
                let t = record.t(*at);
                for pair in served.windows(2) {
                    if pair[0].entry_id >= pair[1].entry_id {
                        flag(format!(
                            "at {t}: a return on {flight} shard {shard} served {} before {}, \
                             which joined first",
                            pair[0].entry_id, pair[1].entry_id
                        ));
                    }
                }
                for s in served {
                    if s.status != WaitStatus::Offered {
                        flag(format!(
                            "at {t}: served entry {} is {:?}",
                            s.entry_id, s.status
                        ));
                    }
                    if !list.contains_key(&s.entry_id) {
                        flag(format!(
                            "at {t}: a return on {flight} served entry {} ({}), which was not \
                             waiting on it",
                            s.entry_id, s.user_id
                        ));
                    }
                    let passed_over = first.iter().find(|e| {
                        e.entry_id < s.entry_id
                            && e.head_count <= s.head_count
                            && served.iter().all(|o| o.entry_id != e.entry_id)
                    });
                    if let Some(e) = passed_over {
                        flag(format!(
                            "at {t}: a return on {flight} shard {shard} offered {} seat(s) to {} \
                             ({}) while {} ({}), ahead of it in line, waited for {}",
                            s.head_count,
                            s.entry_id,
                            s.user_id,
                            e.entry_id,
                            e.user_id,
                            e.head_count
                        ));
                    }
                }
                if served.is_empty()
                    && let Some(e) = first.iter().find(|e| e.head_count <= *returned)
                {
                    flag(format!(
                        "at {t}: {returned} seat(s) came back on {flight} shard {shard} and none \
                         was offered, while {} ({}) waited for {}",
                        e.entry_id, e.user_id, e.head_count
                    ));
                }
                debug_assert!(served.len() <= MAX_OFFERS_PER_RETURN);
                for s in served {
                    list.remove(&s.entry_id);
                }
            }
        }
    }
    out
}
