//! The relay: reads intent changes from the outbox (DynamoDB Streams on AWS, the outbox table
//! locally) and fans them out.
//!
//! - A REQUESTED intent (unless it was put back in line for later, after a busy upstream: the
//!   reaper wakes it when its time comes), or a waiting one that is due, goes to the seat queue with
//!   `MessageGroupId = seat` and `MessageDeduplicationId = intent id + version`, so replaying the
//!   same change is a no-op and a new version (a requeue, a due wait) is a new message.
//! - A change into a terminal state goes onto the event queue as an event with a stable id; a
//!   delivery consumer ([`super::Deliverer`]) posts it to subscribers, off this path, so a slow or
//!   dead subscriber never holds up a REQUESTED intent on its way to the seat queue.
//! - A hold's write that makes or lapses an offer goes onto the event queue as `offer.created`
//!   or `offer.expired` ([`OfferEvent::of`] decides); every other hold write is passed by.
//!
//! Each change is decided from its own item alone (old and new images): records written by one
//! DynamoDB transaction reach the stream independently, so nothing may depend on seeing them
//! together.

use crate::domain::{
    Change, Event, HoldChange, IntentChange, IntentEvent, OfferEvent, SeatMessage,
};
use crate::ports::{Clock, EventQueue, QueueError, SeatQueue};
use futures::StreamExt;
use std::sync::Arc;
use thiserror::Error;
use tracing::{info, warn};

#[derive(Debug, Error)]
pub enum RelayError {
    #[error("enqueue failed: {0}")]
    Queue(#[from] QueueError),
}

pub struct Relay {
    queue: Arc<dyn SeatQueue>,
    events: Arc<dyn EventQueue>,
    clock: Arc<dyn Clock>,
}

/// Changes handled at once. Different intents are independent; order inside a seat's queue
/// follows the order of sends, which for concurrent confirms is arbitrary anyway.
const CONCURRENCY: usize = 16;

impl Relay {
    /// Usually built by [`super::Services::relay`]; the relay alone needs no store, so tests of
    /// it may build one directly.
    pub fn new(
        queue: Arc<dyn SeatQueue>,
        events: Arc<dyn EventQueue>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Relay {
            queue,
            events,
            clock,
        }
    }

    /// Handles each change; the results line up with `changes`.
    pub async fn handle(&self, changes: &[Change]) -> Vec<Result<(), RelayError>> {
        // Collected first so the iterator's closure is not part of the future: keeps it `Send`.
        let each: Vec<_> = changes.iter().map(|c| self.handle_one(c)).collect();
        futures::stream::iter(each)
            .buffered(CONCURRENCY)
            .collect()
            .await
    }

    async fn handle_one(&self, change: &Change) -> Result<(), RelayError> {
        match change {
            Change::Intent(c) => self.intent(c).await,
            Change::Hold(c) => self.hold(c).await,
        }
    }

    async fn hold(&self, change: &HoldChange) -> Result<(), RelayError> {
        let Some(event) = OfferEvent::of(change) else {
            return Ok(());
        };
        let (event_id, entry_id) = (event.event_id.clone(), event.entry_id.clone());
        self.events
            .enqueue(&Event::Offer(event))
            .await
            .inspect_err(|e| {
                warn!(%event_id, %entry_id, error = %e, "event enqueue failed");
            })?;
        Ok(())
    }

    async fn intent(&self, change: &IntentChange) -> Result<(), RelayError> {
        let Some(new) = &change.new else {
            return Ok(());
        };
        let old = change.old.as_ref();
        if old.is_some_and(|o| o.version == new.version) {
            // Not an intent write (a TTL-only or identical image): nothing happened.
            return Ok(());
        }
        let now = self.clock.now();
        if new.is_due_request(now) || new.is_due_wait(now) {
            let message = SeatMessage::for_intent(new);
            self.queue.send(&message).await.inspect_err(|e| {
                warn!(intent_id = %new.intent_id, error = %e, "enqueue failed");
            })?;
            info!(intent_id = %new.intent_id, seat_id = %new.seat_id, version = new.version, "enqueued");
        }
        let was_terminal = old.is_some_and(|o| o.status.is_terminal());
        if new.status.is_terminal() && !was_terminal {
            let event = Event::Intent(IntentEvent::terminal(new));
            self.events.enqueue(&event).await.inspect_err(|e| {
                warn!(intent_id = %new.intent_id, error = %e, "event enqueue failed");
            })?;
        }
        Ok(())
    }
}
