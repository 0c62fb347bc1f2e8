//! The state instances share to protect the upstream (`Readings`, `BreakerStates`): the
//! seat-read cache's entries, the circuit breaker and the routes' `Retry-After` pauses.
//!
//! Each write decides with the domain's own rule on the stored item ([`CacheEntry::may_lease`],
//! [`CacheEntry::may_record`], [`CacheEntry::may_record_failure`], the breaker's generation,
//! [`RoutePauses::may_extend`]) and writes only if it allows: what the DynamoDB adapter's
//! condition expressions and the embedded transactions say.

use crate::faults::Op;
use crate::{MemoryBackend, Tx};
use async_trait::async_trait;
use seatgate::domain::{
    BreakerState, CacheEntry, Millis, ReadFailure, ReadKey, Reading, RefreshLease, RoutePauses,
    UpstreamRoute,
};
use seatgate::ports::{BreakerStates, Readings, StoreError};

#[async_trait]
impl Readings for MemoryBackend {
    async fn entry(&self, key: &ReadKey) -> Result<Option<CacheEntry>, StoreError> {
        self.timed(Op::ReadingEntry, |tx| {
            Ok(tx.state.readings.get(&key.as_key()).cloned())
        })
        .await
    }

    async fn entries(&self, keys: &[ReadKey]) -> Result<Vec<(ReadKey, CacheEntry)>, StoreError> {
        seatgate::ports::within_batch_read(keys.len())?;
        self.timed(Op::ReadingEntries, |tx| {
            Ok(keys
                .iter()
                .filter_map(|k| {
                    tx.state
                        .readings
                        .get(&k.as_key())
                        .map(|e| (k.clone(), e.clone()))
                })
                .collect())
        })
        .await
    }

    async fn lease_refresh(
        &self,
        key: &ReadKey,
        lease: &RefreshLease,
        stale_before: Millis,
    ) -> Result<bool, StoreError> {
        self.timed(Op::LeaseRefresh, |tx| {
            let key = key.as_key();
            let entry = tx.state.readings.get(&key);
            if !CacheEntry::may_lease(entry, lease, stale_before) {
                return Ok(false);
            }
            let mut entry = entry.cloned().unwrap_or_default();
            entry.lease = Some(lease.clone());
            tx.log(&(&key, &entry));
            tx.state.readings.insert(key, entry);
            Ok(true)
        })
        .await
    }

    async fn record(&self, reading: &Reading) -> Result<bool, StoreError> {
        self.timed(Op::RecordReading, |tx| Ok(record_in(tx, reading)))
            .await
    }

    async fn record_failure(
        &self,
        key: &ReadKey,
        failure: &ReadFailure,
    ) -> Result<bool, StoreError> {
        self.timed(Op::RecordReadFailure, |tx| {
            let key = key.as_key();
            let entry = tx.state.readings.get(&key);
            if !CacheEntry::may_record_failure(entry, failure) {
                return Ok(false);
            }
            let mut entry = entry.cloned().unwrap_or_default();
            entry.failure = Some(failure.clone());
            tx.log(&(&key, &entry));
            tx.state.readings.insert(key, entry);
            Ok(true)
        })
        .await
    }
}

#[async_trait]
impl BreakerStates for MemoryBackend {
    async fn breaker(&self) -> Result<BreakerState, StoreError> {
        self.timed(Op::Breaker, |tx| {
            Ok(tx.state.breaker.clone().unwrap_or_default())
        })
        .await
    }

    async fn swap_breaker(&self, next: &BreakerState) -> Result<bool, StoreError> {
        self.timed(Op::SwapBreaker, |tx| {
            // A breaker never written is the closed one, at generation 0.
            let stored = tx.state.breaker.clone().unwrap_or_default().generation;
            if stored + 1 != next.generation {
                return Ok(false);
            }
            tx.log(next);
            tx.state.breaker = Some(next.clone());
            Ok(true)
        })
        .await
    }

    async fn pauses(&self) -> Result<RoutePauses, StoreError> {
        self.timed(Op::UpstreamPauses, |tx| Ok(tx.state.route_pauses.clone()))
            .await
    }

    async fn pause(&self, route: UpstreamRoute, until: Millis) -> Result<bool, StoreError> {
        self.timed(Op::UpstreamPause, |tx| {
            if !tx.state.route_pauses.may_extend(route, until) {
                return Ok(false);
            }
            tx.log(&(route, until));
            tx.state.route_pauses = tx.state.route_pauses.extended(route, until);
            Ok(true)
        })
        .await
    }
}

/// Records `reading` unless the entry holds a newer one (a recorded reading clears a failed
/// refresh), inside the caller's call; `true` when recorded.
pub(crate) fn record_in(tx: &mut Tx<'_>, reading: &Reading) -> bool {
    let key = reading.key.as_key();
    let entry = tx.state.readings.get(&key);
    if !CacheEntry::may_record(entry, reading) {
        return false;
    }
    if tx.config.planted(crate::StorePlant::ReadingNotShared) {
        return true;
    }
    let mut entry = entry.cloned().unwrap_or_default();
    entry.reading = Some(reading.clone());
    entry.failure = None;
    let what = match tx.op {
        Op::Transition => "transition.reading",
        op => op.name(),
    };
    tx.log_as(what, &(&key, &entry));
    tx.state.readings.insert(key, entry);
    true
}
