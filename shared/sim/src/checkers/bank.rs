//! The bank (Jepsen's name for a conservation check): seats on a flight are neither made nor
//! lost, whatever faults struck, because every booking, cancel and checkout hold's creation or
//! resolution moves seats between a shard's counters, a hold and a booking in one transaction.
//!
//! Definition: in every ledger of the record (sampled during the run, and the final snapshot),
//! for every flight and every shard `s` of it,
//! `available[s] + held[s] + Σ head_count of the flight's BOOKED bookings on shard s =
//! shard_capacity(s)` (booked + held + available = capacity), and
//! `held[s] = Σ head_count of the flight's HELD holds on shard s`; and every booking and hold
//! names a shard the flight has. Consequences it therefore covers:
//! - never below zero, never above capacity: a counter is unsigned, so an oversold shard shows
//!   as more booked than its share;
//! - a cancel returns its seats once: a second return would leave the shard's counter above
//!   its share less what is booked;
//! - a booking written without its seats taken (or seats taken without a booking) breaks it;
//! - a hold confirmed and lapsed both (booked and returned) or neither (seats lost) breaks it,
//!   as does a hold resolved twice.
//!
//! Allowance: none. A ledger is one critical section of the store, so it never sees half a
//! transaction. A flight breaking in several ledgers is reported once, at the first, with the
//! count of ledgers it was broken in (the first is where to look).

use super::{Checker, Ledger, Record, Violation};
use seatgate::domain::{BookingStatus, HoldStatus, Inventory};
use std::collections::BTreeMap;

pub fn check(record: &Record) -> Vec<Violation> {
    // flight -> (first message, ledgers broken in)
    let mut broken: BTreeMap<String, (String, usize)> = BTreeMap::new();
    for ledger in &record.ledgers {
        for inventory in &ledger.flights {
            if let Some(why) = imbalance(ledger, inventory) {
                let flight = inventory.flight.flight_id.to_string();
                let at = record.t(ledger.at);
                broken
                    .entry(flight)
                    .or_insert_with(|| (format!("at {at}: {why}"), 0))
                    .1 += 1;
            }
        }
    }
    broken
        .into_iter()
        .map(|(flight, (first, count))| {
            Violation::new(
                Checker::Bank,
                format!(
                    "flight {flight} does not balance in {count} of {} ledgers; first {first}",
                    record.ledgers.len()
                ),
            )
        })
        .collect()
}

/// Why `inventory` does not balance against the ledger's bookings, if it does not.
fn imbalance(ledger: &Ledger, inventory: &Inventory) -> Option<String> {
    let flight = &inventory.flight;
    let shards = flight.shards as usize;
    let mut booked = vec![0u64; shards.max(inventory.available.len())];
    let mut problems = Vec::new();
    for booking in ledger
        .bookings
        .iter()
        .filter(|b| b.flight_id == flight.flight_id && b.status == BookingStatus::Booked)
    {
        match booked.get_mut(booking.shard as usize) {
            Some(n) if (booking.shard as usize) < shards => *n += u64::from(booking.head_count),
            _ => problems.push(format!(
                "booking {} names shard {} of {shards}",
                booking.booking_id, booking.shard
            )),
        }
    }
    let mut in_holds = vec![0u64; shards];
    for hold in ledger
        .holds
        .iter()
        .filter(|h| h.flight_id == flight.flight_id && h.status == HoldStatus::Held)
    {
        match in_holds.get_mut(hold.shard as usize) {
            Some(n) => *n += u64::from(hold.head_count),
            None => problems.push(format!(
                "hold {} names shard {} of {shards}",
                hold.hold_id, hold.shard
            )),
        }
    }
    if inventory.available.len() != shards || inventory.held.len() != shards {
        problems.push(format!(
            "{} available and {} held counters for {shards} shards",
            inventory.available.len(),
            inventory.held.len()
        ));
    }
    for (s, (available, held)) in inventory
        .available
        .iter()
        .zip(&inventory.held)
        .enumerate()
        .take(shards)
    {
        let share = u64::from(flight.shard_capacity(s as u32));
        let sold = booked[s];
        if u64::from(*available) + u64::from(*held) + sold != share {
            problems.push(format!(
                "shard {s}: available {available} + held {held} + booked {sold} != its capacity {share}"
            ));
        }
        if u64::from(*held) != in_holds[s] {
            problems.push(format!(
                "shard {s}: held {held} but its HELD holds take {}",
                in_holds[s]
            ));
        }
    }
    if problems.is_empty() {
        return None;
    }
    let total_booked: u64 = booked.iter().sum();
    Some(format!(
        "{} (flight total: available {} + held {} + booked {total_booked}, capacity {})",
        problems.join("; "),
        inventory.available(),
        inventory.held(),
        flight.capacity
    ))
}
