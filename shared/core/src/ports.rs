//! Ports: the capabilities the services need, as small traits.
//!
//! Every store method is one DynamoDB request: a conditional `PutItem`/`UpdateItem`, one
//! `TransactWriteItems`, a `GetItem` or a `Query`. That shape is the contract: an adapter may not
//! implement a write as "read, decide, write" across requests, because two workers interleaving
//! there is exactly the double-reservation this system exists to prevent. (The embedded adapter
//! may read and write inside one SQLite transaction, which is atomic in the same way.)
//!
//! Each method's doc says which errors an implementation must return; the contract suite in
//! `seatgate_testkit::contract` checks them for every adapter.

use crate::domain::{
    Action, ActionId, BreakerState, CacheEntry, ConsentRecord, Hold, Intent, IntentId, Millis,
    Page, PageSize, RateWindow, ReadFailure, ReadKey, Reading, RefreshLease, RoomId, RouteHolds,
    SeatAvailability, SeatId, SeatMessage, Secret, Suppression, TransitionRecord,
    TransitionRequest, UpstreamRoute, UserId,
};
use async_trait::async_trait;
use thiserror::Error;

mod wake_ups;
pub use wake_ups::{MAX_WAKE_DELAY, WakeUps};

/// Infrastructure failures of a store. Never carries item contents or credentials.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// The backend refused for load (DynamoDB throttling). Safe to retry the same request.
    #[error("store throttled the request")]
    Throttled,
    /// A concurrent transaction touched the same items (DynamoDB `TransactionConflict`, SQLite
    /// `SQLITE_BUSY`). Safe to retry the same request.
    #[error("store transaction conflicted with another")]
    TransactionConflict,
    /// Anything else: unreachable, misconfigured, timed out.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// An item that does not decode into the domain.
    #[error("corrupt item: {0}")]
    Corrupt(String),
}

impl StoreError {
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            StoreError::Throttled | StoreError::TransactionConflict
        )
    }
}

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
    /// A claim whose intent was claimable, refused because another intent's attempt holds the
    /// seat (until that attempt is settled); the hold the write saw.
    #[error("seat {} is held by intent {}", .0.seat_id, .0.intent_id)]
    SeatHeld(Hold),
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

    /// The intents stored under up to [`MAX_BATCH_READ`] ids, in any order, unknown ids left
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
    /// seat's hold or writes a suppression, with the semantics of [`Intent::apply`] for the
    /// intent and [`TransitionRequest::hold_effect`] for the hold: a claim also requires the seat
    /// free or held by this intent and then holds it; a settlement releases this intent's hold.
    /// Returns the new state. Errors, in this order: `NotFound` if the intent does not exist,
    /// `Refused(current)` if the intent's condition fails, `SeatHeld(hold)` if a claim meets
    /// another intent's hold. A settlement that meets another intent's hold is
    /// `Store(Corrupt)`: holds only change with their own intent's writes.
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

    /// The seat's hold, if an unsettled attempt holds it.
    async fn hold(&self, seat_id: &SeatId) -> Result<Option<Hold>, StoreError>;

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
    /// consistent read: the record is written by the settlement that released the seat's hold,
    /// and the attempt asking holds the seat now, so it sees that settlement's write.
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

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum QueueError {
    #[error("queue throttled the request")]
    Throttled,
    #[error("queue unavailable: {0}")]
    Unavailable(String),
}

/// Sending to the per-seat FIFO queue.
#[async_trait]
pub trait SeatQueue: Send + Sync {
    /// Sends with `MessageGroupId = seat id` and `MessageDeduplicationId = intent id + version`.
    /// A second send with the same dedup id within the dedup window must be accepted and dropped.
    async fn send(&self, message: &SeatMessage) -> Result<(), QueueError>;
}

/// Handing received seat-queue messages back for later. The worker does it with the messages of a
/// seat another attempt holds (or of a group the upstream asked to pause), so they return when
/// the hold's settlement is next due rather than after the whole visibility timeout; each return
/// still counts towards the queue's max receive count.
#[async_trait]
pub trait HandBack: Send + Sync {
    /// Makes each received message (by receipt) visible again `after` from now (SQS
    /// `ChangeMessageVisibility`). A receipt that names no in-flight message any more is
    /// ignored; other failures are `QueueError`s, and the message then returns after its
    /// visibility timeout anyway.
    async fn hand_back(
        &self,
        receipts: &[String],
        after: std::time::Duration,
    ) -> Result<(), QueueError>;
}

/// A received message, as the Lambda service would hand it to the worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub message_id: String,
    pub receipt: String,
    pub body: String,
    pub group_id: String,
    pub receive_count: u32,
}

