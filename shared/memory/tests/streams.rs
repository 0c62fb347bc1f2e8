//! What only the in-memory backend promises beyond the contract suite: the change stream's
//! at-least-once consumption, its backoff and dead-letter state, its feeding the real relay;
//! the event queue's redelivery, dead letters and redrive; and every queue's bound.

use seatgate::domain::{
    Action, ActionKind, ChangeRecord, ConsentRecord, Event, Intent, IntentEvent, IntentId,
    IntentStatus, Millis, SeatId, SeatMessage, Transition, TransitionRequest, UserId,
};
use seatgate::ports::{
    Actions, Clock, Confirmation, EventQueue, HandBack, Intents, QueueAdmin, QueueConsumer,
    QueueError, SeatQueue, StoreError,
};
use seatgate::service::Relay;
use seatgate_memory::{MemoryBackend, MemoryConfig, Relayed};
use seatgate_testkit::ManualClock;
use std::sync::Arc;
use std::time::Duration;

const START: Millis = Millis(1_767_225_600_000);

fn backend(config: MemoryConfig) -> (MemoryBackend, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(START));
    (MemoryBackend::new(clock.clone(), config), clock)
}

fn wait(n: u32) -> (Intent, ConsentRecord) {
    let intent = Intent::waiting(
        UserId::parse(&format!("user-{n}")).unwrap(),
        SeatId::parse(&format!("W-{n}")).unwrap(),
        START.plus(Duration::from_secs(600)),
        START,
    );
    let consent = ConsentRecord::for_intent(&intent, START);
    (intent, consent)
}

async fn confirmed(store: &MemoryBackend, n: u32) -> Intent {
    let action = Action::prepare(
        UserId::parse(&format!("user-{n}")).unwrap(),
        ActionKind::ReserveSeat,
        SeatId::parse("A-12").unwrap(),
        START,
        Duration::from_secs(300),
    );
    store.put_action(&action).await.unwrap();
    let c = Confirmation::of(
        &action,
        IntentId::generate(),
        &action.user_id,
        START,
        START.plus(Duration::from_secs(60)),
    );
    store.confirm(&c).await.unwrap();
    c.intent
}

#[tokio::test]
async fn change_records_come_until_acknowledged_back_off_when_failed_and_die_at_the_limit() {
    let (store, clock) = backend(MemoryConfig {
        change_max_attempts: 3,
        ..MemoryConfig::default()
    });
    let (intent, consent) = wait(1);
    store.register_wait(&intent, &consent).await.unwrap();
    let first = store.fetch_changes(10).unwrap();
    assert_eq!(first.len(), 1);
    let change = first[0].change.intent().expect("an intent's record");
    assert_eq!(change.new.as_ref(), Some(&intent));
    assert_eq!(change.old, None);
    assert_eq!(
        ChangeRecord::from(first[0].clone()).position,
        first[0].seq.to_string()
    );
    assert_eq!(
        store.fetch_changes(10).unwrap(),
        first,
        "a read: still there"
    );

    store.fail_change(first[0].seq).unwrap();
    assert!(store.fetch_changes(10).unwrap().is_empty(), "backing off");
    clock.advance(Duration::from_millis(100));
    let again = store.fetch_changes(10).unwrap();
    assert_eq!(again[0].attempts, 1);
    store.fail_change(first[0].seq).unwrap();
    clock.advance(Duration::from_millis(200));
    store.fail_change(first[0].seq).unwrap();
    clock.advance(Duration::from_secs(60));
    assert!(store.fetch_changes(10).unwrap().is_empty(), "parked");
    let dead = store.dead_changes();
    assert_eq!((dead.len(), dead[0].attempts), (1, 3));
    assert_eq!(
        (
            store.snapshot().changes_pending,
            store.snapshot().changes_dead
        ),
        (0, 1)
    );

    // A later write's record comes in commit order and goes once acknowledged.
    let (other, consent) = wait(2);
    store.register_wait(&other, &consent).await.unwrap();
    let pending = store.fetch_changes(10).unwrap();
    assert_eq!(pending.len(), 1);
    store.ack_changes(&[pending[0].seq]).unwrap();
    assert!(store.fetch_changes(10).unwrap().is_empty());
    assert_eq!(store.snapshot().changes_pending, 0);
}

