//! Today's usual pick on PostgreSQL: the conditional `UPDATE ... WHERE available >= k` and the
//! booking in one transaction, `synchronous_commit=on` (durable on return).
//!
//! PostgreSQL refuses to run as root, and the bench usually runs as root on a build machine, so
//! the server runs as an unprivileged system user ([`USER`], created with `useradd --system` when
//! missing) through `runuser`, in a data directory owned by that user. The postmaster's pid is
//! read from its `postmaster.pid` so that stopping reaches the server, not only `runuser`.

use super::process::{ServerProcess, find_binary, free_port, run_to_end, temp_dir};
use super::{Booked, BookingRow, Inventory, StoreResult, new_booking_id, now_ms};
use anyhow::{Context as _, bail};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgSslMode};
use sqlx::{Executor as _, Row as _};
use std::process::Command;
use std::time::Duration;

/// The unprivileged user the server runs as.
const USER: &str = "seatgate-bench";

pub(crate) struct Postgres {
    port: u16,
    _process: ServerProcess,
}

fn ensure_user() -> anyhow::Result<()> {
    let exists = Command::new("id")
        .arg("-u")
        .arg(USER)
        .output()
        .context("running id")?;
    if exists.status.success() {
        return Ok(());
    }
    let made = Command::new("useradd")
        .args([
            "--system",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            USER,
        ])
        .status()
        .context("running useradd (the bench must run as root to create it)")?;
    if !made.success() {
        bail!("useradd --system {USER} failed ({made})");
    }
    Ok(())
}

impl Postgres {
    pub(crate) async fn start() -> anyhow::Result<Postgres> {
        let postgres = find_binary("postgres", "postgresql")?;
        let initdb = find_binary("initdb", "postgresql")?;
        let runuser = find_binary("runuser", "util-linux")?;
        ensure_user()?;
        let dir = temp_dir("postgres")?;
        let data = dir.join("data");
        let chown = Command::new("chown")
            .args(["-R", &format!("{USER}:"), &dir.display().to_string()])
            .status()?;
        anyhow::ensure!(chown.success(), "chown of {} failed", dir.display());
        let mut init = Command::new(&runuser);
        init.args(["-u", USER, "--"])
            .arg(&initdb)
            .args(["-D", &data.display().to_string()])
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-instructions",
            ]);
        run_to_end(init, &dir.join("initdb.log"), Duration::from_secs(120))?;
        let port = free_port()?;
        let mut cmd = Command::new(&runuser);
        cmd.args(["-u", USER, "--"])
            .arg(&postgres)
            .args(["-D", &data.display().to_string()])
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .args(["-k", &dir.display().to_string()])
            .args(["-c", "synchronous_commit=on", "-c", "fsync=on"])
            .args(["-c", "max_connections=400", "-c", "shared_buffers=256MB"]);
        // The server writes its log to stderr, into a file the root-owned bench opens.
        let pid_file = data.join("postmaster.pid");
        let mut process = ServerProcess::spawn("postgres", cmd, dir, Some(pid_file))?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            process.check_alive()?;
            if let Ok(pool) = pool(port, 1).await {
                pool.close().await;
                break;
            }
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "postgres did not accept connections within 60 s (log: {})",
                process.log.display()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let p = pool(port, 1).await?;
        p.execute(
            "CREATE TABLE flights (id TEXT PRIMARY KEY, capacity BIGINT NOT NULL, \
             available BIGINT NOT NULL)",
        )
        .await?;
        p.execute(
            "CREATE TABLE bookings (id TEXT PRIMARY KEY, flight_id TEXT NOT NULL, \
             user_id TEXT NOT NULL, head_count BIGINT NOT NULL, created_ms BIGINT NOT NULL)",
        )
        .await?;
        p.execute("CREATE INDEX bookings_by_user ON bookings (user_id, id)")
            .await?;
        p.close().await;
        Ok(Postgres {
            port,
            _process: process,
        })
    }

    pub(crate) async fn inventory(&self, connections: u32) -> anyhow::Result<PgInventory> {
        Ok(PgInventory {
            pool: pool(self.port, connections).await?,
        })
    }
}

async fn pool(port: u16, connections: u32) -> anyhow::Result<PgPool> {
    let options = PgConnectOptions::new()
        .host("127.0.0.1")
        .port(port)
        .username("postgres")
        .database("postgres")
        .ssl_mode(PgSslMode::Disable);
    PgPoolOptions::new()
        .max_connections(connections)
        .min_connections(connections.min(4))
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(options)
        .await
        .context("connecting to postgres")
}

pub(crate) struct PgInventory {
    pool: PgPool,
}

impl Inventory for PgInventory {
    async fn create_flight(&self, flight: &str, capacity: i64) -> StoreResult<bool> {
        let done = sqlx::query(
            "INSERT INTO flights (id, capacity, available) VALUES ($1, $2, $2) \
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(flight)
        .bind(capacity)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn book(&self, flight: &str, user: &str, k: i64) -> StoreResult<Booked> {
        let mut tx = self.pool.begin().await?;
        let updated = sqlx::query(
            "UPDATE flights SET available = available - $1 WHERE id = $2 AND available >= $1",
        )
        .bind(k)
        .bind(flight)
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() == 0 {
            return Ok(Booked::SoldOut);
        }
        let id = new_booking_id();
        sqlx::query(
            "INSERT INTO bookings (id, flight_id, user_id, head_count, created_ms) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&id)
        .bind(flight)
        .bind(user)
        .bind(k)
        .bind(now_ms())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Booked::Created(id))
    }

    async fn flight(&self, flight: &str) -> StoreResult<Option<(i64, i64)>> {
        let row = sqlx::query("SELECT capacity, available FROM flights WHERE id = $1")
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
            "SELECT id, flight_id, head_count, created_ms FROM bookings WHERE user_id = $1 ORDER BY id",
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
