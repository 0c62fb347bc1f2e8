//! What flows out of the intent table: changes (the outbox), queue messages and subscriber events.
//!
//! On AWS the table's stream is the outbox; in the embedded backend an outbox row is written in
//! the same SQLite transaction as each intent write. Either way the relay sees an
//! [`IntentChange`] built from the intent item alone, because records of one DynamoDB transaction
//! reach the stream independently.

use super::{Intent, IntentId, IntentStatus, Millis, Reason, SeatId, UserId};
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

/// Why an outbox record could not be turned into an [`IntentChange`]. Carries attribute names,
/// never values, so a credential in an image cannot leak through it.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("undecodable outbox record: {0}")]
pub struct UndecodableChange(pub String);

/// One record of the outbox as its source delivered it (a DynamoDB stream record, a row of the
/// embedded outbox): its position, which is what a failure report names, and its decoded
/// change (`None` for items that are not intents, which the relay ignores).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeRecord {
    pub position: String,
    pub change: Result<Option<IntentChange>, UndecodableChange>,
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
