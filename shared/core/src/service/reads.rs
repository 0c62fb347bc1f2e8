//! Seat and room reads through a two-level single-flight cache, so a storm of reads costs the
//! upstream at most one call per key per `read_ttl`, fleet-wide.
//!
//! - In-process: an [`InstanceCache`] (moka in production, the ordered cache in a seeded run)
//!   whose `try_get_with` runs one load per key at a time and hands its result to every
//!   concurrent caller. A leader whose future is dropped (its client went away) does not poison
//!   the others: the next waiter runs the load instead. Entries live `instance_cache_ttl`, so
//!   another instance's writes are seen that late at most.
//! - Shared: the store's entry for the key ([`Readings`]). A fresh reading is served as is. A
//!   stale or missing one is refreshed by the one instance whose conditional write takes the
//!   refresh lease; the others serve the last reading marked `stale` meanwhile (or, with nothing
//!   to serve yet, wait for the refresher's reading for at most its lease).
//! - While the breaker is open, or a `Retry-After` pauses the key's route, no refresh is
//!   attempted: the last reading is served stale, or the read fails `Unavailable` with the time
//!   to come back.
//! - A refresh that fails is remembered in the shared entry ([`ReadFailure`]): nobody refreshes
//!   the key again before its pause ends (the read TTL, doubling while it keeps failing, at
//!   least the `Retry-After` the upstream gave), so a failing upstream is asked about a key no
//!   more often than a healthy one. Readers meanwhile get the last reading marked stale, with
//!   the time a refresh may be tried ([`Served::retry_at`]), or `Unavailable` with that time.
//!   Recording a reading (this system reserving the seat) clears the failure at once.
//!
//! What this system does to a seat is written through at once ([`SeatReads::record_outcome`]):
//! a reservation that succeeded marks its seat taken, so no reader is told a seat is free that
//! was just reserved here. A room's map is overlaid with the newer of its seats' own readings
//! for the same reason.

use super::breaker::GuardedUpstream;
use super::with_retry;
use crate::config::Timing;
use crate::domain::{
    CacheEntry, Millis, ReadFailure, ReadKey, ReadValue, Reading, RefreshLease, RoomId, SeatId,
};
use crate::ports::{Clock, MAX_BATCH_READ, Random, ReadError, Readings, StoreError, Upstream};
use crate::service::cache::InstanceCache;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use tracing::{info, warn};

/// A reading as served: `stale` when older than `read_ttl` at the time it is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    pub reading: Reading,
    pub stale: bool,
    /// The key cannot be refreshed before this (its last refresh failed, or the breaker or a
    /// hold keeps its route back): asking again sooner gets this same reading.
    pub retry_at: Option<Millis>,
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

/// An in-process entry: the reading (none: nothing to serve), whether it was already stale
/// when loaded (then it is served stale for the entry's life; one that went stale since is
/// loaded again), and until when the key cannot be refreshed, if it cannot.
#[derive(Debug, Clone)]
struct Local {
    reading: Option<Reading>,
    stale_when_loaded: bool,
    retry_at: Option<Millis>,
}

pub struct SeatReads {
    local: Arc<dyn InstanceCache<ReadKey, Local, SeatReadError>>,
    store: Arc<dyn Readings>,
    upstream: Arc<GuardedUpstream>,
    clock: Arc<dyn Clock>,
    /// For the jittered retries of the reading's write.
    random: Arc<dyn Random>,
    timing: Timing,
    holder: String,
}

/// How often a caller with nothing to serve looks for the refresher's reading.
const FOLLOW_POLL: Duration = Duration::from_millis(20);

