//! [`InstanceCache`] over moka, the production cache (see the parent module for why moka).

use super::{InstanceCache, Load};
use async_trait::async_trait;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

pub(super) struct MokaCache<K, V> {
    inner: moka::future::Cache<K, V>,
}

impl<K, V> MokaCache<K, V>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    pub(super) fn new(capacity: u64, ttl: Duration) -> Self {
        MokaCache {
            inner: moka::future::Cache::builder()
                .max_capacity(capacity)
                .time_to_live(ttl)
                .build(),
        }
    }
}

#[async_trait]
impl<K, V, E> InstanceCache<K, V, E> for MokaCache<K, V>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
    E: Send + Sync + 'static,
{
    async fn try_get_with<'a>(&'a self, key: K, load: Load<'a, V, E>) -> Result<V, Arc<E>>
    where
        K: 'a,
    {
        self.inner.try_get_with(key, load).await
    }

    async fn insert(&self, key: K, value: V) {
        self.inner.insert(key, value).await;
    }

    async fn invalidate(&self, key: &K) {
        self.inner.invalidate(key).await;
    }
}
