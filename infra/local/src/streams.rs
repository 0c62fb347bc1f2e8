//! The DynamoDB Streams event source mapping, played against a real stream (AWS or DynamoDB
//! Local) with `aws-sdk-dynamodbstreams`.
//!
//! What the Lambda service does for the relay function, done here in one task:
//! - find the table's stream (`DescribeTable` -> `LatestStreamArn`) and its shards
//!   (`DescribeStream`, paginated), again every [`DISCOVER_EVERY`] and whenever a shard ends,
//!   so shard splits and rotations are followed: a closed shard is read to its end, then its
//!   children; a child is never read before its parent is finished (an item's records stay in
//!   order across the split);
//! - read each shard with `GetRecords` (up to [`BATCH`] records), convert the records with
//!   `seatgate_aws::dynamodb::stream::change_record_from_stream` and call
//!   `seatgate::handlers::stream::handle`, the relay function's own handler;
//! - on a reported failure (`ReportBatchItemFailures`), checkpoint the records before it and
//!   retry from the failed record (`AT_SEQUENCE_NUMBER`) after a backoff; after
//!   [`MAX_RETRY_ATTEMPTS`] retries (the template's `MaximumRetryAttempts`) the record is logged
//!   and skipped, where the event source mapping would send its metadata to the on-failure
//!   destination. The reaper's requeue path covers an intent whose record was skipped;
//! - an empty read waits [`IDLE_PAUSE`] before the next one (DynamoDB Streams allows about five
//!   `GetRecords` per second per shard; Lambda polls four times a second).
//!
//! Checkpoints live in memory. A fresh poller starts every shard at `TRIM_HORIZON`, not
//! `LATEST`: `LATEST` would silently miss what was written before the poller started (the first
//! confirms of a new table, or everything written while the runner was down). The price is that a
//! restarted runner relays the stream's retained records (up to 24 hours on AWS) again. That is
//! harmless because relaying is idempotent: a queue message carries `MessageDeduplicationId =
//! intent id + version` (a replay within SQS's five-minute window is dropped; a later one reaches
//! a worker whose claim is refused because the intent moved on, and the message is deleted), and
//! subscriber events carry a stable event id and are at-least-once anyway.

use aws_sdk_dynamodb::Client as DynamoClient;
use aws_sdk_dynamodbstreams::Client as StreamsClient;
use aws_sdk_dynamodbstreams::error::DisplayErrorContext;
use aws_sdk_dynamodbstreams::operation::get_records::GetRecordsError;
use aws_sdk_dynamodbstreams::operation::get_shard_iterator::GetShardIteratorError;
use aws_sdk_dynamodbstreams::types::ShardIteratorType;
use seatgate::backoff::Backoff;
use seatgate::handlers::stream;
use seatgate::service::Relay;
use seatgate_aws::dynamodb::stream::change_record_from_stream;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, error, info, warn};

/// Records per `GetRecords` (the stream event source mapping's `BatchSize` in the template).
pub const BATCH: i32 = 100;

/// Pause after a pass in which no shard had records.
pub const IDLE_PAUSE: Duration = Duration::from_millis(200);

/// How often the shard list is refreshed while nothing ended.
pub const DISCOVER_EVERY: Duration = Duration::from_secs(10);

/// Retries of a failed record before it is skipped (`MaximumRetryAttempts` in the template).
pub const MAX_RETRY_ATTEMPTS: u32 = 10;

/// Pause after an error talking to the stream.
const ERROR_PAUSE: Duration = Duration::from_millis(500);

/// Delay before retry number `attempt` (1-based) of a failed record: 100 ms doubling, capped at
/// 30 s, like the embedded outbox.
pub fn retry_backoff(attempt: u32) -> Duration {
    Backoff::new(Duration::from_millis(100), Duration::from_secs(30)).delay(attempt)
}

/// A failed record to read again, from its own sequence number, not before `not_before`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Retry {
    sequence: String,
    attempts: u32,
    not_before: Instant,
}

/// Where one shard is.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cursor {
    parent: Option<String>,
    /// The iterator for the next read; `None` means get one from the checkpoint.
    iterator: Option<String>,
    /// The last record handled (relayed, or skipped after its retries).
    checkpoint: Option<String>,
    retry: Option<Retry>,
    /// Read to its end: a closed shard that has nothing more.
    finished: bool,
}

impl Cursor {
    fn new(parent: Option<String>) -> Self {
        Cursor {
            parent,
            iterator: None,
            checkpoint: None,
            retry: None,
            finished: false,
        }
    }

