//! `Intents` on SQLite, and the intent rows the confirm (`actions.rs`) writes too.
//!
//! Each method is one transaction shaped like the DynamoDB request it stands for:
//! `register_wait` is a `TransactWriteItems`, `transition` is one conditional `UpdateItem` (a
//! transaction when it also writes a suppression), reads are a `GetItem` or a `Query`. The
//! condition of a transition is decided by [`Intent::apply`] on the item read inside the same
//! write-locked transaction, so the embedded and DynamoDB adapters cannot drift apart on
//! semantics: there is only one definition. Every intent write also inserts its outbox row
//! before the commit, which is what makes the outbox transactional.

use super::{
    Cached, EmbeddedBackend, from_json, immediate, int, outbox::insert_outbox, refuse_duplicate,
    sql, to_json,
};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Transaction, params};
use seatgate::domain::{
    ConsentRecord, Intent, IntentId, IntentStatus, Millis, Page, PageSize, SeatClaim,
    SeatClaimEffect, SeatId, Suppression, TransitionRecord, TransitionRequest,
};
use seatgate::ports::{Intents, StoreError, TransitionError};

#[async_trait]
impl Intents for EmbeddedBackend {
    async fn register_wait(
        &self,
        intent: &Intent,
        consent: &ConsentRecord,
    ) -> Result<(), StoreError> {
        let (intent, consent) = (intent.clone(), consent.clone());
        self.run(move |conn, ctx| {
            immediate(conn, |tx| {
                insert_intent(tx, &intent)?;
                insert_consent(tx, &consent)?;
                insert_outbox(tx, None, &intent, ctx.clock.now())
            })
        })
        .await?;
        self.inner.outbox_notify.notify_one();
        Ok(())
    }

    async fn get_intent(&self, id: &IntentId) -> Result<Option<Intent>, StoreError> {
        let id = id.clone();
        self.read(move |conn, _| load_intent(conn, &id)).await
    }

    async fn get_consent(&self, id: &IntentId) -> Result<Option<ConsentRecord>, StoreError> {
        let id = id.clone();
        self.read(move |conn, _| {
            let item: Option<String> = conn
                .one(
                    "SELECT item FROM consents WHERE intent_id = ?1",
                    [id.as_str()],
                    |r| r.get(0),
                )
                .optional()
                .map_err(sql)?;
            item.map(|json| from_json("consent", &json)).transpose()
        })
        .await
    }

    async fn intents(&self, ids: &[IntentId]) -> Result<Vec<Intent>, StoreError> {
        seatgate::ports::within_batch_read(ids.len())?;
        let ids = ids.to_vec();
        self.read(move |conn, _| {
            let mut out = Vec::with_capacity(ids.len());
            for id in &ids {
                out.extend(load_intent(conn, id)?);
            }
            Ok(out)
        })
        .await
    }

    async fn open_on_seat(
        &self,
        seat_id: &SeatId,
        limit: usize,
    ) -> Result<Vec<Intent>, StoreError> {
        let seat_id = seat_id.clone();
        self.read(move |conn, _| {
            // On `intents_seat (seat_id, status)`.
            let mut stmt = conn
                .prepare_cached(
                    "SELECT item FROM intents WHERE seat_id = ?1 AND status = ?2 LIMIT ?3",
                )
                .map_err(sql)?;
            let rows = stmt
                .query_map(
                    params![
                        seat_id.as_str(),
                        IntentStatus::Requested.as_str(),
                        int(limit as u64)
                    ],
                    |r| r.get::<_, String>(0),
                )
                .map_err(sql)?;
            let mut out = Vec::new();
            for json in rows {
                out.push(from_json("intent", &json.map_err(sql)?)?);
            }
            Ok(out)
        })
        .await
    }

    async fn transition(&self, request: &TransitionRequest) -> Result<Intent, TransitionError> {
        let request = request.clone();
        let next = self
            .run(move |conn, ctx| {
                immediate(conn, |tx| {
                    let Some(current) = load_intent(tx, &request.intent_id)? else {
                        return Err(TransitionError::NotFound);
                    };
                    let Some(next) = current.apply(&request) else {
                        return Err(TransitionError::Refused(Box::new(current)));
                    };
                    apply_seat_claim(tx, &request.seat_claim_effect())?;
                    update_intent(tx, &next, current.version)?;
                    if let Some(s) = request.suppression() {
                        put_suppression(tx, s)?;
                    }
                    if let Some(r) = &request.reading {
                        crate::shared_state::record_in(tx, r)?;
                    }
                    insert_outbox(tx, Some(&current), &next, ctx.clock.now())?;
                    Ok(next)
                })
            })
            .await?;
        self.inner.outbox_notify.notify_one();
        Ok(next)
    }

