//! Seed 004's strategies on MariaDB: the server (Debian's `mariadb-server`) started by the
//! bench in a throwaway data directory, and one inventory per strategy.
//!
//! The server runs with `innodb_flush_log_at_trx_commit=1` (a commit is on disk before it is
//! answered, as seatgate's `synchronous=FULL` is) and `innodb_lock_wait_timeout=15`, the seed's
//! 15,000 ms pessimistic lock timeout. Each strategy gets its own database on the one server, so
//! strategies measured in turn do not share rows, and the server starts once per run.
//!
//! The strategies, as the seed wrote them (Spring Data JPA on MySQL), in SQL:
//! - `Optimistic`: read the row with its version, then `UPDATE ... WHERE version = ?`; a
//!   conflict is answered `409 conflict`. With `retry`, up to 5 tries 50 ms apart (the seed's
//!   `@Retryable(maxAttempts = 5, backoff = @Backoff(delay = 50))`).
//! - `Pessimistic`: `SELECT ... FOR UPDATE`, check, decrement, in one transaction.
//! - `NamedLock`: `GET_LOCK(name, 10)` (the seed's 10 s wait) around the conditional decrement
//!   and the booking's insert, released after the commit.
//! - `Conditional`: `UPDATE ... WHERE available >= k` in one transaction with the booking, its
//!   row count checked (0 rows: sold out).
//! - `SeedBug`: the same `UPDATE` in its own transaction (the seed's `REQUIRES_NEW`), its row
//!   count tested `< 0`, which is never true, then the booking inserted: every request is
//!   booked whether a seat was taken or not. This is how the seed recorded 497 bookings for 300
//!   seats; it is kept to show the bug, not as a contender.

use super::process::{ServerProcess, find_binary, free_port, run_to_end, temp_dir};
use super::{Booked, BookingRow, Inventory, StoreError, StoreResult, new_booking_id, now_ms};
use anyhow::Context as _;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions, MySqlSslMode};
use sqlx::{Executor as _, Row as _};
use std::process::Command;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strategy {
    Optimistic { retry: bool },
    Pessimistic,
    NamedLock,
    Conditional,
    SeedBug,
}

impl Strategy {
    pub(crate) fn database(self) -> &'static str {
        match self {
            Strategy::Optimistic { retry: false } => "optimistic",
            Strategy::Optimistic { retry: true } => "optimistic_retry",
            Strategy::Pessimistic => "pessimistic",
            Strategy::NamedLock => "named_lock",
            Strategy::Conditional => "conditional",
            Strategy::SeedBug => "seed_bug",
        }
    }
}

/// The seed's retry: 5 attempts in all, 50 ms apart.
const OPTIMISTIC_TRIES: usize = 5;
const OPTIMISTIC_BACKOFF: Duration = Duration::from_millis(50);
/// The seed's named-lock wait, in seconds (`GET_LOCK(?, 10)`).
const NAMED_LOCK_WAIT_S: i64 = 10;
/// MariaDB's error for a lock wait that ran out (`innodb_lock_wait_timeout`).
const ER_LOCK_WAIT_TIMEOUT: &str = "1205";

/// A `mariadbd` of the bench's own.
pub(crate) struct MariaDb {
    pub(crate) port: u16,
    _process: ServerProcess,
}

impl MariaDb {
    pub(crate) async fn start() -> anyhow::Result<MariaDb> {
        let server = find_binary("mariadbd", "mariadb-server")?;
        let install = find_binary("mariadb-install-db", "mariadb-server")?;
        let dir = temp_dir("mariadb")?;
        let data = dir.join("data");
        let mut init = Command::new(&install);
        init.arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg("--auth-root-authentication-method=normal")
            .arg("--skip-test-db")
            .arg("--user=root");
        run_to_end(init, &dir.join("install.log"), Duration::from_secs(120))?;
        let port = free_port()?;
        let mut cmd = Command::new(&server);
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", dir.join("mysqld.sock").display()))
            .arg(format!("--pid-file={}", dir.join("mysqld.pid").display()))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--port={port}"))
            .arg("--user=root")
            .arg("--skip-name-resolve")
            .arg("--innodb-flush-log-at-trx-commit=1")
            .arg("--innodb-lock-wait-timeout=15")
            .arg("--innodb-buffer-pool-size=256M")
            .arg("--max-connections=1000");
        let mut process = ServerProcess::spawn("mariadbd", cmd, dir, None)?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            process.check_alive()?;
            if let Ok(pool) = pool(port, None, 1).await {
                let _ = pool.execute("SELECT 1").await;
                pool.close().await;
                break;
            }
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "mariadbd did not accept connections within 60 s (log: {})",
                process.log.display()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok(MariaDb {
            port,
            _process: process,
        })
    }

