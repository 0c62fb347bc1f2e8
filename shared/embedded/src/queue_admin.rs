//! The operator's levers on both embedded queues: their depths, and dead letters moved back.
//!
//! A redrive is one write transaction over both queue tables, so two redrives at once are
//! serialised by the writer and the second finds nothing the first moved: each dead letter moves
//! exactly once. A moved message is a new message at the tail of its queue (a new message id, a
//! fresh receive count), as SQS's own redrive makes it, rather than the dead row revived in
//! place: revived, a seat message would jump ahead of its group's later messages.

use super::queue::queue_err;
use super::{Cached, EmbeddedBackend, sql};
use async_trait::async_trait;
use rusqlite::{Transaction, params};
use seatgate::ports::{QueueAdmin, QueueDepth, QueueDepths, QueueError, Redriven, StoreError};

/// The two queue tables and what a moved row keeps (the events table has no groups and no
/// deduplication ids).
#[derive(Clone, Copy)]
enum Table {
    Seat,
    Events,
}

impl Table {
    fn name(self) -> &'static str {
        match self {
            Table::Seat => "queue_messages",
            Table::Events => "events",
        }
    }
}

fn depth_in(conn: &rusqlite::Connection, table: Table, now: i64) -> Result<QueueDepth, StoreError> {
    conn.one(
        &format!(
            "SELECT \
               COALESCE(SUM(state = 'ready' OR (state = 'inflight' AND visible_at <= ?1)), 0), \
               COALESCE(SUM(state = 'inflight' AND visible_at > ?1), 0), \
               COALESCE(SUM(state = 'dead'), 0) FROM {}",
            table.name()
        ),
        [now],
        |r| {
            let n = |i| r.get::<_, i64>(i).map(|v| v as u64);
            Ok(QueueDepth {
                ready: n(0)?,
                in_flight: n(1)?,
                dead: n(2)?,
            })
        },
    )
    .map_err(sql)
}

/// Moves up to `limit` dead rows of `table` to its tail; returns how many moved and whether
/// dead rows are left.
fn redrive_in(
    tx: &Transaction<'_>,
    table: Table,
    limit: usize,
    now: i64,
) -> Result<(u64, bool), StoreError> {
    let name = table.name();
    let dead: Vec<i64> = {
        let mut stmt = tx
            .prepare_cached(&format!(
                "SELECT seq FROM {name} WHERE state = 'dead' ORDER BY seq LIMIT ?1"
            ))
            .map_err(sql)?;
        let rows = stmt
            .query_map([limit as i64 + 1], |r| r.get(0))
            .map_err(sql)?;
        rows.collect::<Result<_, _>>().map_err(sql)?
    };
    let more = dead.len() > limit;
    let copy = match table {
        Table::Seat => {
            "INSERT INTO queue_messages (message_id, group_id, dedup_id, body, sent_at, \
             visible_at, receipt, receive_count, state) \
             SELECT ?2, group_id, dedup_id, body, ?3, ?3, NULL, 0, 'ready' \
             FROM queue_messages WHERE seq = ?1"
        }
        Table::Events => {
            "INSERT INTO events (message_id, body, sent_at, visible_at, receipt, receive_count, \
             state) SELECT ?2, body, ?3, ?3, NULL, 0, 'ready' FROM events WHERE seq = ?1"
        }
    };
    let remove = format!("DELETE FROM {name} WHERE seq = ?1 AND state = 'dead'");
    let mut moved = 0;
    for seq in dead.into_iter().take(limit) {
        tx.exec(copy, params![seq, uuid::Uuid::new_v4().to_string(), now])
            .map_err(sql)?;
        moved += tx.exec(&remove, [seq]).map_err(sql)? as u64;
    }
    Ok((moved, more))
}

#[async_trait]
impl QueueAdmin for EmbeddedBackend {
    async fn depths(&self) -> Result<QueueDepths, QueueError> {
        self.read(move |conn, ctx| {
            let now = ctx.clock.now().0;
            Ok(QueueDepths {
                seat_messages: depth_in(conn, Table::Seat, now)?,
                webhook_deliveries: depth_in(conn, Table::Events, now)?,
            })
        })
        .await
        .map_err(queue_err)
    }

    async fn redrive(&self, limit: usize) -> Result<Redriven, QueueError> {
        let moved = self
            .run(move |tx, ctx| {
                let now = ctx.clock.now().0;
                let (seat_messages, seats_left) = redrive_in(tx, Table::Seat, limit, now)?;
                let (webhook_deliveries, events_left) = redrive_in(tx, Table::Events, limit, now)?;
                Ok::<_, StoreError>(Redriven {
                    seat_messages,
                    webhook_deliveries,
                    more: seats_left || events_left,
                })
            })
            .await
            .map_err(queue_err)?;
        if moved.seat_messages > 0 {
            self.inner.queue_notify.notify_one();
        }
        Ok(moved)
    }
}
