//! Outbox events reach subscribers at least once, signed, with a stable event id, through the
//! event queue: the relay enqueues, the deliverer posts, and a slow subscriber never holds up the
//! relay.
//!
//! A small receiver on 127.0.0.1 records what arrives and can be told to fail; the relay runs on
//! real intent changes.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use seatgate::adapters::clock::SystemClock;
use seatgate::adapters::webhook::{EVENT_ID_HEADER, SIGNATURE_HEADER, Webhook, verify};
use seatgate::config::Timing;
use seatgate::domain::{
    ActionId, Change, Event, Intent, IntentChange, IntentId, IntentStatus, Millis, SeatId,
    SeatMessage, Secret, UserId,
};
use seatgate::ports::{EventQueue, HandBack, QueueError, SeatQueue};
use seatgate::service::{Deliverer, EventRecord, Relay};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use std::time::Instant;

#[derive(Default)]
struct Receiver {
    /// Answer 500 to this many requests first.
    fail_first: AtomicU32,
    seen: Mutex<Vec<(HeaderMap, Bytes)>>,
}

async fn receive(State(r): State<Arc<Receiver>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    r.seen.lock().unwrap().push((headers, body));
    let left = r.fail_first.load(Ordering::SeqCst);
    if left > 0 {
        r.fail_first.store(left - 1, Ordering::SeqCst);
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    StatusCode::NO_CONTENT
}

async fn receiver(fail_first: u32) -> (Arc<Receiver>, String) {
    let r = Arc::new(Receiver {
        fail_first: AtomicU32::new(fail_first),
        ..Receiver::default()
    });
    let app = Router::new()
        .route("/hook", post(receive))
        .with_state(r.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (r, url)
}

/// Records sends; the relay's queue side is not under test here.
#[derive(Default)]
struct Sent(Mutex<Vec<SeatMessage>>);

#[async_trait::async_trait]
impl SeatQueue for Sent {
    async fn send(&self, message: &SeatMessage) -> Result<(), QueueError> {
        self.0.lock().unwrap().push(message.clone());
        Ok(())
    }
}

fn intent(status: IntentStatus, version: u64) -> Intent {
    let now = Millis::now();
    let mut i = Intent::requested(
        IntentId::parse("0192d0f5-0000-7000-8000-0000000000aa").unwrap(),
        UserId::parse("u1").unwrap(),
        SeatId::parse("A-12").unwrap(),
        ActionId::generate(),
        now,
        now,
    );
    i.status = status;
    i.version = version;
    i
}

fn terminal_change() -> Change {
    let mut done = intent(IntentStatus::Succeeded, 3);
    done.charge_id = Some("ch-1".into());
    IntentChange {
        old: Some(intent(IntentStatus::Reserving, 2)),
        new: Some(done),
    }
    .into()
}

/// The event queue, recorded: what the relay enqueued, as the delivery function would receive it.
#[derive(Default)]
struct Events(Mutex<Vec<Event>>);

#[async_trait::async_trait]
impl EventQueue for Events {
    async fn enqueue(&self, event: &Event) -> Result<(), QueueError> {
        self.0.lock().unwrap().push(event.clone());
        Ok(())
    }
}

impl Events {
    /// The queued events as the event source mapping delivers them, on their `receive`-th receive.
    fn records(&self, receive: u32) -> Vec<EventRecord> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|e| EventRecord {
                message_id: format!("m-{}", e.event_id()),
                body: serde_json::to_string(e).unwrap(),
                receipt: format!("r-{}-{receive}", e.event_id()),
                receive_count: receive,
            })
            .collect()
    }
}

/// Records hand-backs: which receipts, after how long.
#[derive(Default)]
struct HandedBack(Mutex<Vec<(String, Duration)>>);

#[async_trait::async_trait]
impl HandBack for HandedBack {
    async fn hand_back(&self, receipts: &[String], after: Duration) -> Result<(), QueueError> {
        let mut seen = self.0.lock().unwrap();
        seen.extend(receipts.iter().map(|r| (r.clone(), after)));
        Ok(())
    }
}

