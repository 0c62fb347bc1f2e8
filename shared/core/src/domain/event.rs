//! What flows out of the table: changes (the outbox), queue messages and subscriber events.
//!
//! On AWS the table's stream is the outbox; in the embedded backend an outbox row is written in
//! the same SQLite transaction as each intent write and each offer's creation or resolution.
//! Either way the relay sees a [`Change`] built from one item alone (an intent, or a hold that is
//! an offer), because records of one DynamoDB transaction reach the stream independently: an
//! offer's hold carries everything its events say, so they never need the entry or the shard.

use super::{
    CheckoutHold, EntryId, FlightId, HoldId, HoldStatus, Intent, IntentId, IntentStatus, Millis,
    Reason, SeatId, UserId,
};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Old and new images of one intent write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntentChange {
    pub old: Option<Intent>,
    pub new: Option<Intent>,
}

impl IntentChange {
    /// The intent's id, from whichever image exists.
    pub fn intent_id(&self) -> Option<&IntentId> {
        self.new
            .as_ref()
            .or(self.old.as_ref())
            .map(|i| &i.intent_id)
    }
}

/// Old and new images of one write of a checkout hold. Only offers (holds with `offer_for`) make
/// events; a backend may record other holds' writes too, and the relay passes them by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldChange {
    pub old: Option<CheckoutHold>,
    pub new: Option<CheckoutHold>,
}

/// One record of the outbox: an intent's write or a hold's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Change {
    Intent(IntentChange),
    Hold(HoldChange),
}

impl Change {
    /// The intent's change, when this record is one.
    pub fn intent(&self) -> Option<&IntentChange> {
        match self {
            Change::Intent(c) => Some(c),
            Change::Hold(_) => None,
        }
    }

    /// [`Self::intent`], by value.
    pub fn into_intent(self) -> Option<IntentChange> {
        match self {
            Change::Intent(c) => Some(c),
            Change::Hold(_) => None,
        }
    }
}

impl From<IntentChange> for Change {
    fn from(c: IntentChange) -> Self {
        Change::Intent(c)
    }
}

/// Why an outbox record could not be turned into a [`Change`]. Carries attribute names,
/// never values, so a credential in an image cannot leak through it.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("undecodable outbox record: {0}")]
pub struct UndecodableChange(pub String);

/// One record of the outbox as its source delivered it (a DynamoDB stream record, a row of the
/// embedded outbox): its position, which is what a failure report names, and its decoded
/// change (`None` for items that are neither intents nor holds, which the relay ignores).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeRecord {
    pub position: String,
    pub change: Result<Option<Change>, UndecodableChange>,
}

/// The body of a seat-queue message. Group = seat id, dedup id = [`SeatMessage::dedup_id`].
///
/// It carries the intent as written at `version` (the change's new image), so the worker's
/// first write can pin that version instead of reading the intent again: on DynamoDB, one
/// `GetItem` fewer per message. A message without it (sent before the field existed) is read
/// as before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeatMessage {
    pub intent_id: IntentId,
    pub seat_id: SeatId,
    pub version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<Box<Intent>>,
}

impl SeatMessage {
    pub fn for_intent(intent: &Intent) -> Self {
        SeatMessage {
            intent_id: intent.intent_id.clone(),
            seat_id: intent.seat_id.clone(),
            version: intent.version,
            intent: Some(Box::new(intent.clone())),
        }
    }

    /// The intent as the message saw it, when the copy is this message's own (same intent, same
    /// version).
    pub fn seen(&self) -> Option<&Intent> {
        self.intent
            .as_deref()
            .filter(|i| i.intent_id == self.intent_id && i.version == self.version)
    }

    /// `request`, pinned to the message's copy of the intent when it carries one.
    pub fn pin(&self, request: super::TransitionRequest) -> super::TransitionRequest {
        match self.seen() {
            Some(intent) => request.seen_as(intent),
            None => request,
        }
    }

    /// Intent id + version: a replayed outbox record maps to the same message, a new version
    /// (a requeue, a due wait) to a new one.
    pub fn dedup_id(&self) -> String {
        format!("{}:{}", self.intent_id, self.version)
    }

    pub fn group_id(&self) -> &str {
        self.seat_id.as_str()
    }
}

