//! The circuit breaker in front of every upstream call, the `Retry-After` holds beside it, and
//! the upstream they guard.
//!
//! [`Breaker`] keeps the shared state ([`BreakerState`], one store item) cached for
//! `instance_cache_ttl` (an open state until its own `until`, since nothing but a probe after
//! that time can change it), the routes' holds ([`RouteHolds`], one store item) cached as long,
//! and this instance's own record of call outcomes, which decides when to open.
//! [`GuardedUpstream`] is the [`Upstream`] every service is given: while the breaker is open, or
//! the call's route is held, it sends nothing and answers at once (a busy reserve, a read or
//! charge read held back, each saying until when); when a probe is due, the one instance whose
//! compare-and-set wins sends it. A reserve's probe is a read of the same seat, never the write:
//! a write sent to an upstream that may still be failing could only add an unknown outcome.
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
//! so that route is held fleet-wide until then (capped at `retry_after_max`), one conditional
//! write that only ever moves the hold later. Before a call is sent the holds item is read
//! afresh (a known hold is trusted until it ends), so no instance sends into a `Retry-After`
//! another was given, but for calls already on their way when it was given. A probe answered that way still reopens the
//! breaker: the probe's job is to find the upstream well.
//!
//! Each reserve the breaker lets through is a [`Metric::ReservePosts`], each phase change this
//! instance wins a [`Metric::BreakerTransitions`], each hold it writes a
//! [`Metric::UpstreamHolds`], and each call it keeps back a [`Metric::UpstreamHeldBack`]: counted
//! here because only here is it known that a POST was really sent, that this instance's write
//! changed the shared phase, or that a call was not made.

use crate::config::Timing;
use crate::domain::{
    BreakerState, Gate, Millis, RoomId, RouteHolds, SeatAvailability, SeatId, Secret, UpstreamRoute,
};
use crate::metrics::{self, Metric, record};
use crate::ports::{
    BreakerStates, Charge, ChargeReadError, Clock, ReadError, ReserveOutcome, Upstream,
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
    /// A `Retry-After` holds the route: send nothing before this time.
    Held(Millis),
}

impl Permit {
    /// When a call may be sent, if this permit sends none.
    fn not_before(&self) -> Option<Millis> {
        match self {
            Permit::Refused(until) | Permit::Held(until) => Some(*until),
            Permit::Call | Permit::Probe(_) => None,
        }
    }