#[tokio::test]
async fn terminal_events_are_signed_and_redelivered_until_accepted() {
    let (rx, url) = receiver(1).await;
    let key = Secret::new("whsec-test-key");
    let webhook = Webhook::new(url, key.clone(), Duration::from_secs(2)).unwrap();
    let queue = Arc::new(Sent::default());
    let events = Arc::new(Events::default());
    let relay = Relay::new(queue.clone(), events.clone(), Arc::new(SystemClock));
    let change = terminal_change();

    // The relay only enqueues the event; the subscriber is not on its path.
    let relayed = relay.handle(std::slice::from_ref(&change)).await;
    assert!(relayed[0].is_ok());
    assert_eq!(events.0.lock().unwrap().len(), 1);

    let timing = Timing::fast();
    let handed_back = Arc::new(HandedBack::default());
    let deliverer = Deliverer::new(Arc::new(webhook), Some(handed_back.clone()), &timing);
    // First delivery fails at the receiver: reported, and handed back after the first backoff.
    let first = events.records(1);
    assert_eq!(
        deliverer.handle_batch(&first).await,
        vec![first[0].message_id.clone()]
    );
    assert_eq!(
        *handed_back.0.lock().unwrap(),
        vec![(first[0].receipt.clone(), timing.delivery_backoff_base)]
    );
    // The redelivery is accepted.
    assert!(deliverer.handle_batch(&events.records(2)).await.is_empty());

    let seen = rx.seen.lock().unwrap();
    assert_eq!(
        seen.len(),
        2,
        "delivered at least once: the failed try and the retry"
    );
    let ids: Vec<&str> = seen
        .iter()
        .map(|(h, _)| h.get(EVENT_ID_HEADER).unwrap().to_str().unwrap())
        .collect();
    assert_eq!(ids[0], ids[1], "the event id is stable across redeliveries");
    assert_eq!(ids[0], "0192d0f5-0000-7000-8000-0000000000aa:3");
    for (headers, body) in seen.iter() {
        let signature = headers.get(SIGNATURE_HEADER).unwrap().to_str().unwrap();
        assert!(verify(&key, signature, body), "signature verifies");
        assert!(!verify(&Secret::new("other"), signature, body));
        let event: serde_json::Value = serde_json::from_slice(body).unwrap();
        assert_eq!(event["type"], "intent.succeeded");
        assert_eq!(event["status"], "SUCCEEDED");
        assert_eq!(event["charge_id"], "ch-1");
        let text = String::from_utf8_lossy(body);
        assert!(!text.contains("whsec-test-key"), "no secret in the payload");
    }
    assert!(
        queue.0.lock().unwrap().is_empty(),
        "terminal intents are not enqueued"
    );
}

#[tokio::test]
async fn non_terminal_changes_and_replays_of_the_same_version_publish_nothing() {
    let queue = Arc::new(Sent::default());
    let events = Arc::new(Events::default());
    let relay = Relay::new(queue.clone(), events.clone(), Arc::new(SystemClock));
    let requested = IntentChange {
        old: None,
        new: Some(intent(IntentStatus::Requested, 1)),
    };
    let same_version = IntentChange {
        old: Some(intent(IntentStatus::Succeeded, 3)),
        new: Some(intent(IntentStatus::Succeeded, 3)),
    };
    let results = relay.handle(&[requested.into(), same_version.into()]).await;
    assert!(results.iter().all(Result::is_ok));
    assert!(events.0.lock().unwrap().is_empty());
    let sent = queue.0.lock().unwrap();
    assert_eq!(sent.len(), 1, "the REQUESTED intent is enqueued once");
    assert_eq!(sent[0].dedup_id(), "0192d0f5-0000-7000-8000-0000000000aa:1");
    assert_eq!(sent[0].group_id(), "A-12");
}

/// A subscriber that is down, then slow, while confirms keep arriving: delivery retries it with
/// a backoff, and the relay's time from a change to its enqueue does not move.
#[tokio::test]
async fn a_down_then_slow_subscriber_never_delays_the_relay() {
    let slow = Router::new().route(
        "/hook",
        post(|| async {
            tokio::time::sleep(Duration::from_millis(1_500)).await;
            StatusCode::NO_CONTENT
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let slow_url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, slow).await.unwrap() });
    // Nothing listens there: a subscriber that is down.
    let down = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let down_url = format!("http://{}/hook", down.local_addr().unwrap());
    drop(down);

    let queue = Arc::new(Sent::default());
    let events = Arc::new(Events::default());
    let relay = Relay::new(queue.clone(), events.clone(), Arc::new(SystemClock));
    let timing = Timing::fast();
    for (url, wanted_failures) in [(down_url, 1), (slow_url, 0)] {
        let webhook = Webhook::new(url, Secret::new("k"), Duration::from_secs(3)).unwrap();
        let deliverer = Arc::new(Deliverer::new(Arc::new(webhook), None, &timing));
        events.0.lock().unwrap().clear();
        relay.handle(std::slice::from_ref(&terminal_change())).await;
        let pending = events.records(1);
        let delivering = tokio::spawn({
            let deliverer = deliverer.clone();
            async move { deliverer.handle_batch(&pending).await }
        });
        // Confirms keep arriving while the delivery is stuck on the subscriber.
        for n in 2..12u64 {
            let started = Instant::now();
            let mut requested = intent(IntentStatus::Requested, n);
            requested.intent_id = IntentId::generate();
            let results = relay
                .handle(&[IntentChange {
                    old: None,
                    new: Some(requested),
                }
                .into()])
                .await;
            assert!(results[0].is_ok());
            assert!(
                started.elapsed() < Duration::from_millis(200),
                "relaying took {:?} while the subscriber is slow or down",
                started.elapsed()
            );
        }
        let failed = delivering.await.unwrap();
        assert_eq!(
            failed.len(),
            wanted_failures,
            "down fails (and comes back); slow is accepted"
        );
    }
    assert_eq!(
        queue.0.lock().unwrap().len(),
        20,
        "every REQUESTED intent was enqueued"
    );
}

