//! The worker under store faults: a conflicting settle write is retried, one that keeps conflicting
//! is left to the reaper, a claim that keeps failing hands its group back without an upstream call,
//! and a claim whose answer is lost is not retried and never reaches the upstream.
//!
//! The wrappers that aim a fault at one call (`ArmAfterReserve`: the settle write after a reserve;
//! `Targeted`: one intent's claim) live here, beside the only tests that use them.

use super::common::{ATTEMPTS, message, rig};
use async_trait::async_trait;
use seatgate::adapters::upstream_http::HttpUpstream;
use seatgate::domain::{
    ConsentRecord, Intent, IntentId, IntentStatus, Millis, RoomId, SeatAvailability, SeatClaim,
    SeatId, Secret, Suppression, TransitionRecord, TransitionRequest,
};
use seatgate::domain::{Page, PageSize};
use seatgate::ports::{
    Charge, ChargeReadError, Intents, ReadError, ReserveOutcome, StoreError, TransitionError,
    Upstream,
};
use seatgate_aws::dynamodb::DynamoStore;
use seatgate_testkit::setup::{CHARGE_READS, POSTS};
use seatgate_testkit::{FaultyStore, StoreOp};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// The upstream, plus: right after the reserve call returns, arm `fault` on the next
/// `transition` calls. The next transition after a reserve is the worker's settle write, so this
/// targets it and not the claim before it.
struct ArmAfterReserve {
    inner: Arc<HttpUpstream>,
    store: Arc<FaultyStore<DynamoStore>>,
    error: StoreError,
    times: u32,
}

#[async_trait]
impl Upstream for ArmAfterReserve {
    async fn reserve(&self, credential: &Secret, seat_id: &SeatId) -> ReserveOutcome {
        let outcome = self.inner.reserve(credential, seat_id).await;
        self.store
            .fail_next(StoreOp::Transition, self.error.clone(), self.times);
        outcome
    }

    async fn current_charge(&self, credential: &Secret) -> Result<Option<Charge>, ChargeReadError> {
        self.inner.current_charge(credential).await
    }

    async fn seat(&self, seat_id: &SeatId) -> Result<bool, ReadError> {
        self.inner.seat(seat_id).await
    }

    async fn room(&self, room_id: &RoomId) -> Result<Vec<SeatAvailability>, ReadError> {
        self.inner.room(room_id).await
    }
}

#[tokio::test]
async fn the_worker_retries_a_conflicting_settle_write() {
    let r = rig().await;
    let user = r.enrol("u1").await;
    let intent = r.requested(&user, "S-1").await;
    let upstream = Arc::new(ArmAfterReserve {
        inner: r.upstream.clone(),
        store: r.faulty.clone(),
        error: StoreError::TransactionConflict,
        times: (ATTEMPTS - 1) as u32,
    });
    let failed = r
        .worker(r.faulty.clone(), upstream)
        .handle_batch(&[message(&intent)])
        .await;
    assert!(failed.is_empty(), "{failed:?}");
    let done = r.intent(&intent.intent_id).await;
    assert_eq!(done.status, IntentStatus::Succeeded);
    assert!(done.charge_id.is_some());
    assert_eq!(r.sim.stats().get(POSTS), 1, "exactly one upstream write");
    assert_eq!(
        r.faulty.calls(StoreOp::Transition),
        1 + ATTEMPTS,
        "the claim, then the settle write 3 times refused and once written"
    );
    assert_eq!(r.faulty.injected(), ATTEMPTS - 1);
    assert_eq!(
        r.sent("TransactWriteItems"),
        3,
        "the confirm, the claim (with the seat's claim) and the one settle that landed"
    );
    r.finish().await;
}

#[tokio::test]
async fn a_settle_write_that_keeps_conflicting_is_left_to_the_reaper() {
    let r = rig().await;
    let user = r.enrol("u1").await;
    let intent = r.requested(&user, "S-1").await;
    let upstream = Arc::new(ArmAfterReserve {
        inner: r.upstream.clone(),
        store: r.faulty.clone(),
        error: StoreError::TransactionConflict,
        times: ATTEMPTS as u32,
    });
    let worker = r.worker(r.faulty.clone(), upstream);
    let batch = [message(&intent)];
    assert_eq!(
        worker.handle_batch(&batch).await,
        vec![batch[0].message_id.clone()]
    );
    assert_eq!(
        r.intent(&intent.intent_id).await.status,
        IntentStatus::Reserving
    );
    assert_eq!(r.sim.stats().get(POSTS), 1);

    // Redelivered: the intent is RESERVING, so the claim is refused; no second write upstream.
    r.faulty.heal();
    let plain_worker = r.worker(r.faulty.clone(), r.upstream.clone());
    assert!(plain_worker.handle_batch(&batch).await.is_empty());
    assert_eq!(r.sim.stats().get(POSTS), 1);

    // Past the lease, the reaper settles it by reading the charge.
    r.clock
        .advance(r.timing.lease() + r.timing.reaper_grace + Duration::from_secs(1));
    let report = r.reaper().run_once(100).await.unwrap();
    assert_eq!(report.settled_succeeded, 1, "{report:?}");
    assert_eq!(
        r.intent(&intent.intent_id).await.status,
        IntentStatus::Succeeded
    );
    assert_eq!(r.sim.stats().get(POSTS), 1);
    assert_eq!(r.sim.stats().get(CHARGE_READS), 1);
    r.finish().await;
}

