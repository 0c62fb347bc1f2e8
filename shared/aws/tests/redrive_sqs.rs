//! The dead-letter redrive contract on SQS (moto): `SqsQueueAdmin` over a FIFO seat queue and a
//! standard event queue made by the same definitions the template mirrors, each with its
//! dead-letter queue. Two admins hold separate clients, as two API instances do.
//!
//! Needs the emulators (`eval "$(scripts/emulators.sh start)"`); without them every test here
//! fails saying how to start them.

use async_trait::async_trait;
use seatgate::config::Timing;
use seatgate::domain::{IntentEvent, SeatMessage};
use seatgate::ports::{QueueAdmin, QueueConsumer};
use seatgate_aws::events::{EventQueueDefinition, SqsEventQueue, create_event_queues};
use seatgate_aws::queue_admin::{QueuePair, SqsQueueAdmin};
use seatgate_aws::sqs::{QueueDefinition, SqsSeatQueue, create_queues, delete_queue};
use seatgate_testkit::redrive::{self, RedriveHarness};
use seatgate_testkit::setup;
use std::sync::Arc;
use std::time::Duration;

struct Sqs {
    client: aws_sdk_sqs::Client,
    seat: QueuePair,
    events: QueuePair,
}

impl Sqs {
    async fn new() -> Self {
        let client = setup::sqs().await;
        let timing = Timing::fast();
        let (queue_url, dead_letter_url) = create_queues(
            &client,
            &setup::unique("seatgate-redrive-"),
            &QueueDefinition::for_timing(&timing),
        )
        .await
        .expect("create_queues");
        let seat = QueuePair {
            queue_url,
            dead_letter_url,
        };
        let (queue_url, dead_letter_url) = create_event_queues(
            &client,
            &setup::unique("seatgate-redrive-events-"),
            &EventQueueDefinition::default(),
        )
        .await
        .expect("create_event_queues");
        let events = QueuePair {
            queue_url,
            dead_letter_url,
        };
        Sqs {
            client,
            seat,
            events,
        }
    }

    async fn delete(self) {
        for url in [
            &self.seat.queue_url,
            &self.seat.dead_letter_url,
            &self.events.queue_url,
            &self.events.dead_letter_url,
        ] {
            let _ = delete_queue(&self.client, url).await;
        }
    }
}

#[async_trait]
impl RedriveHarness for Sqs {
    fn admins(&self) -> [Arc<dyn QueueAdmin>; 2] {
        // A client each: two instances share no connection pool.
        let admin = || {
            let client = aws_sdk_sqs::Client::from_conf(self.client.config().clone());
            Arc::new(SqsQueueAdmin::new(
                client,
                self.seat.clone(),
                self.events.clone(),
            )) as Arc<dyn QueueAdmin>
        };
        [admin(), admin()]
    }

    fn seat_consumer(&self) -> Arc<dyn QueueConsumer> {
        Arc::new(
            SqsSeatQueue::new(self.client.clone(), &self.seat.queue_url)
                .with_wait(Duration::from_secs(1)),
        )
    }

    fn event_consumer(&self) -> Arc<dyn QueueConsumer> {
        Arc::new(
            SqsEventQueue::new(self.client.clone(), &self.events.queue_url)
                .with_wait(Duration::from_secs(1)),
        )
    }

    async fn bury_seat_messages(&self, messages: &[SeatMessage]) {
        let (seats, events) = (&self.seat.dead_letter_url, &self.events.dead_letter_url);
        redrive::bury_on_sqs(&self.client, seats, events, messages, &[]).await;
    }

    async fn bury_events(&self, dead: &[IntentEvent]) {
        let (seats, events) = (&self.seat.dead_letter_url, &self.events.dead_letter_url);
        redrive::bury_on_sqs(&self.client, seats, events, &[], dead).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redrive_moves_each_dead_letter_once() {
    let h = Sqs::new().await;
    redrive::redrive_moves_each_dead_letter_once(&h).await;
    h.delete().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redrive_stops_at_its_limit_and_says_more() {
    let h = Sqs::new().await;
    redrive::redrive_stops_at_its_limit_and_says_more(&h).await;
    h.delete().await;
}

/// A redrive that dies after sending but before deleting leaves the message in the dead-letter
/// queue; the next redrive sends it again under the same deduplication id, and the FIFO seat
/// queue keeps one copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_sent_back_twice_arrives_once() {
    let h = Sqs::new().await;
    let messages = redrive::seat_messages(1, 1);
    h.bury_seat_messages(&messages).await;
    // What the dying redrive did: received, and sent back under the dead letter's message id.
    let got = h
        .client
        .receive_message()
        .queue_url(&h.seat.dead_letter_url)
        .visibility_timeout(0)
        .send()
        .await
        .unwrap();
    let dead = &got.messages()[0];
    h.client
        .send_message()
        .queue_url(&h.seat.queue_url)
        .message_body(dead.body().unwrap())
        .message_group_id(messages[0].group_id())
        .message_deduplication_id(dead.message_id().unwrap())
        .send()
        .await
        .unwrap();
    let [admin, _] = h.admins();
    assert_eq!(admin.redrive(10).await.unwrap().seat_messages, 1);
    let arrived = redrive::drain(&*h.seat_consumer(), 1, Duration::from_secs(10)).await;
    assert_eq!(arrived.len(), 1, "one copy: {arrived:?}");
    h.delete().await;
}
