//! The outbox: the embedded stand-in for the intent table's DynamoDB Stream.
//!
//! A row (old and new image) is inserted by the same transaction as every intent write, so a
//! change is never committed without its record nor recorded without being committed. The local
//! runner drains it like a stream's event source mapping: [`EmbeddedBackend::fetch_outbox`] is a
//! plain read of pending rows in commit order, the relay handles them, then acks or fails each.
//! Delivery is therefore at least once (a crash between relay and ack replays the row), which the
//! relay already tolerates because a stream is at least once too. A failing row backs off
//! exponentially and is parked as `dead` after `outbox_max_attempts`, instead of retrying
//! forever; the reaper's requeue path covers intents whose record was parked.
//!
//! Offers write rows too (`kind = 'hold'`, the hold's id in `intent_id`, which names the item the
//! row records): an offer made inside a return and its resolution, in that write's transaction,
//! as the hold item's records reach the table's stream on AWS. The relay makes `offer.created`
//! and `offer.expired` of them.

use super::{Cached, EmbeddedBackend, from_json, immediate, int, millis, sql, to_json};
use rusqlite::{OptionalExtension, Transaction, params};
use seatgate::backoff::Backoff;
use seatgate::domain::{
    Change, ChangeRecord, CheckoutHold, HoldChange, Intent, IntentChange, Millis, TransitionRecord,
};
use seatgate::ports::StoreError;
use std::time::Duration;

/// Retry delay of a failed row: 100 ms doubling per failure, at most 30 s.
const BACKOFF: Backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(30));
/// `last_error` is for people reading the table; a bounded length keeps a huge error out.
const MAX_ERROR_LEN: usize = 1_000;

/// One outbox row: a committed change (an intent's, or an offer's) and its position in commit
/// order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRow {
    pub seq: i64,
    pub change: Change,
}

/// `outbox.kind` of an offer's row; an intent's is `'intent'`, the column's default.
const KIND_HOLD: &str = "hold";

impl From<OutboxRow> for ChangeRecord {
    /// The row as the relay's edge takes it: its sequence number is its position. A row always
    /// decodes (it was written from the domain type), so its change is never an error.
    fn from(row: OutboxRow) -> Self {
        ChangeRecord {
            position: row.seq.to_string(),
            change: Ok(Some(row.change)),
        }
    }
}

/// Inserts the record of an intent write, and its history row; called inside that write's
/// transaction.
pub(super) fn insert_outbox(
    tx: &Transaction<'_>,
    old: Option<&Intent>,
    new: &Intent,
    now: Millis,
) -> Result<(), StoreError> {
    let old_intent = old;
    let old = old.map(to_json).transpose()?;
    let new_json = to_json(new)?;
    tx.prepare_cached(
        "INSERT INTO outbox (intent_id, old, new, created_at, next_attempt_at) \
         VALUES (?1, ?2, ?3, ?4, ?4)",
    )
    .and_then(|mut stmt| stmt.execute(params![new.intent_id.as_str(), old, new_json, now.0,]))
    .map_err(sql)?;
    let record = to_json(&TransitionRecord::of(old_intent, new))?;
    tx.prepare_cached("INSERT INTO intent_history (intent_id, version, item) VALUES (?1, ?2, ?3)")
        .and_then(|mut stmt| {
            stmt.execute(params![new.intent_id.as_str(), int(new.version), record])
        })
        .map_err(sql)?;
    Ok(())
}

/// Inserts the record of a hold's write when the hold is an offer (the only holds that make
/// events); called inside that write's transaction.
pub(super) fn insert_offer_outbox(
    tx: &rusqlite::Connection,
    old: Option<&CheckoutHold>,
    new: &CheckoutHold,
    now: Millis,
) -> Result<(), StoreError> {
    if new.offer_for.is_none() {
        return Ok(());
    }
    let old = old.map(to_json).transpose()?;
    let new_json = to_json(new)?;
    tx.prepare_cached(
        "INSERT INTO outbox (kind, intent_id, old, new, created_at, next_attempt_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            KIND_HOLD,
            new.hold_id.as_str(),
            old,
            new_json,
            now.0
        ])
    })
    .map_err(sql)?;
    Ok(())
}

/// Delay before the next attempt after `attempts` failures.
fn backoff(attempts: u32) -> Duration {
    BACKOFF.delay(attempts)
}

fn decode_row(
    seq: i64,
    kind: String,
    old: Option<String>,
    new: String,
) -> Result<OutboxRow, StoreError> {
    let change = if kind == KIND_HOLD {
        Change::Hold(HoldChange {
            old: old.map(|j| from_json("outbox old hold", &j)).transpose()?,
            new: Some(from_json("outbox new hold", &new)?),
        })
    } else {
        Change::Intent(IntentChange {
            old: old.map(|j| from_json("outbox old image", &j)).transpose()?,
            new: Some(from_json("outbox new image", &new)?),
        })
    };
    Ok(OutboxRow { seq, change })
}

