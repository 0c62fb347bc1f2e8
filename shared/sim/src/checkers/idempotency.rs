//! Idempotency: a booking sent again under the same `Idempotency-Key` takes effect once and
//! gets the first answer again (Jepsen's idempotence, for the one route that promises it). A
//! client that never heard its answer (a timeout, a lost response) can only retry; if a retry
//! books again or answers differently, the user pays twice or is told two stories.
//!
//! The one checker that reads what clients were answered: the promise is about answers. It
//! also reads the store's final ledger, so an answer cannot vouch for itself.
//!
//! Definition, for every (user, key) the workload used ([`KeyedAnswers`], every answer its
//! clients got, in order; errors are answers not heard):
//! 1. every definite answer equals the first definite answer (a `Booked` one names the same
//!    booking, with the same seats and shard);
//! 2. a `Booked` answer's booking exists in the final ledger, as the user's;
//! 3. per user, the bookings in the final ledger are no more than the keys they used (every
//!    plain booking of the default workload is sent under a key, so a key that took effect
//!    twice shows as one booking too many even when no retry heard an answer). A booking a
//!    confirmed checkout hold made is not a keyed request's: it is the hold's own (named by the
//!    hold's `booking_id`), and the bank holds the hold to one resolution.
//!
//! No allowances. A record without keyed answers (a scenario that does not record them) is not
//! judged.

use super::{Checker, Record, Violation};
use seatgate::domain::{BookingAnswer, IdempotencyKey, UserId};
use std::collections::BTreeMap;

/// Every answer one user's clients got under one key, in the order they got them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyedAnswers {
    pub user: UserId,
    pub key: IdempotencyKey,
    /// `Err` is a request that got no answer (the client's last error).
    pub answers: Vec<Result<BookingAnswer, String>>,
}

pub fn check(record: &Record) -> Vec<Violation> {
    let mut out = Vec::new();
    // A scenario that recorded no keyed answers (not the default workload) is not judged.
    let (Some(ledger), false) = (record.ledgers.last(), record.keyed.is_empty()) else {
        return out;
    };
    let mut keys_by_user: BTreeMap<&UserId, usize> = BTreeMap::new();
    for keyed in &record.keyed {
        *keys_by_user.entry(&keyed.user).or_insert(0) += 1;
        let mut definite = keyed.answers.iter().filter_map(|a| a.as_ref().ok());
        let Some(first) = definite.next() else {
            continue;
        };
        if let Some(other) = definite.find(|a| *a != first) {
            out.push(Violation::new(
                Checker::Idempotency,
                format!(
                    "user {} key {}: first answered {}, then {}",
                    keyed.user,
                    keyed.key.as_str(),
                    brief(first),
                    brief(other)
                ),
            ));
        }
        if let BookingAnswer::Booked { booking } = first
            && !ledger
                .bookings
                .iter()
                .any(|b| b.booking_id == booking.booking_id && b.user_id == keyed.user)
        {
            out.push(Violation::new(
                Checker::Idempotency,
                format!(
                    "user {} key {}: answered booked {}, which the store does not hold as theirs",
                    keyed.user,
                    keyed.key.as_str(),
                    booking.booking_id
                ),
            ));
        }
    }
    let from_holds: std::collections::BTreeSet<_> = ledger
        .holds
        .iter()
        .filter(|h| h.status == seatgate::domain::HoldStatus::Confirmed)
        .map(|h| &h.booking_id)
        .collect();
    let mut bookings_by_user: BTreeMap<&UserId, usize> = BTreeMap::new();
    for b in ledger
        .bookings
        .iter()
        .filter(|b| !from_holds.contains(&b.booking_id))
    {
        *bookings_by_user.entry(&b.user_id).or_insert(0) += 1;
    }
    for (user, bookings) in bookings_by_user {
        let keys = keys_by_user.get(user).copied().unwrap_or(0);
        if bookings > keys {
            out.push(Violation::new(
                Checker::Idempotency,
                format!("user {user} holds {bookings} bookings from {keys} idempotency keys"),
            ));
        }
    }
    out
}

fn brief(answer: &BookingAnswer) -> String {
    match answer {
        BookingAnswer::Booked { booking } => format!(
            "booked {} ({} seats, shard {})",
            booking.booking_id, booking.head_count, booking.shard
        ),
        other => format!("{other:?}"),
    }
}
