//! The event queue: the stand-in for the standard SQS queue (and its dead-letter queue) of
//! terminal-intent events, on [`Messages`](crate::messages::Messages) without groups.
//!
//! Reached through [`MemoryBackend::events`], a view of the same state, because the backend's
//! own `QueueConsumer` is the seat queue (as `seatgate_embedded::EmbeddedEvents`). Any visible
//! message is receivable, oldest first; one received more than `event_max_receive_count` times
//! is dead-lettered. No deduplication: delivery is at least once, and receivers drop
//! duplicates by the event id.

use crate::MemoryBackend;
use crate::faults::Op;
use async_trait::async_trait;
use seatgate::domain::Event;
use seatgate::ports::{Delivery, EventQueue, HandBack, QueueConsumer, QueueError};
use std::time::Duration;

/// The event queue of a [`MemoryBackend`].
#[derive(Debug, Clone)]
pub struct MemoryEvents {
    backend: MemoryBackend,
}

impl MemoryBackend {
    /// The event queue in this backend.
    pub fn events(&self) -> MemoryEvents {
        MemoryEvents {
            backend: self.clone(),
        }
    }
}

impl MemoryEvents {
    /// The dead-lettered events, oldest first.
    pub fn dead(&self) -> Vec<Delivery> {
        crate::lock(&self.backend.inner.state).events.dead_letters()
    }
}

#[async_trait]
impl EventQueue for MemoryEvents {
    async fn enqueue(&self, event: &Event) -> Result<(), QueueError> {
        let body = serde_json::to_string(event)
            .map_err(|e| QueueError::Unavailable(format!("encoding an event: {e}")))?;
        self.backend
            .timed(Op::EventEnqueue, |tx| {
                let capacity = tx.config.event_queue_capacity;
                let sent = tx
                    .state
                    .events
                    .send(tx.now, None, None, body.clone(), capacity)?;
                if let Some(id) = sent {
                    tx.log(&(id, event));
                    if tx.state.replays.event_duplicate()
                        && let Some(again) =
                            tx.state
                                .events
                                .send(tx.now, None, None, body.clone(), capacity)?
                    {
                        tx.log_as("event_enqueue.duplicate", &(again, event));
                    }
                }
                Ok(())
            })
            .await
    }
}

#[async_trait]
impl QueueConsumer for MemoryEvents {
    async fn receive(&self, max: usize) -> Result<Vec<Delivery>, QueueError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        self.backend
            .timed(Op::EventReceive, |tx| {
                let (visibility, max_receives) = (
                    tx.config.event_visibility_timeout,
                    tx.config.event_max_receive_count,
                );
                let received = tx
                    .state
                    .events
                    .receive_any(tx.now, max, visibility, max_receives);
                if received.changed_anything() {
                    tx.log(&received);
                }
                Ok(received.deliveries)
            })
            .await
    }

    async fn delete(&self, receipts: &[String]) -> Result<(), QueueError> {
        if receipts.is_empty() {
            return Ok(());
        }
        self.backend
            .timed(Op::EventDelete, |tx| {
                let deleted = tx.state.events.delete(receipts);
                if !deleted.is_empty() {
                    tx.log(&deleted);
                }
                Ok(())
            })
            .await
    }
}

#[async_trait]
impl HandBack for MemoryEvents {
    async fn hand_back(&self, receipts: &[String], after: Duration) -> Result<(), QueueError> {
        if receipts.is_empty() {
            return Ok(());
        }
        self.backend
            .timed(Op::EventHandBack, |tx| {
                let at = tx.now.plus(after);
                let changed = tx.state.events.hand_back(receipts, at);
                if !changed.is_empty() {
                    tx.log(&(changed, at));
                }
                Ok(())
            })
            .await
    }
}