    async fn due_intents(&self, now: Millis, limit: usize) -> Result<Vec<Intent>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        self.read(move |conn, _| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT item FROM intents WHERE due_at IS NOT NULL AND due_at <= ?1 \
                     ORDER BY due_at, intent_id LIMIT ?2",
                )
                .map_err(sql)?;
            let rows = stmt
                .query_map(params![now.0, int(limit as u64)], |r| r.get::<_, String>(0))
                .map_err(sql)?;
            let mut out = Vec::new();
            for json in rows {
                out.push(from_json("intent", &json.map_err(sql)?)?);
            }
            Ok(out)
        })
        .await
    }

    async fn suppression(
        &self,
        seat_id: &SeatId,
        now: Millis,
    ) -> Result<Option<Suppression>, StoreError> {
        let seat_id = seat_id.clone();
        self.read(move |conn, _| {
            let item: Option<String> = conn
                .one(
                    "SELECT item FROM suppressions WHERE seat_id = ?1 AND until > ?2",
                    params![seat_id.as_str(), now.0],
                    |r| r.get(0),
                )
                .optional()
                .map_err(sql)?;
            item.map(|json| from_json("suppression", &json)).transpose()
        })
        .await
    }

    async fn last_taken(&self, seat_id: &SeatId) -> Result<Option<Suppression>, StoreError> {
        let seat_id = seat_id.clone();
        self.read(move |conn, _| {
            let item: Option<String> = conn
                .one(
                    "SELECT item FROM suppressions WHERE seat_id = ?1",
                    params![seat_id.as_str()],
                    |r| r.get(0),
                )
                .optional()
                .map_err(sql)?;
            item.map(|json| from_json("suppression", &json)).transpose()
        })
        .await
    }

    async fn history(
        &self,
        id: &IntentId,
        after: Option<u64>,
        size: PageSize,
    ) -> Result<Page<TransitionRecord, u64>, StoreError> {
        let id = id.clone();
        // Versions fit SQLite's i64 until 2^63 writes of one intent.
        let after = i64::try_from(after.unwrap_or(0)).unwrap_or(i64::MAX);
        self.read(move |conn, _| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT item FROM intent_history WHERE intent_id = ?1 AND version > ?2 \
                     ORDER BY version LIMIT ?3",
                )
                .map_err(sql)?;
            let rows = stmt
                .query_map(params![id.as_str(), after, size.overread()], |r| {
                    r.get::<_, String>(0)
                })
                .map_err(sql)?;
            let mut out: Vec<TransitionRecord> = Vec::with_capacity(size.overread());
            for row in rows {
                out.push(from_json("intent history", &row.map_err(sql)?)?);
            }
            Ok(Page::from_overread(out, size, |r| r.version))
        })
        .await
    }

    async fn seat_claim(&self, seat_id: &SeatId) -> Result<Option<SeatClaim>, StoreError> {
        let seat_id = seat_id.clone();
        self.read(move |conn, _| load_seat_claim(conn, &seat_id))
            .await
    }
}

pub(super) fn load_intent(conn: &Connection, id: &IntentId) -> Result<Option<Intent>, StoreError> {
    let item: Option<String> = conn
        .prepare_cached("SELECT item FROM intents WHERE intent_id = ?1")
        .and_then(|mut stmt| stmt.query_row([id.as_str()], |r| r.get(0)).optional())
        .map_err(sql)?;
    item.map(|json| from_json("intent", &json)).transpose()
}

/// The due-index column: a terminal intent is never due, whatever its item says.
fn due_column(intent: &Intent) -> Option<i64> {
    if intent.status.is_terminal() {
        None
    } else {
        intent.due_at.map(|t| t.0)
    }
}

/// Puts a new intent; an existing id fails the transaction (`attribute_not_exists`).
pub(super) fn insert_intent(tx: &Transaction<'_>, intent: &Intent) -> Result<(), StoreError> {
    let item = to_json(intent)?;
    tx.prepare_cached(
        "INSERT INTO intents (intent_id, user_id, seat_id, kind, status, version, fencing_token, \
         lease_until, due_at, deadline, next_attempt_at, created_at, updated_at, item) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            intent.intent_id.as_str(),
            intent.user_id.as_str(),
            intent.seat_id.as_str(),
            intent.kind.as_str(),
            intent.status.as_str(),
            int(intent.version),
            int(intent.fencing_token),
            intent.lease_until.map(|t| t.0),
            due_column(intent),
            intent.deadline.map(|t| t.0),
            intent.next_attempt_at.map(|t| t.0),
            intent.created_at.0,
            intent.updated_at.0,
            item,
        ])
    })
    .map_err(refuse_duplicate("intent id"))?;
    Ok(())
}

