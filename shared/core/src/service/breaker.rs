//! The circuit breaker in front of every upstream call, the `Retry-After` pauses beside it, and
//! the upstream they guard.
//!
//! [`Breaker`] keeps the shared state ([`BreakerState`], one store item) cached for
//! `instance_cache_ttl` (an open state until its own `until`, since nothing but a probe after
//! that time can change it), the routes' pauses ([`RoutePauses`], one store item) cached as long,
//! and this instance's own record of call outcomes, which decides when to open.
//! [`GuardedUpstream`] is the [`Upstream`] every service is given: while the breaker is open, or
//! the call's route is paused, it sends nothing and answers at once (a busy reserve, a read or
//! charge read held back, each saying until when); when a probe is due, the one instance whose
//! compare-and-set wins sends it. A reserve's probe is a read of the same seat, never the write:
//! a write sent to an upstream that may still be failing could only add an unknown outcome. Its
//! answer is a reading like any other, so it is shared ([`GuardedUpstream::with_readings`]):
//! the seat-read cache then serves it for one read TTL instead of reading the seat again.
//!
//! When it opens: on `breaker_consecutive_failures` failures in a row (a fresh outage after
//! healthy traffic trips it within a few calls per instance), or when over `breaker_window` at
//! least `breaker_min_calls` calls were made and `breaker_failure_percent` of them failed (a
//! flaky upstream that never fails three times running). Failures are the answers that say the
//! upstream is unwell: 5xx, timeouts, lost or unreadable answers, and a busy answer (429, 503)
//! that gave no `Retry-After`. A definite answer (seat taken, no charge, a refused credential,
//! another 4xx) is the upstream working and ends a run of failures.
//!
//! A busy answer *with* a `Retry-After` is not a failure: the upstream said when to come back,
//! so that route is paused fleet-wide until then (capped at `retry_after_max`), one conditional
//! write that only ever moves the pause later. Before a call is sent the pauses item is read
//! afresh (a known pause is trusted until it ends), so no instance sends into a `Retry-After`
//! another was given, but for calls already on their way when it was given. A probe answered that way still reopens the
//! breaker: the probe's job is to find the upstream well.
//!
//! Each reserve the breaker lets through is a [`Metric::ReservePosts`], each phase change this
//! instance wins a [`Metric::BreakerTransitions`], each pause it writes a
//! [`Metric::UpstreamPauses`], and each call it keeps back a [`Metric::UpstreamHeldBack`]: counted
//! here because only here is it known that a POST was really sent, that this instance's write
//! changed the shared phase, or that a call was not made.

use crate::config::Timing;
use crate::domain::{
    BreakerState, Gate, Millis, ReadKey, Reading, RoomId, RoutePauses, SeatAvailability, SeatId,
    Secret, UpstreamRoute,
};
use crate::metrics::{self, Metric, record};
use crate::ports::{
    BreakerStates, Charge, ChargeReadError, Clock, ReadError, Readings, ReserveOutcome, Upstream,
    WakeUps,
};
use async_trait::async_trait;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tracing::{info, warn};

/// What the breaker lets one call do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permit {
    /// Closed: send it, then [`Breaker::record`] its outcome.
    Call,
    /// This instance won the probe: send one call, and its outcome closes or reopens the breaker.
    Probe(BreakerState),
    /// The breaker: send nothing before this time.
    Refused(Millis),
    /// A `Retry-After` pauses the route: send nothing before this time.
    Paused(Millis),
}

impl Permit {
    /// When a call may be sent, if this permit sends none.
    fn not_before(&self) -> Option<Millis> {
        match self {
            Permit::Refused(until) | Permit::Paused(until) => Some(*until),
            Permit::Call | Permit::Probe(_) => None,
        }
    }

    /// The `by` of [`Metric::UpstreamHeldBack`].
    fn held_by(&self) -> &'static str {
        match self {
            Permit::Paused(_) => "pause",
            _ => "breaker",
        }
    }
}

/// How a call that was sent went, as the breaker judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A definite answer: the upstream works.
    Healthy,
    /// The upstream is unwell (5xx, timeout, lost or unreadable answer, busy without a time).
    Failed,
    /// Busy, and it said when to come back: the route is paused until then.
    BusyFor(Duration),
}

