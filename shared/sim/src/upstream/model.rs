//! The model's state and its call machinery: the truth (users and credentials, seats, charges,
//! rooms), the fault plan and the seeded draws behind one mutex, the operations a test or the
//! simulator drives (register, rooms, faults, releases), the readings of the truth and the record,
//! and `call`: admission by the fault plan, latency spent on simulated time, the timeout, and the
//! call recorded from arrival to answer (or abandonment).

use super::faults::{Faults, Refusal, Window, WindowKind, window_refusal};
use super::record::{CALL_LOG_CAPACITY, Call, Commit, Route};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use seatgate::domain::{Millis, RoomId, SeatId, Secret, UserId};
use seatgate::ports::Clock;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// What the fault plan decided for a call on arrival.
struct Admission {
    delay: Duration,
    refusal: Option<Refusal>,
    lose_answer: bool,
    /// Handled late: the work lands this long past the caller's timeout.
    late: Option<Duration>,
}

pub(super) struct State {
    /// credential -> user, and back (one credential per user, as the HTTP simulator keeps it).
    users: BTreeMap<String, UserId>,
    credentials: BTreeMap<UserId, String>,
    /// seat -> the user holding it.
    pub(super) seats: BTreeMap<SeatId, UserId>,
    /// user -> their one charge (index into `commits`).
    pub(super) charges: BTreeMap<UserId, usize>,
    pub(super) rooms: BTreeMap<RoomId, Vec<SeatId>>,
    faults: Faults,
    windows: Vec<Window>,
    /// The next n commits lose their answer.
    pub(super) lose_next_commits: u32,
    rng: StdRng,
    pub(super) commits: Vec<Commit>,
    calls: Vec<Call>,
    calls_dropped: u64,
}

/// The model. Cheap to clone; clones share one state.
#[derive(Clone)]
pub struct UpstreamModel {
    inner: Arc<Inner>,
    /// The instance this handle calls for ([`UpstreamModel::as_caller`]), recorded with each
    /// call: `None` for a handle no instance owns.
    caller: Option<usize>,
}

struct Inner {
    state: Mutex<State>,
    clock: Arc<dyn Clock>,
    /// When the model started: call times are recorded relative to it.
    origin: Millis,
    /// The callers' upstream timeout (`Timing::upstream_timeout`), which the HTTP adapter
    /// enforces on its side: latency past it is a timeout.
    timeout: Duration,
}

impl fmt::Debug for UpstreamModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamModel")
            .field("timeout", &self.inner.timeout)
            .finish_non_exhaustive()
    }
}

