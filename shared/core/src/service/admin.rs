//! The admin use cases behind the `admin` claim: what happened to an intent (its consent and
//! every transition, from the history each write recorded), where a seat stands (its hold, its
//! suppression, its last reading, the intent behind them, the seat queue's depth), both queues'
//! depths with their dead letters, dead letters moved back, and one reaper pass on demand.
//!
//! Read-only except two levers, neither of which decides anything itself:
//! - `reconcile` is the scheduled reaper's own pass (run in this process, or by invoking the
//!   reaper function on AWS): an operator running it early settles nothing the schedule would
//!   not have, and every write it makes is as conditional as the schedule's;
//! - `redrive` moves dead-lettered messages back to their queues, each once (the adapter's
//!   contract); a moved message is worked as any delivery is, so the intent's version still
//!   decides whether there is anything left to do.

use super::{Reaper, ReaperReport, with_retry};
use crate::domain::{
    ConsentRecord, Intent, IntentId, Millis, PageSize, ReadKey, Reading, SeatClaim, SeatId,
    Suppression, TransitionRecord,
};
use crate::ports::{
    Clock, Intents, OperatorLeases, QueueAdmin, QueueDepth, QueueDepths, QueueError, Readings,
    ReaperPass, ReaperPassError, Redriven, StoreError,
};
use std::sync::Arc;
use thiserror::Error;

/// How many due intents an admin reaper pass takes: the scheduled pass's limit.
pub const RECONCILE_LIMIT: usize = super::reaper::PASS_LIMIT;

/// Dead letters one redrive moves back, per queue: few enough that the call ends well inside
/// the API function's 10 s timeout on SQS (ten messages take three round trips: receive, send,
/// delete), so it can say `more` rather than be cut off. Call again for the rest.
pub const REDRIVE_LIMIT: usize = 300;

/// The redrive's operator lease: longer than any redrive call lives (the API function's timeout),
/// so a second redrive never overlaps a first that is still running, and short enough that one
/// whose process died is forgotten within a minute.
pub const REDRIVE_LEASE: std::time::Duration = std::time::Duration::from_secs(60);

/// The redrive lease's name in the store.
pub const REDRIVE_LEASE_NAME: &str = "dead-letter-redrive";

#[derive(Debug, Error)]
pub enum AdminIntentError {
    #[error("no such intent")]
    NotFound,
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Debug, Error)]
pub enum AdminSeatError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(#[from] QueueError),
}

#[derive(Debug, Error)]
pub enum AdminQueuesError {
    /// This deployment was not given the queues (their URLs are not configured).
    #[error("the queues are not reachable from here")]
    NotConfigured,
    #[error(transparent)]
    Queue(#[from] QueueError),
}

#[derive(Debug, Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The reaper function could not be invoked, or its pass failed.
    #[error("{0}")]
    Unavailable(String),
}

impl From<ReaperPassError> for ReconcileError {
    fn from(e: ReaperPassError) -> Self {
        match e {
            ReaperPassError::Store(s) => ReconcileError::Store(s),
            ReaperPassError::Unavailable(m) => ReconcileError::Unavailable(m),
        }
    }
}

#[derive(Debug, Error)]
pub enum RedriveError {
    /// This deployment was not given the queues (their URLs are not configured).
    #[error("the queues are not reachable from here")]
    NotConfigured,
    /// Another redrive holds the lease: it is moving the dead letters now.
    #[error("another redrive is running; retry when it is done")]
    InProgress { retry_after: std::time::Duration },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(#[from] QueueError),
}

/// An intent as an operator sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentAudit {
    pub intent: Intent,
    pub consent: Option<ConsentRecord>,
    /// One page of the intent's writes, in version order.
    pub history: Vec<TransitionRecord>,
    /// The last version on this page when later writes exist: the next page's cursor.
    pub next: Option<u64>,
}

/// A seat as an operator sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeatState {
    pub seat_id: SeatId,
    /// The unsettled attempt's claim on the seat, if any.
    pub claim: Option<SeatClaim>,
    /// The suppression in force, if any.
    pub suppression: Option<Suppression>,
    /// The shared seat reading (what the upstream or this system last said).
    pub reading: Option<Reading>,
    /// The intent behind the claim, or else behind the suppression: the seat's last outcome.
    pub last_intent: Option<Intent>,
    /// The seat queue's depth (the whole queue: SQS counts no message group apart), when this
    /// deployment has the queue.
    pub queue: Option<QueueDepth>,
}

pub struct AdminService {
    intents: Arc<dyn Intents>,
    readings: Arc<dyn Readings>,
    leases: Arc<dyn OperatorLeases>,
    clock: Arc<dyn Clock>,
    random: Arc<dyn crate::ports::Random>,
    ids: Arc<dyn crate::ports::Ids>,
    reaper: Arc<dyn ReaperPass>,
    queues: Option<Arc<dyn QueueAdmin>>,
}

