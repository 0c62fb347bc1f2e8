//! The circuit breaker in front of every upstream call, and the upstream it guards.
//!
//! [`Breaker`] keeps the shared state ([`BreakerState`], one store item) cached for
//! `instance_cache_ttl` (an open state until its own `until`, since nothing but a probe after
//! that time can change it), and this instance's own window of call outcomes, which decides when
//! to open. [`GuardedUpstream`] is the [`Upstream`] every service is given: while the breaker is
//! open it sends nothing and answers at once (a busy reserve, an unreadable charge, an
//! unavailable read, each saying until when); when a probe is due, the one instance whose
//! compare-and-set wins sends it. A reserve's probe is a read of the same seat, never the write:
//! a write sent to an upstream that may still be failing could only add an unknown outcome.
//!
//! Which answers count as failures: the ones that say the upstream is unwell (5xx, 429,
//! timeouts, a lost or undecodable answer). A definite answer (seat taken, no charge, a refused
//! credential) is the upstream working.
//!
//! Each reserve the breaker lets through is a [`Metric::ReservePosts`], and each phase change
//! this instance wins is a [`Metric::BreakerTransitions`]: counted here because only here is it
//! known that a POST was really sent, or that this instance's write changed the shared phase.

use crate::adapters::upstream_http::reserve_outcome;
use crate::config::Timing;
use crate::domain::{BreakerState, Gate, Millis, RoomId, SeatAvailability, SeatId, Secret};
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
    /// Send nothing before this time.
    Refused(Millis),
}

struct Local {
    state: BreakerState,
    /// When `state` was read or written by this instance; `None`: never.
    fetched_at: Option<Millis>,
    /// This instance's recent call outcomes (time, failed), oldest first.
    window: VecDeque<(Millis, bool)>,
}

/// The shared breaker, as seen by one instance. Cheap to share (`Arc`).
pub struct Breaker {
    store: Arc<dyn BreakerStates>,
    clock: Arc<dyn Clock>,
    timing: Timing,
    /// This instance, in probe leases.
    holder: String,
    local: Mutex<Local>,
}

