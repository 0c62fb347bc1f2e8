//! The per-user limit: on a flight with `max_per_user`, no user ever has more of its seats than
//! the limit, booked and held together, after any write of the sale.
//!
//! Judged on the sale's writes from the store's write log ([`super::sale_log`]), in write order:
//! a user's seats on a flight are the head counts of their `BOOKED` bookings, their `HELD`
//! checkout holds (offers included: an offer's seats are the user's until it lapses) and their
//! counted `WAITING` entries (an entry on a flight with a limit counts from its join, so its
//! offer never takes the user past the limit). A booking cancelled, a hold released or lapsed,
//! an entry left gives its seats back; a hold confirmed becomes its booking and an entry offered
//! becomes its offer's hold, the same seats. After each write, the user it touched is counted.
//! No allowance: the limit is one condition in each booking's, hold's or join's own
//! transaction, whatever the timing.

use super::sale_log::SaleItem;
use super::{Checker, Record, Violation};
use seatgate::domain::{
    BookingId, BookingStatus, EntryId, FlightId, HoldId, HoldStatus, UserId, WaitStatus,
};
use std::collections::BTreeMap;

pub fn check(record: &Record) -> Vec<Violation> {
    judge(record).0
}

/// How many writes brought a user to exactly their flight's limit (printed by `simulate`, so
/// the default histories are seen to reach the limit, where it refuses).
pub fn writes_at_limit(record: &Record) -> usize {
    judge(record).1
}

/// Whose seats, on which flight, how many.
type Seats = (FlightId, UserId, u32);

fn judge(record: &Record) -> (Vec<Violation>, usize) {
    let limits: BTreeMap<&FlightId, u32> = record
        .last
        .flights
        .iter()
        .filter_map(|f| Some((&f.flight.flight_id, f.flight.max_per_user?)))
        .collect();
    let mut out = Vec::new();
    let mut at_limit = 0;
    if limits.is_empty() {
        return (out, at_limit);
    }
    let mut booked: BTreeMap<BookingId, Seats> = BTreeMap::new();
    let mut held: BTreeMap<HoldId, Seats> = BTreeMap::new();
    let mut waiting: BTreeMap<EntryId, Seats> = BTreeMap::new();
    let mut counts: BTreeMap<(FlightId, UserId), u32> = BTreeMap::new();
    for w in &record.sale {
        let (flight, user) = match &w.item {
            SaleItem::Booking(b) => (&b.flight_id, &b.user_id),
            SaleItem::Hold(h) => (&h.flight_id, &h.user_id),
            SaleItem::Entry(e) => (&e.flight_id, &e.user_id),
        };
        let Some(&limit) = limits.get(flight) else {
            continue;
        };
        let seats = |n: u32| (flight.clone(), user.clone(), n);
        let before = count(&counts, flight, user);
        match &w.item {
            SaleItem::Booking(b) => match b.status {
                BookingStatus::Booked => {
                    booked
                        .entry(b.booking_id.clone())
                        .or_insert_with(|| seats(b.head_count));
                }
                BookingStatus::Cancelled => {
                    booked.remove(&b.booking_id);
                }
            },
            SaleItem::Hold(h) => match h.status {
                HoldStatus::Held => {
                    held.entry(h.hold_id.clone())
                        .or_insert_with(|| seats(h.head_count));
                }
                HoldStatus::Confirmed => {
                    if let Some(s) = held.remove(&h.hold_id) {
                        booked.entry(h.booking_id.clone()).or_insert(s);
                    }
                }
                HoldStatus::Released | HoldStatus::Lapsed => {
                    held.remove(&h.hold_id);
                }
            },
            SaleItem::Entry(e) => match e.status {
                WaitStatus::Waiting if e.counted => {
                    waiting
                        .entry(e.entry_id.clone())
                        .or_insert_with(|| seats(e.head_count));
                }
                // An entry stored before entries counted: its offer counts when made.
                WaitStatus::Waiting => {}
                // Offered: its seats are its offer's hold's now, written beside it.
                WaitStatus::Offered | WaitStatus::Left => {
                    waiting.remove(&e.entry_id);
                }
            },
        }
        let now = booked
            .values()
            .chain(held.values())
            .chain(waiting.values())
            .filter(|(f, u, _)| f == flight && u == user)
            .map(|(_, _, n)| n)
            .sum();
        counts.insert((flight.clone(), user.clone()), now);
        if now > limit {
            out.push(Violation::new(
                Checker::Limit,
                format!(
                    "user {user} has {now} seats on flight {flight} after a write at {} ({:?}), over its limit of {limit}",
                    record.t(w.at),
                    w.item
                ),
            ));
        } else if now == limit && before < limit {
            at_limit += 1;
        }
    }
    (out, at_limit)
}

fn count(counts: &BTreeMap<(FlightId, UserId), u32>, flight: &FlightId, user: &UserId) -> u32 {
    counts
        .get(&(flight.clone(), user.clone()))
        .copied()
        .unwrap_or(0)
}
