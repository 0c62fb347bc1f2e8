//! The per-seat FIFO queue on Amazon SQS.
//!
//! `MessageGroupId = seat id` is what serializes workers per seat: SQS hands out a group's next
//! message only after the previous one is deleted (or its visibility expires), so two workers
//! never race for one seat, while different seats proceed in parallel. `MessageDeduplicationId =
//! intent id + version` makes a replayed outbox record (the relay retried, the stream redelivered)
//! collapse into the message already sent, while a new version of the intent (a requeue, a due
//! wait) is a new message.
//!
//! [`SqsSeatQueue`] is the sending side for the relay and, for the local runner (which plays the
//! Lambda event source mapping itself), the receiving side too. [`QueueDefinition`] and
//! [`create_queues`] hold the queue's settings in one place, matching `template.yaml`: the
//! visibility timeout comes from [`Timing`] (at least 6x the worker's timeout), messages go to a
//! FIFO dead-letter queue after [`MAX_RECEIVE_COUNT`] receives, and content-based deduplication is
//! off because the dedup id is always explicit.

use async_trait::async_trait;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, MessageSystemAttributeName, QueueAttributeName,
};
use std::collections::HashMap;
use std::time::Duration;

use seatgate::config::Timing;
use seatgate::domain::SeatMessage;
use seatgate::ports::{Delivery, HandBack, QueueConsumer, QueueError, SeatQueue};

/// Receives before a message moves to the dead-letter queue (`template.yaml`: MaxReceiveCount).
pub const MAX_RECEIVE_COUNT: u32 = 5;

/// The seat queue's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueDefinition {
    pub visibility_timeout: Duration,
    pub max_receive_count: u32,
    pub message_retention: Duration,
    pub dead_letter_retention: Duration,
    /// Always false: every send carries its own dedup id.
    pub content_based_deduplication: bool,
    /// Dedup and throughput per message group (high-throughput FIFO): seats are independent.
    pub deduplication_scope: &'static str,
    pub fifo_throughput_limit: &'static str,
}

impl QueueDefinition {
    /// The queue for a timing profile. SQS counts whole seconds: the visibility timeout rounds
    /// up, so it never drops below 6x the worker timeout.
    pub fn for_timing(timing: &Timing) -> Self {
        QueueDefinition {
            visibility_timeout: Duration::from_secs(
                timing.visibility_timeout.as_millis().div_ceil(1000) as u64,
            ),
            max_receive_count: MAX_RECEIVE_COUNT,
            message_retention: Duration::from_secs(345_600),
            dead_letter_retention: Duration::from_secs(1_209_600),
            content_based_deduplication: false,
            deduplication_scope: "messageGroup",
            fifo_throughput_limit: "perMessageGroupId",
        }
    }

    /// The queue's attributes, given the dead-letter queue's ARN.
    pub fn queue_attributes(&self, dead_letter_arn: &str) -> Vec<(QueueAttributeName, String)> {
        let redrive = serde_json::json!({
            "deadLetterTargetArn": dead_letter_arn,
            "maxReceiveCount": self.max_receive_count,
        });
        vec![
            (QueueAttributeName::FifoQueue, "true".into()),
            (
                QueueAttributeName::ContentBasedDeduplication,
                self.content_based_deduplication.to_string(),
            ),
            (
                QueueAttributeName::DeduplicationScope,
                self.deduplication_scope.into(),
            ),
            (
                QueueAttributeName::FifoThroughputLimit,
                self.fifo_throughput_limit.into(),
            ),
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
            (QueueAttributeName::FifoQueue, "true".into()),
            (
                QueueAttributeName::MessageRetentionPeriod,
                self.dead_letter_retention.as_secs().to_string(),
            ),
            (QueueAttributeName::SqsManagedSseEnabled, "true".into()),
        ]
    }
}

/// Creates `<name>-dlq.fifo` and `<name>.fifo` (redriving to it) as `definition` says; returns
/// `(queue_url, dead_letter_url)`. For tests and the local runner; on AWS the template creates them.
pub async fn create_queues(
    client: &Client,
    name: &str,
    definition: &QueueDefinition,
) -> Result<(String, String), QueueError> {
    create_with_dead_letter(
        client,
        &format!("{name}.fifo"),
        &format!("{name}-dlq.fifo"),
        definition.dead_letter_attributes(),
        |dlq_arn| definition.queue_attributes(dlq_arn),
    )
    .await
}