#[tokio::test]
async fn the_change_stream_feeds_the_relay_into_the_seat_queue_and_the_event_queue() {
    let (store, clock) = backend(MemoryConfig::default());
    let relay = Relay::new(
        Arc::new(store.clone()),
        Arc::new(store.events()),
        store.clock(),
    );
    let intent = confirmed(&store, 1).await;
    assert_eq!(
        store.relay_once(&relay, 10).await.unwrap(),
        Relayed {
            handled: 1,
            failed: None
        }
    );
    let got = store.receive(10).await.unwrap();
    let message: SeatMessage = serde_json::from_str(&got[0].body).unwrap();
    assert_eq!(message, SeatMessage::for_intent(&intent));
    store.delete(&[got[0].receipt.clone()]).await.unwrap();

    // A terminal transition becomes an event for subscribers.
    let now = clock.now();
    let lost = TransitionRequest::new(intent.intent_id.clone(), now, Transition::lost_race());
    let closed = store.transition(&lost).await.unwrap();
    assert_eq!(closed.status, IntentStatus::FailedRace);
    assert_eq!(store.relay_once(&relay, 10).await.unwrap().handled, 1);
    let events = store.events().receive(10).await.unwrap();
    let event: IntentEvent = serde_json::from_str(&events[0].body).unwrap();
    assert_eq!(event, IntentEvent::terminal(&closed));

    // A relay that cannot send fails the record; it comes again after its backoff.
    let second = confirmed(&store, 2).await;
    store.fail_next(
        seatgate_memory::Op::SeatSend,
        StoreError::Unavailable("sqs down".into()),
        1,
    );
    let pass = store.relay_once(&relay, 10).await.unwrap();
    assert_eq!(pass.handled, 0);
    assert!(pass.failed.is_some());
    assert!(store.receive(10).await.unwrap().is_empty());
    clock.advance(Duration::from_millis(100));
    assert_eq!(store.relay_once(&relay, 10).await.unwrap().handled, 1);
    let got = store.receive(10).await.unwrap();
    let message: SeatMessage = serde_json::from_str(&got[0].body).unwrap();
    assert_eq!(message.intent_id, second.intent_id);
}

#[tokio::test]
async fn events_come_back_until_dead_lettered_and_a_redrive_sends_them_again() {
    let (store, clock) = backend(MemoryConfig {
        event_visibility_timeout: Duration::from_secs(30),
        event_max_receive_count: 2,
        ..MemoryConfig::default()
    });
    let events = store.events();
    let intent = confirmed(&store, 1).await;
    let event = Event::from(IntentEvent::terminal(&intent));
    events.enqueue(&event).await.unwrap();
    for n in 1..=2 {
        let got = events.receive(10).await.unwrap();
        assert_eq!((got.len(), got[0].receive_count), (1, n));
        assert!(events.receive(10).await.unwrap().is_empty(), "invisible");
        if n == 1 {
            // Handed back for later: it returns after the delay, not the visibility timeout.
            events
                .hand_back(&[got[0].receipt.clone()], Duration::from_secs(5))
                .await
                .unwrap();
            clock.advance(Duration::from_secs(5));
        } else {
            clock.advance(Duration::from_secs(30));
        }
    }
    assert!(
        events.receive(10).await.unwrap().is_empty(),
        "dead-lettered"
    );
    assert_eq!(events.dead().len(), 1);
    let depths = store.depths().await.unwrap();
    assert_eq!(depths.webhook_deliveries.dead, 1);

    let moved = store.redrive(10).await.unwrap();
    assert_eq!((moved.webhook_deliveries, moved.more), (1, false));
    let got = events.receive(10).await.unwrap();
    assert_eq!(got[0].receive_count, 1, "a fresh receive count");
    assert_eq!(serde_json::from_str::<Event>(&got[0].body).unwrap(), event);
    events.delete(&[got[0].receipt.clone()]).await.unwrap();
    assert_eq!(
        store.depths().await.unwrap().webhook_deliveries,
        Default::default()
    );
}

