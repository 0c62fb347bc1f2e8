//! Intents, their state machine, leases and fencing tokens.
//!
//! An intent is the durable record of one consented reservation attempt. It moves
//!
//! ```text
//! REQUESTED ──────────────┐
//!     │                   ▼
//!     │          ┌──> RESERVING ──> SUCCEEDED | FAILED_RACE | FAILED_AUTH | FAILED_UPSTREAM
//!     ▼          │        │
//! WAITING_FOR_SEAT <──────┘ (a wait whose seat was taken backs off)
//!     └──> CANCELLED | WAIT_EXPIRED
//! ```
//!
//! Every move is a [`Transition`]: a condition on the current item plus an update, which an
//! adapter performs as one conditional write. [`Intent::apply`] is the reference semantics of each
//! transition; the embedded adapter runs it inside one SQLite transaction and the DynamoDB adapter
//! expresses the same condition as a `ConditionExpression`. The contract suite checks both agree.
//!
//! Claiming bumps the *fencing token*; only a write carrying the current token can settle the
//! attempt, so a worker that outlived its lease cannot overwrite what the reaper decided.
//! `version` increases on every write: it names each state for outbox dedup and stale messages.

use super::{ActionId, IntentId, Millis, SeatId, UserId};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum IntentKind {
    /// Confirmed from a prepared action: one attempt, now.
    Immediate,
    /// Registered wait: attempts whenever the seat may be free, until a deadline.
    Wait,
}

impl IntentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            IntentKind::Immediate => "IMMEDIATE",
            IntentKind::Wait => "WAIT",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "IMMEDIATE" => Some(IntentKind::Immediate),
            "WAIT" => Some(IntentKind::Wait),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum IntentStatus {
    Requested,
    WaitingForSeat,
    Reserving,
    Succeeded,
    FailedRace,
    FailedAuth,
    FailedUpstream,
    /// A wait the user cancelled.
    Cancelled,
    /// A wait that reached its deadline without a seat.
    WaitExpired,
}