    /// The strategy's database, created empty.
    pub(crate) async fn prepare(&self, strategy: Strategy) -> anyhow::Result<()> {
        let admin = pool(self.port, None, 1).await?;
        let db = strategy.database();
        admin
            .execute(format!("DROP DATABASE IF EXISTS {db}").as_str())
            .await?;
        admin
            .execute(format!("CREATE DATABASE {db}").as_str())
            .await?;
        admin.close().await;
        let p = pool(self.port, Some(db), 1).await?;
        p.execute(
            "CREATE TABLE flights (id VARCHAR(64) PRIMARY KEY, capacity BIGINT NOT NULL, \
             available BIGINT NOT NULL, version BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB",
        )
        .await?;
        p.execute(
            "CREATE TABLE bookings (id CHAR(36) PRIMARY KEY, flight_id VARCHAR(64) NOT NULL, \
             user_id VARCHAR(128) NOT NULL, head_count BIGINT NOT NULL, created_ms BIGINT NOT NULL, \
             KEY by_user (user_id, id)) ENGINE=InnoDB",
        )
        .await?;
        p.close().await;
        Ok(())
    }

    pub(crate) async fn inventory(
        &self,
        strategy: Strategy,
        connections: u32,
    ) -> anyhow::Result<MariaInventory> {
        Ok(MariaInventory {
            strategy,
            pool: pool(self.port, Some(strategy.database()), connections).await?,
        })
    }
}

async fn pool(port: u16, db: Option<&str>, connections: u32) -> anyhow::Result<MySqlPool> {
    let mut options = MySqlConnectOptions::new()
        .host("127.0.0.1")
        .port(port)
        .username("root")
        .ssl_mode(MySqlSslMode::Disabled);
    if let Some(db) = db {
        options = options.database(db);
    }
    MySqlPoolOptions::new()
        .max_connections(connections)
        .min_connections(connections.min(4))
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(options)
        .await
        .context("connecting to mariadbd")
}

pub(crate) struct MariaInventory {
    strategy: Strategy,
    pool: MySqlPool,
}

fn is_lock_timeout(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|c| c == ER_LOCK_WAIT_TIMEOUT)
}

fn lock_error(e: sqlx::Error) -> StoreError {
    if is_lock_timeout(&e) {
        StoreError::Busy("lock wait timeout".into())
    } else {
        StoreError::Other(e.into())
    }
}

const INSERT_BOOKING: &str =
    "INSERT INTO bookings (id, flight_id, user_id, head_count, created_ms) VALUES (?, ?, ?, ?, ?)";

