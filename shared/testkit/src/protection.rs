//! The upstream's protections across instances, written once and run on every backend: single-
//! flight seat reads, stale serving while one instance refreshes, a cancelled leader, and the
//! shared breaker's one probe.
//!
//! A [`Fleet`] is several instances, each its own [`Services`] (so its own in-process cache and
//! breaker copy) over its own handle on one store, which is how Lambda instances on one table
//! (or runner processes on one file) see each other: through the store only. Real time and
//! `Timing::fast()` (300 ms open interval) with a 1 s read TTL, because the in-process cache
//! expires by the wall clock: the TTL leaves a slow refresh room to come back fresh on a loaded
//! machine, and a case that asserts one instance did not wait for another has the margin to
//! tell the two apart. [`protection_contract!`](crate::protection_contract) expands to one
//! test per case.

use crate::setup;
use seatgate::adapters::clock::SystemClock;
use seatgate::config::Timing;
use seatgate::domain::{BreakerPhase, SeatId};
use seatgate::ports::{BreakerStates, Clock, Store};
use seatgate::service::{Ports, SeatReadError, Services};
use std::sync::Arc;
use std::time::{Duration, Instant};
use upstream_sim::{Faults, Simulator};

/// The simulator's seat-read route, as its stats name it.
pub const SEAT_READS: &str = "GET /api/seats";

pub struct Fleet {
    pub sim: Simulator,
    pub timing: Timing,
    pub instances: Vec<Services>,
    /// A handle on the shared breaker item, to check what the instances wrote.
    pub breaker: Arc<dyn BreakerStates>,
}

impl Fleet {
    /// One instance per store handle (all on the same store), one fresh simulator.
    pub async fn new<S: Store + 'static>(stores: Vec<Arc<S>>) -> Fleet {
        let timing = Timing {
            read_ttl: Duration::from_secs(1),
            ..Timing::fast()
        };
        let setup::Upstream { sim, http, .. } = setup::upstream(&timing).await;
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let breaker: Arc<dyn BreakerStates> = stores[0].clone();
        let instances = stores
            .into_iter()
            .map(|store| {
                Services::new(
                    Ports::from_store(store, http.clone(), clock.clone()),
                    timing.clone(),
                )
            })
            .collect();
        Fleet {
            sim,
            timing,
            instances,
            breaker,
        }
    }

    pub fn seat_reads(&self) -> u64 {
        self.sim.stats().get(SEAT_READS)
    }

    /// Opens the breaker: the upstream down, failing reads of fresh seats from instance 0
    /// until its window trips. Returns once the shared state says open.
    pub async fn open_breaker(&self) {
        self.sim.set_faults(Faults {
            outage_for_ms: 60_000,
            ..Faults::default()
        });
        let reads = self.instances[0].reads();
        for _ in 0..self.timing.breaker_min_calls * 2 {
            let _ = reads.seat(&fresh_seat("OPEN-")).await;
            if !self.breaker.breaker().await.unwrap().is_closed() {
                return;
            }
        }
        panic!("the breaker did not open after repeated upstream failures");
    }
}

fn fresh_seat(prefix: &str) -> SeatId {
    SeatId::parse(&setup::unique(prefix)).unwrap()
}

