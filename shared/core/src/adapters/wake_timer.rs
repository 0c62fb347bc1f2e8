//! Wake-ups in one process: the local runner's and the simulator's [`WakeUps`]. On AWS they are
//! delayed messages on a standard SQS queue the reaper consumes; where the whole deployment is
//! one process, a sorted set of times and a [`Notify`] are that queue, and the process's reaper
//! schedule waits on them beside its period ([`WakeTimer::next`], [`WakeTimer::take_due`]).
//!
//! Bounded: at most [`MAX_PENDING_WAKES`] distinct times wait at once; past it the latest is
//! dropped. That is safe because a wake-up only brings a run forward: the schedule still finds
//! every intent that comes due. Deterministic: a `BTreeSet` and no clock of its own.

use crate::domain::Millis;
use crate::ports::{QueueError, WakeUps};
use async_trait::async_trait;
use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};
use tokio::sync::Notify;

/// Distinct wake-up times kept at once (one per breaker change or hold written).
pub const MAX_PENDING_WAKES: usize = 1_024;

#[derive(Default)]
pub struct WakeTimer {
    pending: Mutex<BTreeSet<Millis>>,
    changed: Notify,
}

impl WakeTimer {
    pub fn new() -> Self {
        Self::default()
    }

    /// The earliest wake-up asked for and not yet taken.
    pub fn next(&self) -> Option<Millis> {
        self.lock().first().copied()
    }

    /// Takes every wake-up due at `now`; whether there was one.
    pub fn take_due(&self, now: Millis) -> bool {
        let mut pending = self.lock();
        let later = pending.split_off(&Millis(now.0.saturating_add(1)));
        let due = !pending.is_empty();
        *pending = later;
        due
    }

    /// Woken whenever a wake-up is asked for (its time may be earlier than the one awaited).
    pub fn changed(&self) -> &Notify {
        &self.changed
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<Millis>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl WakeUps for WakeTimer {
    async fn wake_at(&self, at: Millis) -> Result<(), QueueError> {
        {
            let mut pending = self.lock();
            pending.insert(at);
            if pending.len() > MAX_PENDING_WAKES {
                pending.pop_last();
            }
        }
        // Only a waiter already registered is told (no stored permit): the consumer enables
        // its `Notified` before it reads `next`, so it cannot miss one.
        self.changed.notify_waiters();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wake_ups_come_due_in_order_once_each_and_stay_bounded() {
        let timer = WakeTimer::new();
        timer.wake_at(Millis(300)).await.unwrap();
        timer.wake_at(Millis(100)).await.unwrap();
        timer.wake_at(Millis(100)).await.unwrap();
        assert_eq!(timer.next(), Some(Millis(100)));
        assert!(!timer.take_due(Millis(99)));
        assert!(timer.take_due(Millis(100)));
        assert!(!timer.take_due(Millis(100)), "taken once");
        assert_eq!(timer.next(), Some(Millis(300)));
        for t in 0..(MAX_PENDING_WAKES as i64 + 10) {
            timer.wake_at(Millis(1_000 + t)).await.unwrap();
        }
        assert_eq!(timer.lock().len(), MAX_PENDING_WAKES);
        assert_eq!(
            timer.next(),
            Some(Millis(300)),
            "the latest are dropped first"
        );
    }
}
