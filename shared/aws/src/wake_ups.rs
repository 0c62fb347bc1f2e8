//! The breaker's wake-ups of the reaper on AWS: one delayed message on a standard SQS queue,
//! which the reaper function consumes ([`seatgate::handlers::schedule::handle_event`]).
//!
//! Why a queue: FIFO queues have no per-message delay, EventBridge Scheduler's one-time
//! schedules each cost a resource to create and delete, and the reaper is already the function
//! that wakes parked intents. A standard queue delays each message up to
//! [`MAX_WAKE_DELAY`] (the breaker's open interval is 10 s, a hold at most `retry_after_max`),
//! delivers it at least once, and dead-letters what the reaper keeps failing on (`template.yaml`:
//! `WakeQueue`, `WakeDeadLetterQueue`). The body says when it was meant for, for the logs; the
//! reaper works from "now" whatever it says.

use crate::sqs::map_error;
use async_trait::async_trait;
use aws_sdk_sqs::Client;
use seatgate::domain::Millis;
use seatgate::ports::{Clock, MAX_WAKE_DELAY, QueueError, WakeUps};
use std::sync::Arc;

pub struct SqsWakeUps {
    client: Client,
    queue_url: String,
    clock: Arc<dyn Clock>,
}

impl SqsWakeUps {
    pub fn new(client: Client, queue_url: impl Into<String>, clock: Arc<dyn Clock>) -> Self {
        SqsWakeUps {
            client,
            queue_url: queue_url.into(),
            clock,
        }
    }
}

/// The message's `DelaySeconds` for a wake-up at `at`: whole seconds, rounded up so the run is
/// never before the time (a probe sent early is only refused by the breaker, but costs a run),
/// at most [`MAX_WAKE_DELAY`].
pub fn delay_seconds(at: Millis, now: Millis) -> i32 {
    let ms = at.since(now).min(MAX_WAKE_DELAY).as_millis();
    i32::try_from(ms.div_ceil(1000)).unwrap_or(i32::MAX)
}

#[async_trait]
impl WakeUps for SqsWakeUps {
    async fn wake_at(&self, at: Millis) -> Result<(), QueueError> {
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .delay_seconds(delay_seconds(at, self.clock.now()))
            .message_body(serde_json::json!({ "wake_at": at.0 }).to_string())
            .send()
            .await
            .map_err(|e| map_error("SendMessage", e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wake_up_is_never_early_and_never_past_sqs_longest_delay() {
        let now = Millis(1_000_000);
        assert_eq!(delay_seconds(Millis(999_000), now), 0, "past: at once");
        assert_eq!(delay_seconds(now, now), 0);
        assert_eq!(delay_seconds(Millis(1_000_001), now), 1, "rounded up");
        assert_eq!(delay_seconds(Millis(1_030_000), now), 30);
        assert_eq!(delay_seconds(Millis(1_000_000 + 3_600_000), now), 900);
    }
}
