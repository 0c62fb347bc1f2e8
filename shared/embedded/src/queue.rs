//! The seat queue: an SQS FIFO queue with a redrive policy, on two SQLite tables.
//!
//! What the worker's correctness leans on is reproduced, not approximated:
//! - message groups: while a group has a message in flight (received, not deleted, visibility not
//!   expired) none of its later messages is handed out, so one seat is worked on by one consumer
//!   at a time, across every process sharing the file;
//! - order within a group, and several messages of one group in one batch, in order;
//! - the visibility timeout: an undeleted message comes back, with its receive count raised and a
//!   fresh receipt, so a stale receipt can no longer delete it;
//! - deduplication: a second send with the same deduplication id within the window is accepted
//!   and dropped, even after the first was deleted;
//! - the dead-letter queue: a message that would be received more than `max_receive_count` times
//!   moves to the `dead` state instead and stops blocking its group.
//!
//! `receive` is one write transaction, so two consumers can never both take a group.

use super::{EmbeddedBackend, immediate, millis, sql};
use async_trait::async_trait;
use rusqlite::params;
use seatgate::domain::SeatMessage;
use seatgate::ports::{Delivery, HandBack, QueueConsumer, QueueError, SeatQueue, StoreError};
use std::time::Duration;

/// A busy database is SQS throttling us: retryable, nothing happened.
pub(super) fn queue_err(e: StoreError) -> QueueError {
    match e {
        StoreError::Throttled | StoreError::TransactionConflict => QueueError::Throttled,
        StoreError::Unavailable(m) | StoreError::Corrupt(m) => QueueError::Unavailable(m),
    }
}

/// A receivable message, as `receive` read it.
struct Candidate {
    seq: i64,
    message_id: String,
    group_id: String,
    body: String,
    receive_count: u32,
}

#[async_trait]
impl SeatQueue for EmbeddedBackend {
    async fn send(&self, message: &SeatMessage) -> Result<(), QueueError> {
        let body = serde_json::to_string(message)
            .map_err(|e| QueueError::Unavailable(format!("encode: {e}")))?;
        let dedup_id = message.dedup_id();
        let group_id = message.group_id().to_owned();
        self.run(move |conn, ctx| {
            let now = ctx.clock.now().0;
            immediate(conn, |tx| {
                // Expired ids are forgotten here rather than by a sweeper: the table stays as
                // small as the window, and the expiry index makes this a range delete.
                tx.prepare_cached("DELETE FROM queue_dedup WHERE expires_at <= ?1")
                    .and_then(|mut s| s.execute([now]))
                    .map_err(sql)?;
                let fresh = tx
                    .prepare_cached(
                        "INSERT INTO queue_dedup (dedup_id, expires_at) VALUES (?1, ?2) \
                         ON CONFLICT (dedup_id) DO NOTHING",
                    )
                    .and_then(|mut s| {
                        s.execute(params![
                            dedup_id,
                            now.saturating_add(millis(ctx.config.dedup_window))
                        ])
                    })
                    .map_err(sql)?;
                if fresh == 0 {
                    return Ok(());
                }
                tx.prepare_cached(
                    "INSERT INTO queue_messages (message_id, group_id, dedup_id, body, sent_at, \
                     visible_at, receipt, receive_count, state) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?5, NULL, 0, 'ready')",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        uuid::Uuid::new_v4().to_string(),
                        group_id,
                        dedup_id,
                        body,
                        now
                    ])
                })
                .map_err(sql)?;
                Ok(())
            })
        })
        .await
        .map_err(queue_err)?;
        self.inner.queue_notify.notify_one();
        Ok(())
    }
}

