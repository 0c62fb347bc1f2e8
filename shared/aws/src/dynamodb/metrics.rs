//! Counting the requests a [`super::DynamoStore`] sends, per operation.
//!
//! The brief's headline number is writes: 100 confirms of one seat must cost the upstream one
//! write, and each winner must cost the table only a handful. Counting in an SDK interceptor (at
//! `read_before_transmit`, once per HTTP attempt) measures what really goes over the wire,
//! including the SDK's own retries, rather than what the adapter meant to send.

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Operations that write to the table.
pub const WRITE_OPERATIONS: [&str; 5] = [
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "TransactWriteItems",
    "BatchWriteItem",
];

/// Requests sent, by operation name (`UpdateItem`, `TransactWriteItems`, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestCounts {
    pub by_operation: BTreeMap<String, u64>,
}

impl RequestCounts {
    pub fn get(&self, operation: &str) -> u64 {
        self.by_operation.get(operation).copied().unwrap_or(0)
    }

    /// Requests that write: one conditional write or one transaction each.
    pub fn writes(&self) -> u64 {
        WRITE_OPERATIONS.iter().map(|op| self.get(op)).sum()
    }

    pub fn total(&self) -> u64 {
        self.by_operation.values().sum()
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &RequestCounts) -> RequestCounts {
        let by_operation = self
            .by_operation
            .iter()
            .map(|(op, n)| (op.clone(), n - earlier.get(op)))
            .filter(|(_, n)| *n > 0)
            .collect();
        RequestCounts { by_operation }
    }
}

/// The interceptor. Cheap: one short critical section per request.
#[derive(Debug, Clone, Default)]
pub struct RequestCounter {
    counts: Arc<Mutex<RequestCounts>>,
}

impl RequestCounter {
    pub fn snapshot(&self) -> RequestCounts {
        self.counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Intercept for RequestCounter {
    fn name(&self) -> &'static str {
        "seatgate.RequestCounter"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        // DynamoDB's JSON protocol names the operation in `X-Amz-Target: DynamoDB_20120810.<Op>`.
        let op = context
            .request()
            .headers()
            .get("x-amz-target")
            .and_then(|t| t.rsplit('.').next())
            .unwrap_or("unknown")
            .to_owned();
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        *counts.by_operation.entry(op).or_default() += 1;
        Ok(())
    }
}

/// Capacity units the table reported, by operation name: what DynamoDB says each request cost.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CapacityCounts {
    pub by_operation: BTreeMap<String, f64>,
    /// Successful answers of an operation that reports capacity, by operation name (a
    /// transaction's or batch's answer counts even if its list is empty). The rest (a refused
    /// conditional write, a cancelled transaction) are errors, which carry no capacity, though
    /// DynamoDB bills a refused write.
    pub reported: BTreeMap<String, u64>,
}

impl CapacityCounts {
    pub fn get(&self, operation: &str) -> f64 {
        self.by_operation.get(operation).copied().unwrap_or(0.0)
    }

    pub fn reported(&self, operation: &str) -> u64 {
        self.reported.get(operation).copied().unwrap_or(0)
    }

    /// Units of the operations that write.
    pub fn write_units(&self) -> f64 {
        WRITE_OPERATIONS.iter().map(|op| self.get(op)).sum()
    }

    /// Units of the operations that read.
    pub fn read_units(&self) -> f64 {
        self.by_operation
            .iter()
            .filter(|(op, _)| !WRITE_OPERATIONS.contains(&op.as_str()))
            .map(|(_, u)| u)
            .sum()
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &CapacityCounts) -> CapacityCounts {
        CapacityCounts {
            by_operation: self
                .by_operation
                .iter()
                .map(|(op, u)| (op.clone(), u - earlier.get(op)))
                .filter(|(_, u)| *u > 0.0)
                .collect(),
            reported: self
                .reported
                .iter()
                .map(|(op, n)| (op.clone(), n - earlier.reported(op)))
                .filter(|(_, n)| *n > 0)
                .collect(),
        }
    }
}