impl Verdict {
    fn of_read<T>(result: &Result<T, ReadError>) -> Verdict {
        match result {
            Ok(_) | Err(ReadError::NoSuchRoom | ReadError::Refused(_)) => Verdict::Healthy,
            Err(ReadError::Busy {
                retry_after: Some(d),
            }) => Verdict::BusyFor(*d),
            Err(ReadError::Busy { retry_after: None } | ReadError::Failed(_)) => Verdict::Failed,
            // Not sent; never judged (the guard answers it before any call).
            Err(ReadError::HeldBack(_)) => Verdict::Healthy,
        }
    }

    fn of_charge<T>(result: &Result<T, ChargeReadError>) -> Verdict {
        match result {
            Ok(_) | Err(ChargeReadError::CredentialRejected | ChargeReadError::Refused(_)) => {
                Verdict::Healthy
            }
            Err(ChargeReadError::Busy {
                retry_after: Some(d),
            }) => Verdict::BusyFor(*d),
            Err(ChargeReadError::Busy { retry_after: None } | ChargeReadError::Failed(_)) => {
                Verdict::Failed
            }
            Err(ChargeReadError::HeldBack(_)) => Verdict::Healthy,
        }
    }

    fn of_reserve(outcome: &ReserveOutcome) -> Verdict {
        match outcome {
            ReserveOutcome::Busy {
                retry_after: Some(d),
            } => Verdict::BusyFor(*d),
            ReserveOutcome::Busy { retry_after: None } | ReserveOutcome::Unknown(_) => {
                Verdict::Failed
            }
            ReserveOutcome::Reserved(_)
            | ReserveOutcome::SeatTaken
            | ReserveOutcome::AlreadyCharged
            | ReserveOutcome::CredentialRejected
            | ReserveOutcome::Refused(_) => Verdict::Healthy,
        }
    }
}

struct Local {
    state: BreakerState,
    /// When `state` was read or written by this instance; `None`: read it again.
    fetched_at: Option<Millis>,
    /// This instance's recent call outcomes (time, failed), oldest first. Bounded by the
    /// window: entries older than `breaker_window` are dropped on every record.
    window: VecDeque<(Millis, bool)>,
    /// This instance's failures in a row since its last healthy answer.
    consecutive_failures: u32,
    pauses: RoutePauses,
    /// When `pauses` was read or written by this instance; `None`: read them again.
    pauses_fetched_at: Option<Millis>,
}

/// Attempts at writing a `Retry-After` pause before it is left to this instance alone.
const PAUSE_WRITE_ATTEMPTS: u32 = 4;

/// After a probe closes the breaker, how much longer than an instance's breaker cache the
/// second wake-up waits: time for a worker that saw the probe in flight to write its intent's
/// parking (one store write).
pub const STRAGGLER_MARGIN: std::time::Duration = std::time::Duration::from_secs(1);

/// How long after the time it is for (a pause's end, the probe time) a wake-up is asked: the
/// most two instances' clocks may disagree by ([`crate::domain::CLOCK_TOLERANCE`]). The
/// asker's reading is the parked intents' retry time; a wake run on an instance whose clock is
/// behind would find them not yet due (and the breaker still open), and nothing else moves
/// them before the schedule, a period later. Late by this much costs a user a quarter second;
/// early costs a period. (Found by the wake-up rule of the simulator's liveness checker: seed
/// 24, an instance 56 ms ahead parked an intent until a pause's end, and the wake run's
/// instance read the time before it.)
pub const WAKE_AFTER: std::time::Duration = crate::domain::CLOCK_TOLERANCE;

/// The shared breaker and pauses, as seen by one instance. Cheap to share (`Arc`).
pub struct Breaker {
    store: Arc<dyn BreakerStates>,
    clock: Arc<dyn Clock>,
    /// The jitter of the pause write's retries.
    random: Arc<dyn crate::ports::Random>,
    timing: Timing,
    /// This instance, in probe leases.
    holder: String,
    local: Mutex<Local>,
    /// Where a change this instance made asks for the reaper (none: the schedule finds it).
    wake_ups: Option<Arc<dyn WakeUps>>,
}

