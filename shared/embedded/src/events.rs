//! The event queue on SQLite: the embedded stand-in for the standard SQS queue of
//! terminal-intent events (see `seatgate_aws::events`).
//!
//! A plain queue, no groups: any ready message (or one whose visibility ran out) is receivable,
//! oldest first. A message received more than `event_max_receive_count` times is parked as
//! `dead`, the dead-letter queue's stand-in. Reached through [`EmbeddedBackend::events`], a view
//! of the same database, because the backend's own `QueueConsumer` is the seat queue.

use super::queue::queue_err;
use super::{EmbeddedBackend, immediate, millis, sql};
use async_trait::async_trait;
use rusqlite::params;
use seatgate::domain::Event;
use seatgate::ports::{Delivery, EventQueue, HandBack, QueueConsumer, QueueError};
use std::time::Duration;

/// The event queue of an [`EmbeddedBackend`].
#[derive(Debug, Clone)]
pub struct EmbeddedEvents {
    backend: EmbeddedBackend,
}

impl EmbeddedBackend {
    /// The event queue in this database.
    pub fn events(&self) -> EmbeddedEvents {
        EmbeddedEvents {
            backend: self.clone(),
        }
    }
}

impl EmbeddedEvents {
    /// Messages parked as dead (for tests and operators).
    pub async fn dead(&self) -> Result<Vec<String>, QueueError> {
        self.backend
            .read(move |conn, _| {
                let mut stmt = conn
                    .prepare_cached("SELECT body FROM events WHERE state = 'dead' ORDER BY seq")
                    .map_err(sql)?;
                let rows = stmt.query_map([], |r| r.get(0)).map_err(sql)?;
                rows.collect::<Result<Vec<String>, _>>().map_err(sql)
            })
            .await
            .map_err(queue_err)
    }
}

#[async_trait]
impl EventQueue for EmbeddedEvents {
    async fn enqueue(&self, event: &Event) -> Result<(), QueueError> {
        let body = serde_json::to_string(event)
            .map_err(|e| QueueError::Unavailable(format!("encoding an event: {e}")))?;
        self.backend
            .run(move |conn, ctx| {
                let now = ctx.clock.now().0;
                immediate(conn, |tx| {
                    tx.prepare_cached(
                        "INSERT INTO events (message_id, body, sent_at, visible_at, state) \
                         VALUES (?1, ?2, ?3, ?3, 'ready')",
                    )
                    .and_then(|mut s| {
                        s.execute(params![uuid::Uuid::new_v4().to_string(), body, now])
                    })
                    .map_err(sql)?;
                    Ok(())
                })
            })
            .await
            .map_err(queue_err)
    }
}

#[async_trait]
impl QueueConsumer for EmbeddedEvents {
    async fn receive(&self, max: usize) -> Result<Vec<Delivery>, QueueError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        self.backend
            .run(move |conn, ctx| {
                let now = ctx.clock.now().0;
                let visible_at = now.saturating_add(millis(ctx.config.event_visibility_timeout));
                let max_receives = ctx.config.event_max_receive_count;
                immediate(conn, |tx| {
                    let candidates: Vec<(i64, String, String, u32)> = {
                        let mut stmt = tx
                            .prepare_cached(
                                "SELECT seq, message_id, body, receive_count FROM events \
                                 WHERE state <> 'dead' AND visible_at <= ?1 \
                                 ORDER BY seq LIMIT ?2",
                            )
                            .map_err(sql)?;
                        let rows = stmt
                            .query_map(params![now, max as i64], |r| {
                                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                            })
                            .map_err(sql)?;
                        rows.collect::<Result<_, _>>().map_err(sql)?
                    };
                    let mut out = Vec::with_capacity(candidates.len());
                    for (seq, message_id, body, count) in candidates {
                        if count >= max_receives {
                            tx.prepare_cached(
                                "UPDATE events SET state = 'dead', receipt = NULL WHERE seq = ?1",
                            )
                            .and_then(|mut s| s.execute([seq]))
                            .map_err(sql)?;
                            continue;
                        }
                        let receipt = uuid::Uuid::new_v4().to_string();
                        tx.prepare_cached(
                            "UPDATE events SET state = 'inflight', receipt = ?2, visible_at = ?3, \
                             receive_count = ?4 WHERE seq = ?1",
                        )
                        .and_then(|mut s| s.execute(params![seq, receipt, visible_at, count + 1]))
                        .map_err(sql)?;
                        out.push(Delivery {
                            message_id,
                            receipt,
                            body,
                            group_id: String::new(),
                            receive_count: count + 1,
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
        super::queue::delete_in(&self.backend, "events", receipts)
            .await
            .map(drop)
    }
}

#[async_trait]
impl HandBack for EmbeddedEvents {
    async fn hand_back(&self, receipts: &[String], after: Duration) -> Result<(), QueueError> {
        super::queue::hand_back_in(&self.backend, "events", receipts, after).await
    }
}
