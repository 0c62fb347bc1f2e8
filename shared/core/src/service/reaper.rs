//! The reaper: the scheduled pass that gives every non-terminal intent a path to an end.
//!
//! It queries the due index (`due_at <= now`) and, per intent:
//! - RESERVING past its lease + grace: the attempt can no longer be in flight (lease > worker
//!   timeout + upstream timeout + margin), so its outcome is settled by *reading* the user's
//!   current charge, never by sending the reserve again. Charge on this seat -> SUCCEEDED;
//!   none -> FAILED_UPSTREAM (a wait goes back to waiting); credential refused -> FAILED_AUTH;
//!   upstream unreadable -> left for the next pass.
//! - WAITING_FOR_SEAT past its deadline -> WAIT_EXPIRED; due -> a new version, which the relay
//!   enqueues.
//! - REQUESTED untouched for `requeue_after` (its message was lost or dead-lettered) -> a new
//!   version, enqueued again; after `max_requeues`, FAILED_UPSTREAM.
//!
//! Every action is one conditional write; a refusal means someone else moved the intent first.

use super::with_retry;
use crate::config::Timing;
use crate::domain::{Intent, IntentStatus, Millis, Outcome, Reason, Transition, TransitionRequest};
use crate::ports::{
    ChargeReadError, Clock, Credentials, Intents, StoreError, TransitionError, Upstream,
};
use futures::StreamExt;
use serde::Serialize;
use std::sync::Arc;
use tracing::{info, warn};

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct ReaperReport {
    pub examined: usize,
    pub settled_succeeded: usize,
    pub settled_failed: usize,
    pub woken: usize,
    pub expired: usize,
    pub requeued: usize,
    pub given_up: usize,
    /// Left for the next pass (upstream unreadable, store errors, lost races).
    pub deferred: usize,
}

enum Done {
    Succeeded,
    Failed,
    Woken,
    Expired,
    Requeued,
    GivenUp,
    Deferred,
}

pub struct Reaper {
    intents: Arc<dyn Intents>,
    credentials: Arc<dyn Credentials>,
    upstream: Arc<dyn Upstream>,
    clock: Arc<dyn Clock>,
    timing: Timing,
}

const CONCURRENCY: usize = 8;

impl Reaper {
    pub(crate) fn new(ports: &super::Ports, timing: &Timing) -> Self {
        Self {
            intents: ports.intents.clone(),
            credentials: ports.credentials.clone(),
            upstream: ports.upstream.clone(),
            clock: ports.clock.clone(),
            timing: timing.clone(),
        }
    }

    /// One pass over at most `limit` due intents.
    pub async fn run_once(&self, limit: usize) -> Result<ReaperReport, StoreError> {
        let now = self.clock.now();
        let due = with_retry(|| self.intents.due_intents(now, limit)).await?;
        let mut report = ReaperReport {
            examined: due.len(),
            ..ReaperReport::default()
        };
        // Collected first so the iterator's closure is not part of the future: keeps it `Send`.
        let passes: Vec<_> = due.iter().map(|i| self.reap(i, now)).collect();
        let outcomes: Vec<Done> = futures::stream::iter(passes)
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        for outcome in outcomes {
            match outcome {
                Done::Succeeded => report.settled_succeeded += 1,
                Done::Failed => report.settled_failed += 1,
                Done::Woken => report.woken += 1,
                Done::Expired => report.expired += 1,
                Done::Requeued => report.requeued += 1,
                Done::GivenUp => report.given_up += 1,
                Done::Deferred => report.deferred += 1,
            }
        }
        if report.examined > 0 {
            info!(?report, "reaper pass");
        }
        Ok(report)
    }

    async fn reap(&self, intent: &Intent, now: Millis) -> Done {
        let result = match intent.status {
            IntentStatus::Reserving => self.settle_expired_lease(intent, now).await,
            IntentStatus::WaitingForSeat => self.move_wait(intent, now).await,
            IntentStatus::Requested => self.requeue(intent, now).await,
            _ => Ok(Done::Deferred),
        };
        result.unwrap_or_else(|e| {
            warn!(intent_id = %intent.intent_id, error = %e, "reaper write failed; next pass");
            Done::Deferred
        })
    }