/// Creates the dead-letter queue `dlq_name`, then `queue_name` redriving to it (its attributes
/// made from the dead-letter queue's ARN); returns `(queue_url, dead_letter_url)`. Creating a
/// queue that exists with the same attributes is a no-op in SQS, so this is idempotent.
pub(crate) async fn create_with_dead_letter(
    client: &Client,
    queue_name: &str,
    dlq_name: &str,
    dlq_attributes: Vec<(QueueAttributeName, String)>,
    queue_attributes: impl FnOnce(&str) -> Vec<(QueueAttributeName, String)>,
) -> Result<(String, String), QueueError> {
    let create = |queue_name: String, attributes: Vec<(QueueAttributeName, String)>| async move {
        let out = client
            .create_queue()
            .queue_name(queue_name)
            .set_attributes(Some(attributes.into_iter().collect::<HashMap<_, _>>()))
            .send()
            .await
            .map_err(|e| map_error("CreateQueue", e))?;
        out.queue_url
            .ok_or_else(|| QueueError::Unavailable("CreateQueue: no queue url".into()))
    };
    let dlq_url = create(dlq_name.to_owned(), dlq_attributes).await?;
    let dlq_arn = client
        .get_queue_attributes()
        .queue_url(&dlq_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| map_error("GetQueueAttributes", e))?
        .attributes
        .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
        .ok_or_else(|| QueueError::Unavailable("GetQueueAttributes: no QueueArn".into()))?;
    let queue_url = create(queue_name.to_owned(), queue_attributes(&dlq_arn)).await?;
    Ok((queue_url, dlq_url))
}

/// Deletes a queue (tests clean up after themselves).
pub async fn delete_queue(client: &Client, queue_url: &str) -> Result<(), QueueError> {
    client
        .delete_queue()
        .queue_url(queue_url)
        .send()
        .await
        .map_err(|e| map_error("DeleteQueue", e))?;
    Ok(())
}

/// Error codes SQS uses for "slow down".
const THROTTLING_CODES: [&str; 4] = [
    "ThrottlingException",
    "RequestThrottled",
    "AWS.SimpleQueueService.RequestThrottled",
    "KmsThrottled",
];

/// Maps an SDK error to a [`QueueError`], keeping only the operation and the error code.
pub fn map_error<E, R>(operation: &str, err: SdkError<E, R>) -> QueueError
where
    E: ProvideErrorMetadata,
{
    match &err {
        SdkError::ServiceError(e) => {
            let code = e.err().code().unwrap_or("unknown error");
            if THROTTLING_CODES.contains(&code) {
                QueueError::Throttled
            } else {
                QueueError::Unavailable(format!("{operation}: {code}"))
            }
        }
        SdkError::TimeoutError(_) => QueueError::Unavailable(format!("{operation}: timed out")),
        SdkError::DispatchFailure(_) => {
            QueueError::Unavailable(format!("{operation}: could not reach SQS"))
        }
        SdkError::ResponseError(_) => {
            QueueError::Unavailable(format!("{operation}: unreadable response"))
        }
        _ => QueueError::Unavailable(format!("{operation}: request not sent")),
    }
}

/// The seat queue on SQS FIFO.
#[derive(Debug, Clone)]
pub struct SqsSeatQueue {
    client: Client,
    queue_url: String,
    /// Long-poll wait of one receive. Short, so the local runner's loop stays responsive.
    wait: Duration,
}

impl SqsSeatQueue {
    pub fn new(client: Client, queue_url: impl Into<String>) -> Self {
        SqsSeatQueue {
            client,
            queue_url: queue_url.into(),
            wait: Duration::from_secs(1),
        }
    }

    /// A queue configured from the environment (region, credentials, `AWS_ENDPOINT_URL_SQS`).
    pub async fn from_env(queue_url: impl Into<String>) -> Self {
        let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        SqsSeatQueue::new(Client::new(&config), queue_url)
    }

    /// Changes the receive long-poll wait (whole seconds, 0..=20).
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = wait.min(Duration::from_secs(20));
        self
    }

    pub fn queue_url(&self) -> &str {
        &self.queue_url
    }

    pub(crate) fn wait(&self) -> Duration {
        self.wait
    }

    pub fn client(&self) -> &Client {
        &self.client
    }
}

