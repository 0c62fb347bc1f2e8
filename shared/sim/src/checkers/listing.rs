//! Listings: the paged reads (`GET /me/bookings`, `GET /admin/intents/{id}`) say what the store
//! holds, page after page, without skipping, repeating or inventing an item. A listing that
//! repeats a booking shows a user a seat twice; one that drops an item at a page's edge hides a
//! booking they paid for; an admin history with a gap or a rewritten record misleads whoever
//! audits an intent.
//!
//! Like [`idempotency`](super::idempotency), this checker reads what the clients were answered
//! (the promise is about answers), and holds each answer against the store's final state
//! ([`Record::last`], [`Record::audit`]), so an answer cannot vouch for itself.
//!
//! Definition, for what the workload's clients recorded:
//! 1. a bookings listing ([`BookingsListing`], every page read by following the cursor) is in
//!    strictly increasing booking-id order (so it has no duplicate, across pages too); every
//!    booking in it is the listing user's; and each exists in the final snapshot with the same
//!    flight, user, seats, shard and creation time, and, if listed cancelled, cancelled at the
//!    same instant there;
//! 2. an admin history read ([`HistoryRead`]) finds the intent (the workload reads only
//!    intents whose id it was given), holds versions 1..=n, gapless, and its records equal the
//!    first n records of that intent's history in the final audit trail;
//! 3. a listing taken at the end ([`BookingsListing::at_end`], after the world got quiet: no
//!    request in flight, no write pending) reached its last page and equals exactly the user's
//!    bookings in the final snapshot, in order, field for field.
//!
//! Allowances, for listings taken while writes happen (rules 1 and 2): a listing is not a
//! snapshot (each page is its own read), so
//! - it need not be complete: a booking made after a page was read is not seen if its id sorts
//!   within or before that page (ids are UUID v7: time-ordered only to the millisecond), nor
//!   one made after the last page was read; a listing whose page failed for the store or that
//!   hit the client's page bound is judged on what it got;
//! - a booking listed as booked may be cancelled by the end (a cancel after its page was read);
//!   the reverse may not happen (a cancel is final);
//! - a booking whose write's answer was lost may be listed though its client never heard of it
//!   (the write took effect; the final snapshot holds it);
//! - a history read may be shorter than the final history (later writes), never different.
//!
//! Records without listings (a scenario that does not make them) are not judged; rule 3 is
//! judged only for users the scenario listed at the end.

use super::{Checker, Record, Violation};
use seatgate::domain::{
    Booking, BookingId, BookingStatus, IntentId, Millis, TransitionRecord, UserId,
};
use std::collections::BTreeMap;

/// One bookings listing as a client read it, every page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BookingsListing {
    pub user: UserId,
    /// When its first page was asked for.
    pub at: Millis,
    /// Taken by the scenario after the world got quiet (rule 3), not during the run.
    pub at_end: bool,
    /// Every page's bookings, in the order the pages came.
    pub bookings: Vec<Booking>,
    pub pages: usize,
    /// Whether the client reached the last page (else it stopped at its page bound or a page
    /// failed for the store).
    pub complete: bool,
}

/// One intent's history as the admin read it, every page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryRead {
    pub intent: IntentId,
    /// When its first page was asked for.
    pub at: Millis,
    /// Whether the admin read found the intent (the workload reads only intents it was given,
    /// which exist from before their id was answered).
    pub found: bool,
    pub records: Vec<TransitionRecord>,
    pub pages: usize,
    pub complete: bool,
}

pub fn check(record: &Record) -> Vec<Violation> {
    let mut out = Vec::new();
    let final_bookings: BTreeMap<&BookingId, &Booking> = record
        .last
        .bookings
        .iter()
        .map(|b| (&b.booking_id, b))
        .collect();
    for listing in &record.listings {
        out.extend(
            during(record, listing, &final_bookings)
                .into_iter()
                .map(|m| Violation::new(Checker::Listing, m)),
        );
    }
    for read in &record.history_reads {
        if let Some(m) = history(record, read) {
            out.push(Violation::new(Checker::Listing, m));
        }
    }
    for listing in record.listings.iter().filter(|l| l.at_end) {
        if let Some(m) = at_end(record, listing) {
            out.push(Violation::new(Checker::Listing, m));
        }
    }
    out
}

