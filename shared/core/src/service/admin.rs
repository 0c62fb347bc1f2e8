//! The admin use cases behind the `admin` claim: what happened to an intent (its consent and
//! every transition, from the history each write recorded), where a seat stands (its hold, its
//! suppression, its last reading and the intent behind them), and one reaper pass on demand.
//!
//! Read-only except `reconcile`, which is the scheduled reaper's own `run_once`: an operator
//! running it early settles nothing the schedule would not have, and every write it makes is
//! as conditional as the schedule's.

use super::{Reaper, ReaperReport, with_retry};
use crate::domain::{
    ConsentRecord, Hold, Intent, IntentId, Millis, ReadKey, Reading, SeatId, Suppression,
    TransitionRecord,
};
use crate::ports::{Clock, Intents, Readings, StoreError};
use std::sync::Arc;
use thiserror::Error;

/// How many due intents an admin reaper pass takes: the scheduled pass's limit.
pub const RECONCILE_LIMIT: usize = crate::handlers::schedule::PASS_LIMIT;

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
}

#[derive(Debug, Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An intent as an operator sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentAudit {
    pub intent: Intent,
    pub consent: Option<ConsentRecord>,
    /// Every write of the intent, in version order.
    pub history: Vec<TransitionRecord>,
}

/// A seat as an operator sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeatState {
    pub seat_id: SeatId,
    /// The unsettled attempt holding the seat, if any.
    pub hold: Option<Hold>,
    /// The suppression in force, if any.
    pub suppression: Option<Suppression>,
    /// The shared seat reading (what the upstream or this system last said).
    pub reading: Option<Reading>,
    /// The intent behind the hold, or else behind the suppression: the seat's last outcome.
    pub last_intent: Option<Intent>,
}

pub struct AdminService {
    intents: Arc<dyn Intents>,
    readings: Arc<dyn Readings>,
    clock: Arc<dyn Clock>,
    reaper: Reaper,
}

impl AdminService {
    pub(crate) fn new(services: &super::Services) -> Self {
        let ports = services.ports();
        AdminService {
            intents: ports.intents.clone(),
            readings: ports.readings.clone(),
            clock: ports.clock.clone(),
            reaper: services.reaper(),
        }
    }

    pub async fn intent(&self, id: &IntentId) -> Result<IntentAudit, AdminIntentError> {
        let intent = with_retry(|| self.intents.get_intent(id))
            .await?
            .ok_or(AdminIntentError::NotFound)?;
        let consent = with_retry(|| self.intents.get_consent(id)).await?;
        let history = with_retry(|| self.intents.history(id)).await?;
        Ok(IntentAudit {
            intent,
            consent,
            history,
        })
    }

    pub async fn seat(&self, seat_id: &SeatId) -> Result<SeatState, AdminSeatError> {
        let now: Millis = self.clock.now();
        let hold = with_retry(|| self.intents.hold(seat_id)).await?;
        let suppression = with_retry(|| self.intents.suppression(seat_id, now)).await?;
        let key = ReadKey::Seat(seat_id.clone());
        let reading = with_retry(|| self.readings.entry(&key))
            .await?
            .and_then(|e| e.reading);
        let behind = hold
            .as_ref()
            .map(|h| &h.intent_id)
            .or(suppression.as_ref().map(|s| &s.intent_id));
        let last_intent = match behind {
            Some(id) => with_retry(|| self.intents.get_intent(id)).await?,
            None => None,
        };
        Ok(SeatState {
            seat_id: seat_id.clone(),
            hold,
            suppression,
            reading,
            last_intent,
        })
    }

    pub async fn reconcile(&self) -> Result<ReaperReport, ReconcileError> {
        Ok(self.reaper.run_once(RECONCILE_LIMIT).await?)
    }
}
