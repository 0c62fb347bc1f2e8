//! Prepared actions and the confirm (`Actions`): the confirm is the one transaction that turns
//! an action into an intent and its consent record, as DynamoDB's `TransactWriteItems` does.
//!
//! Whether the caller may confirm is the domain's confirm rule ([`Action::confirm`], its refusal
//! order included), taken on the action as stored, before anything is written; then the action,
//! the new intent (with its change and history records) and the consent are written together.

use crate::MemoryBackend;
use crate::faults::Op;
use async_trait::async_trait;
use seatgate::domain::{Action, ActionId};
use seatgate::ports::{Actions, ConfirmError, ConfirmRefusal, Confirmation, StoreError};

#[async_trait]
impl Actions for MemoryBackend {
    async fn put_action(&self, action: &Action) -> Result<(), StoreError> {
        self.timed(Op::PutAction, |tx| {
            if tx.state.actions.contains_key(&action.action_id) {
                // Ids are generated: a collision is a bug to report, never an overwrite.
                return Err(StoreError::Unavailable("action id already exists".into()));
            }
            tx.log(action);
            tx.state
                .actions
                .insert(action.action_id.clone(), action.clone());
            Ok(())
        })
        .await
    }

    async fn get_action(&self, id: &ActionId) -> Result<Option<Action>, StoreError> {
        self.timed(Op::GetAction, |tx| Ok(tx.state.actions.get(id).cloned()))
            .await
    }

    async fn confirm(&self, c: &Confirmation) -> Result<(), ConfirmError> {
        self.timed(Op::Confirm, |tx| {
            tx.room_for_change()?;
            let intent_id = &c.intent.intent_id;
            let stored = tx.state.actions.get(&c.action_id);
            let action = Action::confirm(stored, &c.user_id, intent_id, c.now)?;
            if tx.state.intents.contains_key(intent_id) {
                return Err(StoreError::Unavailable("intent id already exists".into()).into());
            }
            if tx.state.consents.contains_key(&c.consent.intent_id) {
                return Err(StoreError::Unavailable("consent record already exists".into()).into());
            }
            if let Some(a) = &c.admission
                && !crate::rate_limits::admits(tx, &a.window, a.limit)
            {
                return Err(ConfirmError::Refused(ConfirmRefusal::RateLimited));
            }
            tx.log_as("confirm.action", &action);
            tx.state.actions.insert(action.action_id.clone(), action);
            tx.write_intent(None, c.intent.clone());
            tx.log_as("confirm.consent", &c.consent);
            tx.state
                .consents
                .insert(c.consent.intent_id.clone(), c.consent.clone());
            if let Some(a) = &c.admission {
                crate::rate_limits::count(tx, &a.window, a.limit);
            }
            Ok(())
        })
        .await
    }
}
