//! Seat and room reads through a two-level single-flight cache, so a storm of reads costs the
//! upstream at most one call per key per `read_ttl`, fleet-wide.
//!
//! - In-process: a moka cache whose `try_get_with` runs one load per key at a time and hands its
//!   result to every concurrent caller. A leader whose future is dropped (its client went away)
//!   does not poison the others: moka lets the next waiter run the load instead. Entries live
//!   `instance_cache_ttl`, so another instance's writes are seen that late at most.
//! - Shared: the store's entry for the key ([`Readings`]). A fresh reading is served as is. A
//!   stale or missing one is refreshed by the one instance whose conditional write takes the
//!   refresh lease; the others serve the last reading marked `stale` meanwhile (or, with nothing
//!   to serve yet, wait for the refresher's reading for at most its lease).
//! - While the breaker is open no refresh is attempted: the last reading is served stale, or the
//!   read fails `Unavailable` with the time to come back.
//!
//! What this system does to a seat is written through at once ([`SeatReads::record_outcome`]):
//! a reservation that succeeded marks its seat taken, so no reader is told a seat is free that
//! was just reserved here. A room's map is overlaid with the newer of its seats' own readings
//! for the same reason.

use super::breaker::GuardedUpstream;
use crate::config::Timing;
use crate::domain::{
    CacheEntry, Millis, ReadKey, ReadValue, Reading, RefreshLease, RoomId, SeatId,
};
use crate::ports::{Clock, MAX_BATCH_READ, ReadError, Readings, StoreError, Upstream};
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use tracing::{info, warn};

