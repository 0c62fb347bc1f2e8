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
//! Durability and sharing: WAL with `synchronous=FULL`, so a commit is on disk (the WAL is
//! synced) before any caller of its group hears of it and survives an OS crash or power loss,
//! not only a killed process; group commit is what makes that affordable (one sync per group,
//! not per write). A busy timeout lets several runner processes share one file. A database still busy after that timeout surfaces as
//! [`StoreError::TransactionConflict`], which callers retry like DynamoDB's.
//!
//! Threading and group commit: rusqlite is blocking, and SQLite has one writer at a time. So
//! every write goes to one writer thread per backend, which takes whatever writes are queued
//! (up to [`MAX_GROUP`]) and runs them in one `BEGIN IMMEDIATE` transaction, each under its own
//! savepoint: an operation that fails or refuses rolls back to its savepoint alone, the others
//! stand. One `COMMIT` then makes the whole group durable, and only after it does each caller
//! get its answer, so nothing is acknowledged that a killed process could lose. Under load this
//! turns a thousand small commits into a few dozen. Reads of a database file run on their own
//! WAL connections on tokio's blocking pool (at most [`READERS`] at once), beside the writer (WAL readers see the last commit
//! and never block the writer); an in-memory database has only the writer's connection, so its
//! reads queue there too. Statements are cached per connection (`prepare_cached`). The async
//! workers serving HTTP never wait on a lock: a caller awaits its answer on a channel.
//!
//! The writer's queue is bounded ([`EmbeddedConfig::write_queue`] writes queued or running): a
//! caller past the bound awaits a slot (a semaphore permit, so no thread blocks), and after
//! [`EmbeddedConfig::write_queue_wait`] its write is refused as `StoreError::Unavailable`
//! (`503 unavailable` at the API; nothing written). The channel itself stays a std channel: a
//! bounded tokio channel handed the writer smaller groups under load (481 commits for 440
//! writes in one loaded run), where the std channel lets it drain whole groups.
//!
//! [`Intent::apply`]: seatgate::domain::Intent::apply

mod actions;
mod checkout;
mod credentials;
mod events;
mod flights;
mod intents;
mod leases;
mod outbox;
mod queue;
mod queue_admin;
mod rate_limits;
mod schema;
mod shared_state;
mod waitlist;
mod writer;

pub use events::EmbeddedEvents;
pub use outbox::OutboxRow;
pub use schema::SCHEMA_VERSION;

use rusqlite::{Connection, ErrorCode, OpenFlags, Params, Row, Transaction, TransactionBehavior};
use seatgate::adapters::entropy::OsRandom;
use seatgate::adapters::sealing::LocalKey;
use seatgate::backoff::Backoff;
use seatgate::config::Timing;
use seatgate::ports::Random as _;
use seatgate::ports::{Clock, StoreError};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::Duration;
use tokio::sync::Notify;
use writer::{Job, WriteJob, write_groups};

/// How long a transaction waits for another connection's write lock before giving up with
/// `TransactionConflict`. Writers hold the lock for microseconds; seconds of waiting mean a
/// stuck process, which the caller should hear about.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Most writes one group commit takes: enough to amortise the commit, few enough that one
/// group's transaction stays short for other processes waiting on the file's write lock.
pub const MAX_GROUP: usize = 128;

