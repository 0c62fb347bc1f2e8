//! The reaper's edge: an event in, a report out. Two kinds of event invoke the reaper: its
//! schedule (or an operator's invoke), whose payload carries nothing the reaper needs (it
//! always works from "now"), and the wake-up queue's messages ([`crate::ports::WakeUps`]),
//! which ask for [`Reaper::wake`]. They are told apart by shape: an SQS event is a `Records`
//! list whose records come from `aws:sqs`; anything else is the schedule.

use crate::ports::StoreError;
pub use crate::service::reaper::PASS_LIMIT;
use crate::service::{Reaper, ReaperReport};
use serde_json::Value;

/// What invoked the reaper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The schedule, an operator's on-demand pass, or any payload that is not a wake-up.
    Schedule,
    /// One or more wake-up messages: however many, one wake run answers them all.
    WakeUp,
}

impl Trigger {
    pub fn of(event: &Value) -> Trigger {
        let from_sqs = event
            .get("Records")
            .and_then(Value::as_array)
            .and_then(|records| records.first())
            .and_then(|r| r.get("eventSource"))
            .and_then(Value::as_str)
            == Some("aws:sqs");
        if from_sqs {
            Trigger::WakeUp
        } else {
            Trigger::Schedule
        }
    }
}

/// A scheduled pass.
pub async fn handle(reaper: &Reaper) -> Result<ReaperReport, StoreError> {
    reaper.run(PASS_LIMIT).await
}

/// Whatever invoked the reaper. A wake run that fails is an error, so its messages return and
/// are tried again (and dead-lettered past the queue's receive count).
pub async fn handle_event(reaper: &Reaper, event: &Value) -> Result<ReaperReport, StoreError> {
    match Trigger::of(event) {
        Trigger::Schedule => reaper.run(PASS_LIMIT).await,
        Trigger::WakeUp => reaper.wake(PASS_LIMIT).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_sqs_event_is_a_wake_up_and_anything_else_the_schedule() {
        let sqs: Value = serde_json::from_str(include_str!(
            "../../../../tests/events/reaper-wake-sqs.json"
        ))
        .unwrap();
        assert_eq!(Trigger::of(&sqs), Trigger::WakeUp);
        let scheduled: Value = serde_json::json!({
            "source": "aws.events", "detail-type": "Scheduled Event", "detail": {}
        });
        assert_eq!(Trigger::of(&scheduled), Trigger::Schedule);
        let admin: Value =
            serde_json::json!({"source": "seatgate.admin", "detail-type": "reconcile"});
        assert_eq!(Trigger::of(&admin), Trigger::Schedule);
        assert_eq!(
            Trigger::of(&serde_json::json!({"Records": []})),
            Trigger::Schedule
        );
        let stream = serde_json::json!({"Records": [{"eventSource": "aws:dynamodb"}]});
        assert_eq!(Trigger::of(&stream), Trigger::Schedule);
    }
}
