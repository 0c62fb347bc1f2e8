//! In-memory backend: every store port, the seat queue, the event queue and the intent table's
//! change stream, in one process, deterministically. The third backend beside DynamoDB and
//! SQLite, and the one the simulator runs on (issue 18).
//!
//! A simulated run must be a function of its seed alone, so this backend leaves nothing to
//! chance:
//! - no threads and no wall clock: time comes only from the injected [`Clock`], and message
//!   ids, receipts and change positions are counters, not UUIDs;
//! - one iteration order: every table is a `BTreeMap`/`BTreeSet` (`state.rs`), never a `HashMap`;
//! - randomness only from a seed the caller gives ([`Chaos`]).
//!
//! The backend's answers then depend only on the order of the calls; keeping that order fixed
//! is the caller's part (a current-thread executor, every id and time from the scenario). No
//! call ever waits inside: each port method completes when first polled, so a task switch can
//! happen only where the caller awaits something else.
//!
//! Atomicity: each port call is one critical section on one `std::sync::Mutex` (never held
//! across an `.await`; the bodies have none). A call decides with the domain's rules on the state
//! it sees, and only then applies everything it writes, before it lets go: as atomic as the one
//! DynamoDB conditional write or transaction the port method stands for, and a refusal leaves
//! nothing to roll back. The rules are the domain's own ([`Intent::apply`], the reading and
//! breaker rules, [`RoutePauses::may_extend`], ...), as the other two adapters apply them, so the
//! three backends answer alike; the contract suite checks that.
//!
//! For the simulator and its checkers:
//! - [`MemoryBackend::write_log`]: every applied write, in order, as `"<op> <json>"`, so two runs
//!   can be compared byte for byte;
//! - [`MemoryBackend::snapshot`]: intents, seat claims, checkout holds, inventories, bookings, queue depths;
//! - fault injection on demand ([`MemoryBackend::arm`], [`MemoryBackend::set_chaos`]): a call
//!   refused before it is applied, or applied with its answer lost;
//! - the platform's replays on demand ([`MemoryBackend::set_replays`]): relay passes whose
//!   acknowledgement is lost, seat-queue duplicates past the deduplication window;
//! - the change stream the relay consumes ([`MemoryBackend::fetch_changes`], or one whole pass
//!   through the relay with [`MemoryBackend::relay_once`]);
//! - planted bugs ([`StorePlant`], test-only, none by default): a condition of the store's own
//!   removed on purpose, so a checker can be shown to catch the defect.
//!
//! Bounds: the seat queue, the event queue and the change stream each hold at most a configured
//! number of records ([`MemoryConfig`]); past it a new one is refused as throttling, nothing
//! written, and each has its dead-letter state. Everything else grows with the workload, as the
//! tables it stands for do.
//!
//! [`Intent::apply`]: seatgate::domain::Intent::apply
//! [`RoutePauses::may_extend`]: seatgate::domain::RoutePauses::may_extend

mod actions;
mod changes;
mod checkout;
mod credentials;
mod events;
mod faults;
mod flights;
mod intents;
pub mod kill;
mod leases;
mod messages;
mod plants;
mod queue;
mod queue_admin;
mod rate_limits;
mod replays;
pub mod runtime;
mod service_time;
mod shared_state;
mod state;
mod waitlist;

pub use changes::{PendingChange, Relayed};
pub use events::MemoryEvents;
pub use faults::{Chaos, Fault, FaultKind, Injected, Op};
pub use flights::Books;
pub use plants::StorePlant;
pub use replays::{ReplayCounts, Replays};
pub use runtime::{SeededIds, SeededRandom, TokioClock};
pub use service_time::ServiceTime;
pub use state::{AuditTrail, Snapshot};

use faults::{FaultPlan, Injectable};
use seatgate::config::Timing;
use seatgate::domain::Millis;
use seatgate::ports::Clock;
use serde::Serialize;
use state::State;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::sync::Notify;