impl SeatReads {
    /// `holder` names this instance in refresh leases; unique among the instances sharing the
    /// store.
    pub fn new(
        ports: &super::Ports,
        upstream: Arc<GuardedUpstream>,
        holder: String,
        timing: &Timing,
    ) -> Self {
        SeatReads {
            local: ports
                .cache
                .build(100_000, timing.instance_cache_ttl, ports.clock.clone()),
            store: ports.readings.clone(),
            upstream,
            clock: ports.clock.clone(),
            random: ports.random.clone(),
            timing: timing.clone(),
            holder,
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
        let may_refresh_now = local.retry_at.is_some_and(|t| self.clock.now() >= t);
        if may_refresh_now
            || (!local.stale_when_loaded && local.reading.as_ref().is_some_and(stale))
        {
            // Went stale in this instance's cache, or the pause on refreshing it is over: the
            // shared entry may already be fresher, or this instance may refresh it now.
            self.local.invalidate(&key).await;
            local = self.cached(&key).await?;
        }
        match local.reading {
            Some(reading) => Ok(Served {
                stale: stale(&reading),
                reading,
                retry_at: local.retry_at,
            }),
            None => Err(SeatReadError::Unavailable {
                retry_at: local.retry_at.unwrap_or_else(|| self.clock.now()),
            }),
        }
    }

    async fn cached(&self, key: &ReadKey) -> Result<Local, SeatReadError> {
        self.local
            .try_get_with(
                key.clone(),
                Box::pin(async {
                    let (reading, retry_at) = self.load(key.clone()).await?;
                    let stale_when_loaded = reading
                        .as_ref()
                        .is_some_and(|r| !r.is_fresh(self.clock.now(), self.timing.read_ttl));
                    Ok::<_, SeatReadError>(Local {
                        reading,
                        stale_when_loaded,
                        retry_at,
                    })
                }),
            )
            .await
            .map_err(|e| (*e).clone())
    }

    /// What this system just learned about a seat (a reservation won or a seat found taken, at
    /// `at`): recorded in the store unless something newer is, and dropped from this instance's
    /// copy so the next read here sees it.
    pub async fn record_outcome(&self, seat_id: &SeatId, available: bool, at: Millis) {
        let reading = Reading::seat(seat_id.clone(), available, at);
        if let Err(e) = with_retry(&*self.random, || self.store.record(&reading)).await {
            warn!(seat_id = %seat_id, error = %e, "could not write the seat's reading through");
        }
        self.local.invalidate(&reading.key).await;
    }

    /// Drops this instance's copy of the seat's reading, after a write that recorded a newer one
    /// in the store (a settlement carries its reading: `TransitionRequest::reading`).
    pub async fn forget(&self, seat_id: &SeatId) {
        self.local.invalidate(&ReadKey::Seat(seat_id.clone())).await;
    }

    /// The load behind one in-process miss: the reading to serve (none: nothing to serve) and,
    /// when the key cannot be refreshed now, until when.
    async fn load(&self, key: ReadKey) -> Result<(Option<Reading>, Option<Millis>), SeatReadError> {
        let now = self.clock.now();
        let entry = self.store.entry(&key).await?.unwrap_or_default();
        let ttl = self.timing.read_ttl;
        // What this instance's own reserve probe read, if the store does not have it yet.
        let probed = self.upstream.probed(&key).filter(|p| {
            p.is_fresh(now, ttl) && entry.reading.as_ref().is_none_or(|r| r.as_of < p.as_of)
        });
        let (reading, retry_at) = match (entry.reading.clone(), probed) {
            (Some(r), _) if r.is_fresh(now, ttl) => (Some(r), None),
            (_, Some(p)) => (Some(p), None),
            _ => self.refresh(&key, entry, now).await?,
        };
        let reading = match reading {
            Some(r) => Some(self.overlay(r).await?),
            None => None,
        };
        Ok((reading, retry_at))
    }

    /// Refreshes a stale or missing reading if the key may be refreshed and this instance gets
    /// the lease; otherwise serves what there is.
    async fn refresh(
        &self,
        key: &ReadKey,
        entry: CacheEntry,
        now: Millis,
    ) -> Result<(Option<Reading>, Option<Millis>), SeatReadError> {
        let stale = entry.reading.clone();
        let not_before = |until: Millis| Ok((stale.clone(), Some(until)));
        if let Some(until) = self.upstream.breaker().blocked_until(key.route()).await {
            return not_before(until);
        }
        if let Some(until) = entry.failing_until(now) {
            return not_before(until);
        }
        let lease = RefreshLease {
            holder: self.holder.clone(),
            since: now,
            until: now.plus(self.timing.upstream_call_lease()),
        };
        let stale_before = now.minus(self.timing.read_ttl);
        if !self.store.lease_refresh(key, &lease, stale_before).await? {
            return match stale {
                Some(r) => Ok((Some(r), None)),
                None => self.follow(key, lease.until).await.map(|r| (Some(r), None)),
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
                // Retried on a store error: a reading the upstream was just asked for is what
                // spares it for a TTL; unwritten, the next reader (this instance's own lease
                // taken again, first of all) asks the upstream again. The write keeps the
                // newer reading, so a repeat is harmless. Found by the simulator's reads
                // checker (seeds 73 and 75 of the default workload, under store faults).
                if with_retry(&*self.random, || self.store.record(&reading)).await? {
                    info!(key = %key.as_key(), "reading refreshed from the upstream");
                    Ok((Some(reading), None))
                } else {
                    // Something newer was written meanwhile (a reservation here): serve that.
                    let newer = self.store.entry(key).await?.and_then(|e| e.reading);
                    Ok((Some(newer.unwrap_or(reading)), None))
                }
            }
            // Kept back after the lease was taken (the breaker opened meanwhile): no call was
            // made, so nothing failed.
            Err(ReadError::HeldBack(until)) => not_before(until),
            Err(e) => {
                let told = match &e {
                    ReadError::Busy {
                        retry_after: Some(d),
                    } => Some(self.clock.now().plus((*d).min(self.timing.retry_after_max))),
                    _ => None,
                };
                let failure = ReadFailure::after(
                    entry.failure.as_ref(),
                    now,
                    self.clock.now(),
                    self.timing.read_ttl,
                    self.timing.read_failure_max,
                    told,
                );
                warn!(key = %key.as_key(), error = %e, failures_in_a_row = failure.count, retry_in_ms = failure.until.since(now).as_millis() as u64, "refresh failed; serving what is cached");
                if let Err(store) = self.store.record_failure(key, &failure).await {
                    warn!(key = %key.as_key(), error = %store, "could not record the failed refresh");
                }
                not_before(failure.until)
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
