//! The upstream seat system as an in-process model: the truth of seats and charges, the faults
//! the project names, and a record of every call.
//!
//! It implements [`seatgate::ports::Upstream`] directly, with no HTTP in between, because a
//! simulated run must not touch sockets (they are real time and real scheduling) and because
//! the typed answers ([`ReserveOutcome`], [`ReadError`], [`ChargeReadError`]) are what the
//! services decide on. Each fault answers with the very type the HTTP adapter
//! (`seatgate::adapters::upstream_http`) reads from the wire answer `infra/upstream-sim` gives
//! for it, so the services see here what they would see there:
//! - a second reserve of a taken seat (even by its holder) is `SeatTaken` (409 `seat_taken`);
//!   a user who holds a charge gets `AlreadyCharged` (409 `already_charged`): one charge per
//!   user; an unknown credential is `CredentialRejected` (401);
//! - an outage window answers 503, with its `Retry-After` when it has one: `Busy{retry_after}`
//!   (the adapter reads any 503 as busy, `None` when it gave no time);
//! - a rate-limited window, or a seeded 429, answers `Busy{retry_after: Some(..)}`;
//! - a seeded 5xx answers 500: `Unknown(Status(500))` for a reserve (nothing was written, but
//!   the caller cannot know), `Failed(Status(500))` for a read;
//! - latency is spent with `tokio::time::sleep` (simulated time) before the work, as the HTTP
//!   simulator does; latency past the caller's upstream timeout ends the call as
//!   `Unknown(Timeout)` at the timeout, with nothing done (the HTTP server drops the handler
//!   with the connection);
//! - commit-then-lost-response: the reserve commits, and the caller hears `Unknown(Timeout)`
//!   when its timeout runs out (armed for the next `n` commits, or drawn per reserve).
//!
//! Deterministic: all state is in ordered maps behind one `std::sync::Mutex` (never held across
//! an `.await`), charge ids are counters, every draw comes from one `StdRng` seeded by the
//! caller, and time only from the injected [`Clock`] and tokio's (paused) timers. Draws happen
//! in call-arrival order, which a current-thread runtime on paused time fixes.
//!
//! The record: every call, in arrival order, with its simulated arrival and completion time,
//! route, key (seat, room, or the user the credential names; never the credential) and outcome,
//! rendered by [`UpstreamModel::call_log`] as stable strings so two runs compare byte for byte.
//! A call whose caller gave up during its latency is recorded as `abandoned` (it reached the
//! upstream, did nothing). Releases by users ([`UpstreamModel::release`]) are in the record as
//! route `release`: they are not calls from seatgate, but they change the truth, and a checker
//! needs to know when a seat became free. The record holds at most [`CALL_LOG_CAPACITY`]
//! entries; calls past it are counted but not kept.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use seatgate::domain::{Millis, RoomId, SeatAvailability, SeatId, Secret, UserId};
use seatgate::ports::{
    CallFailure, Charge, ChargeReadError, Clock, ReadError, ReserveOutcome, Upstream,
};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// Calls the record keeps at most (a run of the default workload makes a few thousand).
pub const CALL_LOG_CAPACITY: usize = 1_000_000;

/// The upstream's routes, as `infra/upstream-sim`'s stats name them (plus the users' releases).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Route {
    Reserve,
    Charge,
    Seat,
    Room,
    /// A user giving their seat up (not a call from seatgate; never faulted).
    Release,
}

impl Route {
    pub fn key(self) -> &'static str {
        match self {
            Route::Reserve => "POST /api/reservations",
            Route::Charge => "GET /api/charge",
            Route::Seat => "GET /api/seats",
            Route::Room => "GET /api/rooms",
            Route::Release => "release",
        }
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// Seeded faults, applied to each call on arrival (releases excepted). Rates are probabilities in `0..=1` (others
/// are clamped; NaN is 0). The default behaves.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Faults {
    /// Spent before every call's work.
    pub latency: Duration,
    /// A uniform extra in `0..=jitter`, drawn per call.
    pub jitter: Duration,
    /// A call answers 500 without doing anything.
    pub error_rate: f64,
    /// A call answers 429 with `Retry-After: busy_retry_after`, without doing anything.
    pub busy_rate: f64,
    pub busy_retry_after: Duration,
    /// A reserve that commits has its answer lost (the caller hears `Unknown(Timeout)`).
    pub lost_commit_rate: f64,
    /// The routes the refusals and lost answers apply to (`None`: every route); latency
    /// applies to every call.
    pub routes: Option<Vec<Route>>,
}

