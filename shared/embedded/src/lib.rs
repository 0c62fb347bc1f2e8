//! Embedded backend: every store and queue port on one SQLite database file, the default for
//! local runs, tests and benchmarks.
//!
//! It stands in for DynamoDB (+ Streams) and SQS FIFO, so each port operation is exactly one
//! `BEGIN IMMEDIATE` transaction shaped like the one AWS request it replaces. A conditional write
//! reads the item, decides with the domain's reference semantics ([`Intent::apply`]) and writes,
//! all while holding SQLite's write lock: as atomic as a DynamoDB condition, and never a read in
//! one transaction followed by a write in another.
//!
//! - Items are kept as JSON (what is decoded) beside real columns (what is queried and indexed:
//!   status, version, fencing token, `due_at`...), so `due_intents` is an indexed range scan and
//!   a terminal intent drops out of that index by having a NULL `due_at`.
//! - The outbox table ([`outbox`]) is the embedded DynamoDB Stream: a row is inserted in the same
//!   transaction as every intent write, and the relay drains it.
//! - The queue tables ([`queue`]) play an SQS FIFO queue with message groups, visibility timeout,
//!   deduplication and a dead-letter state.
//!
//! Durability and sharing: WAL with `synchronous=NORMAL` (a commit survives a killed process;
//! only an OS crash may lose the last few), and a busy timeout so several runner processes can
//! share one file. A database still busy after that timeout surfaces as
//! [`StoreError::TransactionConflict`], which callers retry like DynamoDB's.
//!
//! Threading: rusqlite is blocking, so each operation runs on tokio's blocking pool and holds
//! the connection mutex only for its own transaction, never across an `.await`. Most
//! transactions take microseconds, but `BEGIN IMMEDIATE` may wait up to the busy timeout for
//! another process's write lock, and that wait must not stall the async workers serving HTTP.
//!
//! [`Intent::apply`]: seatgate::domain::Intent::apply

mod events;
mod flights;
mod outbox;
mod queue;
mod schema;
mod shared_state;
mod store;

pub use events::EmbeddedEvents;
pub use outbox::OutboxRow;
pub use schema::SCHEMA_VERSION;

use rusqlite::{Connection, ErrorCode, Transaction, TransactionBehavior};
use seatgate::backoff::Backoff;
use seatgate::config::Timing;
use seatgate::ports::{Clock, StoreError};
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::Notify;

/// How long a transaction waits for another connection's write lock before giving up with
/// `TransactionConflict`. Writers hold the lock for microseconds; seconds of waiting mean a
/// stuck process, which the caller should hear about.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The queue and outbox knobs. Store semantics have none: they are the domain's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddedConfig {
    /// How long a received message stays invisible (SQS `VisibilityTimeout`).
    pub visibility_timeout: Duration,
    /// Receives after which a message goes to the dead-letter state (SQS `maxReceiveCount`).
    pub max_receive_count: u32,
    /// A second send with the same deduplication id within this window is dropped (SQS: 5 min).
    pub dedup_window: Duration,
    /// Failed relay attempts after which an outbox row is parked as `dead`.
    pub outbox_max_attempts: u32,
    /// The event queue's visibility timeout and max receive count (its dead-letter threshold).
    pub event_visibility_timeout: Duration,
    pub event_max_receive_count: u32,
}

impl Default for EmbeddedConfig {
    fn default() -> Self {
        EmbeddedConfig::for_timing(&Timing::local())
    }
}

impl EmbeddedConfig {
    /// The defaults, with the queue's visibility timeout taken from the timing profile so the
    /// 6x-worker-timeout rule is kept in one place.
    pub fn for_timing(timing: &Timing) -> Self {
        EmbeddedConfig {
            visibility_timeout: timing.visibility_timeout,
            max_receive_count: 5,
            dedup_window: Duration::from_secs(5 * 60),
            outbox_max_attempts: 10,
            event_visibility_timeout: timing.visibility_timeout,
            event_max_receive_count: 8,
        }
    }
}