    /// Where a new iterator must start.
    fn start(&self) -> (ShardIteratorType, Option<&str>) {
        match (&self.retry, &self.checkpoint) {
            (Some(r), _) => (
                ShardIteratorType::AtSequenceNumber,
                Some(r.sequence.as_str()),
            ),
            (None, Some(c)) => (ShardIteratorType::AfterSequenceNumber, Some(c.as_str())),
            (None, None) => (ShardIteratorType::TrimHorizon, None),
        }
    }

    /// Books the outcome of handing `positions` (a batch, in order) to the relay, which reported
    /// `failed` as its first failure (or nothing). `next` is the iterator `GetRecords` returned.
    fn after_batch(
        &mut self,
        positions: &[String],
        failed: Option<String>,
        next: Option<String>,
        now: Instant,
    ) -> BatchOutcome {
        let Some(failed) = failed else {
            if let Some(last) = positions.last() {
                self.checkpoint = Some(last.clone());
            }
            self.retry = None;
            self.finished = next.is_none();
            self.iterator = next;
            return BatchOutcome::Done;
        };
        // A position that names no record of the batch fails the whole batch.
        let index = positions.iter().position(|p| *p == failed).unwrap_or(0);
        if index > 0 {
            self.checkpoint = Some(positions[index - 1].clone());
        }
        let failed = positions.get(index).cloned().unwrap_or(failed);
        let attempts = match &self.retry {
            Some(r) if r.sequence == failed => r.attempts + 1,
            _ => 1,
        };
        // Read again from the checkpoint (or the failed record), never with the old iterator.
        self.iterator = None;
        if attempts > MAX_RETRY_ATTEMPTS {
            self.checkpoint = Some(failed.clone());
            self.retry = None;
            return BatchOutcome::Skipped(failed);
        }
        self.retry = Some(Retry {
            sequence: failed.clone(),
            attempts,
            not_before: now + retry_backoff(attempts),
        });
        BatchOutcome::Retry(failed, attempts)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum BatchOutcome {
    Done,
    /// Will be read again from this record, this is retry number n.
    Retry(String, u32),
    /// Gave up on this record after its retries.
    Skipped(String),
}

/// The stream's shards and where each one is.
#[derive(Debug, Default)]
struct Shards {
    cursors: BTreeMap<String, Cursor>,
}

impl Shards {
    /// Merges a `DescribeStream` listing (`(shard id, parent id)`): new shards start at the trim
    /// horizon; finished shards no longer listed (trimmed after the retention period) are
    /// forgotten. Unfinished ones are kept even if unlisted: their records are still wanted.
    fn merge(&mut self, listed: &[(String, Option<String>)]) -> usize {
        let mut added = 0;
        for (id, parent) in listed {
            if !self.cursors.contains_key(id) {
                self.cursors.insert(id.clone(), Cursor::new(parent.clone()));
                added += 1;
            }
        }
        self.cursors
            .retain(|id, c| !c.finished || listed.iter().any(|(l, _)| l == id));
        added
    }

    /// Shards to read now: unfinished, whose parent is finished or unknown, and not waiting
    /// out a retry backoff.
    fn ready(&self, now: Instant) -> Vec<String> {
        self.cursors
            .iter()
            .filter(|(_, c)| !c.finished)
            .filter(|(_, c)| {
                c.parent
                    .as_ref()
                    .and_then(|p| self.cursors.get(p))
                    .is_none_or(|p| p.finished)
            })
            .filter(|(_, c)| c.retry.as_ref().is_none_or(|r| r.not_before <= now))
            .map(|(id, _)| id.clone())
            .collect()
    }
}

/// What one `GetRecords` on one shard gave.
enum Read {
    Records,
    Empty,
    /// The shard ended (closed and read to its end): look for its children.
    Ended,
    /// The stream or shard is gone: look up the stream again.
    Gone,
    Failed,
}

/// The poller. Runs until `shutdown` flips, between passes.
pub(crate) struct StreamPoller {
    dynamo: DynamoClient,
    streams: StreamsClient,
    table: String,
    stream_arn: String,
    shards: Shards,
    relay: Arc<Relay>,
}

impl StreamPoller {
    pub(crate) fn new(
        dynamo: DynamoClient,
        streams: StreamsClient,
        table: String,
        stream_arn: String,
        relay: Arc<Relay>,
    ) -> Self {
        StreamPoller {
            dynamo,
            streams,
            table,
            stream_arn,
            shards: Shards::default(),
            relay,
        }
    }

    pub(crate) async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let mut last_discovery: Option<Instant> = None;
        let mut rediscover = true;
        while !*shutdown.borrow() {
            if rediscover || last_discovery.is_none_or(|t| t.elapsed() >= DISCOVER_EVERY) {
                last_discovery = Some(Instant::now());
                rediscover = false;
                if let Err(e) = self.discover().await {
                    error!(stream = %self.stream_arn, error = %e, "listing the stream's shards failed");
                    if pause(ERROR_PAUSE, &mut shutdown).await {
                        break;
                    }
                    rediscover = true;
                    continue;
                }
            }
            let mut busy = false;
            let mut failed = false;
            for shard in self.shards.ready(Instant::now()) {
                match self.read(&shard).await {
                    Read::Records => busy = true,
                    Read::Empty => {}
                    Read::Ended => {
                        // Its children can start now.
                        rediscover = true;
                        busy = true;
                    }
                    Read::Gone => {
                        rediscover = true;
                        failed = true;
                    }
                    Read::Failed => failed = true,
                }
            }
            let wait = if busy {
                Duration::ZERO
            } else if failed {
                ERROR_PAUSE
            } else {
                IDLE_PAUSE
            };
            if pause(wait, &mut shutdown).await {
                break;
            }
        }
    }

    /// Refreshes the shard list; if the stream is gone (the table was recreated, or its stream
    /// turned off and on), follows the table's latest stream from its trim horizon.
    async fn discover(&mut self) -> Result<(), String> {
        match list_shards(&self.streams, &self.stream_arn).await {
            Ok(listed) => {
                let added = self.shards.merge(&listed);
                if added > 0 {
                    info!(stream = %self.stream_arn, added, shards = self.shards.cursors.len(), "stream shards found");
                }
                Ok(())
            }
            Err(ListError::NotFound) => {
                let latest = latest_stream_arn(&self.dynamo, &self.table).await?;
                if latest != self.stream_arn {
                    warn!(old = %self.stream_arn, new = %latest, "the table has a new stream; reading it from its trim horizon");
                    self.stream_arn = latest;
                    self.shards = Shards::default();
                }
                Err("stream not found".into())
            }
            Err(ListError::Other(e)) => Err(e),
        }
    }

    async fn read(&mut self, shard_id: &str) -> Read {
        let Some(cursor) = self.shards.cursors.get(shard_id) else {
            return Read::Failed;
        };
        let iterator = match cursor.iterator.clone() {
            Some(i) => i,
            None => match self.iterator(shard_id).await {
                Ok(i) => i,
                Err(read) => return read,
            },
        };
        let out = self
            .streams
            .get_records()
            .shard_iterator(iterator)
            .limit(BATCH)
            .send()
            .await;
        let out = match out {
            Ok(out) => out,
            Err(err) => {
                let cursor = self
                    .shards
                    .cursors
                    .get_mut(shard_id)
                    .expect("cursor exists");
                // A fresh iterator from the checkpoint is right after any failed read.
                cursor.iterator = None;
                return match err.as_service_error() {
                    Some(GetRecordsError::ExpiredIteratorException(_)) => {
                        debug!(
                            shard = shard_id,
                            "shard iterator expired; getting a new one"
                        );
                        Read::Empty
                    }
                    Some(GetRecordsError::TrimmedDataAccessException(_)) => {
                        warn!(
                            shard = shard_id,
                            "records past the stream's retention were trimmed before they were read"
                        );
                        cursor.checkpoint = None;
                        cursor.retry = None;
                        Read::Failed
                    }
                    Some(GetRecordsError::ResourceNotFoundException(_)) => Read::Gone,
                    Some(GetRecordsError::LimitExceededException(_)) => {
                        debug!(shard = shard_id, "GetRecords throttled");
                        Read::Failed
                    }
                    _ => {
                        error!(shard = shard_id, error = %DisplayErrorContext(&err), "GetRecords failed");
                        Read::Failed
                    }
                };
            }
        };
        let next = out.next_shard_iterator;
        let records = out.records.unwrap_or_default();
        let cursor = self
            .shards
            .cursors
            .get_mut(shard_id)
            .expect("cursor exists");
        if records.is_empty() {
            cursor.finished = next.is_none();
            cursor.iterator = next;
            if cursor.finished {
                info!(shard = shard_id, "stream shard read to its end");
                return Read::Ended;
            }
            return Read::Empty;
        }
        let batch: Vec<seatgate::domain::ChangeRecord> =
            records.iter().map(change_record_from_stream).collect();
        let positions: Vec<String> = batch.iter().map(|r| r.position.clone()).collect();
        let failed = stream::handle(&self.relay, batch).await;
        let cursor = self
            .shards
            .cursors
            .get_mut(shard_id)
            .expect("cursor exists");
        match cursor.after_batch(&positions, failed, next, Instant::now()) {
            BatchOutcome::Done if cursor.finished => Read::Ended,
            BatchOutcome::Done => Read::Records,
            BatchOutcome::Retry(position, attempt) => {
                warn!(shard = shard_id, %position, attempt, "relay failed a stream record; retrying from it after a backoff");
                Read::Failed
            }
            BatchOutcome::Skipped(position) => {
                error!(shard = shard_id, %position, retries = MAX_RETRY_ATTEMPTS,
                    "relay kept failing a stream record; skipping it (on AWS it would go to the on-failure destination)");
                Read::Records
            }
        }
    }

    /// A new iterator for the shard from its checkpoint, or what the read amounts to without one.
    async fn iterator(&mut self, shard_id: &str) -> Result<String, Read> {
        let cursor = self
            .shards
            .cursors
            .get_mut(shard_id)
            .expect("cursor exists");
        let (kind, sequence) = cursor.start();
        let result = self
            .streams
            .get_shard_iterator()
            .stream_arn(&self.stream_arn)
            .shard_id(shard_id)
            .shard_iterator_type(kind.clone())
            .set_sequence_number(sequence.map(str::to_owned))
            .send()
            .await;
        match result {
            Ok(out) => out.shard_iterator.ok_or_else(|| {
                // No iterator: a closed shard with nothing left to read.
                cursor.finished = true;
                Read::Ended
            }),
            Err(err) => Err(match err.as_service_error() {
                Some(GetShardIteratorError::TrimmedDataAccessException(_)) => {
                    warn!(
                        shard = shard_id,
                        ?kind,
                        "checkpoint trimmed past the retention period; reading from the trim horizon"
                    );
                    cursor.checkpoint = None;
                    cursor.retry = None;
                    Read::Failed
                }
                Some(GetShardIteratorError::ResourceNotFoundException(_)) => Read::Gone,
                _ => {
                    error!(shard = shard_id, error = %DisplayErrorContext(&err), "GetShardIterator failed");
                    Read::Failed
                }
            }),
        }
    }
}

/// Waits `wait` or until shutdown; `true` means shut down.
async fn pause(wait: Duration, shutdown: &mut watch::Receiver<bool>) -> bool {
    if wait.is_zero() {
        return *shutdown.borrow();
    }
    tokio::select! {
        _ = tokio::time::sleep(wait) => false,
        _ = shutdown.wait_for(|stop| *stop) => true,
    }
}

enum ListError {
    NotFound,
    Other(String),
}

/// Every shard of the stream, `(id, parent)`, following `DescribeStream`'s pagination.
async fn list_shards(
    streams: &StreamsClient,
    stream_arn: &str,
) -> Result<Vec<(String, Option<String>)>, ListError> {
    let mut shards = Vec::new();
    let mut start: Option<String> = None;
    loop {
        let out = streams
            .describe_stream()
            .stream_arn(stream_arn)
            .set_exclusive_start_shard_id(start.take())
            .send()
            .await
            .map_err(|e| {
                if e.as_service_error()
                    .is_some_and(|s| s.is_resource_not_found_exception())
                {
                    ListError::NotFound
                } else {
                    ListError::Other(format!("DescribeStream: {}", DisplayErrorContext(&e)))
                }
            })?;
        let Some(description) = out.stream_description else {
            return Ok(shards);
        };
        for shard in description.shards() {
            if let Some(id) = shard.shard_id() {
                shards.push((id.to_owned(), shard.parent_shard_id().map(str::to_owned)));
            }
        }
        match description.last_evaluated_shard_id {
            Some(last) if !last.is_empty() => start = Some(last),
            _ => return Ok(shards),
        }
    }
}

/// The table's current stream (`DescribeTable` -> `LatestStreamArn`).
pub(crate) async fn latest_stream_arn(
    dynamo: &DynamoClient,
    table: &str,
) -> Result<String, String> {
    let out = dynamo
        .describe_table()
        .table_name(table)
        .send()
        .await
        .map_err(|e| {
            format!(
                "DescribeTable {table}: {}",
                aws_sdk_dynamodb::error::DisplayErrorContext(&e)
            )
        })?;
    out.table
        .and_then(|t| t.latest_stream_arn)
        .ok_or_else(|| format!("table {table} has no stream"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seqs(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_fresh_shard_starts_at_the_trim_horizon_then_after_its_checkpoint() {
        let mut c = Cursor::new(None);
        assert_eq!(c.start(), (ShardIteratorType::TrimHorizon, None));
        let now = Instant::now();
        let out = c.after_batch(&seqs(&["1", "2"]), None, Some("it".into()), now);
        assert_eq!(out, BatchOutcome::Done);
        assert_eq!(c.iterator.as_deref(), Some("it"));
        assert!(!c.finished);
        assert_eq!(
            c.start(),
            (ShardIteratorType::AfterSequenceNumber, Some("2"))
        );
        // No next iterator: a closed shard read to its end.
        c.after_batch(&seqs(&["3"]), None, None, now);
        assert!(c.finished);
    }

    #[test]
    fn a_failed_record_is_retried_from_itself_after_a_backoff_then_skipped() {
        let mut c = Cursor::new(None);
        let now = Instant::now();
        let out = c.after_batch(
            &seqs(&["1", "2", "3"]),
            Some("2".into()),
            Some("it".into()),
            now,
        );
        assert_eq!(out, BatchOutcome::Retry("2".into(), 1));
        assert_eq!(
            c.checkpoint.as_deref(),
            Some("1"),
            "records before it are done"
        );
        assert_eq!(c.iterator, None, "the old iterator is dropped");
        assert_eq!(c.start(), (ShardIteratorType::AtSequenceNumber, Some("2")));
        assert_eq!(
            c.retry.as_ref().unwrap().not_before,
            now + Duration::from_millis(100)
        );
        for attempt in 2..=MAX_RETRY_ATTEMPTS {
            let out = c.after_batch(&seqs(&["2", "3"]), Some("2".into()), None, now);
            assert_eq!(out, BatchOutcome::Retry("2".into(), attempt));
        }
        let out = c.after_batch(&seqs(&["2", "3"]), Some("2".into()), None, now);
        assert_eq!(out, BatchOutcome::Skipped("2".into()));
        assert_eq!(c.retry, None);
        assert_eq!(
            c.start(),
            (ShardIteratorType::AfterSequenceNumber, Some("2"))
        );
        assert!(
            !c.finished,
            "a skip re-reads after the record, even at a shard's end"
        );
    }

    #[test]
    fn an_unknown_failed_position_fails_the_whole_batch() {
        let mut c = Cursor::new(None);
        c.checkpoint = Some("0".into());
        let out = c.after_batch(&seqs(&["1", "2"]), Some("x".into()), None, Instant::now());
        assert_eq!(out, BatchOutcome::Retry("1".into(), 1));
        assert_eq!(c.checkpoint.as_deref(), Some("0"));
    }

    #[test]
    fn children_wait_for_their_parent_and_retries_for_their_backoff() {
        let mut shards = Shards::default();
        let listed = vec![
            ("p".to_string(), None),
            ("c1".to_string(), Some("p".to_string())),
            ("c2".to_string(), Some("p".to_string())),
            ("orphan".to_string(), Some("trimmed".to_string())),
        ];
        assert_eq!(shards.merge(&listed), 4);
        let now = Instant::now();
        assert_eq!(shards.ready(now), ["orphan", "p"]);
        shards.cursors.get_mut("p").unwrap().finished = true;
        assert_eq!(shards.ready(now), ["c1", "c2", "orphan"]);
        shards.cursors.get_mut("c1").unwrap().retry = Some(Retry {
            sequence: "9".into(),
            attempts: 1,
            not_before: now + Duration::from_secs(1),
        });
        assert_eq!(shards.ready(now), ["c2", "orphan"]);
        assert_eq!(
            shards.ready(now + Duration::from_secs(1)),
            ["c1", "c2", "orphan"]
        );
        // The finished parent drops out once the stream no longer lists it; the children stay.
        assert_eq!(shards.merge(&listed[1..]), 0);
        assert!(!shards.cursors.contains_key("p"));
        assert_eq!(shards.cursors.len(), 3);
    }

    #[test]
    fn retry_backoff_doubles_and_caps() {
        assert_eq!(retry_backoff(1), Duration::from_millis(100));
        assert_eq!(retry_backoff(4), Duration::from_millis(800));
        assert_eq!(retry_backoff(20), Duration::from_secs(30));
    }
}