impl Faults {
    fn applies_to(&self, route: Route) -> bool {
        self.routes.as_ref().is_none_or(|r| r.contains(&route))
    }
}

/// A window of simulated time in which every call (on every route) is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub from: Millis,
    pub until: Millis,
    pub kind: WindowKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowKind {
    /// 503, with a `Retry-After` if given.
    Outage { retry_after: Option<Duration> },
    /// 429 with this `Retry-After`.
    RateLimited { retry_after: Duration },
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// Simulated time it arrived, and when it answered (`None`: still in flight, or abandoned).
    pub arrived: Millis,
    pub answered: Option<Millis>,
    pub route: Route,
    /// `seat=..`, `room=..`, `user=..` (a reserve: both seat and user).
    pub key: String,
    /// What it did or answered; `None` while in flight.
    pub outcome: Option<String>,
    /// The caller gave up (dropped the call) before it was handled.
    pub abandoned: bool,
}

/// A committed reserve: the truth a checker compares intents with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    pub at: Millis,
    pub user_id: UserId,
    pub seat_id: SeatId,
    pub charge_id: String,
    /// The caller never heard of it.
    pub answer_lost: bool,
    /// When its holder released it, if they did.
    pub released_at: Option<Millis>,
}

/// Why a call is answered without being handled.
#[derive(Debug, Clone, Copy)]
enum Refusal {
    /// 503, or 429: busy, with the time it gave.
    Busy(Option<Duration>, u16),
    /// 500.
    ServerError,
}

/// What the fault plan decided for a call on arrival.
struct Admission {
    delay: Duration,
    refusal: Option<Refusal>,
    lose_answer: bool,
}

struct State {
    /// credential -> user, and back (one credential per user, as the HTTP simulator keeps it).
    users: BTreeMap<String, UserId>,
    credentials: BTreeMap<UserId, String>,
    /// seat -> the user holding it.
    seats: BTreeMap<SeatId, UserId>,
    /// user -> their one charge (index into `commits`).
    charges: BTreeMap<UserId, usize>,
    rooms: BTreeMap<RoomId, Vec<SeatId>>,
    faults: Faults,
    windows: Vec<Window>,
    /// The next n commits lose their answer.
    lose_next_commits: u32,
    rng: StdRng,
    commits: Vec<Commit>,
    calls: Vec<Call>,
    calls_dropped: u64,
}