/// Rule 1, for any listing (one taken at the end too: what holds during the run holds after).
fn during(
    record: &Record,
    listing: &BookingsListing,
    final_bookings: &BTreeMap<&BookingId, &Booking>,
) -> Vec<String> {
    let mut out = Vec::new();
    let what = format!(
        "user {}'s bookings listing at {} ({} pages{})",
        listing.user,
        record.t(listing.at),
        listing.pages,
        if listing.at_end { ", at the end" } else { "" }
    );
    for (k, pair) in listing.bookings.windows(2).enumerate() {
        let (a, b) = (&pair[0].booking_id, &pair[1].booking_id);
        if a >= b {
            let how = if a == b {
                "repeats"
            } else {
                "is out of order:"
            };
            out.push(format!(
                "{what} {how} {a} then {b} (items {} and {})",
                k + 1,
                k + 2
            ));
        }
    }
    for listed in &listing.bookings {
        if listed.user_id != listing.user {
            out.push(format!(
                "{what} lists {}, which is user {}'s",
                listed.booking_id, listed.user_id
            ));
        }
        match final_bookings.get(&listed.booking_id) {
            None => out.push(format!(
                "{what} lists {}, which the store does not hold at the end",
                listed.booking_id
            )),
            Some(held) if !same_booking(listed, held) => out.push(format!(
                "{what} lists {} as {}, the store holds it at the end as {}",
                listed.booking_id,
                brief(record, listed),
                brief(record, held)
            )),
            Some(_) => {}
        }
    }
    out
}

/// Whether `listed` may be what `held` (the final row) looked like earlier: the same booking,
/// and the same cancel if it was listed cancelled (a booked one may have been cancelled since).
fn same_booking(listed: &Booking, held: &Booking) -> bool {
    let immutable = (
        &listed.flight_id,
        &listed.user_id,
        listed.head_count,
        listed.shard,
        listed.created_at,
    ) == (
        &held.flight_id,
        &held.user_id,
        held.head_count,
        held.shard,
        held.created_at,
    );
    let status = (listed.status == BookingStatus::Booked && listed.cancelled_at.is_none())
        || (listed.status == held.status && listed.cancelled_at == held.cancelled_at);
    immutable && status
}

/// Rule 2.
fn history(record: &Record, read: &HistoryRead) -> Option<String> {
    let what = format!(
        "intent {}'s history as the admin read it at {} ({} records, {} pages)",
        read.intent,
        record.t(read.at),
        read.records.len(),
        read.pages
    );
    if !read.found {
        return Some(format!(
            "{what}: no such intent, though the user was given its id"
        ));
    }
    let versions: Vec<u64> = read.records.iter().map(|r| r.version).collect();
    if let Some(k) = versions
        .iter()
        .enumerate()
        .position(|(k, v)| *v != k as u64 + 1)
    {
        return Some(format!(
            "{what} is not versions 1..={}: record {} is version {} (versions {versions:?})",
            versions.len(),
            k + 1,
            versions[k]
        ));
    }
    let Some(trail) = record.audit.histories.get(&read.intent) else {
        return Some(format!("{what}: the final audit trail has no such intent"));
    };
    if read.records.len() > trail.len() {
        return Some(format!(
            "{what} is longer than the final history ({} records)",
            trail.len()
        ));
    }
    read.records
        .iter()
        .zip(trail)
        .find(|(read, kept)| read != kept)
        .map(|(read, kept)| {
            format!(
                "{what} differs from the final history at version {}: read {read:?}, kept {kept:?}",
                read.version
            )
        })
}

/// Rule 3.
fn at_end(record: &Record, listing: &BookingsListing) -> Option<String> {
    let what = format!(
        "user {}'s final bookings listing at {} ({} pages)",
        listing.user,
        record.t(listing.at),
        listing.pages
    );
    if !listing.complete {
        return Some(format!(
            "{what} did not reach its last page ({} bookings read)",
            listing.bookings.len()
        ));
    }
    let held: Vec<&Booking> = record
        .last
        .bookings
        .iter()
        .filter(|b| b.user_id == listing.user)
        .collect();
    let listed: Vec<&Booking> = listing.bookings.iter().collect();
    if listed == held {
        return None;
    }
    let ids = |bs: &[&Booking]| bs.iter().map(|b| b.booking_id.clone()).collect::<Vec<_>>();
    let (listed_ids, held_ids) = (ids(&listed), ids(&held));
    let missing = ids_of(held_ids.iter().filter(|id| !listed_ids.contains(id)));
    let extra = ids_of(listed_ids.iter().filter(|id| !held_ids.contains(id)));
    let differing = ids_of(
        listed
            .iter()
            .filter(|l| held.iter().any(|h| h.booking_id == l.booking_id && h != *l))
            .map(|l| &l.booking_id),
    );
    Some(format!(
        "{what} differs from the store's: {} listed, {} held; missing [{missing}], extra [{extra}], differing [{differing}]{}",
        listed.len(),
        held.len(),
        if missing.is_empty() && extra.is_empty() && differing.is_empty() {
            " (the same bookings, in another order or repeated)"
        } else {
            ""
        }
    ))
}

fn ids_of<'a>(ids: impl Iterator<Item = &'a BookingId>) -> String {
    ids.map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

fn brief(record: &Record, b: &Booking) -> String {
    format!(
        "{} seats on {} shard {} for {} made at {}, {}{}",
        b.head_count,
        b.flight_id,
        b.shard,
        b.user_id,
        record.t(b.created_at),
        b.status.as_str(),
        match b.cancelled_at {
            Some(at) => format!(" at {}", record.t(at)),
            None => String::new(),
        }
    )
}
