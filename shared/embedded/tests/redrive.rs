//! The dead-letter redrive contract on the embedded queues: two backends on one database file,
//! as two runner processes (or two API instances) sharing it.

use async_trait::async_trait;
use seatgate::domain::{IntentEvent, Millis, SeatMessage};
use seatgate::ports::{EventQueue, QueueAdmin, QueueConsumer, SeatQueue};
use seatgate_embedded::{EmbeddedBackend, EmbeddedConfig};
use seatgate_testkit::ManualClock;
use seatgate_testkit::redrive::{self, RedriveHarness};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

const VISIBILITY: Duration = Duration::from_secs(30);

struct Embedded {
    dir: PathBuf,
    clock: Arc<ManualClock>,
    a: EmbeddedBackend,
    b: EmbeddedBackend,
}

impl Drop for Embedded {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Embedded {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("seatgate-redrive-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join("seatgate.sqlite");
        let clock = Arc::new(ManualClock::new(Millis::now()));
        // One receive is all a message gets before the next receive parks it as dead.
        let config = EmbeddedConfig {
            visibility_timeout: VISIBILITY,
            max_receive_count: 1,
            event_visibility_timeout: VISIBILITY,
            event_max_receive_count: 1,
            ..EmbeddedConfig::default()
        };
        let a = EmbeddedBackend::open(&db, clock.clone(), config.clone()).unwrap();
        let b = EmbeddedBackend::open(&db, clock.clone(), config).unwrap();
        Embedded { dir, clock, a, b }
    }

    /// Receives everything receivable until a receive comes back empty.
    async fn receive_all(&self, consumer: &dyn QueueConsumer) {
        while !consumer.receive(100).await.unwrap().is_empty() {}
    }
}

#[async_trait]
impl RedriveHarness for Embedded {
    fn admins(&self) -> [Arc<dyn QueueAdmin>; 2] {
        [Arc::new(self.a.clone()), Arc::new(self.b.clone())]
    }

    fn seat_consumer(&self) -> Arc<dyn QueueConsumer> {
        Arc::new(self.a.clone())
    }

    fn event_consumer(&self) -> Arc<dyn QueueConsumer> {
        Arc::new(self.a.events())
    }

    async fn bury_seat_messages(&self, messages: &[SeatMessage]) {
        for m in messages {
            self.a.send(m).await.unwrap();
        }
        // Received once and never deleted: the next receive after the visibility timeout
        // parks each as dead.
        self.receive_all(&self.a).await;
        self.clock.advance(VISIBILITY + Duration::from_millis(1));
        self.receive_all(&self.a).await;
    }

    async fn bury_events(&self, events: &[IntentEvent]) {
        let queue = self.a.events();
        for e in events {
            queue.enqueue(&e.clone().into()).await.unwrap();
        }
        self.receive_all(&queue).await;
        self.clock.advance(VISIBILITY + Duration::from_millis(1));
        self.receive_all(&queue).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redrive_moves_each_dead_letter_once() {
    redrive::redrive_moves_each_dead_letter_once(&Embedded::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redrive_stops_at_its_limit_and_says_more() {
    redrive::redrive_stops_at_its_limit_and_says_more(&Embedded::new()).await;
}

/// A redriven message is a new message at its group's tail, behind what the group got since.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redriven_message_queues_behind_its_groups_later_messages() {
    let h = Embedded::new();
    let mut messages = redrive::seat_messages(1, 2);
    let later = messages.pop().unwrap();
    h.bury_seat_messages(&messages).await;
    h.a.send(&later).await.unwrap();
    assert_eq!(h.a.redrive(10).await.unwrap().seat_messages, 1);
    let got = redrive::drain(&h.a, 2, Duration::from_secs(5)).await;
    let versions: Vec<u64> = got
        .iter()
        .map(|b| serde_json::from_str::<SeatMessage>(b).unwrap().version)
        .collect();
    assert_eq!(versions, vec![later.version, messages[0].version]);
}