impl Breaker {
    /// `holder` names this instance in probe leases; it must be unique among the instances
    /// sharing the store (the services take it from their `Ids` port).
    pub fn new(
        store: Arc<dyn BreakerStates>,
        clock: Arc<dyn Clock>,
        random: Arc<dyn crate::ports::Random>,
        holder: String,
        timing: &Timing,
    ) -> Self {
        Breaker {
            store,
            clock,
            random,
            timing: timing.clone(),
            holder,
            local: Mutex::new(Local {
                state: BreakerState::closed(),
                fetched_at: None,
                window: VecDeque::new(),
                consecutive_failures: 0,
                pauses: RoutePauses::default(),
                pauses_fetched_at: None,
            }),
            wake_ups: None,
        }
    }

    /// The same breaker, asking `wake_ups` for a reaper run whenever this instance's write
    /// changes what parked intents wait for: opened (at the probe time), closed by a probe (at
    /// once), a route paused (at the pause's end).
    pub fn with_wake_ups(mut self, wake_ups: Option<Arc<dyn WakeUps>>) -> Self {
        self.wake_ups = wake_ups;
        self
    }

    /// Asks for a reaper run at `at`; a failure is logged, and the schedule finds the intents.
    async fn wake_at(&self, at: Millis, why: &'static str) {
        if let Some(wake_ups) = &self.wake_ups
            && let Err(e) = wake_ups.wake_at(at).await
        {
            warn!(error = %e, why, "could not ask for a reaper run; the schedule will find what is due");
        }
    }

    fn local(&self) -> std::sync::MutexGuard<'_, Local> {
        self.local.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The shared state, from the in-process copy while it can be trusted. A store that cannot
    /// be read leaves the last known state in force (closed if none): the breaker guards the
    /// upstream, and a store outage is reported by the calls that need the store.
    pub async fn state(&self) -> BreakerState {
        let now = self.clock.now();
        {
            let local = self.local();
            let recent = local
                .fetched_at
                .is_some_and(|at| now < at.plus(self.timing.instance_cache_ttl));
            // An open breaker changes only by a probe after its `until`: trust it until then.
            let open_until = match local.state.phase {
                crate::domain::BreakerPhase::Open { until } => Some(until),
                _ => None,
            };
            let trusted = local.fetched_at.is_some()
                && (recent || open_until.is_some_and(|until| now < until));
            if trusted {
                return local.state.clone();
            }
        }
        match self.store.breaker().await {
            Ok(state) => self.remember(state.clone(), now),
            Err(e) => {
                warn!(error = %e, "breaker state unreadable; keeping the last known");
                self.local().state.clone()
            }
        }
    }

    /// Keeps `state` unless a newer generation is already known; returns what is kept.
    fn remember(&self, state: BreakerState, now: Millis) -> BreakerState {
        let mut local = self.local();
        if state.generation >= local.state.generation {
            if state.is_closed() && !local.state.is_closed() {
                // A new closed phase starts a new count: failures from before the probe that
                // closed it must not reopen it.
                local.window.clear();
                local.consecutive_failures = 0;
            }
            local.state = state;
        }
        local.fetched_at = Some(now);
        local.state.clone()
    }

    /// The routes' pauses, from the in-process copy for `instance_cache_ttl`. A store that
    /// cannot be read leaves the last known pauses in force.
    pub async fn pauses(&self) -> RoutePauses {
        let now = self.clock.now();
        {
            let local = self.local();
            if local
                .pauses_fetched_at
                .is_some_and(|at| now < at.plus(self.timing.instance_cache_ttl))
            {
                return local.pauses.clone();
            }
        }
        match self.store.pauses().await {
            Ok(pauses) => {
                let mut local = self.local();
                // A pause this instance set (even one the store did not take) stays in force here.
                let merged = local
                    .pauses
                    .0
                    .iter()
                    .fold(pauses, |acc, (route, until)| acc.extended(*route, *until));
                local.pauses = merged.clone();
                local.pauses_fetched_at = Some(now);
                merged
            }
            Err(e) => {
                warn!(error = %e, "upstream pauses unreadable; keeping the last known");
                self.local().pauses.clone()
            }
        }
    }

    /// When `route` may be called again, if a pause keeps it back now (as last read: at most
    /// `instance_cache_ttl` old).
    pub async fn paused_until(&self, route: UpstreamRoute) -> Option<Millis> {
        self.pauses().await.paused_until(route, self.clock.now())
    }

