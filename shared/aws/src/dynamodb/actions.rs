//! `Actions` on the table: a prepared action is one conditional `PutItem`, and the confirm that
//! turns it into an intent is one `TransactWriteItems` (the action, the intent, its consent, its
//! history record and, when confirms are limited, the user's rate window).

use async_trait::async_trait;

use super::{
    DynamoStore, conditional_write, confirm_refusal, expr, is_condition_failure, item, non_empty,
    old_item, rate_limits, retryable_cancellation, unexplained_cancellation,
};
use seatgate::domain::{Action, ActionId, TransitionRecord};
use seatgate::ports::{Actions, ConfirmError, ConfirmRefusal, Confirmation, StoreError};

/// The confirm transaction's items before its rate window: the action, the intent, the consent,
/// the history record.
const CONFIRM_ITEMS: usize = 4;

#[async_trait]
impl Actions for DynamoStore {
    async fn put_action(&self, action: &Action) -> Result<(), StoreError> {
        let e = expr::absent();
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item::action_to_item(action)))
            .condition_expression(e.condition)
            .set_expression_attribute_names(non_empty(e.names))
            .send()
            .await;
        if conditional_write("PutItem", result)? {
            Ok(())
        } else {
            Err(StoreError::Unavailable(
                "PutItem: action id already exists".into(),
            ))
        }
    }

    async fn get_action(&self, id: &ActionId) -> Result<Option<Action>, StoreError> {
        self.get(item::action_key(id))
            .await?
            .map(|i| item::action_from_item(&i))
            .transpose()
    }

    async fn confirm(&self, confirmation: &Confirmation) -> Result<(), ConfirmError> {
        let intent = &confirmation.intent;
        let mut items = vec![
            self.update(
                item::action_key(&confirmation.action_id),
                expr::confirm_action(
                    confirmation.user_id.as_str(),
                    confirmation.now,
                    intent.intent_id.as_str(),
                ),
            )?,
            self.put(item::intent_to_item(intent), Some(expr::absent()))?,
            self.put(
                item::consent_to_item(&confirmation.consent),
                Some(expr::absent()),
            )?,
            self.put(
                item::transition_to_item(&intent.intent_id, &TransitionRecord::of(None, intent)),
                Some(expr::absent()),
            )?,
        ];
        // Last, so the refusals keep their order: the action's own come first.
        let window = CONFIRM_ITEMS;
        if let Some(a) = &confirmation.admission {
            items.push(self.update(
                rate_limits::window_key(&a.window),
                rate_limits::window_update(&a.window, a.limit),
            )?);
        }
        let reasons = match self.transact(items).await? {
            Ok(()) => return Ok(()),
            Err(reasons) => reasons,
        };
        if is_condition_failure(reasons.first()) {
            let old = old_item(reasons[0].item());
            return Err(ConfirmError::Refused(confirm_refusal(old, confirmation)?));
        }
        if let Some(e) = retryable_cancellation(&reasons) {
            return Err(e.into());
        }
        if is_condition_failure(reasons.get(window)) {
            return Err(ConfirmError::Refused(ConfirmRefusal::RateLimited));
        }
        if reasons.iter().any(|r| is_condition_failure(Some(r))) {
            return Err(StoreError::Unavailable("confirm: intent id already exists".into()).into());
        }
        Err(unexplained_cancellation("confirm", &reasons).into())
    }
}