/// Every port on one SQLite database. Cheap to clone: clones share one connection and the
/// wake-up signals, so they behave as one process. Two [`EmbeddedBackend::open`]s of one file
/// behave as two processes.
#[derive(Clone)]
pub struct EmbeddedBackend {
    inner: Arc<Inner>,
}

struct Inner {
    conn: Mutex<Connection>,
    clock: Arc<dyn Clock>,
    config: EmbeddedConfig,
    outbox_notify: Arc<Notify>,
    queue_notify: Arc<Notify>,
    location: String,
}

impl fmt::Debug for EmbeddedBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddedBackend")
            .field("location", &self.inner.location)
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl EmbeddedBackend {
    /// Opens (creating if needed) the database file at `path`. Safe to call from several
    /// processes at once: the schema is created idempotently under the write lock.
    pub fn open(
        path: &Path,
        clock: Arc<dyn Clock>,
        config: EmbeddedConfig,
    ) -> Result<Self, StoreError> {
        let conn = Connection::open(path).map_err(sql)?;
        Self::setup(conn, clock, config, path.display().to_string())
    }

    /// A private database that lives as long as this backend and its clones.
    pub fn open_in_memory(
        clock: Arc<dyn Clock>,
        config: EmbeddedConfig,
    ) -> Result<Self, StoreError> {
        let conn = Connection::open_in_memory().map_err(sql)?;
        Self::setup(conn, clock, config, ":memory:".to_owned())
    }

    fn setup(
        mut conn: Connection,
        clock: Arc<dyn Clock>,
        config: EmbeddedConfig,
        location: String,
    ) -> Result<Self, StoreError> {
        conn.busy_timeout(BUSY_TIMEOUT).map_err(sql)?;
        // Several processes may open a new file at once. Switching it to WAL can answer BUSY
        // without waiting out the busy timeout, so the (idempotent) set-up is retried with a
        // backoff for as long as a transaction would wait.
        let started = std::time::Instant::now();
        let backoff = Backoff::new(Duration::from_millis(5), Duration::from_millis(200));
        let mut attempt = 1;
        loop {
            match Self::prepare_file(&mut conn) {
                Err(StoreError::TransactionConflict) if started.elapsed() < BUSY_TIMEOUT => {
                    std::thread::sleep(backoff.delay_with_jitter(attempt));
                    attempt += 1;
                }
                other => break other?,
            }
        }
        Ok(EmbeddedBackend {
            inner: Arc::new(Inner {
                conn: Mutex::new(conn),
                clock,
                config,
                outbox_notify: Arc::new(Notify::new()),
                queue_notify: Arc::new(Notify::new()),
                location,
            }),
        })
    }

    /// Journal mode, durability and schema: what every handle sets up on open.
    fn prepare_file(conn: &mut Connection) -> Result<(), StoreError> {
        // Answers "wal" for a file and "memory" for an in-memory database; either is fine.
        let _mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(sql)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(sql)?;
        schema::migrate(conn)
    }

    /// Signalled (`notify_one`, so a wake-up is never lost between a drain and the next wait)
    /// after every commit that added an outbox row.
    pub fn outbox_notify(&self) -> Arc<Notify> {
        Arc::clone(&self.inner.outbox_notify)
    }

    /// Signalled after every send, and after every delete that may have unblocked a group.
    pub fn queue_notify(&self) -> Arc<Notify> {
        Arc::clone(&self.inner.queue_notify)
    }

    pub fn config(&self) -> &EmbeddedConfig {
        &self.inner.config
    }

    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.inner.clock)
    }

    /// Runs `op` with the connection on the blocking pool.
    async fn run<T, E, F>(&self, op: F) -> Result<T, E>
    where
        F: FnOnce(&mut Connection, &Ctx) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        let joined = tokio::task::spawn_blocking(move || {
            // A panic inside a transaction dropped it, which rolled it back: the connection is
            // consistent, so a poisoned lock is safe to take over.
            let mut conn = inner.conn.lock().unwrap_or_else(PoisonError::into_inner);
            let ctx = Ctx {
                clock: inner.clock.as_ref(),
                config: &inner.config,
            };
            op(&mut conn, &ctx)
        })
        .await;
        joined.unwrap_or_else(|e| {
            Err(StoreError::Unavailable(format!("embedded store task failed: {e}")).into())
        })
    }
}