/// The model. Cheap to clone; clones share one state.
#[derive(Clone)]
pub struct UpstreamModel {
    inner: Arc<Inner>,
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
    async fn call<T>(
        &self,
        route: Route,
        key: String,
        refused: impl FnOnce(Refusal) -> T,
        timed_out: impl FnOnce() -> T,
        work: impl FnOnce(&mut State, Millis, bool) -> (T, String, bool),
    ) -> T {
        let (index, admission) = self.admit(route, key);
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

    fn authenticate(s: &State, credential: &Secret) -> Option<UserId> {
        s.users.get(credential.expose()).cloned()
    }

    fn user_key(&self, credential: &Secret) -> String {
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

fn window_refusal(kind: WindowKind) -> Refusal {
    match kind {
        WindowKind::Outage { retry_after } => Refusal::Busy(retry_after, 503),
        WindowKind::RateLimited { retry_after } => Refusal::Busy(Some(retry_after), 429),
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Busy(Some(after), status) => {
                write!(f, "{status} retry-after {}ms", after.as_millis())
            }
            Refusal::Busy(None, status) => write!(f, "{status}"),
            Refusal::ServerError => f.write_str("500"),
        }
    }
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

#[async_trait::async_trait]
impl Upstream for UpstreamModel {
    async fn reserve(&self, credential: &Secret, seat_id: &SeatId) -> ReserveOutcome {
        let key = format!("seat={seat_id} {}", self.user_key(credential));
        self.call(
            Route::Reserve,
            key,
            |refusal| match refusal {
                Refusal::Busy(retry_after, _) => ReserveOutcome::Busy { retry_after },
                Refusal::ServerError => ReserveOutcome::Unknown(CallFailure::Status(500)),
            },
            || ReserveOutcome::Unknown(CallFailure::Timeout),
            |s, now, lose_drawn| {
                let Some(user) = UpstreamModel::authenticate(s, credential) else {
                    return (
                        ReserveOutcome::CredentialRejected,
                        "401 unauthorized".into(),
                        false,
                    );
                };
                if s.seats.contains_key(seat_id) {
                    return (ReserveOutcome::SeatTaken, "409 seat_taken".into(), false);
                }
                if s.charges.contains_key(&user) {
                    return (
                        ReserveOutcome::AlreadyCharged,
                        "409 already_charged".into(),
                        false,
                    );
                }
                // Decided in the commit's critical section, so exactly n answers are lost.
                let lost = lose_drawn || s.lose_next_commits > 0;
                if s.lose_next_commits > 0 && !lose_drawn {
                    s.lose_next_commits -= 1;
                }
                let charge_id = format!("ch-{:06}", s.commits.len() + 1);
                s.seats.insert(seat_id.clone(), user.clone());
                s.charges.insert(user.clone(), s.commits.len());
                s.commits.push(Commit {
                    at: now,
                    user_id: user,
                    seat_id: seat_id.clone(),
                    charge_id: charge_id.clone(),
                    answer_lost: lost,
                    released_at: None,
                });
                let outcome = if lost {
                    format!("201 {charge_id} (answer lost)")
                } else {
                    format!("201 {charge_id}")
                };
                let charge = Charge {
                    charge_id,
                    seat_id: seat_id.clone(),
                };
                (ReserveOutcome::Reserved(charge), outcome, lost)
            },
        )
        .await
    }

    async fn current_charge(&self, credential: &Secret) -> Result<Option<Charge>, ChargeReadError> {
        let key = self.user_key(credential);
        self.call(
            Route::Charge,
            key,
            |refusal| match refusal {
                Refusal::Busy(retry_after, _) => Err(ChargeReadError::Busy { retry_after }),
                Refusal::ServerError => Err(ChargeReadError::Failed(CallFailure::Status(500))),
            },
            || Err(ChargeReadError::Failed(CallFailure::Timeout)),
            |s, _, _| {
                let Some(user) = UpstreamModel::authenticate(s, credential) else {
                    return (
                        Err(ChargeReadError::CredentialRejected),
                        "401 unauthorized".into(),
                        false,
                    );
                };
                match s.charges.get(&user).map(|i| &s.commits[*i]) {
                    Some(c) => (
                        Ok(Some(Charge {
                            charge_id: c.charge_id.clone(),
                            seat_id: c.seat_id.clone(),
                        })),
                        format!("200 {} {}", c.charge_id, c.seat_id),
                        false,
                    ),
                    None => (Ok(None), "404 no_charge".into(), false),
                }
            },
        )
        .await
    }

    async fn seat(&self, seat_id: &SeatId) -> Result<bool, ReadError> {
        self.call(
            Route::Seat,
            format!("seat={seat_id}"),
            read_refusal,
            || Err(ReadError::Failed(CallFailure::Timeout)),
            |s, _, _| {
                let free = !s.seats.contains_key(seat_id);
                let outcome = if free { "200 free" } else { "200 occupied" };
                (Ok(free), outcome.into(), false)
            },
        )
        .await
    }

    async fn room(&self, room_id: &RoomId) -> Result<Vec<SeatAvailability>, ReadError> {
        self.call(
            Route::Room,
            format!("room={room_id}"),
            read_refusal,
            || Err(ReadError::Failed(CallFailure::Timeout)),
            |s, _, _| {
                let Some(seats) = s.rooms.get(room_id) else {
                    return (
                        Err(ReadError::NoSuchRoom),
                        "404 room_not_found".into(),
                        false,
                    );
                };
                let seats: Vec<SeatAvailability> = seats
                    .iter()
                    .map(|seat| SeatAvailability {
                        seat_id: seat.clone(),
                        available: !s.seats.contains_key(seat),
                    })
                    .collect();
                let taken = seats.iter().filter(|a| !a.available).count();
                let outcome = format!("200 {} seats, {taken} occupied", seats.len());
                (Ok(seats), outcome, false)
            },
        )
        .await
    }
}

fn read_refusal<T>(refusal: Refusal) -> Result<T, ReadError> {
    match refusal {
        Refusal::Busy(retry_after, _) => Err(ReadError::Busy { retry_after }),
        Refusal::ServerError => Err(ReadError::Failed(CallFailure::Status(500))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seatgate_testkit::TokioClock;

    fn user(s: &str) -> UserId {
        UserId::parse(s).unwrap()
    }

    fn seat(s: &str) -> SeatId {
        SeatId::parse(s).unwrap()
    }

    fn model() -> UpstreamModel {
        let clock = Arc::new(TokioClock::starting_at(Millis(1_000_000)));
        let m = UpstreamModel::new(1, clock, Duration::from_secs(2));
        m.register(&user("u1"), "c1");
        m.register(&user("u2"), "c2");
        m
    }

    #[tokio::test(start_paused = true)]
    async fn one_charge_per_user_and_one_holder_per_seat() {
        let m = model();
        let (c1, c2) = (Secret::new("c1"), Secret::new("c2"));
        assert!(matches!(
            m.reserve(&c1, &seat("A")).await,
            ReserveOutcome::Reserved(_)
        ));
        assert_eq!(m.reserve(&c2, &seat("A")).await, ReserveOutcome::SeatTaken);
        assert_eq!(
            m.reserve(&c1, &seat("A")).await,
            ReserveOutcome::SeatTaken,
            "even its holder"
        );
        assert_eq!(
            m.reserve(&c1, &seat("B")).await,
            ReserveOutcome::AlreadyCharged
        );
        assert_eq!(
            m.reserve(&Secret::new("nope"), &seat("B")).await,
            ReserveOutcome::CredentialRejected
        );
        assert_eq!(m.release(&user("u1")), Some(seat("A")));
        assert!(matches!(
            m.reserve(&c2, &seat("A")).await,
            ReserveOutcome::Reserved(_)
        ));
        let log = m.call_log();
        assert_eq!(log.len(), 7, "six reserves and a release");
        assert!(log[6].ends_with("POST /api/reservations seat=A user=u2 -> 201 ch-000002"));
        assert!(
            log.iter().all(|l| !l.contains("c1") && !l.contains("nope")),
            "no credential in the record: {log:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_answer_commits_and_times_out() {
        let m = model();
        m.lose_next_commits(1);
        let started = tokio::time::Instant::now();
        assert_eq!(
            m.reserve(&Secret::new("c1"), &seat("A")).await,
            ReserveOutcome::Unknown(CallFailure::Timeout)
        );
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(2),
            "the caller's timeout"
        );
        assert_eq!(m.occupant(&seat("A")), Some(user("u1")));
        let charge = m.current_charge(&Secret::new("c1")).await.unwrap().unwrap();
        assert_eq!(charge.seat_id, seat("A"));
        assert!(m.commits()[0].answer_lost);
    }

    #[tokio::test(start_paused = true)]
    async fn windows_latency_and_abandoned_calls() {
        let m = model();
        m.outage_for(Duration::from_secs(1), Some(Duration::from_secs(3)));
        assert_eq!(
            m.seat(&seat("A")).await,
            Err(ReadError::Busy {
                retry_after: Some(Duration::from_secs(3))
            })
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(m.seat(&seat("A")).await, Ok(true));
        m.set_faults(Faults {
            latency: Duration::from_secs(5),
            ..Faults::default()
        });
        assert_eq!(
            m.reserve(&Secret::new("c1"), &seat("A")).await,
            ReserveOutcome::Unknown(CallFailure::Timeout)
        );
        assert_eq!(m.occupant(&seat("A")), None, "nothing done");
        m.set_faults(Faults {
            latency: Duration::from_millis(500),
            ..Faults::default()
        });
        let cut = tokio::time::timeout(Duration::from_millis(100), m.seat(&seat("A"))).await;
        assert!(cut.is_err());
        let log = m.call_log();
        assert!(log[0].ends_with("-> 503 retry-after 3000ms"), "{log:?}");
        assert!(log[2].ends_with("-> timeout (nothing done)"), "{log:?}");
        assert!(log[3].ends_with("-> abandoned"), "{log:?}");
    }
}
