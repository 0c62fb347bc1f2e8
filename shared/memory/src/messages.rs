//! The message store both queues share: messages in send order, visibility on the injected
//! clock, receipts, deduplication, the dead-letter state and redrive.
//!
//! One structure with two receive disciplines, because the two queues differ only there:
//! - [`Messages::receive_in_groups`] is SQS FIFO's: while a group has a message in flight
//!   (received, not deleted, visibility not run out) none of its messages is handed out; groups
//!   come oldest head first, each group's messages in order, several of one group in a batch;
//! - [`Messages::receive_any`] is a standard queue's: any message visible now, oldest first.
//!
//! Either way an undeleted message comes back when its visibility runs out, with its receive
//! count raised and a fresh receipt (a stale receipt no longer deletes it), and a message that
//! would be received more than the max receive count moves to the dead-letter state instead,
//! where it no longer blocks its group. This mirrors `seatgate_embedded`'s queue tables query
//! for query; ids and receipts are counters so a run is reproducible.
//!
//! Bound: at most `capacity` messages, dead letters included; a send past it is refused
//! (`QueueError::Throttled`) and nothing is stored. Deduplication ids are forgotten once their
//! window has passed, at the next send.

use seatgate::domain::Millis;
use seatgate::ports::{Delivery, QueueDepth, QueueError};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MessageState {
    Ready,
    InFlight,
    Dead,
}

#[derive(Debug, Clone)]
struct Message {
    message_id: String,
    /// The message group; `None` on the event queue, which has none.
    group_id: Option<String>,
    /// Kept so a redriven message keeps it, as SQS's redrive does.
    dedup_id: Option<String>,
    body: String,
    visible_at: Millis,
    receipt: Option<String>,
    receive_count: u32,
    state: MessageState,
}

/// What one receive did: the deliveries, and the messages it moved to the dead-letter state.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Received {
    #[serde(skip)]
    pub deliveries: Vec<Delivery>,
    /// `(message id, receive count)` of each delivery, for the write log.
    pub delivered: Vec<(String, u32)>,
    pub dead_lettered: Vec<String>,
}

impl Received {
    pub(crate) fn changed_anything(&self) -> bool {
        !self.delivered.is_empty() || !self.dead_lettered.is_empty()
    }
}

#[derive(Debug)]
pub(crate) struct Messages {
    /// Prefixes message ids and receipts (`seat-m1`, `event-r3`).
    name: &'static str,
    /// By sequence number: send order.
    messages: BTreeMap<u64, Message>,
    next_seq: u64,
    next_receipt: u64,
    /// Receipt -> message, for in-flight messages' current receipts only.
    receipts: BTreeMap<String, u64>,
    /// Deduplication id -> when it is forgotten, and the same by expiry for pruning.
    dedup: BTreeMap<String, Millis>,
    dedup_expiry: BTreeSet<(Millis, String)>,
    /// Bumped by every change that can make a message receivable sooner than time alone would
    /// (a send, a delete unblocking a group, a visibility change, a redrive): what a waiting
    /// consumer is woken for ([`crate::Feed`]).
    arrivals: u64,
}

impl Messages {
    pub(crate) fn new(name: &'static str) -> Self {
        Messages {
            name,
            messages: BTreeMap::new(),
            next_seq: 0,
            next_receipt: 0,
            receipts: BTreeMap::new(),
            dedup: BTreeMap::new(),
            dedup_expiry: BTreeSet::new(),
            arrivals: 0,
        }
    }

    pub(crate) fn arrivals(&self) -> u64 {
        self.arrivals
    }

    /// The earliest time after `now` at which time alone makes a message receivable: an
    /// in-flight message's visibility running out (which also unblocks its group). `None`:
    /// nothing waits on the clock.
    pub(crate) fn next_visible_after(&self, now: Millis) -> Option<Millis> {
        self.messages
            .values()
            .filter(|m| m.state != MessageState::Dead && m.visible_at > now)
            .map(|m| m.visible_at)
            .min()
    }

    fn push(
        &mut self,
        now: Millis,
        group_id: Option<String>,
        dedup_id: Option<String>,
        body: String,
    ) -> String {
        self.next_seq += 1;
        self.arrivals += 1;
        let message_id = format!("{}-m{}", self.name, self.next_seq);
        self.messages.insert(
            self.next_seq,
            Message {
                message_id: message_id.clone(),
                group_id,
                dedup_id,
                body,
                visible_at: now,
                receipt: None,
                receive_count: 0,
                state: MessageState::Ready,
            },
        );
        message_id
    }

