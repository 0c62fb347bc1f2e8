//! The upstream's protections across instances on the embedded backend: the protection
//! contract (single-flight reads, stale serving, a cancelled leader, one probe), plus the
//! pipeline's side of it: reserves held (not failed) while the breaker is open, room maps that
//! show this system's reservations, and waits that find a freed seat.
//!
//! Each "instance" is its own `Services` on its own `EmbeddedBackend::open` of one database
//! file, which is how two runner processes (or two Lambda instances on one table) see each
//! other: through the store only. Real time and `Timing::fast()` (200 ms read TTL, 300 ms open
//! interval), because the in-process cache expires by the wall clock.

use seatgate::adapters::clock::SystemClock;
use seatgate::config::Timing;
use seatgate::domain::{
    ActionKind, BreakerPhase, ChangeRecord, IntentId, IntentStatus, RoomId, SeatId, UserId,
};
use seatgate::handlers::stream;
use seatgate::ports::{BreakerStates, Clock, Intents, QueueConsumer};
use seatgate::service::api::ReadSeatError;
use seatgate::service::{Ports, QueueRecord, Services};
use seatgate_embedded::{EmbeddedBackend, EmbeddedConfig};
use seatgate_testkit::setup::{self, POSTS};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use upstream_sim::{Faults, Simulator};

const SEAT_READS: &str = "GET /api/seats";

