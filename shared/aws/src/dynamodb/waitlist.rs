//! The waiting list on the table, and the serving of it that every return of seats writes in
//! its own transaction.
//!
//! | item | pk | sk |
//! |---|---|---|
//! | entry (one per user and flight) | `USER#<user>` | `WAIT#<flight>` (`item`, `status`, `entry_id`) |
//! | list item, while `WAITING` | `FLIGHT#<flight>` | `WAIT#<entry_id>` (`item`): the list in its order |
//! | gate | `FLIGHT#<flight>` | `WAITLIST` (`waiting`: the list's length; `version`: bumped by every join) |
//!
//! The flight's inventory reads its flight item and shards by key, never the list's items; none
//! carries the table's TTL.
//!
//! Ordering a join with a return is the gate's work. A join's transaction conditions every shard
//! on `available < k` and bumps the gate's `version`; a return reads the gate, and its
//! transaction conditions the gate on the `version` it read. So either the join lands first (the
//! return's condition fails and it is retried, now seeing the entry) or the return does (the
//! join's shard condition then sees the seats and refuses `SeatsAvailable`). A return that serves
//! entries also conditions its shard on the `available` it read and each served entry on
//! `status = WAITING`, so a concurrent return or leave sends it round again: correctness rests on
//! the conditions, never on the reads.
//!
//! Costs: a join reads the inventory (a `GetItem` and a `BatchGetItem`) and a transaction of 3 + shards items (+1 with a
//! per-user limit: the entry counts against it from the join, so a leave of a counted entry takes
//! one more item, the count back down); a return reads the gate (a `GetItem`), and when someone waits the inventory
//! and the list's first 50 items, then writes 4 items an offer. `position` is a `Query` of the
//! list's keys up to the entry: O(position), a read unit per 4 KB of the items read.

use super::DynamoStore;
use super::checkout::hold_item;
use super::flights::{
    AVAILABLE, BOOKED, HELD, ITEM, SK_FLIGHT, SOLD_OUT, build_error, decode, flight_pk, json, key,
    n, names, put, s, shard_key, update, user_count_key, values,
};
use super::item::attr;
use super::{is_condition_failure, map_sdk_error};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, Put, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem,
};
use seatgate::domain::waitlist::{self, MAX_ENTRIES_SCANNED};
use seatgate::domain::{CheckoutHold, EntryId, FlightId, Millis, UserId, WaitEntry, WaitStatus};
use seatgate::ports::{StoreError, WaitingLists, WaitlistError, WaitlistSummary};
use std::collections::HashMap;

type Item = HashMap<String, AttributeValue>;

const GATE_SK: &str = "WAITLIST";
const LIST_PREFIX: &str = "WAIT#";
const WAITING: &str = "waiting";
const VERSION: &str = "version";
const ENTRY_ID: &str = "entry_id";
/// Pages a position count reads at most (1 MB each): a list far longer than any sale's.
const MAX_COUNT_PAGES: usize = 1_000;

fn entry_key(user: &UserId, flight: &FlightId) -> Item {
    key(format!("USER#{user}"), format!("WAIT#{flight}"))
}

fn list_key(flight: &FlightId, id: &EntryId) -> Item {
    key(flight_pk(flight), format!("{LIST_PREFIX}{id}"))
}

fn gate_key(flight: &FlightId) -> Item {
    key(flight_pk(flight), GATE_SK.into())
}

fn entry_item(entry: &WaitEntry) -> Item {
    let mut item = entry_key(&entry.user_id, &entry.flight_id);
    item.insert(ITEM.into(), json(entry));
    item.insert(attr::STATUS.into(), s(entry.status.as_str()));
    item.insert(ENTRY_ID.into(), s(entry.entry_id.as_str()));
    item
}

fn number_or_zero(item: Option<&Item>, name: &str) -> u64 {
    match item.and_then(|i| i.get(name)) {
        Some(AttributeValue::N(v)) => v.parse().unwrap_or(0),
        _ => 0,
    }
}

fn condition_check(
    table: &str,
    key: Item,
    condition: &str,
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
) -> Result<TransactWriteItem, StoreError> {
    let check = ConditionCheck::builder()
        .table_name(table)
        .set_key(Some(key))
        .condition_expression(condition)
        .set_expression_attribute_names(Some(names))
        .set_expression_attribute_values((!values.is_empty()).then_some(values))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .build()
        .map_err(build_error)?;
    Ok(TransactWriteItem::builder().condition_check(check).build())
}

