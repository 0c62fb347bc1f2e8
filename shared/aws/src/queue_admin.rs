//! The operator's levers on both SQS queues: their depths, and dead letters moved back.
//!
//! A redrive receives from a dead-letter queue, sends what it received to the source queue and
//! only then deletes it from the dead-letter queue. What makes each message move once:
//! - one redrive runs at a time: the admin service holds the redrive lease around the call,
//!   because a standard queue (the event dead-letter queue) may hand one message to two
//!   receivers at once, and an emulator may do so for any queue;
//! - a received message stays invisible for [`REDRIVE_VISIBILITY`], longer than the lease, so a
//!   call that died holding messages is not overlapped by its successor on them;
//! - a message sent back but not deleted (the call died in between) comes back to the dead-letter
//!   queue and is sent again by a later redrive, under the same deduplication id (its
//!   dead-letter message id) on the FIFO seat queue, which drops the second copy within its
//!   five-minute window. The event queue is a standard queue, so there a copy can arrive twice;
//!   its receivers drop duplicates by `event_id`, as they do for every at-least-once delivery.
//!
//! SQS's own `StartMessageMoveTask` does the same asynchronously; this is synchronous so the
//! answer can say how many moved, and it works the same on every SQS the tests run against.

use crate::sqs::map_error;
use async_trait::async_trait;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, MessageSystemAttributeName, QueueAttributeName,
    SendMessageBatchRequestEntry,
};
use seatgate::ports::{QueueAdmin, QueueDepth, QueueDepths, QueueError, Redriven};
use std::time::Duration;

/// How long a message received for a redrive stays invisible in the dead-letter queue: far
/// longer than one send and delete take, so it is not received twice while in hand.
pub const REDRIVE_VISIBILITY: Duration = Duration::from_secs(120);

/// A queue and its dead-letter queue.
#[derive(Debug, Clone)]
pub struct QueuePair {
    pub queue_url: String,
    pub dead_letter_url: String,
}

/// Both queues of a deployment, for the admin routes.
#[derive(Debug, Clone)]
pub struct SqsQueueAdmin {
    client: Client,
    seat: QueuePair,
    events: QueuePair,
}

impl SqsQueueAdmin {
    /// `seat` is the FIFO seat queue, `events` the standard event queue.
    pub fn new(client: Client, seat: QueuePair, events: QueuePair) -> Self {
        SqsQueueAdmin {
            client,
            seat,
            events,
        }
    }