/// Receiving from the seat queue: what the local runner uses to play the SQS event source
/// mapping. (On AWS the Lambda service does this.)
#[async_trait]
pub trait QueueConsumer: Send + Sync {
    /// Up to `max` messages, in group order. While a message of a group is in flight (received,
    /// not deleted, visibility not expired) no later message of that group is returned. A
    /// message received more than the queue's max receive count goes to the dead-letter queue
    /// instead.
    async fn receive(&self, max: usize) -> Result<Vec<Delivery>, QueueError>;

    /// Deletes processed messages.
    async fn delete(&self, receipts: &[String]) -> Result<(), QueueError>;
}

/// A user's current charge in the upstream system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    pub charge_id: String,
    pub seat_id: SeatId,
}

/// Why an upstream call brought no definite answer: the upstream unwell, or the way to it.
/// Each of these counts as a failure for the circuit breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum CallFailure {
    /// No whole answer within the upstream timeout.
    #[error("timed out")]
    Timeout,
    /// The connection failed, or dropped before a whole answer came.
    #[error("connection failed or dropped")]
    Dropped,
    /// An answer whose body could not be read (cut short, not the expected shape).
    #[error("unreadable answer")]
    Unreadable,
    /// A status that says the upstream failed (500, 502, 504, a 503 that gave no time, or one
    /// this client does not expect on that route).
    #[error("upstream answered {0}")]
    Status(u16),
}

impl CallFailure {
    /// The `outcome` of [`crate::metrics::Metric::UpstreamCalls`] for it.
    pub fn as_outcome(self) -> &'static str {
        match self {
            CallFailure::Timeout => "timeout",
            CallFailure::Dropped => "dropped",
            CallFailure::Unreadable => "unreadable",
            CallFailure::Status(_) => "failed",
        }
    }
}

/// What one reserve call told us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReserveOutcome {
    Reserved(Charge),
    /// The upstream says the seat is taken (`409 {"error":"seat_taken"}`).
    SeatTaken,
    /// The upstream says the user already holds a charge (`409 {"error":"already_charged"}`,
    /// one charge per user): nothing was written, and the seat is still free for others.
    AlreadyCharged,
    /// The upstream refused for load (429, 503): nothing was written; it asked to be left
    /// alone for `retry_after` when it said so. Also what a reserve held back by the breaker or
    /// a hold answers, without being sent.
    Busy {
        retry_after: Option<std::time::Duration>,
    },
    /// The upstream refused the credential (401/403).
    CredentialRejected,
    /// A definite refusal that is not about the seat or the credential (other 4xx, a 409 with
    /// another code): nothing was written upstream.
    Refused(u16),
    /// No definite answer (timeout, dropped connection, 500, 502, 504, a 201 whose body was
    /// lost): the write may or may not have happened, so it must never be sent again; a charge
    /// read settles it.
    Unknown(CallFailure),
}

impl ReserveOutcome {
    /// The answer as the `outcome` of [`crate::metrics::Metric::UpstreamCalls`] and
    /// [`crate::metrics::Metric::ReservePosts`]: ok, taken, busy, refused (a definite no that
    /// wrote nothing), or the failure's own (timeout, dropped, unreadable, failed), any of which
    /// may hide a write.
    pub fn as_outcome(&self) -> &'static str {
        match self {
            ReserveOutcome::Reserved(_) => "ok",
            ReserveOutcome::SeatTaken => "taken",
            ReserveOutcome::Busy { .. } => "busy",
            ReserveOutcome::AlreadyCharged
            | ReserveOutcome::CredentialRejected
            | ReserveOutcome::Refused(_) => "refused",
            ReserveOutcome::Unknown(f) => f.as_outcome(),
        }
    }
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ChargeReadError {
    #[error("upstream rejected the credential")]
    CredentialRejected,
    /// A definite refusal that is neither the credential nor "no charge" (another 4xx).
    #[error("upstream refused the read ({0})")]
    Refused(u16),
    /// The upstream said "not now" (429, or 503 with a `Retry-After`).
    #[error("upstream busy")]
    Busy {
        retry_after: Option<std::time::Duration>,
    },
    #[error("upstream unavailable: {0}")]
    Failed(CallFailure),
    /// Not sent: the circuit breaker is open, or a `Retry-After` holds the route, until then.
    #[error("upstream call held back")]
    HeldBack(Millis),
}

/// Why a seat or room read has no answer.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// The upstream knows no such room (`404 room_not_found`).
    #[error("no such room")]
    NoSuchRoom,
    /// A definite refusal (a 4xx that is not "no such room"): the upstream is working.
    #[error("upstream refused the read ({0})")]
    Refused(u16),
    /// The upstream said "not now" (429, or 503 with a `Retry-After`).
    #[error("upstream busy")]
    Busy {
        retry_after: Option<std::time::Duration>,
    },
    /// A failure the breaker counts: 5xx, a timeout, a lost or undecodable answer.
    #[error("upstream unavailable: {0}")]
    Failed(CallFailure),
    /// Not sent: the circuit breaker is open, or a `Retry-After` holds the route, until then.
    #[error("upstream call held back")]
    HeldBack(Millis),
}

