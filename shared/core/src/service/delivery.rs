//! Delivery: terminal-intent events from the event queue to subscribers (webhooks), off the
//! relay's path.
//!
//! A batch comes from a standard queue (no order to keep: each event stands alone, with a stable
//! id receivers deduplicate by), so events are posted concurrently. An event a subscriber did not
//! accept is reported failed and handed back to return after a backoff that grows with its
//! receive count; after the queue's max receive count it goes to the dead-letter queue, where an
//! alarm watches. So a subscriber that is down is retried for a bounded time, and never by a hot
//! loop.

use crate::backoff::Backoff;
use crate::config::Timing;
use crate::domain::Event;
use crate::ports::{HandBack, Subscribers};
use futures::StreamExt;
use std::sync::Arc;
use tracing::{info, warn};

/// One event-queue message, as the event source mapping delivers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    pub message_id: String,
    pub body: String,
    /// For handing it back; empty if unknown.
    pub receipt: String,
    /// How many times it has been received, this time included (SQS `ApproximateReceiveCount`).
    pub receive_count: u32,
}

pub struct Deliverer {
    subscribers: Arc<dyn Subscribers>,
    hand_back: Option<Arc<dyn HandBack>>,
    backoff: Backoff,
}

/// Events posted at once.
const CONCURRENCY: usize = 10;

impl Deliverer {
    /// Usually built by [`super::Services::deliverer`].
    pub fn new(
        subscribers: Arc<dyn Subscribers>,
        hand_back: Option<Arc<dyn HandBack>>,
        timing: &Timing,
    ) -> Self {
        Deliverer {
            subscribers,
            hand_back,
            backoff: Backoff::new(timing.delivery_backoff_base, timing.delivery_backoff_max),
        }
    }

    /// Posts each event; returns the message ids to report as batch item failures.
    pub async fn handle_batch(&self, records: &[EventRecord]) -> Vec<String> {
        // Collected first so the iterator's closure is not part of the future: keeps it `Send`.
        let each: Vec<_> = records.iter().map(|r| self.deliver(r)).collect();
        let failed: Vec<&EventRecord> = futures::stream::iter(each)
            .buffer_unordered(CONCURRENCY)
            .filter_map(futures::future::ready)
            .collect()
            .await;
        failed.into_iter().map(|r| r.message_id.clone()).collect()
    }

    /// `None` when delivered (or undeliverable for good, see below); the record otherwise.
    async fn deliver<'a>(&self, record: &'a EventRecord) -> Option<&'a EventRecord> {
        let event: Event = match serde_json::from_str(&record.body) {
            Ok(event) => event,
            Err(e) => {
                // Poison: it fails every time and reaches the dead-letter queue, where it can be
                // read; it is not handed back early.
                warn!(message_id = %record.message_id, error = %e, "malformed event message");
                return Some(record);
            }
        };
        match self.subscribers.publish(&event).await {
            Ok(()) => {
                match &event {
                    Event::Intent(e) => {
                        info!(event_id = %e.event_id, intent_id = %e.intent_id, "event delivered")
                    }
                    Event::Offer(e) => {
                        info!(event_id = %e.event_id, entry_id = %e.entry_id, "event delivered")
                    }
                }
                None
            }
            Err(e) => {
                let after = self.backoff.delay(record.receive_count);
                warn!(event_id = %event.event_id(), error = %e, receive_count = record.receive_count, retry_in_ms = after.as_millis() as u64, "subscriber did not accept the event");
                if let (Some(port), false) = (&self.hand_back, record.receipt.is_empty())
                    && let Err(e) = port
                        .hand_back(std::slice::from_ref(&record.receipt), after)
                        .await
                {
                    warn!(error = %e, "could not hand the event back; it returns after the visibility timeout");
                }
                Some(record)
            }
        }
    }
}
