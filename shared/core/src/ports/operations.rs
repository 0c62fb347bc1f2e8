//! What an operator and the fleet's housekeeping need: queue depths and redrive, the reaper's
//! pass and its report, and leases on operator actions that must not run twice at once.

use super::{QueueError, StoreError};
use crate::domain::Millis;
use async_trait::async_trait;
use thiserror::Error;

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
