//! The contract suite against the embedded (SQLite) backend, plus what only the embedded backend
//! promises: durability across a reopen, the transactional outbox and its retry policy, and
//! several handles (processes) sharing one file without sharing a message group.
//!
//! The store cases run twice: on a private in-memory database, and on one file shared by every
//! case through its own handle, which is how several runner processes use it.

use seatgate::domain::{
    Action, ActionKind, ActionStatus, ConsentRecord, Intent, IntentId, IntentKind, IntentStatus,
    Millis, Reason, SeatId, SeatMessage, Secret, Terminal, Transition, TransitionRecord,
    TransitionRequest, UserId,
};

use seatgate::ports::{
    Actions, Clock, ConfirmError, Confirmation, Credentials, Intents, QueueConsumer, QueueError,
    SeatQueue, StoreError, TransitionError,
};

use seatgate_embedded::{EmbeddedBackend, EmbeddedConfig, SCHEMA_VERSION};

use seatgate_testkit::ManualClock;

use seatgate_testkit::contract::{ChangeLog, Harness, QueueLimits};

use seatgate_testkit::paging::whole_history;

use std::collections::{HashMap, HashSet};

use std::path::{Path, PathBuf};

use std::sync::{Arc, Mutex, OnceLock};

use std::time::Duration;

const VISIBILITY: Duration = Duration::from_secs(30);

fn config() -> EmbeddedConfig {
    EmbeddedConfig {
        visibility_timeout: VISIBILITY,
        ..EmbeddedConfig::default()
    }
}

fn limits(config: &EmbeddedConfig) -> QueueLimits {
    QueueLimits {
        visibility_timeout: config.visibility_timeout,
        max_receive_count: config.max_receive_count,
        patience: Duration::from_secs(1),
    }
}

fn manual_clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(Millis::now()))
}

async fn in_memory() -> Harness {
    let clock = manual_clock();
    let backend = EmbeddedBackend::open_in_memory(clock.clone(), config()).unwrap();
    Harness::from_store(backend.clone(), clock)
        .with_queue(backend.clone(), limits(&config()))
        .with_changes(Arc::new(Outbox(backend)))
}

/// The outbox table's pending rows, read without acknowledging any.
struct Outbox(EmbeddedBackend);

#[async_trait::async_trait]
impl ChangeLog for Outbox {
    async fn recorded(&self) -> Vec<seatgate::domain::Change> {
        let rows = self
            .0
            .fetch_outbox(1_000_000)
            .await
            .expect("the outbox reads");
        rows.into_iter().map(|r| r.change).collect()
    }
}

/// One file for the whole test binary, each case on its own handle: many "processes" writing
/// one database concurrently, as the contract's unique ids allow.
async fn shared_file() -> Harness {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    let path = PATH.get_or_init(|| {
        let dir = std::env::temp_dir().join("seatgate-contract-embedded");
        std::fs::create_dir_all(&dir).unwrap();
        remove_stale_files(&dir);
        dir.join(format!("shared-{}.sqlite", uuid::Uuid::new_v4()))
    });
    let clock = manual_clock();
    let backend = EmbeddedBackend::open(path, clock.clone(), config()).unwrap();
    Harness::from_store(backend.clone(), clock).with_changes(Arc::new(Outbox(backend)))
}

/// The shared file outlives the test binary (statics are never dropped); earlier runs' files
/// are removed here instead.
fn remove_stale_files(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().unwrap_or_default() > Duration::from_secs(3600));
        if old {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

mod in_memory {
    use super::*;
    seatgate_testkit::store_contract!(in_memory());
    seatgate_testkit::queue_contract!(in_memory());
}

mod on_a_shared_file {
    use super::*;
    seatgate_testkit::store_contract!(shared_file());
}

/// A store-only harness must make queue cases fail loudly, never pass by skipping.
#[tokio::test]
#[should_panic(expected = "needs a queue")]
async fn queue_cases_without_a_queue_fail() {
    let clock = manual_clock();
    let backend = EmbeddedBackend::open_in_memory(clock.clone(), config()).unwrap();
    let harness = Harness::from_store(backend, clock);
    seatgate_testkit::contract::delete_then_next(&harness).await;
}

// ---------------------------------------------------------------------------------------------
// Embedded-only behaviour
// ---------------------------------------------------------------------------------------------

/// A directory removed when the test ends.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let path = std::env::temp_dir().join(format!("seatgate-{tag}-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    fn db(&self) -> PathBuf {
        self.0.join("seatgate.sqlite")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn seat(name: &str) -> SeatId {
    SeatId::parse(&format!("{name}-{}", uuid::Uuid::new_v4().simple())).unwrap()
}

fn user() -> UserId {
    UserId::parse(&format!("user-{}", uuid::Uuid::new_v4().simple())).unwrap()
}

fn confirmation(action: &Action, now: Millis) -> Confirmation {
    Confirmation::of(
        action,
        IntentId::generate(),
        &action.user_id,
        now,
        now.plus(Duration::from_secs(60)),
    )
}

fn wait_for(now: Millis) -> (Intent, ConsentRecord) {
    let intent = Intent::waiting(user(), seat("W"), now.plus(Duration::from_secs(600)), now);
    let consent = ConsentRecord {
        intent_id: intent.intent_id.clone(),
        user_id: intent.user_id.clone(),
        seat_id: intent.seat_id.clone(),
        kind: IntentKind::Wait,
        action_id: None,
        consented_at: now,
    };
    (intent, consent)
}

fn claim(intent: &Intent, now: Millis) -> TransitionRequest {
    TransitionRequest {
        seen: None,
        reading: None,
        intent_id: intent.intent_id.clone(),
        seat_id: Some(intent.seat_id.clone()),
        now,
        transition: Transition::Claim {
            lease_until: now.plus(Duration::from_secs(10)),
            due_at: now.plus(Duration::from_secs(12)),
        },
    }
}

fn complete(intent: &Intent, now: Millis, token: u64) -> TransitionRequest {
    TransitionRequest {
        seen: None,
        reading: None,
        intent_id: intent.intent_id.clone(),
        seat_id: Some(intent.seat_id.clone()),
        now,
        transition: Transition::Complete {
            token,
            status: Terminal::Succeeded,
            charge_id: Some("c-1".into()),
            reason: Reason::Reserved,
            suppress: None,
        },
    }
}

fn message(seat: &SeatId) -> SeatMessage {
    SeatMessage {
        intent_id: IntentId::generate(),
        seat_id: seat.clone(),
        version: 1,
        intent: None,
    }
}

fn body(d: &seatgate::ports::Delivery) -> SeatMessage {
    serde_json::from_str(&d.body).unwrap()
}

async fn pending(b: &EmbeddedBackend) -> usize {
    b.outbox_counts().await.unwrap().0
}

/// The seat queue's `(ready, in flight, dead)` counts, through the operator's port.
async fn seat_depth(b: &EmbeddedBackend) -> (u64, u64, u64) {
    use seatgate::ports::QueueAdmin;
    let d = b.depths().await.unwrap().seat_messages;
    (d.ready, d.in_flight, d.dead)
}

mod durability;
mod migrations;