/// Replaces an intent the caller just read at `expected_version`. The version check cannot fail
/// under the write lock; it is there so a future caller without the lock fails loudly.
fn update_intent(
    tx: &Transaction<'_>,
    intent: &Intent,
    expected_version: u64,
) -> Result<(), StoreError> {
    let item = to_json(intent)?;
    let changed = tx
        .prepare_cached(
            "UPDATE intents SET status = ?2, version = ?3, fencing_token = ?4, lease_until = ?5, \
             due_at = ?6, deadline = ?7, next_attempt_at = ?8, updated_at = ?9, item = ?10 \
             WHERE intent_id = ?1 AND version = ?11",
        )
        .and_then(|mut stmt| {
            stmt.execute(params![
                intent.intent_id.as_str(),
                intent.status.as_str(),
                int(intent.version),
                int(intent.fencing_token),
                intent.lease_until.map(|t| t.0),
                due_column(intent),
                intent.deadline.map(|t| t.0),
                intent.next_attempt_at.map(|t| t.0),
                intent.updated_at.0,
                item,
                int(expected_version),
            ])
        })
        .map_err(sql)?;
    if changed == 1 {
        Ok(())
    } else {
        Err(StoreError::TransactionConflict)
    }
}

pub(super) fn insert_consent(
    tx: &Transaction<'_>,
    consent: &ConsentRecord,
) -> Result<(), StoreError> {
    tx.exec(
        "INSERT INTO consents (intent_id, user_id, consented_at, item) VALUES (?1, ?2, ?3, ?4)",
        params![
            consent.intent_id.as_str(),
            consent.user_id.as_str(),
            consent.consented_at.0,
            to_json(consent)?,
        ],
    )
    .map_err(refuse_duplicate("consent record"))?;
    Ok(())
}

/// The seat's claim, from the `holds` table (its first name, kept: renaming a table is a
/// migration for no reader's benefit).
fn load_seat_claim(conn: &Connection, seat_id: &SeatId) -> Result<Option<SeatClaim>, StoreError> {
    let item: Option<String> = conn
        .prepare_cached("SELECT item FROM holds WHERE seat_id = ?1")
        .and_then(|mut stmt| stmt.query_row([seat_id.as_str()], |r| r.get(0)).optional())
        .map_err(sql)?;
    item.map(|json| from_json("seat claim", &json)).transpose()
}

/// The seat side of a transition, inside its transaction: what DynamoDB does with the seat claim item
/// in the same `TransactWriteItems`.
fn apply_seat_claim(tx: &Transaction<'_>, effect: &SeatClaimEffect) -> Result<(), TransitionError> {
    match effect {
        SeatClaimEffect::None => Ok(()),
        SeatClaimEffect::Take(claim) => match load_seat_claim(tx, &claim.seat_id)? {
            Some(current) if current.intent_id != claim.intent_id => {
                Err(TransitionError::SeatClaimed(current))
            }
            Some(_) => Ok(()),
            None => {
                let item = to_json(claim)?;
                tx.prepare_cached(
                    "INSERT INTO holds (seat_id, intent_id, since, item) VALUES (?1, ?2, ?3, ?4)",
                )
                .and_then(|mut stmt| {
                    stmt.execute(params![
                        claim.seat_id.as_str(),
                        claim.intent_id.as_str(),
                        claim.since.0,
                        item,
                    ])
                })
                .map_err(sql)?;
                Ok(())
            }
        },
        SeatClaimEffect::Release { seat_id, intent_id } => match load_seat_claim(tx, seat_id)? {
            Some(current) if current.intent_id != *intent_id => Err(StoreError::Corrupt(format!(
                "seat {seat_id} is claimed by another intent than the one settling"
            ))
            .into()),
            Some(_) => {
                tx.prepare_cached("DELETE FROM holds WHERE seat_id = ?1")
                    .and_then(|mut stmt| stmt.execute([seat_id.as_str()]))
                    .map_err(sql)?;
                Ok(())
            }
            None => Ok(()),
        },
    }
}

/// Like the `Update` in the DynamoDB transaction: the latest suppression of a seat wins,
/// keeping the last winner when it found the seat taken (`Suppression::over`), read and written
/// inside the settlement's transaction.
fn put_suppression(tx: &Transaction<'_>, s: &Suppression) -> Result<(), StoreError> {
    let previous: Option<String> = tx
        .prepare_cached("SELECT item FROM suppressions WHERE seat_id = ?1")
        .and_then(|mut stmt| {
            stmt.query_row([s.seat_id.as_str()], |r| r.get(0))
                .optional()
        })
        .map_err(sql)?;
    let previous: Option<Suppression> = previous
        .map(|json| from_json("suppression", &json))
        .transpose()?;
    let s = &s.clone().over(previous.as_ref());
    tx.exec(
        "INSERT INTO suppressions (seat_id, intent_id, until, item) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (seat_id) DO UPDATE SET intent_id = excluded.intent_id, \
         until = excluded.until, item = excluded.item",
        params![
            s.seat_id.as_str(),
            s.intent_id.as_str(),
            s.until.0,
            to_json(s)?
        ],
    )
    .map_err(sql)?;
    Ok(())
}