/// The queue knobs and the bounds. Store semantics have none: they are the domain's (but for
/// the test-only planted bugs, [`MemoryConfig::plants`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryConfig {
    /// How long a received seat message stays invisible (SQS `VisibilityTimeout`).
    pub visibility_timeout: Duration,
    /// Receives after which a seat message is dead-lettered (SQS `maxReceiveCount`).
    pub max_receive_count: u32,
    /// A second send with the same deduplication id within this window is dropped (SQS: 5 min).
    pub dedup_window: Duration,
    /// The event queue's visibility timeout and max receive count.
    pub event_visibility_timeout: Duration,
    pub event_max_receive_count: u32,
    /// Failed relay attempts after which a change record is parked as dead.
    pub change_max_attempts: u32,
    /// Messages the seat queue holds at most, dead letters included; a send past it is refused
    /// (`QueueError::Throttled`).
    pub seat_queue_capacity: usize,
    /// Messages the event queue holds at most, dead letters included.
    pub event_queue_capacity: usize,
    /// Change records held at most (pending and dead); an intent write that would add one past
    /// it is refused (`StoreError::Throttled`), nothing written, until the relay catches up.
    pub change_capacity: usize,
    /// Bugs planted on purpose (test-only; empty by default): the simulator sets them to show
    /// that its checkers catch each ([`StorePlant`]). Nothing else ever should.
    pub plants: Vec<StorePlant>,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig::for_timing(&Timing::local())
    }
}

impl MemoryConfig {
    /// The embedded backend's defaults, the visibility timeout taken from the timing profile.
    pub fn for_timing(timing: &Timing) -> Self {
        MemoryConfig {
            visibility_timeout: timing.visibility_timeout,
            max_receive_count: 5,
            dedup_window: Duration::from_secs(5 * 60),
            event_visibility_timeout: timing.visibility_timeout,
            event_max_receive_count: 8,
            change_max_attempts: 10,
            seat_queue_capacity: 100_000,
            event_queue_capacity: 100_000,
            change_capacity: 100_000,
            plants: Vec::new(),
        }
    }
}

/// Every port in memory. Cheap to clone: clones share one state, as one process's handles do.
#[derive(Clone)]
pub struct MemoryBackend {
    inner: Arc<Inner>,
}

struct Inner {
    clock: Arc<dyn Clock>,
    config: MemoryConfig,
    state: Mutex<State>,
    faults: Mutex<FaultPlan>,
    /// One per [`Feed`], in its order: woken when a call gives that feed's consumer work.
    feeds: [Notify; 3],
    /// How long each call takes ([`MemoryBackend::set_service_time`]); unset: no time at all.
    service_time: std::sync::OnceLock<Arc<dyn ServiceTime>>,
}

/// What a consumer polls: the seat queue, the event queue, the change stream. A simulated
/// consumer waits on its feed ([`MemoryBackend::feed`]) or until its next due time
/// ([`MemoryBackend::next_due`]) rather than polling on a timer: as an SQS long poll returns
/// when a message arrives, and so a run spends no wake-ups on empty polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feed {
    SeatQueue,
    Events,
    Changes,
}

impl Feed {
    const ALL: [Feed; 3] = [Feed::SeatQueue, Feed::Events, Feed::Changes];

    fn index(self) -> usize {
        match self {
            Feed::SeatQueue => 0,
            Feed::Events => 1,
            Feed::Changes => 2,
        }
    }
}

