//! The operator's levers on both queues (`QueueAdmin`): their depths, and dead letters moved
//! back to the tail of their queue.
//!
//! A redrive is one critical section over both queues, so each dead letter moves exactly once
//! however calls overlap; a moved message is a new message (new id, fresh receive count), as
//! SQS's redrive makes it.

use crate::MemoryBackend;
use crate::faults::Op;
use async_trait::async_trait;
use seatgate::ports::{QueueAdmin, QueueDepths, QueueError, Redriven};

#[async_trait]
impl QueueAdmin for MemoryBackend {
    async fn depths(&self) -> Result<QueueDepths, QueueError> {
        self.timed(Op::QueueDepths, |tx| {
            Ok(QueueDepths {
                seat_messages: tx.state.seat_queue.depth(tx.now),
                webhook_deliveries: tx.state.events.depth(tx.now),
            })
        })
        .await
    }

    async fn redrive(&self, limit: usize) -> Result<Redriven, QueueError> {
        self.timed(Op::Redrive, |tx| {
            let now = tx.now;
            let (seats, seats_left) = tx.state.seat_queue.redrive(limit, now);
            let (events, events_left) = tx.state.events.redrive(limit, now);
            if !seats.is_empty() || !events.is_empty() {
                tx.log(&(&seats, &events));
            }
            Ok(Redriven {
                seat_messages: seats.len() as u64,
                webhook_deliveries: events.len() as u64,
                more: seats_left || events_left,
            })
        })
        .await
    }
}
