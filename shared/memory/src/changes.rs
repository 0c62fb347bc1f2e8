//! The intent table's change stream: the in-memory stand-in for the DynamoDB Stream (the
//! embedded backend's outbox), which the relay consumes.
//!
//! Every intent write (a confirm, a wait's registration, a transition) appends its record (old
//! and new image) in the same critical section as the write, together with the intent's history
//! record, so a change is never applied without its record nor recorded without being applied.
//! So does every write of an offer (a hold made for a waiting-list entry): its creation inside a
//! return, and its resolution; the relay turns those into `offer.created` and `offer.expired`.
//!
//! Consuming is at least once, like a stream's event source mapping: [`MemoryBackend::fetch_changes`]
//! only reads (records stay until acknowledged), the caller hands them to the relay (each
//! converts into the [`ChangeRecord`] the relay's edge takes, positioned by its sequence number),
//! then [`MemoryBackend::ack_changes`] the ones handled and [`MemoryBackend::fail_change`] the
//! first that failed. A failed record waits out a backoff (100 ms doubling, at most 30 s, as the
//! embedded outbox) and is parked dead after `change_max_attempts`; the reaper's requeue path
//! covers intents whose record was parked. Acknowledged records are dropped at once: the
//! intent's history is kept apart, so nothing else needs them.
//!
//! Bound: at most `change_capacity` records (pending and dead) are held; an intent write that
//! would add one more is refused as throttling before it applies anything; so is a return (a
//! hold's release or lapse, a cancel) unless there is room for its own record and every offer it
//! may make (`1 + MAX_OFFERS_PER_RETURN`), and an offer's confirm or extension without room for
//! its one record.

use crate::faults::Op;
use crate::{MemoryBackend, Tx};
use seatgate::backoff::Backoff;
use seatgate::domain::waitlist::MAX_OFFERS_PER_RETURN;
use seatgate::domain::{
    Change, ChangeRecord, CheckoutHold, HoldChange, Intent, IntentChange, Millis, TransitionRecord,
};
use seatgate::ports::StoreError;
use seatgate::service::Relay;
use std::collections::BTreeMap;
use std::time::Duration;

/// What one [`MemoryBackend::relay_once`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Relayed {
    /// Records handled and acknowledged.
    pub handled: usize,
    /// The first record that failed, marked failed (it and those after it come again).
    pub failed: Option<u64>,
}

/// Retry delay of a failed record: 100 ms doubling per failure, at most 30 s.
const BACKOFF: Backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(30));

/// A change record not yet acknowledged: its position in commit order and its change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingChange {
    pub seq: u64,
    pub change: Change,
    /// Failed relay attempts so far.
    pub attempts: u32,
}

impl From<PendingChange> for ChangeRecord {
    /// The record as the relay's edge takes it: its sequence number is its position.
    fn from(p: PendingChange) -> Self {
        ChangeRecord {
            position: p.seq.to_string(),
            change: Ok(Some(p.change)),
        }
    }
}

#[derive(Debug, Clone)]
struct Record {
    change: Change,
    attempts: u32,
    next_attempt_at: Millis,
    dead: bool,
}

#[derive(Debug, Default)]
pub(crate) struct Changes {
    records: BTreeMap<u64, Record>,
    next_seq: u64,
    dead: usize,
}

impl Changes {
    pub(crate) fn pending(&self) -> usize {
        self.records.len() - self.dead
    }

    pub(crate) fn dead(&self) -> usize {
        self.dead
    }

    /// Records appended so far: bumped by every intent write, what the relay is woken for.
    pub(crate) fn appended(&self) -> u64 {
        self.next_seq
    }

    /// The earliest time after `now` at which a failed record's backoff ends. `None`: no
    /// pending record waits on the clock.
    pub(crate) fn next_attempt_after(&self, now: Millis) -> Option<Millis> {
        self.records
            .values()
            .filter(|r| !r.dead && r.next_attempt_at > now)
            .map(|r| r.next_attempt_at)
            .min()
    }
}