impl EmbeddedBackend {
    /// Pending rows due for an attempt (`next_attempt_at <= now`), in commit order, at most
    /// `limit`. A read: the rows stay pending until acked or failed.
    pub async fn fetch_outbox(&self, limit: usize) -> Result<Vec<OutboxRow>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        self.read(move |conn, ctx| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT seq, kind, old, new FROM outbox \
                     WHERE state = 'pending' AND next_attempt_at <= ?1 ORDER BY seq LIMIT ?2",
                )
                .map_err(sql)?;
            let rows = stmt
                .query_map(params![ctx.clock.now().0, int(limit as u64)], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })
                .map_err(sql)?;
            let mut out = Vec::new();
            for row in rows {
                let (seq, kind, old, new) = row.map_err(sql)?;
                out.push(decode_row(seq, kind, old, new)?);
            }
            Ok(out)
        })
        .await
    }

    /// Marks rows handled. Unknown, handled or dead rows are left as they are.
    pub async fn ack_outbox(&self, seqs: &[i64]) -> Result<(), StoreError> {
        if seqs.is_empty() {
            return Ok(());
        }
        let seqs = seqs.to_vec();
        self.run(move |conn, _| {
            immediate(conn, |tx| {
                let mut stmt = tx
                    .prepare_cached(
                        "UPDATE outbox SET state = 'done' WHERE seq = ?1 AND state = 'pending'",
                    )
                    .map_err(sql)?;
                for seq in seqs {
                    stmt.execute([seq]).map_err(sql)?;
                }
                Ok(())
            })
        })
        .await
    }

    /// Records a failed attempt: the row is retried after an exponential backoff (100 ms
    /// doubling, capped at 30 s) or, at `outbox_max_attempts`, parked as `dead`. `error` is
    /// stored for people to read, so it must not contain credentials (the relay's never do).
    pub async fn fail_outbox(&self, seq: i64, error: &str) -> Result<(), StoreError> {
        let error: String = error.chars().take(MAX_ERROR_LEN).collect();
        self.run(move |conn, ctx| {
            immediate(conn, |tx| {
                let attempts: Option<i64> = tx
                    .one(
                        "SELECT attempts FROM outbox WHERE seq = ?1 AND state = 'pending'",
                        [seq],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(sql)?;
                let Some(attempts) = attempts else {
                    return Ok(());
                };
                let attempts = u32::try_from(attempts + 1).unwrap_or(u32::MAX);
                let dead = attempts >= ctx.config.outbox_max_attempts;
                let next = ctx.clock.now().0.saturating_add(millis(backoff(attempts)));
                tx.exec(
                    "UPDATE outbox SET attempts = ?2, next_attempt_at = ?3, last_error = ?4, \
                     state = ?5 WHERE seq = ?1",
                    params![
                        seq,
                        attempts,
                        next,
                        error,
                        if dead { "dead" } else { "pending" }
                    ],
                )
                .map_err(sql)?;
                Ok(())
            })
        })
        .await
    }

    /// Rows parked after too many failures, in commit order.
    pub async fn dead_outbox(&self) -> Result<Vec<OutboxRow>, StoreError> {
        self.read(move |conn, _| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT seq, kind, old, new FROM outbox WHERE state = 'dead' ORDER BY seq",
                )
                .map_err(sql)?;
            let rows = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                .map_err(sql)?;
            let mut out = Vec::new();
            for row in rows {
                let (seq, kind, old, new) = row.map_err(sql)?;
                out.push(decode_row(seq, kind, old, new)?);
            }
            Ok(out)
        })
        .await
    }

    /// `(pending, done, dead)` row counts, pending including rows waiting out a backoff.
    pub async fn outbox_counts(&self) -> Result<(usize, usize, usize), StoreError> {
        self.read(move |conn, _| {
            conn.one(
                "SELECT \
                   COALESCE(SUM(state = 'pending'), 0), \
                   COALESCE(SUM(state = 'done'), 0), \
                   COALESCE(SUM(state = 'dead'), 0) FROM outbox",
                [],
                |r| {
                    let n = |i| r.get::<_, i64>(i).map(|v| v as usize);
                    Ok((n(0)?, n(1)?, n(2)?))
                },
            )
            .map_err(sql)
        })
        .await
    }

    /// Deletes handled rows committed before `before`, so a long local run does not keep every
    /// change forever. Pending and dead rows are kept. Returns how many were deleted.
    pub async fn prune_outbox(&self, before: Millis) -> Result<usize, StoreError> {
        self.run(move |conn, _| {
            immediate(conn, |tx| {
                tx.exec(
                    "DELETE FROM outbox WHERE state = 'done' AND created_at < ?1",
                    [before.0],
                )
                .map_err(sql)
            })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_100ms_and_caps_at_30s() {
        assert_eq!(backoff(1), Duration::from_millis(100));
        assert_eq!(backoff(2), Duration::from_millis(200));
        assert_eq!(backoff(5), Duration::from_millis(1_600));
        assert_eq!(backoff(9), Duration::from_millis(25_600));
        assert_eq!(backoff(10), Duration::from_secs(30));
        assert_eq!(backoff(40), Duration::from_secs(30));
    }
}
