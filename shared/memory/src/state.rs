//! The backend's whole state: one struct of ordered maps, the "tables" every port reads and
//! writes, and [`Snapshot`], what a checker may look at between steps.
//!
//! Every collection is a `BTreeMap`/`BTreeSet`, so iterating one (a due-index scan, a queue's
//! receive, a snapshot) has one order, the keys' — never a `HashMap`'s per-process random one.
//! Secondary indexes that DynamoDB would keep as a GSI (the due index, a user's bookings) are
//! kept here by the same helper that writes the item, so they cannot drift from it.

use crate::changes::Changes;
use crate::messages::Messages;
use crate::replays::ReplayPlan;
use seatgate::domain::{
    Action, ActionId, Booking, BookingId, BreakerState, CacheEntry, CheckoutHold, ConsentRecord,
    EntryId, Flight, FlightHoldKey, FlightId, HoldId, HoldStatus, IdempotencyKey,
    IdempotencyRecord, Intent, IntentId, Inventory, Millis, RoutePauses, SeatClaim, SeatId, Secret,
    Suppression, TransitionRecord, UserId, WaitEntry, WaitStatus,
};
use seatgate::ports::QueueDepth;
use std::collections::{BTreeMap, BTreeSet};

/// A flight's item and its shard counters.
#[derive(Debug, Clone)]
pub(crate) struct FlightRow {
    pub flight: Flight,
    /// Seats left per shard, indexed by shard.
    pub available: Vec<u32>,
    /// Seats in checkout holds per shard.
    pub held: Vec<u32>,
    pub sold_out: bool,
}

/// An operator lease.
#[derive(Debug, Clone)]
pub(crate) struct Lease {
    pub holder: String,
    pub until: Millis,
}

pub(crate) struct State {
    pub actions: BTreeMap<ActionId, Action>,
    pub intents: BTreeMap<IntentId, Intent>,
    /// The due index: `(due_at, intent)` of every non-terminal intent with a `due_at`.
    pub due: BTreeSet<(Millis, IntentId)>,
    /// The open index: each seat's REQUESTED intents (what a lost race may close).
    pub open: BTreeMap<SeatId, BTreeSet<IntentId>>,
    pub consents: BTreeMap<IntentId, ConsentRecord>,
    pub history: BTreeMap<IntentId, Vec<TransitionRecord>>,
    pub seat_claims: BTreeMap<SeatId, SeatClaim>,
    pub suppressions: BTreeMap<SeatId, Suppression>,
    pub credentials: BTreeMap<UserId, Secret>,
    /// The seat-read cache's shared entries, by [`seatgate::domain::ReadKey::as_key`].
    pub readings: BTreeMap<String, CacheEntry>,
    /// The breaker's item; `None` until first written (generation 0).
    pub breaker: Option<BreakerState>,
    pub route_pauses: RoutePauses,
    pub flights: BTreeMap<FlightId, FlightRow>,
    pub bookings: BTreeMap<BookingId, Booking>,
    /// Each user's booking ids, in id order (UUIDv7, so oldest first), as the other backends'
    /// indexes keep them.
    pub bookings_by_user: BTreeMap<UserId, BTreeSet<BookingId>>,
    /// Seats each user holds on each flight (kept only for flights with a per-user limit).
    pub flight_users: BTreeMap<(FlightId, UserId), u32>,
    pub checkout_holds: BTreeMap<HoldId, CheckoutHold>,
    /// Each user's hold ids, in id order (UUIDv7, so oldest first).
    pub holds_by_user: BTreeMap<UserId, BTreeSet<HoldId>>,
    /// Each user's live hold per flight (the DynamoDB per-user item's `live_hold`).
    pub live_holds: BTreeMap<(FlightId, UserId), HoldId>,
    /// `HELD` holds by deadline: the reaper's due index.
    pub holds_due: BTreeSet<(Millis, HoldId)>,
    /// Each flight's holds by status, in listing order (the flight-side index the other
    /// backends keep).
    pub flight_holds: BTreeMap<(FlightId, HoldStatus), BTreeSet<FlightHoldKey>>,
    pub wait_entries: BTreeMap<EntryId, WaitEntry>,
    /// Each flight's `WAITING` entries in the list's order (their ids, UUIDv7).
    pub waiting: BTreeMap<FlightId, BTreeSet<EntryId>>,
    /// Each user's current entry per flight (the DynamoDB entry item, one per user and flight).
    pub user_entries: BTreeMap<(FlightId, UserId), EntryId>,
    pub idempotency: BTreeMap<(UserId, IdempotencyKey), IdempotencyRecord>,
    /// Requests counted per `(user, route, window start)`.
    pub rate_windows: BTreeMap<(UserId, &'static str, Millis), u32>,
    pub leases: BTreeMap<String, Lease>,
    /// The intent table's change stream (the outbox).
    pub changes: Changes,
    pub seat_queue: Messages,
    pub events: Messages,
    /// The seeded replay mode (`crate::replays`): off unless set.
    pub replays: ReplayPlan,
    /// Every applied write, in order: `"<op> <json>"`.
    pub log: Vec<String>,
    /// When each entry of `log` was applied (the writing call's `now`), index for index. Kept
    /// apart from the entries so the log itself, which runs compare byte for byte, is unchanged.
    pub log_at: Vec<Millis>,
    /// Writes to the books (flights, their counters, bookings) so far: a sampler that saw this
    /// count has seen the books as they are.
    pub books_writes: u64,
}

impl State {
    /// Each [`crate::Feed`]'s mark, in its order: a change means its consumer has new work.
    pub(crate) fn feed_marks(&self) -> [u64; 3] {
        [
            self.seat_queue.arrivals(),
            self.events.arrivals(),
            self.changes.appended(),
        ]
    }

