//! The per-user rate limit's window counters on the table.
//!
//! | item | pk | sk |
//! |---|---|---|
//! | rate window | `USER#<user>` | `RATE#<route>#<window start, epoch ms>` (`count`, `ttl`) |
//!
//! Taking a request is one `UpdateItem`: `ADD count 1` with the condition that the counter is
//! missing or below the limit (`RateWindow::admits`, written as a condition; the contract case
//! `rate_windows_answer_as_the_counting_rule` holds the two together). A failed condition is
//! the refusal (`Ok(false)`), and costs one write unit like any refused conditional write. A
//! confirm does not take its request this way: the same update rides in its transaction
//! ([`window_update`]), so the confirm costs one write request, not two. Old windows go by
//! TTL, a little after their end (TTL deletes lag, and a late delete is harmless: a newer
//! window has its own key).

use super::expr::Expr;
use super::item::{Item, attr};
use super::{DynamoStore, conditional_write};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use seatgate::domain::RateWindow;
use seatgate::ports::{RateLimits, StoreError};
use std::collections::HashMap;
use std::time::Duration;

const COUNT: &str = "count";

/// How long past its end a window item is kept before TTL may delete it.
const TTL_SLACK: Duration = Duration::from_secs(60);

pub(super) fn window_key(window: &RateWindow) -> Item {
    HashMap::from([
        (
            attr::PK.to_owned(),
            AttributeValue::S(format!("USER#{}", window.user)),
        ),
        (
            attr::SK.to_owned(),
            AttributeValue::S(format!("RATE#{}#{}", window.route.as_str(), window.start.0)),
        ),
    ])
}

/// The window's counter, raised by one while below `limit` (created at 1): the update and its
/// condition, for `UpdateItem` or for an `Update` inside a transaction.
pub(super) fn window_update(window: &RateWindow, limit: u32) -> Expr {
    let ttl = window.ends_at.plus(TTL_SLACK).as_epoch_seconds_ceil();
    Expr {
        condition: "attribute_not_exists(#count) OR #count < :limit".into(),
        update: "ADD #count :one SET #ttl = :ttl".into(),
        names: HashMap::from([
            ("#count".to_owned(), COUNT.to_owned()),
            ("#ttl".to_owned(), attr::TTL.to_owned()),
        ]),
        values: HashMap::from([
            (":one".to_owned(), AttributeValue::N("1".into())),
            (":ttl".to_owned(), AttributeValue::N(ttl.to_string())),
            (":limit".to_owned(), AttributeValue::N(limit.to_string())),
        ]),
    }
}

#[async_trait]
impl RateLimits for DynamoStore {
    async fn take(&self, window: &RateWindow, limit: u32) -> Result<bool, StoreError> {
        let e = window_update(window, limit);
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(window_key(window)))
            .update_expression(e.update)
            .condition_expression(e.condition)
            .set_expression_attribute_names(Some(e.names))
            .set_expression_attribute_values(Some(e.values))
            .send()
            .await;
        conditional_write("UpdateItem", result)
    }
}