impl fmt::Debug for MemoryBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryBackend")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl MemoryBackend {
    /// An empty backend reading time from `clock`.
    pub fn new(clock: Arc<dyn Clock>, config: MemoryConfig) -> Self {
        MemoryBackend {
            inner: Arc::new(Inner {
                clock,
                config,
                state: Mutex::new(State::new()),
                faults: Mutex::new(FaultPlan::default()),
                feeds: Default::default(),
                service_time: std::sync::OnceLock::new(),
            }),
        }
    }

    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.inner.clock)
    }

    pub fn config(&self) -> &MemoryConfig {
        &self.inner.config
    }

    /// Every write applied so far, in the order applied: `"<op> <json>"`, the JSON being the
    /// new item or the write's arguments (a credential's value is left out). Two runs of the
    /// same scenario from the same seed must give equal logs.
    pub fn write_log(&self) -> Vec<String> {
        lock(&self.inner.state).log.clone()
    }

    /// When each entry of [`MemoryBackend::write_log`] was applied, index for index: the time
    /// its call ran at (a checker asks when the fleet could first have known of a write).
    pub fn write_times(&self) -> Vec<Millis> {
        lock(&self.inner.state).log_at.clone()
    }

    /// The write log and its times ([`MemoryBackend::write_log`], [`MemoryBackend::write_times`])
    /// moved out, leaving both empty: for a run that is over, which would otherwise copy the
    /// whole log only to drop the store's.
    pub fn take_write_log(&self) -> (Vec<String>, Vec<Millis>) {
        let mut state = lock(&self.inner.state);
        (
            std::mem::take(&mut state.log),
            std::mem::take(&mut state.log_at),
        )
    }

    /// The write log from entry `from` on (for following it without copying it all).
    pub fn write_log_since(&self, from: usize) -> Vec<String> {
        let state = lock(&self.inner.state);
        state.log.get(from..).map(<[_]>::to_vec).unwrap_or_default()
    }

    /// The audit trail a checker reads once, at the end of a run: every intent's history (one
    /// record per write, in version order) and every consent record. Kept out of [`Snapshot`],
    /// which is taken many times in a run.
    pub fn audit_trail(&self) -> AuditTrail {
        let state = lock(&self.inner.state);
        AuditTrail {
            histories: state.history.clone(),
            consents: state.consents.clone(),
        }
    }

    /// The state a checker looks at, at the clock's time now.
    pub fn snapshot(&self) -> Snapshot {
        let now = self.inner.clock.now();
        lock(&self.inner.state).snapshot(now)
    }

    /// Notified when a call gives `feed`'s consumer something it did not have: a message sent,
    /// a group unblocked, a visibility changed, a change record appended. Enable the
    /// `Notified` before the poll it follows up, or a call between the two is missed.
    pub fn feed(&self, feed: Feed) -> &Notify {
        &self.inner.feeds[feed.index()]
    }

    /// When time alone next gives `feed`'s consumer work (a visibility or a record's backoff
    /// running out), if anything waits on the clock.
    pub fn next_due(&self, feed: Feed) -> Option<Millis> {
        let now = self.inner.clock.now();
        let state = lock(&self.inner.state);
        match feed {
            Feed::SeatQueue => state.seat_queue.next_visible_after(now),
            Feed::Events => state.events.next_visible_after(now),
            Feed::Changes => state.changes.next_attempt_after(now),
        }
    }

    /// Whether nothing is left to do: every intent terminal, every checkout hold resolved (a
    /// live one still has a confirm or a lapse, and its events, to come), no change record
    /// pending, both queues empty but for dead letters. What [`MemoryBackend::snapshot`] would say, without
    /// copying the store (a simulated world asks it every few simulated milliseconds).
    pub fn quiet(&self) -> bool {
        let now = self.inner.clock.now();
        let state = lock(&self.inner.state);
        let (seats, events) = (state.seat_queue.depth(now), state.events.depth(now));
        state.changes.pending() == 0
            && seats.ready + seats.in_flight == 0
            && events.ready + events.in_flight == 0
            && state.intents.values().all(|i| i.status.is_terminal())
            && state
                .checkout_holds
                .values()
                .all(|h| h.status != seatgate::domain::HoldStatus::Held)
    }

    /// Arms a fault: the next `fault.times` calls of `fault.op` fail as `fault.kind`.
    pub fn arm(&self, fault: Fault) {
        lock(&self.inner.faults).arm(fault);
    }

    /// The next `times` calls of `op` (any op if `None`) fail with `error`, applying nothing.
    pub fn fail_next(
        &self,
        op: impl Into<Option<Op>>,
        error: seatgate::ports::StoreError,
        times: u32,
    ) {
        self.arm(Fault {
            op: op.into(),
            kind: FaultKind::Refuse(error),
            times,
        });
    }

    /// The next `times` calls of `op` are applied, then answer `error` (a lost answer).
    pub fn lose_answer_next(
        &self,
        op: impl Into<Option<Op>>,
        error: seatgate::ports::StoreError,
        times: u32,
    ) {
        self.arm(Fault {
            op: op.into(),
            kind: FaultKind::LoseAnswer(error),
            times,
        });
    }

    /// Starts (`Some`) or stops (`None`) the seeded mode.
    pub fn set_chaos(&self, chaos: Option<Chaos>) {
        lock(&self.inner.faults).set_chaos(chaos);
    }

    /// Drops every armed fault and stops the seeded mode and the replay mode.
    pub fn heal(&self) {
        lock(&self.inner.faults).heal();
        self.set_replays(None);
    }

    /// Every fault that struck so far, in order.
    pub fn injected(&self) -> Vec<Injected> {
        lock(&self.inner.faults).injected().to_vec()
    }

    /// Calls made of `op` so far, failed ones included.
    pub fn calls(&self, op: Op) -> u64 {
        lock(&self.inner.faults).calls_of(op)
    }

    /// From now on, every call takes the time `service_time` draws for it ([`ServiceTime`]).
    /// Set once, before the backend is used; a second call is refused (`false`), so a run's
    /// timing cannot change under it.
    pub fn set_service_time(&self, service_time: Arc<dyn ServiceTime>) -> bool {
        self.inner.service_time.set(service_time).is_ok()
    }

    /// [`MemoryBackend::call`], taking the call's service time if one is set: half before it
    /// is applied, half after ([`service_time`]'s doc says why). Without one, it never yields.
    async fn timed<T, E: Injectable>(
        &self,
        op: Op,
        body: impl FnMut(&mut Tx<'_>) -> Result<T, E>,
    ) -> Result<T, E> {
        let Some(service_time) = self.inner.service_time.get() else {
            return self.call(op, body);
        };
        let total = service_time.draw(op);
        // Halves in whole milliseconds: paused tokio time rounds a fraction up.
        let there = Duration::from_millis((total.as_millis() / 2) as u64);
        if !there.is_zero() {
            tokio::time::sleep(there).await;
        }
        let out = self.call(op, body);
        let back = total - there;
        if !back.is_zero() {
            tokio::time::sleep(back).await;
        }
        out
    }

    /// Runs one port call: decides its fault, then runs `body` in one critical section (twice
    /// for a replay). `body` must decide every refusal before it changes anything.
    fn call<T, E: Injectable>(
        &self,
        op: Op,
        mut body: impl FnMut(&mut Tx<'_>) -> Result<T, E>,
    ) -> Result<T, E> {
        if !kill::spend() {
            // The calling run was killed before this call (`kill`): nothing applied.
            return Err(E::injected(seatgate::ports::StoreError::Unavailable(
                "the function was killed".into(),
            )));
        }
        let fault = lock(&self.inner.faults).take(op, self.inner.clock.now());
        let mut run = || {
            let now = self.inner.clock.now();
            let mut state = lock(&self.inner.state);
            let before = state.feed_marks();
            let mut tx = Tx {
                state: &mut state,
                now,
                config: &self.inner.config,
                op,
            };
            let out = body(&mut tx);
            let after = state.feed_marks();
            drop(state);
            for (feed, (b, a)) in Feed::ALL.iter().zip(before.iter().zip(after)) {
                if *b != a {
                    self.feed(*feed).notify_waiters();
                }
            }
            out
        };
        match fault {
            None => run(),
            Some(FaultKind::Refuse(error)) => Err(E::injected(error)),
            Some(FaultKind::LoseAnswer(error)) => {
                // Applied; the outcome, whatever it was, never reaches the caller.
                let _ = run();
                Err(E::injected(error))
            }
            Some(FaultKind::Replay) => {
                let _ = run();
                run()
            }
        }
    }
}

/// One call's view of the state: the state itself, the time it runs at, the knobs, and the
/// operation (for the write log).
pub(crate) struct Tx<'a> {
    pub state: &'a mut State,
    pub now: Millis,
    pub config: &'a MemoryConfig,
    pub op: Op,
}

