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
//! Layout: [`schema`] (the table definition and `create_table`), [`item`] (domain <-> items),
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

mod batch;
mod checkout;
pub mod expr;
mod flights;
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

use async_trait::async_trait;
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
use seatgate::domain::{
    Action, ActionId, ConfirmDenied, ConsentRecord, Hold, HoldEffect, Intent, IntentId, Millis,
    Page, PageSize, SeatId, Secret, Suppression, TransitionRecord, TransitionRequest, UserId,
};
use seatgate::ports::{
    Actions, ConfirmError, ConfirmRefusal, Confirmation, Credentials, Intents, StoreError,
    TransitionError,
};

/// How many times a transition is decided and written when only its intent's version moved
/// between the read and the write (a caller's stale copy, a newer reading in the cache, each
/// take one); past it the caller sees a retryable `TransactionConflict`.
const TRANSITION_ATTEMPTS: usize = 6;

/// The confirm transaction's items before its rate window: the action, the intent, the consent,
/// the history record.
const CONFIRM_ITEMS: usize = 4;

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

#[async_trait]
impl Actions for DynamoStore {
    async fn put_action(&self, action: &Action) -> Result<(), StoreError> {
        let e = expr::absent();
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item::action_to_item(action)))
            .condition_expression(e.condition)
            .set_expression_attribute_names(non_empty(e.names))
            .send()
            .await;
        if conditional_write("PutItem", result)? {
            Ok(())
        } else {
            Err(StoreError::Unavailable(
                "PutItem: action id already exists".into(),
            ))
        }
    }

    async fn get_action(&self, id: &ActionId) -> Result<Option<Action>, StoreError> {
        self.get(item::action_key(id))
            .await?
            .map(|i| item::action_from_item(&i))
            .transpose()
    }

    async fn confirm(&self, confirmation: &Confirmation) -> Result<(), ConfirmError> {
        let intent = &confirmation.intent;
        let mut items = vec![
            self.update(
                item::action_key(&confirmation.action_id),
                expr::confirm_action(
                    confirmation.user_id.as_str(),
                    confirmation.now,
                    intent.intent_id.as_str(),
                ),
            )?,
            self.put(item::intent_to_item(intent), Some(expr::absent()))?,
            self.put(
                item::consent_to_item(&confirmation.consent),
                Some(expr::absent()),
            )?,
            self.put(
                item::transition_to_item(&intent.intent_id, &TransitionRecord::of(None, intent)),
                Some(expr::absent()),
            )?,
        ];
        // Last, so the refusals keep their order: the action's own come first.
        let window = CONFIRM_ITEMS;
        if let Some(a) = &confirmation.admission {
            items.push(self.update(
                rate_limits::window_key(&a.window),
                rate_limits::window_update(&a.window, a.limit),
            )?);
        }
        let reasons = match self.transact(items).await? {
            Ok(()) => return Ok(()),
            Err(reasons) => reasons,
        };
        if is_condition_failure(reasons.first()) {
            let old = old_item(reasons[0].item());
            return Err(ConfirmError::Refused(confirm_refusal(old, confirmation)?));
        }
        if let Some(e) = retryable_cancellation(&reasons) {
            return Err(e.into());
        }
        if is_condition_failure(reasons.get(window)) {
            return Err(ConfirmError::Refused(ConfirmRefusal::RateLimited));
        }
        if reasons.iter().any(|r| is_condition_failure(Some(r))) {
            return Err(StoreError::Unavailable("confirm: intent id already exists".into()).into());
        }
        Err(unexplained_cancellation("confirm", &reasons).into())
    }
}

#[async_trait]
impl Intents for DynamoStore {
    async fn register_wait(
        &self,
        intent: &Intent,
        consent: &ConsentRecord,
    ) -> Result<(), StoreError> {
        let items = vec![
            self.put(item::intent_to_item(intent), Some(expr::absent()))?,
            self.put(item::consent_to_item(consent), Some(expr::absent()))?,
            self.put(
                item::transition_to_item(&intent.intent_id, &TransitionRecord::of(None, intent)),
                Some(expr::absent()),
            )?,
        ];
        let reasons = match self.transact(items).await? {
            Ok(()) => return Ok(()),
            Err(reasons) => reasons,
        };
        if let Some(e) = retryable_cancellation(&reasons) {
            return Err(e);
        }
        if reasons.iter().any(|r| is_condition_failure(Some(r))) {
            return Err(StoreError::Unavailable(
                "register_wait: intent id already exists".into(),
            ));
        }
        Err(unexplained_cancellation("register_wait", &reasons))
    }

