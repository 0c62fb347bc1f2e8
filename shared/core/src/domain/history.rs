//! An intent's history: one [`TransitionRecord`] per write of the intent, in version order.
//!
//! It is an audit of its own, not a replay of the outbox: the DynamoDB stream keeps records for
//! 24 hours and cannot be queried by intent, and the embedded outbox prunes handled rows. So each
//! adapter writes the record in the very write (or transaction) that changes the intent, and a
//! record is derived from the old and new images exactly as the outbox/stream carries them
//! ([`TransitionRecord::of`]); a test compares the two.

use super::{Intent, IntentChange, IntentStatus, Millis, Reason};
use serde::{Deserialize, Serialize};

/// One write of an intent as the admin history shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransitionRecord {
    /// The intent's version after the write (1 for its creation).
    pub version: u64,
    /// The write's time (the new image's `updated_at`).
    pub at: Millis,
    /// The status before the write; `None` for the creation.
    pub from: Option<IntentStatus>,
    pub to: IntentStatus,
    /// The fencing token after the write (a claim raises it).
    pub fencing_token: u64,
    pub reason: Option<Reason>,
}

impl TransitionRecord {
    /// The record of the write that turned `old` (none for a creation) into `new`.
    pub fn of(old: Option<&Intent>, new: &Intent) -> Self {
        TransitionRecord {
            version: new.version,
            at: new.updated_at,
            from: old.map(|o| o.status),
            to: new.status,
            fencing_token: new.fencing_token,
            reason: new.reason,
        }
    }

    /// The record of one outbox/stream change; `None` for a removal (intents are never deleted).
    pub fn of_change(change: &IntentChange) -> Option<Self> {
        change
            .new
            .as_ref()
            .map(|n| Self::of(change.old.as_ref(), n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Timing;
    use crate::domain::{ActionId, IntentId, SeatId, Transition, TransitionRequest, UserId};

    #[test]
    fn a_claim_records_its_new_token_and_the_status_it_left() {
        let timing = Timing::fast();
        let intent = Intent::requested(
            IntentId::generate(),
            UserId::parse("u1").unwrap(),
            SeatId::parse("A-1").unwrap(),
            ActionId::generate(),
            Millis(10),
            Millis(1_000),
        );
        let created = TransitionRecord::of(None, &intent);
        assert_eq!(
            (
                created.version,
                created.from,
                created.to,
                created.fencing_token
            ),
            (1, None, IntentStatus::Requested, 0)
        );
        let claimed = intent
            .apply(&TransitionRequest::on(
                &intent,
                Millis(20),
                Transition::claim(Millis(20), &timing),
            ))
            .unwrap();
        let record = TransitionRecord::of(Some(&intent), &claimed);
        assert_eq!(record.version, 2);
        assert_eq!(record.at, Millis(20));
        assert_eq!(record.from, Some(IntentStatus::Requested));
        assert_eq!(record.to, IntentStatus::Reserving);
        assert_eq!(record.fencing_token, 1);
        assert_eq!(record.reason, None);
    }
}