    /// The same, for a call about to be sent: a pause this instance knows of is trusted until
    /// its end, but "not paused" is asked of the store again, since another instance may have
    /// been told to wait a moment ago. One item read per upstream call sent, which is cheap
    /// beside the call it may spare an upstream that asked to be left alone; with the cached
    /// copy alone every instance could send `instance_cache_ttl` worth of calls into it.
    async fn paused_now(&self, route: UpstreamRoute) -> Option<Millis> {
        let now = self.clock.now();
        {
            let mut local = self.local();
            if let Some(until) = local.pauses.paused_until(route, now) {
                return Some(until);
            }
            local.pauses_fetched_at = None;
        }
        self.paused_until(route).await
    }

    /// Pauses `route` for the `retry_after` the upstream gave (at most `retry_after_max`), for
    /// every instance. A store that cannot take it still pauses this instance.
    pub async fn pause(&self, route: UpstreamRoute, retry_after: Duration) {
        let now = self.clock.now();
        let until = now.plus(retry_after.min(self.timing.retry_after_max));
        {
            let mut local = self.local();
            local.pauses = local.pauses.extended(route, until);
        }
        let (written, answer_lost) = self.write_pause(route, until).await;
        match written {
            Ok(true) => {
                info!(
                    route = route.as_str(),
                    retry_after_ms = retry_after.as_millis() as u64,
                    "upstream asked to wait: route paused"
                );
                metrics::count(Metric::UpstreamPauses, &[("route", route.as_str())], 1);
                self.wake_at(until.plus(WAKE_AFTER), "route paused").await;
            }
            // A pause as long or longer is stored: read it next time. After an error it may be
            // this instance's own write whose answer was lost, and then nobody else asks for
            // its wake-up: ask (a spare run finds nothing due).
            Ok(false) => {
                self.local().pauses_fetched_at = None;
                if answer_lost {
                    self.wake_at(until.plus(WAKE_AFTER), "route paused").await;
                }
            }
            Err(e) => {
                warn!(error = %e, route = route.as_str(), "could not write the hold");
                self.wake_at(until.plus(WAKE_AFTER), "route paused").await;
            }
        }
    }

    /// Writes the pause, trying again (at most [`PAUSE_WRITE_ATTEMPTS`] times, with jittered
    /// backoff) after any error. A pause only ever moves later, so a repeated write cannot do
    /// harm even if the first one landed and only its answer was lost; and a pause that stays
    /// unwritten lets every other instance call into the `Retry-After` this one was given. (The
    /// simulator found it: seed 11 of `shared/sim/tests/checkers/`, a refused pause write.)
    /// Also says whether an attempt failed (its write may have landed, its answer lost).
    async fn write_pause(
        &self,
        route: UpstreamRoute,
        until: Millis,
    ) -> (Result<bool, crate::ports::StoreError>, bool) {
        const BACKOFF: crate::backoff::Backoff =
            crate::backoff::Backoff::new(Duration::from_millis(10), Duration::from_millis(80));
        let mut attempt = 1;
        loop {
            match self.store.pause(route, until).await {
                Err(e) if attempt < PAUSE_WRITE_ATTEMPTS => {
                    warn!(error = %e, route = route.as_str(), attempt, "could not write the hold; trying again");
                    let pause = BACKOFF.delay_with_jitter(attempt, |max| self.random.up_to(max));
                    tokio::time::sleep(pause).await;
                    attempt += 1;
                }
                other => return (other, attempt > 1),
            }
        }
    }

