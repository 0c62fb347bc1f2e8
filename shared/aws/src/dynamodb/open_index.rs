//! A seat's REQUESTED intents, from the sparse `open_seat` index, and a batch of intents by id:
//! the two reads behind closing a won seat's lost races together (`Intents::open_on_seat`,
//! `Intents::intents`).
//!
//! A REQUESTED intent carries `open_seat` = `OPEN#<seat>#<n>` (`n` from its id, one of
//! `TABLE.open_shards`), written by the very write that makes it REQUESTED and removed by the
//! one that moves it on (`expr::OpenIndex`), so the index never needs a sweep. Sharded because a
//! same-seat burst writes a thousand intents of one seat in a second: on one key that is one GSI
//! partition's whole write rate, and a throttled GSI throttles the table's writes with it.

use super::item::{self, Item, attr};
use super::schema::TABLE;
use super::{DynamoStore, map_sdk_error};
use aws_sdk_dynamodb::types::AttributeValue;
use seatgate::domain::{Intent, IntentId, SeatId};
use seatgate::ports::StoreError;

impl DynamoStore {
    /// One `Query` per shard, concurrently; at most `limit` intents in all.
    pub(super) async fn open_intents(
        &self,
        seat_id: &SeatId,
        limit: usize,
    ) -> Result<Vec<Intent>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let queries = (0..TABLE.open_shards).map(|n| self.open_in_shard(seat_id, n, limit));
        let mut open: Vec<Intent> = futures::future::try_join_all(queries)
            .await?
            .into_iter()
            .flatten()
            .collect();
        open.truncate(limit);
        Ok(open)
    }

    /// Up to `limit` intents of one shard. Each round returns at least one item or ends, so
    /// the loop runs at most `limit` rounds.
    async fn open_in_shard(
        &self,
        seat_id: &SeatId,
        shard: u32,
        limit: usize,
    ) -> Result<Vec<Intent>, StoreError> {
        let mut found = Vec::new();
        let mut start: Option<Item> = None;
        for _round in 0..limit {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(TABLE.open_index)
                .key_condition_expression("#open = :open")
                .expression_attribute_names("#open", attr::OPEN_SEAT)
                .expression_attribute_values(
                    ":open",
                    AttributeValue::S(TABLE.open_seat_value(seat_id.as_str(), shard)),
                )
                .limit(i32::try_from(limit - found.len()).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| map_sdk_error("Query", e))?;
            for i in out.items() {
                if item::is_intent_item(i) {
                    found.push(item::intent_from_item(i)?);
                }
            }
            match out.last_evaluated_key {
                Some(k) if !k.is_empty() && found.len() < limit => start = Some(k),
                _ => break,
            }
        }
        Ok(found)
    }

    /// One `BatchGetItem` of the intents' items.
    pub(super) async fn intents_by_id(&self, ids: &[IntentId]) -> Result<Vec<Intent>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        seatgate::ports::within_batch_read(ids.len())?;
        let mut keys: Vec<Item> = ids.iter().map(item::intent_key).collect();
        keys.dedup();
        self.batch_get(keys)
            .await?
            .iter()
            .map(item::intent_from_item)
            .collect()
    }
}
