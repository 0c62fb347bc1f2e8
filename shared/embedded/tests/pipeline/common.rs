//! What every pipeline test shares: `Pipeline` (the real services on one embedded backend, the
//! upstream simulator, a manual clock) whose `pump` plays the event source mappings the way the
//! runner does (outbox -> relay, queue -> worker, until nothing moves), and small helpers.
//!
//! Holds no test of its own.

use seatgate::config::Timing;
use seatgate::domain::{
    ActionKind, ChangeRecord, Intent, IntentId, IntentStatus, Millis, SeatId, Transition,
    TransitionRequest, UserId,
};
use seatgate::handlers::stream;
use seatgate::ports::{Clock, Intents, QueueConsumer};
use seatgate::service::{ApiService, Ports, QueueRecord, Reaper, Relay, Services, Worker};
use seatgate_embedded::{EmbeddedBackend, EmbeddedConfig};
use seatgate_testkit::ManualClock;
use seatgate_testkit::setup::{self};
use std::sync::Arc;
use std::time::Duration;
use upstream_sim::Simulator;

pub(crate) struct Pipeline {
    pub(crate) backend: EmbeddedBackend,
    pub(crate) clock: Arc<ManualClock>,
    pub(crate) timing: Timing,
    pub(crate) sim: Simulator,
    pub(crate) sim_url: String,
    pub(crate) api: ApiService,
    pub(crate) worker: Worker,
    pub(crate) relay: Relay,
    pub(crate) reaper: Reaper,
}

pub(crate) async fn pipeline() -> Pipeline {
    let timing = Timing::fast();
    let clock = Arc::new(ManualClock::new(Millis::now()));
    let config = EmbeddedConfig {
        visibility_timeout: timing.visibility_timeout,
        ..EmbeddedConfig::default()
    };
    let backend = EmbeddedBackend::open_in_memory(clock.clone(), config).unwrap();
    let setup::Upstream {
        sim,
        url: sim_url,
        http: upstream,
    } = setup::upstream(&timing).await;
    let store = Arc::new(backend.clone());
    let services = Services::new(
        Ports::from_store(store.clone(), upstream, clock.clone()).with_hand_back(store.clone()),
        timing.clone(),
    );
    Pipeline {
        api: services.api(),
        worker: services.worker(),
        relay: services.relay(store.clone(), Arc::new(backend.events())),
        reaper: services.reaper(),
        backend,
        clock,
        timing,
        sim,
        sim_url,
    }
}

/// Queue deliveries as the event source mapping hands them to the worker.
pub(crate) fn records(batch: &[seatgate::ports::Delivery]) -> Vec<QueueRecord> {
    batch
        .iter()
        .map(|d| QueueRecord {
            message_id: d.message_id.clone(),
            group_id: d.group_id.clone(),
            body: d.body.clone(),
            receipt: d.receipt.clone(),
        })
        .collect()
}

pub(crate) fn user(n: usize) -> UserId {
    UserId::parse(&format!("u{n}")).unwrap()
}

impl Pipeline {
    /// A user known to the upstream with a working credential, stored in seatgate.
    pub(crate) async fn enrol(&self, n: usize) -> UserId {
        let u = user(n);
        self.sim.register_user(u.as_str(), &format!("cred-{n}"));
        self.api
            .put_credential(&u, &format!("cred-{n}"))
            .await
            .unwrap();
        u
    }

    /// Prepare + confirm: the intent id.
    pub(crate) async fn confirm(&self, u: &UserId, seat: &str) -> IntentId {
        let action = self
            .api
            .prepare(u, ActionKind::ReserveSeat, SeatId::parse(seat).unwrap())
            .await
            .unwrap();
        let confirmed = self.api.confirm(u, &action.action_id).await.unwrap();
        assert!(confirmed.created);
        assert_eq!(confirmed.intent.status, IntentStatus::Requested);
        confirmed.intent.intent_id
    }

    /// Relays pending outbox rows through the stream handler; returns how many were relayed.
    pub(crate) async fn relay_outbox(&self) -> usize {
        let mut relayed = 0;
        loop {
            let rows = self.backend.fetch_outbox(100).await.unwrap();
            if rows.is_empty() {
                return relayed;
            }
            let seqs: Vec<i64> = rows.iter().map(|r| r.seq).collect();
            let records = rows.into_iter().map(ChangeRecord::from).collect();
            assert_eq!(stream::handle(&self.relay, records).await, None);
            self.backend.ack_outbox(&seqs).await.unwrap();
            relayed += seqs.len();
        }
    }

    /// Delivers queued messages to the worker in batches of 10, deleting the processed ones.
    pub(crate) async fn work_queue(&self) -> usize {
        let mut delivered = 0;
        loop {
            let batch = self.backend.receive(10).await.unwrap();
            if batch.is_empty() {
                return delivered;
            }
            delivered += batch.len();
            let failed = self.worker.handle_batch(&records(&batch)).await;
            let done: Vec<String> = batch
                .iter()
                .filter(|d| !failed.contains(&d.message_id))
                .map(|d| d.receipt.clone())
                .collect();
            self.backend.delete(&done).await.unwrap();
            if !failed.is_empty() {
                // Failed messages stay in flight until their visibility timeout.
                return delivered;
            }
        }
    }

    /// Relay and work until nothing moves.
    pub(crate) async fn pump(&self) {
        loop {
            let moved = self.relay_outbox().await + self.work_queue().await;
            if moved == 0 {
                return;
            }
        }
    }

    pub(crate) async fn intent(&self, id: &IntentId) -> Intent {
        self.backend.get_intent(id).await.unwrap().unwrap()
    }

    pub(crate) async fn status(&self, id: &IntentId) -> IntentStatus {
        self.intent(id).await.status
    }

    pub(crate) fn past_lease(&self) {
        self.clock
            .advance(self.timing.lease() + self.timing.reaper_grace + Duration::from_millis(1));
    }

    pub(crate) fn claim(&self, id: &IntentId, seat: &str) -> TransitionRequest {
        let now = self.clock.now();
        TransitionRequest::on_seat(
            id.clone(),
            SeatId::parse(seat).unwrap(),
            now,
            Transition::Claim {
                lease_until: now.plus(self.timing.lease()),
                due_at: now.plus(self.timing.lease() + self.timing.reaper_grace),
            },
        )
    }

    pub(crate) async fn drain_outbox_without_relaying(&self) {
        let rows = self.backend.fetch_outbox(100).await.unwrap();
        let seqs: Vec<i64> = rows.iter().map(|r| r.seq).collect();
        self.backend.ack_outbox(&seqs).await.unwrap();
    }
}
