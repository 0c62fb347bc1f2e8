//! Checkout holds on the table.
//!
//! | item | pk | sk |
//! |---|---|---|
//! | hold | `USER#<user>` | `HOLD#<hold_id>` (`item`, `status`, `expires_at`, `counted`; an offer's also `offer_for`, its entry id, which the relay's stream filter matches; while `HELD` also `due_shard` = `HOLD#<n>` and `due_at` = `expires_at`, so it is on the reaper's `due` index; always `hold_flight` = `FLIGHT#<id>#<shard>` and `hold_order` = `<STATUS>#<hold_id>`, so it is on the operator's `flight_holds` index) |
//! | shard counter | `FLIGHT#<id>#SHARD#<nn>` | `SHARD` gains `held` (absent: zero) |
//! | per-user count | `USER#<user>` | `COUNT#<flight_id>` gains `live_hold` (the user's one live hold on the flight) |
//!
//! A release or lapse also serves the waiting list in the same transaction ([`super::waitlist`]).
//!
//! Every operation is one `TransactWriteItems` whose first item is the hold under
//! `#status = :held` and a deadline condition (`expires_at > :now` for a confirm, release or
//! extension, `<= :now` for a lapse): the twin of [`CheckoutHold::resolve`], so a confirm and the
//! lapse of the same hold can never both apply. A resolution reads the hold first (its seats,
//! shard and owner never change); the condition, not the read, makes it once. A hold carries no
//! table TTL: TTL deletes days late and silently, and only a resolution may end a hold.

use super::DynamoStore;
use super::flights::{
    ANSWER, AVAILABLE, BOOKED, COUNTED, EXPIRES_AT, HELD, ITEM, TOKEN, booking_key, decode, json,
    key, n, names, put, record_key, s, shard_key, update, user_count_key, values,
};
use super::item::attr;
use super::schema::TABLE;
use super::waitlist::{SeatsBack, serving_conflict};
use super::{is_condition_failure, map_sdk_error};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem};
use seatgate::domain::{
    BookingAnswer, CheckoutHold, Flight, FlightHoldKey, FlightId, HoldAction, HoldId, HoldStatus,
    IdempotencyKey, Millis, Page, PageSize, UserId,
};
use seatgate::ports::{CheckoutHolds, CreateHoldRefusal, ResolveHoldError, StoreError};
use std::collections::HashMap;

pub(super) const LIVE_HOLD: &str = "live_hold";
/// An offer's entry id on its hold item (absent on a hold its user asked for).
pub(super) const OFFER_FOR: &str = "offer_for";

type Item = HashMap<String, AttributeValue>;

fn hold_key(user: &UserId, id: &HoldId) -> Item {
    key(format!("USER#{user}"), format!("HOLD#{id}"))
}

pub(super) fn hold_item(hold: &CheckoutHold, counted: bool) -> Item {
    let mut item = hold_key(&hold.user_id, &hold.hold_id);
    item.insert(ITEM.into(), json(hold));
    item.insert(attr::STATUS.into(), s(hold.status.as_str()));
    item.insert(EXPIRES_AT.into(), n(hold.expires_at.0));
    item.insert(COUNTED.into(), AttributeValue::Bool(counted));
    if let Some(entry) = &hold.offer_for {
        // Top-level so the relay's stream filter can pick offers out without reading `item`.
        item.insert(OFFER_FOR.into(), s(entry.as_str()));
    }
    item.insert(
        TABLE.hold_flight.name.into(),
        s(TABLE.hold_flight_value(hold.flight_id.as_str(), hold.shard)),
    );
    item.insert(TABLE.hold_order.name.into(), s(hold_order(hold)));
    if hold.status == HoldStatus::Held {
        item.insert(attr::DUE_SHARD.into(), s(due_shard(&hold.hold_id)));
        item.insert(attr::DUE_AT.into(), n(hold.expires_at.0));
    }
    item
}

/// Whether a stream image is a checkout hold (`USER#<user>` / `HOLD#<hold_id>`), not a seat's
/// upstream hold (`SEAT#<seat>` / `HOLD`).
pub(super) fn is_checkout_hold_item(item: &Item) -> bool {
    let starts = |name: &str, prefix: &str| matches!(item.get(name), Some(AttributeValue::S(v)) if v.starts_with(prefix));
    starts(attr::PK, "USER#") && starts(attr::SK, "HOLD#")
}

/// The hold an item carries, as every read decodes it.
pub(super) fn hold_from_item(item: &Item) -> Result<CheckoutHold, StoreError> {
    decode(item, ITEM, "hold")
}

