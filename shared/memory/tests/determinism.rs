//! The in-memory backend is deterministic: the same sequence of calls from the same seed gives
//! the same write log, byte for byte, and the same final state, however the calls of a burst
//! are interleaved by the (single-threaded) executor, and with faults injected by the seeded
//! mode on the way.
//!
//! The scenario is the pipeline's shape without its services (which get their own injected
//! clock and ids in issue 18's part 2): a burst of confirms on one seat, a relay pass over the
//! change stream into the seat queue, a worker pass that claims the first and loses the
//! others' race (one claim's answer lost on the way), and a flash sale of concurrent bookings.

use futures::future::join_all;
use seatgate::config::Timing;
use seatgate::domain::{
    Action, ActionId, ActionKind, Booking, BookingId, BookingStatus, ChangeRecord, Flight,
    FlightId, IntentId, IntentStatus, Millis, Outcome, Reason, SeatId, SeatMessage, Transition,
    TransitionRequest, UserId,
};
use seatgate::ports::{
    Actions, BookRefusal, Confirmation, Flights, Intents, QueueConsumer, SeatQueue, StoreError,
};
use seatgate_memory::{Chaos, FaultKind, MemoryBackend, MemoryConfig, Op, Snapshot};
use seatgate_testkit::ManualClock;
use std::sync::Arc;
use std::time::Duration;

const START: Millis = Millis(1_767_225_600_000);

/// Ids from a counter, shaped as UUIDs: nothing of the run may come from the OS.
struct Ids(u64);

impl Ids {
    fn next(&mut self) -> String {
        self.0 += 1;
        format!("0190a0a0-0000-7000-8000-{:012x}", self.0)
    }
}

