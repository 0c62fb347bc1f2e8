//! The simulator's runtime inputs, seeded: tokio's (paused) clock read as the `Clock` port, and
//! randomness and ids from a seed, wired through `Ports::with_determinism` so every choice the
//! services take is a function of the seed.
//!
//! Here, beside the deterministic backend, rather than in the test support: the simulator needs
//! them and nothing else of the test support, which links the AWS SDK and the upstream
//! simulator (`scripts/check-deps.sh` checks the simulator links neither).
//!
//! The ids keep UUIDv7's shape (time in the top 48 bits, from the injected clock), because
//! intent shards and index keys derive from ids; a per-millisecond counter in the next bits keeps
//! them increasing within a millisecond, as the uuid crate's `now_v7` does.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use seatgate::domain::Millis;
use seatgate::ports::{Clock, Ids, Random};
use std::sync::{Arc, Mutex};

/// Reads tokio's clock from a fixed epoch: on a runtime with paused time (`start_paused`, the
/// simulator's) time moves only when every task waits, by exactly the time the next timer
/// needs, so the services' `Clock` and their `tokio::time` sleeps agree and a run replays.
#[derive(Debug)]
pub struct TokioClock {
    origin: tokio::time::Instant,
    epoch: Millis,
}

impl TokioClock {
    /// Now on tokio's clock reads as `epoch`. Call it inside the runtime.
    pub fn starting_at(epoch: Millis) -> Self {
        TokioClock {
            origin: tokio::time::Instant::now(),
            epoch,
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Millis {
        self.epoch.plus(self.origin.elapsed())
    }
}

/// A seeded generator (ChaCha12: the same stream for a seed on every machine).
pub struct SeededRandom(Mutex<StdRng>);

impl SeededRandom {
    pub fn new(seed: u64) -> Self {
        SeededRandom(Mutex::new(StdRng::seed_from_u64(seed)))
    }
}

impl Random for SeededRandom {
    fn up_to(&self, max: u64) -> u64 {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .random_range(0..=max)
    }
}

/// UUIDv7-shaped ids from the injected clock and a seed.
pub struct SeededIds {
    clock: Arc<dyn Clock>,
    state: Mutex<IdState>,
}

struct IdState {
    rng: StdRng,
    last_ms: u64,
    counter: u16,
}

impl SeededIds {
    /// Ids whose random bits come from `seed`; give each instance of a simulation its own seed
    /// (ids must be unique across instances, and 58 seeded random bits per id make a clash as
    /// unlikely as UUIDv7's own).
    pub fn new(seed: u64, clock: Arc<dyn Clock>) -> Self {
        SeededIds {
            clock,
            state: Mutex::new(IdState {
                rng: StdRng::seed_from_u64(seed ^ 0x1d5_eed),
                last_ms: 0,
                counter: 0,
            }),
        }
    }
}

impl Ids for SeededIds {
    fn next_uuid(&self) -> uuid::Uuid {
        let ms = u64::try_from(self.clock.now().0).unwrap_or(0);
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if ms == state.last_ms {
            state.counter = state.counter.wrapping_add(1);
        } else {
            state.last_ms = ms;
            state.counter = 0;
        }
        let mut random = [0u8; 10];
        state.rng.fill(&mut random);
        random[..2].copy_from_slice(&state.counter.to_be_bytes());
        uuid::Builder::from_unix_timestamp_millis(ms, &random).into_uuid()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seatgate_testkit::ManualClock;

    #[test]
    fn a_seed_gives_the_same_draws_and_ids_and_another_seed_others() {
        let clock = Arc::new(ManualClock::new(Millis(1_700_000_000_000)));
        let run = |seed| {
            let (random, ids) = (SeededRandom::new(seed), SeededIds::new(seed, clock.clone()));
            let draws: Vec<u64> = (0..20).map(|_| random.up_to(1_000)).collect();
            let ids: Vec<uuid::Uuid> = (0..20).map(|_| ids.next_uuid()).collect();
            (draws, ids)
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        let (_, ids) = run(7);
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "increasing within a millisecond"
        );
        assert!(ids.iter().all(|u| u.get_version_num() == 7));
        assert_eq!(
            ids[0].get_timestamp().unwrap().to_unix().0,
            1_700_000_000,
            "the clock's time"
        );
    }
}
