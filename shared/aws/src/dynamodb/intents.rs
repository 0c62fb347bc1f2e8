//! `Intents` on the table: every transition is one conditional `UpdateItem` pinned to the
//! version it applies to, or one `TransactWriteItems` when it also writes the seat's claim, a suppression
//! or its history record; reads are `GetItem` and, for the reaper, `Query` on the sparse `due`
//! index.

use async_trait::async_trait;

use aws_sdk_dynamodb::types::AttributeValue;

use super::{
    DynamoStore, TABLE, expr, is_condition_failure, item, old_item, retryable_cancellation,
    shared_state, unexplained_cancellation,
};
use seatgate::domain::{
    ConsentRecord, Intent, IntentId, Millis, Page, PageSize, SeatClaim, SeatClaimEffect, SeatId,
    Suppression, TransitionRecord, TransitionRequest,
};
use seatgate::ports::{Intents, StoreError, TransitionError};

/// How many times a transition is decided and written when only its intent's version moved
/// between the read and the write (a caller's stale copy, a newer reading in the cache, each
/// take one); past it the caller sees a retryable `TransactionConflict`.
const TRANSITION_ATTEMPTS: usize = 6;

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
    /// which a condition-only update could not know), for a claim or settlement the seat claim item's
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
        let seat_claim = request.seat_claim_effect();
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
            match &seat_claim {
                SeatClaimEffect::None => {}
                SeatClaimEffect::Take(h) => items
                    .push(self.update(item::seat_claim_key(&h.seat_id), expr::take_seat_claim(h))?),
                SeatClaimEffect::Release { seat_id, intent_id } => items.push(self.delete(
                    item::seat_claim_key(seat_id),
                    expr::release_seat_claim(intent_id),
                )?),
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
            if seat_claim != SeatClaimEffect::None && is_condition_failure(reasons.get(2)) {
                return Err(match (&seat_claim, old_item(reasons[2].item())) {
                    (SeatClaimEffect::Take(_), Some(old)) => {
                        TransitionError::SeatClaimed(item::seat_claim_from_item(old)?)
                    }
                    _ => StoreError::Corrupt(
                        "transition: the seat is claimed by another intent than the one settling"
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

    async fn seat_claim(&self, seat_id: &SeatId) -> Result<Option<SeatClaim>, StoreError> {
        self.get(item::seat_claim_key(seat_id))
            .await?
            .map(|i| item::seat_claim_from_item(&i))
            .transpose()
    }
}
