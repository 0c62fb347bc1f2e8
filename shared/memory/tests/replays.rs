//! The replay mode (`MemoryBackend::set_replays`): a relay pass whose acknowledgement is lost
//! relays the same records again, at most `max_replays` times, and then progresses; a seat
//! send of a remembered deduplication id passes as a second message. Each test also runs the
//! same calls with the mode off, so it would fail were the knob's effect removed.

use seatgate::domain::{Action, ActionKind, Intent, IntentId, Millis, SeatId, SeatMessage, UserId};
use seatgate::ports::{Actions, Confirmation, QueueConsumer, SeatQueue};
use seatgate::service::Relay;
use seatgate_memory::{MemoryBackend, MemoryConfig, ReplayCounts, Replays};
use seatgate_testkit::ManualClock;
use std::sync::Arc;
use std::time::Duration;

const START: Millis = Millis(1_767_225_600_000);

fn backend() -> MemoryBackend {
    MemoryBackend::new(Arc::new(ManualClock::new(START)), MemoryConfig::default())
}

fn relay(store: &MemoryBackend) -> Relay {
    Relay::new(
        Arc::new(store.clone()),
        Arc::new(store.events()),
        store.clock(),
    )
}

async fn confirmed(store: &MemoryBackend, n: u32) -> Intent {
    let action = Action::prepare(
        UserId::parse(&format!("user-{n}")).unwrap(),
        ActionKind::ReserveSeat,
        SeatId::parse(&format!("A-{n}")).unwrap(),
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

fn every_ack_lost(max_replays: u32) -> Replays {
    Replays {
        seed: 7,
        lost_ack_rate: 1.0,
        max_replays,
        duplicate_rate: 0.0,
    }
}

/// Relays until nothing is pending; the sequence numbers each pass fetched. Bounded: 10 passes.
async fn drain(store: &MemoryBackend, relay: &Relay) -> Vec<Vec<u64>> {
    let mut passes = Vec::new();
    for _ in 0..10 {
        let pending: Vec<u64> = store
            .fetch_changes(10)
            .unwrap()
            .iter()
            .map(|p| p.seq)
            .collect();
        if pending.is_empty() {
            break;
        }
        let relayed = store.relay_once(relay, 10).await.unwrap();
        assert_eq!(relayed.handled, pending.len(), "the relay handled them all");
        passes.push(pending);
    }
    passes
}

#[tokio::test]
async fn a_pass_whose_ack_is_lost_relays_the_same_records_again_then_progresses() {
    let store = backend();
    let relay = relay(&store);
    store.set_replays(Some(every_ack_lost(2)));
    confirmed(&store, 1).await;
    confirmed(&store, 2).await;
    let passes = drain(&store, &relay).await;
    assert_eq!(
        passes.len(),
        3,
        "twice replayed, then acknowledged: {passes:?}"
    );
    assert!(passes.iter().all(|p| p == &passes[0]), "{passes:?}");
    assert_eq!(
        store.replay_counts(),
        ReplayCounts {
            lost_acks: 2,
            replayed_records: 4,
            duplicates: 0,
            event_duplicates: 0,
        }
    );
    let log = store.write_log();
    assert_eq!(
        log.iter()
            .filter(|l| l.starts_with("relay_ack_lost "))
            .count(),
        2,
        "each lost acknowledgement is in the write log"
    );
    // The replayed records sent their seat messages again, which deduplication dropped.
    assert_eq!(store.receive(10).await.unwrap().len(), 2);

    // A later record is replayed afresh; the earlier ones are gone.
    confirmed(&store, 3).await;
    let later = drain(&store, &relay).await;
    assert_eq!(later.len(), 3);
    assert_eq!(later[0].len(), 1);

    // The same calls with the mode off: one pass each.
    let plain = backend();
    let relay = self::relay(&plain);
    confirmed(&plain, 1).await;
    confirmed(&plain, 2).await;
    assert_eq!(drain(&plain, &relay).await.len(), 1);
    assert_eq!(plain.replay_counts(), ReplayCounts::default());
}

#[tokio::test]
async fn lost_acks_stop_with_the_mode_and_strike_about_their_rate() {
    let store = backend();
    let relay = relay(&store);
    store.set_replays(Some(Replays {
        seed: 11,
        lost_ack_rate: 0.25,
        max_replays: 1,
        duplicate_rate: 0.0,
    }));
    // Bounded: 400 intents, each drained in at most 2 passes (one replay at most).
    let mut passes = 0;
    for n in 0..400 {
        confirmed(&store, 1_000 + n).await;
        let p = drain(&store, &relay).await.len();
        assert!((1..=2).contains(&p));
        passes += p;
    }
    let counts = store.replay_counts();
    assert_eq!(passes as u64, 400 + counts.lost_acks);
    assert!(
        (70..=130).contains(&counts.lost_acks),
        "{counts:?} of 400 at 25%"
    );
    store.heal();
    confirmed(&store, 9_999).await;
    assert_eq!(drain(&store, &relay).await.len(), 1, "healed: no replay");
    assert_eq!(store.replay_counts(), counts);
}

#[tokio::test]
async fn a_duplicate_send_past_dedup_yields_a_second_message() {
    let store = backend();
    let intent = confirmed(&store, 1).await;
    let message = SeatMessage::for_intent(&intent);
    store.set_replays(Some(Replays {
        seed: 3,
        lost_ack_rate: 0.0,
        max_replays: 2,
        duplicate_rate: 1.0,
    }));
    store.send(&message).await.unwrap();
    assert_eq!(
        store.replay_counts().duplicates,
        0,
        "a first send is no duplicate"
    );
    store.send(&message).await.unwrap();
    assert_eq!(store.replay_counts().duplicates, 1);
    let got = store.receive(10).await.unwrap();
    assert_eq!(got.len(), 2, "the duplicate is a second message");
    assert_ne!(got[0].message_id, got[1].message_id);
    assert_eq!(got[0].body, got[1].body);
    assert!(
        store
            .write_log()
            .iter()
            .any(|l| l.starts_with("seat_send.past_dedup ")),
        "the duplicate is in the write log"
    );

    // With the mode off, deduplication drops the resend.
    store.set_replays(None);
    store.send(&message).await.unwrap();
    store
        .delete(&[got[0].receipt.clone(), got[1].receipt.clone()])
        .await
        .unwrap();
    assert!(store.receive(10).await.unwrap().is_empty());
    assert_eq!(store.replay_counts().duplicates, 1);
}

/// An event enqueued with the duplicate knob at 1 comes twice, the same body under two message
/// ids; with the knob off, once.
#[tokio::test]
async fn an_event_duplicated_comes_twice_with_the_same_body() {
    use seatgate::domain::{Event, IntentEvent};
    use seatgate::ports::EventQueue;
    for (knob, copies) in [(None, 1), (Some((7, 1.0)), 2)] {
        let store = backend();
        store.set_event_duplicates(knob);
        let event = Event::Intent(IntentEvent::terminal(&confirmed(&store, 1).await));
        store.events().enqueue(&event).await.unwrap();
        let got = QueueConsumer::receive(&store.events(), 10).await.unwrap();
        assert_eq!(got.len(), copies, "knob {knob:?}");
        assert!(got.iter().all(|d| d.body == got[0].body));
        assert_eq!(store.replay_counts().event_duplicates, copies as u64 - 1);
    }
}
