//! Operator leases (`OperatorLeases`) on the table.
//!
//! | item | pk | sk |
//! |---|---|---|
//! | operator lease | `LEASE#<name>` | `LEASE` (`holder`, `until` epoch ms, `ttl`) |
//!
//! Taking is one `PutItem` conditional on no item or a lease that has ended (`may_take_lease`,
//! written as a condition; the contract case `leases_answer_as_the_take_rule` holds them together); releasing is one
//! `DeleteItem` conditional on the holder. A lease whose holder died is taken over once it ends,
//! and TTL removes a forgotten one later.

use super::item::{Item, attr};
use super::{DynamoStore, conditional_write};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use seatgate::domain::Millis;
use seatgate::ports::{OperatorLeases, StoreError};
use std::collections::HashMap;
use std::time::Duration;

const HOLDER: &str = "holder";
const UNTIL: &str = "until";

/// How long past its end a lease item is kept before TTL may delete it.
const TTL_SLACK: Duration = Duration::from_secs(3600);

fn lease_key(name: &str) -> Item {
    HashMap::from([
        (
            attr::PK.to_owned(),
            AttributeValue::S(format!("LEASE#{name}")),
        ),
        (attr::SK.to_owned(), AttributeValue::S("LEASE".to_owned())),
    ])
}

#[async_trait]
impl OperatorLeases for DynamoStore {
    async fn take_lease(
        &self,
        name: &str,
        holder: &str,
        now: Millis,
        until: Millis,
    ) -> Result<bool, StoreError> {
        let mut item = lease_key(name);
        item.insert(HOLDER.to_owned(), AttributeValue::S(holder.to_owned()));
        item.insert(UNTIL.to_owned(), AttributeValue::N(until.0.to_string()));
        item.insert(
            attr::TTL.to_owned(),
            AttributeValue::N(until.plus(TTL_SLACK).as_epoch_seconds_ceil().to_string()),
        );
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#pk) OR #until <= :now")
            .expression_attribute_names("#pk", attr::PK)
            .expression_attribute_names("#until", UNTIL)
            .expression_attribute_values(":now", AttributeValue::N(now.0.to_string()))
            .send()
            .await;
        conditional_write("PutItem", result)
    }

    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        let result = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(lease_key(name)))
            .condition_expression("#holder = :holder")
            .expression_attribute_names("#holder", HOLDER)
            .expression_attribute_values(":holder", AttributeValue::S(holder.to_owned()))
            .send()
            .await;
        // Another holder's lease (the condition failed) is left alone, and that is no error.
        conditional_write("DeleteItem", result).map(|_| ())
    }
}