    /// Whether a call of `route` may be sent now. `probe_route` is the route the probe would
    /// be sent on when one is due (a reserve probes with a seat read); a paused route is not
    /// probed.
    pub async fn permit(&self, route: UpstreamRoute, probe_route: UpstreamRoute) -> Permit {
        if let Some(until) = self.paused_now(route).await {
            return Permit::Paused(until);
        }
        let state = self.state().await;
        let now = self.clock.now();
        match state.gate(now) {
            Gate::Pass => Permit::Call,
            Gate::Shut { until } => Permit::Refused(until),
            Gate::Probe => {
                if let Some(until) = self.paused_now(probe_route).await {
                    return Permit::Paused(until);
                }
                let probing = state.probing(&self.holder, now, self.timing.upstream_call_lease());
                match self.store.swap_breaker(&probing).await {
                    Ok(true) => {
                        info!(
                            generation = probing.generation,
                            "breaker half-open: this instance probes"
                        );
                        transition(&probing);
                        self.remember(probing.clone(), now);
                        Permit::Probe(probing)
                    }
                    Ok(false) => {
                        // Another instance moved first (probing, or already closed): re-read.
                        self.local().fetched_at = None;
                        match self.state().await.gate(now) {
                            Gate::Pass => Permit::Call,
                            Gate::Shut { until } => Permit::Refused(until),
                            Gate::Probe => {
                                Permit::Refused(now.plus(self.timing.instance_cache_ttl))
                            }
                        }
                    }
                    Err(e) => {
                        // Nobody can be sure who probes: send nothing, ask again shortly.
                        warn!(error = %e, "could not take the probe; not calling");
                        Permit::Refused(now.plus(self.timing.instance_cache_ttl))
                    }
                }
            }
        }
    }

    /// Records how a call sent under `permit` on `route` went: a pause for a busy answer that
    /// said when, and the outcome for the breaker.
    pub async fn settle(&self, permit: &Permit, route: UpstreamRoute, verdict: Verdict) {
        match verdict {
            Verdict::Healthy => self.record(permit, false).await,
            Verdict::Failed => self.record(permit, true).await,
            Verdict::BusyFor(retry_after) => {
                self.pause(route, retry_after).await;
                // A probe must find the upstream well; an ordinary call told to wait is neither.
                if matches!(permit, Permit::Probe(_)) {
                    self.record(permit, true).await;
                }
            }
        }
    }

    /// Records the outcome of a call sent under `permit` (`failed`: the upstream was unwell).
    pub async fn record(&self, permit: &Permit, failed: bool) {
        let now = self.clock.now();
        match permit {
            Permit::Refused(_) | Permit::Paused(_) => {}
            Permit::Probe(probing) => {
                let next = if failed {
                    probing.opened(now, self.timing.breaker_open_interval)
                } else {
                    probing.closed_at(now)
                };
                self.swap(
                    next,
                    if failed {
                        "probe failed: breaker reopened"
                    } else {
                        "probe succeeded: breaker closed"
                    },
                )
                .await;
            }
            Permit::Call => {
                let open_from = {
                    let mut local = self.local();
                    let from = now.minus(self.timing.breaker_window).max(local.state.since);
                    local.window.push_back((now, failed));
                    while local.window.front().is_some_and(|(at, _)| *at < from) {
                        local.window.pop_front();
                    }
                    local.consecutive_failures = if failed {
                        local.consecutive_failures.saturating_add(1)
                    } else {
                        0
                    };
                    let calls = local.window.len() as u64;
                    let failures = local.window.iter().filter(|(_, f)| *f).count() as u64;
                    let in_a_row = local.consecutive_failures;
                    let tripped = failed
                        && (in_a_row >= self.timing.breaker_consecutive_failures
                            || (calls >= u64::from(self.timing.breaker_min_calls)
                                && failures * 100
                                    >= calls * u64::from(self.timing.breaker_failure_percent)));
                    if failed {
                        // Another instance may have opened it already: look before the next
                        // call rather than after `instance_cache_ttl`.
                        local.fetched_at = None;
                    }
                    (tripped && local.state.is_closed()).then(|| {
                        warn!(
                            calls,
                            failures, in_a_row, "upstream failing: opening the breaker"
                        );
                        local.state.clone()
                    })
                };
                if let Some(closed) = open_from {
                    let opened = closed.opened(now, self.timing.breaker_open_interval);
                    self.swap(opened, "breaker opened").await;
                }
            }
        }
    }

