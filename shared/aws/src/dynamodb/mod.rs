//! The production store: the ports on one DynamoDB table.
//!
//! Every state change is exactly one write request: a conditional `PutItem`/`UpdateItem` or one
//! `TransactWriteItems`. Refusals are explained from the item the failed condition saw
//! (`ReturnValuesOnConditionCheckFailure = ALL_OLD`), never from a second read, so there is no
//! window between "decide" and "write" for another worker to slip into. An intent's transition
//! needs the version it applies to, which names the transition record written in the same
//! transaction: it takes it from the caller's copy of the intent when it has one (the claimed
//! intent, the queue message's image), else reads the intent first; the write is pinned to that
//! version, so neither decides anything. Reads are `GetItem` (strongly consistent) and, for the
//! reaper, `Query` on the sparse `due` index.
//!
//! Layout: one file per port, as the core's `ports/` and the other two backends (`actions`,
//! `intents`, `credentials`, `flights`, `checkout`, `waitlist`, `rate_limits`, `leases`,
//! `shared_state` for readings and the breaker); [`schema`] (the table definition and
//! `create_table`), [`item`] (domain <-> items),
//! [`expr`] (condition/update expressions mirroring `Intent::apply`), [`stream`] (stream
//! records -> `IntentChange`), [`metrics`] (requests sent per operation). The fault-injecting
//! decorator for tests is `seatgate_testkit::FaultyStore`.
//!
//! Retries: the AWS SDK's standard retry mode (3 attempts, exponential backoff with jitter) is
//! left on. It retries throttling (`ProvisionedThroughputExceededException`,
//! `RequestLimitExceeded`, `ThrottlingException`, `TransactionInProgressException`), 5xx and
//! timeouts for every request. Transactions carry a `ClientRequestToken` so an SDK retry of a
//! transaction that did commit is answered with success instead of being applied (or refused)
//! again. What still fails after that reaches the caller as a retryable [`StoreError`]
//! (`Throttled`, `TransactionConflict`), which the services retry a few times more with their own
//! backoff (`seatgate::service::with_retry`): safe, because both errors mean nothing was written.
//!
//! Errors never carry item contents: [`StoreError::Unavailable`] holds the operation and the
//! error code only, because a refused credential write could otherwise echo a credential.

mod actions;
mod batch;
mod checkout;
mod credentials;
pub mod expr;
mod flights;
mod intents;
pub mod item;
mod leases;
pub mod metrics;
mod open_index;
mod queries;
mod rate_limits;
pub mod schema;
mod shared_state;
pub mod stream;
mod waitlist;

pub use metrics::{CapacityCounter, CapacityCounts, RequestCounter, RequestCounts};
pub use schema::{TABLE, TableSchema, create_table, delete_table};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, CancellationReason, Delete, Put, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};
use std::collections::HashMap;

use self::expr::Expr;
use self::item::Item;
use seatgate::domain::{Action, ConfirmDenied, Intent};
use seatgate::ports::{ConfirmRefusal, Confirmation, StoreError};

/// The ports on one DynamoDB table (see [`schema::TABLE`]).
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
    counter: RequestCounter,
    /// Set by [`DynamoStore::counting_capacity`].
    capacity: Option<CapacityCounter>,
    /// Seals and opens credentials; without it the store refuses to keep or read one rather
    /// than keep it in the clear.
    credentials_key: Option<crate::kms::KmsKey>,
}

impl DynamoStore {
    /// A store on `table`. The client is rebuilt with a [`RequestCounter`] interceptor; all its
    /// other settings (region, credentials, endpoint, retry and timeout config) are kept.
    pub fn new(client: &Client, table: impl Into<String>) -> Self {
        let counter = RequestCounter::default();
        let config = client
            .config()
            .to_builder()
            .interceptor(counter.clone())
            .build();
        DynamoStore {
            client: Client::from_conf(config),
            table: table.into(),
            counter,
            capacity: None,
            credentials_key: None,
        }
    }

    /// The store, its every request also asking DynamoDB what it cost (`CapacityCounter`),
    /// read with [`DynamoStore::capacity`]. For measuring the cost model; the functions never
    /// ask.
    pub fn counting_capacity(mut self) -> Self {
        let counter = CapacityCounter::default();
        let config = self
            .client
            .config()
            .to_builder()
            .interceptor(counter.clone())
            .build();
        self.client = Client::from_conf(config);
        self.capacity = Some(counter);
        self
    }