    async fn settle_expired_lease(&self, intent: &Intent, now: Millis) -> Result<Done, StoreError> {
        // The index may lag the item; the lease itself is the rule.
        let lease_over = intent
            .lease_until
            .is_some_and(|l| l.plus(self.timing.reaper_grace) <= now);
        if !lease_over {
            return Ok(Done::Deferred);
        }
        let credential = with_retry(|| self.credentials.credential(&intent.user_id)).await?;
        let outcome = match credential {
            None => Outcome::NoCredential,
            Some(credential) => match self.upstream.current_charge(&credential).await {
                Ok(Some(charge)) if charge.seat_id == intent.seat_id => Outcome::Charged {
                    charge_id: charge.charge_id,
                    how: Reason::ChargeRead,
                },
                Ok(_) => Outcome::NoCharge,
                Err(ChargeReadError::CredentialRejected) => Outcome::CredentialRejected,
                Err(ChargeReadError::Unavailable(why)) => {
                    warn!(intent_id = %intent.intent_id, reason = %why, "charge unreadable; next pass");
                    return Ok(Done::Deferred);
                }
            },
        };
        let request = intent.settle(outcome, now, &self.timing);
        match self.write(&request).await? {
            Some(done) => {
                info!(intent_id = %intent.intent_id, seat_id = %intent.seat_id, status = done.status.as_str(), "expired lease settled by charge read");
                Ok(if done.status == IntentStatus::Succeeded {
                    Done::Succeeded
                } else {
                    Done::Failed
                })
            }
            None => Ok(Done::Deferred),
        }
    }

    async fn move_wait(&self, intent: &Intent, now: Millis) -> Result<Done, StoreError> {
        if intent.deadline.is_some_and(|d| d <= now) {
            let request = TransitionRequest::new(
                intent.intent_id.clone(),
                now,
                Transition::expire_wait(true),
            );
            return Ok(self
                .write(&request)
                .await?
                .map_or(Done::Deferred, |_| Done::Expired));
        }
        if !intent.is_due_wait(now) {
            return Ok(Done::Deferred);
        }
        // Due again after `requeue_after` in case this wake-up's message is lost too.
        let mut due_at = now.plus(self.timing.requeue_after);
        if let Some(deadline) = intent.deadline {
            due_at = due_at.min(deadline);
        }
        let request = TransitionRequest::new(
            intent.intent_id.clone(),
            now,
            Transition::wake(intent.version, None, due_at),
        );
        Ok(self
            .write(&request)
            .await?
            .map_or(Done::Deferred, |_| Done::Woken))
    }

    async fn requeue(&self, intent: &Intent, now: Millis) -> Result<Done, StoreError> {
        if intent.updated_at.plus(self.timing.requeue_after) > now {
            return Ok(Done::Deferred);
        }
        let (transition, done) = if intent.requeues >= self.timing.max_requeues {
            (Transition::never_processed(), Done::GivenUp)
        } else {
            (
                Transition::requeue(intent.version, now.plus(self.timing.requeue_after)),
                Done::Requeued,
            )
        };
        let request = TransitionRequest::new(intent.intent_id.clone(), now, transition);
        let written = self.write(&request).await?;
        if written.is_some() {
            warn!(intent_id = %intent.intent_id, requeues = intent.requeues, "REQUESTED intent without progress: requeued or closed");
        }
        Ok(written.map_or(Done::Deferred, |_| done))
    }

    /// One conditional write; `None` if refused (someone else moved the intent first).
    async fn write(&self, request: &TransitionRequest) -> Result<Option<Intent>, StoreError> {
        match with_retry(|| self.intents.transition(request)).await {
            Ok(intent) => Ok(Some(intent)),
            Err(TransitionError::Refused(_)) | Err(TransitionError::NotFound) => Ok(None),
            Err(TransitionError::Store(e)) => Err(e),
        }
    }
}
