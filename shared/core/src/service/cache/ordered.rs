//! A deterministic [`InstanceCache`]: expiry on the injected [`Clock`], keys in a `BTreeMap`,
//! eviction oldest-inserted first, and single flight through one FIFO async lock per key.
//!
//! Written by hand because the guarantee the services lean on (one load per key at a time, its
//! error handed to the callers that waited on it, a cancelled load handing over to the next
//! waiter) is moka's, and moka's clock cannot be injected; no other well-kept crate offers the
//! three together. It is small: one lock for the key table, one per key for the load.

use super::{InstanceCache, Load};
use crate::domain::Millis;
use crate::ports::Clock;
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub struct OrderedCache<K, V, E> {
    table: Mutex<Table<K, V, E>>,
    capacity: usize,
    ttl: Duration,
    clock: Arc<dyn Clock>,
}

struct Table<K, V, E> {
    slots: BTreeMap<K, (u64, Arc<Slot<V, E>>)>,
    /// Insertion order, for eviction: sequence number -> key.
    order: BTreeMap<u64, K>,
    next: u64,
}

struct Slot<V, E> {
    /// Held for the whole of a load: the single flight. tokio's mutex is fair (FIFO), so
    /// waiters take their turns in arrival order, which keeps a seeded run replayable.
    turn: tokio::sync::Mutex<()>,
    state: Mutex<SlotState<V, E>>,
}

