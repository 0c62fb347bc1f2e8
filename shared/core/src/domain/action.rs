//! Actions and consent.
//!
//! A reservation starts as a *prepared action*: the user asked for something and has a short time
//! (the action TTL) to confirm it. Confirming is the user's consent, so it writes a consent audit
//! record that is kept for good, in the same transaction that creates the intent: there is never
//! an intent without the consent that justifies an upstream write on the user's behalf.
//!
//! [`Action::confirm`] is the confirm's rule, refusal order included. The embedded backend and
//! the service's pre-check apply it; DynamoDB's condition expression is its hand-written twin,
//! and the contract case `confirms_answer_as_the_confirm_rule` holds every backend to it.

use super::{ActionId, IntentId, IntentKind, Millis, SeatId, UserId};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Why a confirm is refused.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ConfirmRefusal {
    /// No such action, or it belongs to someone else (indistinguishable on purpose).
    #[error("no such action")]
    NotFound,
    #[error("the action expired")]
    Expired,
    /// Confirmed before; the intent it created.
    #[error("already confirmed")]
    AlreadyConfirmed(IntentId),
    /// The action may be confirmed, but the user's window for confirms is spent (the
    /// confirmation's [`Admission`](super::Admission)); checked after the action's own refusals,
    /// so a replay still answers with its intent.
    #[error("the user's rate limit window is spent")]
    RateLimited,
}

/// What the confirm rule says about a stored action.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ConfirmDenied {
    #[error(transparent)]
    Refused(#[from] ConfirmRefusal),
    /// The stored action breaks an invariant (confirmed without the intent it created); an
    /// adapter answers it as corrupt data, never as a refusal a user would see.
    #[error("a confirmed action without its intent id")]
    Corrupt,
}

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
    /// A prepared action under a fresh id from the wall clock: for tests and tools (the API
    /// service names its actions from its `Ids` port, through [`Action::prepare_as`]).
    pub fn prepare(
        user_id: UserId,
        kind: ActionKind,
        seat_id: SeatId,
        now: Millis,
        ttl: std::time::Duration,
    ) -> Self {
        Self::prepare_as(ActionId::generate(), user_id, kind, seat_id, now, ttl)
    }

    /// A prepared action, confirmable until `now + ttl`.
    pub fn prepare_as(
        action_id: ActionId,
        user_id: UserId,
        kind: ActionKind,
        seat_id: SeatId,
        now: Millis,
        ttl: std::time::Duration,
    ) -> Self {
        Action {
            action_id,
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

    /// The confirm rule: the action `found` under the id (if any), confirmed by `user` at `now`
    /// into `intent_id`, becomes the returned action, or is refused, checked in this order:
    ///
    /// 1. missing, or another user's: [`ConfirmRefusal::NotFound`] (the owner comes first, so
    ///    another user cannot learn whether the action was confirmed or expired);
    /// 2. confirmed before: [`ConfirmRefusal::AlreadyConfirmed`] with its intent, even once
    ///    expired, so a retried confirm always finds its intent;
    /// 3. expired: [`ConfirmRefusal::Expired`].
    pub fn confirm(
        found: Option<&Action>,
        user: &UserId,
        intent_id: &IntentId,
        now: Millis,
    ) -> Result<Action, ConfirmDenied> {
        let action = match found {
            Some(a) if a.user_id == *user => a,
            _ => return Err(ConfirmRefusal::NotFound.into()),
        };
        if action.status == ActionStatus::Confirmed {
            return match &action.intent_id {
                Some(id) => Err(ConfirmRefusal::AlreadyConfirmed(id.clone()).into()),
                None => Err(ConfirmDenied::Corrupt),
            };
        }
        if action.is_expired(now) {
            return Err(ConfirmRefusal::Expired.into());
        }
        Ok(Action {
            status: ActionStatus::Confirmed,
            intent_id: Some(intent_id.clone()),
            ..action.clone()
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn action(owner: &str, status: ActionStatus, expires_at: i64) -> Action {
        Action {
            action_id: ActionId::parse("0190a0a0-0000-7000-8000-000000000001").unwrap(),
            user_id: UserId::parse(owner).unwrap(),
            kind: ActionKind::ReserveSeat,
            seat_id: SeatId::parse("A-1").unwrap(),
            status,
            intent_id: (status == ActionStatus::Confirmed)
                .then(|| IntentId::parse("0190a0a0-0000-7000-8000-0000000000aa").unwrap()),
            created_at: Millis(0),
            expires_at: Millis(expires_at),
        }
    }

    #[test]
    fn the_confirm_refuses_owner_then_confirmed_then_expiry() {
        let me = UserId::parse("u1").unwrap();
        let new = IntentId::parse("0190a0a0-0000-7000-8000-0000000000bb").unwrap();
        let confirm = |a: Option<&Action>| Action::confirm(a, &me, &new, Millis(1_000));
        let refused = |r| Err(ConfirmDenied::Refused(r));
        assert_eq!(confirm(None), refused(ConfirmRefusal::NotFound));
        // Another user's action is missing, whatever its state.
        for status in [ActionStatus::Prepared, ActionStatus::Confirmed] {
            for expires in [500, 5_000] {
                let theirs = action("u2", status, expires);
                assert_eq!(confirm(Some(&theirs)), refused(ConfirmRefusal::NotFound));
            }
        }
        // Confirmed beats expired: a retry finds its intent after the action's TTL.
        let done = action("u1", ActionStatus::Confirmed, 500);
        assert_eq!(
            confirm(Some(&done)),
            refused(ConfirmRefusal::AlreadyConfirmed(
                done.intent_id.clone().unwrap()
            ))
        );
        // Expiry is inclusive of its instant.
        let expired = action("u1", ActionStatus::Prepared, 1_000);
        assert_eq!(confirm(Some(&expired)), refused(ConfirmRefusal::Expired));
        let fresh = action("u1", ActionStatus::Prepared, 1_001);
        let confirmed = confirm(Some(&fresh)).unwrap();
        assert_eq!(confirmed.status, ActionStatus::Confirmed);
        assert_eq!(confirmed.intent_id, Some(new.clone()));
        let mut broken = action("u1", ActionStatus::Confirmed, 5_000);
        broken.intent_id = None;
        assert_eq!(confirm(Some(&broken)), Err(ConfirmDenied::Corrupt));
    }
}