/// Reads that run at once per backend, each on its own connection. A burst of a thousand reads
/// then queues for these instead of spawning a blocking thread and opening (and parsing the
/// schema of) a fresh connection for each: on two cores that was most of a burst's read cost.
const READERS: usize = 4;

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
    /// Writes queued for the writer thread (and running in its group) at once: the queue's
    /// bound. A caller past it waits (asynchronously: no tokio worker thread blocks) for a slot.
    pub write_queue: usize,
    /// How long a caller waits for a slot before its write is refused with
    /// `StoreError::Unavailable` (the API answers `503 unavailable`; nothing was written).
    pub write_queue_wait: Duration,
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
            // 32 full group commits: far past what one process's callers queue at a burst
            // (the group-commit test's 440 concurrent writes), small enough to bound memory.
            write_queue: 32 * MAX_GROUP,
            write_queue_wait: Duration::from_secs(5),
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
    /// Writes (and, in memory, reads) for the writer thread.
    writer: Mutex<mpsc::Sender<Box<dyn WriteJob>>>,
    /// One permit per write queued or running, at most `config.write_queue`: the writer's
    /// channel stays a std channel (so the writer drains whole groups at once) and the bound
    /// lives here, where a caller can wait for it without blocking a thread.
    write_slots: Arc<tokio::sync::Semaphore>,
    /// The database file, for read connections; `None` in memory.
    file: Option<PathBuf>,
    readers: Mutex<Vec<Connection>>,
    /// Seals credentials before they are written and opens them as they are read.
    credentials_key: LocalKey,
    /// One permit per read running, at most [`READERS`].
    read_slots: tokio::sync::Semaphore,
    /// Group commits so far (each one `COMMIT` for up to [`MAX_GROUP`] writes).
    commits: Arc<std::sync::atomic::AtomicU64>,
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
    ///
    /// The file (and its WAL and shared-memory files) is readable by its owner only, and the
    /// key that seals credentials is kept beside it in [`EmbeddedBackend::credentials_key_path`]
    /// (created 0600 on first open).
    pub fn open(
        path: &Path,
        clock: Arc<dyn Clock>,
        config: EmbeddedConfig,
    ) -> Result<Self, StoreError> {
        owner_only(path)?;
        let key = LocalKey::load_or_create(&Self::credentials_key_path(path)).map_err(|e| {
            StoreError::Unavailable(format!(
                "the credentials key beside {}: {e}",
                path.display()
            ))
        })?;
        let conn = Connection::open(path).map_err(sql)?;
        for suffix in ["-wal", "-shm"] {
            let mut side = path.as_os_str().to_owned();
            side.push(suffix);
            owner_only_if_present(Path::new(&side))?;
        }
        Self::setup(conn, clock, config, Some(path.to_path_buf()), key)
    }

    /// Where the key that seals the credentials of the database at `db` lives.
    pub fn credentials_key_path(db: &Path) -> PathBuf {
        let mut name = db.as_os_str().to_owned();
        name.push(".credentials-key");
        PathBuf::from(name)
    }

    /// A private database that lives as long as this backend and its clones.
    pub fn open_in_memory(
        clock: Arc<dyn Clock>,
        config: EmbeddedConfig,
    ) -> Result<Self, StoreError> {
        let conn = Connection::open_in_memory().map_err(sql)?;
        Self::setup(conn, clock, config, None, LocalKey::generate())
    }

    fn setup(
        mut conn: Connection,
        clock: Arc<dyn Clock>,
        config: EmbeddedConfig,
        file: Option<PathBuf>,
        credentials_key: LocalKey,
    ) -> Result<Self, StoreError> {
        let location = file
            .as_ref()
            .map_or_else(|| ":memory:".to_owned(), |p| p.display().to_string());
        conn.busy_timeout(BUSY_TIMEOUT).map_err(sql)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        // Several processes may open a new file at once. Switching it to WAL can answer BUSY
        // without waiting out the busy timeout, so the (idempotent) set-up is retried with a
        // backoff for as long as a transaction would wait.
        let started = std::time::Instant::now();
        let backoff = Backoff::new(Duration::from_millis(5), Duration::from_millis(200));
        let mut attempt = 1;
        loop {
            let prepared = Self::prepare_file(&mut conn).and_then(|()| {
                credentials::seal_plaintext_credentials(&mut conn, &credentials_key)
            });
            match prepared {
                Err(StoreError::TransactionConflict) if started.elapsed() < BUSY_TIMEOUT => {
                    std::thread::sleep(
                        backoff.delay_with_jitter(attempt, |max| OsRandom.up_to(max)),
                    );
                    attempt += 1;
                }
                other => break other?,
            }
        }
        let (writer, jobs) = mpsc::channel::<Box<dyn WriteJob>>();
        let (writer_clock, writer_config) = (Arc::clone(&clock), config.clone());
        let commits = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = Arc::clone(&commits);
        std::thread::Builder::new()
            .name("seatgate-sqlite-writer".into())
            .spawn(move || write_groups(conn, jobs, writer_clock, writer_config, counted))
            .map_err(|e| StoreError::Unavailable(format!("starting the writer: {e}")))?;
        Ok(EmbeddedBackend {
            inner: Arc::new(Inner {
                writer: Mutex::new(writer),
                write_slots: Arc::new(tokio::sync::Semaphore::new(config.write_queue.max(1))),
                file,
                readers: Mutex::new(Vec::new()),
                read_slots: tokio::sync::Semaphore::new(READERS),
                credentials_key,
                commits,
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
            .one("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(sql)?;
        // FULL: the group's COMMIT syncs the WAL before it returns, and only then are its
        // callers answered (NORMAL would sync only at checkpoints: an acknowledged booking could
        // vanish in a power cut).
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(sql)?;
        // Each write of a group commit runs under its own savepoint, and a savepoint's rollback
        // journal (the sub-journal) is a temporary file unless temporary storage is memory:
        // a file created, written and closed per group, on the one writer thread. It only ever
        // holds pages of the open transaction; durability is the WAL's, so memory loses nothing.
        conn.pragma_update(None, "temp_store", "MEMORY")
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

    /// Group commits this backend's writer made so far: with writes arriving together, far
    /// fewer than the writes.
    pub fn group_commits(&self) -> u64 {
        self.inner
            .commits
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn config(&self) -> &EmbeddedConfig {
        &self.inner.config
    }

    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.inner.clock)
    }

    /// Runs the write `op` in the writer's next group commit, under its own savepoint: its
    /// `Err` rolls back what it wrote (and only that); its `Ok` is returned once the group's
    /// commit is durable.
    async fn run<T, E, F>(&self, op: F) -> Result<T, E>
    where
        F: FnOnce(&Transaction<'_>, &Ctx) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let answer = self.enqueue(op).await?;
        answer.await.unwrap_or_else(|_| {
            Err(StoreError::Unavailable("the embedded writer dropped a write".into()).into())
        })
    }

    /// Queues the write `op` for the writer's next group commit and returns once it is queued,
    /// not run: whatever the writer is asked after this call runs after `op` (its channel keeps
    /// the order), but nothing waits for `op`'s commit. For a write whose loss in a crash the
    /// caller's port allows; `op` reports its own failure, since nobody reads its answer.
    async fn run_detached<F>(&self, op: F) -> Result<(), StoreError>
    where
        F: FnOnce(&Transaction<'_>, &Ctx) -> Result<(), StoreError> + Send + 'static,
    {
        // The receiver is dropped: the writer's answer to a detached write goes nowhere.
        self.enqueue(op).await.map(drop)
    }

    /// Takes a slot in the writer's bounded queue (waiting at most `write_queue_wait`) and sends
    /// `op`; the receiver of its answer.
    async fn enqueue<T, E, F>(
        &self,
        op: F,
    ) -> Result<tokio::sync::oneshot::Receiver<Result<T, E>>, E>
    where
        F: FnOnce(&Transaction<'_>, &Ctx) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let wait = self.inner.config.write_queue_wait;
        let slot =
            match tokio::time::timeout(wait, Arc::clone(&self.inner.write_slots).acquire_owned())
                .await
            {
                Ok(Ok(slot)) => slot,
                Ok(Err(_closed)) => {
                    return Err(
                        StoreError::Unavailable("the embedded writer stopped".into()).into(),
                    );
                }
                Err(_elapsed) => {
                    return Err(StoreError::Unavailable(format!(
                        "the embedded writer's queue is full ({} writes; waited {wait:?})",
                        self.inner.config.write_queue
                    ))
                    .into());
                }
            };
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job = Box::new(Job {
            op: Some(op),
            result: None,
            reply,
            _slot: slot,
        });
        let sent = self
            .inner
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .send(job);
        if sent.is_err() {
            return Err(StoreError::Unavailable("the embedded writer stopped".into()).into());
        }
        Ok(answer)
    }

    /// Runs the read `op` on a read connection of the file, beside the writer (an in-memory
    /// database reads on the writer's connection, in its queue).
    async fn read<T, E, F>(&self, op: F) -> Result<T, E>
    where
        F: FnOnce(&Connection, &Ctx) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let Some(file) = self.inner.file.clone() else {
            return self.run(move |tx, ctx| op(tx, ctx)).await;
        };
        let _slot = self
            .inner
            .read_slots
            .acquire()
            .await
            .map_err(|_| StoreError::Unavailable("the embedded readers closed".into()))?;
        let inner = Arc::clone(&self.inner);
        let joined = tokio::task::spawn_blocking(move || {
            let idle = inner
                .readers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop();
            let conn = match idle {
                Some(c) => c,
                None => open_reader(&file)?,
            };
            let ctx = Ctx {
                clock: inner.clock.as_ref(),
                config: &inner.config,
            };
            let out = op(&conn, &ctx);
            let mut idle = inner.readers.lock().unwrap_or_else(PoisonError::into_inner);
            if idle.len() < READERS {
                idle.push(conn);
            }
            out
        })
        .await;
        joined.unwrap_or_else(|e| {
            Err(StoreError::Unavailable(format!("embedded read task failed: {e}")).into())
        })
    }
}

/// Creates `path` readable and writable by its owner only if it does not exist yet, and narrows
/// it to that if it does: it holds every user's data.
fn owner_only(path: &Path) -> Result<(), StoreError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
        .open(path)
        .map_err(|e| StoreError::Unavailable(format!("opening {}: {e}", path.display())))?;
    owner_only_if_present(path)
}

fn owner_only_if_present(path: &Path) -> Result<(), StoreError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        match std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(StoreError::Unavailable(format!(
                    "restricting {}: {e}",
                    path.display()
                )));
            }
        }
    }
    Ok(())
}

