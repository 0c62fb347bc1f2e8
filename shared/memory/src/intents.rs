//! Intents, their consent records, seat holds and suppressions (`Intents`).
//!
//! A transition is decided by [`Intent::apply`], the reference semantics every adapter uses,
//! on the intent as stored, and its seat side by [`TransitionRequest::hold_effect`]: a claim
//! needs the seat free or held by this intent, a settlement releases this intent's hold. Both
//! are decided before anything is written, then the intent (with its change and history
//! records), the hold and any suppression are written together: DynamoDB's
//! `TransactWriteItems` of the same items.
//!
//! [`Intent::apply`]: seatgate::domain::Intent::apply
//! [`TransitionRequest::hold_effect`]: seatgate::domain::TransitionRequest::hold_effect

use crate::faults::Op;
use crate::{MemoryBackend, Tx};
use async_trait::async_trait;
use seatgate::domain::{
    ConsentRecord, Hold, HoldEffect, Intent, IntentId, Millis, Page, PageSize, SeatId, Suppression,
    TransitionRecord, TransitionRequest,
};
use seatgate::ports::{Intents, StoreError, TransitionError};

/// What a transition does to its seat's hold, once decided.
enum HoldWrite {
    Keep,
    Put(Hold),
    Remove(SeatId),
}

/// Decides the hold side of a transition on the stored hold: a claim meeting another intent's
/// hold is `SeatHeld`; a settlement meeting one is corrupt (holds change only with their own
/// intent's writes).
fn decide_hold(tx: &Tx<'_>, effect: HoldEffect) -> Result<HoldWrite, TransitionError> {
    match effect {
        HoldEffect::None => Ok(HoldWrite::Keep),
        HoldEffect::Take(hold) => match tx.state.holds.get(&hold.seat_id) {
            Some(current) if current.intent_id != hold.intent_id => {
                Err(TransitionError::SeatHeld(current.clone()))
            }
            Some(_) => Ok(HoldWrite::Keep),
            None => Ok(HoldWrite::Put(hold)),
        },
        HoldEffect::Release { seat_id, intent_id } => match tx.state.holds.get(&seat_id) {
            Some(current) if current.intent_id != intent_id => Err(StoreError::Corrupt(format!(
                "seat {seat_id} is held by another intent than the one settling"
            ))
            .into()),
            Some(_) => Ok(HoldWrite::Remove(seat_id)),
            None => Ok(HoldWrite::Keep),
        },
    }
}

#[async_trait]
impl Intents for MemoryBackend {
    async fn register_wait(
        &self,
        intent: &Intent,
        consent: &ConsentRecord,
    ) -> Result<(), StoreError> {
        self.timed(Op::RegisterWait, |tx| {
            tx.room_for_change()?;
            if tx.state.intents.contains_key(&intent.intent_id) {
                return Err(StoreError::Unavailable("intent id already exists".into()));
            }
            if tx.state.consents.contains_key(&consent.intent_id) {
                return Err(StoreError::Unavailable(
                    "consent record already exists".into(),
                ));
            }
            tx.write_intent(None, intent.clone());
            tx.log_as("register_wait.consent", consent);
            tx.state
                .consents
                .insert(consent.intent_id.clone(), consent.clone());
            Ok(())
        })
        .await
    }

    async fn get_intent(&self, id: &IntentId) -> Result<Option<Intent>, StoreError> {
        self.timed(Op::GetIntent, |tx| Ok(tx.state.intents.get(id).cloned()))
            .await
    }

    async fn get_consent(&self, id: &IntentId) -> Result<Option<ConsentRecord>, StoreError> {
        self.timed(Op::GetConsent, |tx| Ok(tx.state.consents.get(id).cloned()))
            .await
    }

    async fn intents(&self, ids: &[IntentId]) -> Result<Vec<Intent>, StoreError> {
        seatgate::ports::within_batch_read(ids.len())?;
        self.timed(Op::Intents, |tx| {
            Ok(ids
                .iter()
                .filter_map(|id| tx.state.intents.get(id).cloned())
                .collect())
        })
        .await
    }