/// The upstream seat system.
#[async_trait]
pub trait Upstream: Send + Sync {
    /// One reserve write. Never retried by the implementation.
    async fn reserve(&self, credential: &Secret, seat_id: &SeatId) -> ReserveOutcome;

    /// The user's current charge, `None` if they hold none. Safe to repeat.
    async fn current_charge(&self, credential: &Secret) -> Result<Option<Charge>, ChargeReadError>;

    /// Whether the seat is free now (`GET /api/seats/{id}`). Safe to repeat; needs no
    /// credential.
    async fn seat(&self, seat_id: &SeatId) -> Result<bool, ReadError>;

    /// A room's seats and whether each is free, in one call. `NoSuchRoom` for an unknown room.
    async fn room(&self, room_id: &RoomId) -> Result<Vec<SeatAvailability>, ReadError>;
}

/// The shared half of the seat-read cache: one entry per key, read and written by every
/// instance (see [`crate::domain::reading`] for the rules both adapters apply).
#[async_trait]
pub trait Readings: Send + Sync {
    /// The entry for `key`, if any. One strongly consistent `GetItem`.
    async fn entry(&self, key: &ReadKey) -> Result<Option<CacheEntry>, StoreError>;

    /// The entries for up to [`MAX_BATCH_READ`] keys, in any order, missing keys left out
    /// (one `BatchGetItem`). More keys is `StoreError::Unavailable`.
    async fn entries(&self, keys: &[ReadKey]) -> Result<Vec<(ReadKey, CacheEntry)>, StoreError>;

    /// Takes the refresh lease on `key` for `lease.holder` if [`CacheEntry::may_lease`] allows
    /// it (one conditional write); `Ok(false)` if another holder has it or the reading is fresh.
    async fn lease_refresh(
        &self,
        key: &ReadKey,
        lease: &RefreshLease,
        stale_before: Millis,
    ) -> Result<bool, StoreError>;

    /// Records `reading` if [`CacheEntry::may_record`] allows it (one conditional write), leaving
    /// any lease in place and clearing any failure; `Ok(false)` if a newer reading is stored.
    async fn record(&self, reading: &Reading) -> Result<bool, StoreError>;

    /// Records that a refresh of `key` failed, if [`CacheEntry::may_record_failure`] allows it
    /// (one conditional write), leaving the reading and any lease in place; `Ok(false)` if a
    /// reading from a later call, or a longer failure, is stored.
    async fn record_failure(
        &self,
        key: &ReadKey,
        failure: &ReadFailure,
    ) -> Result<bool, StoreError>;
}

/// Most keys one batch read takes ([`Readings::entries`], [`Intents::intents`]): DynamoDB's
/// `BatchGetItem` limit.
pub const MAX_BATCH_READ: usize = 100;

/// What every backend answers a batch read of `len` keys: `Unavailable` past
/// [`MAX_BATCH_READ`], the same words everywhere.
pub fn within_batch_read(len: usize) -> Result<(), StoreError> {
    if len > MAX_BATCH_READ {
        return Err(StoreError::Unavailable(format!(
            "at most {MAX_BATCH_READ} keys per batch read"
        )));
    }
    Ok(())
}

/// Where the upstream's shared protection lives: the circuit breaker's state (one item) and
/// the routes' `Retry-After` holds (one item, [`crate::domain::upstream_hold`]).
#[async_trait]
pub trait BreakerStates: Send + Sync {
    /// The breaker's state; a breaker never written is [`BreakerState::closed`].
    async fn breaker(&self) -> Result<BreakerState, StoreError>;

    /// Replaces the state with `next` if the stored generation is still `next.generation - 1`
    /// (generation 0: never written). One conditional write; `Ok(false)` if another instance
    /// changed it first.
    async fn swap_breaker(&self, next: &BreakerState) -> Result<bool, StoreError>;

    /// Every route's hold; none ever written is [`RouteHolds::default`]. One strongly
    /// consistent read.
    async fn holds(&self) -> Result<RouteHolds, StoreError>;

    /// Holds `route` until `until` if [`RouteHolds::may_extend`] allows it (one conditional
    /// write of that route alone); `Ok(false)` if a hold as long or longer is stored.
    async fn hold(&self, route: UpstreamRoute, until: Millis) -> Result<bool, StoreError>;
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("subscriber delivery failed: {0}")]
pub struct PublishError(pub String);

