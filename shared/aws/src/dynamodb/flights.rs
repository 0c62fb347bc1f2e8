//! The flash sale on the table: flights, shard counters, per-user counts, bookings and booking
//! idempotency records.
//!
//! | item | pk | sk |
//! |---|---|---|
//! | flight | `FLIGHT#<id>` | `FLIGHT` (`item`: the flight as JSON; `sold_out` when marked) |
//! | shard counter | `FLIGHT#<id>#SHARD#<nn>` | `SHARD` (`available`) |
//! | per-user count | `USER#<user>` | `COUNT#<flight_id>` (`booked`) |
//! | booking | `USER#<user>` | `BOOKING#<booking_id>` (`item`, `status`, `counted`) |
//! | idempotency | `USER#<user>` | `IDEM#<key>` (`record` as begun; `token` and `expires_at` while in progress, `answer` once answered; `ttl`) |
//!
//! A booking is one `TransactWriteItems`: the shard's `available = available - :k` under
//! `available >= :k`, the booking put, the per-user count under its limit, the idempotency
//! answer. A sold-out rejection that still reaches the store costs one cancelled transaction
//! per shard tried; once the flight is marked sold out, none (the service's cache answers).
//! Bookings live in their user's partition, so `GET /me/bookings` is one `Query` and another
//! user's booking is simply not found.
//!
//! Why a partition key per shard, and the per-user count in the user's partition: a sale's
//! bookings all write a shard counter, and DynamoDB gives one partition key at most 1,000 write
//! units a second until it splits the key for heat, which a sale's opening gives it no time
//! for. Under one `FLIGHT#<id>` key every shard and every buyer's count shared that limit
//! (250 bookings a second, 1 shard or 16); each shard under its own key takes its own from the
//! first second, and a buyer's count is written beside the buyer's booking. The flight item
//! keeps `FLIGHT#<id>` with the waiting list, which only a sold-out flight writes.

use super::item::{Item, attr};
use super::{
    DynamoStore, conditional_write, is_condition_failure, map_sdk_error, retryable_cancellation,
};
use async_trait::async_trait;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, CancellationReason, ConditionCheck, Put, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};
use seatgate::domain::{
    Admission, Booking, BookingAnswer, BookingId, BookingStatus, Flight, FlightId, IdempotencyKey,
    IdempotencyRecord, Inventory, Millis, Page, PageSize, RequestState, UserId,
};
use seatgate::ports::{Begun, BookRefusal, CancelBookingRefusal, Flights, StoreError};
use std::collections::HashMap;
use std::time::Duration;

/// Idempotency records outlive their request by a day, then TTL may delete them.
const RECORD_TTL: Duration = Duration::from_secs(24 * 3600);

pub(super) const SK_FLIGHT: &str = "FLIGHT";
pub(super) const ITEM: &str = "item";
pub(super) const AVAILABLE: &str = "available";
pub(super) const BOOKED: &str = "booked";
/// A shard's seats in checkout holds (absent on a shard from before holds: zero).
pub(super) const HELD: &str = "held";
pub(super) const SOLD_OUT: &str = "sold_out";
pub(super) const COUNTED: &str = "counted";
const RECORD: &str = "record";
/// Set once the request answered: the record's state is then `Done` with this answer.
pub(super) const ANSWER: &str = "answer";
pub(super) const TOKEN: &str = "token";
pub(super) const EXPIRES_AT: &str = "expires_at";

pub(super) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub(super) fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

pub(super) fn key(pk: String, sk: String) -> Item {
    HashMap::from([(attr::PK.into(), s(pk)), (attr::SK.into(), s(sk))])
}

pub(super) fn flight_pk(id: &FlightId) -> String {
    format!("FLIGHT#{id}")
}

/// A shard counter's sort key, the only item of its partition.
const SK_SHARD: &str = "SHARD";

pub(super) fn shard_pk(id: &FlightId, shard: u32) -> String {
    format!("FLIGHT#{id}#SHARD#{shard:02}")
}

pub(super) fn shard_key(id: &FlightId, shard: u32) -> Item {
    key(shard_pk(id, shard), SK_SHARD.into())
}

pub(super) fn user_count_key(id: &FlightId, user: &UserId) -> Item {
    key(format!("USER#{user}"), format!("COUNT#{id}"))
}

