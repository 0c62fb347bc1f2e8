//! Fault injection on the in-memory backend: each kind fails its caller, and each either
//! applies nothing (a refusal: throttling, a conflict) or applies the write and loses its answer
//! (a timeout after the commit), which the state and the write log show. The seeded mode fails
//! the same calls the same way for the same seed.

use seatgate::config::Timing;
use seatgate::domain::{
    Action, ActionKind, ActionStatus, Booking, BookingId, BookingStatus, Flight, FlightId,
    IntentId, IntentStatus, Millis, SeatId, SeatMessage, Transition, TransitionRequest, UserId,
};
use seatgate::ports::{
    Actions, ConfirmError, ConfirmRefusal, Confirmation, Flights, Intents, QueueConsumer,
    QueueError, SeatQueue, StoreError, TransitionError,
};
use seatgate_memory::{Chaos, Fault, FaultKind, MemoryBackend, MemoryConfig, Op};
use seatgate_testkit::ManualClock;
use seatgate_testkit::paging::all_bookings;
use std::sync::Arc;
use std::time::Duration;

const START: Millis = Millis(1_767_225_600_000);

fn backend() -> (MemoryBackend, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(START));
    (
        MemoryBackend::new(clock.clone(), MemoryConfig::default()),
        clock,
    )
}

fn user(n: u32) -> UserId {
    UserId::parse(&format!("user-{n}")).unwrap()
}

fn action(owner: &UserId) -> Action {
    Action::prepare(
        owner.clone(),
        ActionKind::ReserveSeat,
        SeatId::parse("A-12").unwrap(),
        START,
        Duration::from_secs(300),
    )
}

fn confirmation(action: &Action) -> Confirmation {
    Confirmation::of(
        action,
        IntentId::generate(),
        &action.user_id,
        START,
        START.plus(Duration::from_secs(60)),
    )
}

#[tokio::test]
async fn a_throttled_write_fails_its_caller_and_writes_nothing() {
    let (store, _) = backend();
    let a = action(&user(1));
    store.fail_next(Op::PutAction, StoreError::Throttled, 1);
    assert_eq!(store.put_action(&a).await, Err(StoreError::Throttled));
    assert_eq!(store.get_action(&a.action_id).await.unwrap(), None);
    assert!(
        store.write_log().is_empty(),
        "nothing applied, nothing logged"
    );
    // The fault was consumed: the retry goes through.
    store.put_action(&a).await.unwrap();
    assert_eq!(store.get_action(&a.action_id).await.unwrap(), Some(a));
    assert_eq!(store.write_log().len(), 1);
    assert_eq!(store.calls(Op::PutAction), 2);
    let injected = store.injected();
    assert_eq!(injected.len(), 1);
    assert_eq!(
        (injected[0].op, &injected[0].kind),
        (Op::PutAction, &FaultKind::throttled())
    );
}

