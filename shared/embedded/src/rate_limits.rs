//! The per-user rate limit's window counters: one upsert per request, conditional on the
//! count being below the limit, as DynamoDB's `UpdateItem` with a condition does. The same
//! write deletes the user's earlier windows on that route, which are worthless once a newer
//! one exists: the embedded stand-in for the counter items' TTL.

use super::{Cached, EmbeddedBackend, immediate, sql};
use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};
use seatgate::domain::RateWindow;
use seatgate::ports::{RateLimits, StoreError};

#[async_trait]
impl RateLimits for EmbeddedBackend {
    async fn take(&self, window: &RateWindow, limit: u32) -> Result<bool, StoreError> {
        let window = window.clone();
        self.run(move |conn, _| {
            immediate(conn, |tx| {
                let (user, route) = (window.user.as_str(), window.route.as_str());
                tx.exec(
                    "DELETE FROM rate_windows WHERE user_id = ?1 AND route = ?2 AND start < ?3",
                    params![user, route, window.start.0],
                )
                .map_err(sql)?;
                let stored: Option<u32> = tx
                    .one(
                        "SELECT count FROM rate_windows \
                         WHERE user_id = ?1 AND route = ?2 AND start = ?3",
                        params![user, route, window.start.0],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(sql)?;
                // Decided on what the write-locked transaction read: the domain's rule.
                if !RateWindow::admits(stored, limit) {
                    return Ok(false);
                }
                tx.exec(
                    "INSERT INTO rate_windows (user_id, route, start, count, ends_at) \
                     VALUES (?1, ?2, ?3, 1, ?4) \
                     ON CONFLICT (user_id, route, start) DO UPDATE SET count = count + 1",
                    params![user, route, window.start.0, window.ends_at.0],
                )
                .map_err(sql)?;
                Ok(true)
            })
        })
        .await
    }
}