/// An offer made by a return, then lapsed: the relay enqueues `offer.created` and
/// `offer.expired` from the hold's records alone, the deliverer posts them signed under their
/// stable ids, and the hold's other writes (an extension, a replayed image) publish nothing and
/// send nothing to the seat queue.
#[tokio::test]
async fn an_offer_is_announced_when_made_and_when_it_lapses() {
    use seatgate::domain::{
        CheckoutHold, CheckoutTimes, EntryId, FlightId, HoldAction, HoldChange, WaitEntry,
    };
    let (rx, url) = receiver(0).await;
    let key = Secret::new("whsec-offer-key");
    let webhook = Webhook::new(url, key.clone(), Duration::from_secs(2)).unwrap();
    let queue = Arc::new(Sent::default());
    let events = Arc::new(Events::default());
    let relay = Relay::new(queue.clone(), events.clone(), Arc::new(SystemClock));

    let entry = WaitEntry::new(
        EntryId::from_uuid(uuid::Uuid::now_v7()),
        FlightId::parse("KE-1").unwrap(),
        UserId::parse("waiter").unwrap(),
        2,
        Millis(1_000),
    );
    let times = CheckoutTimes::default();
    let (_, offer) = entry.offer(0, &times, Millis(2_000));
    let resolve = |from: &CheckoutHold, action, at| {
        CheckoutHold::resolve(Some(from), None, &from.flight_id, action, Millis(at)).unwrap()
    };
    let extended = CheckoutHold::resolve(
        Some(&offer),
        Some(&offer.user_id),
        &offer.flight_id,
        HoldAction::Extend(times),
        Millis(400_000),
    )
    .unwrap();
    let lapsed = resolve(&extended, HoldAction::Lapse, extended.expires_at.0);
    let changes: Vec<Change> = [
        (None, offer.clone()),
        (Some(offer.clone()), extended.clone()),
        (Some(extended.clone()), lapsed.clone()),
        (Some(lapsed.clone()), lapsed.clone()),
    ]
    .into_iter()
    .map(|(old, new)| {
        Change::Hold(HoldChange {
            old,
            new: Some(new),
        })
    })
    .collect();
    assert!(relay.handle(&changes).await.iter().all(Result::is_ok));
    assert!(
        queue.0.lock().unwrap().is_empty(),
        "offers go to no seat queue"
    );
    let types: Vec<String> = events
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|e| e.event_type().to_owned())
        .collect();
    assert_eq!(types, ["offer.created", "offer.expired"]);

    let deliverer = Deliverer::new(Arc::new(webhook), None, &Timing::fast());
    assert!(deliverer.handle_batch(&events.records(1)).await.is_empty());
    let seen = rx.seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    let deadlines = [offer.expires_at, extended.expires_at];
    for (((headers, body), what), deadline) in
        seen.iter().zip(["created", "expired"]).zip(deadlines)
    {
        let signature = headers.get(SIGNATURE_HEADER).unwrap().to_str().unwrap();
        assert!(verify(&key, signature, body), "signature verifies");
        let id = headers.get(EVENT_ID_HEADER).unwrap().to_str().unwrap();
        assert_eq!(id, format!("offer:{}:{what}", offer.hold_id));
        let event: serde_json::Value = serde_json::from_slice(body).unwrap();
        assert_eq!(event["type"], format!("offer.{what}"));
        assert_eq!(event["entry_id"], entry.entry_id.as_str());
        assert_eq!(event["hold_id"], offer.hold_id.as_str());
        assert_eq!(event["user_id"], "waiter");
        assert_eq!(event["headCount"], 2);
        assert_eq!(
            event["expires_at"],
            Millis::to_rfc3339(deadline),
            "the deadline the offer had when it was {what}"
        );
    }
}