/// A reading as served: `stale` when older than `read_ttl` at the time it is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    pub reading: Reading,
    pub stale: bool,
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SeatReadError {
    #[error("no such room")]
    NoSuchRoom,
    /// Nothing to serve: the upstream is unavailable (or its breaker open) and no reading is
    /// cached. Worth asking again at `retry_at`.
    #[error("the upstream is unavailable and nothing is cached")]
    Unavailable { retry_at: Millis },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An in-process entry: the reading, and whether it was already stale when loaded (then it is
/// served stale for the entry's life; one that went stale since is loaded again).
#[derive(Debug, Clone)]
struct Local {
    reading: Reading,
    stale_when_loaded: bool,
}

pub struct SeatReads {
    local: moka::future::Cache<ReadKey, Local>,
    store: Arc<dyn Readings>,
    upstream: Arc<GuardedUpstream>,
    clock: Arc<dyn Clock>,
    timing: Timing,
    holder: String,
}

/// How often a caller with nothing to serve looks for the refresher's reading.
const FOLLOW_POLL: Duration = Duration::from_millis(20);

impl SeatReads {
    pub fn new(
        store: Arc<dyn Readings>,
        upstream: Arc<GuardedUpstream>,
        clock: Arc<dyn Clock>,
        timing: &Timing,
    ) -> Self {
        SeatReads {
            local: moka::future::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(timing.instance_cache_ttl)
                .build(),
            store,
            upstream,
            clock,
            timing: timing.clone(),
            holder: format!("i-{}", uuid::Uuid::new_v4().simple()),
        }
    }

    pub async fn seat(&self, seat_id: &SeatId) -> Result<Served, SeatReadError> {
        self.read(ReadKey::Seat(seat_id.clone())).await
    }

    pub async fn room(&self, room_id: &RoomId) -> Result<Served, SeatReadError> {
        let served = self.read(ReadKey::Room(room_id.clone())).await?;
        if served.reading.value == ReadValue::NoSuchRoom {
            return Err(SeatReadError::NoSuchRoom);
        }
        Ok(served)
    }

    async fn read(&self, key: ReadKey) -> Result<Served, SeatReadError> {
        let mut local = self.cached(&key).await?;
        let stale = |r: &Reading| !r.is_fresh(self.clock.now(), self.timing.read_ttl);
        if !local.stale_when_loaded && stale(&local.reading) {
            // Went stale in this instance's cache: the shared entry may already be fresher.
            self.local.invalidate(&key).await;
            local = self.cached(&key).await?;
        }
        let stale = stale(&local.reading);
        Ok(Served {
            reading: local.reading,
            stale,
        })
    }

    async fn cached(&self, key: &ReadKey) -> Result<Local, SeatReadError> {
        self.local
            .try_get_with(key.clone(), async {
                let reading = self.load(key.clone()).await?;
                let stale_when_loaded = !reading.is_fresh(self.clock.now(), self.timing.read_ttl);
                Ok::<_, SeatReadError>(Local {
                    reading,
                    stale_when_loaded,
                })
            })
            .await
            .map_err(|e| (*e).clone())
    }

    /// What this system just learned about a seat (a reservation won or a seat found taken, at
    /// `at`): recorded in the store unless something newer is, and dropped from this instance's
    /// copy so the next read here sees it.
    pub async fn record_outcome(&self, seat_id: &SeatId, available: bool, at: Millis) {
        let reading = Reading::seat(seat_id.clone(), available, at);
        if let Err(e) = self.store.record(&reading).await {
            warn!(seat_id = %seat_id, error = %e, "could not write the seat's reading through");
        }
        self.local.invalidate(&reading.key).await;
    }

    /// The load behind one in-process miss.
    async fn load(&self, key: ReadKey) -> Result<Reading, SeatReadError> {
        let now = self.clock.now();
        let entry = self.store.entry(&key).await?.unwrap_or_default();
        let reading = match entry.reading.clone() {
            Some(r) if r.is_fresh(now, self.timing.read_ttl) => r,
            stale => self.refresh(&key, stale, now).await?,
        };
        self.overlay(reading).await
    }

    /// Refreshes a stale or missing reading if this instance gets the lease; otherwise serves
    /// what there is.
    async fn refresh(
        &self,
        key: &ReadKey,
        stale: Option<Reading>,
        now: Millis,
    ) -> Result<Reading, SeatReadError> {
        if let Some(until) = self.upstream.breaker().shut_until().await {
            return stale.ok_or(SeatReadError::Unavailable { retry_at: until });
        }
        let lease = RefreshLease {
            holder: self.holder.clone(),
            since: now,
            until: now.plus(self.timing.upstream_call_lease()),
        };
        let stale_before = now.minus(self.timing.read_ttl);
        if !self.store.lease_refresh(key, &lease, stale_before).await? {
            return match stale {
                Some(r) => Ok(r),
                None => self.follow(key, lease.until).await,
            };
        }
        let value = match key {
            ReadKey::Seat(seat_id) => self
                .upstream
                .seat(seat_id)
                .await
                .map(|available| ReadValue::Seat { available }),
            ReadKey::Room(room_id) => match self.upstream.room(room_id).await {
                Ok(seats) => Ok(ReadValue::Room { seats }),
                // Cached like any answer, so a flood of reads of an unknown room costs one call
                // per TTL too.
                Err(ReadError::NoSuchRoom) => Ok(ReadValue::NoSuchRoom),
                Err(e) => Err(e),
            },
        };
        match value {
            Ok(value) => {
                let reading = Reading {
                    key: key.clone(),
                    value,
                    as_of: now,
                };
                if self.store.record(&reading).await? {
                    info!(key = %key.as_key(), "reading refreshed from the upstream");
                    Ok(reading)
                } else {
                    // Something newer was written meanwhile (a reservation here): serve that.
                    Ok(self
                        .store
                        .entry(key)
                        .await?
                        .and_then(|e| e.reading)
                        .unwrap_or(reading))
                }
            }
            Err(e) => {
                let retry_at = match e {
                    ReadError::CircuitOpen(until) => until,
                    _ => self.clock.now().plus(self.timing.instance_cache_ttl),
                };
                warn!(key = %key.as_key(), error = %e, "refresh failed; serving what is cached");
                stale.ok_or(SeatReadError::Unavailable { retry_at })
            }
        }
    }

    /// Another instance refreshes a key nothing is cached for yet: wait for its reading, for at
    /// most its lease, and no longer than its one upstream call can take (past that the
    /// refresher failed, and a reader should hear so rather than hang).
    async fn follow(&self, key: &ReadKey, lease_until: Millis) -> Result<Reading, SeatReadError> {
        let give_up = lease_until.min(
            self.clock
                .now()
                .plus(self.timing.upstream_timeout + FOLLOW_POLL * 5),
        );
        while self.clock.now() < give_up {
            tokio::time::sleep(FOLLOW_POLL).await;
            if let Some(reading) = self.store.entry(key).await?.and_then(|e| e.reading) {
                return Ok(reading);
            }
        }
        Err(SeatReadError::Unavailable {
            retry_at: self.clock.now(),
        })
    }

    /// A room's map, with each seat this system wrote a newer reading for (a reservation since
    /// the map was read) shown as that reading says.
    async fn overlay(&self, mut reading: Reading) -> Result<Reading, SeatReadError> {
        let ReadValue::Room { seats } = &mut reading.value else {
            return Ok(reading);
        };
        let keys: Vec<ReadKey> = seats
            .iter()
            .map(|s| ReadKey::Seat(s.seat_id.clone()))
            .collect();
        for chunk in keys.chunks(MAX_BATCH_READ) {
            for (key, entry) in self.store.entries(chunk).await? {
                let (
                    ReadKey::Seat(seat_id),
                    CacheEntry {
                        reading: Some(r), ..
                    },
                ) = (key, entry)
                else {
                    continue;
                };
                if r.as_of > reading.as_of
                    && let (Some(available), Some(seat)) = (
                        r.seat_available(),
                        seats.iter_mut().find(|s| s.seat_id == seat_id),
                    )
                {
                    seat.available = available;
                }
            }
        }
        Ok(reading)
    }
}