#[async_trait]
impl QueueConsumer for EmbeddedBackend {
    async fn receive(&self, max: usize) -> Result<Vec<Delivery>, QueueError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        self.run(move |conn, ctx| {
            let now = ctx.clock.now().0;
            let visible_at = now.saturating_add(millis(ctx.config.visibility_timeout));
            let max_receives = ctx.config.max_receive_count;
            immediate(conn, |tx| {
                // Receivable: not dead, in a group with nothing invisible. Groups come oldest
                // head first and each group's messages in order, as SQS hands out batches.
                let mut deliver = Vec::new();
                let mut dead = Vec::new();
                {
                    let mut stmt = tx
                        .prepare_cached(
                            "SELECT m.seq, m.message_id, m.group_id, m.body, m.receive_count \
                             FROM queue_messages m \
                             JOIN (SELECT group_id, MIN(seq) AS head FROM queue_messages \
                                   WHERE state <> 'dead' GROUP BY group_id) g \
                               ON g.group_id = m.group_id \
                             WHERE m.state <> 'dead' AND NOT EXISTS ( \
                                 SELECT 1 FROM queue_messages b \
                                 WHERE b.group_id = m.group_id AND b.state = 'inflight' \
                                   AND b.visible_at > ?1) \
                             ORDER BY g.head, m.seq",
                        )
                        .map_err(sql)?;
                    let mut rows = stmt.query([now]).map_err(sql)?;
                    while deliver.len() < max {
                        let Some(row) = rows.next().map_err(sql)? else {
                            break;
                        };
                        let c = Candidate {
                            seq: row.get(0).map_err(sql)?,
                            message_id: row.get(1).map_err(sql)?,
                            group_id: row.get(2).map_err(sql)?,
                            body: row.get(3).map_err(sql)?,
                            receive_count: row.get(4).map_err(sql)?,
                        };
                        if c.receive_count >= max_receives {
                            dead.push(c.seq);
                        } else {
                            deliver.push(c);
                        }
                    }
                }
                for seq in dead {
                    tx.prepare_cached(
                        "UPDATE queue_messages SET state = 'dead', receipt = NULL WHERE seq = ?1",
                    )
                    .and_then(|mut s| s.execute([seq]))
                    .map_err(sql)?;
                }
                let mut out = Vec::with_capacity(deliver.len());
                for c in deliver {
                    let receipt = uuid::Uuid::new_v4().to_string();
                    let receive_count = c.receive_count + 1;
                    tx.prepare_cached(
                        "UPDATE queue_messages SET state = 'inflight', receipt = ?2, \
                         visible_at = ?3, receive_count = ?4 WHERE seq = ?1",
                    )
                    .and_then(|mut s| s.execute(params![c.seq, receipt, visible_at, receive_count]))
                    .map_err(sql)?;
                    out.push(Delivery {
                        message_id: c.message_id,
                        receipt,
                        body: c.body,
                        group_id: c.group_id,
                        receive_count,
                    });
                }
                Ok(out)
            })
        })
        .await
        .map_err(queue_err)
    }

    async fn delete(&self, receipts: &[String]) -> Result<(), QueueError> {
        if receipts.is_empty() {
            return Ok(());
        }
        let deleted = delete_in(self, "queue_messages", receipts).await?;
        if deleted > 0 {
            // The group may have its next message ready now.
            self.inner.queue_notify.notify_one();
        }
        Ok(())
    }
}

#[async_trait]
impl HandBack for EmbeddedBackend {
    async fn hand_back(&self, receipts: &[String], after: Duration) -> Result<(), QueueError> {
        hand_back_in(self, "queue_messages", receipts, after).await
    }
}

/// Deletes in-flight messages of `table` (a queue table) by receipt, for both embedded queues;
/// returns how many went. A receipt that names nothing in flight is ignored, as in SQS.
pub(super) async fn delete_in(
    backend: &EmbeddedBackend,
    table: &'static str,
    receipts: &[String],
) -> Result<usize, QueueError> {
    let receipts = receipts.to_vec();
    backend
        .run(move |conn, _| {
            immediate(conn, |tx| {
                let mut stmt = tx
                    .prepare_cached(&format!(
                        "DELETE FROM {table} WHERE receipt = ?1 AND state = 'inflight'"
                    ))
                    .map_err(sql)?;
                let mut deleted = 0;
                for r in &receipts {
                    deleted += stmt.execute([r]).map_err(sql)?;
                }
                Ok(deleted)
            })
        })
        .await
        .map_err(queue_err)
}

/// Makes in-flight messages of `table` (a queue table: `receipt`, `state`, `visible_at`)
/// visible again `after` from now: SQS `ChangeMessageVisibility`, for both embedded queues.
pub(super) async fn hand_back_in(
    backend: &EmbeddedBackend,
    table: &'static str,
    receipts: &[String],
    after: Duration,
) -> Result<(), QueueError> {
    if receipts.is_empty() {
        return Ok(());
    }
    let receipts = receipts.to_vec();
    backend
        .run(move |conn, ctx| {
            let visible_at = ctx.clock.now().0.saturating_add(millis(after));
            immediate(conn, |tx| {
                let mut stmt = tx
                    .prepare_cached(&format!(
                        "UPDATE {table} SET visible_at = ?2 \
                         WHERE receipt = ?1 AND state = 'inflight'"
                    ))
                    .map_err(sql)?;
                for r in &receipts {
                    stmt.execute(params![r, visible_at]).map_err(sql)?;
                }
                Ok(())
            })
        })
        .await
        .map_err(queue_err)
}

impl EmbeddedBackend {
    /// The dead-letter queue's messages, oldest first (`receipt` is empty: they cannot be
    /// deleted through the source queue).
    pub async fn dead_letters(&self) -> Result<Vec<Delivery>, QueueError> {
        self.read(move |conn, _| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT message_id, body, group_id, receive_count FROM queue_messages \
                     WHERE state = 'dead' ORDER BY seq",
                )
                .map_err(sql)?;
            let rows = stmt
                .query_map([], |r| {
                    Ok(Delivery {
                        message_id: r.get(0)?,
                        receipt: String::new(),
                        body: r.get(1)?,
                        group_id: r.get(2)?,
                        receive_count: r.get(3)?,
                    })
                })
                .map_err(sql)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(sql)
        })
        .await
        .map_err(queue_err)
    }
}
