//! The production sources of randomness and ids: the OS-seeded thread generator and UUIDv7.
//!
//! They are the only places outside the adapters' own crypto (sealing nonces and keys) where
//! the services' choices meet real entropy; `scripts/check-determinism.sh` keeps it so. Tests
//! and the simulator swap in the seeded sources of `seatgate_memory::runtime`.

use crate::ports::{Ids, Random};

/// Draws from `rand`'s thread-local generator, seeded by the OS.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsRandom;

impl Random for OsRandom {
    fn up_to(&self, max: u64) -> u64 {
        rand::random_range(0..=max)
    }
}

/// UUIDv7: the wall clock's milliseconds and 74 random bits.
#[derive(Debug, Default, Clone, Copy)]
pub struct UuidV7;

impl Ids for UuidV7 {
    fn next_uuid(&self) -> uuid::Uuid {
        uuid::Uuid::now_v7()
    }
}
