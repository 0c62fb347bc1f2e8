//! Intents, their consent records, seat claims and suppressions (`Intents`).
//!
//! A transition is decided by [`Intent::apply`], the reference semantics every adapter uses,
//! on the intent as stored, and its seat side by [`TransitionRequest::seat_claim_effect`]: a claim
//! needs the seat free or claimed by this intent, a settlement releases this intent's claim. Both
//! are decided before anything is written, then the intent (with its change and history
//! records), the seat's claim and any suppression are written together: DynamoDB's
//! `TransactWriteItems` of the same items.
//!
//! [`Intent::apply`]: seatgate::domain::Intent::apply
//! [`TransitionRequest::seat_claim_effect`]: seatgate::domain::TransitionRequest::seat_claim_effect

use crate::faults::Op;
use crate::{MemoryBackend, Tx};
use async_trait::async_trait;
use seatgate::domain::{
    ConsentRecord, Intent, IntentId, Millis, Page, PageSize, SeatClaim, SeatClaimEffect, SeatId,
    Suppression, TransitionRecord, TransitionRequest,
};
use seatgate::ports::{Intents, StoreError, TransitionError};

/// What a transition does to its seat's claim, once decided.
enum SeatClaimWrite {
    Keep,
    Put(SeatClaim),
    Remove(SeatId),
}

/// Decides the seat side of a transition on the stored claim: a claim meeting another intent's
/// is `SeatClaimed`; a settlement meeting one is corrupt (a seat's claim changes only with its
/// own intent's writes).
fn decide_seat_claim(
    tx: &Tx<'_>,
    effect: SeatClaimEffect,
) -> Result<SeatClaimWrite, TransitionError> {
    match effect {
        SeatClaimEffect::None => Ok(SeatClaimWrite::Keep),
        SeatClaimEffect::Take(claim) => match tx.state.seat_claims.get(&claim.seat_id) {
            Some(current) if current.intent_id != claim.intent_id => {
                Err(TransitionError::SeatClaimed(current.clone()))
            }
            Some(_) => Ok(SeatClaimWrite::Keep),
            None => Ok(SeatClaimWrite::Put(claim)),
        },
        SeatClaimEffect::Release { seat_id, intent_id } => match tx.state.seat_claims.get(&seat_id)
        {
            Some(current) if current.intent_id != intent_id => Err(StoreError::Corrupt(format!(
                "seat {seat_id} is claimed by another intent than the one settling"
            ))
            .into()),
            Some(_) => Ok(SeatClaimWrite::Remove(seat_id)),
            None => Ok(SeatClaimWrite::Keep),
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
            match decide_seat_claim(tx, crate::plants::seat_claim_effect(tx.config, request))? {
                SeatClaimWrite::Keep => {}
                SeatClaimWrite::Put(claim) => {
                    tx.log_as("transition.seat_claim", &claim);
                    tx.state.seat_claims.insert(claim.seat_id.clone(), claim);
                }
                SeatClaimWrite::Remove(seat_id) => {
                    tx.log_as("transition.release", &seat_id);
                    tx.state.seat_claims.remove(&seat_id);
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

    async fn seat_claim(&self, seat_id: &SeatId) -> Result<Option<SeatClaim>, StoreError> {
        self.timed(Op::SeatClaim, |tx| {
            Ok(tx.state.seat_claims.get(seat_id).cloned())
        })
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
