//! The seat queue: FIFO per seat group, deduplicated, with a dead-letter path.
//!
//! Send, hand back and consume are separate capabilities because separate parts of the fleet
//! hold them: the API sends, a worker receives and hands back.

use crate::domain::SeatMessage;
use async_trait::async_trait;
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum QueueError {
    #[error("queue throttled the request")]
    Throttled,
    #[error("queue unavailable: {0}")]
    Unavailable(String),
}

/// Sending to the per-seat FIFO queue.
#[async_trait]
pub trait SeatQueue: Send + Sync {
    /// Sends with `MessageGroupId = seat id` and `MessageDeduplicationId = intent id + version`.
    /// A second send with the same dedup id within the dedup window must be accepted and dropped.
    async fn send(&self, message: &SeatMessage) -> Result<(), QueueError>;
}

/// Handing received seat-queue messages back for later. The worker does it with the messages of a
/// seat another attempt has claimed (or of a group the upstream asked to pause), so they return when
/// the hold's settlement is next due rather than after the whole visibility timeout; each return
/// still counts towards the queue's max receive count.
#[async_trait]
pub trait HandBack: Send + Sync {
    /// Makes each received message (by receipt) visible again `after` from now (SQS
    /// `ChangeMessageVisibility`). A receipt that names no in-flight message any more is
    /// ignored; other failures are `QueueError`s, and the message then returns after its
    /// visibility timeout anyway.
    async fn hand_back(
        &self,
        receipts: &[String],
        after: std::time::Duration,
    ) -> Result<(), QueueError>;
}

/// A received message, as the Lambda service would hand it to the worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub message_id: String,
    pub receipt: String,
    pub body: String,
    pub group_id: String,
    pub receive_count: u32,
}

/// Receiving from the seat queue: what the local runner uses to play the SQS event source
/// mapping. (On AWS the Lambda service does this.)
#[async_trait]
pub trait QueueConsumer: Send + Sync {
    /// Up to `max` messages, in group order. While a message of a group is in flight (received,
    /// not deleted, visibility not expired) no later message of that group is returned. A
    /// message received more than the queue's max receive count goes to the dead-letter queue
    /// instead.
    async fn receive(&self, max: usize) -> Result<Vec<Delivery>, QueueError>;

    /// Deletes processed messages.
    async fn delete(&self, receipts: &[String]) -> Result<(), QueueError>;
}
