//! Today's other usual pick: Redis (Debian's `redis-server`) with one Lua script that checks
//! and decrements the flight's stock and appends the booking, atomically (Redis runs a script
//! alone).
//!
//! Measured twice, and labelled so: `appendfsync always` (the AOF is fsynced before a write is
//! answered: durable on return) and `appendfsync everysec` (fsynced once a second: a crash loses
//! up to a second of answered bookings, so not durable on return). RDB snapshots are off, so
//! the AOF is the only persistence either way. "Pool size" here is the number of multiplexed
//! connections requests are spread over.

use super::process::{ServerProcess, find_binary, free_port, temp_dir};
use super::{Booked, BookingRow, Inventory, StoreResult, new_booking_id, now_ms};
use anyhow::Context as _;
use redis::aio::MultiplexedConnection;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fsync {
    Always,
    EverySec,
}

impl Fsync {
    fn setting(self) -> &'static str {
        match self {
            Fsync::Always => "always",
            Fsync::EverySec => "everysec",
        }
    }
}

const BOOK: &str = r#"
local available = tonumber(redis.call('HGET', KEYS[1], 'available'))
local k = tonumber(ARGV[1])
if available == nil or available < k then return 0 end
redis.call('HINCRBY', KEYS[1], 'available', -k)
redis.call('RPUSH', KEYS[2], ARGV[2])
return 1
"#;

const CREATE: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'capacity', ARGV[1], 'available', ARGV[1])
return 1
"#;

pub(crate) struct Redis {
    url: String,
    _process: ServerProcess,
}

impl Redis {
    pub(crate) async fn start(fsync: Fsync) -> anyhow::Result<Redis> {
        let server = find_binary("redis-server", "redis-server")?;
        let dir = temp_dir(&format!("redis-{}", fsync.setting()))?;
        let port = free_port()?;
        let mut cmd = Command::new(&server);
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--dir", &dir.display().to_string()])
            .args(["--appendonly", "yes", "--appendfsync", fsync.setting()])
            .args(["--save", "", "--protected-mode", "no", "--daemonize", "no"]);
        let mut process = ServerProcess::spawn("redis-server", cmd, dir, None)?;
        let url = format!("redis://127.0.0.1:{port}/");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            process.check_alive()?;
            if let Ok(mut c) = connect(&url).await
                && redis::cmd("PING")
                    .query_async::<String>(&mut c)
                    .await
                    .is_ok()
            {
                break;
            }
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "redis-server did not answer PING within 30 s (log: {})",
                process.log.display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(Redis {
            url,
            _process: process,
        })
    }

    pub(crate) async fn inventory(&self, connections: usize) -> anyhow::Result<RedisInventory> {
        let mut conns = Vec::with_capacity(connections.max(1));
        for _ in 0..connections.max(1) {
            conns.push(connect(&self.url).await?);
        }
        Ok(RedisInventory {
            conns,
            next: AtomicUsize::new(0),
            book: redis::Script::new(BOOK),
            create: redis::Script::new(CREATE),
        })
    }
}

async fn connect(url: &str) -> anyhow::Result<MultiplexedConnection> {
    redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await
        .context("connecting to redis-server")
}

pub(crate) struct RedisInventory {
    conns: Vec<MultiplexedConnection>,
    next: AtomicUsize,
    book: redis::Script,
    create: redis::Script,
}

impl RedisInventory {
    fn conn(&self) -> MultiplexedConnection {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.conns.len();
        self.conns[i].clone()
    }
}

fn flight_key(flight: &str) -> String {
    format!("flight:{flight}")
}

impl Inventory for RedisInventory {
    async fn create_flight(&self, flight: &str, capacity: i64) -> StoreResult<bool> {
        let made: i64 = self
            .create
            .key(flight_key(flight))
            .arg(capacity)
            .invoke_async(&mut self.conn())
            .await?;
        Ok(made == 1)
    }

    async fn book(&self, flight: &str, user: &str, k: i64) -> StoreResult<Booked> {
        let id = new_booking_id();
        let record = serde_json::json!({
            "booking_id": id, "flight_id": flight, "headCount": k, "created_ms": now_ms(),
        })
        .to_string();
        let done: i64 = self
            .book
            .key(flight_key(flight))
            .key(format!("bookings:{user}"))
            .arg(k)
            .arg(record)
            .invoke_async(&mut self.conn())
            .await?;
        Ok(if done == 1 {
            Booked::Created(id)
        } else {
            Booked::SoldOut
        })
    }

    async fn flight(&self, flight: &str) -> StoreResult<Option<(i64, i64)>> {
        let (capacity, available): (Option<i64>, Option<i64>) = redis::cmd("HMGET")
            .arg(flight_key(flight))
            .arg("capacity")
            .arg("available")
            .query_async(&mut self.conn())
            .await?;
        Ok(capacity.zip(available))
    }

    async fn bookings(&self, user: &str) -> StoreResult<Vec<BookingRow>> {
        let records: Vec<String> = redis::cmd("LRANGE")
            .arg(format!("bookings:{user}"))
            .arg(0)
            .arg(-1)
            .query_async(&mut self.conn())
            .await?;
        records
            .iter()
            .map(|r| -> StoreResult<BookingRow> {
                let v: serde_json::Value = serde_json::from_str(r)?;
                Ok(BookingRow {
                    booking_id: v["booking_id"].as_str().unwrap_or_default().to_owned(),
                    flight_id: v["flight_id"].as_str().unwrap_or_default().to_owned(),
                    head_count: v["headCount"].as_i64().unwrap_or_default(),
                    created_ms: v["created_ms"].as_i64().unwrap_or_default(),
                })
            })
            .collect()
    }
}