    /// The `by` of [`Metric::UpstreamHeldBack`].
    fn held_by(&self) -> &'static str {
        match self {
            Permit::Held(_) => "hold",
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
    /// Busy, and it said when to come back: the route is held until then.
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
    holds: RouteHolds,
    /// When `holds` was read or written by this instance; `None`: read them again.
    holds_fetched_at: Option<Millis>,
}

/// The shared breaker and holds, as seen by one instance. Cheap to share (`Arc`).
pub struct Breaker {
    store: Arc<dyn BreakerStates>,
    clock: Arc<dyn Clock>,
    timing: Timing,
    /// This instance, in probe leases.
    holder: String,
    local: Mutex<Local>,
}

impl Breaker {
    /// `holder` names this instance in probe leases; it must be unique among the instances
    /// sharing the store (the services take it from their `Ids` port).
    pub fn new(
        store: Arc<dyn BreakerStates>,
        clock: Arc<dyn Clock>,
        holder: String,
        timing: &Timing,
    ) -> Self {
        Breaker {
            store,
            clock,
            timing: timing.clone(),
            holder,
            local: Mutex::new(Local {
                state: BreakerState::closed(),
                fetched_at: None,
                window: VecDeque::new(),
                consecutive_failures: 0,
                holds: RouteHolds::default(),
                holds_fetched_at: None,
            }),
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

    /// The routes' holds, from the in-process copy for `instance_cache_ttl`. A store that
    /// cannot be read leaves the last known holds in force.
    pub async fn holds(&self) -> RouteHolds {
        let now = self.clock.now();
        {
            let local = self.local();
            if local
                .holds_fetched_at
                .is_some_and(|at| now < at.plus(self.timing.instance_cache_ttl))
            {
                return local.holds.clone();
            }
        }
        match self.store.holds().await {
            Ok(holds) => {
                let mut local = self.local();
                // A hold this instance set (even one the store did not take) stays in force here.
                let merged = local
                    .holds
                    .0
                    .iter()
                    .fold(holds, |acc, (route, until)| acc.extended(*route, *until));
                local.holds = merged.clone();
                local.holds_fetched_at = Some(now);
                merged
            }
            Err(e) => {
                warn!(error = %e, "upstream holds unreadable; keeping the last known");
                self.local().holds.clone()
            }
        }
    }

    /// When `route` may be called again, if a hold keeps it back now (as last read: at most
    /// `instance_cache_ttl` old).
    pub async fn held_until(&self, route: UpstreamRoute) -> Option<Millis> {
        self.holds().await.held_until(route, self.clock.now())
    }

    /// The same, for a call about to be sent: a hold this instance knows of is trusted until
    /// its end, but "not held" is asked of the store again, since another instance may have
    /// been told to wait a moment ago. One item read per upstream call sent, which is cheap
    /// beside the call it may spare an upstream that asked to be left alone; with the cached
    /// copy alone every instance could send `instance_cache_ttl` worth of calls into it.
    async fn held_now(&self, route: UpstreamRoute) -> Option<Millis> {
        let now = self.clock.now();
        {
            let mut local = self.local();
            if let Some(until) = local.holds.held_until(route, now) {
                return Some(until);
            }
            local.holds_fetched_at = None;
        }
        self.held_until(route).await
    }

    /// Holds `route` for the `retry_after` the upstream gave (at most `retry_after_max`), for
    /// every instance. A store that cannot take it still holds this instance.
    pub async fn hold(&self, route: UpstreamRoute, retry_after: Duration) {
        let now = self.clock.now();
        let until = now.plus(retry_after.min(self.timing.retry_after_max));
        {
            let mut local = self.local();
            local.holds = local.holds.extended(route, until);
        }
        match self.store.hold(route, until).await {
            Ok(true) => {
                info!(
                    route = route.as_str(),
                    retry_after_ms = retry_after.as_millis() as u64,
                    "upstream asked to wait: route held"
                );
                metrics::count(Metric::UpstreamHolds, &[("route", route.as_str())], 1);
            }
            // A hold as long or longer is stored: read it next time.
            Ok(false) => self.local().holds_fetched_at = None,
            Err(e) => warn!(error = %e, route = route.as_str(), "could not write the hold"),
        }
    }

    /// Whether a call of `route` may be sent now. `probe_route` is the route the probe would
    /// be sent on when one is due (a reserve probes with a seat read); a held route is not
    /// probed.
    pub async fn permit(&self, route: UpstreamRoute, probe_route: UpstreamRoute) -> Permit {
        if let Some(until) = self.held_now(route).await {
            return Permit::Held(until);
        }
        let state = self.state().await;
        let now = self.clock.now();
        match state.gate(now) {
            Gate::Pass => Permit::Call,
            Gate::Shut { until } => Permit::Refused(until),
            Gate::Probe => {
                if let Some(until) = self.held_now(probe_route).await {
                    return Permit::Held(until);
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

    /// Records how a call sent under `permit` on `route` went: a hold for a busy answer that
    /// said when, and the outcome for the breaker.
    pub async fn settle(&self, permit: &Permit, route: UpstreamRoute, verdict: Verdict) {
        match verdict {
            Verdict::Healthy => self.record(permit, false).await,
            Verdict::Failed => self.record(permit, true).await,
            Verdict::BusyFor(retry_after) => {
                self.hold(route, retry_after).await;
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
            Permit::Refused(_) | Permit::Held(_) => {}
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
                self.remember(next, now);
            }
            // Someone else changed it first; what they wrote is read next time.
            Ok(false) => self.local().fetched_at = None,
            Err(e) => {
                warn!(error = %e, "could not write the breaker state");
                self.local().fetched_at = None;
            }
        }
    }

    /// When the breaker as last seen lets calls through again (`None`: it does now).
    pub async fn shut_until(&self) -> Option<Millis> {
        match self.state().await.gate(self.clock.now()) {
            Gate::Shut { until } => Some(until),
            Gate::Pass | Gate::Probe => None,
        }
    }

    /// When a call of `route` may be sent again, if the breaker or a hold keeps it back now
    /// (the later of the two).
    pub async fn blocked_until(&self, route: UpstreamRoute) -> Option<Millis> {
        match (self.shut_until().await, self.held_until(route).await) {
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

/// The upstream behind the breaker and the holds: what every service calls.
pub struct GuardedUpstream {
    inner: Arc<dyn Upstream>,
    breaker: Arc<Breaker>,
    clock: Arc<dyn Clock>,
}

impl GuardedUpstream {
    pub fn new(inner: Arc<dyn Upstream>, breaker: Arc<Breaker>, clock: Arc<dyn Clock>) -> Self {
        GuardedUpstream {
            inner,
            breaker,
            clock,
        }
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
            Permit::Refused(until) | Permit::Held(until) => {
                held_back(UpstreamRoute::Reserve, &permit);
                Err(until)
            }
            Permit::Probe(_) => {
                let result = self.inner.seat(seat_id).await;
                self.breaker
                    .settle(&permit, UpstreamRoute::Seat, Verdict::of_read(&result))
                    .await;
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

    /// One read-only call of `route` under the breaker and holds (the call itself is the
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
mod tests {
    use super::*;
    use crate::domain::BreakerPhase;
    use crate::ports::StoreError;
    use std::sync::atomic::{AtomicI64, Ordering};

    /// The breaker and holds items in memory: the same compare-and-set on the generation, and
    /// the same only-later rule for holds, as the adapters.
    #[derive(Default)]
    struct OneItem(Mutex<BreakerState>, Mutex<RouteHolds>);

    #[async_trait]
    impl BreakerStates for OneItem {
        async fn breaker(&self) -> Result<BreakerState, StoreError> {
            Ok(self.0.lock().unwrap().clone())
        }

        async fn swap_breaker(&self, next: &BreakerState) -> Result<bool, StoreError> {
            let mut item = self.0.lock().unwrap();
            if item.generation + 1 != next.generation {
                return Ok(false);
            }
            *item = next.clone();
            Ok(true)
        }

        async fn holds(&self) -> Result<RouteHolds, StoreError> {
            Ok(self.1.lock().unwrap().clone())
        }

        async fn hold(&self, route: UpstreamRoute, until: Millis) -> Result<bool, StoreError> {
            let mut holds = self.1.lock().unwrap();
            if !holds.may_extend(route, until) {
                return Ok(false);
            }
            *holds = holds.extended(route, until);
            Ok(true)
        }
    }

    /// An upstream whose every seat read answers as told, counting the calls that reach it.
    struct Scripted {
        answer: Mutex<Result<bool, ReadError>>,
        calls: std::sync::atomic::AtomicU32,
    }

    impl Scripted {
        fn new(answer: Result<bool, ReadError>) -> Arc<Self> {
            Arc::new(Scripted {
                answer: Mutex::new(answer),
                calls: Default::default(),
            })
        }

        fn calls(&self) -> u32 {
            self.calls.load(Ordering::SeqCst)
        }
    }

    #[async_trait]
    impl Upstream for Scripted {
        async fn reserve(&self, _: &Secret, _: &SeatId) -> ReserveOutcome {
            self.calls.fetch_add(1, Ordering::SeqCst);
            ReserveOutcome::SeatTaken
        }
        async fn current_charge(&self, _: &Secret) -> Result<Option<Charge>, ChargeReadError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            Ok(None)
        }
        async fn seat(&self, _: &SeatId) -> Result<bool, ReadError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.answer.lock().unwrap().clone()
        }
        async fn room(&self, _: &RoomId) -> Result<Vec<SeatAvailability>, ReadError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            Err(ReadError::NoSuchRoom)
        }
    }

    fn guarded(
        upstream: Arc<Scripted>,
        store: Arc<OneItem>,
        clock: Arc<Manual>,
    ) -> GuardedUpstream {
        let b = Arc::new(breaker(store, clock.clone()));
        GuardedUpstream::new(upstream, b, clock)
    }

    #[tokio::test]
    async fn three_failures_in_a_row_open_it_even_after_healthy_traffic() {
        let (store, clock) = (
            Arc::new(OneItem::default()),
            Arc::new(Manual(AtomicI64::new(1_000))),
        );
        let b = breaker(store.clone(), clock.clone());
        let t = Timing::fast();
        // A window full of healthy calls: the rate alone would need as many failures again.
        for _ in 0..50 {
            b.record(&Permit::Call, false).await;
        }
        // Two failures, a healthy answer, two more: never three in a row, the rate far below.
        for failed in [true, true, false, true, true] {
            b.record(&Permit::Call, failed).await;
        }
        assert!(store.breaker().await.unwrap().is_closed());
        b.record(&Permit::Call, true).await;
        assert_eq!(
            store.breaker().await.unwrap().phase,
            BreakerPhase::Open {
                until: clock.now().plus(t.breaker_open_interval)
            },
            "the third failure in a row opens it"
        );
    }

    #[tokio::test]
    async fn a_retry_after_holds_the_route_for_every_instance_and_is_not_a_failure() {
        let (store, clock) = (
            Arc::new(OneItem::default()),
            Arc::new(Manual(AtomicI64::new(1_000))),
        );
        let t = Timing::fast();
        let seat = SeatId::parse("A-1").unwrap();
        let up = Scripted::new(Err(ReadError::Busy {
            retry_after: Some(Duration::from_secs(1)),
        }));
        let (a, b) = (
            guarded(up.clone(), store.clone(), clock.clone()),
            guarded(up.clone(), store.clone(), clock.clone()),
        );
        assert!(matches!(a.seat(&seat).await, Err(ReadError::Busy { .. })));
        assert_eq!(up.calls(), 1);
        let until = clock.now().plus(Duration::from_secs(1));
        assert_eq!(
            store.holds().await.unwrap().until(UpstreamRoute::Seat),
            Some(until)
        );
        // Both instances keep every seat read back until then; other routes are free.
        for g in [&a, &b] {
            for _ in 0..5 {
                assert_eq!(g.seat(&seat).await, Err(ReadError::HeldBack(until)));
            }
        }
        assert_eq!(up.calls(), 1, "nothing sent while held");
        assert!(b.current_charge(&Secret::new("c")).await.is_ok());
        assert_eq!(up.calls(), 2);
        assert!(store.breaker().await.unwrap().is_closed(), "not a failure");
        // Once it passes, the next read goes out; a huge Retry-After is capped.
        clock.advance(Duration::from_secs(1));
        *up.answer.lock().unwrap() = Err(ReadError::Busy {
            retry_after: Some(Duration::from_secs(3_600)),
        });
        assert!(b.seat(&seat).await.is_err());
        assert_eq!(up.calls(), 3);
        assert_eq!(
            store.holds().await.unwrap().until(UpstreamRoute::Seat),
            Some(clock.now().plus(t.retry_after_max))
        );
        // Busy without a time is a failure: three of them open the breaker.
        clock.advance(t.retry_after_max);
        *up.answer.lock().unwrap() = Err(ReadError::Busy { retry_after: None });
        for _ in 0..3 {
            assert!(a.seat(&seat).await.is_err());
        }
        assert!(!store.breaker().await.unwrap().is_closed());
    }

    #[tokio::test]
    async fn a_held_route_is_not_probed_and_a_reserve_waits_for_its_own_hold() {
        let (store, clock) = (
            Arc::new(OneItem::default()),
            Arc::new(Manual(AtomicI64::new(1_000))),
        );
        let t = Timing::fast();
        let seat = SeatId::parse("A-1").unwrap();
        let up = Scripted::new(Err(ReadError::Failed(crate::ports::CallFailure::Timeout)));
        let g = guarded(up.clone(), store.clone(), clock.clone());
        for _ in 0..3 {
            assert!(g.seat(&seat).await.is_err());
        }
        assert!(!store.breaker().await.unwrap().is_closed());
        // The probe is due, but seat reads are held longer: nobody probes until the hold ends.
        let hold_end = clock.now().plus(t.breaker_open_interval * 2);
        store.hold(UpstreamRoute::Seat, hold_end).await.unwrap();
        clock.advance(t.breaker_open_interval);
        g.breaker().local().holds_fetched_at = None;
        assert_eq!(g.ready(&seat).await, Err(hold_end));
        assert_eq!(up.calls(), 3);
        assert!(!matches!(
            store.breaker().await.unwrap().phase,
            BreakerPhase::Probing { .. }
        ));
        // After it, the probe (a seat read) goes out and closes the breaker.
        clock.advance(t.breaker_open_interval);
        *up.answer.lock().unwrap() = Ok(true);
        assert_eq!(g.ready(&seat).await, Ok(()));
        assert_eq!(up.calls(), 4);
        assert!(store.breaker().await.unwrap().is_closed());
        // A hold on reserves keeps the reserve back, the breaker closed or not.
        let reserve_end = clock.now().plus(Duration::from_millis(500));
        store
            .hold(UpstreamRoute::Reserve, reserve_end)
            .await
            .unwrap();
        g.breaker().local().holds_fetched_at = None;
        assert_eq!(
            g.reserve(&Secret::new("c"), &seat).await,
            ReserveOutcome::Busy {
                retry_after: Some(Duration::from_millis(500))
            }
        );
        assert_eq!(up.calls(), 4);
    }

    struct Manual(AtomicI64);

    impl Clock for Manual {
        fn now(&self) -> Millis {
            Millis(self.0.load(Ordering::SeqCst))
        }
    }

    impl Manual {
        fn advance(&self, d: Duration) {
            self.0.fetch_add(d.as_millis() as i64, Ordering::SeqCst);
        }
    }

    fn breaker(store: Arc<OneItem>, clock: Arc<Manual>) -> Breaker {
        Breaker::new(store, clock, "i-test".into(), &Timing::fast())
    }

    #[tokio::test]
    async fn it_opens_on_the_failure_rate_of_enough_calls_only() {
        let (store, clock) = (
            Arc::new(OneItem::default()),
            Arc::new(Manual(AtomicI64::new(1_000))),
        );
        let b = breaker(store.clone(), clock.clone());
        let t = Timing::fast();
        // Fewer calls than the minimum, all failing: still closed.
        for _ in 1..t.breaker_min_calls {
            b.record(&Permit::Call, true).await;
        }
        assert!(store.breaker().await.unwrap().is_closed());
        // Mostly successes: under the rate, still closed.
        for _ in 0..10 {
            b.record(&Permit::Call, false).await;
        }
        b.record(&Permit::Call, true).await;
        assert!(store.breaker().await.unwrap().is_closed());
        // Past the window the old calls no longer count; three fresh failures open it.
        clock.advance(t.breaker_window + Duration::from_millis(1));
        for _ in 0..t.breaker_min_calls {
            b.record(&Permit::Call, true).await;
        }
        let open = store.breaker().await.unwrap();
        assert_eq!(
            open.phase,
            BreakerPhase::Open {
                until: clock.now().plus(t.breaker_open_interval)
            }
        );
        assert_eq!(
            b.permit(UpstreamRoute::Seat, UpstreamRoute::Seat).await,
            Permit::Refused(clock.now().plus(t.breaker_open_interval))
        );
    }

    #[tokio::test]
    async fn one_of_two_instances_probes_and_its_success_closes_for_both() {
        let (store, clock) = (
            Arc::new(OneItem::default()),
            Arc::new(Manual(AtomicI64::new(1_000))),
        );
        let (a, b) = (
            breaker(store.clone(), clock.clone()),
            breaker(store.clone(), clock.clone()),
        );
        let t = Timing::fast();
        for _ in 0..t.breaker_min_calls {
            a.record(&Permit::Call, true).await;
        }
        clock.advance(t.instance_cache_ttl);
        assert!(
            matches!(
                b.permit(UpstreamRoute::Seat, UpstreamRoute::Seat).await,
                Permit::Refused(_)
            ),
            "b sees it open"
        );
        clock.advance(t.breaker_open_interval);
        let pa = a.permit(UpstreamRoute::Seat, UpstreamRoute::Seat).await;
        let pb = b.permit(UpstreamRoute::Seat, UpstreamRoute::Seat).await;
        assert!(matches!(pa, Permit::Probe(_)), "{pa:?}");
        assert!(matches!(pb, Permit::Refused(_)), "only one probe: {pb:?}");
        a.record(&pa, false).await;
        assert!(store.breaker().await.unwrap().is_closed());
        clock.advance(t.instance_cache_ttl);
        assert_eq!(
            b.permit(UpstreamRoute::Seat, UpstreamRoute::Seat).await,
            Permit::Call
        );
        // The old failures were before the close: one more failure does not reopen it.
        a.record(&Permit::Call, true).await;
        assert!(store.breaker().await.unwrap().is_closed());
    }

    #[tokio::test]
    async fn a_prober_that_never_answers_is_replaced_after_its_lease() {
        let (store, clock) = (
            Arc::new(OneItem::default()),
            Arc::new(Manual(AtomicI64::new(1_000))),
        );
        let (a, b) = (
            breaker(store.clone(), clock.clone()),
            breaker(store.clone(), clock.clone()),
        );
        let t = Timing::fast();
        for _ in 0..t.breaker_min_calls {
            a.record(&Permit::Call, true).await;
        }
        clock.advance(t.breaker_open_interval);
        assert!(matches!(
            a.permit(UpstreamRoute::Seat, UpstreamRoute::Seat).await,
            Permit::Probe(_)
        ));
        // a dies mid-probe. Until its lease ends nobody calls; then b probes.
        clock.advance(t.instance_cache_ttl);
        assert!(matches!(
            b.permit(UpstreamRoute::Seat, UpstreamRoute::Seat).await,
            Permit::Refused(_)
        ));
        clock.advance(t.upstream_call_lease());
        let pb = b.permit(UpstreamRoute::Seat, UpstreamRoute::Seat).await;
        assert!(matches!(pb, Permit::Probe(_)), "{pb:?}");
        b.record(&pb, true).await;
        assert!(matches!(
            store.breaker().await.unwrap().phase,
            BreakerPhase::Open { .. }
        ));
    }
}