    /// `(visible, not visible)` of one queue.
    async fn counts(&self, url: &str) -> Result<(u64, u64), QueueError> {
        let attrs = self
            .client
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await
            .map_err(|e| map_error("GetQueueAttributes", e))?
            .attributes
            .unwrap_or_default();
        let n = |a: &QueueAttributeName| -> Result<u64, QueueError> {
            attrs
                .get(a)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| QueueError::Unavailable(format!("GetQueueAttributes: no {a}")))
        };
        Ok((
            n(&QueueAttributeName::ApproximateNumberOfMessages)?,
            n(&QueueAttributeName::ApproximateNumberOfMessagesNotVisible)?,
        ))
    }

    async fn depth(&self, pair: &QueuePair) -> Result<QueueDepth, QueueError> {
        let (ready, in_flight) = self.counts(&pair.queue_url).await?;
        let (dead, dead_in_hand) = self.counts(&pair.dead_letter_url).await?;
        Ok(QueueDepth {
            ready,
            in_flight,
            // A dead letter a redrive holds right now is still a dead letter until it is moved.
            dead: dead + dead_in_hand,
        })
    }

    /// Moves up to `limit` messages of `pair`'s dead-letter queue back; `fifo` keeps each
    /// message's group and deduplicates by its dead-letter message id.
    async fn redrive_pair(
        &self,
        pair: &QueuePair,
        fifo: bool,
        limit: usize,
    ) -> Result<(u64, bool), QueueError> {
        let mut moved = 0usize;
        while moved < limit {
            let mut receive = self
                .client
                .receive_message()
                .queue_url(&pair.dead_letter_url)
                .max_number_of_messages((limit - moved).min(10) as i32)
                .visibility_timeout(REDRIVE_VISIBILITY.as_secs() as i32)
                // A long poll, however short, asks every server: a short poll of a standard
                // queue samples some and may answer empty while messages remain.
                .wait_time_seconds(1);
            if fifo {
                receive = receive
                    .message_system_attribute_names(MessageSystemAttributeName::MessageGroupId);
            }
            let received = receive
                .send()
                .await
                .map_err(|e| map_error("ReceiveMessage", e))?;
            let messages = received.messages();
            if messages.is_empty() {
                return Ok((moved as u64, false));
            }
            let mut entries = Vec::with_capacity(messages.len());
            let mut receipts = Vec::with_capacity(messages.len());
            for (i, m) in messages.iter().enumerate() {
                let missing = |what: &str| {
                    QueueError::Unavailable(format!("ReceiveMessage: message without {what}"))
                };
                let message_id = m.message_id().ok_or_else(|| missing("MessageId"))?;
                let mut entry = SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(m.body().unwrap_or_default());
                if fifo {
                    let group = m
                        .attributes()
                        .and_then(|a| a.get(&MessageSystemAttributeName::MessageGroupId))
                        .ok_or_else(|| missing("MessageGroupId"))?;
                    entry = entry
                        .message_group_id(group)
                        .message_deduplication_id(message_id);
                }
                entries.push(
                    entry
                        .build()
                        .map_err(|e| QueueError::Unavailable(format!("SendMessageBatch: {e}")))?,
                );
                receipts.push(m.receipt_handle().ok_or_else(|| missing("ReceiptHandle"))?);
            }
            let sent = self
                .client
                .send_message_batch()
                .queue_url(&pair.queue_url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| map_error("SendMessageBatch", e))?;
            // Only what was sent leaves the dead-letter queue; the rest returns there when its
            // visibility ends.
            let deletes: Vec<DeleteMessageBatchRequestEntry> = sent
                .successful()
                .iter()
                .filter_map(|ok| {
                    let receipt = receipts.get(ok.id().parse::<usize>().ok()?)?;
                    DeleteMessageBatchRequestEntry::builder()
                        .id(ok.id())
                        .receipt_handle(*receipt)
                        .build()
                        .ok()
                })
                .collect();
            if !deletes.is_empty() {
                let deleted = self
                    .client
                    .delete_message_batch()
                    .queue_url(&pair.dead_letter_url)
                    .set_entries(Some(deletes))
                    .send()
                    .await
                    .map_err(|e| map_error("DeleteMessageBatch", e))?;
                moved += deleted.successful().len();
                if !deleted.failed().is_empty() {
                    return Err(QueueError::Unavailable(format!(
                        "DeleteMessageBatch: {} of the dead letters sent back were not deleted",
                        deleted.failed().len()
                    )));
                }
            }
            if let Some(failed) = sent.failed().first() {
                return Err(QueueError::Unavailable(format!(
                    "SendMessageBatch: {} not sent ({})",
                    sent.failed().len(),
                    failed.code()
                )));
            }
        }
        let (left, in_hand) = self.counts(&pair.dead_letter_url).await?;
        Ok((moved as u64, left + in_hand > 0))
    }
}

#[async_trait]
impl QueueAdmin for SqsQueueAdmin {
    async fn depths(&self) -> Result<QueueDepths, QueueError> {
        Ok(QueueDepths {
            seat_messages: self.depth(&self.seat).await?,
            webhook_deliveries: self.depth(&self.events).await?,
        })
    }

    async fn redrive(&self, limit: usize) -> Result<Redriven, QueueError> {
        let (seat_messages, seats_left) = self.redrive_pair(&self.seat, true, limit).await?;
        let (webhook_deliveries, events_left) =
            self.redrive_pair(&self.events, false, limit).await?;
        Ok(Redriven {
            seat_messages,
            webhook_deliveries,
            more: seats_left || events_left,
        })
    }
}
