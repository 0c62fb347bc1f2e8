//! The seat-read cache's shared entries, the circuit breaker and the routes' `Retry-After`
//! pauses on the table.
//!
//! Each write is one conditional request whose condition is the domain's rule written as an
//! expression: [`CacheEntry::may_lease`], [`CacheEntry::may_record`] and
//! [`CacheEntry::may_record_failure`] for readings, "the generation I decided on" for the
//! breaker, [`RoutePauses::may_extend`] for a pause. A failed condition is an answer (`Ok(false)`), not
//! an error. Reads are strongly consistent: a reading one instance just recorded is what the
//! next instance's miss must find, or it would call the upstream again.

use super::expr::Expr;
use super::item::{self, attr};
use super::{DynamoStore, conditional_write};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use seatgate::domain::{
    BreakerState, CacheEntry, Millis, ReadFailure, ReadKey, Reading, RefreshLease, RoutePauses,
    UpstreamRoute,
};
use seatgate::ports::{BreakerStates, Readings, StoreError};
use std::collections::HashMap;

fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// A reading recorded unless a newer one is (`CacheEntry::may_record`, as a condition): for
/// `UpdateItem`, or inside a settlement's transaction. A recorded reading clears a failed
/// refresh.
pub(super) fn record_reading(reading: &Reading) -> Expr {
    let names = [
        ("#reading", attr::READING),
        ("#as_of", attr::AS_OF),
        ("#ttl", attr::TTL),
        ("#fail_at", attr::FAIL_AT),
        ("#fail_until", attr::FAIL_UNTIL),
        ("#fail_count", attr::FAIL_COUNT),
    ];
    Expr {
        condition: "attribute_not_exists(#as_of) OR #as_of < :as_of".into(),
        update: "SET #reading = :reading, #as_of = :as_of, #ttl = :ttl \
                 REMOVE #fail_at, #fail_until, #fail_count"
            .into(),
        names: names
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        values: HashMap::from([
            (":reading".to_owned(), item::reading_attr(reading)),
            (":as_of".to_owned(), n(reading.as_of.0)),
            (":ttl".to_owned(), item::reading_ttl(reading.as_of)),
        ]),
    }
}

#[async_trait]
impl Readings for DynamoStore {
    async fn entry(&self, key: &ReadKey) -> Result<Option<CacheEntry>, StoreError> {
        self.get(item::reading_key(key))
            .await?
            .map(|i| item::entry_from_item(&i))
            .transpose()
    }