impl MariaInventory {
    /// One optimistic attempt: `None` on a version conflict.
    async fn optimistic_once(
        &self,
        flight: &str,
        user: &str,
        k: i64,
    ) -> StoreResult<Option<Booked>> {
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query("SELECT available, version FROM flights WHERE id = ?")
            .bind(flight)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else {
            return Ok(Some(Booked::SoldOut));
        };
        let (available, version): (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
        if available < k {
            return Ok(Some(Booked::SoldOut));
        }
        let updated = sqlx::query(
            "UPDATE flights SET available = ?, version = version + 1 WHERE id = ? AND version = ?",
        )
        .bind(available - k)
        .bind(flight)
        .bind(version)
        .execute(&mut *tx)
        .await
        .map_err(lock_error)?;
        if updated.rows_affected() == 0 {
            return Ok(None);
        }
        let id = new_booking_id();
        insert(&mut tx, &id, flight, user, k).await?;
        tx.commit().await?;
        Ok(Some(Booked::Created(id)))
    }
}

async fn insert(
    tx: &mut sqlx::Transaction<'_, sqlx::MySql>,
    id: &str,
    flight: &str,
    user: &str,
    k: i64,
) -> StoreResult<()> {
    sqlx::query(INSERT_BOOKING)
        .bind(id)
        .bind(flight)
        .bind(user)
        .bind(k)
        .bind(now_ms())
        .execute(&mut **tx)
        .await?;
    Ok(())
}

impl Inventory for MariaInventory {
    async fn create_flight(&self, flight: &str, capacity: i64) -> StoreResult<bool> {
        let done = sqlx::query(
            "INSERT IGNORE INTO flights (id, capacity, available, version) VALUES (?, ?, ?, 0)",
        )
        .bind(flight)
        .bind(capacity)
        .bind(capacity)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn book(&self, flight: &str, user: &str, k: i64) -> StoreResult<Booked> {
        match self.strategy {
            Strategy::Optimistic { retry } => {
                let tries = if retry { OPTIMISTIC_TRIES } else { 1 };
                for attempt in 0..tries {
                    if attempt > 0 {
                        tokio::time::sleep(OPTIMISTIC_BACKOFF).await;
                    }
                    if let Some(done) = self.optimistic_once(flight, user, k).await? {
                        return Ok(done);
                    }
                }
                Ok(Booked::Conflict)
            }
            Strategy::Pessimistic => {
                let mut tx = self.pool.begin().await?;
                let row = sqlx::query("SELECT available FROM flights WHERE id = ? FOR UPDATE")
                    .bind(flight)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(lock_error)?;
                let available: i64 = match row {
                    Some(r) => r.try_get(0)?,
                    None => return Ok(Booked::SoldOut),
                };
                if available < k {
                    return Ok(Booked::SoldOut);
                }
                sqlx::query("UPDATE flights SET available = available - ? WHERE id = ?")
                    .bind(k)
                    .bind(flight)
                    .execute(&mut *tx)
                    .await?;
                let id = new_booking_id();
                insert(&mut tx, &id, flight, user, k).await?;
                tx.commit().await?;
                Ok(Booked::Created(id))
            }
            Strategy::NamedLock => {
                let mut conn = self.pool.acquire().await?;
                let name = format!("flightsSeatLock:{flight}");
                let got: Option<i64> = sqlx::query_scalar("SELECT CAST(GET_LOCK(?, ?) AS SIGNED)")
                    .bind(&name)
                    .bind(NAMED_LOCK_WAIT_S)
                    .fetch_one(&mut *conn)
                    .await?;
                if got != Some(1) {
                    return Err(StoreError::Busy("GET_LOCK timed out".into()));
                }
                let result = conditional(&mut conn, flight, user, k).await;
                // Released on the same connection, whatever the booking came to; a connection
                // that cannot release is closed so the lock goes with it.
                let released = sqlx::query("SELECT RELEASE_LOCK(?)")
                    .bind(&name)
                    .execute(&mut *conn)
                    .await;
                if released.is_err() {
                    drop(conn.detach());
                }
                result
            }
            Strategy::Conditional => {
                let mut conn = self.pool.acquire().await?;
                conditional(&mut conn, flight, user, k).await
            }
            Strategy::SeedBug => {
                let updated = sqlx::query(
                    "UPDATE flights SET available = available - ? WHERE id = ? AND available >= ?",
                )
                .bind(k)
                .bind(flight)
                .bind(k)
                .execute(&self.pool)
                .await
                .map_err(lock_error)?;
                // The seed's test, kept as written (its `int` from the repository): a row
                // count is never negative, so a 0-row update (no seat left) still books.
                let rows = updated.rows_affected() as i64;
                if rows < 0 {
                    return Ok(Booked::SoldOut);
                }
                let id = new_booking_id();
                sqlx::query(INSERT_BOOKING)
                    .bind(&id)
                    .bind(flight)
                    .bind(user)
                    .bind(k)
                    .bind(now_ms())
                    .execute(&self.pool)
                    .await?;
                Ok(Booked::Created(id))
            }
        }
    }

    async fn flight(&self, flight: &str) -> StoreResult<Option<(i64, i64)>> {
        let row = sqlx::query("SELECT capacity, available FROM flights WHERE id = ?")
            .bind(flight)
            .fetch_optional(&self.pool)
            .await?;
        Ok(match row {
            Some(r) => Some((r.try_get(0)?, r.try_get(1)?)),
            None => None,
        })
    }

    async fn bookings(&self, user: &str) -> StoreResult<Vec<BookingRow>> {
        let rows = sqlx::query(
            "SELECT id, flight_id, head_count, created_ms FROM bookings WHERE user_id = ? ORDER BY id",
        )
        .bind(user)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| -> StoreResult<BookingRow> {
                Ok(BookingRow {
                    booking_id: r.try_get(0)?,
                    flight_id: r.try_get(1)?,
                    head_count: r.try_get(2)?,
                    created_ms: r.try_get(3)?,
                })
            })
            .collect()
    }
}

/// The conditional decrement and the booking in one transaction, the row count checked.
async fn conditional(
    conn: &mut sqlx::pool::PoolConnection<sqlx::MySql>,
    flight: &str,
    user: &str,
    k: i64,
) -> StoreResult<Booked> {
    use sqlx::Connection as _;
    let mut tx = conn.begin().await?;
    let updated =
        sqlx::query("UPDATE flights SET available = available - ? WHERE id = ? AND available >= ?")
            .bind(k)
            .bind(flight)
            .bind(k)
            .execute(&mut *tx)
            .await
            .map_err(lock_error)?;
    if updated.rows_affected() == 0 {
        return Ok(Booked::SoldOut);
    }
    let id = new_booking_id();
    insert(&mut tx, &id, flight, user, k).await?;
    tx.commit().await?;
    Ok(Booked::Created(id))
}
