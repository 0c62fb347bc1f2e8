//! Terminal events leave through the event queue, off the relay's path, and go to the dead-letter
//! queue after their retries when a subscriber never accepts.

use super::common::pipeline;
use seatgate::domain::IntentStatus;
use seatgate::ports::QueueConsumer;
use std::sync::Arc;
use std::time::Duration;

/// A subscriber that never accepts: the event is retried with a backoff, off the relay's path,
/// until the event queue's max receive count parks it as dead (the dead-letter queue).
#[tokio::test]
async fn terminal_events_go_through_the_event_queue_and_dead_letter_after_their_retries() {
    struct Refusing(std::sync::atomic::AtomicU32);
    #[async_trait::async_trait]
    impl seatgate::ports::Subscribers for Refusing {
        async fn publish(
            &self,
            _: &seatgate::domain::Event,
        ) -> Result<(), seatgate::ports::PublishError> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Err(seatgate::ports::PublishError(
                "subscriber answered 500".into(),
            ))
        }
    }
    let p = pipeline().await;
    let u = p.enrol(1).await;
    let id = p.confirm(&u, "EV-1").await;
    p.pump().await;
    assert_eq!(p.status(&id).await, IntentStatus::Succeeded);
    p.relay_outbox().await;

    let events = p.backend.events();
    let refusing = Arc::new(Refusing(Default::default()));
    let deliverer = seatgate::service::Deliverer::new(
        refusing.clone(),
        Some(Arc::new(events.clone())),
        &p.timing,
    );
    let max = p.backend.config().event_max_receive_count;
    for attempt in 1..=max {
        let batch = events.receive(10).await.unwrap();
        assert_eq!(batch.len(), 1, "attempt {attempt}: the event is back");
        assert_eq!(batch[0].receive_count, attempt);
        let event: serde_json::Value = serde_json::from_str(&batch[0].body).unwrap();
        assert_eq!(event["intent_id"], id.as_str());
        assert_eq!(event["status"], "SUCCEEDED");
        let records: Vec<_> = batch
            .iter()
            .map(|d| seatgate::service::EventRecord {
                message_id: d.message_id.clone(),
                body: d.body.clone(),
                receipt: d.receipt.clone(),
                receive_count: d.receive_count,
            })
            .collect();
        assert_eq!(deliverer.handle_batch(&records).await.len(), 1);
        assert!(
            events.receive(10).await.unwrap().is_empty(),
            "not before its backoff"
        );
        p.clock
            .advance(p.timing.delivery_backoff_max + Duration::from_millis(1));
    }
    assert!(
        events.receive(10).await.unwrap().is_empty(),
        "retries are bounded"
    );
    assert_eq!(
        events.dead().await.unwrap().len(),
        1,
        "parked in the dead-letter state"
    );
    assert_eq!(
        refusing.0.load(std::sync::atomic::Ordering::SeqCst),
        max,
        "one post per receive"
    );
}
