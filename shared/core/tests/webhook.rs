//! Outbox events reach subscribers at least once, signed, with a stable event id.
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
use seatgate::domain::{
    ActionId, Intent, IntentChange, IntentId, IntentStatus, Millis, SeatId, SeatMessage, Secret,
    UserId,
};
use seatgate::ports::{QueueError, SeatQueue};
use seatgate::service::Relay;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

fn terminal_change() -> IntentChange {
    let mut done = intent(IntentStatus::Succeeded, 3);
    done.charge_id = Some("ch-1".into());
    IntentChange {
        old: Some(intent(IntentStatus::Reserving, 2)),
        new: Some(done),
    }
}

#[tokio::test]
async fn terminal_events_are_signed_and_redelivered_until_accepted() {
    let (rx, url) = receiver(1).await;
    let key = Secret::new("whsec-test-key");
    let webhook = Webhook::new(url, key.clone(), Duration::from_secs(2)).unwrap();
    let queue = Arc::new(Sent::default());
    let relay = Relay::new(queue.clone(), Arc::new(webhook), Arc::new(SystemClock));
    let change = terminal_change();

    // First delivery fails at the receiver: the relay reports the failure (the outbox keeps it).
    let first = relay.handle(std::slice::from_ref(&change)).await;
    assert!(first[0].is_err());
    // The retry is accepted.
    let second = relay.handle(std::slice::from_ref(&change)).await;
    assert!(second[0].is_ok());

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
    let (rx, url) = receiver(0).await;
    let webhook = Webhook::new(url, Secret::new("k"), Duration::from_secs(2)).unwrap();
    let queue = Arc::new(Sent::default());
    let relay = Relay::new(queue.clone(), Arc::new(webhook), Arc::new(SystemClock));
    let requested = IntentChange {
        old: None,
        new: Some(intent(IntentStatus::Requested, 1)),
    };
    let same_version = IntentChange {
        old: Some(intent(IntentStatus::Succeeded, 3)),
        new: Some(intent(IntentStatus::Succeeded, 3)),
    };
    let results = relay.handle(&[requested, same_version]).await;
    assert!(results.iter().all(Result::is_ok));
    assert!(rx.seen.lock().unwrap().is_empty());
    let sent = queue.0.lock().unwrap();
    assert_eq!(sent.len(), 1, "the REQUESTED intent is enqueued once");
    assert_eq!(sent[0].dedup_id(), "0192d0f5-0000-7000-8000-0000000000aa:1");
    assert_eq!(sent[0].group_id(), "A-12");
}