    async fn get_intent(&self, id: &IntentId) -> Result<Option<Intent>, StoreError> {
        self.get(item::intent_key(id))
            .await?
            .map(|i| item::intent_from_item(&i))
            .transpose()
    }

    async fn intents(&self, ids: &[IntentId]) -> Result<Vec<Intent>, StoreError> {
        self.intents_by_id(ids).await
    }

    async fn open_on_seat(
        &self,
        seat_id: &SeatId,
        limit: usize,
    ) -> Result<Vec<Intent>, StoreError> {
        self.open_intents(seat_id, limit).await
    }

    async fn get_consent(&self, id: &IntentId) -> Result<Option<ConsentRecord>, StoreError> {
        self.get(item::consent_key(id))
            .await?
            .map(|i| item::consent_from_item(&i))
            .transpose()
    }

    /// One `TransactWriteItems`: the intent's update under the transition's condition *and* the
    /// version it was decided on, the transition record of that version (so the history is
    /// written by the same write as the change, and names its exact version and fencing token,
    /// which a condition-only update could not know), for a claim or settlement the hold item's
    /// update or delete, for a write with a suppression its update (`expr::suppress`), and for
    /// one carrying a reading the seat's cache entry (`shared_state::record_reading`).
    ///
    /// The version comes from the copy the caller saw (`TransitionRequest::seen`: the claimed
    /// intent, the queue message's image) or, without one, from a strongly consistent
    /// `GetItem`. Either way the decision is the write's condition, and a refusal is explained
    /// from the store's own state: the item the failed condition saw (`ALL_OLD`), or a read when
    /// the caller's copy refuses the transition itself (a copy never refuses). When only the
    /// version moved (another write came between, and the transition still applies) it is tried
    /// again on the state the refusal returned, at most [`TRANSITION_ATTEMPTS`] times; the state
    /// returned on success is exactly the transition's result, which the pinned version
    /// guarantees. A reading whose condition fails (the cache holds a newer one) is dropped and
    /// the write tried again without it.
    async fn transition(&self, request: &TransitionRequest) -> Result<Intent, TransitionError> {
        let key = item::intent_key(&request.intent_id);
        let hold = request.hold_effect();
        // `(state, whether it is the store's own)`.
        let mut seen: (Option<Intent>, bool) = match request.seen() {
            Some(copy) => (Some(copy.clone()), false),
            None => (self.read_intent(&key).await?, true),
        };
        let mut reading = request.reading.as_ref();
        for _ in 0..TRANSITION_ATTEMPTS {
            let (state, from_store) = std::mem::take(&mut seen);
            let Some(current) = state else {
                return Err(TransitionError::NotFound);
            };
            let Some(next) = current.apply(request) else {
                if from_store {
                    return Err(TransitionError::Refused(Box::new(current)));
                }
                seen = (self.read_intent(&key).await?, true);
                continue;
            };
            let mut e =
                expr::transition_indexed(request, expr::OpenIndex::between(&current, &next));
            e.condition = format!("({}) AND #version = :pinned_version", e.condition);
            e.names
                .insert("#version".into(), item::attr::VERSION.into());
            e.values.insert(
                ":pinned_version".into(),
                AttributeValue::N(current.version.to_string()),
            );
            let record = TransitionRecord::of(Some(&current), &next);
            let mut items = vec![
                self.update(key.clone(), e)?,
                self.put(
                    item::transition_to_item(&request.intent_id, &record),
                    Some(expr::absent()),
                )?,
            ];
            match &hold {
                HoldEffect::None => {}
                HoldEffect::Take(h) => {
                    items.push(self.update(item::hold_key(&h.seat_id), expr::take_hold(h))?)
                }
                HoldEffect::Release { seat_id, intent_id } => {
                    items.push(self.delete(item::hold_key(seat_id), expr::release_hold(intent_id))?)
                }
            }
            if let Some(suppression) = request.suppression() {
                items.push(self.update(
                    item::suppression_key(&suppression.seat_id),
                    expr::suppress(suppression),
                )?);
            }
            let reading_at = items.len();
            if let Some(r) = reading {
                items
                    .push(self.update(item::reading_key(&r.key), shared_state::record_reading(r))?);
            }
            let reasons = match self.transact(items).await? {
                Ok(()) => return Ok(next),
                Err(reasons) => reasons,
            };
            if is_condition_failure(reasons.first()) {
                // Refused, or only the pinned version moved: decide again on what it saw.
                seen = (
                    old_item(reasons[0].item())
                        .map(item::intent_from_item)
                        .transpose()?,
                    true,
                );
                continue;
            }
            if is_condition_failure(reasons.get(1)) {
                return Err(StoreError::Corrupt(
                    "transition: a record of this version exists for an older intent".into(),
                )
                .into());
            }
            if hold != HoldEffect::None && is_condition_failure(reasons.get(2)) {
                return Err(match (&hold, old_item(reasons[2].item())) {
                    (HoldEffect::Take(_), Some(old)) => {
                        TransitionError::SeatHeld(item::hold_from_item(old)?)
                    }
                    _ => StoreError::Corrupt(
                        "transition: the seat is held by another intent than the one settling"
                            .into(),
                    )
                    .into(),
                });
            }
            if let Some(e) = retryable_cancellation(&reasons) {
                return Err(e.into());
            }
            if reading.is_some() && is_condition_failure(reasons.get(reading_at)) {
                // The cache already holds a newer reading of the seat: keep it.
                reading = None;
                seen = (Some(current), from_store);
                continue;
            }
            return Err(unexplained_cancellation("transition", &reasons).into());
        }
        // Other writes kept coming between the read and the write: nothing was written.
        Err(StoreError::TransactionConflict.into())
    }