/// What subscribers receive when an intent reaches a terminal state. Carries no credential.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntentEvent {
    /// Stable across redeliveries: receivers drop duplicates by it.
    pub event_id: String,
    #[serde(rename = "type")]
    pub event_type: String,
    pub intent_id: IntentId,
    pub user_id: UserId,
    pub seat_id: SeatId,
    pub status: IntentStatus,
    pub charge_id: Option<String>,
    pub reason: Option<Reason>,
    pub occurred_at: String,
}

impl IntentEvent {
    pub fn terminal(intent: &Intent) -> Self {
        IntentEvent {
            event_id: format!("{}:{}", intent.intent_id, intent.version),
            event_type: format!("intent.{}", intent.status.as_str().to_ascii_lowercase()),
            intent_id: intent.intent_id.clone(),
            user_id: intent.user_id.clone(),
            seat_id: intent.seat_id.clone(),
            status: intent.status,
            charge_id: intent.charge_id.clone(),
            reason: intent.reason,
            occurred_at: Millis::to_rfc3339(intent.updated_at),
        }
    }
}

/// What subscribers receive when a waiting-list entry is offered seats, or its offer lapses
/// unconfirmed (its seats then pass to the next entry, whose own `offer.created` follows).
/// Carries no credential.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OfferEvent {
    /// `offer:<hold_id>:created` or `offer:<hold_id>:expired`: stable across redeliveries.
    pub event_id: String,
    /// `offer.created` or `offer.expired`.
    #[serde(rename = "type")]
    pub event_type: String,
    pub entry_id: EntryId,
    pub hold_id: HoldId,
    pub flight_id: FlightId,
    pub user_id: UserId,
    #[serde(rename = "headCount")]
    pub head_count: u32,
    /// The offer's deadline: confirm the hold before it.
    pub expires_at: String,
    pub occurred_at: String,
}

impl OfferEvent {
    /// The event a hold's write makes, if any: an offer's creation, or its lapse. A confirm, a
    /// release by its owner, an extension or a replayed image make none.
    pub fn of(change: &HoldChange) -> Option<OfferEvent> {
        let new = change.new.as_ref()?;
        let entry_id = new.offer_for.clone()?;
        let (what, at) = match (change.old.as_ref().map(|o| o.status), new.status) {
            (None, HoldStatus::Held) => ("created", new.created_at),
            (Some(HoldStatus::Held), HoldStatus::Lapsed) => {
                ("expired", new.resolved_at.unwrap_or(new.expires_at))
            }
            _ => return None,
        };
        Some(OfferEvent {
            event_id: format!("offer:{}:{what}", new.hold_id),
            event_type: format!("offer.{what}"),
            entry_id,
            hold_id: new.hold_id.clone(),
            flight_id: new.flight_id.clone(),
            user_id: new.user_id.clone(),
            head_count: new.head_count,
            expires_at: Millis::to_rfc3339(new.expires_at),
            occurred_at: Millis::to_rfc3339(at),
        })
    }
}

/// Anything the event queue carries to subscribers. Each kind keeps its own shape on the wire
/// (an intent event's body is what it was before offers existed); `type` tells them apart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Event {
    Intent(IntentEvent),
    Offer(OfferEvent),
}

impl Event {
    pub fn event_id(&self) -> &str {
        match self {
            Event::Intent(e) => &e.event_id,
            Event::Offer(e) => &e.event_id,
        }
    }

    pub fn event_type(&self) -> &str {
        match self {
            Event::Intent(e) => &e.event_type,
            Event::Offer(e) => &e.event_type,
        }
    }

    pub fn user_id(&self) -> &UserId {
        match self {
            Event::Intent(e) => &e.user_id,
            Event::Offer(e) => &e.user_id,
        }
    }

    /// The intent event, when this is one.
    pub fn intent(&self) -> Option<&IntentEvent> {
        match self {
            Event::Intent(e) => Some(e),
            Event::Offer(_) => None,
        }
    }
}

impl From<IntentEvent> for Event {
    fn from(e: IntentEvent) -> Self {
        Event::Intent(e)
    }
}