/// The hold's key on the `flight_holds` index: it moves with every change of status.
fn hold_order(hold: &CheckoutHold) -> String {
    TABLE.hold_order_value(hold.status.as_str(), hold.hold_id.as_str())
}

fn due_shard(id: &HoldId) -> String {
    TABLE.hold_due_shard_value(id.shard(TABLE.due_shards))
}

fn counted(item: &Item) -> bool {
    matches!(item.get(COUNTED), Some(AttributeValue::Bool(true)))
}

fn number_or_zero(item: Option<&Item>, name: &str) -> u32 {
    match item.and_then(|i| i.get(name)) {
        Some(AttributeValue::N(v)) => v.parse().unwrap_or(0),
        _ => 0,
    }
}

#[async_trait]
impl CheckoutHolds for DynamoStore {
    async fn create_hold(
        &self,
        hold: &CheckoutHold,
        max_per_user: Option<u32>,
        answer_to: Option<(&IdempotencyKey, &str)>,
    ) -> Result<(), CreateHoldRefusal> {
        let k = hold.head_count;
        if Flight::never_fits(k, max_per_user) {
            return Err(CreateHoldRefusal::LimitReached);
        }
        let mut items = vec![
            update(
                &self.table,
                shard_key(&hold.flight_id, hold.shard),
                "SET #available = #available - :k, #held = if_not_exists(#held, :zero) + :k",
                Some("#available >= :k"),
                names(&[AVAILABLE, HELD]),
                values(vec![(":k", n(k)), (":zero", n(0))]),
            )?,
            put(
                &self.table,
                hold_item(hold, max_per_user.is_some()),
                "attribute_not_exists(#pk)",
            )?,
        ];
        // The user's item: the live hold always, the count with a limit (`held + k <= max`).
        let (expression, condition, mut vals) = match max_per_user {
            Some(max) => (
                "SET #live_hold = :hold, #booked = if_not_exists(#booked, :zero) + :k",
                "attribute_not_exists(#live_hold) AND (attribute_not_exists(#booked) OR #booked <= :room)",
                vec![(":k", n(k)), (":zero", n(0)), (":room", n(max - k))],
            ),
            None => (
                "SET #live_hold = :hold",
                "attribute_not_exists(#live_hold)",
                vec![],
            ),
        };
        vals.push((":hold", s(hold.hold_id.as_str())));
        let mut user_names = names(&[LIVE_HOLD]);
        if max_per_user.is_some() {
            user_names.extend(names(&[BOOKED]));
        }
        items.push(update(
            &self.table,
            user_count_key(&hold.flight_id, &hold.user_id),
            expression,
            Some(condition),
            user_names,
            values(vals),
        )?);
        if let Some((idem, token)) = answer_to {
            let answer = BookingAnswer::Held {
                hold: Box::new(hold.clone()),
            };
            items.push(update(
                &self.table,
                record_key(&hold.user_id, idem),
                "SET #answer = :answer REMOVE #token, #expires_at",
                Some("#token = :token"),
                names(&[ANSWER, TOKEN, EXPIRES_AT]),
                values(vec![(":token", s(token)), (":answer", json(&answer))]),
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
                .map(|old| super::flights::number(old, AVAILABLE, "shard"))
                .transpose()?
                .ok_or_else(|| StoreError::Unavailable("no such flight shard".into()))?;
            return Err(CreateHoldRefusal::ShardShort { available });
        }
        if failed(1) {
            return Err(StoreError::Unavailable("hold id already exists".into()).into());
        }
        if failed(2) {
            // One condition, two refusals: the limit is checked first, as the port orders them.
            let old = reasons[2].item();
            if let Some(max) = max_per_user
                && number_or_zero(old, BOOKED) > max - k
            {
                return Err(CreateHoldRefusal::LimitReached);
            }
            return Err(CreateHoldRefusal::HoldExists);
        }
        if answer_to.is_some() && failed(3) {
            return Err(CreateHoldRefusal::RequestTakenOver);
        }
        Err(super::unexplained_cancellation("create hold", &reasons).into())
    }

    async fn hold(&self, user: &UserId, id: &HoldId) -> Result<Option<CheckoutHold>, StoreError> {
        self.get(hold_key(user, id))
            .await?
            .map(|item| decode::<CheckoutHold>(&item, ITEM, "hold"))
            .transpose()
    }

    async fn resolve_hold(
        &self,
        user: &UserId,
        flight: &FlightId,
        id: &HoldId,
        action: HoldAction,
        now: Millis,
    ) -> Result<CheckoutHold, ResolveHoldError> {
        let Some(stored) = self.get(hold_key(user, id)).await? else {
            return Err(CheckoutHold::resolve(None, Some(user), flight, action, now)
                .unwrap_err()
                .into());
        };
        let found: CheckoutHold = decode(&stored, ITEM, "hold")?;
        let hold = CheckoutHold::resolve(Some(&found), Some(user), flight, action, now)?;
        let k = hold.head_count;
        // The rule saw the hold on one side of its deadline; the write applies only if the
        // stored hold is still held and on that side.
        let deadline = if hold.status == HoldStatus::Lapsed {
            "#expires_at <= :now"
        } else {
            "#expires_at > :now"
        };
        // `hold_flight` is set again for a hold written before the index existed.
        let after = if hold.status == HoldStatus::Held {
            "SET #item = :item, #status = :status, #expires_at = :expires, #due_at = :expires, \
             #hold_flight = :hold_flight, #hold_order = :hold_order"
        } else {
            "SET #item = :item, #status = :status, #expires_at = :expires, \
             #hold_flight = :hold_flight, #hold_order = :hold_order REMOVE #due_shard, #due_at"
        };
        let mut items: Vec<TransactWriteItem> = vec![update(
            &self.table,
            hold_key(user, id),
            after,
            Some(&format!("#status = :held AND {deadline}")),
            names(&[
                ITEM,
                attr::STATUS,
                EXPIRES_AT,
                attr::DUE_AT,
                attr::DUE_SHARD,
                TABLE.hold_flight.name,
                TABLE.hold_order.name,
            ])
            .into_iter()
            .filter(|(k, _)| hold.status != HoldStatus::Held || k != "#due_shard")
            .collect(),
            values(vec![
                (":item", json(&hold)),
                (":status", s(hold.status.as_str())),
                (":expires", n(hold.expires_at.0)),
                (":held", s(HoldStatus::Held.as_str())),
                (":now", n(now.0)),
                (
                    ":hold_flight",
                    s(TABLE.hold_flight_value(flight.as_str(), hold.shard)),
                ),
                (":hold_order", s(hold_order(&hold))),
            ]),
        )?];
        match hold.status {
            HoldStatus::Held => {}
            HoldStatus::Confirmed => {
                let booking = hold.booking().ok_or_else(|| {
                    StoreError::Corrupt("a confirmed hold without its booking".into())
                })?;
                items.push(update(
                    &self.table,
                    shard_key(flight, hold.shard),
                    "SET #held = #held - :k",
                    None,
                    names(&[HELD]),
                    values(vec![(":k", n(k))]),
                )?);
                let mut booking_item = booking_key(user, &booking.booking_id);
                booking_item.insert(ITEM.into(), json(&booking));
                booking_item.insert(attr::STATUS.into(), s(booking.status.as_str()));
                booking_item.insert(COUNTED.into(), AttributeValue::Bool(counted(&stored)));
                items.push(put(&self.table, booking_item, "attribute_not_exists(#pk)")?);
                // An offer never took the user's live hold.
                if hold.offer_for.is_none() {
                    items.push(update(
                        &self.table,
                        user_count_key(flight, user),
                        "REMOVE #live_hold",
                        None,
                        names(&[LIVE_HOLD]),
                        HashMap::new(),
                    )?);
                }
            }
            HoldStatus::Released | HoldStatus::Lapsed => {
                let back = SeatsBack {
                    flight,
                    shard: hold.shard,
                    returned: k,
                    from_held: k,
                    user,
                    give_back: if counted(&stored) { k } else { 0 },
                    clear_live: hold.offer_for.is_none(),
                };
                items.extend(self.seats_back_items(back, now).await?);
            }
        }
        match self.flight_transaction(items).await? {
            Ok(()) => Ok(hold),
            Err(reasons) if is_condition_failure(reasons.first()) => {
                // Resolved (or extended) meanwhile: the rule's answer for the hold as it is now.
                let current = match reasons[0].item() {
                    Some(old) if !old.is_empty() => decode::<CheckoutHold>(old, ITEM, "hold")?,
                    _ => return Err(StoreError::TransactionConflict.into()),
                };
                match CheckoutHold::resolve(Some(&current), Some(user), flight, action, now) {
                    Err(refusal) => Err(refusal.into()),
                    // It changed and the action would now apply: a retry decides on it.
                    Ok(_) => Err(StoreError::TransactionConflict.into()),
                }
            }
            // The list's gate, the shard's count or a served entry moved: decide again.
            Err(reasons) if serving_conflict(&reasons) => {
                Err(StoreError::TransactionConflict.into())
            }
            Err(reasons) => Err(super::unexplained_cancellation("resolve hold", &reasons).into()),
        }
    }

    async fn holds_of(
        &self,
        user: &UserId,
        after: Option<&HoldId>,
        size: PageSize,
    ) -> Result<Page<CheckoutHold, HoldId>, StoreError> {
        let items = self
            .query_page(
                s(format!("USER#{user}")),
                "HOLD#",
                after.map(|id| format!("HOLD#{id}")),
                size,
            )
            .await?;
        let holds = items
            .iter()
            .map(|item| decode::<CheckoutHold>(item, ITEM, "hold"))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Page::from_overread(holds, size, |h| h.hold_id.clone()))
    }

    async fn flight_holds(
        &self,
        flight: &Flight,
        status: HoldStatus,
        after: Option<&FlightHoldKey>,
        size: PageSize,
    ) -> Result<Page<CheckoutHold, FlightHoldKey>, StoreError> {
        let mut found: Vec<CheckoutHold> = Vec::new();
        // One shard's run after another; a page visits at most every shard once.
        for shard in after.map_or(0, |k| k.shard)..flight.shards {
            let after_id = after.filter(|k| k.shard == shard).map(|k| &k.hold_id);
            let want = size.overread() - found.len();
            found.extend(
                self.flight_holds_in_shard(&flight.flight_id, shard, status, after_id, want)
                    .await?,
            );
            if found.len() == size.overread() {
                break;
            }
        }
        Ok(Page::from_overread(found, size, FlightHoldKey::of))
    }

    async fn due_holds(&self, now: Millis, limit: usize) -> Result<Vec<CheckoutHold>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let queries = (0..TABLE.due_shards).map(|n| self.holds_due_in_shard(n, now, limit));
        let mut due: Vec<CheckoutHold> = futures::future::try_join_all(queries)
            .await?
            .into_iter()
            .flatten()
            .collect();
        due.sort_by(|a, b| (a.expires_at, &a.hold_id).cmp(&(b.expires_at, &b.hold_id)));
        due.truncate(limit);
        Ok(due)
    }
}