/// What an operation may need besides the connection.
struct Ctx<'a> {
    clock: &'a dyn Clock,
    config: &'a EmbeddedConfig,
}

/// One `BEGIN IMMEDIATE` transaction: the write lock is taken up front, so two writers never
/// both read and then race to upgrade (which SQLite would fail with an unretryable deadlock).
/// An `Err` from `body` drops the transaction, rolling back everything it wrote.
fn immediate<T, E>(
    conn: &mut Connection,
    body: impl FnOnce(&Transaction<'_>) -> Result<T, E>,
) -> Result<T, E>
where
    E: From<StoreError>,
{
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| E::from(sql(e)))?;
    let out = body(&tx)?;
    tx.commit().map_err(|e| E::from(sql(e)))?;
    Ok(out)
}

/// SQLite's "someone else holds the lock" is DynamoDB's `TransactionConflict`: the write did not
/// happen and may be retried. Everything else is `Unavailable`. SQLite messages name tables and
/// columns, never values, so they are safe to carry.
fn sql(e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            StoreError::TransactionConflict
        }
        _ => StoreError::Unavailable(format!("sqlite: {e}")),
    }
}

/// Maps an insert's error: a key that already exists is refused as `Unavailable` (ids are
/// generated, so a collision is a bug to report, never an overwrite); anything else as [`sql`].
fn refuse_duplicate(what: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| {
        if e.sqlite_error_code() == Some(ErrorCode::ConstraintViolation) {
            StoreError::Unavailable(format!("{what} already exists"))
        } else {
            sql(e)
        }
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Unavailable(format!("encode: {e}")))
}

/// serde's messages give a position and the expected type, not the item's contents.
fn from_json<T: serde::de::DeserializeOwned>(what: &str, json: &str) -> Result<T, StoreError> {
    serde_json::from_str(json).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

/// SQLite integers are signed; versions, tokens and limits never get near `i64::MAX`.
fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::ffi;

    fn failure(code: i32) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(ffi::Error::new(code), None)
    }

    #[test]
    fn busy_and_locked_are_transaction_conflicts() {
        assert_eq!(
            sql(failure(ffi::SQLITE_BUSY)),
            StoreError::TransactionConflict
        );
        assert_eq!(
            sql(failure(ffi::SQLITE_LOCKED)),
            StoreError::TransactionConflict
        );
        assert!(matches!(
            sql(failure(ffi::SQLITE_IOERR)),
            StoreError::Unavailable(_)
        ));
        assert!(matches!(
            sql(rusqlite::Error::QueryReturnedNoRows),
            StoreError::Unavailable(_)
        ));
    }

    #[test]
    fn a_writer_holding_the_lock_past_the_busy_timeout_is_a_conflict() {
        let dir = std::env::temp_dir().join(format!("seatgate-busy-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("db.sqlite");
        let mut a = Connection::open(&path).unwrap();
        let _mode: String = a
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .unwrap();
        let b = Connection::open(&path).unwrap();
        b.busy_timeout(Duration::from_millis(50)).unwrap();
        let _held = a
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .unwrap();
        let err = b.execute_batch("BEGIN IMMEDIATE").unwrap_err();
        assert_eq!(sql(err), StoreError::TransactionConflict);
        drop(_held);
        drop(b);
        drop(a);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
