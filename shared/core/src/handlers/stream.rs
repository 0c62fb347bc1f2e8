//! The relay's edge: outbox records in, the first failed record out.
//!
//! Stream-shaped sources (DynamoDB Streams) checkpoint by position: a reported failure makes the
//! source retry from that record on, so only the first failure matters and everything after it
//! is retried anyway. A record that cannot be decoded is a failure too; after the event source
//! mapping's retries it lands in the on-failure destination instead of vanishing.
//!
//! Decoding a record is the source's business (`seatgate_aws::dynamodb::stream` for DynamoDB
//! Streams, the embedded outbox for local runs): this edge takes [`ChangeRecord`]s, so the core
//! never depends on an adapter.

use crate::domain::ChangeRecord;
use crate::service::Relay;
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use tracing::error;

/// Runs the relay over the records; returns the position of the first failure, if any.
pub async fn handle(relay: &Relay, records: Vec<ChangeRecord>) -> Option<String> {
    let mut changes = Vec::with_capacity(records.len());
    let mut positions = Vec::with_capacity(records.len());
    let mut first_bad = None;
    for (i, record) in records.into_iter().enumerate() {
        match record.change {
            Ok(Some(change)) => {
                changes.push(change);
                positions.push((i, record.position));
            }
            Ok(None) => {}
            Err(why) => {
                error!(position = %record.position, error = %why, "undecodable outbox record");
                first_bad = Some((i, record.position));
                break;
            }
        }
    }
    let results = relay.handle(&changes).await;
    let first_failed = positions
        .into_iter()
        .zip(results)
        .find(|(_, r)| r.is_err())
        .map(|(p, _)| p);
    match (first_failed, first_bad) {
        (Some(a), Some(b)) => Some(if a.0 < b.0 { a.1 } else { b.1 }),
        (Some(a), None) => Some(a.1),
        (None, b) => b.map(|b| b.1),
    }
}

/// The relay function's handler: the records of one DynamoDB stream event, decoded, in; at most
/// one batch item failure (the first failed record's sequence number) out.
pub async fn handle_dynamodb_event(
    relay: &Relay,
    records: Vec<ChangeRecord>,
) -> DynamoDbEventResponse {
    let mut response = DynamoDbEventResponse::default();
    if let Some(position) = handle(relay, records).await {
        let mut failure = DynamoDbBatchItemFailure::default();
        failure.item_identifier = Some(position);
        response.batch_item_failures.push(failure);
    }
    response
}
