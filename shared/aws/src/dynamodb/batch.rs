//! Batch reads by key: one `BatchGetItem` for up to
//! [`MAX_BATCH_READ`](seatgate::ports::MAX_BATCH_READ) items, strongly consistent, with the keys
//! DynamoDB leaves unprocessed under load asked again a bounded number of times. Shared by the
//! readings (`shared_state.rs`), a flight's shards (`flights.rs`, one partition key each) and a
//! batch's intents (`open_index.rs`).

use super::item::Item;
use super::{DynamoStore, map_sdk_error};
use aws_sdk_dynamodb::types::KeysAndAttributes;
use seatgate::ports::StoreError;
use std::time::Duration;

/// Times a batch read re-asks for keys DynamoDB left unprocessed (under load) before giving up.
const UNPROCESSED_RETRIES: u32 = 5;

impl DynamoStore {
    /// The items under `keys` that exist, strongly consistent, in one `BatchGetItem` (keys it
    /// leaves unprocessed under load asked again, at most [`UNPROCESSED_RETRIES`] times, then
    /// `Throttled`). At most [`MAX_BATCH_READ`](seatgate::ports::MAX_BATCH_READ) keys.
    pub(super) async fn batch_get(&self, keys: Vec<Item>) -> Result<Vec<Item>, StoreError> {
        seatgate::ports::within_batch_read(keys.len())?;
        let mut pending = keys;
        let mut found = Vec::new();
        for attempt in 0..=UNPROCESSED_RETRIES {
            if pending.is_empty() {
                return Ok(found);
            }
            let request = KeysAndAttributes::builder()
                .set_keys(Some(std::mem::take(&mut pending)))
                .consistent_read(true)
                .build()
                .map_err(|e| StoreError::Unavailable(format!("building a request: {e}")))?;
            let out = self
                .client
                .batch_get_item()
                .request_items(&self.table, request)
                .send()
                .await
                .map_err(|e| map_sdk_error("BatchGetItem", e))?;
            found.extend(
                out.responses
                    .unwrap_or_default()
                    .remove(&self.table)
                    .unwrap_or_default(),
            );
            pending = out
                .unprocessed_keys
                .unwrap_or_default()
                .remove(&self.table)
                .map(|k| k.keys)
                .unwrap_or_default();
            if !pending.is_empty() && attempt < UNPROCESSED_RETRIES {
                tokio::time::sleep(Duration::from_millis(20 << attempt)).await;
            }
        }
        if pending.is_empty() {
            Ok(found)
        } else {
            Err(StoreError::Throttled)
        }
    }
}
