//! The table's paged reads: a partition's items by sort-key prefix (the pages behind
//! histories and listings) and one shard of the reaper's `due` index. Beside `open_index.rs`,
//! the other index read, so the two `Query` loops can be read together.

use super::item::{self, Item, attr};
use super::schema::TABLE;
use super::{DynamoStore, map_sdk_error};
use aws_sdk_dynamodb::types::AttributeValue;
use seatgate::domain::{Intent, Millis, PageSize};
use seatgate::ports::StoreError;
use std::collections::HashMap;

impl DynamoStore {
    /// Up to `size.overread()` items of partition `pk` whose sort key starts with `prefix`, in
    /// sort key order, after the item with sort key `after_sk` when given: the read behind one
    /// [`Page`]. Strongly consistent. The loop only continues a `Query` that DynamoDB cut at
    /// its 1 MB page; each round returns at least one item, so it runs at most
    /// `size.overread()` rounds.
    pub(crate) async fn query_page(
        &self,
        pk: AttributeValue,
        prefix: &str,
        after_sk: Option<String>,
        size: PageSize,
    ) -> Result<Vec<Item>, StoreError> {
        let wanted = size.overread();
        let mut found: Vec<Item> = Vec::with_capacity(wanted);
        let mut start: Option<Item> = after_sk.map(|sk| {
            HashMap::from([
                (attr::PK.to_owned(), pk.clone()),
                (attr::SK.to_owned(), AttributeValue::S(sk)),
            ])
        });
        for _round in 0..wanted {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("#pk = :pk AND begins_with(#sk, :prefix)")
                .expression_attribute_names("#pk", attr::PK)
                .expression_attribute_names("#sk", attr::SK)
                .expression_attribute_values(":pk", pk.clone())
                .expression_attribute_values(":prefix", AttributeValue::S(prefix.to_owned()))
                .consistent_read(true)
                .limit(i32::try_from(wanted - found.len()).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| map_sdk_error("Query", e))?;
            found.extend(out.items.unwrap_or_default());
            match out.last_evaluated_key {
                Some(k) if !k.is_empty() && found.len() < wanted => start = Some(k),
                _ => break,
            }
        }
        found.truncate(wanted);
        Ok(found)
    }

    /// Up to `limit` due intents of one shard, oldest first.
    pub(super) async fn due_in_shard(
        &self,
        shard: u32,
        now: Millis,
        limit: usize,
    ) -> Result<Vec<Intent>, StoreError> {
        let mut found = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(TABLE.due_index)
                .key_condition_expression("#shard = :shard AND #due <= :now")
                .expression_attribute_names("#shard", attr::DUE_SHARD)
                .expression_attribute_names("#due", attr::DUE_AT)
                .expression_attribute_values(
                    ":shard",
                    AttributeValue::S(TABLE.due_shard_value(shard)),
                )
                .expression_attribute_values(":now", AttributeValue::N(now.0.to_string()))
                .scan_index_forward(true)
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
                _ => return Ok(found),
            }
        }
    }
}