impl DynamoStore {
    /// Up to `want` of one shard's holds in `status` after hold `after`, in id order: `Query`s on
    /// `flight_holds` over the status's key range (`BETWEEN`, which includes the cursor's own
    /// hold: it is read one more and skipped), at most `want + 1` items in all.
    async fn flight_holds_in_shard(
        &self,
        flight: &FlightId,
        shard: u32,
        status: HoldStatus,
        after: Option<&HoldId>,
        want: usize,
    ) -> Result<Vec<CheckoutHold>, StoreError> {
        let from = TABLE.hold_order_value(status.as_str(), after.map_or("", HoldId::as_str));
        // '$' follows '#': every key of this status sorts before it.
        let to = format!("{}$", status.as_str());
        let mut budget = want + usize::from(after.is_some());
        let mut found = Vec::new();
        let mut start: Option<Item> = None;
        while budget > 0 {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(TABLE.flight_holds_index)
                .key_condition_expression("#flight = :flight AND #order BETWEEN :from AND :to")
                .expression_attribute_names("#flight", TABLE.hold_flight.name)
                .expression_attribute_names("#order", TABLE.hold_order.name)
                .expression_attribute_values(
                    ":flight",
                    s(TABLE.hold_flight_value(flight.as_str(), shard)),
                )
                .expression_attribute_values(":from", s(from.clone()))
                .expression_attribute_values(":to", s(to.clone()))
                .scan_index_forward(true)
                .limit(i32::try_from(budget).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| map_sdk_error("Query", e))?;
            budget = budget.saturating_sub(out.items().len());
            for item in out.items() {
                let hold = decode::<CheckoutHold>(item, ITEM, "hold")?;
                if Some(&hold.hold_id) != after {
                    found.push(hold);
                }
            }
            match out.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => break,
            }
        }
        found.truncate(want);
        Ok(found)
    }

    /// One due shard's held holds past their deadline, soonest first, at most `limit` (one
    /// `Query` a page, at most `limit` items in all).
    async fn holds_due_in_shard(
        &self,
        shard: u32,
        now: Millis,
        limit: usize,
    ) -> Result<Vec<CheckoutHold>, StoreError> {
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
                .expression_attribute_values(":shard", s(TABLE.hold_due_shard_value(shard)))
                .expression_attribute_values(":now", n(now.0))
                .scan_index_forward(true)
                .limit(i32::try_from(limit - found.len()).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| map_sdk_error("Query", e))?;
            for item in out.items() {
                found.push(decode::<CheckoutHold>(item, ITEM, "hold")?);
            }
            match out.last_evaluated_key {
                Some(k) if !k.is_empty() && found.len() < limit => start = Some(k),
                _ => return Ok(found),
            }
        }
    }
}