    async fn swap(&self, next: BreakerState, what: &'static str) {
        let now = self.clock.now();
        match self.store.swap_breaker(&next).await {
            Ok(true) => {
                info!(generation = next.generation, phase = ?next.phase, "{what}");
                transition(&next);
                let wakes = self.wake_ups_for(&next, now);
                self.remember(next, now);
                for at in wakes {
                    self.wake_at(at, what).await;
                }
            }
            // Someone else changed it first; what they wrote is read next time.
            Ok(false) => self.local().fetched_at = None,
            Err(e) => {
                warn!(error = %e, "could not write the breaker state");
                self.local().fetched_at = None;
                // The write may have landed with only its answer lost, and then nobody else
                // asks for its wake-ups: ask anyway. A run for a change that did not happen
                // costs a pass that finds nothing due; a missing one leaves whatever parks
                // behind the change to the schedule. (The simulator found it: seed 30316, a
                // reopening whose answer was lost.)
                for at in self.wake_ups_for(&next, now) {
                    self.wake_at(at, what).await;
                }
            }
        }
    }

    /// The reaper runs a change of the breaker to `next` at `now` asks for.
    fn wake_ups_for(&self, next: &BreakerState, now: Millis) -> Vec<Millis> {
        match next.phase {
            crate::domain::BreakerPhase::Open { until } => vec![until.plus(WAKE_AFTER)],
            // At once, and once more for the stragglers: a worker that saw the probe in flight
            // (from its cache, up to `instance_cache_ttl` old) may park its intent behind the
            // probe's lease just after the first run looked.
            crate::domain::BreakerPhase::Closed => vec![
                now,
                now.plus(self.timing.instance_cache_ttl + STRAGGLER_MARGIN),
            ],
            crate::domain::BreakerPhase::Probing { .. } => Vec::new(),
        }
    }

    /// When the breaker as last seen lets calls through again (`None`: it does now).
    pub async fn shut_until(&self) -> Option<Millis> {
        match self.state().await.gate(self.clock.now()) {
            Gate::Shut { until } => Some(until),
            Gate::Pass | Gate::Probe => None,
        }
    }

    /// When a call of `route` may be sent again, if the breaker or a pause keeps it back now
    /// (the later of the two).
    pub async fn blocked_until(&self, route: UpstreamRoute) -> Option<Millis> {
        match (self.shut_until().await, self.paused_until(route).await) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}

fn transition(to: &BreakerState) {
    metrics::count(
        Metric::BreakerTransitions,
        &[("phase", record::phase(&to.phase))],
        1,
    );
}

fn held_back(route: UpstreamRoute, permit: &Permit) {
    metrics::count(
        Metric::UpstreamHeldBack,
        &[("route", route.as_str()), ("by", permit.held_by())],
        1,
    );
}

/// The upstream behind the breaker and the pauses: what every service calls.
pub struct GuardedUpstream {
    inner: Arc<dyn Upstream>,
    breaker: Arc<Breaker>,
    clock: Arc<dyn Clock>,
    /// Where a reserve's probe records the seat reading it got (none: it is not shared).
    readings: Option<Arc<dyn Readings>>,
    /// The last reading a reserve's probe got, kept in memory until the store has it: this
    /// instance's seat-read cache serves it meanwhile ([`GuardedUpstream::probed`]).
    probed: Mutex<Option<Reading>>,
}

impl GuardedUpstream {
    pub fn new(inner: Arc<dyn Upstream>, breaker: Arc<Breaker>, clock: Arc<dyn Clock>) -> Self {
        GuardedUpstream {
            inner,
            breaker,
            clock,
            readings: None,
            probed: Mutex::new(None),
        }
    }

    /// The seat reading this instance's last reserve probe got, if it is `key`'s. The probe's
    /// write of it to the store may be refused and retried after a backoff, and until it lands
    /// this instance must not read the seat again: it knows the answer (the simulator's seeds
    /// 12310, 16231 and 56127: a throttled write, and the same instance's seat-read cache
    /// refreshing 5 to 81 ms later). The reading keeps the probe's time, so its age is true.
    pub fn probed(&self, key: &ReadKey) -> Option<Reading> {
        self.probed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .filter(|r| &r.key == key)
            .cloned()
    }

    /// Shares what a reserve's probe read of its seat in `readings`, as of the probe's start,
    /// unless a newer reading is there ([`Readings::record`]): the upstream was read once, and
    /// no instance should read that seat again within the read TTL.
    pub fn with_readings(mut self, readings: Arc<dyn Readings>) -> Self {
        self.readings = Some(readings);
        self
    }