/// The sort key of a shard counter in the layout before shard partitions, under the flight's
/// own key: only to name that layout when a flight is found stored in it.
fn old_shard_sk(shard: u32) -> String {
    format!("SHARD#{shard:02}")
}

pub(super) fn booking_key(user: &UserId, id: &BookingId) -> Item {
    key(format!("USER#{user}"), format!("BOOKING#{id}"))
}

pub(super) fn record_key(user: &UserId, k: &IdempotencyKey) -> Item {
    key(format!("USER#{user}"), format!("IDEM#{k}"))
}

pub(super) fn json<T: serde::Serialize>(v: &T) -> AttributeValue {
    s(serde_json::to_string(v).expect("domain values always encode"))
}

pub(super) fn decode<T: serde::de::DeserializeOwned>(
    item: &Item,
    name: &str,
    what: &str,
) -> Result<T, StoreError> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => {
            serde_json::from_str(v).map_err(|_| StoreError::Corrupt(format!("{what}.{name}")))
        }
        _ => Err(StoreError::Corrupt(format!("{what}.{name}"))),
    }
}

pub(super) fn number(item: &Item, name: &str, what: &str) -> Result<u32, StoreError> {
    match item.get(name) {
        Some(AttributeValue::N(v)) => v
            .parse()
            .map_err(|_| StoreError::Corrupt(format!("{what}.{name}"))),
        _ => Err(StoreError::Corrupt(format!("{what}.{name}"))),
    }
}

pub(super) fn names(pairs: &[&str]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|a| (format!("#{a}"), (*a).to_owned()))
        .collect()
}