/// The queue of terminal-intent events on their way to subscribers: a standard SQS queue with
/// its dead-letter queue on AWS, a table in the embedded backend. The relay only enqueues, and a
/// delivery consumer posts, so a slow or dead subscriber never delays relaying intents.
#[async_trait]
pub trait EventQueue: Send + Sync {
    /// Enqueues one event. Delivery is at least once: a replayed outbox record may enqueue the
    /// same event again, and receivers drop duplicates by its `event_id`.
    async fn enqueue(&self, event: &crate::domain::Event) -> Result<(), QueueError>;
}

/// Subscribers of events (webhooks): an intent's terminal state, an offer made or lapsed.
/// Delivery is at least once.
#[async_trait]
pub trait Subscribers: Send + Sync {
    async fn publish(&self, event: &crate::domain::Event) -> Result<(), PublishError>;
}

/// How many messages one queue and its dead-letter queue hold now. On SQS these are the
/// queue's approximate counts (`ApproximateNumberOfMessages*`); SQS counts no message group
/// apart, so a seat's own backlog is not among them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueueDepth {
    /// Receivable now (a message whose visibility ran out counts here again).
    pub ready: u64,
    /// Received and not yet deleted or returned.
    pub in_flight: u64,
    /// In the dead-letter queue.
    pub dead: u64,
}

/// The seat queue's and the event queue's depths.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueueDepths {
    pub seat_messages: QueueDepth,
    pub webhook_deliveries: QueueDepth,
}

/// What one redrive moved back to the source queues.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Redriven {
    pub seat_messages: u64,
    pub webhook_deliveries: u64,
    /// The limit stopped the call with dead letters left: call again.
    pub more: bool,
}

/// The operator's hold on the two queues: their depths, and moving dead letters back.
#[async_trait]
pub trait QueueAdmin: Send + Sync {
    /// Both queues' depths. Failures are `QueueError`s.
    async fn depths(&self) -> Result<QueueDepths, QueueError>;

    /// Moves up to `limit` dead-lettered messages of each queue to the tail of its source
    /// queue, each with a fresh receive count, and counts each once. A call that fails part way
    /// leaves what it did not move in the dead-letter queue, to be moved by the next call (a
    /// failure is a `QueueError`; what was moved before it stays moved). Callers run one call
    /// at a time (the admin service holds an [`OperatorLeases`] lease around it): SQS may hand
    /// one message of a standard queue to two receivers at once, so two overlapping calls could
    /// both move it. A moved seat message is an ordinary delivery: its intent's version decides
    /// whether there is still work, so moving one whose intent has since settled is harmless.
    async fn redrive(&self, limit: usize) -> Result<Redriven, QueueError>;
}

/// Why a reaper pass run on demand has no report.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ReaperPassError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The pass could not be run, or ran and failed, where it runs (the reaper function).
    #[error("reaper unavailable: {0}")]
    Unavailable(String),
}

/// What one reaper pass did: the answer of a [`ReaperPass`] (kept here, with the port, so the
/// ports need nothing of the services).
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReaperReport {
    pub examined: usize,
    pub settled_succeeded: usize,
    pub settled_failed: usize,
    pub woken: usize,
    pub expired: usize,
    pub requeued: usize,
    pub given_up: usize,
    /// Due waits whose seat still read taken: looked at again later.
    pub rechecked: usize,
    /// RESERVING attempts whose charge could not be read: due again later, seat still held.
    pub postponed: usize,
    /// Attempts still unsettled `max_unsettled` after their lease ended (each also postponed or
    /// settled): the alarm's count.
    pub overdue: usize,
    /// Left for the next pass (store errors, lost races, not yet due).
    pub deferred: usize,
    /// Due intents this pass did not start on because its budget ran out.
    pub left: usize,
    /// Checkout holds past their deadline this pass gave back.
    #[serde(default)]
    pub holds_lapsed: usize,
    /// Due checkout holds left for the next pass (out of budget).
    #[serde(default)]
    pub holds_left: usize,
}

impl ReaperReport {
    /// Adds `other`'s counts to these (one invocation's passes as one report); what a later
    /// pass left is what the invocation left.
    pub fn absorb(&mut self, other: &ReaperReport) {
        self.examined += other.examined;
        self.settled_succeeded += other.settled_succeeded;
        self.settled_failed += other.settled_failed;
        self.woken += other.woken;
        self.expired += other.expired;
        self.requeued += other.requeued;
        self.given_up += other.given_up;
        self.rechecked += other.rechecked;
        self.postponed += other.postponed;
        self.overdue += other.overdue;
        self.deferred += other.deferred;
        self.left = other.left;
        self.holds_lapsed += other.holds_lapsed;
        self.holds_left = other.holds_left;
    }
}

