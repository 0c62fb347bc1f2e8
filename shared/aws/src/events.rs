//! The event queue on Amazon SQS: terminal-intent events on their way to subscribers.
//!
//! A standard queue, not FIFO: events are independent (each carries a stable `event_id`
//! receivers deduplicate by), so there is no order to keep and no group to serialize, and a
//! standard queue's at-least-once delivery is what the subscribers' contract already says. An
//! event the delivery function could not post comes back after a backoff (the function hands
//! it back) and, after [`EVENT_MAX_RECEIVE_COUNT`] receives, goes to the dead-letter queue, where
//! an alarm watches. [`EventQueueDefinition`] and [`create_event_queues`] hold its settings,
//! matching `template.yaml`.

use async_trait::async_trait;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use std::time::Duration;

use crate::sqs::{SqsSeatQueue, create_with_dead_letter, map_error};
use seatgate::domain::Event;
use seatgate::ports::{Delivery, EventQueue, HandBack, QueueConsumer, QueueError};

/// Receives before an event moves to the dead-letter queue (`template.yaml`:
/// EventMaxReceiveCount): with the delivery backoff, about a quarter of an hour of retries on AWS.
pub const EVENT_MAX_RECEIVE_COUNT: u32 = 8;

/// The event queue's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventQueueDefinition {
    /// At least 6x the delivery function's timeout (AWS's guidance for SQS event sources).
    pub visibility_timeout: Duration,
    pub max_receive_count: u32,
    pub message_retention: Duration,
    pub dead_letter_retention: Duration,
}

impl Default for EventQueueDefinition {
    fn default() -> Self {
        EventQueueDefinition {
            visibility_timeout: Duration::from_secs(180),
            max_receive_count: EVENT_MAX_RECEIVE_COUNT,
            message_retention: Duration::from_secs(345_600),
            dead_letter_retention: Duration::from_secs(1_209_600),
        }
    }
}

impl EventQueueDefinition {
    pub fn queue_attributes(&self, dead_letter_arn: &str) -> Vec<(QueueAttributeName, String)> {
        let redrive = serde_json::json!({
            "deadLetterTargetArn": dead_letter_arn,
            "maxReceiveCount": self.max_receive_count,
        });
        vec![
            (
                QueueAttributeName::VisibilityTimeout,
                self.visibility_timeout.as_secs().to_string(),
            ),
            (
                QueueAttributeName::MessageRetentionPeriod,
                self.message_retention.as_secs().to_string(),
            ),
            (QueueAttributeName::SqsManagedSseEnabled, "true".into()),
            (QueueAttributeName::RedrivePolicy, redrive.to_string()),
        ]
    }

    pub fn dead_letter_attributes(&self) -> Vec<(QueueAttributeName, String)> {
        vec![
            (
                QueueAttributeName::MessageRetentionPeriod,
                self.dead_letter_retention.as_secs().to_string(),
            ),
            (QueueAttributeName::SqsManagedSseEnabled, "true".into()),
        ]
    }
}

/// Creates `<name>-dlq` and `<name>` (redriving to it); returns `(queue_url, dead_letter_url)`.
/// For tests and the local runner; on AWS the template creates them.
pub async fn create_event_queues(
    client: &Client,
    name: &str,
    definition: &EventQueueDefinition,
) -> Result<(String, String), QueueError> {
    create_with_dead_letter(
        client,
        name,
        &format!("{name}-dlq"),
        definition.dead_letter_attributes(),
        |dlq_arn| definition.queue_attributes(dlq_arn),
    )
    .await
}

/// The event queue. Deleting and handing back work as on any SQS queue, so they are the seat
/// queue's; sending and receiving differ (no group, no dedup id).
#[derive(Debug, Clone)]
pub struct SqsEventQueue {
    queue: SqsSeatQueue,
}

impl SqsEventQueue {
    pub fn new(client: Client, queue_url: impl Into<String>) -> Self {
        SqsEventQueue {
            queue: SqsSeatQueue::new(client, queue_url),
        }
    }

    /// Changes the receive long-poll wait (whole seconds, 0..=20).
    pub fn with_wait(self, wait: Duration) -> Self {
        SqsEventQueue {
            queue: self.queue.with_wait(wait),
        }
    }

    pub fn queue_url(&self) -> &str {
        self.queue.queue_url()
    }

    pub fn client(&self) -> &Client {
        self.queue.client()
    }
}

#[async_trait]
impl EventQueue for SqsEventQueue {
    async fn enqueue(&self, event: &Event) -> Result<(), QueueError> {
        let body = serde_json::to_string(event)
            .map_err(|e| QueueError::Unavailable(format!("encoding an event: {e}")))?;
        self.client()
            .send_message()
            .queue_url(self.queue_url())
            .message_body(body)
            .send()
            .await
            .map_err(|e| map_error("SendMessage", e))?;
        Ok(())
    }
}

#[async_trait]
impl QueueConsumer for SqsEventQueue {
    async fn receive(&self, max: usize) -> Result<Vec<Delivery>, QueueError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let out = self
            .client()
            .receive_message()
            .queue_url(self.queue_url())
            .max_number_of_messages(max.min(10) as i32)
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .wait_time_seconds(self.queue.wait().as_secs() as i32)
            .send()
            .await
            .map_err(|e| map_error("ReceiveMessage", e))?;
        out.messages()
            .iter()
            .map(|m| {
                let missing = |what: &str| {
                    QueueError::Unavailable(format!("ReceiveMessage: message without {what}"))
                };
                Ok(Delivery {
                    message_id: m
                        .message_id()
                        .ok_or_else(|| missing("MessageId"))?
                        .to_owned(),
                    receipt: m
                        .receipt_handle()
                        .ok_or_else(|| missing("ReceiptHandle"))?
                        .to_owned(),
                    body: m.body().unwrap_or_default().to_owned(),
                    group_id: String::new(),
                    receive_count: m
                        .attributes()
                        .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                        .and_then(|c| c.parse().ok())
                        .unwrap_or(1),
                })
            })
            .collect()
    }

    async fn delete(&self, receipts: &[String]) -> Result<(), QueueError> {
        self.queue.delete(receipts).await
    }
}

#[async_trait]
impl HandBack for SqsEventQueue {
    async fn hand_back(&self, receipts: &[String], after: Duration) -> Result<(), QueueError> {
        self.queue.hand_back(receipts, after).await
    }
}