    /// Sends a message: its id, or `None` if its deduplication id was seen within the window
    /// (accepted and dropped, even if the first was deleted since).
    pub(crate) fn send(
        &mut self,
        now: Millis,
        group_id: Option<String>,
        dedup: Option<(String, Duration)>,
        body: String,
        capacity: usize,
    ) -> Result<Option<String>, QueueError> {
        while let Some(first) = self.dedup_expiry.first().cloned() {
            if first.0 > now {
                break;
            }
            self.dedup_expiry.remove(&first);
            self.dedup.remove(&first.1);
        }
        if let Some((id, _)) = &dedup
            && self.dedup.contains_key(id)
        {
            return Ok(None);
        }
        if self.messages.len() >= capacity {
            return Err(QueueError::Throttled);
        }
        let dedup_id = dedup.map(|(id, window)| {
            let expires = now.plus(window);
            self.dedup.insert(id.clone(), expires);
            self.dedup_expiry.insert((expires, id.clone()));
            id
        });
        Ok(Some(self.push(now, group_id, dedup_id, body)))
    }

    /// Hands out `seq` (visible until `visible_until`), or dead-letters it if it was received
    /// `max_receives` times already.
    fn take(&mut self, seq: u64, visible_until: Millis, max_receives: u32, out: &mut Received) {
        let Some(m) = self.messages.get_mut(&seq) else {
            return;
        };
        if let Some(old) = m.receipt.take() {
            self.receipts.remove(&old);
        }
        if m.receive_count >= max_receives {
            m.state = MessageState::Dead;
            out.dead_lettered.push(m.message_id.clone());
            return;
        }
        self.next_receipt += 1;
        let receipt = format!("{}-r{}", self.name, self.next_receipt);
        self.receipts.insert(receipt.clone(), seq);
        m.receipt = Some(receipt.clone());
        m.state = MessageState::InFlight;
        m.visible_at = visible_until;
        m.receive_count += 1;
        out.delivered.push((m.message_id.clone(), m.receive_count));
        out.deliveries.push(Delivery {
            message_id: m.message_id.clone(),
            receipt,
            body: m.body.clone(),
            group_id: m.group_id.clone().unwrap_or_default(),
            receive_count: m.receive_count,
        });
    }

    /// SQS FIFO's receive: up to `max` messages of groups with nothing in flight, groups oldest
    /// head first, each group in order.
    pub(crate) fn receive_in_groups(
        &mut self,
        now: Millis,
        max: usize,
        visibility: Duration,
        max_receives: u32,
    ) -> Received {
        // Nothing to hand out unless some message is receivable now (the common case for an
        // idle poll): every other live message is in flight and so blocks its own group. The
        // same answer as the scan below, without building its sets.
        if !self.messages.values().any(|m| match m.state {
            MessageState::Dead => false,
            MessageState::InFlight => m.visible_at <= now,
            MessageState::Ready => true,
        }) {
            return Received::default();
        }
        let blocked: BTreeSet<&str> = self
            .messages
            .values()
            .filter(|m| m.state == MessageState::InFlight && m.visible_at > now)
            .filter_map(|m| m.group_id.as_deref())
            .collect();
        // Groups in order of their head (first non-dead message), each with its messages.
        let mut heads: Vec<&str> = Vec::new();
        let mut groups: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
        for (seq, m) in &self.messages {
            if m.state == MessageState::Dead {
                continue;
            }
            let group = m.group_id.as_deref().unwrap_or_default();
            if blocked.contains(group) {
                continue;
            }
            let seqs = groups.entry(group).or_default();
            if seqs.is_empty() {
                heads.push(group);
            }
            seqs.push(*seq);
        }
        let candidates: Vec<u64> = heads
            .iter()
            .flat_map(|g| groups[g].iter().copied())
            .collect();
        let visible_until = now.plus(visibility);
        let mut out = Received::default();
        for seq in candidates {
            if out.deliveries.len() >= max {
                break;
            }
            self.take(seq, visible_until, max_receives, &mut out);
        }
        out
    }

