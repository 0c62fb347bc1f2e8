//! The worker's edge: an SQS FIFO event in, `SqsBatchResponse` out.
//!
//! Messages whose ids come back as batch item failures are returned to the queue; the event
//! source mapping must have `ReportBatchItemFailures` on, or a partial failure would redeliver
//! the whole batch.

use crate::service::{QueueRecord, Worker};
use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};

/// Turns SQS records into worker records. A record without a message id cannot be reported as
/// failed, so it is kept with an empty id (the worker will still process it).
pub fn records(event: &SqsEvent) -> Vec<QueueRecord> {
    event
        .records
        .iter()
        .map(|m| QueueRecord {
            message_id: m.message_id.clone().unwrap_or_default(),
            group_id: m
                .attributes
                .get("MessageGroupId")
                .cloned()
                .unwrap_or_default(),
            body: m.body.clone().unwrap_or_default(),
            receipt: m.receipt_handle.clone().unwrap_or_default(),
        })
        .collect()
}

pub fn batch_response(failed: Vec<String>) -> SqsBatchResponse {
    let mut response = SqsBatchResponse::default();
    for id in failed {
        let mut failure = BatchItemFailure::default();
        failure.item_identifier = id;
        response.batch_item_failures.push(failure);
    }
    response
}

pub async fn handle(worker: &Worker, event: SqsEvent) -> SqsBatchResponse {
    batch_response(worker.handle_batch(&records(&event)).await)
}