#[async_trait]
impl HandBack for SqsSeatQueue {
    /// `ChangeMessageVisibility` per receipt (at most a batch's ten). A receipt SQS no longer
    /// knows (the message came back or was deleted meanwhile) is not an error: the message is
    /// where it should be. Timeouts are whole seconds, rounded up.
    async fn hand_back(&self, receipts: &[String], after: Duration) -> Result<(), QueueError> {
        let secs = after.as_secs() + u64::from(after.subsec_nanos() > 0);
        let secs = i32::try_from(secs.min(12 * 3600)).unwrap_or(12 * 3600);
        for receipt in receipts {
            let result = self
                .client
                .change_message_visibility()
                .queue_url(&self.queue_url)
                .receipt_handle(receipt)
                .visibility_timeout(secs)
                .send()
                .await;
            if let Err(e) = result {
                let stale = e.as_service_error().is_some_and(|se| {
                    matches!(
                        se.code(),
                        Some("ReceiptHandleIsInvalid" | "MessageNotInflight")
                    ) || se.is_receipt_handle_is_invalid()
                        || se.is_message_not_inflight()
                });
                if !stale {
                    return Err(map_error("ChangeMessageVisibility", e));
                }
            }
        }
        Ok(())
    }
}

#[async_trait]
impl SeatQueue for SqsSeatQueue {
    async fn send(&self, message: &SeatMessage) -> Result<(), QueueError> {
        let body = serde_json::to_string(message)
            .map_err(|e| QueueError::Unavailable(format!("encoding a seat message: {e}")))?;
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .message_group_id(message.group_id())
            .message_deduplication_id(message.dedup_id())
            .send()
            .await
            .map_err(|e| map_error("SendMessage", e))?;
        Ok(())
    }
}

#[async_trait]
impl QueueConsumer for SqsSeatQueue {
    async fn receive(&self, max: usize) -> Result<Vec<Delivery>, QueueError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let out = self
            .client
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(max.min(10) as i32)
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .message_system_attribute_names(MessageSystemAttributeName::MessageGroupId)
            .wait_time_seconds(self.wait.as_secs() as i32)
            .send()
            .await
            .map_err(|e| map_error("ReceiveMessage", e))?;
        out.messages()
            .iter()
            .map(|m| {
                let attribute = |name: MessageSystemAttributeName| {
                    m.attributes().and_then(|a| a.get(&name)).cloned()
                };
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
                    group_id: attribute(MessageSystemAttributeName::MessageGroupId)
                        .ok_or_else(|| missing("MessageGroupId"))?,
                    receive_count: attribute(MessageSystemAttributeName::ApproximateReceiveCount)
                        .and_then(|c| c.parse().ok())
                        .unwrap_or(1),
                })
            })
            .collect()
    }

    /// `DeleteMessageBatch` in chunks of ten (the API's limit). Every chunk is attempted; any
    /// entry that failed (e.g. a receipt whose visibility already expired, so the message will
    /// come back) is reported after all chunks ran.
    async fn delete(&self, receipts: &[String]) -> Result<(), QueueError> {
        let mut failed = Vec::new();
        for chunk in receipts.chunks(10) {
            let entries = chunk
                .iter()
                .enumerate()
                .map(|(i, receipt)| {
                    DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(receipt)
                        .build()
                        .map_err(|e| QueueError::Unavailable(format!("building a delete: {e}")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let out = self
                .client
                .delete_message_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| map_error("DeleteMessageBatch", e))?;
            failed.extend(out.failed().iter().map(|f| f.code().to_owned()));
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(QueueError::Unavailable(format!(
                "DeleteMessageBatch: {} of {} failed ({})",
                failed.len(),
                receipts.len(),
                failed.join(",")
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_definition_follows_timing_and_redrives_after_five_receives() {
        let d = QueueDefinition::for_timing(&Timing::aws());
        assert_eq!(d.visibility_timeout, Duration::from_secs(180));
        let fast = QueueDefinition::for_timing(&Timing::fast());
        assert_eq!(
            fast.visibility_timeout,
            Duration::from_secs(5),
            "4.8 s rounds up"
        );
        let attrs: HashMap<_, _> = d.queue_attributes("arn:dlq").into_iter().collect();
        assert_eq!(
            attrs[&QueueAttributeName::ContentBasedDeduplication],
            "false"
        );
        let redrive: serde_json::Value =
            serde_json::from_str(&attrs[&QueueAttributeName::RedrivePolicy]).unwrap();
        assert_eq!(redrive["maxReceiveCount"], 5);
        assert_eq!(redrive["deadLetterTargetArn"], "arn:dlq");
    }
}
