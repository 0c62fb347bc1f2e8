//! The local stand-ins for what the Lambda service does around the relay, worker and reaper
//! functions: the DynamoDB Streams and SQS event source mappings and the EventBridge schedule.
//!
//! Each loop builds the event the Lambda service would build and calls the very handler the
//! Lambda binary runs (`seatgate::handlers::{stream, queue, schedule}`), then does what the
//! event source mapping does with the answer:
//! - relay: outbox rows in commit order; rows before the reported first failure are
//!   checkpointed (acked), the failed one is marked failed (the backend retries it after a
//!   backoff and parks it after too many attempts), and the rows after it stay pending for the
//!   next pass, as a stream shard hands them again. Relayed rows are deleted after
//!   [`OUTBOX_RETENTION`], a stream's retention period.
//! - worker: every message not reported in `batchItemFailures` is deleted; if the function
//!   times out (the batch is cancelled, as Lambda would kill it) nothing is deleted and the
//!   messages come back after their visibility timeout.
//! - reaper: a fixed-rate schedule, and the breaker's wake-ups (in this process).
//!
//! On the embedded backend the loops wake on the backend's notifications, so a confirm reaches
//! a worker in milliseconds, and also poll at [`POLL_INTERVAL`]: wake-ups are an optimisation,
//! not the mechanism, because another process sharing the database cannot signal this one. On
//! the AWS backend the worker loop is the same with `SqsSeatQueue` as the consumer (its receive
//! long-polls, so no extra pause), and the stream side is [`crate::streams`]. They never panic
//! (errors are logged and the loop carries on after a pause) and stop when the stack's shutdown
//! signal flips, but only between batches, so a batch in flight completes.
//!
//! Messages reported as batch item failures are left alone on both backends, as the Lambda
//! service leaves them: they come back when their visibility timeout ends, which is longer than
//! a lease plus the reaper's grace, so a seat whose attempt had an unknown outcome is settled by
//! the reaper before the rest of its group is tried. Making them visible at once
//! (`ChangeMessageVisibility` 0) would let the next intent in line send a second reserve write
//! for a seat that may already be taken. (moto returns only the last of several failed messages
//! of one group after the timeout, the rest once that one is deleted and out of order; see
//! `infra/aws/EMULATOR-NOTES.md`. Every message is still handled; only the order among them
//! differs from AWS.)

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use seatgate::adapters::wake_timer::WakeTimer;
use seatgate::config::Timing;
use seatgate::handlers::{delivery, queue, schedule, stream};
use seatgate::ports::{Delivery, QueueConsumer};
use seatgate::service::{Deliverer, Reaper, Relay, Worker};
use seatgate_embedded::EmbeddedBackend;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};
use tracing::{error, warn};

/// How often an idle loop looks for work it was not told about.
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// Outbox rows per relay invocation (DynamoDB Streams' default batch size is 100).
pub const RELAY_BATCH: usize = 100;

/// Messages per worker invocation: the SQS FIFO maximum.
pub const WORKER_BATCH: usize = 10;

/// Relayed outbox rows are kept this long, as a DynamoDB stream keeps records for 24 hours,
/// then deleted so a long local run does not grow the file without bound.
pub const OUTBOX_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// How often the relay loop prunes relayed rows.
const PRUNE_EVERY: Duration = Duration::from_secs(600);

/// Pause after an infrastructure error, so a broken database is not spun on.
const ERROR_PAUSE: Duration = Duration::from_millis(500);

/// Waits until `wake` is signalled, `pause` elapses, or shutdown; `true` means shut down.
async fn idle(wake: &Notify, pause: Duration, shutdown: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = wake.notified() => false,
        _ = tokio::time::sleep(pause) => false,
        _ = shutdown.wait_for(|stop| *stop) => true,
    }
}

fn stopping(shutdown: &watch::Receiver<bool>) -> bool {
    *shutdown.borrow()
}

/// The outbox -> relay mapping (DynamoDB Streams on AWS).
pub(crate) async fn relay_loop(
    backend: EmbeddedBackend,
    relay: Arc<Relay>,
    mut shutdown: watch::Receiver<bool>,
) {
    let wake = backend.outbox_notify();
    let mut last_prune: Option<tokio::time::Instant> = None;
    while !stopping(&shutdown) {
        if last_prune.is_none_or(|t| t.elapsed() >= PRUNE_EVERY) {
            last_prune = Some(tokio::time::Instant::now());
            let before = backend.clock().now().minus(OUTBOX_RETENTION);
            if let Err(e) = backend.prune_outbox(before).await {
                warn!(error = %e, "pruning relayed outbox rows failed");
            }
        }
        let pause = match relay_once(&backend, &relay).await {
            Ok(RelayPass::Full) => continue,
            Ok(RelayPass::Drained) => POLL_INTERVAL,
            Ok(RelayPass::Failed) | Err(()) => ERROR_PAUSE,
        };
        if idle(&wake, pause, &mut shutdown).await {
            break;
        }
    }
}