/// Expands to one `#[tokio::test]` per case. The argument is a function `async fn(usize) ->
/// Fleet` building that many instances on one fresh store.
#[macro_export]
macro_rules! protection_contract {
    ($fleet:ident) => {
        $crate::__protection_tests!($fleet;
            a_thousand_concurrent_misses_in_one_instance_make_one_upstream_read => 1,
            concurrent_misses_across_four_instances_make_one_upstream_read => 4,
            others_serve_the_last_reading_stale_while_one_instance_refreshes => 2,
            a_cancelled_leader_does_not_poison_its_followers => 1,
            the_breaker_opens_for_every_instance_and_lets_exactly_one_probe_through => 3,
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __protection_tests {
    ($fleet:ident; $($case:ident => $n:expr),+ $(,)?) => {
        mod protection_contract {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let fleet: $crate::protection::Fleet = super::$fleet($n).await;
                    $crate::protection::$case(&fleet).await;
                }
            )+
        }
    };
}

pub async fn a_thousand_concurrent_misses_in_one_instance_make_one_upstream_read(f: &Fleet) {
    f.sim.set_faults(Faults {
        latency_ms: 100,
        ..Faults::default()
    });
    let reads = f.instances[0].reads().clone();
    let target = fresh_seat("SF1-");
    let answers = futures::future::join_all((0..1_000).map(|_| {
        let (reads, target) = (reads.clone(), target.clone());
        async move { reads.seat(&target).await }
    }))
    .await;
    for a in answers {
        let served = a.expect("every reader gets an answer");
        assert_eq!(served.reading.seat_available(), Some(true));
        assert!(!served.stale);
    }
    assert_eq!(f.seat_reads(), 1);
}

pub async fn concurrent_misses_across_four_instances_make_one_upstream_read(f: &Fleet) {
    f.sim.set_faults(Faults {
        latency_ms: 150,
        ..Faults::default()
    });
    let target = fresh_seat("SF4-");
    let answers = futures::future::join_all((0..1_000).map(|i| {
        let reads = f.instances[i % f.instances.len()].reads().clone();
        let target = target.clone();
        async move { reads.seat(&target).await }
    }))
    .await;
    for a in answers {
        let served = a.expect("every reader gets an answer");
        assert_eq!(served.reading.seat_available(), Some(true));
    }
    assert_eq!(f.seat_reads(), 1, "one refresh lease, fleet-wide");
}

pub async fn others_serve_the_last_reading_stale_while_one_instance_refreshes(f: &Fleet) {
    let target = fresh_seat("ST-");
    let (a, b) = (
        f.instances[0].reads().clone(),
        f.instances[1].reads().clone(),
    );
    assert!(!a.seat(&target).await.unwrap().stale);
    assert_eq!(f.seat_reads(), 1);
    tokio::time::sleep(f.timing.read_ttl + Duration::from_millis(20)).await;

    // The refresh is slow (though quicker than the TTL and the upstream timeout, so its answer
    // is fresh); the other instance must not wait for it, nor call itself: it is served while
    // the refresh is still out.
    f.sim.set_faults(Faults {
        latency_ms: 250,
        ..Faults::default()
    });
    let refresher = tokio::spawn({
        let (a, target) = (a.clone(), target.clone());
        async move { a.seat(&target).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = Instant::now();
    let served = b.seat(&target).await.unwrap();
    assert!(served.stale, "the last reading, marked stale");
    assert_eq!(served.reading.seat_available(), Some(true));
    assert!(
        !refresher.is_finished(),
        "served without waiting for the refresh ({:?})",
        started.elapsed()
    );
    let refreshed = refresher.await.unwrap().unwrap();
    assert!(!refreshed.stale);
    assert_eq!(f.seat_reads(), 2, "one refresh for both instances");
}

pub async fn a_cancelled_leader_does_not_poison_its_followers(f: &Fleet) {
    f.sim.set_faults(Faults {
        latency_ms: 200,
        ..Faults::default()
    });
    let reads = f.instances[0].reads().clone();
    let target = fresh_seat("CL-");
    let leader = tokio::spawn({
        let (reads, target) = (reads.clone(), target.clone());
        async move { reads.seat(&target).await }
    });
    tokio::time::sleep(Duration::from_millis(30)).await;
    let followers: Vec<_> = (0..20)
        .map(|_| {
            let (reads, target) = (reads.clone(), target.clone());
            tokio::spawn(async move { reads.seat(&target).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(30)).await;
    leader.abort();
    assert!(leader.await.unwrap_err().is_cancelled());
    for follower in followers {
        let served = follower
            .await
            .unwrap()
            .expect("a follower still gets its answer");
        assert_eq!(served.reading.seat_available(), Some(true));
    }
    // The leader's call was in flight when it was cancelled; one follower took over its lease
    // (same instance) and made the second.
    assert!(f.seat_reads() <= 2, "{} reads", f.seat_reads());
}

pub async fn the_breaker_opens_for_every_instance_and_lets_exactly_one_probe_through(f: &Fleet) {
    f.open_breaker().await;
    let calls_when_opened = f.sim.calls_since(0).len();

    // Open: no instance calls, not even those that never saw a failure.
    tokio::time::sleep(f.timing.instance_cache_ttl * 2).await;
    for services in &f.instances {
        let err = services.reads().seat(&fresh_seat("SHUT-")).await;
        assert!(
            matches!(err, Err(SeatReadError::Unavailable { .. })),
            "{err:?}"
        );
    }
    assert_eq!(
        f.sim.calls_since(0).len(),
        calls_when_opened,
        "0 calls while open"
    );

    // Past the open interval, still failing: of many concurrent calls fleet-wide, one probe.
    tokio::time::sleep(f.timing.breaker_open_interval).await;
    let before = f.sim.calls_since(0).len();
    let answers = futures::future::join_all((0..30).map(|n| {
        let reads = f.instances[n % f.instances.len()].reads().clone();
        async move { reads.seat(&fresh_seat("PROBE-")).await }
    }))
    .await;
    assert!(answers.iter().all(Result::is_err));
    assert_eq!(f.sim.calls_since(0).len() - before, 1, "exactly one probe");
    let state = f.breaker.breaker().await.unwrap();
    assert!(
        matches!(state.phase, BreakerPhase::Open { .. }),
        "reopened: {state:?}"
    );

    // Recovered: the next probe closes it for everyone.
    f.sim.set_faults(Faults::default());
    tokio::time::sleep(f.timing.breaker_open_interval).await;
    let last = f.instances.len() - 1;
    let served = f.instances[last]
        .reads()
        .seat(&fresh_seat("AFTER-"))
        .await
        .unwrap();
    assert_eq!(served.reading.seat_available(), Some(true));
    assert!(f.breaker.breaker().await.unwrap().is_closed());
    tokio::time::sleep(f.timing.instance_cache_ttl * 2).await;
    for services in &f.instances {
        assert!(
            services
                .reads()
                .seat(&fresh_seat("OPEN-AGAIN-"))
                .await
                .is_ok()
        );
    }
}
