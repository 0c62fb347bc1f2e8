//! The delivery function's edge: an SQS (standard) event of terminal-intent events in,
//! `SqsBatchResponse` out, so only the events a subscriber did not accept come back.

use super::queue::batch_response;
use crate::service::{Deliverer, EventRecord};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};

/// Turns SQS records into event records. A missing receive count counts as the first.
pub fn records(event: &SqsEvent) -> Vec<EventRecord> {
    event
        .records
        .iter()
        .map(|m| EventRecord {
            message_id: m.message_id.clone().unwrap_or_default(),
            body: m.body.clone().unwrap_or_default(),
            receipt: m.receipt_handle.clone().unwrap_or_default(),
            receive_count: m
                .attributes
                .get("ApproximateReceiveCount")
                .and_then(|n| n.parse().ok())
                .unwrap_or(1),
        })
        .collect()
}

pub async fn handle(deliverer: &Deliverer, event: SqsEvent) -> SqsBatchResponse {
    batch_response(deliverer.handle_batch(&records(&event)).await)
}