enum RelayPass {
    /// A full batch went through: there may be more right away.
    Full,
    Drained,
    /// A record failed; it and the rest wait for the next pass.
    Failed,
}

async fn relay_once(backend: &EmbeddedBackend, relay: &Relay) -> Result<RelayPass, ()> {
    let rows = backend
        .fetch_outbox(RELAY_BATCH)
        .await
        .map_err(|e| error!(error = %e, "outbox fetch failed"))?;
    if rows.is_empty() {
        return Ok(RelayPass::Drained);
    }
    let full = rows.len() == RELAY_BATCH;
    let seqs: Vec<i64> = rows.iter().map(|r| r.seq).collect();
    let records = rows
        .into_iter()
        .map(seatgate::domain::ChangeRecord::from)
        .collect();
    let first_failed = stream::handle(relay, records).await;
    let failed_seq = first_failed.and_then(|p| p.parse::<i64>().ok());
    let done: Vec<i64> = match failed_seq {
        Some(failed) => seqs.iter().copied().take_while(|s| *s != failed).collect(),
        None => seqs,
    };
    if !done.is_empty() {
        backend
            .ack_outbox(&done)
            .await
            .map_err(|e| error!(error = %e, "outbox ack failed; rows will be relayed again"))?;
    }
    match failed_seq {
        Some(seq) => {
            if let Err(e) = backend.fail_outbox(seq, "relay delivery failed").await {
                error!(error = %e, seq, "marking an outbox row failed did not work");
            }
            Ok(RelayPass::Failed)
        }
        None if full => Ok(RelayPass::Full),
        None => Ok(RelayPass::Drained),
    }
}

/// One SQS event source mapping poller (a unit of Lambda concurrency).
///
/// `idle` is the pause after an empty receive: the embedded queue answers at once, SQS
/// long-polls.
pub(crate) async fn worker_loop(
    consumer: Arc<dyn QueueConsumer>,
    wake: Arc<Notify>,
    idle_pause: Duration,
    worker: Arc<Worker>,
    timing: Timing,
    concurrency: usize,
    mut shutdown: watch::Receiver<bool>,
) {
    while !stopping(&shutdown) {
        let pause = match consumer.receive(WORKER_BATCH).await {
            Ok(batch) if !batch.is_empty() => {
                // The backend wakes one poller per signal; pass the baton so an idle sibling
                // looks for other message groups while this one works.
                if concurrency > 1 {
                    wake.notify_one();
                }
                invoke_worker(consumer.as_ref(), &worker, &timing, batch).await;
                continue;
            }
            Ok(_) => idle_pause,
            Err(e) => {
                error!(error = %e, "queue receive failed");
                ERROR_PAUSE
            }
        };
        if idle(&wake, pause, &mut shutdown).await {
            break;
        }
    }
}

/// The SQS event the Lambda service would deliver for these messages.
pub fn sqs_event(batch: &[Delivery]) -> SqsEvent {
    let mut event = SqsEvent::default();
    for delivery in batch {
        let mut message = SqsMessage::default();
        message.message_id = Some(delivery.message_id.clone());
        message.receipt_handle = Some(delivery.receipt.clone());
        message.body = Some(delivery.body.clone());
        message.event_source = Some("aws:sqs".to_owned());
        message.attributes = HashMap::from([
            ("MessageGroupId".to_owned(), delivery.group_id.clone()),
            (
                "ApproximateReceiveCount".to_owned(),
                delivery.receive_count.to_string(),
            ),
        ]);
        event.records.push(message);
    }
    event
}

/// Receipts to delete after an invocation that reported `failed` message ids. An id that names
/// no message of the batch makes the whole batch fail, as the SQS event source mapping does.
pub fn receipts_to_delete(batch: &[Delivery], failed: &HashSet<String>) -> Vec<String> {
    let known = failed
        .iter()
        .all(|id| batch.iter().any(|d| &d.message_id == id));
    if !known {
        return Vec::new();
    }
    batch
        .iter()
        .filter(|d| !failed.contains(&d.message_id))
        .map(|d| d.receipt.clone())
        .collect()
}

