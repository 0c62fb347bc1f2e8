//! The dead-letter redrive contract ([`QueueAdmin`]), run against the embedded queues and SQS
//! (moto): what `POST /admin/dead-letters/redrive` promises operators on either backend.
//!
//! The cases are the ones an incident produces: many dead letters over several seat groups and
//! webhook deliveries beside them, a second instance redriving after the first, more dead
//! letters than one call takes. Each checks what arrives back in the source queues, message by
//! message, not only the counts the call reports. (Two redrives at once are the admin service's
//! to keep apart, under its lease; `infra/local/tests/redrive.rs` presses the route twice at
//! once on both backends.)

use async_trait::async_trait;
use seatgate::domain::{IntentEvent, IntentId, IntentStatus, SeatId, SeatMessage, UserId};
use seatgate::ports::{QueueAdmin, QueueConsumer, Redriven};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One backend's queues, with a way to put messages in their dead-letter queues.
#[async_trait]
pub trait RedriveHarness: Send + Sync {
    /// Two admins on the same queues, as two API instances hold them.
    fn admins(&self) -> [Arc<dyn QueueAdmin>; 2];
    /// Receives (and deletes) from the seat queue.
    fn seat_consumer(&self) -> Arc<dyn QueueConsumer>;
    /// Receives (and deletes) from the event queue.
    fn event_consumer(&self) -> Arc<dyn QueueConsumer>;
    /// Puts `messages` in the seat queue's dead-letter queue, in this order.
    async fn bury_seat_messages(&self, messages: &[SeatMessage]);
    /// Puts `events` in the event queue's dead-letter queue.
    async fn bury_events(&self, events: &[IntentEvent]);
}

/// Puts `messages` and `events` in SQS dead-letter queues by sending them there: a dead-letter
/// queue is an ordinary queue (FIFO for the seat queue's), and this is what SQS's own move after
/// `maxReceiveCount` receives leaves in it (the seat queue's contract tests check that move).
pub async fn bury_on_sqs(
    client: &aws_sdk_sqs::Client,
    seat_dead_letters: &str,
    event_dead_letters: &str,
    messages: &[SeatMessage],
    events: &[IntentEvent],
) {
    for m in messages {
        client
            .send_message()
            .queue_url(seat_dead_letters)
            .message_body(serde_json::to_string(m).unwrap())
            .message_group_id(m.group_id())
            .message_deduplication_id(m.dedup_id())
            .send()
            .await
            .expect("send to the seat dead-letter queue");
    }
    for e in events {
        client
            .send_message()
            .queue_url(event_dead_letters)
            .message_body(serde_json::to_string(e).unwrap())
            .send()
            .await
            .expect("send to the event dead-letter queue");
    }
}

/// `groups` seats with `per_group` messages each (versions 1..), interleaved across seats as a
/// burst of several seats would leave them.
pub fn seat_messages(groups: usize, per_group: usize) -> Vec<SeatMessage> {
    let seats: Vec<(IntentId, SeatId)> = (0..groups)
        .map(|g| {
            let seat = SeatId::parse(&format!("RD-{}-{g}", crate::setup::unique(""))).unwrap();
            (IntentId::generate(), seat)
        })
        .collect();
    let mut out = Vec::with_capacity(groups * per_group);
    for version in 1..=per_group as u64 {
        for (intent_id, seat_id) in &seats {
            out.push(SeatMessage {
                intent_id: intent_id.clone(),
                seat_id: seat_id.clone(),
                version,
                intent: None,
            });
        }
    }
    out
}

/// `n` terminal events of distinct intents.
pub fn events(n: usize) -> Vec<IntentEvent> {
    (0..n)
        .map(|i| {
            let intent_id = IntentId::generate();
            IntentEvent {
                event_id: format!("{intent_id}:3"),
                event_type: "intent.succeeded".into(),
                intent_id,
                user_id: UserId::parse(&format!("redrive-user-{i}")).unwrap(),
                seat_id: SeatId::parse(&format!("RE-{i}")).unwrap(),
                status: IntentStatus::Succeeded,
                charge_id: Some(format!("ch-{i}")),
                reason: None,
                occurred_at: "2026-12-01T00:00:00Z".into(),
            }
        })
        .collect()
}

