//! Cached upstream readings and the shared breaker's state, kept in the store so every
//! instance serves and protects from the same record.

use super::StoreError;
use crate::domain::{
    BreakerState, CacheEntry, Millis, ReadFailure, ReadKey, Reading, RefreshLease, RoutePauses,
    UpstreamRoute,
};
use async_trait::async_trait;

/// The shared half of the seat-read cache: one entry per key, read and written by every
/// instance (see [`crate::domain::reading`] for the rules both adapters apply).
#[async_trait]
pub trait Readings: Send + Sync {
    /// The entry for `key`, if any. One strongly consistent `GetItem`.
    async fn entry(&self, key: &ReadKey) -> Result<Option<CacheEntry>, StoreError>;

    /// The entries for up to [`MAX_BATCH_READ`] keys, in any order, missing keys left out
    /// (one `BatchGetItem`). More keys is `StoreError::Unavailable`.
    async fn entries(&self, keys: &[ReadKey]) -> Result<Vec<(ReadKey, CacheEntry)>, StoreError>;

    /// Takes the refresh lease on `key` for `lease.holder` if [`CacheEntry::may_lease`] allows
    /// it (one conditional write); `Ok(false)` if another holder has it or the reading is fresh.
    async fn lease_refresh(
        &self,
        key: &ReadKey,
        lease: &RefreshLease,
        stale_before: Millis,
    ) -> Result<bool, StoreError>;

    /// Records `reading` if [`CacheEntry::may_record`] allows it (one conditional write), leaving
    /// any lease in place and clearing any failure; `Ok(false)` if a newer reading is stored.
    async fn record(&self, reading: &Reading) -> Result<bool, StoreError>;

    /// Records that a refresh of `key` failed, if [`CacheEntry::may_record_failure`] allows it
    /// (one conditional write), leaving the reading and any lease in place; `Ok(false)` if a
    /// reading from a later call, or a longer failure, is stored.
    async fn record_failure(
        &self,
        key: &ReadKey,
        failure: &ReadFailure,
    ) -> Result<bool, StoreError>;
}

/// Most keys one batch read takes ([`Readings::entries`], [`Intents::intents`](super::Intents::intents)): DynamoDB's
/// `BatchGetItem` limit.
pub const MAX_BATCH_READ: usize = 100;

/// What every backend answers a batch read of `len` keys: `Unavailable` past
/// [`MAX_BATCH_READ`], the same words everywhere.
pub fn within_batch_read(len: usize) -> Result<(), StoreError> {
    if len > MAX_BATCH_READ {
        return Err(StoreError::Unavailable(format!(
            "at most {MAX_BATCH_READ} keys per batch read"
        )));
    }
    Ok(())
}

/// Where the upstream's shared protection lives: the circuit breaker's state (one item) and
/// the routes' `Retry-After` pauses (one item, [`crate::domain::route_pause`]).
#[async_trait]
pub trait BreakerStates: Send + Sync {
    /// The breaker's state; a breaker never written is [`BreakerState::closed`].
    async fn breaker(&self) -> Result<BreakerState, StoreError>;

    /// Replaces the state with `next` if the stored generation is still `next.generation - 1`
    /// (generation 0: never written). One conditional write; `Ok(false)` if another instance
    /// changed it first.
    async fn swap_breaker(&self, next: &BreakerState) -> Result<bool, StoreError>;

    /// Every route's pause; none ever written is [`RoutePauses::default`]. One strongly
    /// consistent read.
    async fn pauses(&self) -> Result<RoutePauses, StoreError>;

    /// Pauses `route` until `until` if [`RoutePauses::may_extend`] allows it (one conditional
    /// write of that route alone); `Ok(false)` if a pause as long or longer is stored.
    async fn pause(&self, route: UpstreamRoute, until: Millis) -> Result<bool, StoreError>;
}