impl AdminService {
    pub(crate) fn new(services: &super::Services) -> Self {
        let ports = services.ports();
        AdminService {
            intents: ports.intents.clone(),
            readings: ports.readings.clone(),
            leases: ports.leases.clone(),
            clock: ports.clock.clone(),
            random: ports.random.clone(),
            ids: ports.ids.clone(),
            reaper: match &ports.reaper_pass {
                Some(pass) => pass.clone(),
                None => Arc::new(services.reaper()),
            },
            queues: ports.queue_admin.clone(),
        }
    }

    /// How many history records one page of `GET /admin/intents/{id}` holds.
    pub const HISTORY_PAGE: PageSize = match PageSize::new(50) {
        Some(size) => size,
        None => panic!("page size out of bounds"),
    };

    /// The intent, its consent and the page of its history after version `after`.
    pub async fn intent(
        &self,
        id: &IntentId,
        after: Option<u64>,
    ) -> Result<IntentAudit, AdminIntentError> {
        let intent = with_retry(&*self.random, || self.intents.get_intent(id))
            .await?
            .ok_or(AdminIntentError::NotFound)?;
        let consent = with_retry(&*self.random, || self.intents.get_consent(id)).await?;
        let page = with_retry(&*self.random, || {
            self.intents.history(id, after, Self::HISTORY_PAGE)
        })
        .await?;
        Ok(IntentAudit {
            intent,
            consent,
            history: page.items,
            next: page.next,
        })
    }

    pub async fn seat(&self, seat_id: &SeatId) -> Result<SeatState, AdminSeatError> {
        let now: Millis = self.clock.now();
        let claim = with_retry(&*self.random, || self.intents.seat_claim(seat_id)).await?;
        let suppression =
            with_retry(&*self.random, || self.intents.suppression(seat_id, now)).await?;
        let key = ReadKey::Seat(seat_id.clone());
        let reading = with_retry(&*self.random, || self.readings.entry(&key))
            .await?
            .and_then(|e| e.reading);
        let behind = claim
            .as_ref()
            .map(|h| &h.intent_id)
            .or(suppression.as_ref().map(|s| &s.intent_id));
        let last_intent = match behind {
            Some(id) => with_retry(&*self.random, || self.intents.get_intent(id)).await?,
            None => None,
        };
        let queue = match &self.queues {
            Some(queues) => Some(queues.depths().await?.seat_messages),
            None => None,
        };
        Ok(SeatState {
            seat_id: seat_id.clone(),
            claim,
            suppression,
            reading,
            last_intent,
            queue,
        })
    }

    /// Both queues' depths, dead letters included: where an operator sees a webhook delivery
    /// that ran out of attempts (and a seat message that did) before redriving it.
    pub async fn queues(&self) -> Result<QueueDepths, AdminQueuesError> {
        let queues = self
            .queues
            .as_ref()
            .ok_or(AdminQueuesError::NotConfigured)?;
        Ok(queues.depths().await?)
    }

    pub async fn reconcile(&self) -> Result<ReaperReport, ReconcileError> {
        Ok(self.reaper.run_pass().await?)
    }

    /// Moves up to [`REDRIVE_LIMIT`] dead letters of each queue back, under the redrive lease:
    /// one redrive at a time per deployment, so no message is received by two at once (which a
    /// standard SQS queue may do, and which would move it twice).
    pub async fn redrive(&self) -> Result<Redriven, RedriveError> {
        let queues = self.queues.as_ref().ok_or(RedriveError::NotConfigured)?;
        let holder = self.ids.next_uuid().to_string();
        let now = self.clock.now();
        let until = now.plus(REDRIVE_LEASE);
        let taken = with_retry(&*self.random, || {
            self.leases
                .take_lease(REDRIVE_LEASE_NAME, &holder, now, until)
        })
        .await?;
        if !taken {
            return Err(RedriveError::InProgress {
                retry_after: std::time::Duration::from_secs(5),
            });
        }
        let moved = queues.redrive(REDRIVE_LIMIT).await;
        // Released whatever the redrive did; a release that fails leaves a lease that ends.
        if let Err(e) = with_retry(&*self.random, || {
            self.leases.release_lease(REDRIVE_LEASE_NAME, &holder)
        })
        .await
        {
            tracing::warn!(error = %e, "the redrive lease was not released; it ends by itself");
        }
        let moved = moved?;
        tracing::info!(
            seat_messages = moved.seat_messages,
            webhook_deliveries = moved.webhook_deliveries,
            more = moved.more,
            "dead letters redriven"
        );
        Ok(moved)
    }
}

/// The scheduled pass's own code, in this process.
#[async_trait::async_trait]
impl ReaperPass for Reaper {
    async fn run_pass(&self) -> Result<ReaperReport, ReaperPassError> {
        Ok(self.run_once(RECONCILE_LIMIT).await?)
    }
}