/// Operations whose request is asked for its capacity: those the store sends that take
/// `ReturnConsumedCapacity` and whose answers `reported_units` reads.
const CAPACITY_OPERATIONS: [&str; 8] = [
    "GetItem",
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "Query",
    "Scan",
    "BatchGetItem",
    "TransactWriteItems",
];

/// An interceptor that asks every request for its consumed capacity
/// (`ReturnConsumedCapacity: TOTAL`, added to the request's JSON before it is signed) and adds
/// up what the answers report, read from the typed outputs. For measuring
/// (`DynamoStore::counting_capacity`), not for the functions: it rewrites each request body
/// once more.
#[derive(Debug, Clone, Default)]
pub struct CapacityCounter {
    counts: Arc<Mutex<CapacityCounts>>,
}

impl CapacityCounter {
    pub fn snapshot(&self) -> CapacityCounts {
        self.counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// The operation and units an output reports, if it is one that reports capacity.
fn reported_units(
    output: &aws_sdk_dynamodb::config::interceptors::AfterDeserializationInterceptorContextRef<'_>,
) -> Option<(&'static str, f64)> {
    use aws_sdk_dynamodb::operation as op;
    use aws_sdk_dynamodb::types::ConsumedCapacity;
    let output = output.output_or_error().ok()?;
    let one = |c: Option<&ConsumedCapacity>| c.and_then(ConsumedCapacity::capacity_units);
    let all = |c: &[ConsumedCapacity]| {
        c.iter()
            .filter_map(ConsumedCapacity::capacity_units)
            .sum::<f64>()
    };
    macro_rules! single {
        ($($name:literal => $ty:ty),* $(,)?) => {
            $(if let Some(o) = output.downcast_ref::<$ty>() {
                return one(o.consumed_capacity()).map(|u| ($name, u));
            })*
        };
    }
    single!(
        "GetItem" => op::get_item::GetItemOutput,
        "PutItem" => op::put_item::PutItemOutput,
        "UpdateItem" => op::update_item::UpdateItemOutput,
        "DeleteItem" => op::delete_item::DeleteItemOutput,
        "Query" => op::query::QueryOutput,
        "Scan" => op::scan::ScanOutput,
    );
    if let Some(o) = output.downcast_ref::<op::transact_write_items::TransactWriteItemsOutput>() {
        return Some(("TransactWriteItems", all(o.consumed_capacity())));
    }
    if let Some(o) = output.downcast_ref::<op::batch_get_item::BatchGetItemOutput>() {
        return Some(("BatchGetItem", all(o.consumed_capacity())));
    }
    None
}

impl Intercept for CapacityCounter {
    fn name(&self) -> &'static str {
        "seatgate.CapacityCounter"
    }

    fn modify_before_signing(
        &self,
        context: &mut aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextMut<
            '_,
        >,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let request = context.request_mut();
        let asks = request
            .headers()
            .get("x-amz-target")
            .and_then(|t| t.rsplit('.').next())
            .is_some_and(|op| CAPACITY_OPERATIONS.contains(&op));
        let Some(body) = request.body().bytes().filter(|_| asks) else {
            return Ok(());
        };
        let mut json: serde_json::Value = serde_json::from_slice(body)?;
        if let Some(fields) = json.as_object_mut() {
            fields.insert("ReturnConsumedCapacity".into(), "TOTAL".into());
        }
        let bytes = serde_json::to_vec(&json)?;
        request
            .headers_mut()
            .insert("content-length", bytes.len().to_string());
        *request.body_mut() = bytes.into();
        Ok(())
    }

    fn read_after_deserialization(
        &self,
        context: &aws_sdk_dynamodb::config::interceptors::AfterDeserializationInterceptorContextRef<
            '_,
        >,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        if let Some((op, units)) = reported_units(context) {
            let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
            *counts.by_operation.entry(op.to_owned()).or_default() += units;
            *counts.reported.entry(op.to_owned()).or_default() += 1;
        }
        Ok(())
    }
}
