//! How long a call takes on the store it stands in for: an optional hook, empty by default, so
//! that the simulator can run the backend at the latencies of a deployed DynamoDB and SQS
//! (`seatgate_sim::aws`) while every other user keeps calls that take no time at all.
//!
//! Shaped as a trait the backend only asks, so the backend holds no distribution of its own and
//! draws nothing unless a caller installed one: a run without it makes the same calls, in the
//! same order, as before the hook existed. A call with a service time spends half of it before
//! it is applied (the request on its way) and half after (the answer on its way back), so two
//! calls that overlap in time are applied in the order their requests arrive, as on a real
//! store, and a caller waits the whole time either way.

use crate::faults::Op;
use std::fmt;
use std::time::Duration;

/// A call's service time, drawn per call. Implementations must be cheap (one call per store
/// call) and must take their randomness from a seed, or the runs stop being functions of it.
pub trait ServiceTime: Send + Sync + fmt::Debug {
    /// How long this call of `op` takes, end to end, as its caller sees it. Whole
    /// milliseconds are best: the backend splits it into two whole-millisecond halves.
    fn draw(&self, op: Op) -> Duration;
}