    pub(crate) fn new() -> Self {
        State {
            actions: BTreeMap::new(),
            intents: BTreeMap::new(),
            due: BTreeSet::new(),
            open: BTreeMap::new(),
            consents: BTreeMap::new(),
            history: BTreeMap::new(),
            seat_claims: BTreeMap::new(),
            suppressions: BTreeMap::new(),
            credentials: BTreeMap::new(),
            readings: BTreeMap::new(),
            breaker: None,
            route_pauses: RoutePauses::default(),
            flights: BTreeMap::new(),
            bookings: BTreeMap::new(),
            bookings_by_user: BTreeMap::new(),
            flight_users: BTreeMap::new(),
            checkout_holds: BTreeMap::new(),
            holds_by_user: BTreeMap::new(),
            live_holds: BTreeMap::new(),
            holds_due: BTreeSet::new(),
            flight_holds: BTreeMap::new(),
            wait_entries: BTreeMap::new(),
            waiting: BTreeMap::new(),
            user_entries: BTreeMap::new(),
            idempotency: BTreeMap::new(),
            rate_windows: BTreeMap::new(),
            leases: BTreeMap::new(),
            changes: Changes::default(),
            seat_queue: Messages::new("seat"),
            events: Messages::new("event"),
            replays: ReplayPlan::default(),
            log: Vec::new(),
            log_at: Vec::new(),
            books_writes: 0,
        }
    }

    /// Writes `intent` over whatever was stored under its id, keeping the due index in step: a
    /// terminal intent is never due, whatever its item says (as the adapters' index columns).
    pub(crate) fn store_intent(&mut self, intent: Intent) {
        if let Some(due) = self.intents.get(&intent.intent_id).and_then(due_key) {
            self.due.remove(&due);
        }
        if let Some(due) = due_key(&intent) {
            self.due.insert(due);
        }
        if let Some(was) = self.intents.get(&intent.intent_id).filter(|i| is_open(i))
            && let Some(seat) = self.open.get_mut(&was.seat_id)
        {
            seat.remove(&was.intent_id);
            if seat.is_empty() {
                self.open.remove(&was.seat_id);
            }
        }
        if is_open(&intent) {
            self.open
                .entry(intent.seat_id.clone())
                .or_default()
                .insert(intent.intent_id.clone());
        }
        self.intents.insert(intent.intent_id.clone(), intent);
    }

    pub(crate) fn store_booking(&mut self, booking: Booking) {
        self.bookings_by_user
            .entry(booking.user_id.clone())
            .or_default()
            .insert(booking.booking_id.clone());
        self.bookings.insert(booking.booking_id.clone(), booking);
    }