/// A read-only WAL connection to the file.
fn open_reader(file: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(
        file,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sql)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(sql)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

/// Every statement goes through its connection's statement cache, savepoints included: parsing
/// SQL again on every write was a measurable share of the writer's time in a burst.
trait Cached {
    fn exec<P: Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize>;
    fn one<T, P: Params, F: FnOnce(&Row<'_>) -> rusqlite::Result<T>>(
        &self,
        sql: &str,
        params: P,
        f: F,
    ) -> rusqlite::Result<T>;
}

impl Cached for Connection {
    fn exec<P: Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        self.prepare_cached(sql)?.execute(params)
    }

    fn one<T, P: Params, F: FnOnce(&Row<'_>) -> rusqlite::Result<T>>(
        &self,
        sql: &str,
        params: P,
        f: F,
    ) -> rusqlite::Result<T> {
        self.prepare_cached(sql)?.query_row(params, f)
    }
}

/// Distinct statements a connection keeps prepared: more than the backend has, so none is
/// evicted and parsed again (rusqlite's default keeps 16).
const STATEMENT_CACHE: usize = 256;

/// What an operation may need besides the connection.
struct Ctx<'a> {
    clock: &'a dyn Clock,
    config: &'a EmbeddedConfig,
}

/// The body of a write, inside the group commit's transaction (and its own savepoint): kept as
/// a named step so each operation reads as the one DynamoDB request it stands for. An `Err`
/// from `body` rolls back everything it wrote.
fn immediate<T, E>(
    tx: &Transaction<'_>,
    body: impl FnOnce(&Transaction<'_>) -> Result<T, E>,
) -> Result<T, E> {
    body(tx)
}

/// One `BEGIN IMMEDIATE` transaction of its own (the set-up on open, before the writer runs).
fn begin_immediate<T, E>(
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_write_queue_makes_callers_wait_then_refuses_them_unavailable() {
        use std::time::Instant;
        let clock: Arc<dyn Clock> = Arc::new(seatgate::adapters::clock::SystemClock);
        let config = EmbeddedConfig {
            write_queue: 1,
            write_queue_wait: Duration::from_millis(150),
            ..EmbeddedConfig::default()
        };
        let backend = EmbeddedBackend::open_in_memory(clock, config).unwrap();
        // A write that holds the writer (and the queue's one slot) for 600 ms.
        let slow = |ms: u64, v: u32| {
            let b = backend.clone();
            tokio::spawn(async move {
                b.run(move |_, _| {
                    std::thread::sleep(Duration::from_millis(ms));
                    Ok::<_, StoreError>(v)
                })
                .await
            })
        };
        let first = slow(600, 1);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let started = Instant::now();
        let refused = backend.run(|_, _| Ok::<_, StoreError>(2)).await;
        let waited = started.elapsed();
        assert!(
            matches!(&refused, Err(StoreError::Unavailable(m)) if m.contains("queue is full")),
            "{refused:?}"
        );
        assert!(
            waited >= Duration::from_millis(150),
            "it waited for a slot: {waited:?}"
        );
        assert_eq!(
            first.await.unwrap(),
            Ok(1),
            "the queued write was not disturbed"
        );
        // With a slot free again, a caller that waits less than the wait gets through.
        let second = slow(100, 3);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(backend.run(|_, _| Ok::<_, StoreError>(4)).await, Ok(4));
        assert_eq!(second.await.unwrap(), Ok(3));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_share_commits_and_a_refused_one_takes_nothing_down_with_it() {
        use seatgate::domain::{Action, ActionKind, Millis, SeatId, UserId};
        use seatgate::ports::Actions;
        let clock: Arc<dyn Clock> = Arc::new(seatgate::adapters::clock::SystemClock);
        let backend = EmbeddedBackend::open_in_memory(clock, EmbeddedConfig::default()).unwrap();
        let actions: Vec<Action> = (0..400)
            .map(|i| {
                Action::prepare(
                    UserId::parse(&format!("u{i}")).unwrap(),
                    ActionKind::ReserveSeat,
                    SeatId::parse("G-1").unwrap(),
                    Millis::now(),
                    Duration::from_secs(60),
                )
            })
            .collect();
        // The writer is held while the puts queue, so they must share commits whatever the
        // machine's load; without the hold a fast writer could take them one at a time.
        let (holding, writer_held) = tokio::sync::oneshot::channel();
        let held = {
            let b = backend.clone();
            tokio::spawn(async move {
                b.run(move |_, _| {
                    let _ = holding.send(());
                    std::thread::sleep(Duration::from_millis(300));
                    Ok::<_, StoreError>(())
                })
                .await
            })
        };
        writer_held
            .await
            .expect("the writer runs the holding write");
        let before = backend.group_commits();
        // Every tenth put repeats an earlier action's id: refused, in the middle of a group.
        let puts = (0..440).map(|i| {
            let (backend, action) = (
                backend.clone(),
                actions[if i >= 400 { (i - 400) * 10 } else { i }].clone(),
            );
            tokio::spawn(async move { backend.put_action(&action).await })
        });
        let results: Vec<_> = futures::future::join_all(puts)
            .await
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        held.await.unwrap().unwrap();
        // Counted before the reads below: an in-memory database's reads queue on the writer
        // too, one commit each, and counting them made this flaky (462 "commits" in one CI run).
        let commits = backend.group_commits() - before;
        assert!(commits < 440, "{commits} commits for 440 writes");
        let refused = results.iter().filter(|r| r.is_err()).count();
        assert_eq!(refused, 40, "the repeated ids, and only they");
        for a in &actions {
            assert_eq!(
                backend.get_action(&a.action_id).await.unwrap().as_ref(),
                Some(a)
            );
        }
    }

    #[tokio::test]
    async fn the_writer_syncs_each_commit_and_keeps_savepoint_journals_in_memory() {
        let clock: Arc<dyn Clock> = Arc::new(seatgate::adapters::clock::SystemClock);
        let dir = std::env::temp_dir().join(format!("seatgate-temp-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let backend =
            EmbeddedBackend::open(&dir.join("db.sqlite"), clock, EmbeddedConfig::default())
                .unwrap();
        // 2 is MEMORY: a sub-journal file per group commit is what this setting removes.
        let temp_store: i64 = backend
            .run(|tx, _| {
                tx.query_row("PRAGMA temp_store", [], |r| r.get(0))
                    .map_err(sql)
            })
            .await
            .unwrap();
        assert_eq!(temp_store, 2);
        // 2 is FULL: durable on return, not only once a checkpoint syncs.
        let synchronous: i64 = backend
            .run(|tx, _| {
                tx.query_row("PRAGMA synchronous", [], |r| r.get(0))
                    .map_err(sql)
            })
            .await
            .unwrap();
        assert_eq!(synchronous, 2);
        drop(backend);
        let _ = std::fs::remove_dir_all(&dir);
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
            .one("PRAGMA journal_mode = WAL", [], |r| r.get(0))
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
