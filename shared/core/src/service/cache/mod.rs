//! The in-process half of the seat-read cache and the flights' sold-out cache, behind one small
//! trait, so the services keep their single-flight and cancellation guarantees whichever cache
//! runs underneath:
//!
//! - production: [`moka`], whose `try_get_with` runs one load per key at a time, hands its
//!   answer (or its error) to every caller waiting on that key, and lets the next waiter load
//!   if the loading caller is cancelled;
//! - tests and the simulator: [`ordered::OrderedCache`], the same guarantees over the injected
//!   clock and a fixed iteration order. moka's expiry runs on its own clock, which cannot be
//!   injected from outside the crate, so a seeded run over moka would not replay.
//!
//! [`CacheKind`] picks one per deployment ([`crate::service::Ports::cache`]).

mod moka_cache;
pub mod ordered;

use crate::ports::Clock;
use async_trait::async_trait;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// A load the cache runs for a missing or expired key.
pub type Load<'a, V, E> = Pin<Box<dyn Future<Output = Result<V, E>> + Send + 'a>>;

/// An instance's bounded, expiring cache.
#[async_trait]
pub trait InstanceCache<K, V, E>: Send + Sync {
    /// The value under `key`; if none is live, runs `load` (one load per key at a time: a
    /// caller arriving during a load waits for it and gets its value, or its error). A load
    /// whose caller is cancelled stores nothing, and the next waiter runs its own. An `Err` is
    /// never stored.
    async fn try_get_with<'a>(&'a self, key: K, load: Load<'a, V, E>) -> Result<V, Arc<E>>
    where
        K: 'a;

    /// Stores `value` under `key` as if just loaded (what this instance learned first-hand).
    async fn insert(&self, key: K, value: V);

    /// Drops the value under `key`; the next read loads again.
    async fn invalidate(&self, key: &K);
}

/// Which cache a deployment's services use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CacheKind {
    /// moka: production.
    #[default]
    Moka,
    /// [`ordered::OrderedCache`]: deterministic, on the injected clock.
    Ordered,
}

impl CacheKind {
    /// A cache of at most `capacity` keys whose values live `ttl` from their load.
    pub fn build<K, V, E>(
        self,
        capacity: u64,
        ttl: Duration,
        clock: Arc<dyn Clock>,
    ) -> Arc<dyn InstanceCache<K, V, E>>
    where
        K: Hash + Ord + Eq + Clone + Send + Sync + 'static,
        V: Clone + Send + Sync + 'static,
        E: Send + Sync + 'static,
    {
        match self {
            CacheKind::Moka => Arc::new(moka_cache::MokaCache::new(capacity, ttl)),
            CacheKind::Ordered => Arc::new(ordered::OrderedCache::new(capacity, ttl, clock)),
        }
    }
}