    /// Writes `hold` over whatever was stored under its id, keeping the user's list, the live
    /// hold and the due index in step with its status.
    pub(crate) fn store_checkout_hold(&mut self, hold: CheckoutHold) {
        let live_key = (hold.flight_id.clone(), hold.user_id.clone());
        if let Some(old) = self.checkout_holds.get(&hold.hold_id) {
            self.holds_due
                .remove(&(old.expires_at, old.hold_id.clone()));
            if let Some(keys) = self
                .flight_holds
                .get_mut(&(old.flight_id.clone(), old.status))
            {
                keys.remove(&FlightHoldKey::of(old));
            }
            if self.live_holds.get(&live_key) == Some(&old.hold_id) {
                self.live_holds.remove(&live_key);
            }
        }
        if hold.status == HoldStatus::Held {
            self.holds_due
                .insert((hold.expires_at, hold.hold_id.clone()));
            // An offer is not the user's live hold.
            if hold.offer_for.is_none() {
                self.live_holds.insert(live_key, hold.hold_id.clone());
            }
        }
        self.holds_by_user
            .entry(hold.user_id.clone())
            .or_default()
            .insert(hold.hold_id.clone());
        self.flight_holds
            .entry((hold.flight_id.clone(), hold.status))
            .or_default()
            .insert(FlightHoldKey::of(&hold));
        self.checkout_holds.insert(hold.hold_id.clone(), hold);
    }

    /// Writes `entry` over the user's current entry on its flight, keeping the list in step.
    pub(crate) fn store_wait_entry(&mut self, entry: WaitEntry) {
        let user_key = (entry.flight_id.clone(), entry.user_id.clone());
        if let Some(old) = self.user_entries.insert(user_key, entry.entry_id.clone())
            && old != entry.entry_id
        {
            self.wait_entries.remove(&old);
        }
        let list = self.waiting.entry(entry.flight_id.clone()).or_default();
        if entry.status == WaitStatus::Waiting {
            list.insert(entry.entry_id.clone());
        } else {
            list.remove(&entry.entry_id);
        }
        // Every old entry of the user on the flight left the list before it was replaced.
        self.wait_entries.insert(entry.entry_id.clone(), entry);
    }

    pub(crate) fn inventory(&self, id: &FlightId) -> Option<Inventory> {
        self.flights.get(id).map(|row| Inventory {
            flight: row.flight.clone(),
            available: row.available.clone(),
            held: row.held.clone(),
            sold_out: row.sold_out,
        })
    }

    pub(crate) fn snapshot(&self, now: Millis) -> Snapshot {
        Snapshot {
            at: now,
            intents: self.intents.values().cloned().collect(),
            seat_claims: self.seat_claims.values().cloned().collect(),
            flights: self
                .flights
                .keys()
                .filter_map(|id| self.inventory(id))
                .collect(),
            bookings: self.bookings.values().cloned().collect(),
            checkout_holds: self.checkout_holds.values().cloned().collect(),
            wait_entries: self.wait_entries.values().cloned().collect(),
            seat_queue: self.seat_queue.depth(now),
            events: self.events.depth(now),
            changes_pending: self.changes.pending(),
            changes_dead: self.changes.dead(),
            writes: self.log.len(),
        }
    }
}

fn due_key(intent: &Intent) -> Option<(Millis, IntentId)> {
    if intent.status.is_terminal() {
        return None;
    }
    intent.due_at.map(|at| (at, intent.intent_id.clone()))
}

fn is_open(intent: &Intent) -> bool {
    intent.status == seatgate::domain::IntentStatus::Requested
}

/// Every intent's history and consent record ([`crate::MemoryBackend::audit_trail`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditTrail {
    pub histories: BTreeMap<IntentId, Vec<TransitionRecord>>,
    pub consents: BTreeMap<IntentId, ConsentRecord>,
}

/// What a checker may look at between steps: every intent, hold, flight inventory and booking
/// (each in key order), the queues' depths and the change stream's backlog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The clock's time when it was taken.
    pub at: Millis,
    pub intents: Vec<Intent>,
    pub seat_claims: Vec<SeatClaim>,
    pub flights: Vec<Inventory>,
    pub bookings: Vec<Booking>,
    pub checkout_holds: Vec<CheckoutHold>,
    /// Each user's current waiting-list entry per flight, every status.
    pub wait_entries: Vec<WaitEntry>,
    pub seat_queue: QueueDepth,
    pub events: QueueDepth,
    /// Change records not yet acknowledged (waiting out a backoff included).
    pub changes_pending: usize,
    /// Change records parked after too many failed attempts.
    pub changes_dead: usize,
    /// Entries in the write log.
    pub writes: usize,
}