    /// A standard queue's receive: up to `max` of the messages visible now, oldest first (a
    /// message dead-lettered on the way counts towards `max`, as the embedded query's limit).
    pub(crate) fn receive_any(
        &mut self,
        now: Millis,
        max: usize,
        visibility: Duration,
        max_receives: u32,
    ) -> Received {
        let candidates: Vec<u64> = self
            .messages
            .iter()
            .filter(|(_, m)| m.state != MessageState::Dead && m.visible_at <= now)
            .take(max)
            .map(|(seq, _)| *seq)
            .collect();
        let visible_until = now.plus(visibility);
        let mut out = Received::default();
        for seq in candidates {
            self.take(seq, visible_until, max_receives, &mut out);
        }
        out
    }

    /// Deletes in-flight messages by receipt; the ids of those deleted. A receipt naming
    /// nothing in flight (stale, deleted, unknown) is ignored, as in SQS.
    pub(crate) fn delete(&mut self, receipts: &[String]) -> Vec<String> {
        let mut deleted = Vec::new();
        for r in receipts {
            let Some(seq) = self.receipts.remove(r) else {
                continue;
            };
            if let Some(m) = self.messages.remove(&seq) {
                deleted.push(m.message_id);
            }
        }
        if !deleted.is_empty() {
            self.arrivals += 1;
        }
        deleted
    }

    /// Makes in-flight messages visible again at `visible_at` (SQS `ChangeMessageVisibility`);
    /// the ids of those changed. Unknown receipts are ignored.
    pub(crate) fn hand_back(&mut self, receipts: &[String], visible_at: Millis) -> Vec<String> {
        let mut changed = Vec::new();
        for r in receipts {
            let Some(m) = self.receipts.get(r).and_then(|s| self.messages.get_mut(s)) else {
                continue;
            };
            m.visible_at = visible_at;
            changed.push(m.message_id.clone());
        }
        if !changed.is_empty() {
            self.arrivals += 1;
        }
        changed
    }

    pub(crate) fn depth(&self, now: Millis) -> QueueDepth {
        let mut depth = QueueDepth::default();
        for m in self.messages.values() {
            match m.state {
                MessageState::Dead => depth.dead += 1,
                MessageState::InFlight if m.visible_at > now => depth.in_flight += 1,
                MessageState::Ready | MessageState::InFlight => depth.ready += 1,
            }
        }
        depth
    }

    /// Moves up to `limit` dead letters, oldest first, to the tail as new messages (new ids,
    /// fresh receive counts), as SQS's redrive does: revived in place, a seat message would
    /// jump ahead of its group's later messages. `(old id, new id)` of each, and whether dead
    /// letters are left.
    pub(crate) fn redrive(&mut self, limit: usize, now: Millis) -> (Vec<(String, String)>, bool) {
        let dead: Vec<u64> = self
            .messages
            .iter()
            .filter(|(_, m)| m.state == MessageState::Dead)
            .map(|(seq, _)| *seq)
            .take(limit.saturating_add(1))
            .collect();
        let more = dead.len() > limit;
        let mut moved = Vec::new();
        for seq in dead.into_iter().take(limit) {
            let Some(m) = self.messages.remove(&seq) else {
                continue;
            };
            let new_id = self.push(now, m.group_id, m.dedup_id, m.body);
            moved.push((m.message_id, new_id));
        }
        (moved, more)
    }

    /// The dead letters, oldest first (no receipt: they cannot be deleted through the queue).
    pub(crate) fn dead_letters(&self) -> Vec<Delivery> {
        self.messages
            .values()
            .filter(|m| m.state == MessageState::Dead)
            .map(|m| Delivery {
                message_id: m.message_id.clone(),
                receipt: String::new(),
                body: m.body.clone(),
                group_id: m.group_id.clone().unwrap_or_default(),
                receive_count: m.receive_count,
            })
            .collect()
    }
}

/// What the replay mode (`crate::replays`) asks of deduplication, kept apart from the queue's
/// own paths.
impl Messages {
    /// Whether `dedup_id` was sent within its window, as of `now` (the test [`Messages::send`]
    /// drops a send by).
    pub(crate) fn remembers(&self, dedup_id: &str, now: Millis) -> bool {
        self.dedup
            .get(dedup_id)
            .is_some_and(|expires| *expires > now)
    }

    /// Whether a send would be refused for want of room.
    pub(crate) fn is_full(&self, capacity: usize) -> bool {
        self.messages.len() >= capacity
    }

    /// Forgets `dedup_id`, as the window's passing does: the next send of it is a new message.
    pub(crate) fn forget_dedup(&mut self, dedup_id: &str) {
        if let Some(expires) = self.dedup.remove(dedup_id) {
            self.dedup_expiry.remove(&(expires, dedup_id.to_owned()));
        }
    }
}