    /// One page of the intent's `HISTORY#` items: a strongly consistent `Query` of its
    /// partition in sort key (= version) order, starting after the cursor's item.
    async fn history(
        &self,
        id: &IntentId,
        after: Option<u64>,
        size: PageSize,
    ) -> Result<Page<TransitionRecord, u64>, StoreError> {
        let Some(pk) = item::intent_key(id).remove(item::attr::PK) else {
            return Ok(Page::from_overread(
                Vec::new(),
                size,
                |r: &TransitionRecord| r.version,
            ));
        };
        let items = self
            .query_page(
                pk,
                item::SK_HISTORY_PREFIX,
                after.map(item::history_sort_key),
                size,
            )
            .await?;
        let records = items
            .iter()
            .map(item::transition_from_item)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Page::from_overread(records, size, |r| r.version))
    }

    /// One `Query` per shard of the `due` index, concurrently, merged by `due_at`. The index is
    /// eventually consistent: an intent may show up a moment after it became due, or a moment
    /// after it stopped being due (its next transition's condition then refuses, harmlessly).
    async fn due_intents(&self, now: Millis, limit: usize) -> Result<Vec<Intent>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let queries = (0..TABLE.due_shards).map(|n| self.due_in_shard(n, now, limit));
        let mut due: Vec<Intent> = futures::future::try_join_all(queries)
            .await?
            .into_iter()
            .flatten()
            .collect();
        due.sort_by(|a, b| (a.due_at, &a.intent_id).cmp(&(b.due_at, &b.intent_id)));
        due.truncate(limit);
        Ok(due)
    }

    async fn suppression(
        &self,
        seat_id: &SeatId,
        now: Millis,
    ) -> Result<Option<Suppression>, StoreError> {
        // TTL deletes lazily (up to days late), so the record's own `until` decides.
        Ok(self
            .get(item::suppression_key(seat_id))
            .await?
            .map(|i| item::suppression_from_item(&i))
            .transpose()?
            .filter(|s| s.until > now))
    }

    async fn last_taken(&self, seat_id: &SeatId) -> Result<Option<Suppression>, StoreError> {
        self.get(item::suppression_key(seat_id))
            .await?
            .map(|i| item::suppression_from_item(&i))
            .transpose()
    }

    async fn hold(&self, seat_id: &SeatId) -> Result<Option<Hold>, StoreError> {
        self.get(item::hold_key(seat_id))
            .await?
            .map(|i| item::hold_from_item(&i))
            .transpose()
    }
}

#[async_trait]
impl Credentials for DynamoStore {
    async fn put_credential(
        &self,
        user_id: &UserId,
        credential: &Secret,
    ) -> Result<(), StoreError> {
        let sealed = self
            .credentials_key()?
            .seal(user_id, credential)
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))?;
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item::credential_to_item(user_id, &sealed)))
            .send()
            .await
            .map_err(|e| map_sdk_error("PutItem", e))?;
        Ok(())
    }

    async fn credential(&self, user_id: &UserId) -> Result<Option<Secret>, StoreError> {
        let key = self.credentials_key()?;
        let Some(item) = self.get(item::credential_key(user_id)).await? else {
            return Ok(None);
        };
        let sealed = item::credential_from_item(&item)?;
        match key.open(user_id, &sealed).await {
            Ok(credential) => Ok(Some(credential)),
            Err(e @ seatgate::adapters::sealing::SealError::Unreadable(_)) => {
                Err(StoreError::Corrupt(format!("credential of {user_id}: {e}")))
            }
            Err(e) => Err(StoreError::Unavailable(e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests;
