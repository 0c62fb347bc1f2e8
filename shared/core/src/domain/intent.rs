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
use crate::config::Timing;
use serde::{Deserialize, Serialize};

mod seat;
mod status;
pub use seat::{SeatClaim, SeatClaimEffect, Suppression};
pub use status::{IntentKind, IntentStatus, Reason, Terminal};

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
    /// Why the intent is where it is (set by every settlement and close).
    pub reason: Option<Reason>,
    pub action_id: Option<ActionId>,
    pub created_at: Millis,
    pub updated_at: Millis,
}

/// Where a released attempt goes back to: an immediate intent is requested again, a wait waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackTo {
    Requested,
    WaitingForSeat,
}

impl BackTo {
    pub fn of(kind: IntentKind) -> Self {
        match kind {
            IntentKind::Immediate => BackTo::Requested,
            IntentKind::Wait => BackTo::WaitingForSeat,
        }
    }

    pub fn status(self) -> IntentStatus {
        match self {
            BackTo::Requested => IntentStatus::Requested,
            BackTo::WaitingForSeat => IntentStatus::WaitingForSeat,
        }
    }
}

/// What an attempt on the upstream came to, as far as the intent is concerned: the worker learns
/// it from the reserve's answer, the reaper from the user's charge. [`Intent::settle`] turns it
/// into the one write that records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The user holds a charge on this seat (`how` is [`Reason::Reserved`] or
    /// [`Reason::ChargeRead`]).
    Charged {
        charge_id: String,
        how: Reason,
    },
    /// Someone else holds the seat.
    SeatTaken,
    /// The seat's suppression is in force (this system took it within the action TTL), found
    /// after the claim: a lost race like [`Outcome::SeatTaken`], without a new suppression (the
    /// one in force stands, and is not lengthened).
    Suppressed,
    /// The charge read found no charge on this seat: the write never happened.
    NoCharge,
    NoCredential,
    CredentialRejected,
    /// A definite refusal with this status: nothing was written upstream.
    Refused(u16),
    /// The user holds a charge on another seat: this intent ends, the seat stays open.
    AlreadyCharged,
    /// The upstream refused for load: nothing was written; try again no sooner than `retry_at`.
    Busy {
        retry_at: Millis,
    },
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
        status: Terminal,
        charge_id: Option<String>,
        reason: Reason,
        suppress: Option<Suppression>,
    },
    /// `RESERVING` with `fencing_token == token` -> back in line (`back_to`), nothing written
    /// upstream (the upstream was busy), not attempted again before `next_attempt_at`. Releases
    /// the seat's claim.
    Release {
        token: u64,
        back_to: BackTo,
        next_attempt_at: Millis,
        due_at: Millis,
    },
    /// `RESERVING` with `fencing_token == token` -> `WAITING_FOR_SEAT` (a wait whose seat is taken).
    Rewait {
        token: u64,
        next_attempt_at: Millis,
        due_at: Millis,
        reason: Reason,
        suppress: Option<Suppression>,
    },
    /// Status in `from` (and owned by `owner`, and past its deadline, when asked) -> terminal
    /// `status` without an upstream call: a local FAILED_RACE, a cancel, a wait's expiry.
    Close {
        from: Vec<IntentStatus>,
        owner: Option<UserId>,
        deadline_passed: bool,
        status: Terminal,
        reason: Reason,
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

impl Transition {
    /// A worker claims a REQUESTED intent (or a due wait) at `now`: a lease of `timing.lease()`
    /// and a due time for the reaper just past it.
    pub fn claim(now: Millis, timing: &Timing) -> Self {
        let lease_until = now.plus(timing.lease());
        Transition::Claim {
            lease_until,
            due_at: lease_until.plus(timing.reaper_grace),
        }
    }

    /// An immediate intent whose seat is known taken is closed as a lost race, no upstream call.
    pub fn lost_race() -> Self {
        Transition::Close {
            from: vec![IntentStatus::Requested],
            owner: None,
            deadline_passed: false,
            status: Terminal::FailedRace,
            reason: Reason::SeatTaken,
        }
    }

    /// The owner cancels their wait.
    pub fn cancel(owner: UserId) -> Self {
        Transition::Close {
            from: vec![IntentStatus::WaitingForSeat],
            owner: Some(owner),
            deadline_passed: false,
            status: Terminal::Cancelled,
            reason: Reason::Cancelled,
        }
    }

    /// A wait ends at its deadline. With `deadline_passed` the condition checks the stored
    /// deadline (the reaper, acting on an index that may lag); without, the caller decided from
    /// the intent it was refused with.
    pub fn expire_wait(deadline_passed: bool) -> Self {
        Transition::Close {
            from: vec![IntentStatus::WaitingForSeat],
            owner: None,
            deadline_passed,
            status: Terminal::WaitExpired,
            reason: Reason::Deadline,
        }
    }

    /// A REQUESTED intent whose messages kept going missing is given up on.
    pub fn never_processed() -> Self {
        Transition::Close {
            from: vec![IntentStatus::Requested],
            owner: None,
            deadline_passed: false,
            status: Terminal::FailedUpstream,
            reason: Reason::NeverProcessed,
        }
    }

    /// A REQUESTED intent at `version` gets a new version (so the relay enqueues it again) and
    /// counts one more requeue.
    pub fn requeue(version: u64, due_at: Millis) -> Self {
        Transition::Bump {
            from: IntentStatus::Requested,
            version,
            next_attempt_at: None,
            due_at,
            requeue: true,
        }
    }

    /// A RESERVING attempt at `version` whose charge could not be read is looked at again at
    /// `due_at`; its seat stays claimed.
    pub fn postpone(version: u64, due_at: Millis) -> Self {
        Transition::Bump {
            from: IntentStatus::Reserving,
            version,
            next_attempt_at: None,
            due_at,
            requeue: false,
        }
    }

    /// A REQUESTED intent at `version`, back in line after a busy upstream, is enqueued again
    /// (not a requeue: no message was lost), to be attempted from `attempt_at`: its retry time,
    /// which came, or the wake-up's now when the upstream it waited for is back sooner (a probe
    /// closed the breaker). At or before the write's own time, so the relay and the claim take
    /// it at once.
    pub fn retry(version: u64, attempt_at: Millis, due_at: Millis) -> Self {
        Transition::Bump {
            from: IntentStatus::Requested,
            version,
            next_attempt_at: Some(attempt_at),
            due_at,
            requeue: false,
        }
    }

    /// A REQUESTED intent at `version` the worker did not claim because the upstream's breaker
    /// is open: back in line, not attempted before `until`, when the reaper wakes it.
    pub fn hold_back(version: u64, until: Millis) -> Self {
        Transition::Bump {
            from: IntentStatus::Requested,
            version,
            next_attempt_at: Some(until),
            due_at: until,
            requeue: false,
        }
    }

    /// A waiting intent at `version` gets a new version: enqueued again now (`next_attempt_at`
    /// `None`), or at a later attempt time.
    pub fn wake(version: u64, next_attempt_at: Option<Millis>, due_at: Millis) -> Self {
        Transition::Bump {
            from: IntentStatus::WaitingForSeat,
            version,
            next_attempt_at,
            due_at,
            requeue: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransitionRequest {
    pub intent_id: IntentId,
    /// The intent's seat. Claims and settlements must name it, because they take and release
    /// its claim; one without it, or naming another seat, is refused like any failed condition.
    pub seat_id: Option<SeatId>,
    pub now: Millis,
    pub transition: Transition,
    /// The intent as the caller last saw it (the claimed intent a settlement settles, a queue
    /// message's copy). A store may pin its write to that version instead of reading the intent
    /// first; a stale copy costs a refused attempt and a retry on the state the refusal
    /// returned, never a wrong write. Ignored when it is another intent's.
    pub seen: Option<Box<Intent>>,
    /// What the write learned about its seat (won, or found taken): recorded in the seat-read
    /// cache by the same write, unless the cache holds a newer reading
    /// ([`super::CacheEntry::may_record`]).
    pub reading: Option<super::Reading>,
}

impl TransitionRequest {
    /// A request that names no seat: closes and bumps, which leave the seat's claim alone.
    pub fn new(intent_id: IntentId, now: Millis, transition: Transition) -> Self {
        TransitionRequest {
            intent_id,
            seat_id: None,
            now,
            transition,
            seen: None,
            reading: None,
        }
    }

    /// A request about `intent`, naming its seat.
    pub fn on(intent: &Intent, now: Millis, transition: Transition) -> Self {
        Self::on_seat(
            intent.intent_id.clone(),
            intent.seat_id.clone(),
            now,
            transition,
        )
    }

    pub fn on_seat(
        intent_id: IntentId,
        seat_id: SeatId,
        now: Millis,
        transition: Transition,
    ) -> Self {
        TransitionRequest {
            intent_id,
            seat_id: Some(seat_id),
            now,
            transition,
            seen: None,
            reading: None,
        }
    }

    /// The request, telling the store the state the caller saw the intent in.
    pub fn seen_as(mut self, intent: &Intent) -> Self {
        self.seen = (intent.intent_id == self.intent_id).then(|| Box::new(intent.clone()));
        self
    }

    /// The request, recording `reading` in the seat-read cache by the same write.
    pub fn recording(mut self, reading: super::Reading) -> Self {
        self.reading = Some(reading);
        self
    }

    /// The copy the caller saw, when it is this intent's.
    pub fn seen(&self) -> Option<&Intent> {
        self.seen
            .as_deref()
            .filter(|i| i.intent_id == self.intent_id)
    }

    /// Whether the transition takes or releases its seat's claim, which then must be named.
    pub fn touches_seat_claim(&self) -> bool {
        matches!(
            self.transition,
            Transition::Claim { .. }
                | Transition::Complete { .. }
                | Transition::Rewait { .. }
                | Transition::Release { .. }
        )
    }

    /// What the write does to the seat's claim, beside the intent. `None` also for a request that
    /// should touch the claim but names no seat: such a request is refused anyway.
    pub fn seat_claim_effect(&self) -> SeatClaimEffect {
        let Some(seat_id) = self.seat_id.clone() else {
            return SeatClaimEffect::None;
        };
        match self.transition {
            Transition::Claim { .. } => SeatClaimEffect::Take(SeatClaim {
                seat_id,
                intent_id: self.intent_id.clone(),
                since: self.now,
            }),
            Transition::Complete { .. }
            | Transition::Rewait { .. }
            | Transition::Release { .. } => SeatClaimEffect::Release {
                seat_id,
                intent_id: self.intent_id.clone(),
            },
            _ => SeatClaimEffect::None,
        }
    }

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

    /// A registered wait under a fresh id from the wall clock: for tests and tools (the API
    /// service names its intents from its `Ids` port, through [`Intent::waiting_as`]).
    pub fn waiting(user_id: UserId, seat_id: SeatId, deadline: Millis, now: Millis) -> Self {
        Self::waiting_as(IntentId::generate(), user_id, seat_id, deadline, now)
    }

    /// A registered wait, due at once.
    pub fn waiting_as(
        intent_id: IntentId,
        user_id: UserId,
        seat_id: SeatId,
        deadline: Millis,
        now: Millis,
    ) -> Self {
        Intent {
            intent_id,
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

    /// The wait-deadline rule, in one place: when a wait that just failed to get its seat may try
    /// again (after a backoff that grows with its attempts), or `None` when that would be at or
    /// past its deadline, so the wait ends instead.
    pub fn next_wait_attempt(&self, now: Millis, timing: &Timing) -> Option<Millis> {
        let next = now.plus(timing.wait_backoff(self.attempts.max(1)));
        match self.deadline {
            Some(deadline) if next >= deadline => None,
            _ => Some(next),
        }
    }

    /// The write that has the reaper look at this due wait again at `next` (its seat read
    /// taken), or at its deadline if that comes first, when it ends.
    pub fn recheck_at(&self, next: Millis) -> Transition {
        let next = self.deadline.map_or(next, |d| d.min(next));
        Transition::wake(self.version, Some(next), next)
    }

    /// The write that backs off a waiting intent found at `self` whose seat is taken: its next
    /// attempt later, or its end at the deadline.
    pub fn wait_backoff(&self, now: Millis, timing: &Timing) -> Transition {
        match self.next_wait_attempt(now, timing) {
            Some(next) => Transition::wake(self.version, Some(next), next),
            None => Transition::expire_wait(false),
        }
    }

    /// The one conditional write that records `outcome` for this claimed attempt, valid only
    /// under its fencing token, pinned to this state (`seen`), and recording the seat as taken
    /// in the seat-read cache when the attempt learned so. The domain decides: a charge
    /// succeeds and suppresses the seat; a
    /// taken seat ends an immediate intent as a lost race (suppressing the seat) while a wait
    /// waits again; no charge fails an immediate intent while a wait waits again; a wait whose
    /// next attempt would pass its deadline ends instead.
    pub fn settle(&self, outcome: Outcome, now: Millis, timing: &Timing) -> TransitionRequest {
        let token = self.fencing_token;
        let complete = |status, reason, charge_id, suppress| Transition::Complete {
            token,
            status,
            charge_id,
            reason,
            suppress,
        };
        let retry_or_fail = |reason, fail, suppress: Option<Suppression>| match self.kind {
            IntentKind::Immediate => complete(fail, reason, None, suppress),
            IntentKind::Wait => match self.next_wait_attempt(now, timing) {
                Some(next) => Transition::Rewait {
                    token,
                    next_attempt_at: next,
                    due_at: next,
                    reason,
                    suppress,
                },
                None => complete(Terminal::WaitExpired, Reason::Deadline, None, suppress),
            },
        };
        // What the attempt learned about its seat: taken, by this user or another.
        let seat_taken = matches!(
            outcome,
            Outcome::Charged { .. } | Outcome::SeatTaken | Outcome::Suppressed
        );
        let transition = match outcome {
            Outcome::Charged { charge_id, how } => complete(
                Terminal::Succeeded,
                how,
                Some(charge_id),
                Some(Suppression::won(self, now, timing)),
            ),
            Outcome::Suppressed => retry_or_fail(Reason::SeatTaken, Terminal::FailedRace, None),
            Outcome::SeatTaken => retry_or_fail(
                Reason::SeatTaken,
                Terminal::FailedRace,
                Some(Suppression::of(self, now, timing)),
            ),
            Outcome::NoCharge => retry_or_fail(Reason::NoCharge, Terminal::FailedUpstream, None),
            Outcome::NoCredential => {
                complete(Terminal::FailedAuth, Reason::NoCredential, None, None)
            }
            Outcome::CredentialRejected => {
                complete(Terminal::FailedAuth, Reason::CredentialRejected, None, None)
            }
            Outcome::Refused(code) => complete(
                Terminal::FailedUpstream,
                Reason::UpstreamRefused(code),
                None,
                None,
            ),
            // A wait ends too: waiting on would only meet the same refusal.
            Outcome::AlreadyCharged => {
                complete(Terminal::FailedUpstream, Reason::AlreadyCharged, None, None)
            }
            Outcome::Busy { retry_at } => {
                let retry_at = retry_at.max(now);
                match self.deadline {
                    Some(deadline) if retry_at >= deadline => {
                        complete(Terminal::WaitExpired, Reason::Deadline, None, None)
                    }
                    _ => Transition::Release {
                        token,
                        back_to: BackTo::of(self.kind),
                        next_attempt_at: retry_at,
                        due_at: retry_at,
                    },
                }
            }
        };
        let request = TransitionRequest::on(self, now, transition).seen_as(self);
        if seat_taken {
            request.recording(super::Reading::seat(self.seat_id.clone(), false, now))
        } else {
            request
        }
    }

    /// Whether `self` is exactly what `request` makes of `before`: a refused write that had in
    /// fact committed on an earlier try (an SDK retry after a lost answer) shows its own result,
    /// the same version and fencing token, and is the caller's success.
    pub fn is_result_of(&self, before: &Intent, request: &TransitionRequest) -> bool {
        before.apply(request).as_ref() == Some(self)
    }

    /// Whether a REQUESTED intent may be attempted now: not put back in line for later (after a
    /// busy upstream) or past that time.
    pub fn is_due_request(&self, now: Millis) -> bool {
        self.status == IntentStatus::Requested && self.next_attempt_at.is_none_or(|t| t <= now)
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
        if req.touches_seat_claim() && req.seat_id.as_ref() != Some(&self.seat_id) {
            return false;
        }
        match &req.transition {
            Transition::Claim { .. } => self.is_due_request(now) || self.is_due_wait(now),
            Transition::Complete { token, .. }
            | Transition::Rewait { token, .. }
            | Transition::Release { token, .. } => {
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
                next.status = status.status();
                next.charge_id = charge_id.clone();
                next.reason = Some(*reason);
                next.lease_until = None;
                next.due_at = None;
            }
            Transition::Release {
                back_to,
                next_attempt_at,
                due_at,
                ..
            } => {
                next.status = back_to.status();
                next.next_attempt_at = Some(*next_attempt_at);
                next.due_at = Some(*due_at);
                next.lease_until = None;
                next.reason = Some(Reason::UpstreamBusy);
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
                next.reason = Some(*reason);
            }
            Transition::Close { status, reason, .. } => {
                next.status = status.status();
                next.reason = Some(*reason);
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
mod tests;