async fn invoke_worker(
    consumer: &dyn QueueConsumer,
    worker: &Worker,
    timing: &Timing,
    batch: Vec<Delivery>,
) {
    let event = sqs_event(&batch);
    let response =
        match tokio::time::timeout(timing.worker_timeout, queue::handle(worker, event)).await {
            Ok(response) => response,
            Err(_) => {
                warn!(
                    messages = batch.len(),
                    timeout_ms = timing.worker_timeout.as_millis() as u64,
                    "worker invocation timed out; its messages return after the visibility timeout"
                );
                return;
            }
        };
    delete_succeeded(consumer, &batch, response).await;
}

/// Deletes the messages of `batch` an invocation did not report as failed. Not deleted means
/// delivered again, which both consumers tolerate (a stale seat message is a no-op; an event is
/// deduplicated by its id).
async fn delete_succeeded(
    consumer: &dyn QueueConsumer,
    batch: &[Delivery],
    response: SqsBatchResponse,
) {
    let failed: HashSet<String> = response
        .batch_item_failures
        .into_iter()
        .map(|f| f.item_identifier)
        .collect();
    let receipts = receipts_to_delete(batch, &failed);
    if receipts.is_empty() {
        return;
    }
    if let Err(e) = consumer.delete(&receipts).await {
        error!(error = %e, "deleting processed messages failed");
    }
}

/// The event queue's SQS event source mapping: batches of terminal-intent events to the
/// delivery handler, the delivered ones deleted. Polls at `idle_pause` when there is nothing (the
/// embedded queue has no wake-up signal for events; SQS long-polls).
pub(crate) async fn delivery_loop(
    consumer: Arc<dyn QueueConsumer>,
    idle_pause: Duration,
    deliverer: Arc<Deliverer>,
    timeout: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let never = Notify::new();
    while !stopping(&shutdown) {
        let pause = match consumer.receive(WORKER_BATCH).await {
            Ok(batch) if !batch.is_empty() => {
                let event = sqs_event(&batch);
                match tokio::time::timeout(timeout, delivery::handle(&deliverer, event)).await {
                    Ok(response) => delete_succeeded(consumer.as_ref(), &batch, response).await,
                    Err(_) => warn!(
                        events = batch.len(),
                        "delivery invocation timed out; its events return after the visibility timeout"
                    ),
                }
                continue;
            }
            Ok(_) => idle_pause,
            Err(e) => {
                error!(error = %e, "event queue receive failed");
                ERROR_PAUSE
            }
        };
        if idle(&never, pause, &mut shutdown).await {
            break;
        }
    }
}

/// The EventBridge schedule that invokes the reaper, and the wake-up queue beside it: a
/// wake-up that comes due between ticks (the breaker's probe time, a pause's end, a probe that
/// found the upstream back) runs [`schedule::handle_event`]'s wake run at once. Bound: a run
/// per tick and per wake-up time asked.
pub(crate) async fn reaper_loop(
    reaper: Arc<Reaper>,
    wakes: Arc<WakeTimer>,
    interval: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let asked = wakes.changed().notified();
        tokio::pin!(asked);
        asked.as_mut().enable();
        let until_wake = wakes
            .next()
            .map(|at| at.since(seatgate::domain::Millis::now()));
        let woken = tokio::select! {
            _ = ticks.tick() => false,
            () = tokio::time::sleep(until_wake.unwrap_or(interval)), if until_wake.is_some() => {
                if !wakes.take_due(seatgate::domain::Millis::now()) {
                    continue;
                }
                true
            }
            () = &mut asked => continue,
            _ = shutdown.wait_for(|stop| *stop) => break,
        };
        let run = if woken {
            reaper.wake(schedule::PASS_LIMIT).await
        } else {
            schedule::handle(&reaper).await
        };
        if let Err(e) = run {
            error!(error = %e, woken, "reaper run failed; next tick");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(id: &str, group: &str) -> Delivery {
        Delivery {
            message_id: id.into(),
            receipt: format!("r-{id}"),
            body: "{}".into(),
            group_id: group.into(),
            receive_count: 2,
        }
    }

    #[test]
    fn the_event_carries_what_the_worker_handler_reads() {
        let event = sqs_event(&[delivery("m1", "A-1")]);
        let records = queue::records(&event);
        assert_eq!(records[0].message_id, "m1");
        assert_eq!(records[0].group_id, "A-1");
        assert_eq!(event.records[0].attributes["ApproximateReceiveCount"], "2");
    }

    #[test]
    fn only_unreported_messages_are_deleted_and_unknown_ids_fail_the_batch() {
        let batch = [
            delivery("m1", "A"),
            delivery("m2", "A"),
            delivery("m3", "B"),
        ];
        let failed = HashSet::from(["m2".to_owned()]);
        assert_eq!(receipts_to_delete(&batch, &failed), ["r-m1", "r-m3"]);
        let unknown = HashSet::from([String::new()]);
        assert!(receipts_to_delete(&batch, &unknown).is_empty());
    }
}
