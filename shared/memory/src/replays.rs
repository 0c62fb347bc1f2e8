//! Replays: two seeded faults of the platform's delivery guarantees that the store and queue
//! faults of [`Chaos`](crate::Chaos) do not cover, both off by default (issue 19).
//!
//! - **A lost relay checkpoint.** A DynamoDB stream's event source mapping delivers at least
//!   once: after a failed batch or a lost checkpoint it hands records already handled again.
//!   With [`Replays::lost_ack_rate`], that share of [`MemoryBackend::relay_once`] passes that
//!   handled records lose their acknowledgement: the relay did its work (sent the seat
//!   messages, enqueued the events) but the records stay, so the next pass relays them again.
//!   Bounded: this fault replays one record at most [`Replays::max_replays`] times (past that
//!   its acknowledgement goes through), so the relay always progresses.
//! - **A duplicate past the deduplication window.** SQS FIFO drops a send whose deduplication
//!   id it saw within 5 minutes; a resend after that (a replayed old record, a redrive) is a
//!   new message. A simulated run is shorter than the window, so with
//!   [`Replays::duplicate_rate`] that share of seat-queue sends whose deduplication id is still
//!   remembered is accepted anyway, as if the window had passed.
//!
//! - **An event delivered twice.** The event queue is an SQS standard queue, which delivers at
//!   least once: now and then a message comes twice. With
//!   [`MemoryBackend::set_event_duplicates`], that share of event enqueues sends a second copy
//!   of the same event (the same body, a new message), so subscribers see its id twice.
//!
//! Each strike is written to the write log (so a run's digest reflects it) and counted
//! ([`MemoryBackend::replay_counts`]). Each knob draws from its own SplitMix64 stream seeded
//! from [`Replays::seed`], and only for the calls it may bend (a pass with records to
//! acknowledge, a send of a remembered id), so a run stays a function of its seed, and runs
//! with the knobs off are exactly as before: nothing is drawn, logged or changed.

use crate::faults::{Op, SplitMix64};
use crate::{MemoryBackend, Tx};
use std::collections::BTreeMap;

/// The seeded replay mode ([`MemoryBackend::set_replays`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Replays {
    pub seed: u64,
    /// The fraction of relay passes (those with records to acknowledge) whose acknowledgement
    /// is lost, 0.0 to 1.0.
    pub lost_ack_rate: f64,
    /// Times at most this fault replays one change record.
    pub max_replays: u32,
    /// The fraction of seat-queue sends of a still-remembered deduplication id accepted as new
    /// messages, 0.0 to 1.0.
    pub duplicate_rate: f64,
}

/// What the replay mode did so far (kept across [`MemoryBackend::set_replays`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayCounts {
    /// Relay passes whose acknowledgement was lost (of at least one record).
    pub lost_acks: u64,
    /// Change records left unacknowledged by those passes, each relayed again.
    pub replayed_records: u64,
    /// Seat-queue sends accepted despite a remembered deduplication id.
    pub duplicates: u64,
    /// Events enqueued twice.
    pub event_duplicates: u64,
}

/// Separates the duplicate knob's stream from the lost-ack knob's ("dup").
const DUPLICATE_STREAM: u64 = 0x0064_7570_0000_0000;

/// The replay mode's state, in the backend's [`State`](crate::state::State) so a duplicate is
/// decided in the same critical section as its send.
#[derive(Debug, Default)]
pub(crate) struct ReplayPlan {
    mode: Option<(Replays, SplitMix64, SplitMix64)>,
    /// Times each change record was replayed by this fault. Grows with the records it struck
    /// (at most every record of the run), as the change stream itself does.
    replayed: BTreeMap<u64, u32>,
    counts: ReplayCounts,
    /// The event-duplicate knob: its rate and its own stream.
    event_duplicates: Option<(f64, SplitMix64)>,
}

