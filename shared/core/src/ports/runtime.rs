//! The runtime's inputs a service must not take from the platform directly: time,
//! randomness and new ids. Injected so that tests and the simulator run every service on a
//! seeded clock and seeded ids, and a run is a function of its seed.

use crate::domain::Millis;

/// Where time comes from; tests drive a manual clock, the simulator a simulated one. The
/// services read time only here (and wait only through `tokio::time`, which a simulation runs
/// paused, so the two agree).
pub trait Clock: Send + Sync {
    fn now(&self) -> Millis;
}

/// The randomness the services draw on: the shard a booking starts at, the jitter of backoffs
/// and of wait re-checks. Production draws from the OS; tests and the simulator from a seed, so
/// a run is a function of its seed. An implementation never fails and never blocks.
pub trait Random: Send + Sync {
    /// A uniform draw from `0..=max`.
    fn up_to(&self, max: u64) -> u64;
}

/// Where new ids come from: actions, intents, bookings, idempotency tokens and the names of
/// this instance's lease holders. Ids must be unique across every instance sharing a store and
/// time-ordered like UUIDv7 (intent shards and index keys derive from them); production uses
/// UUIDv7, the simulator a seeded sequence of the same shape.
pub trait Ids: Send + Sync {
    fn next_uuid(&self) -> uuid::Uuid;
}