    /// The capacity DynamoDB reported so far, if the store counts it
    /// ([`DynamoStore::counting_capacity`]).
    pub fn capacity(&self) -> Option<CapacityCounts> {
        self.capacity.as_ref().map(CapacityCounter::snapshot)
    }

    /// The store, sealing credentials under `key`.
    pub fn with_credentials_key(mut self, key: crate::kms::KmsKey) -> Self {
        self.credentials_key = Some(key);
        self
    }

    fn credentials_key(&self) -> Result<&crate::kms::KmsKey, StoreError> {
        self.credentials_key.as_ref().ok_or_else(|| {
            StoreError::Unavailable(
                "no credentials key: set CREDENTIALS_KEY_ID to the KMS key that seals them".into(),
            )
        })
    }

    /// A store configured from the environment (region, credentials, and
    /// `AWS_ENDPOINT_URL_DYNAMODB` for emulators), as the Lambda functions build it.
    pub async fn from_env(table: impl Into<String>) -> Self {
        let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        DynamoStore::new(&Client::new(&config), table)
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// Requests sent so far, per operation (every HTTP attempt, SDK retries included).
    pub fn requests(&self) -> RequestCounts {
        self.counter.snapshot()
    }

    /// Write requests sent so far (`PutItem`, `UpdateItem`, `TransactWriteItems`, ...).
    pub fn write_requests(&self) -> u64 {
        self.requests().writes()
    }

    /// The intent under `key`, strongly consistent.
    async fn read_intent(&self, key: &Item) -> Result<Option<Intent>, StoreError> {
        self.get(key.clone())
            .await?
            .map(|i| item::intent_from_item(&i))
            .transpose()
    }

    async fn get(&self, key: Item) -> Result<Option<Item>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| map_sdk_error("GetItem", e))?;
        Ok(out.item.filter(|i| !i.is_empty()))
    }

    fn put(&self, item: Item, condition: Option<Expr>) -> Result<TransactWriteItem, StoreError> {
        let mut put = Put::builder().table_name(&self.table).set_item(Some(item));
        if let Some(e) = condition {
            put = put
                .condition_expression(e.condition)
                .set_expression_attribute_names(non_empty(e.names))
                .set_expression_attribute_values(non_empty(e.values));
        }
        Ok(TransactWriteItem::builder()
            .put(put.build().map_err(build_error)?)
            .build())
    }

    fn delete(&self, key: Item, e: Expr) -> Result<TransactWriteItem, StoreError> {
        let delete = Delete::builder()
            .table_name(&self.table)
            .set_key(Some(key))
            .condition_expression(e.condition)
            .set_expression_attribute_names(non_empty(e.names))
            .set_expression_attribute_values(non_empty(e.values))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().delete(delete).build())
    }

    fn update(&self, key: Item, e: Expr) -> Result<TransactWriteItem, StoreError> {
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(key))
            .update_expression(e.update)
            .set_condition_expression((!e.condition.is_empty()).then_some(e.condition))
            .set_expression_attribute_names(non_empty(e.names))
            .set_expression_attribute_values(non_empty(e.values))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// One `TransactWriteItems`. `Ok(Err(reasons))` when DynamoDB cancelled it for a reason the
    /// caller must interpret (a failed condition); throttling and conflicts anywhere in the
    /// transaction are already mapped to their retryable errors.
    async fn transact(
        &self,
        items: Vec<TransactWriteItem>,
    ) -> Result<Result<(), Vec<CancellationReason>>, StoreError> {
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .client_request_token(uuid::Uuid::new_v4().to_string())
            .send()
            .await;
        match result {
            Ok(_) => Ok(Ok(())),
            Err(err) => match err.as_service_error() {
                Some(TransactWriteItemsError::TransactionCanceledException(e)) => {
                    let reasons = e.cancellation_reasons().to_vec();
                    Ok(Err(reasons))
                }
                _ => Err(map_sdk_error("TransactWriteItems", err)),
            },
        }
    }
}

fn non_empty<K, V>(m: HashMap<K, V>) -> Option<HashMap<K, V>> {
    (!m.is_empty()).then_some(m)
}

fn build_error(e: aws_sdk_dynamodb::error::BuildError) -> StoreError {
    StoreError::Unavailable(format!("building a request: {e}"))
}

/// Error codes that mean "too much load, nothing written, try again".
const THROTTLING_CODES: [&str; 5] = [
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "ThrottlingException",
    // Codes DynamoDB uses inside a transaction's cancellation reasons.
    "ProvisionedThroughputExceeded",
    "ThrottlingError",
];