    pub fn breaker(&self) -> &Arc<Breaker> {
        &self.breaker
    }

    /// Whether a reserve for `seat_id` may be sent now: `Err(t)`, not before `t`. When a probe
    /// is due and this instance wins it, the probe (a read of `seat_id`) is sent here.
    pub async fn ready(&self, seat_id: &SeatId) -> Result<(), Millis> {
        let permit = self
            .breaker
            .permit(UpstreamRoute::Reserve, UpstreamRoute::Seat)
            .await;
        match permit {
            Permit::Call => Ok(()),
            Permit::Refused(until) | Permit::Paused(until) => {
                held_back(UpstreamRoute::Reserve, &permit);
                Err(until)
            }
            Permit::Probe(_) => {
                let asked = self.clock.now();
                let result = self.inner.seat(seat_id).await;
                self.breaker
                    .settle(&permit, UpstreamRoute::Seat, Verdict::of_read(&result))
                    .await;
                if let (Ok(available), Some(readings)) = (&result, &self.readings) {
                    // Tried again on a refusal, as the seat-read cache's own writes are: a
                    // reading not shared costs the upstream a read (the simulator's seeds 299
                    // and 2153). A repeat is harmless: only a newer reading is recorded.
                    let reading = Reading::seat(seat_id.clone(), *available, asked);
                    *self.probed.lock().unwrap_or_else(PoisonError::into_inner) =
                        Some(reading.clone());
                    let shared = crate::service::with_retry(self.breaker.random.as_ref(), || {
                        readings.record(&reading)
                    })
                    .await;
                    if let Err(e) = shared {
                        warn!(seat_id = %seat_id, error = %e, "could not share the probe's reading");
                    }
                }
                match self.breaker.blocked_until(UpstreamRoute::Reserve).await {
                    Some(until) => Err(until),
                    None => Ok(()),
                }
            }
        }
    }

    fn until_as_delay(&self, until: Millis) -> Duration {
        until.since(self.clock.now())
    }

    /// One read-only call of `route` under the breaker and pauses (the call itself is the
    /// probe when one is due).
    async fn read<T, E>(
        &self,
        route: UpstreamRoute,
        call: impl std::future::Future<Output = Result<T, E>>,
        judge: impl Fn(&Result<T, E>) -> Verdict,
        not_sent: impl Fn(Millis) -> E,
    ) -> Result<T, E> {
        let permit = self.breaker.permit(route, route).await;
        if let Some(until) = permit.not_before() {
            held_back(route, &permit);
            return Err(not_sent(until));
        }
        let result = call.await;
        self.breaker.settle(&permit, route, judge(&result)).await;
        result
    }
}

#[async_trait]
impl Upstream for GuardedUpstream {
    async fn reserve(&self, credential: &Secret, seat_id: &SeatId) -> ReserveOutcome {
        if let Err(until) = self.ready(seat_id).await {
            return ReserveOutcome::Busy {
                retry_after: Some(self.until_as_delay(until)),
            };
        }
        let outcome = self.inner.reserve(credential, seat_id).await;
        metrics::count(
            Metric::ReservePosts,
            &[("outcome", outcome.as_outcome())],
            1,
        );
        self.breaker
            .settle(
                &Permit::Call,
                UpstreamRoute::Reserve,
                Verdict::of_reserve(&outcome),
            )
            .await;
        outcome
    }

    async fn current_charge(&self, credential: &Secret) -> Result<Option<Charge>, ChargeReadError> {
        self.read(
            UpstreamRoute::Charge,
            self.inner.current_charge(credential),
            Verdict::of_charge,
            ChargeReadError::HeldBack,
        )
        .await
    }

    async fn seat(&self, seat_id: &SeatId) -> Result<bool, ReadError> {
        self.read(
            UpstreamRoute::Seat,
            self.inner.seat(seat_id),
            Verdict::of_read,
            ReadError::HeldBack,
        )
        .await
    }

    async fn room(&self, room_id: &RoomId) -> Result<Vec<SeatAvailability>, ReadError> {
        self.read(
            UpstreamRoute::Room,
            self.inner.room(room_id),
            Verdict::of_read,
            ReadError::HeldBack,
        )
        .await
    }
}

#[cfg(test)]
mod tests;
