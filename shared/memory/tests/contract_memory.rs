//! The contract suite against the in-memory backend: every store case and every queue case, as
//! the embedded and DynamoDB backends run them. Each case gets a fresh backend on its own manual
//! clock, so queue cases see only their own messages.

use seatgate::domain::Millis;
use seatgate_memory::{MemoryBackend, MemoryConfig};
use seatgate_testkit::ManualClock;
use seatgate_testkit::contract::{ChangeLog, Harness, QueueLimits};
use std::sync::Arc;
use std::time::Duration;

fn config() -> MemoryConfig {
    MemoryConfig {
        visibility_timeout: Duration::from_secs(30),
        ..MemoryConfig::default()
    }
}

async fn in_memory() -> Harness {
    // A fixed start: the backend reads no other time than this clock's.
    let clock = Arc::new(ManualClock::new(Millis(1_767_225_600_000)));
    let config = config();
    let backend = MemoryBackend::new(clock.clone(), config.clone());
    let limits = QueueLimits {
        visibility_timeout: config.visibility_timeout,
        max_receive_count: config.max_receive_count,
        patience: Duration::from_secs(1),
    };
    Harness::from_store(backend.clone(), clock)
        .with_queue(backend.clone(), limits)
        .with_changes(Arc::new(Feed(backend)))
}

/// The backend's change feed, read without acknowledging anything.
struct Feed(MemoryBackend);

#[async_trait::async_trait]
impl ChangeLog for Feed {
    async fn recorded(&self) -> Vec<seatgate::domain::Change> {
        let pending = self.0.fetch_changes(usize::MAX).expect("the feed reads");
        pending.into_iter().map(|p| p.change).collect()
    }
}

mod in_memory {
    use super::*;
    seatgate_testkit::store_contract!(in_memory());
    seatgate_testkit::queue_contract!(in_memory());
}

/// A store-only harness must make queue cases fail loudly, never pass by skipping.
#[tokio::test]
#[should_panic(expected = "needs a queue")]
async fn queue_cases_without_a_queue_fail() {
    let clock = Arc::new(ManualClock::new(Millis(1_767_225_600_000)));
    let backend = MemoryBackend::new(clock.clone(), config());
    let harness = Harness::from_store(backend, clock);
    seatgate_testkit::contract::delete_then_next(&harness).await;
}