impl UpstreamModel {
    /// An upstream with no users, seats taken or faults; draws from `seed`; callers give up
    /// after `timeout`.
    pub fn new(seed: u64, clock: Arc<dyn Clock>, timeout: Duration) -> Self {
        let origin = clock.now();
        UpstreamModel {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    users: BTreeMap::new(),
                    credentials: BTreeMap::new(),
                    seats: BTreeMap::new(),
                    charges: BTreeMap::new(),
                    rooms: BTreeMap::new(),
                    faults: Faults::default(),
                    windows: Vec::new(),
                    lose_next_commits: 0,
                    rng: StdRng::seed_from_u64(seed ^ 0x0075_7073_7472_6561), // "upstrea"
                    commits: Vec::new(),
                    calls: Vec::new(),
                    calls_dropped: 0,
                }),
                clock,
                origin,
                timeout,
            }),
            caller: None,
        }
    }

    /// The same model, as instance `instance` calls it: each call it makes is recorded with
    /// its caller, so a checker can tell what an instance knew itself from what it could only
    /// learn through the store.
    pub fn as_caller(&self, instance: usize) -> UpstreamModel {
        UpstreamModel {
            inner: Arc::clone(&self.inner),
            caller: Some(instance),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves the state whole (decide, then write), so a panic
        // elsewhere cannot leave half a reservation behind.
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Enrols `user` with `credential`, the only one its calls are accepted with from now on;
    /// a credential handed to another user is taken from its previous owner.
    pub fn register(&self, user: &UserId, credential: &str) {
        let mut s = self.lock();
        if let Some(old) = s.credentials.insert(user.clone(), credential.to_owned())
            && s.users.get(&old) == Some(user)
        {
            s.users.remove(&old);
        }
        if let Some(previous) = s.users.insert(credential.to_owned(), user.clone())
            && previous != *user
        {
            s.credentials.remove(&previous);
        }
    }

    /// Registers (or replaces) a room and its seats, in order.
    pub fn put_room(&self, room: &RoomId, seats: &[SeatId]) {
        self.lock().rooms.insert(room.clone(), seats.to_vec());
    }

    /// Replaces the seeded faults.
    pub fn set_faults(&self, mut faults: Faults) {
        for rate in [
            &mut faults.error_rate,
            &mut faults.busy_rate,
            &mut faults.lost_commit_rate,
            &mut faults.late_commit_rate,
        ] {
            *rate = if rate.is_nan() {
                0.0
            } else {
                rate.clamp(0.0, 1.0)
            };
        }
        self.lock().faults = faults;
    }

    /// Adds a window of refusals (outage or rate limit) in simulated time.
    pub fn add_window(&self, window: Window) {
        self.lock().windows.push(window);
    }

    /// An outage from now for `length`, its 503s carrying `retry_after` if given.
    pub fn outage_for(&self, length: Duration, retry_after: Option<Duration>) {
        let now = self.inner.clock.now();
        self.add_window(Window {
            from: now,
            until: now.plus(length),
            kind: WindowKind::Outage { retry_after },
        });
    }

    /// The next `n` reserves that commit lose their answer.
    pub fn lose_next_commits(&self, n: u32) {
        self.lock().lose_next_commits = n;
    }

    /// Drops every fault and window (armed lost answers too).
    pub fn heal(&self) {
        let mut s = self.lock();
        s.faults = Faults::default();
        s.windows.clear();
        s.lose_next_commits = 0;
    }

    /// `user` gives their seat up (as `DELETE /api/reservations/current`): the seat is free and
    /// the user may be charged again. Recorded, never faulted. The seat freed, if any.
    pub fn release(&self, user: &UserId) -> Option<SeatId> {
        let now = self.inner.clock.now();
        let mut s = self.lock();
        let freed = s.charges.remove(user).map(|i| {
            let commit = &mut s.commits[i];
            commit.released_at = Some(now);
            commit.seat_id.clone()
        });
        if let Some(seat) = &freed {
            s.seats.remove(seat);
        }
        let outcome = match &freed {
            Some(seat) => format!("freed {seat}"),
            None => "no charge".to_owned(),
        };
        push_call(
            &mut s,
            Call {
                arrived: now,
                answered: Some(now),
                route: Route::Release,
                key: format!("user={user}"),
                outcome: Some(outcome),
                abandoned: false,
                caller: None,
            },
        );
        freed
    }

    /// The user holding `seat`, if any (the truth; not a call).
    pub fn occupant(&self, seat: &SeatId) -> Option<UserId> {
        self.lock().seats.get(seat).cloned()
    }

    /// The seat `user` holds a charge on, if any (the truth; not a call).
    pub fn charge_of(&self, user: &UserId) -> Option<SeatId> {
        let s = self.lock();
        s.charges.get(user).map(|i| s.commits[*i].seat_id.clone())
    }

    /// Every committed reserve, in commit order.
    pub fn commits(&self) -> Vec<Commit> {
        self.lock().commits.clone()
    }

    /// Every recorded call, in arrival order.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// Calls made past [`CALL_LOG_CAPACITY`], not kept.
    pub fn calls_dropped(&self) -> u64 {
        self.lock().calls_dropped
    }

    /// Calls of `route` recorded so far (refused ones included: they reached the upstream).
    pub fn count(&self, route: Route) -> usize {
        self.lock()
            .calls
            .iter()
            .filter(|c| c.route == route)
            .count()
    }

    /// The record as stable strings, one per call in arrival order:
    /// `"+<arrived ms> +<answered ms|-> <route> <key> -> <outcome>"`, times since the model's
    /// start on the simulated clock.
    pub fn call_log(&self) -> Vec<String> {
        let origin = self.inner.origin;
        self.lock()
            .calls
            .iter()
            .map(|c| {
                let answered = c.answered.map_or_else(
                    || "-".to_owned(),
                    |a| format!("+{}", a.since(origin).as_millis()),
                );
                let outcome = match (&c.outcome, c.abandoned) {
                    (_, true) => "abandoned",
                    (Some(o), false) => o.as_str(),
                    (None, false) => "in flight",
                };
                format!(
                    "+{} {answered} {} {} -> {outcome}",
                    c.arrived.since(origin).as_millis(),
                    c.route,
                    c.key
                )
            })
            .collect()
    }

    /// Counts the call into the record, then decides its faults (in that order: a refused call
    /// still reached the upstream). Returns the call's index in the record.
    fn admit(&self, route: Route, key: String) -> (Option<usize>, Admission) {
        let now = self.inner.clock.now();
        let mut s = self.lock();
        let index = push_call(
            &mut s,
            Call {
                arrived: now,
                answered: None,
                route,
                key,
                outcome: None,
                abandoned: false,
                caller: self.caller,
            },
        );
        let window = s
            .windows
            .iter()
            .find(|w| w.from <= now && now < w.until)
            .map(|w| w.kind);
        let s = &mut *s;
        let faults = &s.faults;
        let jitter = match faults.jitter.as_millis() as u64 {
            0 => 0,
            max => s.rng.random_range(0..=max),
        };
        let delay = faults.latency + Duration::from_millis(jitter);
        // Each draw only when its rate is set and its route is chosen, so a run without a
        // fault draws nothing for it.
        let chosen = faults.applies_to(route);
        let error = chosen && faults.error_rate > 0.0 && s.rng.random_bool(faults.error_rate);
        let busy = chosen && faults.busy_rate > 0.0 && s.rng.random_bool(faults.busy_rate);
        let lose_answer = chosen
            && route == Route::Reserve
            && faults.lost_commit_rate > 0.0
            && s.rng.random_bool(faults.lost_commit_rate);
        let late = (chosen
            && route == Route::Reserve
            && faults.late_commit_rate > 0.0
            && s.rng.random_bool(faults.late_commit_rate))
        .then(|| {
            let most = (faults.late_commit_within.as_millis() as u64).max(1);
            Duration::from_millis(s.rng.random_range(1..=most))
        });
        let refusal = match window {
            Some(kind) => Some(window_refusal(kind)),
            None if error => Some(Refusal::ServerError),
            None if busy => Some(Refusal::Busy(Some(faults.busy_retry_after), 429)),
            None => None,
        };
        (
            index,
            Admission {
                delay,
                refusal,
                lose_answer,
                late,
            },
        )
    }

    /// Spends the call's latency. `false`: the caller's timeout ran out first (it waited the
    /// whole timeout; nothing was done).
    async fn spend(&self, delay: Duration) -> bool {
        if delay >= self.inner.timeout {
            tokio::time::sleep(self.inner.timeout).await;
            return false;
        }
        // No timer for no latency: a call without faults then completes without yielding, as
        // the memory backend's calls do, which keeps a fault-free run's schedule simple.
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        true
    }

    /// Runs one call: admission, latency, then `work` on the state unless refused.
    pub(super) async fn call<T>(
        &self,
        route: Route,
        key: String,
        refused: impl FnOnce(Refusal) -> T,
        timed_out: impl FnOnce() -> T,
        work: impl FnOnce(&mut State, Millis, bool) -> (T, String, bool),
    ) -> T {
        let (index, admission) = self.admit(route, key);
        self.run_admitted(index, admission, refused, timed_out, work)
            .await
    }

    /// [`UpstreamModel::call`] for a write the fault plan may have handled late: then the
    /// caller hears a timeout at its timeout, and `work` runs on its own later (a task on the
    /// world's runtime, as the upstream's handler outlives the connection), its outcome added
    /// to the call's record when it lands. `work` is told the answer is lost.
    pub(super) async fn call_landing_late<T: 'static>(
        &self,
        route: Route,
        key: String,
        refused: impl FnOnce(Refusal) -> T,
        timed_out: impl FnOnce() -> T,
        work: impl FnOnce(&mut State, Millis, bool) -> (T, String, bool) + Send + 'static,
    ) -> T {
        let (index, admission) = self.admit(route, key);
        let Some(past) = admission.late.filter(|_| admission.refusal.is_none()) else {
            return self
                .run_admitted(index, admission, refused, timed_out, work)
                .await;
        };
        let model = self.clone();
        let lands_after = self.inner.timeout + past;
        tokio::spawn(async move {
            tokio::time::sleep(lands_after).await;
            let now = model.inner.clock.now();
            let mut s = model.lock();
            let (_, outcome, _) = work(&mut s, now, true);
            if let Some(i) = index {
                let landed = now.since(model.inner.origin).as_millis();
                // Still read as a timeout by every checker: the caller heard nothing.
                s.calls[i].outcome =
                    Some(format!("timeout; landed late at +{landed}ms: {outcome}"));
            }
        });
        let mut pending = Pending {
            model: self,
            index,
            done: false,
        };
        tokio::time::sleep(self.inner.timeout).await;
        pending.finish("timeout (still being handled)".to_owned());
        timed_out()
    }

    async fn run_admitted<T>(
        &self,
        index: Option<usize>,
        admission: Admission,
        refused: impl FnOnce(Refusal) -> T,
        timed_out: impl FnOnce() -> T,
        work: impl FnOnce(&mut State, Millis, bool) -> (T, String, bool),
    ) -> T {
        let mut pending = Pending {
            model: self,
            index,
            done: false,
        };
        if !self.spend(admission.delay).await {
            pending.finish("timeout (nothing done)".to_owned());
            return timed_out();
        }
        if let Some(refusal) = admission.refusal {
            pending.finish(refusal.to_string());
            return refused(refusal);
        }
        let now = self.inner.clock.now();
        let (answer, outcome, lost) = {
            let mut s = self.lock();
            work(&mut s, now, admission.lose_answer)
        };
        if lost {
            // The caller waits out its timeout for an answer that never comes.
            let waited = admission.delay;
            let left = self.inner.timeout.saturating_sub(waited);
            pending.finish(outcome);
            tokio::time::sleep(left).await;
            return timed_out();
        }
        pending.finish(outcome);
        answer
    }

    pub(super) fn authenticate(s: &State, credential: &Secret) -> Option<UserId> {
        s.users.get(credential.expose()).cloned()
    }

    pub(super) fn user_key(&self, credential: &Secret) -> String {
        let s = self.lock();
        match Self::authenticate(&s, credential) {
            Some(user) => format!("user={user}"),
            // Never the credential itself (invariant 6), not even in a test record.
            None => "user=?".to_owned(),
        }
    }
}

fn push_call(s: &mut State, call: Call) -> Option<usize> {
    if s.calls.len() >= CALL_LOG_CAPACITY {
        s.calls_dropped += 1;
        return None;
    }
    s.calls.push(call);
    Some(s.calls.len() - 1)
}

/// A call in the record until it answers; dropped before that (its caller gave up, as a worker
/// invocation cut short by its timeout), it is marked abandoned.
struct Pending<'a> {
    model: &'a UpstreamModel,
    index: Option<usize>,
    done: bool,
}

impl Pending<'_> {
    fn finish(&mut self, outcome: String) {
        self.done = true;
        let now = self.model.inner.clock.now();
        if let Some(i) = self.index {
            let mut s = self.model.lock();
            let call = &mut s.calls[i];
            call.answered = Some(now);
            call.outcome = Some(outcome);
        }
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.done
            && let Some(i) = self.index
        {
            self.model.lock().calls[i].abandoned = true;
        }
    }
}