/// What a return of seats to one shard writes to serve the list: read before the transaction,
/// enforced by its conditions.
#[derive(Debug)]
pub(super) struct Serving {
    /// The gate's `version` as read; `None` when the flight never had anyone waiting.
    version: Option<u64>,
    /// The shard's `available` as read (before the return), when offers are made.
    available: u32,
    /// Served entries as `OFFERED`, with their offers.
    offers: Vec<(WaitEntry, CheckoutHold)>,
    /// Whether the flight keeps per-user counts (an offer counts like a hold; its entry's join
    /// counted it already unless the entry predates that).
    counted: bool,
}

impl Serving {
    /// Seats the offers take.
    fn offered(&self) -> u32 {
        self.offers.iter().map(|(_, h)| h.head_count).sum()
    }

    /// Seats offered to `user` that count against their limit (at most one entry waits a user).
    fn counted_for(&self, user: &UserId) -> u32 {
        if !self.counted {
            return 0;
        }
        self.offers
            .iter()
            .filter(|(e, _)| e.user_id == *user)
            .map(|(e, _)| e.counted_at_offer())
            .sum()
    }

    /// The shard's update for a return of `returned` seats, `from_held` of them out of `held`.
    fn shard_update(
        &self,
        table: &str,
        flight: &FlightId,
        shard: u32,
        returned: u32,
        from_held: u32,
    ) -> Result<TransactWriteItem, StoreError> {
        let key = shard_key(flight, shard);
        if self.offers.is_empty() {
            return if from_held == 0 {
                update(
                    table,
                    key,
                    "SET #available = #available + :k",
                    None,
                    names(&[AVAILABLE]),
                    values(vec![(":k", n(returned))]),
                )
            } else {
                update(
                    table,
                    key,
                    "SET #held = #held - :h, #available = #available + :k",
                    None,
                    names(&[HELD, AVAILABLE]),
                    values(vec![(":k", n(returned)), (":h", n(from_held))]),
                )
            };
        }
        let offered = self.offered();
        let held_delta = i64::from(offered) - i64::from(from_held);
        update(
            table,
            key,
            "SET #available = :after, #held = if_not_exists(#held, :zero) + :dh",
            Some("#available = :seen"),
            names(&[AVAILABLE, HELD]),
            values(vec![
                (":after", n(self.available + returned - offered)),
                (":seen", n(self.available)),
                (":zero", n(0)),
                (":dh", n(held_delta)),
            ]),
        )
    }

    /// The gate's condition (or update), each served entry, its list item's delete, its offer's
    /// hold, and the served users' counts but `returner`'s (the caller merges that into its own
    /// update of the returner's count: one item may appear once in a transaction).
    fn items(
        &self,
        table: &str,
        flight: &FlightId,
        returner: &UserId,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let mut items = Vec::with_capacity(1 + 4 * self.offers.len());
        items.push(match (self.version, self.offers.is_empty()) {
            (None, _) => condition_check(
                table,
                gate_key(flight),
                "attribute_not_exists(#pk)",
                names(&[attr::PK]),
                HashMap::new(),
            )?,
            (Some(v), true) => condition_check(
                table,
                gate_key(flight),
                "#version = :seen",
                names(&[VERSION]),
                values(vec![(":seen", n(v))]),
            )?,
            (Some(v), false) => update(
                table,
                gate_key(flight),
                "SET #version = :next, #waiting = #waiting - :served",
                Some("#version = :seen"),
                names(&[VERSION, WAITING]),
                values(vec![
                    (":seen", n(v)),
                    (":next", n(v + 1)),
                    (":served", n(self.offers.len())),
                ]),
            )?,
        });
        for (entry, hold) in &self.offers {
            items.push(update(
                table,
                entry_key(&entry.user_id, flight),
                "SET #item = :item, #status = :offered",
                Some("#status = :waiting AND #entry_id = :id"),
                names(&[ITEM, attr::STATUS, ENTRY_ID]),
                values(vec![
                    (":item", json(entry)),
                    (":offered", s(WaitStatus::Offered.as_str())),
                    (":waiting", s(WaitStatus::Waiting.as_str())),
                    (":id", s(entry.entry_id.as_str())),
                ]),
            )?);
            let delete = Delete::builder()
                .table_name(table)
                .set_key(Some(list_key(flight, &entry.entry_id)))
                .condition_expression("attribute_exists(#pk)")
                .expression_attribute_names("#pk", attr::PK)
                .build()
                .map_err(build_error)?;
            items.push(TransactWriteItem::builder().delete(delete).build());
            items.push(put(
                table,
                hold_item(hold, self.counted),
                "attribute_not_exists(#pk)",
            )?);
            if self.counted && entry.user_id != *returner && entry.counted_at_offer() > 0 {
                items.push(update(
                    table,
                    user_count_key(flight, &entry.user_id),
                    "SET #booked = if_not_exists(#booked, :zero) + :k",
                    None,
                    names(&[BOOKED]),
                    values(vec![(":zero", n(0)), (":k", n(entry.counted_at_offer()))]),
                )?);
            }
        }
        Ok(items)
    }
}

