//! A won seat's lost races, closed together: the fan-out from the open-intent index once a
//! group finds its seat taken, and the batch read that lets their messages go with no write.
//!
//! Both are shortcuts over the message path, never instead of it: every close is the same
//! conditional lost-race transition a message would write, so an intent the index misses (not
//! yet in a lagging GSI, past the bound, a write that failed) is closed by its own message.

use super::{QueueRecord, Worker, parse};
use crate::domain::{IntentId, Transition, TransitionRequest};
use crate::metrics::record;
use crate::ports::TransitionError;
use crate::service::with_retry;
use futures::StreamExt;
use tracing::{info, warn};

/// The most open intents one won seat closes at once (one page of the open index per shard);
/// any beyond close by their own messages.
const LOSERS_PER_WIN: usize = 1_000;

/// Lost races closed concurrently by a won seat's fan-out: enough that a thousand close in a
/// few dozen round trips, few enough that one win does not crowd the table's other writers.
const LOSER_CLOSES_AT_ONCE: usize = 32;

impl Worker {
    /// Closes the seat's other REQUESTED intents `FAILED_RACE` at once, each by its own
    /// conditional transition pinned to the copy the open index returned (so one that moved on
    /// since is refused, as its own message's close would be), at most [`LOSER_CLOSES_AT_ONCE`]
    /// at a time and [`LOSERS_PER_WIN`] in all. Best effort: an intent this misses (not yet in
    /// the index, beyond the bound, a write that failed) is closed by its own message as before.
    /// The batch's own messages are left to the group, which closes them itself.
    pub(super) async fn close_losers(
        &self,
        seat_id: &crate::domain::SeatId,
        in_batch: &[IntentId],
    ) {
        let open = match with_retry(&*self.random, || {
            self.intents.open_on_seat(seat_id, LOSERS_PER_WIN)
        })
        .await
        {
            Ok(open) => open,
            Err(e) => {
                warn!(error = %e, "could not list the seat's open intents; each closes by its own message");
                return;
            }
        };
        let now = self.clock.now();
        let closes: Vec<_> = open
            .into_iter()
            .filter(|i| !in_batch.contains(&i.intent_id))
            .map(|intent| async move {
                let close =
                    TransitionRequest::new(intent.intent_id.clone(), now, Transition::lost_race())
                        .seen_as(&intent);
                match with_retry(&*self.random, || self.intents.transition(&close)).await {
                    Ok(closed) => {
                        record::if_terminal(&closed);
                        1
                    }
                    Err(TransitionError::Store(e)) => {
                        warn!(intent_id = %intent.intent_id, error = %e, "lost race not closed; its message will");
                        0
                    }
                    Err(_) => 0,
                }
            })
            .collect();
        let closed: usize = futures::stream::iter(closes)
            .buffer_unordered(LOSER_CLOSES_AT_ONCE)
            .collect::<Vec<usize>>()
            .await
            .into_iter()
            .sum();
        if closed > 0 {
            info!(closed, "seat taken: its other open intents closed together");
        }
    }

    /// The seat was won before this batch, and its winner closed the seat's open intents
    /// together ([`Self::close_losers`]): one batch read finds the messages whose intents are
    /// already terminal (final, so even a stale read may be trusted for that), and they cost
    /// nothing more than their delete, not a refused write each. Best effort: on a failed read
    /// every message is closed by its own conditional write, as before.
    pub(super) async fn skip_closed(&self, rest: &[&QueueRecord], settled: &mut [bool]) {
        let ids: Vec<IntentId> = rest
            .iter()
            .zip(settled.iter())
            .filter(|(_, done)| !**done)
            .filter_map(|(r, _)| parse(r).ok())
            .map(|m| m.intent_id)
            .collect();
        if ids.is_empty() || ids.len() > crate::ports::MAX_BATCH_READ {
            return;
        }
        let found = match with_retry(&*self.random, || self.intents.intents(&ids)).await {
            Ok(found) => found,
            Err(e) => {
                warn!(error = %e, "could not read the batch's intents; each is closed by its own write");
                return;
            }
        };
        for (record, done) in rest.iter().zip(settled.iter_mut()) {
            let Ok(message) = parse(record) else { continue };
            if found
                .iter()
                .any(|i| i.intent_id == message.intent_id && i.status.is_terminal())
            {
                *done = true;
            }
        }
    }
}