impl From<OfferEvent> for Event {
    fn from(e: OfferEvent) -> Self {
        Event::Offer(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seat_message_with_an_invalid_id_does_not_decode() {
        let intent_id = IntentId::generate();
        let good = format!(r#"{{"intent_id":"{intent_id}","seat_id":"A-12","version":1}}"#);
        let message: SeatMessage = serde_json::from_str(&good).unwrap();
        assert_eq!(message.group_id(), "A-12");
        let bad_seat = format!(r#"{{"intent_id":"{intent_id}","seat_id":"A 12","version":1}}"#);
        assert!(serde_json::from_str::<SeatMessage>(&bad_seat).is_err());
        let bad_intent = r#"{"intent_id":"not-a-uuid","seat_id":"A-12","version":1}"#;
        assert!(serde_json::from_str::<SeatMessage>(bad_intent).is_err());
    }
}

#[cfg(test)]
mod offer_tests {
    use super::*;
    use crate::domain::{CheckoutTimes, HoldAction, WaitEntry};

    fn offer() -> CheckoutHold {
        let entry = WaitEntry::new(
            EntryId::from_uuid(uuid::Uuid::from_u128(7)),
            FlightId::parse("F-1").unwrap(),
            UserId::parse("u7").unwrap(),
            2,
            Millis(1_000),
        );
        entry.offer(3, &CheckoutTimes::default(), Millis(5_000)).1
    }

    #[test]
    fn an_offer_makes_an_event_when_made_and_when_it_lapses_and_no_other() {
        let made = offer();
        let created = OfferEvent::of(&HoldChange {
            old: None,
            new: Some(made.clone()),
        })
        .expect("a new offer is announced");
        assert_eq!(created.event_type, "offer.created");
        assert_eq!(created.event_id, format!("offer:{}:created", made.hold_id));
        assert_eq!(created.head_count, 2);
        assert_eq!(created.expires_at, Millis::to_rfc3339(made.expires_at));
        assert_eq!(created.entry_id.as_str(), made.hold_id.as_str());

        let after = made.expires_at.plus(std::time::Duration::from_millis(1));
        let lapsed =
            CheckoutHold::resolve(Some(&made), None, &made.flight_id, HoldAction::Lapse, after)
                .unwrap();
        let expired = OfferEvent::of(&HoldChange {
            old: Some(made.clone()),
            new: Some(lapsed.clone()),
        })
        .expect("a lapsed offer is announced");
        assert_eq!(expired.event_type, "offer.expired");
        assert_eq!(expired.occurred_at, Millis::to_rfc3339(after));

        let by_owner = |action| {
            CheckoutHold::resolve(
                Some(&made),
                Some(&made.user_id),
                &made.flight_id,
                action,
                Millis(6_000),
            )
            .unwrap()
        };
        let confirmed = by_owner(HoldAction::Confirm);
        let released = by_owner(HoldAction::Release);
        for quiet in [
            HoldChange {
                old: Some(made.clone()),
                new: Some(confirmed),
            },
            HoldChange {
                old: Some(made.clone()),
                new: Some(released),
            },
            HoldChange {
                old: Some(lapsed.clone()),
                new: Some(lapsed),
            },
            HoldChange {
                old: Some(made.clone()),
                new: None,
            },
        ] {
            assert_eq!(OfferEvent::of(&quiet), None, "{quiet:?}");
        }
        let plain = CheckoutHold {
            offer_for: None,
            ..made
        };
        assert_eq!(
            OfferEvent::of(&HoldChange {
                old: None,
                new: Some(plain)
            }),
            None,
            "a hold its user asked for is not an offer"
        );
    }

    #[test]
    fn events_keep_their_own_shapes_on_the_wire_and_decode_back() {
        let made = offer();
        let event = Event::from(
            OfferEvent::of(&HoldChange {
                old: None,
                new: Some(made),
            })
            .unwrap(),
        );
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["type"], "offer.created");
        assert!(json.get("intent_id").is_none());
        assert_eq!(json["headCount"], 2);
        let back: Event = serde_json::from_value(json).unwrap();
        assert_eq!(back, event);
        let intent_event = r#"{"event_id":"i:3","type":"intent.succeeded","intent_id":"01a23d1b-8221-76a9-abc1-5514a56b3146","user_id":"u1","seat_id":"A-1","status":"SUCCEEDED","charge_id":"c","reason":null,"occurred_at":"2026-12-03T00:00:00.000Z"}"#;
        let back: Event = serde_json::from_str(intent_event).unwrap();
        assert_eq!(back.event_type(), "intent.succeeded");
        assert!(back.intent().is_some());
    }
}