/// Error codes that mean "another transaction holds these items, nothing written, try again".
const CONFLICT_CODES: [&str; 3] = [
    "TransactionConflictException",
    "TransactionInProgressException",
    // Inside a transaction's cancellation reasons.
    "TransactionConflict",
];

/// The retryable error an error code stands for, if any.
pub fn classify_code(code: &str) -> Option<StoreError> {
    if THROTTLING_CODES.contains(&code) {
        Some(StoreError::Throttled)
    } else if CONFLICT_CODES.contains(&code) {
        Some(StoreError::TransactionConflict)
    } else {
        None
    }
}

/// A conditional write's answer: `Ok(true)` written, `Ok(false)` its condition failed (an
/// answer, not an error), anything else the error it is.
pub fn conditional_write<T, E, R>(
    operation: &str,
    result: Result<T, SdkError<E, R>>,
) -> Result<bool, StoreError>
where
    E: ProvideErrorMetadata,
{
    match result {
        Ok(_) => Ok(true),
        Err(SdkError::ServiceError(e))
            if e.err().code() == Some("ConditionalCheckFailedException") =>
        {
            Ok(false)
        }
        Err(err) => Err(map_sdk_error(operation, err)),
    }
}

/// Maps an SDK error to a [`StoreError`]: throttling and conflicts to their retryable variants,
/// everything else to `Unavailable("<operation>: <code>")`. Never includes the error message
/// (which may quote request values) or item contents.
pub fn map_sdk_error<E, R>(operation: &str, err: SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata,
{
    match &err {
        SdkError::ServiceError(e) => {
            let code = e.err().code().unwrap_or("unknown error");
            classify_code(code)
                .unwrap_or_else(|| StoreError::Unavailable(format!("{operation}: {code}")))
        }
        SdkError::TimeoutError(_) => StoreError::Unavailable(format!("{operation}: timed out")),
        SdkError::DispatchFailure(_) => {
            StoreError::Unavailable(format!("{operation}: could not reach DynamoDB"))
        }
        SdkError::ResponseError(_) => {
            StoreError::Unavailable(format!("{operation}: unreadable response"))
        }
        _ => StoreError::Unavailable(format!("{operation}: request not sent")),
    }
}

/// Retryable causes anywhere in a cancelled transaction. Throttling wins over conflict (backing
/// off helps both).
fn retryable_cancellation(reasons: &[CancellationReason]) -> Option<StoreError> {
    let errors: Vec<StoreError> = reasons
        .iter()
        .filter_map(|r| r.code().and_then(classify_code))
        .collect();
    if errors.contains(&StoreError::Throttled) {
        Some(StoreError::Throttled)
    } else {
        errors.into_iter().next()
    }
}

fn is_condition_failure(reason: Option<&CancellationReason>) -> bool {
    reason.and_then(CancellationReason::code) == Some("ConditionalCheckFailed")
}

fn unexplained_cancellation(operation: &str, reasons: &[CancellationReason]) -> StoreError {
    let codes: Vec<&str> = reasons.iter().map(|r| r.code().unwrap_or("?")).collect();
    StoreError::Unavailable(format!(
        "{operation}: transaction cancelled ({})",
        codes.join(",")
    ))
}

/// The old item from a failed condition, `None` when there was no item.
fn old_item(item: Option<&HashMap<String, AttributeValue>>) -> Option<&Item> {
    item.filter(|i| !i.is_empty())
}

/// Why a confirm was refused, from the action item its condition saw.
fn confirm_refusal(
    old: Option<&Item>,
    confirmation: &Confirmation,
) -> Result<ConfirmRefusal, StoreError> {
    let Some(old) = old else {
        return Ok(ConfirmRefusal::NotFound);
    };
    let action = item::action_from_item(old)?;
    // The condition expression (`expr::confirm_action`) is this rule written for DynamoDB; the
    // refusal is the rule's verdict on the item the failed condition saw.
    match Action::confirm(
        Some(&action),
        &confirmation.user_id,
        &confirmation.intent.intent_id,
        confirmation.now,
    ) {
        Err(ConfirmDenied::Refused(refusal)) => return Ok(refusal),
        Err(ConfirmDenied::Corrupt) => return Err(StoreError::Corrupt("action.intent_id".into())),
        Ok(_) => {}
    }
    Err(StoreError::Unavailable(
        "confirm refused, but the action it saw satisfies the condition".into(),
    ))
}

#[cfg(test)]
mod tests;