struct SlotState<V, E> {
    value: Option<(V, Millis)>,
    /// Loads finished (a cancelled one does not finish): a waiter that sees it move while it
    /// waited shares that load's outcome instead of loading again.
    finished: u64,
    last_error: Option<Arc<E>>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding these locks leaves plain data behind, never a broken invariant.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl<K: Ord + Clone, V: Clone, E> OrderedCache<K, V, E> {
    pub fn new(capacity: u64, ttl: Duration, clock: Arc<dyn Clock>) -> Self {
        OrderedCache {
            table: Mutex::new(Table {
                slots: BTreeMap::new(),
                order: BTreeMap::new(),
                next: 0,
            }),
            capacity: usize::try_from(capacity.max(1)).unwrap_or(usize::MAX),
            ttl,
            clock,
        }
    }

    fn slot(&self, key: &K) -> Arc<Slot<V, E>> {
        let mut table = locked(&self.table);
        if let Some((_, slot)) = table.slots.get(key) {
            return slot.clone();
        }
        while table.slots.len() >= self.capacity {
            let Some((_, oldest)) = table.order.pop_first() else {
                break;
            };
            table.slots.remove(&oldest);
        }
        let slot = Arc::new(Slot {
            turn: tokio::sync::Mutex::new(()),
            state: Mutex::new(SlotState {
                value: None,
                finished: 0,
                last_error: None,
            }),
        });
        let seq = table.next;
        table.next += 1;
        table.order.insert(seq, key.clone());
        table.slots.insert(key.clone(), (seq, slot.clone()));
        debug_assert_eq!(table.order.len(), table.slots.len());
        slot
    }

    fn live(&self, state: &SlotState<V, E>) -> Option<V> {
        let (value, loaded_at) = state.value.as_ref()?;
        (self.clock.now() < loaded_at.plus(self.ttl)).then(|| value.clone())
    }

    /// How many keys are held (live or expired); never above the capacity.
    pub fn len(&self) -> usize {
        locked(&self.table).slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[async_trait]
impl<K, V, E> InstanceCache<K, V, E> for OrderedCache<K, V, E>
where
    K: Ord + Clone + Send + Sync,
    V: Clone + Send + Sync,
    E: Send + Sync,
{
    async fn try_get_with<'a>(&'a self, key: K, load: Load<'a, V, E>) -> Result<V, Arc<E>>
    where
        K: 'a,
    {
        let slot = self.slot(&key);
        let seen = {
            let state = locked(&slot.state);
            if let Some(value) = self.live(&state) {
                return Ok(value);
            }
            state.finished
        };
        let _turn = slot.turn.lock().await;
        {
            let state = locked(&slot.state);
            if let Some(value) = self.live(&state) {
                return Ok(value);
            }
            if state.finished != seen
                && let Some(error) = &state.last_error
            {
                return Err(error.clone());
            }
        }
        let result = load.await;
        let mut state = locked(&slot.state);
        state.finished += 1;
        match result {
            Ok(value) => {
                state.value = Some((value.clone(), self.clock.now()));
                state.last_error = None;
                Ok(value)
            }
            Err(error) => {
                let error = Arc::new(error);
                state.last_error = Some(error.clone());
                Err(error)
            }
        }
    }

    async fn insert(&self, key: K, value: V) {
        let slot = self.slot(&key);
        locked(&slot.state).value = Some((value, self.clock.now()));
    }

    async fn invalidate(&self, key: &K) {
        let mut table = locked(&self.table);
        if let Some((seq, _)) = table.slots.remove(key) {
            table.order.remove(&seq);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    struct Fixed(std::sync::Mutex<Millis>);
    impl Clock for Fixed {
        fn now(&self) -> Millis {
            *self.0.lock().unwrap()
        }
    }

    fn cache(capacity: u64) -> (Arc<Fixed>, Arc<OrderedCache<u32, u32, String>>) {
        let clock = Arc::new(Fixed(std::sync::Mutex::new(Millis(1_000))));
        let cache = OrderedCache::new(capacity, Duration::from_millis(100), clock.clone());
        (clock, Arc::new(cache))
    }

    #[tokio::test(start_paused = true)]
    async fn one_load_per_key_at_a_time_and_its_error_is_shared_not_stored() {
        let (_, cache) = cache(10);
        let loads = Arc::new(AtomicU32::new(0));
        let call = |answer: Result<u32, String>| {
            let (cache, loads) = (cache.clone(), loads.clone());
            tokio::spawn(async move {
                cache
                    .try_get_with(
                        7,
                        Box::pin(async move {
                            loads.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            answer
                        }),
                    )
                    .await
            })
        };
        let calls: Vec<_> = (0..5).map(|_| call(Err("down".into()))).collect();
        for c in calls {
            assert_eq!(c.await.unwrap(), Err(Arc::new("down".to_string())));
        }
        assert_eq!(
            loads.load(Ordering::SeqCst),
            1,
            "the waiters shared the one load"
        );
        // The error was not stored: the next caller loads.
        assert_eq!(call(Ok(3)).await.unwrap(), Ok(3));
        assert_eq!(call(Ok(4)).await.unwrap(), Ok(3), "a live value is served");
        assert_eq!(loads.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_load_hands_over_to_the_next_waiter() {
        let (_, cache) = cache(10);
        let stuck = {
            let cache = cache.clone();
            tokio::spawn(async move {
                cache
                    .try_get_with(
                        1,
                        Box::pin(async {
                            tokio::time::sleep(Duration::from_secs(3600)).await;
                            Ok(0)
                        }),
                    )
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(1)).await;
        let waiter = {
            let cache = cache.clone();
            tokio::spawn(async move { cache.try_get_with(1, Box::pin(async { Ok(9) })).await })
        };
        tokio::time::sleep(Duration::from_millis(1)).await;
        stuck.abort();
        assert_eq!(waiter.await.unwrap(), Ok(9));
    }

    #[tokio::test(start_paused = true)]
    async fn values_expire_on_the_injected_clock_and_the_oldest_key_is_evicted() {
        let (clock, cache) = cache(2);
        let get = |k: u32, v: u32| cache.try_get_with(k, Box::pin(async move { Ok(v) }));
        assert_eq!(get(1, 10).await, Ok(10));
        assert_eq!(get(1, 11).await, Ok(10));
        *clock.0.lock().unwrap() = Millis(1_100);
        assert_eq!(get(1, 12).await, Ok(12), "expired at loaded_at + ttl");
        assert_eq!(get(2, 20).await, Ok(20));
        assert_eq!(get(3, 30).await, Ok(30));
        assert_eq!(cache.len(), 2, "bounded by its capacity");
        assert_eq!(get(1, 13).await, Ok(13), "the oldest key went first");
        cache.invalidate(&1).await;
        assert_eq!(get(1, 14).await, Ok(14));
    }
}