/// Routes `transition` calls for chosen intents through the faulty store, everything else to
/// the plain one: a fault that hits one message group and not the others.
struct Targeted {
    plain: Arc<DynamoStore>,
    faulty: Arc<FaultyStore<DynamoStore>>,
    targets: BTreeSet<IntentId>,
}

#[async_trait]
impl Intents for Targeted {
    async fn register_wait(
        &self,
        intent: &Intent,
        consent: &ConsentRecord,
    ) -> Result<(), StoreError> {
        self.plain.register_wait(intent, consent).await
    }

    async fn get_intent(&self, id: &IntentId) -> Result<Option<Intent>, StoreError> {
        self.plain.get_intent(id).await
    }

    async fn get_consent(&self, id: &IntentId) -> Result<Option<ConsentRecord>, StoreError> {
        self.plain.get_consent(id).await
    }

    async fn intents(&self, ids: &[IntentId]) -> Result<Vec<Intent>, StoreError> {
        self.plain.intents(ids).await
    }

    async fn open_on_seat(
        &self,
        seat_id: &SeatId,
        limit: usize,
    ) -> Result<Vec<Intent>, StoreError> {
        self.plain.open_on_seat(seat_id, limit).await
    }

    async fn history(
        &self,
        id: &IntentId,
        after: Option<u64>,
        size: PageSize,
    ) -> Result<Page<TransitionRecord, u64>, StoreError> {
        self.plain.history(id, after, size).await
    }

    async fn transition(&self, request: &TransitionRequest) -> Result<Intent, TransitionError> {
        if self.targets.contains(&request.intent_id) {
            self.faulty.transition(request).await
        } else {
            self.plain.transition(request).await
        }
    }

    async fn due_intents(&self, now: Millis, limit: usize) -> Result<Vec<Intent>, StoreError> {
        self.plain.due_intents(now, limit).await
    }

    async fn seat_claim(&self, seat_id: &SeatId) -> Result<Option<SeatClaim>, StoreError> {
        self.plain.seat_claim(seat_id).await
    }

    async fn suppression(
        &self,
        seat_id: &SeatId,
        now: Millis,
    ) -> Result<Option<Suppression>, StoreError> {
        self.plain.suppression(seat_id, now).await
    }

    async fn last_taken(&self, seat_id: &SeatId) -> Result<Option<Suppression>, StoreError> {
        self.plain.last_taken(seat_id).await
    }
}

#[tokio::test]
async fn a_claim_that_keeps_failing_hands_back_its_group_without_an_upstream_call() {
    let r = rig().await;
    let (u1, u2, u3) = (
        r.enrol("u1").await,
        r.enrol("u2").await,
        r.enrol("u3").await,
    );
    let first = r.requested(&u1, "G-1").await;
    let second = r.requested(&u2, "G-1").await;
    let other_seat = r.requested(&u3, "G-2").await;
    let intents = Arc::new(Targeted {
        plain: r.plain.clone(),
        faulty: r.faulty.clone(),
        targets: BTreeSet::from([first.intent_id.clone()]),
    });
    r.faulty
        .fail_next(StoreOp::Transition, StoreError::Throttled, 1000);
    let batch = [message(&first), message(&second), message(&other_seat)];
    let failed: BTreeSet<String> = r
        .worker(intents, r.upstream.clone())
        .handle_batch(&batch)
        .await
        .into_iter()
        .collect();
    assert_eq!(
        failed,
        BTreeSet::from([batch[0].message_id.clone(), batch[1].message_id.clone()]),
        "the failed message and the rest of its group, nothing of the other group"
    );
    assert_eq!(
        r.faulty.calls(StoreOp::Transition),
        ATTEMPTS,
        "the first claim, retried"
    );
    assert_eq!(
        r.intent(&first.intent_id).await.status,
        IntentStatus::Requested
    );
    assert_eq!(
        r.intent(&second.intent_id).await.status,
        IntentStatus::Requested
    );
    assert_eq!(
        r.sim.occupant("G-1"),
        None,
        "no upstream call for the failed group"
    );
    assert_eq!(
        r.intent(&other_seat.intent_id).await.status,
        IntentStatus::Succeeded
    );
    assert_eq!(r.sim.stats().get(POSTS), 1, "only the other seat's");
    r.finish().await;
}

#[tokio::test]
async fn a_claim_whose_answer_is_lost_is_not_retried_and_never_reaches_the_upstream() {
    let r = rig().await;
    let user = r.enrol("u1").await;
    let intent = r.requested(&user, "T-1").await;
    r.faulty.fail_after_next(
        StoreOp::Transition,
        StoreError::Unavailable("UpdateItem: timed out".into()),
        1,
    );
    let batch = [message(&intent)];
    let worker = r.worker(r.faulty.clone(), r.upstream.clone());
    assert_eq!(
        worker.handle_batch(&batch).await,
        vec![batch[0].message_id.clone()]
    );
    assert_eq!(
        r.faulty.calls(StoreOp::Transition),
        1,
        "Unavailable is never retried"
    );
    // The claim did land: the lease now decides, not a second claim.
    assert_eq!(
        r.intent(&intent.intent_id).await.status,
        IntentStatus::Reserving
    );
    assert_eq!(r.sim.stats().get(POSTS), 0);
    r.finish().await;
}