/// The returner's count update: `give_back` seats off it (conditioned on covering them), the
/// seats offered to them on it, and their live hold cleared when `clear_live`. `None` when
/// nothing changes.
fn returner_update(
    table: &str,
    flight: &FlightId,
    user: &UserId,
    give_back: u32,
    taken: u32,
    clear_live: bool,
) -> Result<Option<TransactWriteItem>, StoreError> {
    let counts = give_back > 0 || taken > 0;
    let expression = match (counts, clear_live) {
        (false, false) => return Ok(None),
        (true, false) => "SET #booked = if_not_exists(#booked, :zero) + :d",
        (false, true) => "REMOVE #live_hold",
        (true, true) => "SET #booked = if_not_exists(#booked, :zero) + :d REMOVE #live_hold",
    };
    let mut attr_names = HashMap::new();
    let mut vals = Vec::new();
    if counts {
        attr_names.extend(names(&[BOOKED]));
        vals.push((":zero", n(0)));
        vals.push((":d", n(i64::from(taken) - i64::from(give_back))));
    }
    if clear_live {
        attr_names.extend(names(&[super::checkout::LIVE_HOLD]));
    }
    let condition = (give_back > 0).then_some("#booked >= :k");
    if give_back > 0 {
        vals.push((":k", n(give_back)));
    }
    update(
        table,
        user_count_key(flight, user),
        expression,
        condition,
        attr_names,
        values(vals),
    )
    .map(Some)
}

/// Whether a cancelled return failed on its serving part (the gate, the shard's seen count, a
/// served entry): a concurrent join, return or leave moved them, and a retry decides anew.
pub(super) fn serving_conflict(reasons: &[aws_sdk_dynamodb::types::CancellationReason]) -> bool {
    reasons
        .iter()
        .skip(1)
        .any(|r| is_condition_failure(Some(r)))
}

/// A return of seats, as its transaction's items besides its own first one (the hold or the
/// booking): `returned` seats back to `shard` (`from_held` of them out of `held`), by `user`,
/// whose count goes down by `give_back` and whose live hold is cleared when `clear_live`.
pub(super) struct SeatsBack<'a> {
    pub(super) flight: &'a FlightId,
    pub(super) shard: u32,
    pub(super) returned: u32,
    pub(super) from_held: u32,
    pub(super) user: &'a UserId,
    pub(super) give_back: u32,
    pub(super) clear_live: bool,
}

impl DynamoStore {
    /// The items a return of seats writes besides its own first one: the shard, the flight's
    /// sold-out mark removed, the returner's count, and the serving of the list (its gate, and
    /// each offer's items), read at `now`.
    pub(super) async fn seats_back_items(
        &self,
        back: SeatsBack<'_>,
        now: Millis,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let SeatsBack {
            flight,
            shard,
            returned,
            from_held,
            user,
            give_back,
            clear_live,
        } = back;
        let serving = self.plan_serving(flight, shard, returned, now).await?;
        let mut items = vec![
            serving.shard_update(&self.table, flight, shard, returned, from_held)?,
            update(
                &self.table,
                key(flight_pk(flight), SK_FLIGHT.into()),
                "REMOVE #sold_out",
                None,
                names(&[SOLD_OUT]),
                HashMap::new(),
            )?,
        ];
        items.extend(returner_update(
            &self.table,
            flight,
            user,
            give_back,
            serving.counted_for(user),
            clear_live,
        )?);
        items.extend(serving.items(&self.table, flight, user)?);
        Ok(items)
    }

    /// Reads what a return of `returned` seats to `shard` of `flight` at `now` will serve.
    async fn plan_serving(
        &self,
        flight: &FlightId,
        shard: u32,
        returned: u32,
        now: Millis,
    ) -> Result<Serving, StoreError> {
        let gate = self.get(gate_key(flight)).await?;
        let version = gate.as_ref().map(|g| number_or_zero(Some(g), VERSION));
        let mut serving = Serving {
            version,
            available: 0,
            offers: Vec::new(),
            counted: false,
        };
        if number_or_zero(gate.as_ref(), WAITING) == 0 {
            return Ok(serving);
        }
        let inventory = seatgate::ports::Flights::inventory(self, flight)
            .await?
            .ok_or_else(|| StoreError::Unavailable("no such flight".into()))?;
        let available = *inventory
            .available
            .get(shard as usize)
            .ok_or_else(|| StoreError::Unavailable("no such flight shard".into()))?;
        let waiting = self.first_waiting(flight, MAX_ENTRIES_SCANNED).await?;
        let served = waitlist::serve(available + returned, &waiting);
        serving.available = available;
        serving.counted = inventory.flight.max_per_user.is_some();
        serving.offers = served
            .into_iter()
            .map(|i| waiting[i].offer(shard, &inventory.flight.checkout, now))
            .collect();
        Ok(serving)
    }

