//! Asking for a reaper run at a given time: the breaker's next probe, the end of a
//! `Retry-After` pause, or at once when a probe found the upstream back.
//!
//! Intents parked behind an open breaker or a pause are due again at its end, but the reaper's
//! schedule runs once a period (a minute on AWS): without a wake-up, a user whose confirm
//! arrived during an outage waits up to a period after the upstream is back, and a period more
//! if the first run found a probe still in flight. A wake-up is a hint, not a duty: the
//! schedule still finds everything due, so a lost or failed wake-up costs time, never an
//! intent. Only the instance whose conditional write changed the breaker or the hold asks, so
//! one change is one wake-up however many instances saw it.

use super::QueueError;
use crate::domain::Millis;
use async_trait::async_trait;

/// The latest a wake-up can be asked for, from now: SQS's longest message delay (900 s). A
/// later time is asked at this bound; the run it gives then finds nothing due yet and the
/// schedule carries on.
pub const MAX_WAKE_DELAY: std::time::Duration = std::time::Duration::from_secs(900);

#[async_trait]
pub trait WakeUps: Send + Sync {
    /// Asks for one run of the reaper's `wake` at `at` (at once if
    /// that is past; at most [`MAX_WAKE_DELAY`] from now). May run more than once (at-least-once
    /// delivery) and a little late. A failure to ask is a [`QueueError`]; the caller logs it and
    /// relies on the schedule.
    async fn wake_at(&self, at: Millis) -> Result<(), QueueError>;
}