#[tokio::test]
async fn every_queue_is_bounded_and_refuses_past_its_bound_without_writing() {
    let (store, _) = backend(MemoryConfig {
        seat_queue_capacity: 2,
        event_queue_capacity: 1,
        change_capacity: 2,
        ..MemoryConfig::default()
    });
    // The change stream: a third intent write waits for the relay.
    for n in 0..2 {
        let (intent, consent) = wait(n);
        store.register_wait(&intent, &consent).await.unwrap();
    }
    let (third, consent) = wait(2);
    let logged = store.write_log().len();
    assert_eq!(
        store.register_wait(&third, &consent).await,
        Err(StoreError::Throttled)
    );
    assert_eq!(store.get_intent(&third.intent_id).await.unwrap(), None);
    assert_eq!(store.write_log().len(), logged, "nothing written");
    let pending: Vec<u64> = store
        .fetch_changes(10)
        .unwrap()
        .iter()
        .map(|p| p.seq)
        .collect();
    store.ack_changes(&pending).unwrap();
    store.register_wait(&third, &consent).await.unwrap();

    // The seat queue: a duplicate is still accepted (and dropped) when full.
    let message = |v| SeatMessage {
        intent_id: third.intent_id.clone(),
        seat_id: third.seat_id.clone(),
        version: v,
        intent: None,
    };
    store.send(&message(1)).await.unwrap();
    store.send(&message(2)).await.unwrap();
    assert_eq!(store.send(&message(3)).await, Err(QueueError::Throttled));
    store.send(&message(1)).await.unwrap();
    let got = store.receive(1).await.unwrap();
    store.delete(&[got[0].receipt.clone()]).await.unwrap();
    store.send(&message(3)).await.unwrap();

    // The event queue.
    let event = Event::from(IntentEvent::terminal(&third));
    store.events().enqueue(&event).await.unwrap();
    assert_eq!(
        store.events().enqueue(&event).await,
        Err(QueueError::Throttled)
    );
}

/// A hold's resolution refused as throttling with nothing written; then the relay drains up to
/// `drain` pending change records, making room.
async fn refused_unwritten_until_drained(
    store: &MemoryBackend,
    resolution: impl std::future::Future<
        Output = Result<seatgate::domain::CheckoutHold, seatgate::ports::ResolveHoldError>,
    >,
    drain: usize,
) {
    let logged = store.write_log().len();
    let refused = resolution.await;
    assert!(
        matches!(
            refused,
            Err(seatgate::ports::ResolveHoldError::Store(
                StoreError::Throttled
            ))
        ),
        "{refused:?}"
    );
    assert_eq!(store.write_log().len(), logged, "nothing written");
    let pending: Vec<u64> = store
        .fetch_changes(drain)
        .unwrap()
        .iter()
        .map(|p| p.seq)
        .collect();
    store.ack_changes(&pending).unwrap();
}

/// A one-seat flight whose seat `holder` holds while `waiter` waits for it.
struct OneHeldOneWaiting {
    flight: seatgate::domain::Flight,
    holder: UserId,
    waiter: UserId,
    hold: seatgate::domain::CheckoutHold,
    entry: seatgate::domain::WaitEntry,
}

async fn one_held_one_waiting(store: &MemoryBackend, flight_id: &str) -> OneHeldOneWaiting {
    use seatgate::domain::{
        BookingId, CheckoutHold, CheckoutTimes, EntryId, Flight, FlightId, HoldId, WaitEntry,
    };
    use seatgate::ports::{CheckoutHolds, Flights, WaitingLists};
    let flight = Flight::new(FlightId::parse(flight_id).unwrap(), 1, None, 1, START).unwrap();
    store.create_flight(&flight).await.unwrap();
    let (holder, waiter) = (
        UserId::parse("holder").unwrap(),
        UserId::parse("waiter").unwrap(),
    );
    let hold = CheckoutHold::new(
        HoldId::from_uuid(uuid::Uuid::now_v7()),
        flight.flight_id.clone(),
        holder.clone(),
        1,
        0,
        BookingId::generate(),
        &CheckoutTimes::default(),
        START,
    );
    store.create_hold(&hold, None, None).await.unwrap();
    let entry = WaitEntry::new(
        EntryId::from_uuid(uuid::Uuid::now_v7()),
        flight.flight_id.clone(),
        waiter.clone(),
        1,
        START,
    );
    store.join_waitlist(&entry, None).await.unwrap();
    OneHeldOneWaiting {
        flight,
        holder,
        waiter,
        hold,
        entry,
    }
}

