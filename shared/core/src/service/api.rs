//! The API use cases: store a credential, prepare an action, confirm it, register and cancel a
//! wait, read an intent.
//!
//! Each use case has its own error enum; the HTTP status for each variant is decided in one place,
//! `handlers::http::errors`. Ownership failures are reported as "not found" on purpose: a caller
//! must not learn that someone else's action or intent exists.

use super::{AdmitError, with_retry};
use crate::config::Timing;
use crate::domain::{
    Action, ActionId, ActionKind, ConsentRecord, Intent, IntentId, IntentStatus, LimitedRoute,
    Millis, SeatId, Secret, Transition, TransitionRequest, UserId,
};
use crate::ports::{
    Actions, Clock, ConfirmError as StoreConfirmError, ConfirmRefusal, Confirmation, Credentials,
    Intents, StoreError, TransitionError,
};
use std::sync::Arc;
use thiserror::Error;
use tracing::info;

use crate::metrics::{self, Metric, record};

#[derive(Debug, Error)]
pub enum CredentialError {
    #[error("upstream_token must be 1 to {max} printable characters")]
    Invalid { max: usize },
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Debug, Error)]
pub enum PrepareError {
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Debug, Error)]
pub enum ConfirmError {
    #[error("no such action")]
    NotFound,
    #[error("the action expired; prepare it again")]
    Expired,
    #[error("too many confirms from this user; retry after Retry-After seconds")]
    RateLimited(std::time::Duration),
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Debug, Error)]
pub enum WaitError {
    #[error("until must be in the future")]
    DeadlineInPast,
    #[error("until must be within {max_hours} hours")]
    DeadlineTooFar { max_hours: u64 },
    #[error("too many waits from this user; retry after Retry-After seconds")]
    RateLimited(std::time::Duration),
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Debug, Error)]
pub enum ReadIntentError {
    #[error("no such intent")]
    NotFound,
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Debug, Error)]
pub enum CancelError {
    #[error("no such intent")]
    NotFound,
    #[error("only a waiting intent can be cancelled; this one is {}", .0.as_str())]
    NotCancellable(IntentStatus),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a seat or room read has nothing to serve.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ReadSeatError {
    #[error("no such room")]
    NoSuchRoom,
    /// The upstream is unavailable (or held back) and nothing is cached; worth asking again
    /// after `retry_after`.
    #[error("the upstream is unavailable and nothing is cached")]
    Unavailable { retry_after: std::time::Duration },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The result of a confirm: the intent, and whether this call created it.
#[derive(Debug, Clone)]
pub struct Confirmed {
    pub intent: Intent,
    pub created: bool,
}

pub struct ApiService {
    reads: Arc<super::SeatReads>,
    flights: Arc<super::FlightService>,
    checkout: Arc<super::CheckoutService>,
    waitlist: Arc<super::WaitlistService>,
    limiter: super::RateLimiter,
    admin: Arc<super::AdminService>,
    actions: Arc<dyn Actions>,
    intents: Arc<dyn Intents>,
    credentials: Arc<dyn Credentials>,
    clock: Arc<dyn Clock>,
    random: Arc<dyn crate::ports::Random>,
    ids: Arc<dyn crate::ports::Ids>,
    timing: Timing,
}

impl ApiService {
    pub const MAX_CREDENTIAL_LEN: usize = 4096;

    /// This instance's API on `services`, with `admin` for the operator's routes.
    pub(crate) fn new(services: &super::Services, admin: Arc<super::AdminService>) -> Self {
        let ports = &services.ports;
        Self {
            reads: services.reads.clone(),
            flights: services.flights.clone(),
            checkout: services.checkout.clone(),
            waitlist: services.waitlist.clone(),
            limiter: services.limiter.clone(),
            admin,
            actions: ports.actions.clone(),
            intents: ports.intents.clone(),
            credentials: ports.credentials.clone(),
            clock: ports.clock.clone(),
            random: ports.random.clone(),
            ids: ports.ids.clone(),
            timing: services.timing.clone(),
        }
    }

    /// The admin use cases (the handler checks the admin claim before any of them).
    pub fn admin(&self) -> &super::AdminService {
        &self.admin
    }

    pub async fn put_credential(&self, user: &UserId, token: &str) -> Result<(), CredentialError> {
        if token.is_empty()
            // Characters, as the error says and docs/openapi.yaml's maxLength counts.
            || token.chars().count() > Self::MAX_CREDENTIAL_LEN
            || token.chars().any(char::is_control)
        {
            return Err(CredentialError::Invalid {
                max: Self::MAX_CREDENTIAL_LEN,
            });
        }
        let secret = Secret::new(token);
        with_retry(&*self.random, || {
            self.credentials.put_credential(user, &secret)
        })
        .await?;
        Ok(())
    }

    pub async fn prepare(
        &self,
        user: &UserId,
        kind: ActionKind,
        seat_id: SeatId,
    ) -> Result<Action, PrepareError> {
        let action = Action::prepare_as(
            ActionId::from_uuid(self.ids.next_uuid()),
            user.clone(),
            kind,
            seat_id,
            self.clock.now(),
            self.timing.action_ttl,
        );
        with_retry(&*self.random, || self.actions.put_action(&action)).await?;
        info!(action_id = %action.action_id, seat_id = %action.seat_id, "action prepared");
        Ok(action)
    }

    /// Confirms a prepared action: the one conditional write that creates the intent.
    ///
    /// The action is read first only to learn its seat (the intent and consent items carry it);
    /// the write re-checks status, owner and expiry in its condition, so a stale read can cost a
    /// refused write, never a wrong one. Confirming again returns the same intent. The user's
    /// rate window is counted by the same write, so only a confirm that creates an intent
    /// spends it; a replay answers with its intent even when the window is spent.
    pub async fn confirm(
        &self,
        user: &UserId,
        action_id: &ActionId,
    ) -> Result<Confirmed, ConfirmError> {
        let now = self.clock.now();
        let found = with_retry(&*self.random, || self.actions.get_action(action_id)).await?;
        let intent_id = IntentId::from_uuid(self.ids.next_uuid());
        // The write's own condition decides; the same rule on the read spares a doomed write.
        let action = match Action::confirm(found.as_ref(), user, &intent_id, now) {
            Ok(confirmed) => confirmed,
            Err(denied) => return self.refused(user, denied.into()).await,
        };
        let admission = self.limiter.admission(user, LimitedRoute::Confirm);
        let confirmation = Confirmation::of(
            &action,
            intent_id,
            user,
            now,
            now.plus(self.timing.requeue_after),
        )
        .admitted_by(admission.clone());
        match with_retry(&*self.random, || self.actions.confirm(&confirmation)).await {
            Ok(()) => {
                info!(
                    intent_id = %confirmation.intent.intent_id,
                    seat_id = %confirmation.intent.seat_id,
                    action_id = %action_id,
                    "intent requested"
                );
                metrics::count(Metric::Confirms, &[("kind", "fresh")], 1);
                Ok(Confirmed {
                    intent: confirmation.intent,
                    created: true,
                })
            }
            Err(StoreConfirmError::Refused(ConfirmRefusal::RateLimited)) => Err(
                ConfirmError::RateLimited(self.limiter.refused(&admission.window)),
            ),
            Err(refused) => self.refused(user, refused).await,
        }
    }

    /// A confirm the rule or the write refused: a confirm made before answers with its intent.
    async fn refused(
        &self,
        user: &UserId,
        refused: StoreConfirmError,
    ) -> Result<Confirmed, ConfirmError> {
        match refused {
            StoreConfirmError::Refused(ConfirmRefusal::AlreadyConfirmed(intent_id)) => {
                self.already_confirmed(user, &intent_id).await
            }
            StoreConfirmError::Refused(ConfirmRefusal::NotFound) => Err(ConfirmError::NotFound),
            StoreConfirmError::Refused(ConfirmRefusal::Expired) => Err(ConfirmError::Expired),
            StoreConfirmError::Refused(ConfirmRefusal::RateLimited) => Err(StoreError::Corrupt(
                "a confirm without an admission was refused for its rate window".into(),
            )
            .into()),
            StoreConfirmError::Store(e) => Err(e.into()),
        }
    }

    async fn already_confirmed(
        &self,
        user: &UserId,
        intent_id: &IntentId,
    ) -> Result<Confirmed, ConfirmError> {
        let intent = with_retry(&*self.random, || self.intents.get_intent(intent_id))
            .await?
            .filter(|i| i.user_id == *user)
            .ok_or(ConfirmError::NotFound)?;
        metrics::count(Metric::Confirms, &[("kind", "replay")], 1);
        Ok(Confirmed {
            intent,
            created: false,
        })
    }

    /// Registers a wait. Registering is itself the consent, so the consent record is written in
    /// the same transaction as the intent.
    pub async fn register_wait(
        &self,
        user: &UserId,
        seat_id: SeatId,
        until: Millis,
    ) -> Result<Intent, WaitError> {
        let now = self.clock.now();
        if until <= now {
            return Err(WaitError::DeadlineInPast);
        }
        if until > now.plus(self.timing.max_wait) {
            return Err(WaitError::DeadlineTooFar {
                max_hours: self.timing.max_wait.as_secs() / 3600,
            });
        }
        match self.limiter.admit(user, LimitedRoute::Wait).await {
            Ok(()) => {}
            Err(AdmitError::Limited(after)) => return Err(WaitError::RateLimited(after)),
            Err(AdmitError::Store(e)) => return Err(e.into()),
        }
        let intent_id = IntentId::from_uuid(self.ids.next_uuid());
        let intent = Intent::waiting_as(intent_id, user.clone(), seat_id, until, now);
        let consent = ConsentRecord::for_intent(&intent, now);
        with_retry(&*self.random, || {
            self.intents.register_wait(&intent, &consent)
        })
        .await?;
        metrics::count(Metric::Waits, &[("event", "registered")], 1);
        info!(intent_id = %intent.intent_id, seat_id = %intent.seat_id, "wait registered");
        Ok(intent)
    }

    /// The sale's use cases: flights, bookings, cancels, making a checkout hold.
    pub fn flights(&self) -> &super::FlightService {
        &self.flights
    }

    /// A checkout hold's use cases once it is made.
    pub fn checkout(&self) -> &super::CheckoutService {
        &self.checkout
    }

    /// The waiting list's use cases.
    pub fn waitlist(&self) -> &super::WaitlistService {
        &self.waitlist
    }

    /// A seat's availability, through the seat-read cache.
    pub async fn seat(
        &self,
        seat_id: &crate::domain::SeatId,
    ) -> Result<super::Served, ReadSeatError> {
        self.reads
            .seat(seat_id)
            .await
            .map_err(|e| self.read_error(e))
    }

    /// A room's seat map, through the seat-read cache.
    pub async fn room(
        &self,
        room_id: &crate::domain::RoomId,
    ) -> Result<super::Served, ReadSeatError> {
        self.reads
            .room(room_id)
            .await
            .map_err(|e| self.read_error(e))
    }

    /// The cache's answer as the caller needs it: when to come back as a delay from now.
    fn read_error(&self, e: super::SeatReadError) -> ReadSeatError {
        match e {
            super::SeatReadError::NoSuchRoom => ReadSeatError::NoSuchRoom,
            super::SeatReadError::Unavailable { retry_at } => ReadSeatError::Unavailable {
                retry_after: retry_at.since(self.clock.now()),
            },
            super::SeatReadError::Store(e) => ReadSeatError::Store(e),
        }
    }

    pub async fn intent(&self, user: &UserId, id: &IntentId) -> Result<Intent, ReadIntentError> {
        with_retry(&*self.random, || self.intents.get_intent(id))
            .await?
            .filter(|i| i.user_id == *user)
            .ok_or(ReadIntentError::NotFound)
    }

    /// Cancels a wait: one conditional write (waiting, and owned by the caller). Cancelling an
    /// already cancelled wait answers with it again.
    pub async fn cancel_wait(&self, user: &UserId, id: &IntentId) -> Result<Intent, CancelError> {
        let request = TransitionRequest::new(
            id.clone(),
            self.clock.now(),
            Transition::cancel(user.clone()),
        );
        match with_retry(&*self.random, || self.intents.transition(&request)).await {
            Ok(intent) => {
                record::if_terminal(&intent);
                info!(intent_id = %id, "wait cancelled");
                Ok(intent)
            }
            Err(TransitionError::NotFound) => Err(CancelError::NotFound),
            Err(TransitionError::Refused(current)) if current.user_id != *user => {
                Err(CancelError::NotFound)
            }
            Err(TransitionError::Refused(current)) if current.status == IntentStatus::Cancelled => {
                Ok(*current)
            }
            Err(TransitionError::Refused(current)) => {
                Err(CancelError::NotCancellable(current.status))
            }
            // A cancel claims no seat; a store saying otherwise is broken.
            Err(TransitionError::SeatClaimed(_)) => {
                Err(StoreError::Corrupt("a cancel was refused for a seat's claim".into()).into())
            }
            Err(TransitionError::Store(e)) => Err(e.into()),
        }
    }
}
