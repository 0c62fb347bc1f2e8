//! Events reach their subscribers: every intent that ended and every offer made or lapsed is
//! posted to the subscribers (or, refused too often, kept in the event queue's dead-letter
//! queue) under its stable id, and nothing else is.
//!
//! What must have been announced, stated from the store's records rather than from the relay's
//! code (so a relay that decides wrongly is caught too):
//! - each intent in a terminal state at the end: `<intent id>:<version>`, of type `intent.` and
//!   its status in lower case (nothing writes an intent after it ends, the audit checker says,
//!   so its last version is the one that ended it);
//! - each offer (a checkout hold made for a waiting-list entry) when made, `offer:<hold id>:created`
//!   of type `offer.created`, and, if it lapsed, `offer:<hold id>:expired` of type
//!   `offer.expired` (from the sale's writes, [`super::sale_log`]).
//!
//! Judged: each of these was accepted by the subscribers at least once, or is in the
//! dead-letter queue; and every event the subscribers accepted, or that was dead-lettered, is
//! one of these, with its type. Delivery is at least once, so an event accepted twice is no
//! violation: its id is stable, which is what lets a receiver drop the second.
//!
//! Allowance: the outbox parks a change record dead after too many failed relay attempts, and
//! such a change's event is never made; so as many missing events as the store has dead change
//! records are excused (the default workload's relay never fails that often, so this is zero
//! in its histories). Nothing about timing is allowed: the world is quiet at the end, so every
//! event has had its retries.

use super::sale_log::SaleItem;
use super::{Checker, Record, Violation};
use seatgate::domain::{Event, HoldStatus};
use std::collections::{BTreeMap, BTreeSet};

pub fn check(record: &Record) -> Vec<Violation> {
    let expected = expected(record);
    let mut out = Vec::new();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let delivered = record.deliveries.iter().map(|line| {
        let (id, kind) = line.split_once(' ').unwrap_or((line.as_str(), ""));
        (id, kind, "accepted by the subscribers")
    });
    let dead: Vec<(String, String)> = record
        .dead_events
        .iter()
        .map(|body| match serde_json::from_str::<Event>(body) {
            Ok(e) => (e.event_id().to_string(), e.event_type().to_string()),
            Err(_) => (body.clone(), String::new()),
        })
        .collect();
    let dead = dead
        .iter()
        .map(|(id, kind)| (id.as_str(), kind.as_str(), "dead-lettered"));
    for (id, kind, how) in delivered.chain(dead) {
        match expected.get(id) {
            Some(want) if want == kind => {
                seen.insert(id);
            }
            Some(want) => out.push(Violation::new(
                Checker::Events,
                format!("event {id} was {how} as {kind:?}, but is a {want:?}"),
            )),
            None => out.push(Violation::new(
                Checker::Events,
                format!("event {id} ({kind:?}) was {how}, but nothing in the store made it"),
            )),
        }
    }
    let missing: Vec<(&String, &String)> = expected
        .iter()
        .filter(|(id, _)| !seen.contains(id.as_str()))
        .collect();
    if missing.len() > record.last.changes_dead {
        for (id, kind) in missing {
            out.push(Violation::new(
                Checker::Events,
                format!(
                    "event {id} ({kind}) never reached the subscribers nor the dead-letter queue ({} change records parked dead)",
                    record.last.changes_dead
                ),
            ));
        }
    }
    out
}

/// Every event the store's records say must have been announced: id to type.
pub(crate) fn expected(record: &Record) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for intent in record
        .last
        .intents
        .iter()
        .filter(|i| i.status.is_terminal())
    {
        out.insert(
            format!("{}:{}", intent.intent_id, intent.version),
            format!("intent.{}", intent.status.as_str().to_ascii_lowercase()),
        );
    }
    let mut offers_made = BTreeSet::new();
    for w in &record.sale {
        let SaleItem::Hold(hold) = &w.item else {
            continue;
        };
        if hold.offer_for.is_none() {
            continue;
        }
        if offers_made.insert(hold.hold_id.clone()) {
            out.insert(
                format!("offer:{}:created", hold.hold_id),
                "offer.created".to_string(),
            );
        }
        if hold.status == HoldStatus::Lapsed {
            out.insert(
                format!("offer:{}:expired", hold.hold_id),
                "offer.expired".to_string(),
            );
        }
    }
    out
}