impl Breaker {
    pub fn new(store: Arc<dyn BreakerStates>, clock: Arc<dyn Clock>, timing: &Timing) -> Self {
        Breaker {
            store,
            clock,
            timing: timing.clone(),
            holder: format!("i-{}", uuid::Uuid::new_v4().simple()),
            local: Mutex::new(Local {
                state: BreakerState::closed(),
                fetched_at: None,
                window: VecDeque::new(),
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
                // A new closed phase starts a new window: failures from before the probe that
                // closed it must not reopen it.
                local.window.clear();
            }
            local.state = state;
        }
        local.fetched_at = Some(now);
        local.state.clone()
    }

    /// Whether a call may be sent now.
    pub async fn permit(&self) -> Permit {
        let state = self.state().await;
        let now = self.clock.now();
        match state.gate(now) {
            Gate::Pass => Permit::Call,
            Gate::Shut { until } => Permit::Refused(until),
            Gate::Probe => {
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

    /// Records the outcome of a call sent under `permit` (`failed`: the upstream was unwell).
    pub async fn record(&self, permit: &Permit, failed: bool) {
        let now = self.clock.now();
        match permit {
            Permit::Refused(_) => {}
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
                    let calls = local.window.len() as u64;
                    let failures = local.window.iter().filter(|(_, f)| *f).count() as u64;
                    let tripped = failed
                        && calls >= u64::from(self.timing.breaker_min_calls)
                        && failures * 100 >= calls * u64::from(self.timing.breaker_failure_percent);
                    (tripped && local.state.is_closed()).then(|| {
                        warn!(calls, failures, "upstream failure rate over the threshold");
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
}

fn transition(to: &BreakerState) {
    metrics::count(
        Metric::BreakerTransitions,
        &[("phase", record::phase(&to.phase))],
        1,
    );
}

/// The upstream behind the breaker: what every service calls.
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

    /// Whether calls for `seat_id` may be sent now: `Err(t)`, not before `t`. When a probe is
    /// due and this instance wins it, the probe (a read of `seat_id`) is sent here.
    pub async fn ready(&self, seat_id: &SeatId) -> Result<(), Millis> {
        match self.breaker.permit().await {
            Permit::Call => Ok(()),
            Permit::Refused(until) => Err(until),
            probe @ Permit::Probe(_) => {
                let failed = self.inner.seat(seat_id).await.is_err();
                self.breaker.record(&probe, failed).await;
                match self.breaker.shut_until().await {
                    Some(until) => Err(until),
                    None => Ok(()),
                }
            }
        }
    }

    fn until_as_delay(&self, until: Millis) -> Duration {
        until.since(self.clock.now())
    }

    /// One read-only call under the breaker (the call itself is the probe when one is due).
    async fn read<T, E>(
        &self,
        call: impl std::future::Future<Output = Result<T, E>>,
        failed: impl Fn(&E) -> bool,
        shut: impl Fn(Millis) -> E,
    ) -> Result<T, E> {
        let permit = self.breaker.permit().await;
        if let Permit::Refused(until) = permit {
            return Err(shut(until));
        }
        let result = call.await;
        let failure = result.as_ref().err().is_some_and(&failed);
        self.breaker.record(&permit, failure).await;
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
            &[("outcome", reserve_outcome(&outcome))],
            1,
        );
        let failed = matches!(
            outcome,
            ReserveOutcome::Busy { .. } | ReserveOutcome::Unknown(_)
        );
        self.breaker.record(&Permit::Call, failed).await;
        outcome
    }

    async fn current_charge(&self, credential: &Secret) -> Result<Option<Charge>, ChargeReadError> {
        self.read(
            self.inner.current_charge(credential),
            |e| matches!(e, ChargeReadError::Unavailable(_)),
            ChargeReadError::CircuitOpen,
        )
        .await
    }

    async fn seat(&self, seat_id: &SeatId) -> Result<bool, ReadError> {
        self.read(
            self.inner.seat(seat_id),
            |e| matches!(e, ReadError::Unavailable(_)),
            ReadError::CircuitOpen,
        )
        .await
    }

    async fn room(&self, room_id: &RoomId) -> Result<Vec<SeatAvailability>, ReadError> {
        self.read(
            self.inner.room(room_id),
            |e| matches!(e, ReadError::Unavailable(_)),
            ReadError::CircuitOpen,
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

    /// The breaker item in memory: the same compare-and-set on the generation as the adapters.
    #[derive(Default)]
    struct OneItem(Mutex<BreakerState>);

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
        Breaker::new(store, clock, &Timing::fast())
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
            b.permit().await,
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
            matches!(b.permit().await, Permit::Refused(_)),
            "b sees it open"
        );
        clock.advance(t.breaker_open_interval);
        let pa = a.permit().await;
        let pb = b.permit().await;
        assert!(matches!(pa, Permit::Probe(_)), "{pa:?}");
        assert!(matches!(pb, Permit::Refused(_)), "only one probe: {pb:?}");
        a.record(&pa, false).await;
        assert!(store.breaker().await.unwrap().is_closed());
        clock.advance(t.instance_cache_ttl);
        assert_eq!(b.permit().await, Permit::Call);
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
        assert!(matches!(a.permit().await, Permit::Probe(_)));
        // a dies mid-probe. Until its lease ends nobody calls; then b probes.
        clock.advance(t.instance_cache_ttl);
        assert!(matches!(b.permit().await, Permit::Refused(_)));
        clock.advance(t.upstream_call_lease());
        let pb = b.permit().await;
        assert!(matches!(pb, Permit::Probe(_)), "{pb:?}");
        b.record(&pb, true).await;
        assert!(matches!(
            store.breaker().await.unwrap().phase,
            BreakerPhase::Open { .. }
        ));
    }
}