    async fn open_on_seat(
        &self,
        seat_id: &SeatId,
        limit: usize,
    ) -> Result<Vec<Intent>, StoreError> {
        self.timed(Op::OpenOnSeat, |tx| {
            Ok(tx
                .state
                .open
                .get(seat_id)
                .into_iter()
                .flatten()
                .take(limit)
                .filter_map(|id| tx.state.intents.get(id).cloned())
                .collect())
        })
        .await
    }

    async fn transition(&self, request: &TransitionRequest) -> Result<Intent, TransitionError> {
        self.timed(Op::Transition, |tx| {
            tx.room_for_change()?;
            let Some(current) = tx.state.intents.get(&request.intent_id).cloned() else {
                return Err(TransitionError::NotFound);
            };
            let Some(next) = crate::plants::apply(tx.config, &current, request) else {
                return Err(TransitionError::Refused(Box::new(current)));
            };
            match decide_hold(tx, crate::plants::hold_effect(tx.config, request))? {
                HoldWrite::Keep => {}
                HoldWrite::Put(hold) => {
                    tx.log_as("transition.hold", &hold);
                    tx.state.holds.insert(hold.seat_id.clone(), hold);
                }
                HoldWrite::Remove(seat_id) => {
                    tx.log_as("transition.release", &seat_id);
                    tx.state.holds.remove(&seat_id);
                }
            }
            if let Some(s) = request
                .suppression()
                .filter(|_| !tx.config.planted(crate::StorePlant::SuppressionForgotten))
            {
                // As DynamoDB's update in the transaction: the latest wins, keeping the last
                // winner when this one found the seat taken (`Suppression::over`).
                tx.log_as("transition.suppression", s);
                let s = s.clone().over(tx.state.suppressions.get(&s.seat_id));
                tx.state.suppressions.insert(s.seat_id.clone(), s);
            }
            if let Some(r) = &request.reading {
                crate::shared_state::record_in(tx, r);
            }
            tx.write_intent(Some(&current), next.clone());
            Ok(next)
        })
        .await
    }

    async fn history(
        &self,
        id: &IntentId,
        after: Option<u64>,
        size: PageSize,
    ) -> Result<Page<TransitionRecord, u64>, StoreError> {
        self.timed(Op::History, |tx| {
            let after = after.unwrap_or(0);
            let records = tx
                .state
                .history
                .get(id)
                .into_iter()
                .flatten()
                .filter(|r| r.version > after)
                .take(size.overread())
                .cloned()
                .collect();
            Ok(Page::from_overread(
                records,
                size,
                |r: &TransitionRecord| r.version,
            ))
        })
        .await
    }

    async fn hold(&self, seat_id: &SeatId) -> Result<Option<Hold>, StoreError> {
        self.timed(Op::Hold, |tx| Ok(tx.state.holds.get(seat_id).cloned()))
            .await
    }

    async fn due_intents(&self, now: Millis, limit: usize) -> Result<Vec<Intent>, StoreError> {
        self.timed(Op::DueIntents, |tx| {
            // The index holds only non-terminal intents with a due time, ordered by
            // (due_at, intent id): a range scan up to `now`, oldest first.
            Ok(tx
                .state
                .due
                .iter()
                .take_while(|(due, _)| *due <= now)
                .take(limit)
                .filter_map(|(_, id)| tx.state.intents.get(id).cloned())
                .collect())
        })
        .await
    }

    async fn suppression(
        &self,
        seat_id: &SeatId,
        now: Millis,
    ) -> Result<Option<Suppression>, StoreError> {
        self.timed(Op::Suppression, |tx| {
            Ok(tx
                .state
                .suppressions
                .get(seat_id)
                .filter(|s| s.until > now)
                .cloned())
        })
        .await
    }

    async fn last_taken(&self, seat_id: &SeatId) -> Result<Option<Suppression>, StoreError> {
        self.timed(Op::LastTaken, |tx| {
            Ok(tx.state.suppressions.get(seat_id).cloned())
        })
        .await
    }
}