/// A return (here a release) records its hold and may make up to 16 offers, each a record: it
/// is refused unwritten unless the change stream has room for all of them, and once the relay
/// has drained the stream it applies, its offer recorded.
#[tokio::test]
async fn a_return_needs_room_for_every_offer_it_may_make() {
    use seatgate::domain::waitlist::MAX_OFFERS_PER_RETURN;
    use seatgate::domain::{Change, HoldAction};
    use seatgate::ports::CheckoutHolds;
    let (store, _) = backend(MemoryConfig {
        change_capacity: MAX_OFFERS_PER_RETURN + 1,
        ..MemoryConfig::default()
    });
    let OneHeldOneWaiting {
        flight,
        holder,
        hold,
        entry,
        ..
    } = one_held_one_waiting(&store, "F-ROOM").await;
    // One intent record pending leaves room for 16 records, not 17.
    let (intent, consent) = wait(0);
    store.register_wait(&intent, &consent).await.unwrap();
    let release = || {
        store.resolve_hold(
            &holder,
            &flight.flight_id,
            &hold.hold_id,
            HoldAction::Release,
            START,
        )
    };
    refused_unwritten_until_drained(&store, release(), 10).await;
    release().await.unwrap();
    let recorded = store.fetch_changes(10).unwrap();
    assert!(
        recorded
            .iter()
            .any(|p| matches!(&p.change, Change::Hold(c) if c.new.as_ref().and_then(|h| h.offer_for.as_ref()) == Some(&entry.entry_id))),
        "the offer is recorded: {recorded:?}"
    );
}

/// Every write of an offer's hold is recorded, its confirm too: with the change stream full the
/// confirm is refused unwritten, and once the relay has drained the stream it books.
#[tokio::test]
async fn an_offers_confirm_needs_room_for_its_record() {
    use seatgate::domain::waitlist::MAX_OFFERS_PER_RETURN;
    use seatgate::domain::{Change, HoldAction};
    use seatgate::ports::CheckoutHolds;
    let capacity = MAX_OFFERS_PER_RETURN + 1;
    let (store, _) = backend(MemoryConfig {
        change_capacity: capacity,
        ..MemoryConfig::default()
    });
    let OneHeldOneWaiting {
        flight,
        holder,
        waiter,
        hold,
        ..
    } = one_held_one_waiting(&store, "F-OFFER").await;
    store
        .resolve_hold(
            &holder,
            &flight.flight_id,
            &hold.hold_id,
            HoldAction::Release,
            START,
        )
        .await
        .unwrap();
    let recorded = store.fetch_changes(capacity).unwrap();
    let offer = recorded
        .iter()
        .find_map(|p| match &p.change {
            Change::Hold(c) => c.new.as_ref().filter(|h| h.offer_for.is_some()).cloned(),
            _ => None,
        })
        .expect("the release made an offer");
    // Fill the stream to its bound with intent records.
    for n in 0..capacity - recorded.len() {
        let (intent, consent) = wait(n as u32);
        store.register_wait(&intent, &consent).await.unwrap();
    }
    let confirm = || {
        store.resolve_hold(
            &waiter,
            &flight.flight_id,
            &offer.hold_id,
            HoldAction::Confirm,
            START,
        )
    };
    refused_unwritten_until_drained(&store, confirm(), capacity).await;
    confirm().await.unwrap();
    assert_eq!(
        store.fetch_changes(capacity).unwrap().len(),
        1,
        "the confirm is recorded"
    );
}

