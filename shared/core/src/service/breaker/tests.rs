//! The breaker's unit tests, over a scripted upstream and an in-memory breaker store.

use super::*;
use crate::domain::BreakerPhase;
use crate::ports::StoreError;
use std::sync::atomic::{AtomicI64, Ordering};

/// The breaker and holds items in memory: the same compare-and-set on the generation, and
/// the same only-later rule for holds, as the adapters.
#[derive(Default)]
struct OneItem(Mutex<BreakerState>, Mutex<RoutePauses>);

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

    async fn pauses(&self) -> Result<RoutePauses, StoreError> {
        Ok(self.1.lock().unwrap().clone())
    }

    async fn pause(&self, route: UpstreamRoute, until: Millis) -> Result<bool, StoreError> {
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

fn guarded(upstream: Arc<Scripted>, store: Arc<OneItem>, clock: Arc<Manual>) -> GuardedUpstream {
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
        store.pauses().await.unwrap().until(UpstreamRoute::Seat),
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
        store.pauses().await.unwrap().until(UpstreamRoute::Seat),
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
    store.pause(UpstreamRoute::Seat, hold_end).await.unwrap();
    clock.advance(t.breaker_open_interval);
    g.breaker().local().pauses_fetched_at = None;
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
        .pause(UpstreamRoute::Reserve, reserve_end)
        .await
        .unwrap();
    g.breaker().local().pauses_fetched_at = None;
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
    Breaker::new(
        store,
        clock,
        Arc::new(crate::adapters::entropy::OsRandom),
        "i-test".into(),
        &Timing::fast(),
    )
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

/// The readings a reserve's probe shares, and nothing else of the seat-read cache's port; the
/// second field is how many writes to refuse first, as a store in a transaction conflict.
#[derive(Default)]
struct SharedReadings(Mutex<Vec<Reading>>, Mutex<u32>);

#[async_trait]
impl Readings for SharedReadings {
    async fn entry(
        &self,
        _: &crate::domain::ReadKey,
    ) -> Result<Option<crate::domain::CacheEntry>, StoreError> {
        unreachable!("a probe only records")
    }
    async fn entries(
        &self,
        _: &[crate::domain::ReadKey],
    ) -> Result<Vec<(crate::domain::ReadKey, crate::domain::CacheEntry)>, StoreError> {
        unreachable!("a probe only records")
    }
    async fn lease_refresh(
        &self,
        _: &crate::domain::ReadKey,
        _: &crate::domain::RefreshLease,
        _: Millis,
    ) -> Result<bool, StoreError> {
        unreachable!("a probe only records")
    }
    async fn record(&self, reading: &Reading) -> Result<bool, StoreError> {
        let mut refuse = self.1.lock().unwrap();
        if *refuse > 0 {
            *refuse -= 1;
            return Err(StoreError::TransactionConflict);
        }
        self.0.lock().unwrap().push(reading.clone());
        Ok(true)
    }
    async fn record_failure(
        &self,
        _: &crate::domain::ReadKey,
        _: &crate::domain::ReadFailure,
    ) -> Result<bool, StoreError> {
        unreachable!("a probe only records")
    }
}

/// A reserve's probe reads its seat once; that reading is shared, as of the probe's start, so
/// the fleet's seat-read cache serves it instead of reading the seat again (found by the
/// simulator's reads checker, seed 250: a seat read 52 ms after the probe read the same seat).
/// A write of it the store refuses is tried again (seeds 299 and 2153: the one attempt met a
/// transaction conflict and the seat was read again 62 and 317 ms later). A failed probe
/// shares nothing.
#[tokio::test]
async fn a_reserves_probe_shares_the_seat_reading_it_got() {
    let (store, clock) = (
        Arc::new(OneItem::default()),
        Arc::new(Manual(AtomicI64::new(1_000))),
    );
    let t = Timing::fast();
    let seat = SeatId::parse("A-1").unwrap();
    let up = Scripted::new(Err(ReadError::Failed(crate::ports::CallFailure::Timeout)));
    let readings = Arc::new(SharedReadings::default());
    let g = guarded(up.clone(), store.clone(), clock.clone()).with_readings(readings.clone());
    for _ in 0..3 {
        assert!(g.seat(&seat).await.is_err());
    }
    assert!(!store.breaker().await.unwrap().is_closed());
    clock.advance(t.breaker_open_interval);
    // A probe that fails reopens the breaker and shares nothing.
    assert!(g.ready(&seat).await.is_err());
    assert!(readings.0.lock().unwrap().is_empty());
    let key = crate::domain::ReadKey::Seat(seat.clone());
    assert_eq!(g.probed(&key), None, "a failed probe holds no reading");
    clock.advance(t.breaker_open_interval);
    *up.answer.lock().unwrap() = Ok(false);
    *readings.1.lock().unwrap() = 2;
    let asked = clock.now();
    assert_eq!(g.ready(&seat).await, Ok(()));
    assert!(store.breaker().await.unwrap().is_closed());
    assert_eq!(
        *readings.0.lock().unwrap(),
        vec![Reading::seat(seat.clone(), false, asked)]
    );
    // Held in memory too, for this instance's seat-read cache while the write is retried
    // (seeds 12310, 16231, 56127), and only for the seat it read.
    assert_eq!(
        g.probed(&key),
        Some(Reading::seat(seat.clone(), false, asked))
    );
    let other = crate::domain::ReadKey::Seat(SeatId::parse("B-2").unwrap());
    assert_eq!(g.probed(&other), None);
    // Seat reads through the guard itself are the seat-read cache's to share, not the guard's.
    let calls = up.calls();
    assert_eq!(g.seat(&seat).await, Ok(false));
    assert_eq!(up.calls(), calls + 1);
    assert_eq!(readings.0.lock().unwrap().len(), 1);
}

/// The wake-ups asked for, in order.
#[derive(Default)]
struct Asked(Mutex<Vec<Millis>>);

#[async_trait]
impl WakeUps for Asked {
    async fn wake_at(&self, at: Millis) -> Result<(), crate::ports::QueueError> {
        self.0.lock().unwrap().push(at);
        Ok(())
    }
}

#[tokio::test]
async fn only_the_instance_that_changes_the_breaker_or_a_hold_asks_for_a_wake_up() {
    let (store, clock) = (
        Arc::new(OneItem::default()),
        Arc::new(Manual(AtomicI64::new(1_000))),
    );
    let t = Timing::fast();
    let asked = Arc::new(Asked::default());
    let instance = |name: &str| {
        let wake_ups: Arc<dyn WakeUps> = asked.clone();
        let b = Breaker::new(
            store.clone(),
            clock.clone(),
            Arc::new(crate::adapters::entropy::OsRandom),
            name.into(),
            &t,
        )
        .with_wake_ups(Some(wake_ups));
        let up = Scripted::new(Err(ReadError::Failed(crate::ports::CallFailure::Timeout)));
        (
            GuardedUpstream::new(up.clone(), Arc::new(b), clock.clone()),
            up,
        )
    };
    let ((a, up_a), (b, up_b)) = (instance("a"), instance("b"));
    let seat = SeatId::parse("A-1").unwrap();
    for _ in 0..3 {
        assert!(a.seat(&seat).await.is_err());
    }
    // Asked a little after the time it is for, so a wake run on an instance whose clock is
    // behind the asker's still finds the probe and the parked intents due.
    let first_until = clock.now().plus(t.breaker_open_interval + WAKE_AFTER);
    assert_eq!(
        *asked.0.lock().unwrap(),
        vec![first_until],
        "opened: a run just after the probe time"
    );
    // The other instance fails as often, but finds it open: it changes nothing, asks nothing.
    for _ in 0..3 {
        let _ = b.seat(&seat).await;
    }
    b.breaker().local().fetched_at = None;
    assert_eq!(asked.0.lock().unwrap().len(), 1);
    // At the probe time the probe fails: reopened, a run at the next probe time.
    clock.advance(t.breaker_open_interval);
    assert!(a.ready(&seat).await.is_err());
    let second_until = clock.now().plus(t.breaker_open_interval + WAKE_AFTER);
    assert_eq!(*asked.0.lock().unwrap(), vec![first_until, second_until]);
    // Then a probe finds the upstream back: closed, a run at once, and one for the workers
    // that saw the probe in flight and park just after the first run looked.
    clock.advance(t.breaker_open_interval);
    *up_b.answer.lock().unwrap() = Ok(true);
    b.breaker().local().fetched_at = None;
    assert_eq!(b.ready(&seat).await, Ok(()));
    assert!(store.breaker().await.unwrap().is_closed());
    let closed_at = clock.now();
    let stragglers = closed_at.plus(t.instance_cache_ttl + Duration::from_secs(1));
    assert_eq!(
        *asked.0.lock().unwrap(),
        vec![first_until, second_until, closed_at, stragglers]
    );
    // A Retry-After held: a run at its end; a shorter one changes nothing and asks nothing.
    *up_a.answer.lock().unwrap() = Err(ReadError::Busy {
        retry_after: Some(Duration::from_secs(2)),
    });
    a.breaker().local().fetched_at = None;
    assert!(a.seat(&seat).await.is_err());
    let hold_end = clock.now().plus(Duration::from_secs(2) + WAKE_AFTER);
    assert_eq!(asked.0.lock().unwrap().last(), Some(&hold_end));
    b.breaker()
        .pause(UpstreamRoute::Seat, Duration::from_secs(1))
        .await;
    assert_eq!(
        asked.0.lock().unwrap().len(),
        5,
        "{:?}",
        asked.0.lock().unwrap()
    );
}