pub(super) fn values(pairs: Vec<(&str, AttributeValue)>) -> HashMap<String, AttributeValue> {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

pub(super) fn build_error(e: aws_sdk_dynamodb::error::BuildError) -> StoreError {
    StoreError::Unavailable(format!("building a request: {e}"))
}

pub(super) fn update(
    table: &str,
    key: Item,
    expression: &str,
    condition: Option<&str>,
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
) -> Result<TransactWriteItem, StoreError> {
    let update = Update::builder()
        .table_name(table)
        .set_key(Some(key))
        .update_expression(expression)
        .set_condition_expression(condition.map(str::to_owned))
        .set_expression_attribute_names(Some(names))
        .set_expression_attribute_values((!values.is_empty()).then_some(values))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .build()
        .map_err(build_error)?;
    Ok(TransactWriteItem::builder().update(update).build())
}

pub(super) fn put(
    table: &str,
    item: Item,
    condition: &str,
) -> Result<TransactWriteItem, StoreError> {
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .condition_expression(condition)
        .expression_attribute_names("#pk", attr::PK)
        .build()
        .map_err(build_error)?;
    Ok(TransactWriteItem::builder().put(put).build())
}

impl DynamoStore {
    /// One `TransactWriteItems`; `Ok(Err(reasons))` when a condition cancelled it.
    pub(super) async fn flight_transaction(
        &self,
        items: Vec<TransactWriteItem>,
    ) -> Result<Result<(), Vec<CancellationReason>>, StoreError> {
        match self.transact(items).await? {
            Ok(()) => Ok(Ok(())),
            Err(reasons) => match retryable_cancellation(&reasons) {
                Some(e) => Err(e),
                None => Ok(Err(reasons)),
            },
        }
    }
}

#[async_trait]
impl Flights for DynamoStore {
    async fn create_flight(&self, flight: &Flight) -> Result<bool, StoreError> {
        let mut flight_item = key(flight_pk(&flight.flight_id), SK_FLIGHT.into());
        flight_item.insert(ITEM.into(), json(flight));
        let mut items = vec![put(&self.table, flight_item, "attribute_not_exists(#pk)")?];
        for shard in 0..flight.shards {
            let mut item = shard_key(&flight.flight_id, shard);
            item.insert(AVAILABLE.into(), n(flight.shard_capacity(shard)));
            items.push(put(&self.table, item, "attribute_not_exists(#pk)")?);
        }
        match self.flight_transaction(items).await? {
            Ok(()) => Ok(true),
            Err(reasons) if is_condition_failure(reasons.first()) => Ok(false),
            Err(reasons) => Err(super::unexplained_cancellation("create flight", &reasons)),
        }
    }

    async fn inventory(&self, id: &FlightId) -> Result<Option<Inventory>, StoreError> {
        // The flight, then its shards in one `BatchGetItem` (each under its own key). Both
        // strongly consistent; the service caches what a booking needs of them.
        let Some(flight_item) = self.get(key(flight_pk(id), SK_FLIGHT.into())).await? else {
            return Ok(None);
        };
        let flight = decode::<Flight>(&flight_item, ITEM, "flight")?;
        let sold_out = matches!(flight_item.get(SOLD_OUT), Some(AttributeValue::Bool(true)));
        let shards = self
            .batch_get((0..flight.shards).map(|n| shard_key(id, n)).collect())
            .await?;
        let mut available = vec![None; flight.shards as usize];
        let mut held = vec![0; flight.shards as usize];
        for item in &shards {
            let Some(n) =
                (0..flight.shards).find(|n| item.get(attr::PK) == Some(&s(shard_pk(id, *n))))
            else {
                return Err(StoreError::Corrupt("shard.pk".into()));
            };
            available[n as usize] = Some(number(item, AVAILABLE, "shard")?);
            // A shard written before holds existed has no `held`: none.
            held[n as usize] = match item.get(HELD) {
                Some(_) => number(item, HELD, "shard")?,
                None => 0,
            };
        }
        let Some(available) = available.into_iter().collect::<Option<Vec<u32>>>() else {
            // A flight created before shards had partitions of their own keeps them under its
            // key: say so, rather than sell from a count that is not there.
            let old = self
                .get(key(flight_pk(id), old_shard_sk(0)))
                .await?
                .is_some();
            return Err(StoreError::Corrupt(if old {
                "flight.shards: stored in the layout before shard partitions (FLIGHT#<id> / SHARD#<nn>); migrate it (infra/aws/TABLE.md, \"Shard partitions\")".into()
            } else {
                "flight.shards".into()
            }));
        };
        Ok(Some(Inventory {
            flight,
            available,
            held,
            sold_out,
        }))
    }

    async fn book(
        &self,
        booking: &Booking,
        max_per_user: Option<u32>,
        answer_to: Option<(&IdempotencyKey, &str)>,
        admission: Option<&Admission>,
    ) -> Result<(), BookRefusal> {
        let k = booking.head_count;
        let mut items = vec![update(
            &self.table,
            shard_key(&booking.flight_id, booking.shard),
            "SET #available = #available - :k",
            Some("#available >= :k"),
            names(&[AVAILABLE]),
            values(vec![(":k", n(k))]),
        )?];
        let mut booking_item = booking_key(&booking.user_id, &booking.booking_id);
        booking_item.insert(ITEM.into(), json(booking));
        booking_item.insert(attr::STATUS.into(), s(booking.status.as_str()));
        booking_item.insert(COUNTED.into(), AttributeValue::Bool(max_per_user.is_some()));
        items.push(put(&self.table, booking_item, "attribute_not_exists(#pk)")?);
        if Flight::never_fits(k, max_per_user) {
            return Err(BookRefusal::LimitReached);
        }
        if let Some(max) = max_per_user {
            // The rest of `Flight::book`, as conditions: the shard's `available >= k` above, and
            // here `held + k <= max`.
            let room = max - k;
            items.push(update(
                &self.table,
                user_count_key(&booking.flight_id, &booking.user_id),
                "SET #booked = if_not_exists(#booked, :zero) + :k",
                Some("attribute_not_exists(#booked) OR #booked <= :room"),
                names(&[BOOKED]),
                values(vec![(":k", n(k)), (":zero", n(0)), (":room", n(room))]),
            )?);
        }
        if let Some((idem, token)) = answer_to {
            let answer = BookingAnswer::Booked {
                booking: booking.clone(),
            };
            items.push(update(
                &self.table,
                record_key(&booking.user_id, idem),
                "SET #answer = :answer REMOVE #token, #expires_at",
                Some("#token = :token"),
                names(&[ANSWER, TOKEN, EXPIRES_AT]),
                values(vec![(":token", s(token)), (":answer", json(&answer))]),
            )?);
        }
        // Last, so the refusals keep the port's order.
        let window = items.len();
        if let Some(a) = admission {
            items.push(self.update(
                super::rate_limits::window_key(&a.window),
                super::rate_limits::window_update(&a.window, a.limit),
            )?);
        }
        let reasons = match self.flight_transaction(items).await? {
            Ok(()) => return Ok(()),
            Err(reasons) => reasons,
        };
        let failed = |i: usize| is_condition_failure(reasons.get(i));
        if failed(0) {
            let available = reasons[0]
                .item()
                .map(|old| number(old, AVAILABLE, "shard"))
                .transpose()?
                .ok_or_else(|| StoreError::Unavailable("no such flight shard".into()))?;
            return Err(BookRefusal::ShardShort { available });
        }
        if failed(1) {
            return Err(StoreError::Unavailable("booking id already exists".into()).into());
        }
        let idem_index = if max_per_user.is_some() { 3 } else { 2 };
        if max_per_user.is_some() && failed(2) {
            return Err(BookRefusal::LimitReached);
        }
        if answer_to.is_some() && failed(idem_index) {
            return Err(BookRefusal::RequestTakenOver);
        }
        if admission.is_some() && failed(window) {
            return Err(BookRefusal::RateLimited);
        }
        Err(super::unexplained_cancellation("book", &reasons).into())
    }

    async fn mark_sold_out(&self, id: &FlightId, shards: u32) -> Result<bool, StoreError> {
        let mut items = Vec::new();
        for shard in 0..shards {
            let check = ConditionCheck::builder()
                .table_name(&self.table)
                .set_key(Some(shard_key(id, shard)))
                .condition_expression("#available = :zero")
                .expression_attribute_names("#available", AVAILABLE)
                .expression_attribute_values(":zero", n(0))
                .build()
                .map_err(build_error)?;
            items.push(TransactWriteItem::builder().condition_check(check).build());
        }
        items.push(update(
            &self.table,
            key(flight_pk(id), SK_FLIGHT.into()),
            "SET #sold_out = :yes",
            Some("attribute_exists(#pk)"),
            HashMap::from([
                ("#sold_out".to_owned(), SOLD_OUT.to_owned()),
                ("#pk".to_owned(), attr::PK.to_owned()),
            ]),
            values(vec![(":yes", AttributeValue::Bool(true))]),
        )?);
        match self.flight_transaction(items).await? {
            Ok(()) => Ok(true),
            Err(reasons) if reasons.iter().any(|r| is_condition_failure(Some(r))) => Ok(false),
            Err(reasons) => Err(super::unexplained_cancellation("mark sold out", &reasons)),
        }
    }

    async fn bookings_of(
        &self,
        user: &UserId,
        after: Option<&BookingId>,
        size: PageSize,
    ) -> Result<Page<Booking, BookingId>, StoreError> {
        let items = self
            .query_page(
                s(format!("USER#{user}")),
                "BOOKING#",
                after.map(|id| format!("BOOKING#{id}")),
                size,
            )
            .await?;
        let bookings = items
            .iter()
            .map(|item| decode::<Booking>(item, ITEM, "booking"))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Page::from_overread(bookings, size, |b| {
            b.booking_id.clone()
        }))
    }

    async fn cancel_booking(
        &self,
        user: &UserId,
        flight: &FlightId,
        id: &BookingId,
        now: Millis,
    ) -> Result<Booking, CancelBookingRefusal> {
        // The booking's seats, shard and counting never change after it is made, so they may be
        // read first; the transaction's condition on its status is what makes the cancel once.
        let Some(item) = self.get(booking_key(user, id)).await? else {
            return Err(CancelBookingRefusal::NotFound);
        };
        let found: Booking = decode(&item, ITEM, "booking")?;
        // The rule on the item read; the status condition below is its hand-written twin, which
        // makes the cancel once against a concurrent one.
        let booking = Booking::cancel(Some(&found), user, flight, now)?;
        let counted = matches!(item.get(COUNTED), Some(AttributeValue::Bool(true)));
        let k = booking.head_count;
        let mut items = vec![update(
            &self.table,
            booking_key(user, id),
            "SET #status = :cancelled, #item = :item",
            Some("#status = :booked"),
            names(&[attr::STATUS, ITEM]),
            values(vec![
                (":cancelled", s(BookingStatus::Cancelled.as_str())),
                (":booked", s(BookingStatus::Booked.as_str())),
                (":item", json(&booking)),
            ]),
        )?];
        let back = super::waitlist::SeatsBack {
            flight,
            shard: booking.shard,
            returned: k,
            from_held: 0,
            user,
            give_back: if counted { k } else { 0 },
            clear_live: false,
        };
        items.extend(self.seats_back_items(back, now).await?);
        match self.flight_transaction(items).await? {
            Ok(()) => Ok(booking),
            Err(reasons) if is_condition_failure(reasons.first()) => {
                // Cancelled meanwhile by a concurrent retry: answer it as it is.
                let current = reasons[0]
                    .item()
                    .map(|old| decode::<Booking>(old, ITEM, "booking"))
                    .transpose()?
                    .ok_or(CancelBookingRefusal::NotFound)?;
                Err(CancelBookingRefusal::AlreadyCancelled(Box::new(current)))
            }
            Err(reasons) if super::waitlist::serving_conflict(&reasons) => {
                Err(StoreError::TransactionConflict.into())
            }
            Err(reasons) => Err(super::unexplained_cancellation("cancel booking", &reasons).into()),
        }
    }

    async fn begin_request(&self, record: &IdempotencyRecord) -> Result<Begun, StoreError> {
        let mut item = record_key(&record.user_id, &record.key);
        item.insert(RECORD.into(), json(record));
        match &record.state {
            RequestState::InProgress { token, expires_at } => {
                item.insert(TOKEN.into(), s(token.clone()));
                item.insert(EXPIRES_AT.into(), n(expires_at.0));
            }
            // Answered at once: stored as `finish_request` leaves a record, with no token.
            RequestState::Done { answer } => {
                item.insert(ANSWER.into(), json(answer));
            }
        }
        item.insert(
            attr::TTL.into(),
            n(record.created_at.plus(RECORD_TTL).as_epoch_seconds_ceil()),
        );
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(
                "attribute_not_exists(#pk) OR (attribute_exists(#token) AND #expires_at <= :now)",
            )
            .expression_attribute_names("#pk", attr::PK)
            .expression_attribute_names("#token", TOKEN)
            .expression_attribute_names("#expires_at", EXPIRES_AT)
            .expression_attribute_values(":now", n(record.created_at.0))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => Ok(Begun::Started),
            Err(err) => match err.as_service_error() {
                Some(PutItemError::ConditionalCheckFailedException(e)) => {
                    let old = match e.item() {
                        Some(old) if !old.is_empty() => old.clone(),
                        // An emulator that does not return the old item: read it.
                        _ => self
                            .get(record_key(&record.user_id, &record.key))
                            .await?
                            .ok_or_else(|| {
                                StoreError::Unavailable("idempotency record vanished".into())
                            })?,
                    };
                    Ok(Begun::Existing(record_from_item(&old)?))
                }
                _ => Err(map_sdk_error("PutItem", err)),
            },
        }
    }

    async fn finish_request(
        &self,
        user: &UserId,
        key: &IdempotencyKey,
        token: &str,
        answer: &BookingAnswer,
    ) -> Result<bool, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(record_key(user, key)))
            .update_expression("SET #answer = :answer REMOVE #token, #expires_at")
            .condition_expression("#token = :token")
            .expression_attribute_names("#answer", ANSWER)
            .expression_attribute_names("#token", TOKEN)
            .expression_attribute_names("#expires_at", EXPIRES_AT)
            .expression_attribute_values(":token", s(token))
            .expression_attribute_values(":answer", json(answer))
            .send()
            .await;
        conditional_write("UpdateItem", result)
    }

    async fn abandon_request(
        &self,
        user: &UserId,
        key: &IdempotencyKey,
        token: &str,
    ) -> Result<(), StoreError> {
        let result = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(record_key(user, key)))
            .condition_expression("#token = :token")
            .expression_attribute_names("#token", TOKEN)
            .expression_attribute_values(":token", s(token))
            .send()
            .await;
        // A record no longer in progress under this token is not ours to delete.
        conditional_write("DeleteItem", result).map(|_| ())
    }
}

/// The record as begun, in the state its attributes say: answered once `answer` is set.
fn record_from_item(item: &Item) -> Result<IdempotencyRecord, StoreError> {
    let mut record: IdempotencyRecord = decode(item, RECORD, "idempotency")?;
    if item.contains_key(ANSWER) {
        record.state = RequestState::Done {
            answer: decode(item, ANSWER, "idempotency")?,
        };
    }
    Ok(record)
}