impl ReplayPlan {
    fn set(&mut self, replays: Option<Replays>) {
        self.mode = replays.map(|r| {
            let acks = SplitMix64::new(r.seed);
            let dups = SplitMix64::new(r.seed ^ DUPLICATE_STREAM);
            (r, acks, dups)
        });
    }

    /// Of the records a pass handled, those whose acknowledgement this pass loses: none unless
    /// the draw strikes, then every one not yet replayed `max_replays` times.
    fn lose_ack(&mut self, handled: &[u64]) -> Vec<u64> {
        let Some((replays, acks, _)) = self.mode.as_mut() else {
            return Vec::new();
        };
        if handled.is_empty() || acks.next_unit() >= replays.lost_ack_rate {
            return Vec::new();
        }
        let max = replays.max_replays;
        let lost: Vec<u64> = handled
            .iter()
            .copied()
            .filter(|seq| self.replayed.get(seq).copied().unwrap_or(0) < max)
            .collect();
        for seq in &lost {
            *self.replayed.entry(*seq).or_default() += 1;
        }
        if !lost.is_empty() {
            self.counts.lost_acks += 1;
            self.counts.replayed_records += lost.len() as u64;
        }
        lost
    }

    /// Whether this event enqueue sends a second copy (counted when it does).
    pub(crate) fn event_duplicate(&mut self) -> bool {
        let Some((rate, stream)) = self.event_duplicates.as_mut() else {
            return false;
        };
        let twice = stream.next_unit() < *rate;
        if twice {
            self.counts.event_duplicates += 1;
        }
        twice
    }

    /// Whether a send of a remembered deduplication id passes as a new message.
    fn duplicate_passes(&mut self) -> bool {
        let Some((replays, _, dups)) = self.mode.as_mut() else {
            return false;
        };
        dups.next_unit() < replays.duplicate_rate
    }
}

impl Tx<'_> {
    /// Decides whether a seat-queue send of `dedup_id` passes deduplication although the id is
    /// remembered, and if so makes the queue forget it (the send then remembers it afresh, as a
    /// send after the window does). Draws only for a remembered id that the queue has room to
    /// take, so a refused send changes nothing.
    pub(crate) fn pass_dedup(&mut self, dedup_id: &str, capacity: usize) -> bool {
        let queue = &mut self.state.seat_queue;
        if !queue.remembers(dedup_id, self.now) || queue.is_full(capacity) {
            return false;
        }
        if !self.state.replays.duplicate_passes() {
            return false;
        }
        self.state.seat_queue.forget_dedup(dedup_id);
        self.state.replays.counts.duplicates += 1;
        true
    }
}

impl MemoryBackend {
    /// Starts (`Some`) or stops (`None`) the seeded replay mode; its counts are kept.
    pub fn set_replays(&self, replays: Option<Replays>) {
        crate::lock(&self.inner.state).replays.set(replays);
    }

    /// Sends a second copy of a share `rate` of the events enqueued from now on, drawn from a
    /// stream seeded with `seed` (`None`: none; see the module doc).
    pub fn set_event_duplicates(&self, knob: Option<(u64, f64)>) {
        crate::lock(&self.inner.state).replays.event_duplicates =
            knob.map(|(seed, rate)| (rate, SplitMix64::new(seed)));
    }

    /// What the replay mode did so far.
    pub fn replay_counts(&self) -> ReplayCounts {
        crate::lock(&self.inner.state).replays.counts
    }

    /// Of the records a relay pass handled, those whose acknowledgement is lost (see the
    /// module doc), logged as `relay_ack_lost [seq, ...]`; empty with the mode off.
    pub(crate) fn lose_ack(&self, handled: &[u64]) -> Vec<u64> {
        let now = self.inner.clock.now();
        let mut state = crate::lock(&self.inner.state);
        let lost = state.replays.lose_ack(handled);
        if !lost.is_empty() {
            let mut tx = Tx {
                state: &mut state,
                now,
                config: &self.inner.config,
                op: Op::AckChanges,
            };
            tx.log_as("relay_ack_lost", &lost);
        }
        lost
    }
}
