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
