//! The outbox's way out: the event queue the relay publishes to, and the subscribers the
//! deliverer posts to.

use super::QueueError;
use async_trait::async_trait;
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("subscriber delivery failed: {0}")]
pub struct PublishError(pub String);

/// The queue of terminal-intent events on their way to subscribers: a standard SQS queue with
/// its dead-letter queue on AWS, a table in the embedded backend. The relay only enqueues, and a
/// delivery consumer posts, so a slow or dead subscriber never delays relaying intents.
#[async_trait]
pub trait EventQueue: Send + Sync {
    /// Enqueues one event. Delivery is at least once: a replayed outbox record may enqueue the
    /// same event again, and receivers drop duplicates by its `event_id`.
    async fn enqueue(&self, event: &crate::domain::Event) -> Result<(), QueueError>;
}

/// Subscribers of events (webhooks): an intent's terminal state, an offer made or lapsed.
/// Delivery is at least once.
#[async_trait]
pub trait Subscribers: Send + Sync {
    async fn publish(&self, event: &crate::domain::Event) -> Result<(), PublishError>;
}
