//! Actions and consent.
//!
//! A reservation starts as a *prepared action*: the user asked for something and has a short time
//! (the action TTL) to confirm it. Confirming is the user's consent, so it writes a consent audit
//! record that is kept for good, in the same transaction that creates the intent: there is never
//! an intent without the consent that justifies an upstream write on the user's behalf.

use super::{ActionId, IntentId, IntentKind, Millis, SeatId, UserId};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    ReserveSeat,
}

impl ActionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ActionKind::ReserveSeat => "reserve_seat",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "reserve_seat" => Some(ActionKind::ReserveSeat),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ActionStatus {
    Prepared,
    Confirmed,
}

impl ActionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ActionStatus::Prepared => "PREPARED",
            ActionStatus::Confirmed => "CONFIRMED",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "PREPARED" => Some(ActionStatus::Prepared),
            "CONFIRMED" => Some(ActionStatus::Confirmed),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Action {
    pub action_id: ActionId,
    pub user_id: UserId,
    pub kind: ActionKind,
    pub seat_id: SeatId,
    pub status: ActionStatus,
    /// Set once confirmed; confirming again returns this intent.
    pub intent_id: Option<IntentId>,
    pub created_at: Millis,
    pub expires_at: Millis,
}

impl Action {
    pub fn prepare(
        user_id: UserId,
        kind: ActionKind,
        seat_id: SeatId,
        now: Millis,
        ttl: std::time::Duration,
    ) -> Self {
        Action {
            action_id: ActionId::generate(),
            user_id,
            kind,
            seat_id,
            status: ActionStatus::Prepared,
            intent_id: None,
            created_at: now,
            expires_at: now.plus(ttl),
        }
    }

    pub fn is_expired(&self, now: Millis) -> bool {
        self.expires_at <= now
    }
}

/// Proof of the user's consent to one upstream write. Kept without TTL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsentRecord {
    pub intent_id: IntentId,
    pub user_id: UserId,
    pub seat_id: SeatId,
    pub kind: IntentKind,
    /// The confirmed action; `None` for a wait, where registering is itself the consent.
    pub action_id: Option<ActionId>,
    pub consented_at: Millis,
}

impl ConsentRecord {
    /// The consent behind `intent`, given at `now`: the confirmed action's for an immediate
    /// intent, the registration itself for a wait.
    pub fn for_intent(intent: &super::Intent, now: Millis) -> Self {
        ConsentRecord {
            intent_id: intent.intent_id.clone(),
            user_id: intent.user_id.clone(),
            seat_id: intent.seat_id.clone(),
            kind: intent.kind,
            action_id: intent.action_id.clone(),
            consented_at: now,
        }
    }
}