    /// The flight's first `limit` waiting entries, in the list's order (one `Query`).
    async fn first_waiting(
        &self,
        flight: &FlightId,
        limit: usize,
    ) -> Result<Vec<WaitEntry>, StoreError> {
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("#pk = :pk AND begins_with(#sk, :prefix)")
            .expression_attribute_names("#pk", attr::PK)
            .expression_attribute_names("#sk", attr::SK)
            .expression_attribute_values(":pk", s(flight_pk(flight)))
            .expression_attribute_values(":prefix", s(LIST_PREFIX))
            .consistent_read(true)
            .limit(i32::try_from(limit).unwrap_or(i32::MAX))
            .send()
            .await
            .map_err(|e| map_sdk_error("Query", e))?;
        out.items()
            .iter()
            .map(|item| decode::<WaitEntry>(item, ITEM, "waiting-list entry"))
            .collect()
    }
}

#[async_trait]
impl WaitingLists for DynamoStore {
    async fn join_waitlist(
        &self,
        entry: &WaitEntry,
        max_per_user: Option<u32>,
    ) -> Result<(), WaitlistError> {
        let entry = &entry.clone().joining(max_per_user);
        let (flight, user, k) = (&entry.flight_id, &entry.user_id, entry.head_count);
        let inventory = seatgate::ports::Flights::inventory(self, flight)
            .await?
            .ok_or_else(|| StoreError::Unavailable("no such flight".into()))?;
        // The rule on what was read refuses early; the conditions below decide.
        WaitEntry::may_join(&inventory.available, k, max_per_user, 0, None)?;
        let entry_put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(entry_item(entry)))
            .condition_expression("attribute_not_exists(#pk) OR #status <> :waiting")
            .expression_attribute_names("#pk", attr::PK)
            .expression_attribute_names("#status", attr::STATUS)
            .expression_attribute_values(":waiting", s(WaitStatus::Waiting.as_str()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(build_error)?;
        let mut items = vec![TransactWriteItem::builder().put(entry_put).build()];
        let mut queued = list_key(flight, &entry.entry_id);
        queued.insert(ITEM.into(), json(entry));
        items.push(put(&self.table, queued, "attribute_not_exists(#pk)")?);
        items.push(update(
            &self.table,
            gate_key(flight),
            "ADD #version :one, #waiting :one",
            None,
            names(&[VERSION, WAITING]),
            values(vec![(":one", n(1))]),
        )?);
        for shard in 0..inventory.flight.shards {
            items.push(condition_check(
                &self.table,
                shard_key(flight, shard),
                "#available < :k",
                names(&[AVAILABLE]),
                values(vec![(":k", n(k))]),
            )?);
        }
        if let Some(max) = max_per_user {
            // The entry counts from now: a booking meanwhile cannot take the user past the
            // limit and leave the offer to do it.
            items.push(update(
                &self.table,
                user_count_key(flight, user),
                "SET #booked = if_not_exists(#booked, :zero) + :k",
                Some("attribute_not_exists(#booked) OR #booked <= :room"),
                names(&[BOOKED]),
                values(vec![(":zero", n(0)), (":k", n(k)), (":room", n(max - k))]),
            )?);
        }
        let shards = inventory.flight.shards as usize;
        let reasons = match self.flight_transaction(items).await? {
            Ok(()) => return Ok(()),
            Err(reasons) => reasons,
        };
        let failed = |i: usize| is_condition_failure(reasons.get(i));
        // The rule's order: the limit, the user's waiting entry, then the seats.
        if max_per_user.is_some() && failed(3 + shards) {
            return Err(seatgate::domain::WaitRefusal::LimitReached.into());
        }
        if failed(0) {
            let existing = reasons[0]
                .item()
                .map(|old| decode::<WaitEntry>(old, ITEM, "waiting-list entry"))
                .transpose()?
                .ok_or(StoreError::TransactionConflict)?;
            return Err(seatgate::domain::WaitRefusal::AlreadyWaiting(Box::new(existing)).into());
        }
        if failed(1) {
            return Err(StoreError::Unavailable("entry id already exists".into()).into());
        }
        if (3..3 + shards).any(failed) {
            return Err(seatgate::domain::WaitRefusal::SeatsAvailable.into());
        }
        Err(super::unexplained_cancellation("join waiting list", &reasons).into())
    }

    async fn wait_entry(
        &self,
        user: &UserId,
        flight: &FlightId,
        id: &EntryId,
    ) -> Result<Option<WaitEntry>, StoreError> {
        let Some(item) = self.get(entry_key(user, flight)).await? else {
            return Ok(None);
        };
        let entry: WaitEntry = decode(&item, ITEM, "waiting-list entry")?;
        Ok((entry.entry_id == *id).then_some(entry))
    }

    async fn waiting_ahead(&self, flight: &FlightId, id: &EntryId) -> Result<u64, StoreError> {
        let me = s(format!("{LIST_PREFIX}{id}"));
        let mut ahead = 0u64;
        let mut start: Option<Item> = None;
        for _page in 0..MAX_COUNT_PAGES {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("#pk = :pk AND #sk BETWEEN :first AND :me")
                // Only the keys come back (a filter may not name a key, so the entry's own item,
                // the range's last, is left out here). A read unit per 4 KB of items all the same.
                .projection_expression("#sk")
                .expression_attribute_names("#pk", attr::PK)
                .expression_attribute_names("#sk", attr::SK)
                .expression_attribute_values(":pk", s(flight_pk(flight)))
                .expression_attribute_values(":first", s(LIST_PREFIX))
                .expression_attribute_values(":me", me.clone())
                .consistent_read(true)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| map_sdk_error("Query", e))?;
            ahead += out
                .items()
                .iter()
                .filter(|item| item.get(attr::SK) != Some(&me))
                .count() as u64;
            match out.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => return Ok(ahead),
            }
        }
        Err(StoreError::Unavailable(format!(
            "the waiting list is longer than {MAX_COUNT_PAGES} pages"
        )))
    }

    async fn leave_waitlist(
        &self,
        user: &UserId,
        flight: &FlightId,
        id: &EntryId,
        now: Millis,
    ) -> Result<WaitEntry, WaitlistError> {
        let found = match self.get(entry_key(user, flight)).await? {
            Some(item) => Some(decode::<WaitEntry>(&item, ITEM, "waiting-list entry")?),
            None => None,
        };
        let entry = WaitEntry::leave(found.as_ref(), user, flight, id, now)?;
        if Some(&entry) == found.as_ref() {
            return Ok(entry);
        }
        let mut items = vec![update(
            &self.table,
            entry_key(user, flight),
            "SET #item = :item, #status = :left",
            Some("#status = :waiting AND #entry_id = :id"),
            names(&[ITEM, attr::STATUS, ENTRY_ID]),
            values(vec![
                (":item", json(&entry)),
                (":left", s(WaitStatus::Left.as_str())),
                (":waiting", s(WaitStatus::Waiting.as_str())),
                (":id", s(id.as_str())),
            ]),
        )?];
        let delete = Delete::builder()
            .table_name(&self.table)
            .set_key(Some(list_key(flight, id)))
            .build()
            .map_err(build_error)?;
        items.push(TransactWriteItem::builder().delete(delete).build());
        items.push(update(
            &self.table,
            gate_key(flight),
            "SET #waiting = #waiting - :one",
            None,
            names(&[WAITING]),
            values(vec![(":one", n(1))]),
        )?);
        if entry.counted_at_join() > 0 {
            items.push(update(
                &self.table,
                user_count_key(flight, user),
                "SET #booked = #booked - :k",
                Some("#booked >= :k"),
                names(&[BOOKED]),
                values(vec![(":k", n(entry.counted_at_join()))]),
            )?);
        }
        match self.flight_transaction(items).await? {
            Ok(()) => Ok(entry),
            // Served or left meanwhile: a retry decides on the entry as it is now.
            Err(reasons) if is_condition_failure(reasons.first()) => {
                Err(StoreError::TransactionConflict.into())
            }
            Err(reasons) => {
                Err(super::unexplained_cancellation("leave waiting list", &reasons).into())
            }
        }
    }

    async fn waitlist_summary(&self, flight: &FlightId) -> Result<WaitlistSummary, StoreError> {
        let gate = self.get(gate_key(flight)).await?;
        Ok(WaitlistSummary {
            waiting: number_or_zero(gate.as_ref(), WAITING),
            oldest: self.first_waiting(flight, 1).await?.pop(),
        })
    }
}