#[tokio::test]
async fn a_conflicted_confirm_confirms_nothing_and_its_retry_does() {
    let (store, _) = backend();
    let a = action(&user(1));
    store.put_action(&a).await.unwrap();
    let c = confirmation(&a);
    store.arm(Fault {
        op: Some(Op::Confirm),
        kind: FaultKind::conflict(),
        times: 1,
    });
    assert_eq!(
        store.confirm(&c).await,
        Err(ConfirmError::Store(StoreError::TransactionConflict))
    );
    let stored = store.get_action(&a.action_id).await.unwrap().unwrap();
    assert_eq!(stored.status, ActionStatus::Prepared);
    assert_eq!(store.get_intent(&c.intent.intent_id).await.unwrap(), None);
    assert!(
        store.fetch_changes(10).unwrap().is_empty(),
        "no change record"
    );
    store.confirm(&c).await.unwrap();
    assert!(
        store
            .get_intent(&c.intent.intent_id)
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn a_confirm_whose_answer_is_lost_was_applied_and_its_retry_finds_its_intent() {
    let (store, _) = backend();
    let a = action(&user(1));
    store.put_action(&a).await.unwrap();
    let c = confirmation(&a);
    store.arm(Fault {
        op: Some(Op::Confirm),
        kind: FaultKind::answer_lost(),
        times: 1,
    });
    let lost = store.confirm(&c).await;
    assert!(
        matches!(lost, Err(ConfirmError::Store(StoreError::Unavailable(_)))),
        "{lost:?}"
    );
    // Applied all the same: the action is confirmed, the intent, its consent and its change
    // record are there.
    let stored = store.get_action(&a.action_id).await.unwrap().unwrap();
    assert_eq!(stored.status, ActionStatus::Confirmed);
    let intent = store
        .get_intent(&c.intent.intent_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(intent.status, IntentStatus::Requested);
    assert!(
        store
            .get_consent(&intent.intent_id)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(store.fetch_changes(10).unwrap().len(), 1);
    // A retry of the same confirm is told what happened.
    assert_eq!(
        store.confirm(&c).await,
        Err(ConfirmError::Refused(ConfirmRefusal::AlreadyConfirmed(
            intent.intent_id
        )))
    );
}

#[tokio::test]
async fn a_claim_whose_answer_is_lost_holds_the_seat_and_a_replayed_one_sees_its_own_result() {
    let (store, _) = backend();
    let timing = Timing::local();
    let a = action(&user(1));
    store.put_action(&a).await.unwrap();
    let c = confirmation(&a);
    store.confirm(&c).await.unwrap();
    let claim = TransitionRequest::on(&c.intent, START, Transition::claim(START, &timing));

    store.lose_answer_next(Op::Transition, StoreError::Unavailable("timeout".into()), 1);
    assert_eq!(
        store.transition(&claim).await,
        Err(TransitionError::Store(StoreError::Unavailable(
            "timeout".into()
        )))
    );
    let claimed = store
        .get_intent(&c.intent.intent_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed.status, IntentStatus::Reserving);
    assert_eq!(
        store
            .seat_claim(&a.seat_id)
            .await
            .unwrap()
            .map(|h| h.intent_id),
        Some(c.intent.intent_id.clone())
    );

    // Replayed (the SDK's retry after a lost answer): applied once, refused the second time,
    // and the refusal shows the first try's result.
    let second = action(&user(2));
    store.put_action(&second).await.unwrap();
    let c2 = confirmation(&second);
    store.confirm(&c2).await.unwrap();
    let claim2 = TransitionRequest::on(&c2.intent, START, Transition::claim(START, &timing));
    // While the first claim holds the seat both tries meet its claim.
    store.arm(Fault {
        op: Some(Op::Transition),
        kind: FaultKind::Replay,
        times: 1,
    });
    match store.transition(&claim2).await {
        Err(TransitionError::SeatClaimed(hold)) => assert_eq!(hold.intent_id, c.intent.intent_id),
        other => panic!("expected the seat held by the first claim, got {other:?}"),
    }
    let settle = claimed.settle(seatgate::domain::Outcome::NoCharge, START, &timing);
    store.transition(&settle).await.unwrap();
    store.arm(Fault {
        op: Some(Op::Transition),
        kind: FaultKind::Replay,
        times: 1,
    });
    match store.transition(&claim2).await {
        Err(TransitionError::Refused(seen)) => {
            assert!(seen.is_result_of(&c2.intent, &claim2), "its own result")
        }
        other => panic!("expected a refusal showing the replayed claim, got {other:?}"),
    }
}

#[tokio::test]
async fn a_booking_refused_before_it_applies_takes_no_seat_and_a_lost_answer_takes_one() {
    let (store, _) = backend();
    let flight = Flight::new(FlightId::parse("F-1").unwrap(), 10, None, 1, START).unwrap();
    assert!(store.create_flight(&flight).await.unwrap());
    let booking = |n: u32| Booking {
        booking_id: BookingId::parse(&format!("b-{n}")).unwrap(),
        flight_id: flight.flight_id.clone(),
        user_id: user(n),
        head_count: 2,
        shard: 0,
        status: BookingStatus::Booked,
        created_at: START,
        cancelled_at: None,
    };
    let available = || async {
        store
            .inventory(&flight.flight_id)
            .await
            .unwrap()
            .unwrap()
            .available()
    };
    store.fail_next(Op::Book, StoreError::Throttled, 1);
    assert!(matches!(
        store.book(&booking(1), None, None, None).await,
        Err(seatgate::ports::BookRefusal::Store(StoreError::Throttled))
    ));
    assert_eq!(available().await, 10);
    assert!(all_bookings(&store, &user(1)).await.unwrap().is_empty());

    store.lose_answer_next(Op::Book, StoreError::Unavailable("timeout".into()), 1);
    assert!(matches!(
        store.book(&booking(2), None, None, None).await,
        Err(seatgate::ports::BookRefusal::Store(
            StoreError::Unavailable(_)
        ))
    ));
    assert_eq!(
        available().await,
        8,
        "the lost answer's booking took its seats"
    );
    assert_eq!(all_bookings(&store, &user(2)).await.unwrap().len(), 1);
}

#[tokio::test]
async fn queue_faults_fail_the_sender_and_a_lost_receive_leaves_the_message_in_flight() {
    let (store, clock) = backend();
    let message = SeatMessage {
        intent_id: IntentId::generate(),
        seat_id: SeatId::parse("A-12").unwrap(),
        version: 1,
        intent: None,
    };
    store.fail_next(Op::SeatSend, StoreError::TransactionConflict, 1);
    assert_eq!(store.send(&message).await, Err(QueueError::Throttled));
    assert!(
        store.receive(10).await.unwrap().is_empty(),
        "nothing was sent"
    );

    store.send(&message).await.unwrap();
    store.lose_answer_next(
        Op::SeatReceive,
        StoreError::Unavailable("dropped".into()),
        1,
    );
    assert_eq!(
        store.receive(10).await,
        Err(QueueError::Unavailable("dropped".into()))
    );
    assert!(
        store.receive(10).await.unwrap().is_empty(),
        "taken in flight by the receive whose answer was lost"
    );
    clock.advance(store.config().visibility_timeout);
    let again = store.receive(10).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].receive_count, 2, "the lost receive counted");
}

/// Runs a fixed sequence of calls under `chaos` and answers which calls failed how, and what
/// was written.
async fn chaotic_run(chaos: Chaos) -> (Vec<(u64, Op, FaultKind)>, Vec<String>, Vec<bool>) {
    let (store, _) = backend();
    store.set_chaos(Some(chaos));
    let mut answers = Vec::new();
    for n in 0..200 {
        // Fixed ids: the run must not depend on anything but the seed.
        let id = format!("0190a0a0-0000-7000-8000-{n:012x}");
        let mut a = action(&user(n % 7));
        a.action_id = seatgate::domain::ActionId::parse(&id).unwrap();
        answers.push(store.put_action(&a).await.is_ok());
        answers.push(store.get_action(&a.action_id).await.is_ok());
    }
    let injected = store
        .injected()
        .into_iter()
        .map(|i| (i.call, i.op, i.kind))
        .collect();
    (injected, store.write_log(), answers)
}

#[tokio::test]
async fn the_seeded_mode_fails_the_same_calls_for_the_same_seed() {
    let chaos = |seed| Chaos {
        seed,
        rate: 0.2,
        ops: [Op::PutAction].into(),
        kinds: vec![FaultKind::throttled(), FaultKind::answer_lost()],
    };
    let first = chaotic_run(chaos(42)).await;
    let again = chaotic_run(chaos(42)).await;
    assert_eq!(first, again, "same seed, same failures, same writes");
    let (injected, log, _) = &first;
    assert!(
        (20..70).contains(&injected.len()),
        "about a fifth of 200 puts: {}",
        injected.len()
    );
    assert!(
        injected.iter().all(|(_, op, _)| *op == Op::PutAction),
        "only the chosen op"
    );
    let refused = injected
        .iter()
        .filter(|(_, _, k)| *k == FaultKind::throttled())
        .count();
    assert_eq!(
        log.len(),
        200 - refused,
        "refused puts wrote nothing, lost answers did write"
    );
    let other = chaotic_run(chaos(43)).await;
    assert_ne!(first.0, other.0, "another seed, other failures");
}