impl Tx<'_> {
    /// Appends an applied write to the log under the call's operation name.
    pub(crate) fn log(&mut self, value: &impl Serialize) {
        self.log_as(self.op.name(), value);
    }

    /// Appends an applied write under `what` (a call writing several things names each).
    pub(crate) fn log_as(&mut self, what: &str, value: &impl Serialize) {
        // Serialising the domain's own types cannot fail (no maps with non-string keys, no
        // foreign serializers); should it, the entry still records that the write happened.
        let mut entry = Vec::with_capacity(what.len() + 256);
        entry.extend_from_slice(what.as_bytes());
        entry.push(b' ');
        if let Err(e) = serde_json::to_writer(&mut entry, value) {
            entry.truncate(what.len() + 1);
            entry.extend_from_slice(format!("\"unserialisable: {e}\"").as_bytes());
        }
        // serde_json writes UTF-8 only, and `what` is a &str.
        let entry = String::from_utf8(entry)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        self.state.log.push(entry);
        self.state.log_at.push(self.now);
        if matches!(
            self.op,
            Op::CreateFlight
                | Op::Book
                | Op::MarkSoldOut
                | Op::CancelBooking
                | Op::CreateCheckoutHold
                | Op::ResolveHold
        ) {
            self.state.books_writes += 1;
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic inside a body leaves the state as the body left it; the bodies decide before
    // they write, so that is a whole write or none, and carrying on is sound.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
