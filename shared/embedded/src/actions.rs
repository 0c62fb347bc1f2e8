//! `Actions` on SQLite: a prepared action is one insert, and the confirm is one transaction
//! (the action, the intent, its consent, its history record and its outbox row), as the
//! DynamoDB adapter's `TransactWriteItems`. The confirm applies [`Action::confirm`], the domain's
//! rule, to the action read inside the same write-locked transaction.

use super::intents::{insert_consent, insert_intent};
use super::{
    Cached, EmbeddedBackend, from_json, immediate, outbox::insert_outbox, refuse_duplicate, sql,
    to_json,
};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use seatgate::domain::{Action, ActionId, IntentId};
use seatgate::ports::{Actions, ConfirmError, ConfirmRefusal, Confirmation, StoreError};

#[async_trait]
impl Actions for EmbeddedBackend {
    async fn put_action(&self, action: &Action) -> Result<(), StoreError> {
        let action = action.clone();
        self.run(move |conn, _| {
            immediate(conn, |tx| {
                let item = to_json(&action)?;
                tx.exec(
                    "INSERT INTO actions (action_id, user_id, seat_id, status, intent_id, \
                     expires_at, item) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    params![
                        action.action_id.as_str(),
                        action.user_id.as_str(),
                        action.seat_id.as_str(),
                        action.status.as_str(),
                        action.intent_id.as_ref().map(IntentId::as_str),
                        action.expires_at.0,
                        item,
                    ],
                )
                .map_err(refuse_duplicate("action id"))?;
                Ok(())
            })
        })
        .await
    }

    async fn get_action(&self, id: &ActionId) -> Result<Option<Action>, StoreError> {
        let id = id.clone();
        self.read(move |conn, _| load_action(conn, &id)).await
    }

    async fn confirm(&self, confirmation: &Confirmation) -> Result<(), ConfirmError> {
        let c = confirmation.clone();
        self.run(move |conn, ctx| {
            immediate(conn, |tx| {
                let found = load_action(tx, &c.action_id)?;
                let action =
                    Action::confirm(found.as_ref(), &c.user_id, &c.intent.intent_id, c.now)?;
                if let Some(a) = &c.admission
                    && !crate::rate_limits::count(tx, &a.window, a.limit)?
                {
                    return Err(ConfirmError::Refused(ConfirmRefusal::RateLimited));
                }
                tx.exec(
                    "UPDATE actions SET status = ?2, intent_id = ?3, item = ?4 \
                     WHERE action_id = ?1",
                    params![
                        action.action_id.as_str(),
                        action.status.as_str(),
                        c.intent.intent_id.as_str(),
                        to_json(&action)?,
                    ],
                )
                .map_err(sql)?;
                insert_intent(tx, &c.intent)?;
                insert_consent(tx, &c.consent)?;
                insert_outbox(tx, None, &c.intent, ctx.clock.now())?;
                Ok::<(), ConfirmError>(())
            })
        })
        .await?;
        self.inner.outbox_notify.notify_one();
        Ok(())
    }
}

fn load_action(conn: &Connection, id: &ActionId) -> Result<Option<Action>, StoreError> {
    let item: Option<String> = conn
        .one(
            "SELECT item FROM actions WHERE action_id = ?1",
            [id.as_str()],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql)?;
    item.map(|json| from_json("action", &json)).transpose()
}