impl Tx<'_> {
    /// Refuses (as throttling) an intent write whose change record would not fit; called
    /// before the write decides anything else, so a refused write changes nothing.
    pub(crate) fn room_for_change(&self) -> Result<(), StoreError> {
        self.room_for_changes(1)
    }

    /// [`Self::room_for_change`] for a write that returns seats: its hold's record (an offer's
    /// resolution) and the offers its serving of the list may make.
    pub(crate) fn room_for_a_return(&self) -> Result<(), StoreError> {
        self.room_for_changes(1 + MAX_OFFERS_PER_RETURN)
    }

    fn room_for_changes(&self, n: usize) -> Result<(), StoreError> {
        if self.state.changes.records.len() + n > self.config.change_capacity {
            return Err(StoreError::Throttled);
        }
        Ok(())
    }

    fn append_change(&mut self, change: Change) {
        let changes = &mut self.state.changes;
        changes.next_seq += 1;
        changes.records.insert(
            changes.next_seq,
            Record {
                change,
                attempts: 0,
                next_attempt_at: self.now,
                dead: false,
            },
        );
    }

    /// Appends the record of a hold's write when the hold is an offer (the only holds that make
    /// events); called by the write itself, under the same lock.
    pub(crate) fn record_offer(&mut self, old: Option<&CheckoutHold>, new: &CheckoutHold) {
        if new.offer_for.is_some() {
            self.append_change(Change::Hold(HoldChange {
                old: old.cloned(),
                new: Some(new.clone()),
            }));
        }
    }

    /// Stores `new` (over `old`, `None` for a creation), its change record and its history
    /// record, and logs the write.
    pub(crate) fn write_intent(&mut self, old: Option<&Intent>, new: Intent) {
        self.log_as(&format!("{}.intent", self.op.name()), &new);
        self.append_change(Change::Intent(IntentChange {
            old: old.cloned(),
            new: Some(new.clone()),
        }));
        let skipped = old.is_some()
            && new.status.is_terminal()
            && self.config.planted(crate::StorePlant::HistorySkipped);
        if !skipped {
            self.state
                .history
                .entry(new.intent_id.clone())
                .or_default()
                .push(TransitionRecord::of(old, &new));
        }
        self.state.store_intent(new);
    }
}

impl MemoryBackend {
    /// Pending records due for an attempt (past any backoff), in commit order, at most `max`.
    /// A read: they stay until acknowledged or failed.
    pub fn fetch_changes(&self, max: usize) -> Result<Vec<PendingChange>, StoreError> {
        self.call(Op::FetchChanges, |tx| {
            Ok(tx
                .state
                .changes
                .records
                .iter()
                .filter(|(_, r)| !r.dead && r.next_attempt_at <= tx.now)
                .take(max)
                .map(|(seq, r)| PendingChange {
                    seq: *seq,
                    change: r.change.clone(),
                    attempts: r.attempts,
                })
                .collect())
        })
    }

    /// Drops handled records. Unknown, already acknowledged or dead ones are left as they are.
    pub fn ack_changes(&self, seqs: &[u64]) -> Result<(), StoreError> {
        self.call(Op::AckChanges, |tx| {
            let mut acked = Vec::new();
            for seq in seqs {
                let records = &mut tx.state.changes.records;
                if records.get(seq).is_some_and(|r| !r.dead) {
                    records.remove(seq);
                    acked.push(*seq);
                }
            }
            if !acked.is_empty() {
                tx.log(&acked);
            }
            Ok(())
        })
    }

    /// Records a failed attempt: the record is retried after its backoff or, at
    /// `change_max_attempts`, parked dead.
    pub fn fail_change(&self, seq: u64) -> Result<(), StoreError> {
        self.call(Op::FailChange, |tx| {
            let (max, now) = (tx.config.change_max_attempts, tx.now);
            let changes = &mut tx.state.changes;
            let Some(record) = changes.records.get_mut(&seq).filter(|r| !r.dead) else {
                return Ok(());
            };
            record.attempts += 1;
            record.next_attempt_at = now.plus(BACKOFF.delay(record.attempts));
            record.dead = record.attempts >= max;
            let (attempts, dead) = (record.attempts, record.dead);
            if dead {
                changes.dead += 1;
            }
            tx.log(&serde_json::json!({ "seq": seq, "attempts": attempts, "dead": dead }));
            Ok(())
        })
    }

    /// One pass of the stream's event source mapping, as the local runner plays the embedded
    /// outbox: up to `max` due records through the relay's edge; those before the first failure
    /// acknowledged, that one failed (its backoff, or dead), and it and the rest left for the
    /// next pass, as a stream retries from the failed position.
    pub async fn relay_once(&self, relay: &Relay, max: usize) -> Result<Relayed, StoreError> {
        let pending = self.fetch_changes(max)?;
        let seqs: Vec<u64> = pending.iter().map(|p| p.seq).collect();
        let records = pending.into_iter().map(ChangeRecord::from).collect();
        let failed = seatgate::handlers::stream::handle(relay, records)
            .await
            .and_then(|position| position.parse::<u64>().ok());
        let handled: Vec<u64> = seqs
            .iter()
            .copied()
            .take_while(|s| Some(*s) != failed)
            .collect();
        // The replay mode may lose some of the acknowledgement: those records come again.
        let lost = self.lose_ack(&handled);
        let acked: Vec<u64> = handled
            .iter()
            .copied()
            .filter(|s| !lost.contains(s))
            .collect();
        self.ack_changes(&acked)?;
        if let Some(seq) = failed {
            self.fail_change(seq)?;
        }
        Ok(Relayed {
            handled: handled.len(),
            failed,
        })
    }

    /// Records parked after too many failed attempts, in commit order.
    pub fn dead_changes(&self) -> Vec<PendingChange> {
        let state = crate::lock(&self.inner.state);
        state
            .changes
            .records
            .iter()
            .filter(|(_, r)| r.dead)
            .map(|(seq, r)| PendingChange {
                seq: *seq,
                change: r.change.clone(),
                attempts: r.attempts,
            })
            .collect()
    }
}
