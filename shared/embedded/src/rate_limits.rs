//! The per-user rate limit's window counters: one upsert per request, conditional on the
//! count being below the limit, as DynamoDB's `UpdateItem` with a condition does. The same
//! write deletes the user's windows on that route from before the previous one
//! ([`RateWindow::drop_before`]): the embedded stand-in for the counter items' TTL.

use super::{Cached, EmbeddedBackend, immediate, sql};
use async_trait::async_trait;
use rusqlite::{OptionalExtension, Transaction, params};
use seatgate::domain::RateWindow;
use seatgate::ports::{RateLimits, StoreError};

#[async_trait]
impl RateLimits for EmbeddedBackend {
    async fn take(&self, window: &RateWindow, limit: u32) -> Result<bool, StoreError> {
        let window = window.clone();
        self.run(move |conn, _| immediate(conn, |tx| count(tx, &window, limit)))
            .await
    }
}

/// The window's stored count, after dropping the user's windows on its route from before the
/// previous one.
fn counted(tx: &Transaction<'_>, window: &RateWindow) -> Result<Option<u32>, StoreError> {
    let (user, route) = (window.user.as_str(), window.route.as_str());
    tx.exec(
        "DELETE FROM rate_windows WHERE user_id = ?1 AND route = ?2 AND start < ?3",
        params![user, route, window.drop_before().0],
    )
    .map_err(sql)?;
    tx.one(
        "SELECT count FROM rate_windows WHERE user_id = ?1 AND route = ?2 AND start = ?3",
        params![user, route, window.start.0],
        |r| r.get(0),
    )
    .optional()
    .map_err(sql)
}

/// Whether `window` admits one more request, read inside the caller's write transaction.
pub(crate) fn admits(
    tx: &Transaction<'_>,
    window: &RateWindow,
    limit: u32,
) -> Result<bool, StoreError> {
    Ok(RateWindow::admits(counted(tx, window)?, limit))
}

/// Counts one request in `window` if it admits one (the domain's rule, decided on what the
/// write-locked transaction read); `Ok(true)` when counted.
pub(crate) fn count(
    tx: &Transaction<'_>,
    window: &RateWindow,
    limit: u32,
) -> Result<bool, StoreError> {
    if !admits(tx, window, limit)? {
        return Ok(false);
    }
    let (user, route) = (window.user.as_str(), window.route.as_str());
    tx.exec(
        "INSERT INTO rate_windows (user_id, route, start, count, ends_at) \
         VALUES (?1, ?2, ?3, 1, ?4) \
         ON CONFLICT (user_id, route, start) DO UPDATE SET count = count + 1",
        params![user, route, window.start.0, window.ends_at.0],
    )
    .map_err(sql)?;
    Ok(true)
}