/// Receives and deletes until `expected` messages came or `patience` ran out, then once more to
/// see that nothing else is there; returns the bodies in arrival order.
pub async fn drain(
    consumer: &dyn QueueConsumer,
    expected: usize,
    patience: Duration,
) -> Vec<String> {
    let deadline = Instant::now() + patience;
    let mut bodies = Vec::new();
    loop {
        let batch = consumer.receive(10).await.expect("receive");
        let receipts: Vec<String> = batch.iter().map(|d| d.receipt.clone()).collect();
        consumer.delete(&receipts).await.expect("delete");
        bodies.extend(batch.into_iter().map(|d| d.body));
        if bodies.len() >= expected {
            // One more look: a duplicate would be here now.
            let extra = consumer.receive(10).await.expect("receive");
            bodies.extend(extra.into_iter().map(|d| d.body));
            return bodies;
        }
        if Instant::now() > deadline {
            return bodies;
        }
    }
}

fn by_group(bodies: &[String]) -> BTreeMap<String, Vec<u64>> {
    let mut groups: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for body in bodies {
        let m: SeatMessage = serde_json::from_str(body).expect("a seat message body");
        groups
            .entry(m.seat_id.to_string())
            .or_default()
            .push(m.version);
    }
    groups
}

/// 100 seat messages over 10 seats and 20 webhook deliveries, dead; one instance redrives.
/// It reports exactly what was dead, the source queues receive each message exactly once (each
/// seat's in its order), the dead-letter queues are empty, and the other instance's redrive
/// then moves nothing.
pub async fn redrive_moves_each_dead_letter_once(h: &dyn RedriveHarness) {
    let messages = seat_messages(10, 10);
    let dead_events = events(20);
    h.bury_seat_messages(&messages).await;
    h.bury_events(&dead_events).await;
    let [a, b] = h.admins();
    let depths = a.depths().await.expect("depths");
    assert_eq!(
        (depths.seat_messages.dead, depths.webhook_deliveries.dead),
        (100, 20),
        "{depths:?}"
    );

    let moved = a.redrive(1000).await.expect("redrive");
    assert_eq!(
        moved,
        Redriven {
            seat_messages: 100,
            webhook_deliveries: 20,
            more: false
        }
    );

    let depths = a.depths().await.expect("depths");
    assert_eq!(
        (depths.seat_messages.dead, depths.webhook_deliveries.dead),
        (0, 0),
        "{depths:?}"
    );
    assert_eq!(depths.seat_messages.ready, 100, "{depths:?}");
    assert_eq!(depths.webhook_deliveries.ready, 20, "{depths:?}");

    let seats = drain(&*h.seat_consumer(), 100, Duration::from_secs(60)).await;
    assert_eq!(seats.len(), 100, "each seat message arrived exactly once");
    let expected: BTreeMap<String, Vec<u64>> = by_group(
        &messages
            .iter()
            .map(|m| serde_json::to_string(m).unwrap())
            .collect::<Vec<_>>(),
    );
    assert_eq!(
        by_group(&seats),
        expected,
        "every message, each seat's in order"
    );

    let delivered = drain(&*h.event_consumer(), 20, Duration::from_secs(60)).await;
    let mut ids: Vec<String> = delivered
        .iter()
        .map(|b| {
            serde_json::from_str::<IntentEvent>(b)
                .expect("an event body")
                .event_id
        })
        .collect();
    ids.sort();
    let mut want: Vec<String> = dead_events.iter().map(|e| e.event_id.clone()).collect();
    want.sort();
    assert_eq!(ids, want, "each webhook delivery arrived exactly once");

    assert_eq!(
        b.redrive(1000).await.expect("the other instance's redrive"),
        Redriven::default(),
        "nothing left to move"
    );
}

/// More dead letters than one call may move: the call moves its limit and says `more`; the
/// next moves the rest and does not.
pub async fn redrive_stops_at_its_limit_and_says_more(h: &dyn RedriveHarness) {
    let messages = seat_messages(3, 5);
    h.bury_seat_messages(&messages).await;
    let [a, _] = h.admins();
    let first = a.redrive(10).await.expect("first redrive");
    assert_eq!((first.seat_messages, first.more), (10, true), "{first:?}");
    let second = a.redrive(10).await.expect("second redrive");
    assert_eq!(
        (second.seat_messages, second.more),
        (5, false),
        "{second:?}"
    );
    let seats = drain(&*h.seat_consumer(), 15, Duration::from_secs(60)).await;
    assert_eq!(seats.len(), 15);
    let expected = by_group(
        &messages
            .iter()
            .map(|m| serde_json::to_string(m).unwrap())
            .collect::<Vec<_>>(),
    );
    assert_eq!(by_group(&seats), expected);
}
