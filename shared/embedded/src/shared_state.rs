//! The state instances share to protect the upstream: the seat-read cache's entries, the
//! circuit breaker and the routes' `Retry-After` pauses, on SQLite (in the table `upstream_holds`, its first name:
//! stored tables are not renamed).
//!
//! Each write is one `BEGIN IMMEDIATE` transaction that reads the row and decides with the
//! domain's own rule ([`CacheEntry::may_lease`], [`CacheEntry::may_record`],
//! [`CacheEntry::may_record_failure`], the breaker's generation, [`RoutePauses::may_extend`]),
//! exactly what the DynamoDB adapter's condition expressions say.

use super::{Cached, EmbeddedBackend, from_json, immediate, sql, to_json};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use seatgate::domain::{
    BreakerState, CacheEntry, Millis, ReadFailure, ReadKey, Reading, RefreshLease, RoutePauses,
    UpstreamRoute,
};
use seatgate::ports::{BreakerStates, Readings, StoreError};

/// The one breaker's row.
const BREAKER: &str = "upstream";

fn load_entry(conn: &Connection, key: &str) -> Result<Option<CacheEntry>, StoreError> {
    let item: Option<String> = conn
        .prepare_cached("SELECT item FROM readings WHERE key = ?1")
        .map_err(sql)?
        .query_row([key], |r| r.get(0))
        .optional()
        .map_err(sql)?;
    item.map(|json| from_json("reading", &json)).transpose()
}

fn store_entry(conn: &Connection, key: &str, entry: &CacheEntry) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO readings (key, item) VALUES (?1, ?2) \
         ON CONFLICT (key) DO UPDATE SET item = excluded.item",
    )
    .map_err(sql)?
    .execute(params![key, to_json(entry)?])
    .map_err(sql)?;
    Ok(())
}

#[async_trait]
impl Readings for EmbeddedBackend {
    async fn entry(&self, key: &ReadKey) -> Result<Option<CacheEntry>, StoreError> {
        let key = key.as_key();
        self.read(move |conn, _| load_entry(conn, &key)).await
    }

    async fn entries(&self, keys: &[ReadKey]) -> Result<Vec<(ReadKey, CacheEntry)>, StoreError> {
        seatgate::ports::within_batch_read(keys.len())?;
        let keys = keys.to_vec();
        self.read(move |conn, _| {
            let mut found = Vec::new();
            for key in keys {
                if let Some(entry) = load_entry(conn, &key.as_key())? {
                    found.push((key, entry));
                }
            }
            Ok(found)
        })
        .await
    }

    async fn lease_refresh(
        &self,
        key: &ReadKey,
        lease: &RefreshLease,
        stale_before: Millis,
    ) -> Result<bool, StoreError> {
        let (key, lease) = (key.as_key(), lease.clone());
        self.run(move |conn, _| {
            immediate(conn, |tx| {
                let entry = load_entry(tx, &key)?;
                if !CacheEntry::may_lease(entry.as_ref(), &lease, stale_before) {
                    return Ok(false);
                }
                let mut entry = entry.unwrap_or_default();
                entry.lease = Some(lease);
                store_entry(tx, &key, &entry)?;
                Ok(true)
            })
        })
        .await
    }

    async fn record(&self, reading: &Reading) -> Result<bool, StoreError> {
        let reading = reading.clone();
        self.run(move |conn, _| immediate(conn, |tx| record_in(tx, &reading)))
            .await
    }

    async fn record_failure(
        &self,
        key: &ReadKey,
        failure: &ReadFailure,
    ) -> Result<bool, StoreError> {
        let (key, failure) = (key.as_key(), failure.clone());
        self.run(move |conn, _| {
            immediate(conn, |tx| {
                let entry = load_entry(tx, &key)?;
                if !CacheEntry::may_record_failure(entry.as_ref(), &failure) {
                    return Ok(false);
                }
                let mut entry = entry.unwrap_or_default();
                entry.failure = Some(failure);
                store_entry(tx, &key, &entry)?;
                Ok(true)
            })
        })
        .await
    }
}

/// Records `reading` unless the entry holds a newer one, inside the caller's write transaction
/// (a recorded reading clears a failed refresh); `Ok(true)` when recorded.
pub(crate) fn record_in(tx: &Connection, reading: &Reading) -> Result<bool, StoreError> {
    let key = reading.key.as_key();
    let entry = load_entry(tx, &key)?;
    if !CacheEntry::may_record(entry.as_ref(), reading) {
        return Ok(false);
    }
    let mut entry = entry.unwrap_or_default();
    entry.reading = Some(reading.clone());
    entry.failure = None;
    store_entry(tx, &key, &entry)?;
    Ok(true)
}

fn load_pauses(conn: &Connection) -> Result<RoutePauses, StoreError> {
    let mut pauses = RoutePauses::default();
    let mut stmt = conn
        .prepare_cached("SELECT route, until_ms FROM upstream_holds")
        .map_err(sql)?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
        .map_err(sql)?;
    for row in rows {
        let (route, until) = row.map_err(sql)?;
        let route = UpstreamRoute::ALL
            .into_iter()
            .find(|r| r.as_str() == route)
            .ok_or_else(|| StoreError::Corrupt(format!("upstream_holds.route {route}")))?;
        pauses.0.insert(route, Millis(until));
    }
    Ok(pauses)
}

fn load_breaker(conn: &Connection) -> Result<BreakerState, StoreError> {
    let item: Option<String> = conn
        .prepare_cached("SELECT item FROM breakers WHERE name = ?1")
        .map_err(sql)?
        .query_row([BREAKER], |r| r.get(0))
        .optional()
        .map_err(sql)?;
    Ok(item
        .map(|json| from_json::<BreakerState>("breaker", &json))
        .transpose()?
        .unwrap_or_default())
}

#[async_trait]
impl BreakerStates for EmbeddedBackend {
    async fn breaker(&self) -> Result<BreakerState, StoreError> {
        self.read(|conn, _| load_breaker(conn)).await
    }

    async fn swap_breaker(&self, next: &BreakerState) -> Result<bool, StoreError> {
        let next = next.clone();
        self.run(move |conn, _| {
            immediate(conn, |tx| {
                if load_breaker(tx)?.generation + 1 != next.generation {
                    return Ok(false);
                }
                tx.exec(
                    "INSERT INTO breakers (name, generation, item) VALUES (?1, ?2, ?3) \
                     ON CONFLICT (name) DO UPDATE SET generation = excluded.generation, \
                     item = excluded.item",
                    params![BREAKER, super::int(next.generation), to_json(&next)?],
                )
                .map_err(sql)?;
                Ok(true)
            })
        })
        .await
    }

    async fn pauses(&self) -> Result<RoutePauses, StoreError> {
        self.read(|conn, _| load_pauses(conn)).await
    }

    async fn pause(&self, route: UpstreamRoute, until: Millis) -> Result<bool, StoreError> {
        self.run(move |conn, _| {
            immediate(conn, |tx| {
                if !load_pauses(tx)?.may_extend(route, until) {
                    return Ok(false);
                }
                tx.exec(
                    "INSERT INTO upstream_holds (route, until_ms) VALUES (?1, ?2) \
                     ON CONFLICT (route) DO UPDATE SET until_ms = excluded.until_ms",
                    params![route.as_str(), until.0],
                )
                .map_err(sql)?;
                Ok(true)
            })
        })
        .await
    }
}
