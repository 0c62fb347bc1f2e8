//! The bank (Jepsen's name for a conservation check): seats on a flight are neither made nor
//! lost, whatever faults struck, because every booking and cancel moves seats between a shard's
//! counter and a booking in one transaction.
//!
//! Definition: in every ledger of the record (sampled during the run, and the final snapshot),
//! for every flight and every shard `s` of it,
//! `available[s] + Σ head_count of the flight's BOOKED bookings on shard s = shard_capacity(s)`;
//! and every booking names a shard the flight has. Consequences it therefore covers:
//! - never below zero, never above capacity: a counter is unsigned, so an oversold shard shows
//!   as more booked than its share;
//! - a cancel returns its seats once: a second return would leave the shard's counter above
//!   its share less what is booked;
//! - a booking written without its seats taken (or seats taken without a booking) breaks it.
//!
//! Allowance: none. A ledger is one critical section of the store, so it never sees half a
//! transaction. A flight breaking in several ledgers is reported once, at the first, with the
//! count of ledgers it was broken in (the first is where to look).

use super::{Checker, Ledger, Record, Violation};
use seatgate::domain::{BookingStatus, Inventory};
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
    if inventory.available.len() != shards {
        problems.push(format!(
            "{} shard counters for {shards} shards",
            inventory.available.len()
        ));
    }
    for (s, available) in inventory.available.iter().enumerate().take(shards) {
        let share = u64::from(flight.shard_capacity(s as u32));
        let held = booked[s];
        if u64::from(*available) + held != share {
            problems.push(format!(
                "shard {s}: available {available} + booked {held} != its capacity {share}"
            ));
        }
    }
    if problems.is_empty() {
        return None;
    }
    let total_booked: u64 = booked.iter().sum();
    Some(format!(
        "{} (flight total: available {} + booked {total_booked}, capacity {})",
        problems.join("; "),
        inventory.available(),
        flight.capacity
    ))
}