/// One run of the scenario; what it wrote and where it ended.
async fn run(seed: u64) -> (Vec<String>, Snapshot, Vec<String>) {
    let timing = Timing::local();
    let clock = Arc::new(ManualClock::new(START));
    let store = MemoryBackend::new(clock.clone(), MemoryConfig::default());
    let mut ids = Ids(0);
    // A few store and queue writes fail throttled or in a transaction conflict (nothing
    // applied; each caller below retries), from the seed.
    store.set_chaos(Some(Chaos {
        seed,
        rate: 0.1,
        ops: [Op::PutAction, Op::Book, Op::SeatSend].into(),
        kinds: vec![FaultKind::throttled(), FaultKind::conflict()],
    }));
    let seat = SeatId::parse("A-12").unwrap();

    // A burst of 30 confirms on one seat, all polled together.
    let actions: Vec<Action> = (0..30)
        .map(|n| Action {
            action_id: ActionId::parse(&ids.next()).unwrap(),
            ..Action::prepare(
                UserId::parse(&format!("user-{n}")).unwrap(),
                ActionKind::ReserveSeat,
                seat.clone(),
                START,
                timing.action_ttl,
            )
        })
        .collect();
    let intent_ids: Vec<IntentId> = (0..30)
        .map(|_| IntentId::parse(&ids.next()).unwrap())
        .collect();
    join_all(actions.iter().zip(&intent_ids).map(|(a, id)| {
        let store = &store;
        async move {
            // A failed call yields before its retry, as a backoff would: the burst's others go
            // ahead, so the seed decides the interleaving.
            while store.put_action(a).await.is_err() {
                tokio::task::yield_now().await;
            }
            let now = clock_now(store);
            let c = Confirmation::of(
                a,
                id.clone(),
                &a.user_id,
                now,
                now.plus(Duration::from_secs(60)),
            );
            store.confirm(&c).await.unwrap();
        }
    }))
    .await;
    clock.advance(Duration::from_millis(250));

    // The relay: every REQUESTED change record into the seat queue, then acknowledged.
    let changes = store.fetch_changes(100).unwrap();
    let mut positions = Vec::new();
    for pending in changes {
        let seq = pending.seq;
        let record = ChangeRecord::from(pending);
        let intent = record
            .change
            .unwrap()
            .unwrap()
            .into_intent()
            .unwrap()
            .new
            .unwrap();
        if intent.status == IntentStatus::Requested {
            let message = SeatMessage::for_intent(&intent);
            while store.send(&message).await.is_err() {}
        }
        positions.push(seq);
    }
    store.ack_changes(&positions).unwrap();
    clock.advance(Duration::from_millis(250));

    // The worker: one batch of the seat's group. The first claims (its answer lost once, so
    // it reads the intent back, as the worker would), is charged; the rest lose the race.
    let batch = store.receive(10).await.unwrap();
    assert_eq!(batch.len(), 10, "one group, one batch of ten in order");
    let now = clock_now(&store);
    for (i, delivery) in batch.iter().enumerate() {
        let message: SeatMessage = serde_json::from_str(&delivery.body).unwrap();
        let intent = store.get_intent(&message.intent_id).await.unwrap().unwrap();
        if i == 0 {
            store.lose_answer_next(Op::Transition, StoreError::Unavailable("timeout".into()), 1);
            let claim = TransitionRequest::on(&intent, now, Transition::claim(now, &timing));
            assert!(
                store.transition(&claim).await.is_err(),
                "its answer was lost"
            );
            let claimed = store.get_intent(&intent.intent_id).await.unwrap().unwrap();
            assert!(claimed.is_result_of(&intent, &claim));
            let charged = Outcome::Charged {
                charge_id: format!("charge-{}", ids.next()),
                how: Reason::Reserved,
            };
            store
                .transition(&claimed.settle(charged, now, &timing))
                .await
                .unwrap();
        } else {
            let lost =
                TransitionRequest::new(intent.intent_id.clone(), now, Transition::lost_race());
            store.transition(&lost).await.unwrap();
        }
    }
    let receipts: Vec<String> = batch.into_iter().map(|d| d.receipt).collect();
    store.delete(&receipts).await.unwrap();

    // A flash sale: 40 users book 2 seats each of 50, over 4 shards, all at once.
    let flight = Flight::new(FlightId::parse("KE-081").unwrap(), 50, Some(4), 4, START).unwrap();
    assert!(store.create_flight(&flight).await.unwrap());
    let bookings: Vec<Booking> = (0..40u32)
        .map(|n| Booking {
            booking_id: BookingId::parse(&ids.next()).unwrap(),
            flight_id: flight.flight_id.clone(),
            user_id: UserId::parse(&format!("buyer-{n}")).unwrap(),
            head_count: 2,
            shard: n % 4,
            status: BookingStatus::Booked,
            created_at: START,
            cancelled_at: None,
        })
        .collect();
    join_all(bookings.iter().map(|b| {
        let store = &store;
        async move {
            while let Err(BookRefusal::Store(_)) =
                store.book(b, flight.max_per_user, None, None).await
            {
                tokio::task::yield_now().await;
            }
        }
    }))
    .await;

    let injected = store
        .injected()
        .iter()
        .map(|i| format!("{} {} {:?}", i.call, i.op.name(), i.kind))
        .collect();
    (store.write_log(), store.snapshot(), injected)
}

fn clock_now(store: &MemoryBackend) -> Millis {
    store.clock().now()
}

#[tokio::test]
async fn the_same_seed_gives_the_same_writes_byte_for_byte() {
    let (log, snapshot, injected) = run(7).await;
    assert!(log.len() > 100, "the scenario wrote: {}", log.len());
    assert!(!injected.is_empty(), "the seeded mode struck");
    let sold: u32 = snapshot.flights[0].flight.capacity - snapshot.flights[0].available();
    assert_eq!(
        sold, 48,
        "50 seats over 4 shards of 13, 13, 12, 12: 6 + 6 + 6 + 6 pairs"
    );
    assert_eq!(
        snapshot
            .intents
            .iter()
            .filter(|i| i.status == IntentStatus::Succeeded)
            .count(),
        1
    );
    for attempt in 0..20 {
        let (again, again_snapshot, again_injected) = run(7).await;
        assert!(again == log, "run {attempt}: the write log differs");
        assert_eq!(again_snapshot, snapshot, "run {attempt}: the final state");
        assert_eq!(again_injected, injected, "run {attempt}: the faults");
    }
    let (other, _, other_injected) = run(8).await;
    assert_ne!(other_injected, injected, "another seed strikes other calls");
    assert!(
        other != log,
        "and so the burst's writes interleave otherwise"
    );
}