struct Fleet {
    sim: Simulator,
    timing: Timing,
    instances: Vec<(EmbeddedBackend, Services)>,
    _dir: TempDir,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `n` instances on one database file and one simulator.
async fn fleet(n: usize) -> Fleet {
    fleet_with(n, None).await
}

/// The same, every instance's breaker asking `wake_ups` for reaper runs.
async fn fleet_with(n: usize, wake_ups: Option<Arc<dyn seatgate::ports::WakeUps>>) -> Fleet {
    let timing = Timing::fast();
    let dir = std::env::temp_dir().join(setup::unique("seatgate-protect-"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("db.sqlite3");
    let setup::Upstream { sim, http, .. } = setup::upstream(&timing).await;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let instances = (0..n)
        .map(|_| {
            let backend =
                EmbeddedBackend::open(&path, clock.clone(), EmbeddedConfig::for_timing(&timing))
                    .unwrap();
            let store = Arc::new(backend.clone());
            let mut ports =
                Ports::from_store(store.clone(), http.clone(), clock.clone()).with_hand_back(store);
            if let Some(w) = &wake_ups {
                ports = ports.with_wake_ups(w.clone());
            }
            (backend, Services::new(ports, timing.clone()))
        })
        .collect();
    Fleet {
        sim,
        timing,
        instances,
        _dir: TempDir(dir),
    }
}

/// The protection contract's fleet: instances on one fresh database file. The file's
/// directory is left in the temp dir (a few KB); each case uses its own.
async fn contract_fleet(n: usize) -> seatgate_testkit::protection::Fleet {
    let dir = std::env::temp_dir().join(setup::unique("seatgate-protect-"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("db.sqlite3");
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let stores = (0..n)
        .map(|_| {
            Arc::new(
                EmbeddedBackend::open(
                    &path,
                    clock.clone(),
                    EmbeddedConfig::for_timing(&Timing::fast()),
                )
                .unwrap(),
            )
        })
        .collect();
    seatgate_testkit::protection::Fleet::new(stores).await
}

seatgate_testkit::protection_contract!(contract_fleet);

fn seat(s: &str) -> SeatId {
    SeatId::parse(s).unwrap()
}

impl Fleet {
    fn services(&self, i: usize) -> &Services {
        &self.instances[i].1
    }

    fn seat_reads(&self) -> u64 {
        self.sim.stats().get(SEAT_READS)
    }

    async fn enrol(&self, n: usize) -> UserId {
        let u = UserId::parse(&format!("u{n}")).unwrap();
        self.sim.register_user(u.as_str(), &format!("cred-{n}"));
        self.services(0)
            .api()
            .put_credential(&u, &format!("cred-{n}"))
            .await
            .unwrap();
        u
    }

    async fn confirm(&self, u: &UserId, seat_id: &str) -> IntentId {
        let api = self.services(0).api();
        let action = api
            .prepare(u, ActionKind::ReserveSeat, seat(seat_id))
            .await
            .unwrap();
        api.confirm(u, &action.action_id)
            .await
            .unwrap()
            .intent
            .intent_id
    }

    /// Relay and work on instance 0 until nothing moves (what the runner's mappings do).
    async fn pump(&self) {
        let (backend, services) = &self.instances[0];
        let relay = services.relay(Arc::new(backend.clone()), Arc::new(backend.events()));
        let worker = services.worker();
        loop {
            let mut moved = 0;
            let rows = backend.fetch_outbox(100).await.unwrap();
            let seqs: Vec<i64> = rows.iter().map(|r| r.seq).collect();
            moved += seqs.len();
            let records = rows.into_iter().map(ChangeRecord::from).collect();
            assert_eq!(stream::handle(&relay, records).await, None);
            backend.ack_outbox(&seqs).await.unwrap();
            let batch = backend.receive(10).await.unwrap();
            moved += batch.len();
            let records: Vec<QueueRecord> = batch
                .iter()
                .map(|d| QueueRecord {
                    message_id: d.message_id.clone(),
                    group_id: d.group_id.clone(),
                    body: d.body.clone(),
                    receipt: d.receipt.clone(),
                })
                .collect();
            let failed = worker.handle_batch(&records).await;
            let done: Vec<String> = batch
                .iter()
                .filter(|d| !failed.contains(&d.message_id))
                .map(|d| d.receipt.clone())
                .collect();
            backend.delete(&done).await.unwrap();
            if moved == 0 {
                return;
            }
        }
    }

    async fn status(&self, id: &IntentId) -> IntentStatus {
        self.instances[0]
            .0
            .get_intent(id)
            .await
            .unwrap()
            .unwrap()
            .status
    }

    /// Opens the breaker: the upstream down, failing reads of fresh seats from instance 0
    /// until its window trips. Returns when the shared state says open.
    async fn open_breaker(&self) {
        self.sim.set_faults(Faults {
            outage_for_ms: 60_000,
            ..Faults::default()
        });
        let reads = self.services(0).reads();
        for n in 0..self.timing.breaker_min_calls * 2 {
            let _ = reads
                .seat(&seat(&setup::unique(&format!("OPEN{n}-"))))
                .await;
            if !self.instances[0].0.breaker().await.unwrap().is_closed() {
                return;
            }
        }
        panic!("the breaker did not open after repeated upstream failures");
    }
}

#[tokio::test]
async fn an_unknown_room_is_not_found_and_a_room_shows_this_systems_reservations() {
    let f = fleet(1).await;
    f.sim.put_room("R1", &["R1-1", "R1-2"]);
    let api = f.services(0).api();
    let unknown = api.room(&RoomId::parse("NOPE").unwrap()).await;
    assert_eq!(unknown.unwrap_err(), ReadSeatError::NoSuchRoom);
    let room = RoomId::parse("R1").unwrap();
    let map = api.room(&room).await.unwrap();
    assert_eq!(f.sim.stats().get("GET /api/rooms"), 2);
    let seatgate::domain::ReadValue::Room { seats } = &map.reading.value else {
        panic!("a room map");
    };
    assert!(seats.iter().all(|s| s.available));

    // A reservation here shows at once, though the room's map is still the cached one.
    let u = f.enrol(1).await;
    let id = f.confirm(&u, "R1-2").await;
    f.pump().await;
    assert_eq!(f.status(&id).await, IntentStatus::Succeeded);
    let seat_now = api.seat(&seat("R1-2")).await.unwrap();
    assert_eq!(seat_now.reading.seat_available(), Some(false));
    assert_eq!(f.seat_reads(), 0, "the write-through answered");
    tokio::time::sleep(f.timing.instance_cache_ttl + Duration::from_millis(10)).await;
    let map = api.room(&room).await.unwrap();
    let seatgate::domain::ReadValue::Room { seats } = &map.reading.value else {
        panic!("a room map");
    };
    let r12 = seats.iter().find(|s| s.seat_id.as_str() == "R1-2").unwrap();
    assert!(!r12.available, "the room overlays the seat's newer reading");
}

#[tokio::test]
async fn reserves_wait_in_line_while_the_breaker_is_open_and_succeed_after() {
    let f = fleet(1).await;
    let users: Vec<UserId> = futures::future::join_all((1..=5).map(|n| f.enrol(n))).await;
    f.open_breaker().await;
    let posts_before = f.sim.stats().get(POSTS);
    let mut ids = Vec::new();
    for (n, u) in users.iter().enumerate() {
        ids.push(f.confirm(u, &format!("BO-{n}")).await);
    }
    f.pump().await;
    assert_eq!(
        f.sim.stats().get(POSTS),
        posts_before,
        "no reserve sent while open"
    );
    for id in &ids {
        let i = f.instances[0].0.get_intent(id).await.unwrap().unwrap();
        assert_eq!(
            (i.status, i.attempts),
            (IntentStatus::Requested, 0),
            "back in line, unclaimed"
        );
        assert!(i.next_attempt_at.is_some());
    }

    // The upstream recovers; after the open interval the reaper wakes them and they succeed.
    f.sim.set_faults(Faults::default());
    let reaper = f.services(0).reaper();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        tokio::time::sleep(f.timing.reaper_interval).await;
        reaper.run_once(100).await.unwrap();
        f.pump().await;
        let mut done = 0;
        for id in &ids {
            done += usize::from(f.status(id).await == IntentStatus::Succeeded);
        }
        if done == ids.len() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{done} of {} succeeded",
            ids.len()
        );
    }
    assert_eq!(f.sim.stats().get(POSTS), posts_before + ids.len() as u64);
}

#[tokio::test]
async fn a_wait_gets_its_seat_soon_after_the_holder_leaves_at_one_read_per_ttl() {
    // Seat held through this system (so it is suppressed for the action TTL), a wait on it, and
    // then the holder leaves upstream: the wait must notice through the cached read.
    let f = fleet(1).await;
    let holder = f.enrol(1).await;
    let held = f.confirm(&holder, "W-1").await;
    f.pump().await;
    assert_eq!(f.status(&held).await, IntentStatus::Succeeded);
    let waiter = f.enrol(2).await;
    let api = f.services(0).api();
    let until = SystemClock.now().plus(Duration::from_secs(60));
    let waits: Vec<IntentId> = futures::future::join_all((0..20).map(|_| {
        let api = &api;
        let waiter = waiter.clone();
        async move {
            api.register_wait(&waiter, seat("W-1"), until)
                .await
                .unwrap()
                .intent_id
        }
    }))
    .await;
    let reaper = f.services(0).reaper();
    let (f, reaper) = (&f, &reaper);
    let poll = |rounds: u32| async move {
        for _ in 0..rounds {
            tokio::time::sleep(f.timing.reaper_interval).await;
            reaper.run_once(100).await.unwrap();
            f.pump().await;
        }
    };
    let started = Instant::now();
    poll(10).await;
    let reads_while_held = f.seat_reads();
    let windows = started.elapsed().as_millis() / f.timing.read_ttl.as_millis() + 1;
    assert!(
        reads_while_held as u128 <= windows,
        "{reads_while_held} reads in {windows} TTL windows"
    );
    for w in &waits {
        assert_eq!(f.status(w).await, IntentStatus::WaitingForSeat);
    }
    assert_eq!(f.sim.stats().get(POSTS), 1);

    assert!(f.sim.release("u1"));
    let freed = Instant::now();
    let winner = loop {
        poll(1).await;
        let mut won = None;
        for w in &waits {
            if f.status(w).await == IntentStatus::Succeeded {
                won = Some(w.clone());
            }
        }
        if let Some(w) = won {
            break w;
        }
        assert!(
            freed.elapsed() < Duration::from_secs(5),
            "no waiter got the freed seat"
        );
    };
    assert_eq!(f.sim.occupant("W-1").as_deref(), Some("u2"));
    poll(3).await;
    assert_eq!(f.sim.stats().get(POSTS), 2, "one reserve for all the waits");
    let mut still_waiting = 0;
    for w in waits.iter().filter(|w| **w != winner) {
        still_waiting += usize::from(f.status(w).await == IntentStatus::WaitingForSeat);
    }
    assert_eq!(still_waiting, waits.len() - 1);
}

/// The HTTP adapter types the upstream's busy answers on every route, with the `Retry-After`
/// in either of its forms: the simulator's outage 503 says "come back in 4 s" as delta-seconds
/// and as an HTTP date beside its own `Date`.
#[tokio::test]
async fn busy_answers_carry_their_retry_after_in_both_forms_on_every_route() {
    use seatgate::domain::Secret;
    use seatgate::ports::{ChargeReadError, ReadError, ReserveOutcome, Upstream};
    use upstream_sim::RetryAfterForm;
    let setup::Upstream { sim, http, .. } = setup::upstream(&Timing::fast()).await;
    sim.register_user("u1", "cred-1");
    let four = Some(Duration::from_secs(4));
    for form in [RetryAfterForm::Seconds, RetryAfterForm::HttpDate] {
        sim.set_faults(Faults {
            outage_for_ms: 60_000,
            outage_retry_after_secs: 4,
            retry_after_form: form,
            ..Faults::default()
        });
        let seat = SeatId::parse("RA-1").unwrap();
        assert_eq!(
            http.seat(&seat).await,
            Err(ReadError::Busy { retry_after: four }),
            "{form:?}"
        );
        assert_eq!(
            http.room(&RoomId::parse("R-1").unwrap()).await,
            Err(ReadError::Busy { retry_after: four }),
            "{form:?}"
        );
        assert_eq!(
            http.current_charge(&Secret::new("cred-1")).await,
            Err(ChargeReadError::Busy { retry_after: four }),
            "{form:?}"
        );
        assert_eq!(
            http.reserve(&Secret::new("cred-1"), &seat).await,
            ReserveOutcome::Busy { retry_after: four },
            "{form:?}"
        );
    }
    // Without one, a 503 is busy with no time (a failure for the breaker).
    sim.set_faults(Faults {
        outage_for_ms: 60_000,
        ..Faults::default()
    });
    assert_eq!(
        http.seat(&SeatId::parse("RA-2").unwrap()).await,
        Err(ReadError::Busy { retry_after: None })
    );
}

/// Intents parked behind an outage are back in line when the breaker's own wake-ups say so,
/// not at the reaper's schedule: at the probe time a wake run sends the probe and, the
/// upstream back, wakes them all; and intents parked behind a probe still in flight (due when
/// its lease would end) are woken as soon as it closes the breaker. No scheduled pass runs here.
#[tokio::test]
async fn parked_intents_are_woken_by_the_breakers_wake_ups_not_the_schedule() {
    use seatgate::adapters::wake_timer::WakeTimer;
    let wakes = Arc::new(WakeTimer::new());
    let f = fleet_with(1, Some(wakes.clone())).await;
    let users: Vec<UserId> = futures::future::join_all((1..=6).map(|n| f.enrol(n))).await;
    f.open_breaker().await;
    let BreakerPhase::Open { until } = f.instances[0].0.breaker().await.unwrap().phase else {
        panic!("open")
    };
    // A clock tolerance past it, so a wake run on an instance whose clock is behind still
    // finds the probe due.
    let asked = until.plus(seatgate::service::breaker::WAKE_AFTER);
    assert_eq!(
        wakes.next(),
        Some(asked),
        "opening asked for a run just after the probe time"
    );
    let posts_before = f.sim.stats().get(POSTS);
    let mut ids = Vec::new();
    for (n, u) in users[..3].iter().enumerate() {
        ids.push(f.confirm(u, &format!("WK-{n}")).await);
    }
    f.pump().await;
    assert_eq!(f.sim.stats().get(POSTS), posts_before, "parked, not sent");

    // The upstream recovers; at the probe time the wake run probes and wakes them.
    f.sim.set_faults(Faults::default());
    let clock = SystemClock;
    tokio::time::sleep(asked.since(clock.now()) + Duration::from_millis(5)).await;
    assert!(wakes.take_due(clock.now()));
    let reaper = f.services(0).reaper();
    let woken = reaper.wake(100).await.unwrap();
    assert_eq!(woken.requeued + woken.woken, 3, "{woken:?}");
    assert!(
        f.instances[0].0.breaker().await.unwrap().is_closed(),
        "the probe closed it"
    );
    f.pump().await;
    for id in &ids {
        assert_eq!(f.status(id).await, IntentStatus::Succeeded);
    }
    assert_eq!(f.sim.stats().get(POSTS), posts_before + 3);

    // Another instance probes (its lease runs for an upstream call): intents arriving now are
    // parked until that lease ends. Its probe closes the breaker: a wake run at once takes
    // them, though they are not due yet.
    let state = f.instances[0].0.breaker().await.unwrap();
    let reopened = state.opened(clock.now(), Duration::ZERO);
    assert!(f.instances[0].0.swap_breaker(&reopened).await.unwrap());
    let probing = reopened.probing("i-other", clock.now(), f.timing.upstream_call_lease());
    assert!(f.instances[0].0.swap_breaker(&probing).await.unwrap());
    // Past this instance's trust in the closed state it last read.
    tokio::time::sleep(f.timing.instance_cache_ttl + Duration::from_millis(20)).await;
    let mut later = Vec::new();
    for (n, u) in users[3..].iter().enumerate() {
        later.push(f.confirm(u, &format!("WL-{n}")).await);
    }
    f.pump().await;
    for id in &later {
        let i = f.instances[0].0.get_intent(id).await.unwrap().unwrap();
        assert_eq!(i.status, IntentStatus::Requested);
        assert!(
            i.due_at.unwrap() > clock.now(),
            "parked behind the probe's lease"
        );
    }
    assert!(
        f.instances[0]
            .0
            .swap_breaker(&probing.closed_at(clock.now()))
            .await
            .unwrap()
    );
    tokio::time::sleep(f.timing.instance_cache_ttl + Duration::from_millis(20)).await;
    let scheduled = reaper.run_once(100).await.unwrap();
    assert_eq!(
        scheduled.woken + scheduled.requeued,
        0,
        "a scheduled pass: not due yet"
    );
    let woken = reaper.wake(100).await.unwrap();
    assert_eq!(woken.woken, 3, "{woken:?}");
    f.pump().await;
    for id in &later {
        let i = f.instances[0].0.get_intent(id).await.unwrap().unwrap();
        assert_eq!(
            i.status,
            IntentStatus::Succeeded,
            "{i:?} now {:?}",
            clock.now()
        );
    }
}