/// The feeds a simulated consumer waits on instead of polling (`MemoryBackend::feed`,
/// `next_due`): a send wakes the seat queue's waiter and an empty or a taking receive does
/// not; a received message's visibility is the queue's due time; a delete wakes it again (a
/// group unblocked); an intent write wakes the change stream's waiter; and `quiet` says what a
/// snapshot would.
#[tokio::test]
async fn feeds_wake_their_consumer_on_new_work_and_name_when_time_alone_will() {
    use futures::FutureExt;
    use seatgate_memory::Feed;
    let (store, _clock) = backend(MemoryConfig::default());
    let visibility = store.config().visibility_timeout;
    assert!(store.quiet(), "an empty store");
    // Whether `act` woke a waiter on `feed` that was enabled before it.
    async fn wakes<F: std::future::Future<Output = ()>>(
        store: &MemoryBackend,
        feed: Feed,
        act: F,
    ) -> bool {
        let mut waiter = Box::pin(store.feed(feed).notified());
        waiter.as_mut().enable();
        act.await;
        waiter.now_or_never().is_some()
    }

    let intent = confirmed(&store, 1).await;
    assert!(!store.quiet(), "an intent not terminal");
    let message = SeatMessage::for_intent(&intent);
    assert!(
        wakes(&store, Feed::SeatQueue, async {
            store.send(&message).await.unwrap();
        })
        .await,
        "a send"
    );
    assert_eq!(
        store.next_due(Feed::SeatQueue),
        None,
        "nothing waits on the clock"
    );
    let mut taken = Vec::new();
    assert!(
        !wakes(&store, Feed::SeatQueue, async {
            taken = QueueConsumer::receive(&store, 10).await.unwrap();
        })
        .await,
        "a receive takes work, it gives none"
    );
    assert_eq!(taken.len(), 1);
    assert_eq!(
        store.next_due(Feed::SeatQueue),
        Some(START.plus(visibility)),
        "the visibility runs out"
    );
    assert!(
        !wakes(&store, Feed::SeatQueue, async {
            assert!(QueueConsumer::receive(&store, 10).await.unwrap().is_empty());
        })
        .await,
        "an empty receive"
    );
    assert!(
        wakes(&store, Feed::SeatQueue, async {
            QueueConsumer::delete(&store, &[taken[0].receipt.clone()])
                .await
                .unwrap();
        })
        .await,
        "a delete"
    );
    assert!(
        wakes(&store, Feed::Changes, async {
            confirmed(&store, 2).await;
        })
        .await,
        "an intent write appends a change record"
    );
    assert!(
        !wakes(&store, Feed::Events, async {
            confirmed(&store, 3).await;
        })
        .await,
        "an intent write sends no event"
    );
}

/// The books' sampler is spared a copy only while nothing wrote to them: a booking, a cancel
/// and a flight's creation each make `books_since` give the books again, a write elsewhere (an
/// intent) does not, and what it gives equals `books()`.
#[tokio::test]
async fn books_since_spares_only_an_unchanged_copy() {
    use seatgate::domain::{Booking, BookingId, BookingStatus, Flight, FlightId};
    use seatgate::ports::Flights;
    let (store, _clock) = backend(MemoryConfig::default());
    let before = store.books_since(None).expect("the first sample").writes;
    let flight = Flight::new(FlightId::parse("FL-9").unwrap(), 4, None, 1, START).unwrap();
    assert!(store.create_flight(&flight).await.unwrap());
    let books = store
        .books_since(Some(before))
        .expect("a flight was created");
    let created = books.writes;
    assert_eq!(books.flights.len(), 1);
    assert!(store.books_since(Some(created)).is_none(), "nothing new");
    confirmed(&store, 1).await;
    assert!(
        store.books_since(Some(created)).is_none(),
        "an intent is not the books"
    );
    let user = UserId::parse("user-1").unwrap();
    let booking = Booking {
        booking_id: BookingId::parse("b-1").unwrap(),
        flight_id: flight.flight_id.clone(),
        user_id: user.clone(),
        head_count: 2,
        shard: 0,
        status: BookingStatus::Booked,
        created_at: START,
        cancelled_at: None,
    };
    store.book(&booking, None, None, None).await.unwrap();
    let books = store.books_since(Some(created)).expect("a booking");
    let booked = books.writes;
    assert_eq!(books.bookings.len(), 1);
    assert_eq!(books.flights[0].available, vec![2]);
    store
        .cancel_booking(&user, &flight.flight_id, &booking.booking_id, START)
        .await
        .unwrap();
    let books = store.books_since(Some(booked)).expect("a cancel");
    assert!(books.writes > booked);
    assert_eq!(books, store.books());
}