impl IntentStatus {
    pub const ALL: [IntentStatus; 9] = [
        IntentStatus::Requested,
        IntentStatus::WaitingForSeat,
        IntentStatus::Reserving,
        IntentStatus::Succeeded,
        IntentStatus::FailedRace,
        IntentStatus::FailedAuth,
        IntentStatus::FailedUpstream,
        IntentStatus::Cancelled,
        IntentStatus::WaitExpired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            IntentStatus::Requested => "REQUESTED",
            IntentStatus::WaitingForSeat => "WAITING_FOR_SEAT",
            IntentStatus::Reserving => "RESERVING",
            IntentStatus::Succeeded => "SUCCEEDED",
            IntentStatus::FailedRace => "FAILED_RACE",
            IntentStatus::FailedAuth => "FAILED_AUTH",
            IntentStatus::FailedUpstream => "FAILED_UPSTREAM",
            IntentStatus::Cancelled => "CANCELLED",
            IntentStatus::WaitExpired => "WAIT_EXPIRED",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    pub fn is_terminal(self) -> bool {
        !matches!(
            self,
            IntentStatus::Requested | IntentStatus::WaitingForSeat | IntentStatus::Reserving
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    pub intent_id: IntentId,
    pub user_id: UserId,
    pub seat_id: SeatId,
    pub kind: IntentKind,
    pub status: IntentStatus,
    /// Increases by one on every write.
    pub version: u64,
    /// Increases by one on every claim; a settlement must carry the current value.
    pub fencing_token: u64,
    /// While RESERVING: the claimer's lease. Past it (plus grace) the reaper settles the attempt.
    pub lease_until: Option<Millis>,
    /// When the reaper must next look at this intent; `None` once terminal. Adapters index it.
    pub due_at: Option<Millis>,
    /// A wait's deadline.
    pub deadline: Option<Millis>,
    /// A wait's next allowed attempt.
    pub next_attempt_at: Option<Millis>,
    /// Upstream attempts started (claims).
    pub attempts: u32,
    /// Times the reaper re-enqueued a REQUESTED intent whose message went missing.
    pub requeues: u32,
    pub charge_id: Option<String>,
    /// Why the intent ended as it did, in a word (`seat_taken`, `suppressed`, `charge_read`...).
    pub reason: Option<String>,
    pub action_id: Option<ActionId>,
    pub created_at: Millis,
    pub updated_at: Millis,
}

/// A record that a seat was just taken, so later intents for it in the suppression window are
/// closed FAILED_RACE without another upstream write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suppression {
    pub seat_id: SeatId,
    pub intent_id: IntentId,
    pub until: Millis,
}

/// A state change, with the condition under which it applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// `REQUESTED`, or `WAITING_FOR_SEAT` whose `next_attempt_at <= now` and `deadline > now`
    /// -> `RESERVING`, `fencing_token + 1`, `attempts + 1`, with the given lease.
    Claim { lease_until: Millis, due_at: Millis },
    /// `RESERVING` with `fencing_token == token` -> a terminal status. `suppress`, if set, is
    /// written in the same transaction.
    Complete {
        token: u64,
        status: IntentStatus,
        charge_id: Option<String>,
        reason: String,
        suppress: Option<Suppression>,
    },
    /// `RESERVING` with `fencing_token == token` -> `WAITING_FOR_SEAT` (a wait whose seat is taken).
    Rewait {
        token: u64,
        next_attempt_at: Millis,
        due_at: Millis,
        reason: String,
        suppress: Option<Suppression>,
    },
    /// Status in `from` (and owned by `owner`, and past its deadline, when asked) -> terminal
    /// `status` without an upstream call: a local FAILED_RACE, a cancel, a wait's expiry.
    Close {
        from: Vec<IntentStatus>,
        owner: Option<UserId>,
        deadline_passed: bool,
        status: IntentStatus,
        reason: String,
    },
    /// `status == from` and `version == version` -> same status, next version: a fresh outbox
    /// record that makes the relay enqueue the intent again (a due wait, a lost message).
    Bump {
        from: IntentStatus,
        version: u64,
        next_attempt_at: Option<Millis>,
        due_at: Millis,
        requeue: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransitionRequest {
    pub intent_id: IntentId,
    pub now: Millis,
    pub transition: Transition,
}

impl TransitionRequest {
    /// The suppression record to write in the same transaction, if any.
    pub fn suppression(&self) -> Option<&Suppression> {
        match &self.transition {
            Transition::Complete { suppress, .. } | Transition::Rewait { suppress, .. } => {
                suppress.as_ref()
            }
            _ => None,
        }
    }
}

impl Intent {
    /// A confirmed immediate intent.
    pub fn requested(
        intent_id: IntentId,
        user_id: UserId,
        seat_id: SeatId,
        action_id: ActionId,
        now: Millis,
        due_at: Millis,
    ) -> Self {
        Intent {
            intent_id,
            user_id,
            seat_id,
            kind: IntentKind::Immediate,
            status: IntentStatus::Requested,
            version: 1,
            fencing_token: 0,
            lease_until: None,
            due_at: Some(due_at),
            deadline: None,
            next_attempt_at: None,
            attempts: 0,
            requeues: 0,
            charge_id: None,
            reason: None,
            action_id: Some(action_id),
            created_at: now,
            updated_at: now,
        }
    }

    /// A registered wait, due at once.
    pub fn waiting(user_id: UserId, seat_id: SeatId, deadline: Millis, now: Millis) -> Self {
        Intent {
            intent_id: IntentId::generate(),
            user_id,
            seat_id,
            kind: IntentKind::Wait,
            status: IntentStatus::WaitingForSeat,
            version: 1,
            fencing_token: 0,
            lease_until: None,
            due_at: Some(now),
            deadline: Some(deadline),
            next_attempt_at: Some(now),
            attempts: 0,
            requeues: 0,
            charge_id: None,
            reason: None,
            action_id: None,
            created_at: now,
            updated_at: now,
        }
    }

    /// Whether a waiting intent may be attempted now.
    pub fn is_due_wait(&self, now: Millis) -> bool {
        self.status == IntentStatus::WaitingForSeat
            && self.next_attempt_at.is_none_or(|t| t <= now)
            && self.deadline.is_none_or(|d| d > now)
    }

    /// Whether `req`'s condition holds on this state.
    pub fn admits(&self, req: &TransitionRequest) -> bool {
        let now = req.now;
        match &req.transition {
            Transition::Claim { .. } => {
                self.status == IntentStatus::Requested || self.is_due_wait(now)
            }
            Transition::Complete { token, .. } | Transition::Rewait { token, .. } => {
                self.status == IntentStatus::Reserving && self.fencing_token == *token
            }
            Transition::Close {
                from,
                owner,
                deadline_passed,
                ..
            } => {
                from.contains(&self.status)
                    && owner.as_ref().is_none_or(|o| *o == self.user_id)
                    && (!deadline_passed || self.deadline.is_some_and(|d| d <= now))
            }
            Transition::Bump { from, version, .. } => {
                self.status == *from && self.version == *version
            }
        }
    }

    /// The reference semantics of a transition: the new state if the condition holds, `None` if
    /// the write must be refused.
    pub fn apply(&self, req: &TransitionRequest) -> Option<Intent> {
        if !self.admits(req) {
            return None;
        }
        let mut next = self.clone();
        next.version += 1;
        next.updated_at = req.now;
        match &req.transition {
            Transition::Claim {
                lease_until,
                due_at,
            } => {
                next.status = IntentStatus::Reserving;
                next.fencing_token += 1;
                next.attempts += 1;
                next.lease_until = Some(*lease_until);
                next.due_at = Some(*due_at);
            }
            Transition::Complete {
                status,
                charge_id,
                reason,
                ..
            } => {
                next.status = *status;
                next.charge_id = charge_id.clone();
                next.reason = Some(reason.clone());
                next.lease_until = None;
                next.due_at = None;
            }
            Transition::Rewait {
                next_attempt_at,
                due_at,
                reason,
                ..
            } => {
                next.status = IntentStatus::WaitingForSeat;
                next.next_attempt_at = Some(*next_attempt_at);
                next.due_at = Some(*due_at);
                next.lease_until = None;
                next.reason = Some(reason.clone());
            }
            Transition::Close { status, reason, .. } => {
                next.status = *status;
                next.reason = Some(reason.clone());
                next.lease_until = None;
                next.due_at = None;
            }
            Transition::Bump {
                next_attempt_at,
                due_at,
                requeue,
                ..
            } => {
                if let Some(t) = next_attempt_at {
                    next.next_attempt_at = Some(*t);
                }
                next.due_at = Some(*due_at);
                if *requeue {
                    next.requeues += 1;
                }
            }
        }
        Some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requested(now: Millis) -> Intent {
        Intent::requested(
            IntentId::generate(),
            UserId::parse("u1").unwrap(),
            SeatId::parse("A-1").unwrap(),
            ActionId::generate(),
            now,
            now.plus(std::time::Duration::from_secs(60)),
        )
    }

    fn req(intent: &Intent, now: i64, transition: Transition) -> TransitionRequest {
        TransitionRequest {
            intent_id: intent.intent_id.clone(),
            now: Millis(now),
            transition,
        }
    }

    fn claim(lease: i64) -> Transition {
        Transition::Claim {
            lease_until: Millis(lease),
            due_at: Millis(lease + 10),
        }
    }

    fn complete(token: u64) -> Transition {
        Transition::Complete {
            token,
            status: IntentStatus::Succeeded,
            charge_id: Some("c1".into()),
            reason: "reserved".into(),
            suppress: None,
        }
    }

    #[test]
    fn claim_bumps_the_fencing_token_and_only_that_token_settles() {
        let i = requested(Millis(0));
        let claimed = i.apply(&req(&i, 1, claim(100))).unwrap();
        assert_eq!(claimed.status, IntentStatus::Reserving);
        assert_eq!(claimed.fencing_token, 1);
        assert_eq!(claimed.version, 2);
        assert!(claimed.apply(&req(&claimed, 2, claim(100))).is_none());
        assert!(claimed.apply(&req(&claimed, 2, complete(0))).is_none());
        let done = claimed.apply(&req(&claimed, 2, complete(1))).unwrap();
        assert_eq!(done.status, IntentStatus::Succeeded);
        assert_eq!(done.due_at, None);
        assert!(done.apply(&req(&done, 3, complete(1))).is_none());
    }

    #[test]
    fn a_wait_is_claimable_only_when_due_and_before_its_deadline() {
        let w = Intent::waiting(
            UserId::parse("u").unwrap(),
            SeatId::parse("S").unwrap(),
            Millis(1_000),
            Millis(0),
        );
        assert!(w.apply(&req(&w, 10, claim(100))).is_some());
        let mut later = w.clone();
        later.next_attempt_at = Some(Millis(500));
        assert!(later.apply(&req(&later, 400, claim(100))).is_none());
        assert!(later.apply(&req(&later, 500, claim(600))).is_some());
        assert!(later.apply(&req(&later, 1_000, claim(1_100))).is_none());
    }

    #[test]
    fn close_checks_owner_and_deadline() {
        let w = Intent::waiting(
            UserId::parse("u").unwrap(),
            SeatId::parse("S").unwrap(),
            Millis(1_000),
            Millis(0),
        );
        let cancel = |owner: &str, deadline_passed| Transition::Close {
            from: vec![IntentStatus::WaitingForSeat],
            owner: Some(UserId::parse(owner).unwrap()),
            deadline_passed,
            status: IntentStatus::Cancelled,
            reason: "cancelled".into(),
        };
        assert!(w.apply(&req(&w, 5, cancel("other", false))).is_none());
        assert!(w.apply(&req(&w, 5, cancel("u", true))).is_none());
        assert!(w.apply(&req(&w, 1_000, cancel("u", true))).is_some());
        assert_eq!(
            w.apply(&req(&w, 5, cancel("u", false))).unwrap().status,
            IntentStatus::Cancelled
        );
    }

    #[test]
    fn bump_needs_the_exact_version() {
        let i = requested(Millis(0));
        let bump = |version| Transition::Bump {
            from: IntentStatus::Requested,
            version,
            next_attempt_at: None,
            due_at: Millis(99),
            requeue: true,
        };
        assert!(i.apply(&req(&i, 1, bump(2))).is_none());
        let b = i.apply(&req(&i, 1, bump(1))).unwrap();
        assert_eq!((b.version, b.requeues, b.due_at), (2, 1, Some(Millis(99))));
    }

    #[test]
    fn statuses_round_trip_and_know_terminality() {
        for s in IntentStatus::ALL {
            assert_eq!(IntentStatus::parse(s.as_str()), Some(s));
        }
        assert!(!IntentStatus::Reserving.is_terminal());
        assert!(IntentStatus::WaitExpired.is_terminal());
    }
}
