//! Prepared actions, intents and their credentials: the reservation pipeline's own items.
//!
//! A confirm is the one write that turns an action into an intent; a transition is the one
//! conditional write that moves an intent, judged by the domain's rules on the item the write saw.

use super::StoreError;
use crate::domain::{
    Action, ActionId, ConsentRecord, Intent, IntentId, Millis, Page, PageSize, SeatClaim, SeatId,
    Secret, Suppression, TransitionRecord, TransitionRequest, UserId,
};
use async_trait::async_trait;
use thiserror::Error;

/// Why a confirm write was refused: the domain's rule ([`crate::domain::Action::confirm`]),
/// judged on the action the write saw (DynamoDB: the item the failed condition returned with
/// `ReturnValuesOnConditionCheckFailure = ALL_OLD`), never on a second read.
pub use crate::domain::ConfirmRefusal;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ConfirmError {
    #[error(transparent)]
    Refused(ConfirmRefusal),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<crate::domain::ConfirmDenied> for ConfirmError {
    fn from(denied: crate::domain::ConfirmDenied) -> Self {
        match denied {
            crate::domain::ConfirmDenied::Refused(r) => ConfirmError::Refused(r),
            crate::domain::ConfirmDenied::Corrupt => {
                ConfirmError::Store(StoreError::Corrupt(denied.to_string()))
            }
        }
    }
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum TransitionError {
    #[error("no such intent")]
    NotFound,
    /// The condition failed; the state the write saw.
    #[error("intent is {} (version {})", .0.status.as_str(), .0.version)]
    Refused(Box<Intent>),
    /// A claim whose intent was claimable, refused because another intent's attempt has claimed
    /// the seat (until that attempt is settled); the claim the write saw.
    #[error("seat {} is held by intent {}", .0.seat_id, .0.intent_id)]
    SeatClaimed(SeatClaim),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The one write that turns a prepared action into an intent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirmation {
    pub action_id: ActionId,
    pub user_id: UserId,
    pub now: Millis,
    /// The new REQUESTED intent.
    pub intent: Intent,
    pub consent: ConsentRecord,
    /// Counts the confirm in its user's rate window, in the same transaction; `None` when
    /// confirms are not limited.
    pub admission: Option<crate::domain::Admission>,
}

impl Confirmation {
    /// `user_id` confirming `action`: a new REQUESTED intent for the action's seat (due for the
    /// reaper at `due_at`, should its queue message go missing) and the consent that justifies
    /// it. The store decides whether `user_id` may confirm; the intent and consent belong to the
    /// action's owner.
    pub fn of(
        action: &Action,
        intent_id: IntentId,
        user_id: &UserId,
        now: Millis,
        due_at: Millis,
    ) -> Self {
        let intent = Intent::requested(
            intent_id,
            action.user_id.clone(),
            action.seat_id.clone(),
            action.action_id.clone(),
            now,
            due_at,
        );
        let consent = ConsentRecord::for_intent(&intent, now);
        Confirmation {
            action_id: action.action_id.clone(),
            user_id: user_id.clone(),
            now,
            intent,
            consent,
            admission: None,
        }
    }

    /// The confirmation, counted in `admission`'s window.
    pub fn admitted_by(mut self, admission: crate::domain::Admission) -> Self {
        self.admission = Some(admission);
        self
    }
}

/// Prepared actions.
#[async_trait]
pub trait Actions: Send + Sync {
    /// Writes a new action. A put over an existing id must fail with `StoreError::Unavailable`
    /// (ids are generated; a collision is a bug, never an overwrite).
    async fn put_action(&self, action: &Action) -> Result<(), StoreError>;

    async fn get_action(&self, id: &ActionId) -> Result<Option<Action>, StoreError>;

    /// One transaction: the action `PREPARED`, unexpired at `now`, owned by `user_id` ->
    /// `CONFIRMED` with the intent id; the intent put (absent before); the consent record put;
    /// with an `admission`, its window's counter created at 1 or raised by 1 while below the
    /// limit ([`crate::domain::RateWindow::admits`]), expiring after the window's end.
    /// Refusals, checked in this order: `NotFound` (missing or another owner's: a stranger learns
    /// nothing else), `AlreadyConfirmed(intent)` (even once expired), `Expired`, `RateLimited`.
    /// A refusal writes nothing, the window's counter included.
    async fn confirm(&self, confirmation: &Confirmation) -> Result<(), ConfirmError>;
}

/// Intents, their consent records and seat suppressions.
#[async_trait]
pub trait Intents: Send + Sync {
    /// One transaction: a new WAITING_FOR_SEAT intent and its consent record. An existing intent
    /// id fails with `StoreError::Unavailable` (ids are generated; never an overwrite).
    async fn register_wait(
        &self,
        intent: &Intent,
        consent: &ConsentRecord,
    ) -> Result<(), StoreError>;

    async fn get_intent(&self, id: &IntentId) -> Result<Option<Intent>, StoreError>;

    async fn get_consent(&self, id: &IntentId) -> Result<Option<ConsentRecord>, StoreError>;

    /// The intents stored under up to [`MAX_BATCH_READ`](super::MAX_BATCH_READ) ids, in any order, unknown ids left
    /// out (more ids fail with `Unavailable`). One batch read; it may be eventually consistent,
    /// so a caller may trust a terminal state it returns (terminal is final) and must decide
    /// anything else by a conditional write.
    async fn intents(&self, ids: &[IntentId]) -> Result<Vec<Intent>, StoreError>;

    /// Up to `limit` of the seat's REQUESTED intents (the ones a lost race may close), in any
    /// order. May lag the items (on DynamoDB a sparse GSI, eventually consistent): an intent
    /// written just before may be missing and one that moved on may still show, so every write
    /// a caller makes from it is conditional on the copy it got.
    async fn open_on_seat(&self, seat_id: &SeatId, limit: usize)
    -> Result<Vec<Intent>, StoreError>;

    /// One conditional write, or one transaction when the request also takes or releases its
    /// seat's claim or writes a suppression, with the semantics of [`Intent::apply`] for the
    /// intent and [`TransitionRequest::seat_claim_effect`] for the seat's claim: a claim also requires the seat
    /// free or claimed by this intent and then claims it; a settlement releases this intent's
    /// claim.
    /// Returns the new state. Errors, in this order: `NotFound` if the intent does not exist,
    /// `Refused(current)` if the intent's condition fails, `SeatClaimed(claim)` if a claim meets
    /// another intent's claim. A settlement that meets another intent's claim is
    /// `Store(Corrupt)`: a seat's claim only changes with its own intent's writes.
    async fn transition(&self, request: &TransitionRequest) -> Result<Intent, TransitionError>;

    /// One page of the intent's history: one record per write of it (its creation, every
    /// transition), in version order, each written by that very write or transaction. The page
    /// holds the records after version `after` (from the first when `None`), at most `size` of
    /// them; its cursor is the last version when later records exist. Empty for an unknown
    /// intent. One bounded `Query` (`size + 1` items).
    async fn history(
        &self,
        id: &IntentId,
        after: Option<u64>,
        size: PageSize,
    ) -> Result<Page<TransitionRecord, u64>, StoreError>;

    /// The seat's claim, if an unsettled attempt has it.
    async fn seat_claim(&self, seat_id: &SeatId) -> Result<Option<SeatClaim>, StoreError>;

    /// Non-terminal intents with `due_at <= now`, oldest first (ties in any order), at most
    /// `limit` (none for 0). May lag the items slightly (a GSI is eventually consistent): the
    /// reaper re-checks each intent's own fields and every write it makes is conditional.
    async fn due_intents(&self, now: Millis, limit: usize) -> Result<Vec<Intent>, StoreError>;

    /// The seat's suppression record if it is still in force at `now`.
    async fn suppression(
        &self,
        seat_id: &SeatId,
        now: Millis,
    ) -> Result<Option<Suppression>, StoreError>;

    /// The seat's latest suppression record, in force or not (whom this system last won the
    /// seat for: [`Suppression::was_won_for`]); `None` if none was ever written. A strongly
    /// consistent read: the record is written by the settlement that released the seat's claim,
    /// and the attempt asking has claimed the seat now, so it sees that settlement's write.
    async fn last_taken(&self, seat_id: &SeatId) -> Result<Option<Suppression>, StoreError>;
}

/// Each user's credential for the upstream system.
#[async_trait]
pub trait Credentials: Send + Sync {
    /// Replaces the user's credential.
    async fn put_credential(&self, user_id: &UserId, credential: &Secret)
    -> Result<(), StoreError>;

    async fn credential(&self, user_id: &UserId) -> Result<Option<Secret>, StoreError>;
}