/// One reaper pass, wherever the reaper runs: in this process (the local runner, the tests),
/// or in the reaper function (on AWS, so the API's role needs none of the reaper's grants: the
/// due index, opening sealed credentials).
#[async_trait]
pub trait ReaperPass: Send + Sync {
    async fn run_pass(&self) -> Result<ReaperReport, ReaperPassError>;
}

/// Where time comes from; tests drive a manual clock, the simulator a simulated one. The
/// services read time only here (and wait only through `tokio::time`, which a simulation runs
/// paused, so the two agree).
pub trait Clock: Send + Sync {
    fn now(&self) -> Millis;
}

/// The randomness the services draw on: the shard a booking starts at, the jitter of backoffs
/// and of wait re-checks. Production draws from the OS; tests and the simulator from a seed, so
/// a run is a function of its seed. An implementation never fails and never blocks.
pub trait Random: Send + Sync {
    /// A uniform draw from `0..=max`.
    fn up_to(&self, max: u64) -> u64;
}

/// Where new ids come from: actions, intents, bookings, idempotency tokens and the names of
/// this instance's lease holders. Ids must be unique across every instance sharing a store and
/// time-ordered like UUIDv7 (intent shards and index keys derive from them); production uses
/// UUIDv7, the simulator a seeded sequence of the same shape.
pub trait Ids: Send + Sync {
    fn next_uuid(&self) -> uuid::Uuid;
}

