//! Planted bugs: decorators on the ports the [`World`](crate::World) wires, each reproducing a
//! defect seatgate once had or could have, so a test can show that a checker catches it. A
//! checker that has never failed proves nothing; one that catches a planted bug within a
//! bounded number of seeds is known to bite.
//!
//! Why decorators: they need no workspace feature and no change to the services or backends
//! (the code under test stays exactly the code that ships); each wraps the raw port the
//! services are given and bends its answers the way the buggy code would have read them:
//! - [`Plant::ConflictByStatus`]: a 409 read by its status alone: the upstream's
//!   `409 already_charged` (the user holds another charge, the seat is free) is taken for
//!   `409 seat_taken`, so the user is told they lost a race for a free seat. Caught by the truth
//!   checker's reason rule;
//! - [`Plant::RetryAfterIgnored`]: a `Retry-After` ignored: a busy answer reaches the services
//!   without its time, so the breaker counts a failure and no route is held, and calls go on
//!   into the window the upstream asked for. Caught by the spared checker (the model knows what
//!   it told);
//! - [`Plant::ChargeBlind`]: the reaper resending the reserve instead of reading the charge:
//!   the charge read answers "no charge" whatever the upstream holds, so an unknown outcome is
//!   settled as never written, and a wait goes back in line and reserves its seat again. Caught
//!   by the truth checker (a charge standing with no SUCCEEDED intent); a wait then reads its
//!   seat taken (by its own user) and mostly does not send again, so no-rewrite sees it rarely;
//! - [`Plant::UnknownAsBusy`]: an unknown outcome read as "nothing written" (a timeout or a lost
//!   201 taken for a busy answer): the attempt goes back in line and the reserve is sent again
//!   instead of the charge being read. Caught by the no-rewrite checker (a second reserve on a
//!   committed (user, seat)), and by truth (the charge is then reported lost).
//!
//! Not planted here: a booking as read-then-write, or a settlement without the fencing token,
//! need the store's own conditions removed; through the port, every booking and settlement
//! still runs the backend's conditional write, so a decorator cannot produce the oversell or the
//! stale settlement. They belong in the memory backend (`shared/memory`) behind a plant switch.

use async_trait::async_trait;
use seatgate::domain::{RoomId, SeatAvailability, SeatId, Secret};
use seatgate::ports::{Charge, ChargeReadError, ReadError, ReserveOutcome, Upstream};
use std::fmt;
use std::sync::Arc;

/// A planted bug (see the module doc for each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Plant {
    ConflictByStatus,
    RetryAfterIgnored,
    ChargeBlind,
    UnknownAsBusy,
}

impl Plant {
    pub const ALL: [Plant; 4] = [
        Plant::ConflictByStatus,
        Plant::RetryAfterIgnored,
        Plant::ChargeBlind,
        Plant::UnknownAsBusy,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Plant::ConflictByStatus => "409-by-status",
            Plant::RetryAfterIgnored => "retry-after-ignored",
            Plant::ChargeBlind => "charge-blind-reaper",
            Plant::UnknownAsBusy => "unknown-as-busy",
        }
    }
}

impl fmt::Display for Plant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `upstream` with every plant in `plants` that bends the upstream wrapped around it, in order.
pub fn wrap_upstream(upstream: Arc<dyn Upstream>, plants: &[Plant]) -> Arc<dyn Upstream> {
    plants.iter().fold(upstream, |inner, plant| {
        Arc::new(PlantedUpstream {
            inner,
            plant: *plant,
        })
    })
}

/// The upstream as the buggy adapter would have read it.
struct PlantedUpstream {
    inner: Arc<dyn Upstream>,
    plant: Plant,
}

fn forget_retry_after<T>(result: Result<T, ReadError>) -> Result<T, ReadError> {
    match result {
        Err(ReadError::Busy { .. }) => Err(ReadError::Busy { retry_after: None }),
        other => other,
    }
}

#[async_trait]
impl Upstream for PlantedUpstream {
    async fn reserve(&self, credential: &Secret, seat_id: &SeatId) -> ReserveOutcome {
        let outcome = self.inner.reserve(credential, seat_id).await;
        match (self.plant, outcome) {
            (Plant::ConflictByStatus, ReserveOutcome::AlreadyCharged) => ReserveOutcome::SeatTaken,
            (Plant::RetryAfterIgnored, ReserveOutcome::Busy { .. })
            | (Plant::UnknownAsBusy, ReserveOutcome::Unknown(_)) => {
                ReserveOutcome::Busy { retry_after: None }
            }
            (_, outcome) => outcome,
        }
    }

    async fn current_charge(&self, credential: &Secret) -> Result<Option<Charge>, ChargeReadError> {
        let result = self.inner.current_charge(credential).await;
        match (self.plant, result) {
            (Plant::ChargeBlind, Ok(_)) => Ok(None),
            (Plant::RetryAfterIgnored, Err(ChargeReadError::Busy { .. })) => {
                Err(ChargeReadError::Busy { retry_after: None })
            }
            (_, result) => result,
        }
    }

    async fn seat(&self, seat_id: &SeatId) -> Result<bool, ReadError> {
        let result = self.inner.seat(seat_id).await;
        match self.plant {
            Plant::RetryAfterIgnored => forget_retry_after(result),
            _ => result,
        }
    }

    async fn room(&self, room_id: &RoomId) -> Result<Vec<SeatAvailability>, ReadError> {
        let result = self.inner.room(room_id).await;
        match self.plant {
            Plant::RetryAfterIgnored => forget_retry_after(result),
            _ => result,
        }
    }
}