    async fn entries(&self, keys: &[ReadKey]) -> Result<Vec<(ReadKey, CacheEntry)>, StoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let by_pk: HashMap<String, ReadKey> = keys
            .iter()
            .map(|k| (format!("READ#{}", k.as_key()), k.clone()))
            .collect();
        let mut found = Vec::with_capacity(keys.len());
        for i in self
            .batch_get(keys.iter().map(item::reading_key).collect())
            .await?
        {
            let Some(AttributeValue::S(pk)) = i.get(attr::PK) else {
                return Err(StoreError::Corrupt("reading.pk".into()));
            };
            if let Some(key) = by_pk.get(pk) {
                found.push((key.clone(), item::entry_from_item(&i)?));
            }
        }
        Ok(found)
    }

    async fn lease_refresh(
        &self,
        key: &ReadKey,
        lease: &RefreshLease,
        stale_before: Millis,
    ) -> Result<bool, StoreError> {
        // CacheEntry::may_lease, as a condition.
        let condition = "attribute_not_exists(#pk) OR \
             ((attribute_not_exists(#as_of) OR #as_of < :stale_before) AND \
              (attribute_not_exists(#until) OR #until <= :now OR #holder = :holder \
               OR #since <= #as_of) AND \
              (attribute_not_exists(#fail_until) OR #fail_until <= :now))";
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(item::reading_key(key)))
            .update_expression("SET #holder = :holder, #since = :now, #until = :until, #ttl = :ttl")
            .condition_expression(condition)
            .expression_attribute_names("#pk", attr::PK)
            .expression_attribute_names("#as_of", attr::AS_OF)
            .expression_attribute_names("#holder", attr::LEASE_HOLDER)
            .expression_attribute_names("#since", attr::LEASE_SINCE)
            .expression_attribute_names("#until", attr::LEASE_UNTIL)
            .expression_attribute_names("#ttl", attr::TTL)
            .expression_attribute_names("#fail_until", attr::FAIL_UNTIL)
            .expression_attribute_values(":holder", AttributeValue::S(lease.holder.clone()))
            .expression_attribute_values(":now", n(lease.since.0))
            .expression_attribute_values(":until", n(lease.until.0))
            .expression_attribute_values(":stale_before", n(stale_before.0))
            .expression_attribute_values(":ttl", item::reading_ttl(lease.since))
            .send()
            .await;
        conditional_write("UpdateItem", result)
    }

    async fn record(&self, reading: &Reading) -> Result<bool, StoreError> {
        let e = record_reading(reading);
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(item::reading_key(&reading.key)))
            .update_expression(e.update)
            .condition_expression(e.condition)
            .set_expression_attribute_names(Some(e.names))
            .set_expression_attribute_values(Some(e.values))
            .send()
            .await;
        conditional_write("UpdateItem", result)
    }

    async fn record_failure(
        &self,
        key: &ReadKey,
        failure: &ReadFailure,
    ) -> Result<bool, StoreError> {
        // CacheEntry::may_record_failure, as a condition.
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(item::reading_key(key)))
            .update_expression(
                "SET #fail_at = :at, #fail_until = :until, #fail_count = :count, #ttl = :ttl",
            )
            .condition_expression(
                "(attribute_not_exists(#as_of) OR #as_of < :at) AND \
                 (attribute_not_exists(#fail_until) OR #fail_until < :until)",
            )
            .expression_attribute_names("#as_of", attr::AS_OF)
            .expression_attribute_names("#fail_at", attr::FAIL_AT)
            .expression_attribute_names("#fail_until", attr::FAIL_UNTIL)
            .expression_attribute_names("#fail_count", attr::FAIL_COUNT)
            .expression_attribute_names("#ttl", attr::TTL)
            .expression_attribute_values(":at", n(failure.at.0))
            .expression_attribute_values(":until", n(failure.until.0))
            .expression_attribute_values(":count", n(failure.count))
            .expression_attribute_values(":ttl", item::reading_ttl(failure.until))
            .send()
            .await;
        conditional_write("UpdateItem", result)
    }
}

#[async_trait]
impl BreakerStates for DynamoStore {
    async fn breaker(&self) -> Result<BreakerState, StoreError> {
        Ok(self
            .get(item::breaker_key())
            .await?
            .map(|i| item::breaker_from_item(&i))
            .transpose()?
            .unwrap_or_default())
    }

    async fn swap_breaker(&self, next: &BreakerState) -> Result<bool, StoreError> {
        let mut put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item::breaker_to_item(next)));
        put = match next.generation {
            0 => return Ok(false),
            1 => put
                .condition_expression("attribute_not_exists(#pk)")
                .expression_attribute_names("#pk", attr::PK),
            g => put
                .condition_expression("#generation = :previous")
                .expression_attribute_names("#generation", attr::GENERATION)
                .expression_attribute_values(":previous", n(g - 1)),
        };
        conditional_write("PutItem", put.send().await)
    }

    async fn pauses(&self) -> Result<RoutePauses, StoreError> {
        Ok(self
            .get(item::pauses_key())
            .await?
            .map(|i| item::pauses_from_item(&i))
            .transpose()?
            .unwrap_or_default())
    }

    async fn pause(&self, route: UpstreamRoute, until: Millis) -> Result<bool, StoreError> {
        // RoutePauses::may_extend, as a condition on this route's attribute alone.
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(item::pauses_key()))
            .update_expression("SET #route = :until")
            .condition_expression("attribute_not_exists(#route) OR #route < :until")
            .expression_attribute_names("#route", item::pause_attr(route))
            .expression_attribute_values(":until", n(until.0))
            .send()
            .await;
        conditional_write("UpdateItem", result)
    }
}