/// Why a booking write was refused.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum BookRefusal {
    /// The shard has fewer seats than asked; how many it had (from the item the failed
    /// condition saw).
    #[error("the shard has {available} seats left")]
    ShardShort { available: u32 },
    /// The user would hold more than the flight's `max_per_user`.
    #[error("the per-user limit would be passed")]
    LimitReached,
    /// The idempotency record is no longer this request's (it expired and another request took
    /// it over): nothing was written.
    #[error("the idempotency record moved on")]
    RequestTakenOver,
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CancelBookingRefusal {
    /// No such booking of this user (another user's is indistinguishable on purpose).
    #[error("no such booking")]
    NotFound,
    /// Cancelled before: the booking as it is.
    #[error("already cancelled")]
    AlreadyCancelled(Box<crate::domain::Booking>),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<crate::domain::CancelRefusal> for CancelBookingRefusal {
    fn from(refusal: crate::domain::CancelRefusal) -> Self {
        match refusal {
            crate::domain::CancelRefusal::NotFound => CancelBookingRefusal::NotFound,
            crate::domain::CancelRefusal::AlreadyCancelled(b) => {
                CancelBookingRefusal::AlreadyCancelled(b)
            }
        }
    }
}

impl From<crate::domain::BookingRefusal> for BookRefusal {
    fn from(refusal: crate::domain::BookingRefusal) -> Self {
        match refusal {
            crate::domain::BookingRefusal::LimitReached => BookRefusal::LimitReached,
            crate::domain::BookingRefusal::ShardShort { available } => {
                BookRefusal::ShardShort { available }
            }
        }
    }
}

/// Why a checkout hold's creation was refused.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CreateHoldRefusal {
    /// The shard has fewer seats than asked; how many it had.
    #[error("the shard has {available} seats left")]
    ShardShort { available: u32 },
    /// The user would hold and own more than the flight's `max_per_user`.
    #[error("the per-user limit would be passed")]
    LimitReached,
    /// The user already holds seats on this flight (one live hold per user per flight).
    #[error("the user already holds seats on this flight")]
    HoldExists,
    /// The idempotency record is no longer this request's: nothing was written.
    #[error("the idempotency record moved on")]
    RequestTakenOver,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<crate::domain::BookingRefusal> for CreateHoldRefusal {
    fn from(refusal: crate::domain::BookingRefusal) -> Self {
        match refusal {
            crate::domain::BookingRefusal::LimitReached => CreateHoldRefusal::LimitReached,
            crate::domain::BookingRefusal::ShardShort { available } => {
                CreateHoldRefusal::ShardShort { available }
            }
        }
    }
}

/// Why [`CheckoutHolds::resolve_hold`] wrote nothing.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ResolveHoldError {
    /// The hold rule's refusal ([`crate::domain::CheckoutHold::resolve`]).
    #[error(transparent)]
    Refused(#[from] crate::domain::HoldRefusal),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Checkout holds: seats taken for a bounded time, then confirmed into a booking or given back,
/// once. Every method is one conditional write or one transaction; the hold rule
/// ([`crate::domain::CheckoutHold::resolve`]) decides, the store's conditions enforce it.
#[async_trait]
pub trait CheckoutHolds: Send + Sync {
    /// One transaction: shard `hold.shard`'s `available` down and `held` up by the head count
    /// (else `ShardShort` with what it had); the hold put (an existing id is
    /// `Store(Unavailable)`); the user's count on the flight up within `max_per_user` when
    /// given (else `LimitReached`); the user's one live hold on the flight set to this one
    /// (else `HoldExists`); with `answer_to`, that in-progress idempotency record completed with
    /// [`BookingAnswer::Held`](crate::domain::BookingAnswer::Held) (else `RequestTakenOver`).
    /// Refusals checked in that order. The flight must exist.
    async fn create_hold(
        &self,
        hold: &crate::domain::CheckoutHold,
        max_per_user: Option<u32>,
        answer_to: Option<(&crate::domain::IdempotencyKey, &str)>,
    ) -> Result<(), CreateHoldRefusal>;

    /// The user's hold under `id`; `None` if unknown (or another user's).
    async fn hold(
        &self,
        user: &UserId,
        id: &crate::domain::HoldId,
    ) -> Result<Option<crate::domain::CheckoutHold>, StoreError>;

    /// `action` on hold `id` of `user` on `flight` at `now` (the reaper lapses in the hold's
    /// owner's name, from [`CheckoutHolds::due_holds`]), as the hold
    /// rule decides, in one transaction conditioned on the stored hold being `HELD` and on the
    /// same side of its deadline as the rule saw it. What it writes besides the hold:
    /// - `CONFIRMED`: the shard's `held` down; the booking ([`CheckoutHold::booking`]) put; the
    ///   user's live hold cleared (their count stays: the seats are now booked).
    /// - `RELEASED` or `LAPSED`: the shard's `held` down and `available` up; the user's count
    ///   down (never below zero); the live hold cleared (an offer, which never took it, leaves
    ///   it be); the flight's sold-out mark removed; then the flight's waiting list served from
    ///   the seats now free on that shard ([`crate::domain::waitlist::serve`] over its first
    ///   entries): each served entry `OFFERED` with its offer, the offer's hold put (`HELD`, due
    ///   at the flight's offer lifetime), the shard's `available` down and `held` up by its head
    ///   count. All in the one transaction, so no booking can take returned seats while someone
    ///   whom they fit waits.
    /// - an extension: only the hold's `expires_at`.
    ///
    /// Refusals: `Refused` with the rule's answer for the hold as stored when the write lost.
    ///
    /// [`CheckoutHold::booking`]: crate::domain::CheckoutHold::booking
    async fn resolve_hold(
        &self,
        user: &UserId,
        flight: &crate::domain::FlightId,
        id: &crate::domain::HoldId,
        action: crate::domain::HoldAction,
        now: Millis,
    ) -> Result<crate::domain::CheckoutHold, ResolveHoldError>;

    /// One page of the user's holds (any flight, any status) in hold id order (UUIDv7, oldest
    /// first), after `after`, at most `size`. One bounded `Query`.
    async fn holds_of(
        &self,
        user: &UserId,
        after: Option<&crate::domain::HoldId>,
        size: PageSize,
    ) -> Result<Page<crate::domain::CheckoutHold, crate::domain::HoldId>, StoreError>;

    /// One page of `flight`'s holds in `status` (offers among them: an offer is a hold), in
    /// [`FlightHoldKey`](crate::domain::FlightHoldKey) order (the shard their seats came from,
    /// then hold id), after `after`, at most `size`: the operator's view of a flight's live holds
    /// and its lapses. Bounded: at most `size + 1` holds read, and on DynamoDB at most one
    /// `Query` a page per shard of the flight's (`flight.shards`) on its flight-side index.
    async fn flight_holds(
        &self,
        flight: &crate::domain::Flight,
        status: crate::domain::HoldStatus,
        after: Option<&crate::domain::FlightHoldKey>,
        size: PageSize,
    ) -> Result<Page<crate::domain::CheckoutHold, crate::domain::FlightHoldKey>, StoreError>;

    /// Holds still `HELD` whose deadline is at or before `now`, at most `limit`, soonest due
    /// first (within a due shard on DynamoDB): the reaper's work. A hold resolved since may
    /// still be listed; resolving it then answers `NotDue`.
    async fn due_holds(
        &self,
        now: Millis,
        limit: usize,
    ) -> Result<Vec<crate::domain::CheckoutHold>, StoreError>;
}

/// Why a waiting-list write ([`WaitingLists::join_waitlist`], [`WaitingLists::leave_waitlist`])
/// wrote nothing.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum WaitlistError {
    /// The waiting-list rule's refusal ([`crate::domain::WaitEntry::may_join`],
    /// [`crate::domain::WaitEntry::leave`]).
    #[error(transparent)]
    Refused(#[from] crate::domain::WaitRefusal),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A flight's waiting list at a glance, for the operator.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WaitlistSummary {
    /// Entries still `WAITING`.
    pub waiting: u64,
    /// The first of them, the next to be served.
    pub oldest: Option<crate::domain::WaitEntry>,
}

/// The waiting list. Serving it is not here: every return of seats (a hold's release or lapse in
/// [`CheckoutHolds::resolve_hold`], a cancel in [`Flights::cancel_booking`]) serves the list in
/// its own transaction, as those methods' docs say.
#[async_trait]
pub trait WaitingLists: Send + Sync {
    /// One transaction: `entry` (`WAITING`) put as the user's entry on its flight, under the
    /// conditions that no entry of the user on the flight is still `WAITING` (else `Refused(
    /// AlreadyWaiting)` with it) and that every shard of the flight has fewer than its head count
    /// available (else `Refused(SeatsAvailable)`): the join rule,
    /// [`crate::domain::WaitEntry::may_join`], whose `LimitReached` comes first. The shard
    /// conditions order the join with any return on the flight, so a return either sees the entry
    /// or the join sees the seats. With `max_per_user`, the entry is stored counted
    /// ([`crate::domain::WaitEntry::joining`]) and the user's count on the flight goes up by its
    /// head count in the same transaction, within the limit (else `Refused(LimitReached)`). The
    /// flight must exist.
    async fn join_waitlist(
        &self,
        entry: &crate::domain::WaitEntry,
        max_per_user: Option<u32>,
    ) -> Result<(), WaitlistError>;

    /// The user's entry `id` on `flight`; `None` if unknown, another user's, or replaced by the
    /// user's later entry on the flight.
    async fn wait_entry(
        &self,
        user: &UserId,
        flight: &crate::domain::FlightId,
        id: &crate::domain::EntryId,
    ) -> Result<Option<crate::domain::WaitEntry>, StoreError>;

    /// How many entries on `flight` are `WAITING` ahead of entry `id` in the list's order: its
    /// position is this plus one. Costs O(that count): on DynamoDB a `Query` of the list's keys up
    /// to it, 1 read unit per 4 KB of the items read.
    async fn waiting_ahead(
        &self,
        flight: &crate::domain::FlightId,
        id: &crate::domain::EntryId,
    ) -> Result<u64, StoreError>;

    /// One conditional write (a transaction when the entry was counted): the user's entry `id` on
    /// `flight` `WAITING -> LEFT` at `now`, as [`crate::domain::WaitEntry::leave`] decides (a
    /// repeat answers the left entry; `Refused(Offered)` once served, `Refused(NotFound)` when
    /// unknown), and a counted entry's seats taken off the user's count (never below zero).
    async fn leave_waitlist(
        &self,
        user: &UserId,
        flight: &crate::domain::FlightId,
        id: &crate::domain::EntryId,
        now: Millis,
    ) -> Result<crate::domain::WaitEntry, WaitlistError>;

    /// The list's length and its first entry (on DynamoDB, the list's gate item and one `Query`).
    async fn waitlist_summary(
        &self,
        flight: &crate::domain::FlightId,
    ) -> Result<WaitlistSummary, StoreError>;
}

/// What [`Flights::begin_request`] found under the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Begun {
    /// This request now owns the key (new, or taken over from an abandoned one).
    Started,
    /// Another request's record, as stored.
    Existing(crate::domain::IdempotencyRecord),
}

/// Flight options, their counted inventory, bookings and booking idempotency.
#[async_trait]
pub trait Flights: Send + Sync {
    /// One transaction: the flight item and one counter per shard at its share of the capacity.
    /// `Ok(false)` if the flight exists (nothing written).
    async fn create_flight(&self, flight: &crate::domain::Flight) -> Result<bool, StoreError>;

    /// The flight and every shard's count, in one `Query`; `None` if unknown.
    async fn inventory(
        &self,
        id: &crate::domain::FlightId,
    ) -> Result<Option<crate::domain::Inventory>, StoreError>;

    /// One transaction: shard `booking.shard` goes down by `booking.head_count` if it has that
    /// many (else `ShardShort`); the booking is put (an existing id is `Store(Unavailable)`);
    /// with `max_per_user`, the user's count on the flight goes up if it stays within (else
    /// `LimitReached`); with `answer_to`, that in-progress idempotency record (by its token) is
    /// completed with this booking as its answer (else `RequestTakenOver`). Refusals checked in
    /// that order. The flight must exist.
    async fn book(
        &self,
        booking: &crate::domain::Booking,
        max_per_user: Option<u32>,
        answer_to: Option<(&crate::domain::IdempotencyKey, &str)>,
    ) -> Result<(), BookRefusal>;

    /// Marks the flight sold out if every one of its `shards` is at zero: one transaction (a
    /// condition per shard, an update of the flight). `Ok(false)` if some shard has stock.
    async fn mark_sold_out(
        &self,
        id: &crate::domain::FlightId,
        shards: u32,
    ) -> Result<bool, StoreError>;

    /// One page of the user's bookings (any flight, any status) in booking id order (ids are
    /// UUIDv7, so oldest first): those after booking `after` (from the first when `None`), at
    /// most `size`; its cursor is the last booking id when later bookings exist. One bounded
    /// `Query` (`size + 1` items).
    async fn bookings_of(
        &self,
        user: &UserId,
        after: Option<&crate::domain::BookingId>,
        size: PageSize,
    ) -> Result<Page<crate::domain::Booking, crate::domain::BookingId>, StoreError>;

    /// One transaction: the user's booking on `flight` `BOOKED -> CANCELLED` at `now`, its seats
    /// back to its shard, the user's count on the flight down, the flight's sold-out mark
    /// removed, and the flight's waiting list served from the shard's free seats as a hold's
    /// return serves it ([`CheckoutHolds::resolve_hold`]). Returns the cancelled booking. Refusals: `NotFound` (no such booking of this
    /// user on this flight), `AlreadyCancelled`.
    async fn cancel_booking(
        &self,
        user: &UserId,
        flight: &crate::domain::FlightId,
        id: &crate::domain::BookingId,
        now: Millis,
    ) -> Result<crate::domain::Booking, CancelBookingRefusal>;

    /// Takes the idempotency key for a request (`record` in progress, with its token and expiry):
    /// one conditional put that applies if the key is new, or its record is abandoned (in
    /// progress past its expiry at `record.created_at`). Otherwise the stored record.
    async fn begin_request(
        &self,
        record: &crate::domain::IdempotencyRecord,
    ) -> Result<Begun, StoreError>;

    /// Stores `answer` on the user's record under `key` if it is still in progress under `token`
    /// (one conditional write); `Ok(false)` if not.
    async fn finish_request(
        &self,
        user: &UserId,
        key: &crate::domain::IdempotencyKey,
        token: &str,
        answer: &crate::domain::BookingAnswer,
    ) -> Result<bool, StoreError>;

    /// Deletes the record if it is still in progress under `token` (the request failed without
    /// an answer worth keeping, so a retry may start afresh). One conditional delete.
    async fn abandon_request(
        &self,
        user: &UserId,
        key: &crate::domain::IdempotencyKey,
        token: &str,
    ) -> Result<(), StoreError>;
}

/// Every store port at once: what one backend (the DynamoDB table, the embedded database, a
/// fault-injecting wrapper of either) provides.
pub trait Store:
    Actions
    + Intents
    + Credentials
    + Readings
    + BreakerStates
    + Flights
    + CheckoutHolds
    + WaitingLists
    + RateLimits
    + OperatorLeases
{
}

impl<
    S: Actions
        + Intents
        + Credentials
        + Readings
        + BreakerStates
        + Flights
        + CheckoutHolds
        + WaitingLists
        + RateLimits
        + OperatorLeases
        + ?Sized,
> Store for S
{
}

/// Leases on operator actions that must not run twice at once (a dead-letter redrive: SQS may
/// hand one message to two concurrent receivers of a standard queue, so two redrives at once
/// could both move it). One item per action name, taken and released by conditional writes;
/// a holder that dies leaves a lease that simply ends.
#[async_trait]
pub trait OperatorLeases: Send + Sync {
    /// Takes the lease `name` for `holder` until `until` if nobody holds it or its last holder's
    /// lease ended at or before `now` (one conditional write); `Ok(false)` if another holder's
    /// lease is still running.
    async fn take_lease(
        &self,
        name: &str,
        holder: &str,
        now: Millis,
        until: Millis,
    ) -> Result<bool, StoreError>;

    /// Ends the lease if `holder` still holds it (one conditional delete); a lease another
    /// holder took since is left alone, and that is not an error.
    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError>;
}

/// The per-user rate limit's counters ([`crate::domain::rate_limit`]).
#[async_trait]
pub trait RateLimits: Send + Sync {
    /// Takes one request from `window`'s budget of `limit` requests, in one conditional write:
    /// the window's counter is created at 1, or raised by 1 while it is below `limit`. `Ok(true)`
    /// if the request was counted, `Ok(false)` if the window's budget is spent (nothing was
    /// written). The counter must expire after `window.ends_at`. Errors: [`StoreError`] as for
    /// any write (`Throttled` and `TransactionConflict` may be retried).
    async fn take(&self, window: &RateWindow, limit: u32) -> Result<bool, StoreError>;
}
