//! The seat queue (`SeatQueue`, `QueueConsumer`, `HandBack`): an SQS FIFO queue with a redrive
//! policy, on [`Messages`](crate::messages::Messages) with its group discipline.
//!
//! `MessageGroupId` is the seat, `MessageDeduplicationId` the intent id and version, so a
//! replayed change record sends nothing new and one seat is worked on by one consumer at a time.
//! Each call is one critical section, so two consumers can never both take a group. Visibility
//! and the dedup window run on the injected clock.

use crate::MemoryBackend;
use crate::faults::Op;
use async_trait::async_trait;
use seatgate::domain::SeatMessage;
use seatgate::ports::{Delivery, HandBack, QueueConsumer, QueueError, SeatQueue};
use std::time::Duration;

#[async_trait]
impl SeatQueue for MemoryBackend {
    async fn send(&self, message: &SeatMessage) -> Result<(), QueueError> {
        let body = serde_json::to_string(message)
            .map_err(|e| QueueError::Unavailable(format!("encode: {e}")))?;
        self.timed(Op::SeatSend, |tx| {
            let (window, capacity) = (tx.config.dedup_window, tx.config.seat_queue_capacity);
            // The replay mode may let a remembered id through, as if its window had passed.
            let past_dedup = tx.pass_dedup(&message.dedup_id(), capacity);
            let sent = tx.state.seat_queue.send(
                tx.now,
                Some(message.group_id().to_owned()),
                Some((message.dedup_id(), window)),
                body.clone(),
                capacity,
            )?;
            if let Some(id) = sent {
                if past_dedup {
                    tx.log_as("seat_send.past_dedup", &(&id, message.dedup_id()));
                }
                tx.log(&(id, message));
            }
            Ok(())
        })
        .await
    }
}

#[async_trait]
impl QueueConsumer for MemoryBackend {
    async fn receive(&self, max: usize) -> Result<Vec<Delivery>, QueueError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        self.timed(Op::SeatReceive, |tx| {
            let (visibility, max_receives) =
                (tx.config.visibility_timeout, tx.config.max_receive_count);
            let received =
                tx.state
                    .seat_queue
                    .receive_in_groups(tx.now, max, visibility, max_receives);
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
        self.timed(Op::SeatDelete, |tx| {
            let deleted = tx.state.seat_queue.delete(receipts);
            if !deleted.is_empty() {
                tx.log(&deleted);
            }
            Ok(())
        })
        .await
    }
}

#[async_trait]
impl HandBack for MemoryBackend {
    async fn hand_back(&self, receipts: &[String], after: Duration) -> Result<(), QueueError> {
        if receipts.is_empty() {
            return Ok(());
        }
        self.timed(Op::SeatHandBack, |tx| {
            let at = tx.now.plus(after);
            let changed = tx.state.seat_queue.hand_back(receipts, at);
            if !changed.is_empty() {
                tx.log(&(changed, at));
            }
            Ok(())
        })
        .await
    }
}

impl MemoryBackend {
    /// The seat queue's dead letters, oldest first.
    pub fn dead_letters(&self) -> Vec<Delivery> {
        crate::lock(&self.inner.state).seat_queue.dead_letters()
    }
}
