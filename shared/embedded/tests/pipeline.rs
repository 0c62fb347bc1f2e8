//! The reservation pipeline's guarantees, exercised through the real services on the embedded
//! backend against the upstream simulator, with a manual clock so leases expire without sleeping.
//!
//! `Pipeline::pump` plays the event source mappings the way the runner does: outbox -> relay
//! (the stream handler), queue -> worker, until nothing moves.

use seatgate::adapters::upstream_http::HttpUpstream;
use seatgate::config::Timing;
use seatgate::domain::{
    ActionKind, ChangeRecord, Intent, IntentChange, IntentId, IntentStatus, Millis, Reason, SeatId,
    SeatMessage, Terminal, Transition, TransitionRequest, UserId,
};
use seatgate::handlers::stream;
use seatgate::ports::{Clock, Intents, QueueConsumer, SeatQueue, TransitionError};
use seatgate::service::{ApiService, Ports, QueueRecord, Reaper, Relay, Services, Worker};
use seatgate_embedded::{EmbeddedBackend, EmbeddedConfig};
use seatgate_testkit::protection::SEAT_READS;
use seatgate_testkit::setup::{self, CHARGE_READS, POSTS};
use seatgate_testkit::{FaultyStore, ManualClock, StoreOp};
use std::sync::Arc;
use std::time::Duration;
use upstream_sim::{Faults, Simulator};

struct Pipeline {
    backend: EmbeddedBackend,
    clock: Arc<ManualClock>,
    timing: Timing,
    sim: Simulator,
    sim_url: String,
    api: ApiService,
    worker: Worker,
    relay: Relay,
    reaper: Reaper,
}

async fn pipeline() -> Pipeline {
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
fn records(batch: &[seatgate::ports::Delivery]) -> Vec<QueueRecord> {
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

fn user(n: usize) -> UserId {
    UserId::parse(&format!("u{n}")).unwrap()
}

impl Pipeline {
    /// A user known to the upstream with a working credential, stored in seatgate.
    async fn enrol(&self, n: usize) -> UserId {
        let u = user(n);
        self.sim.register_user(u.as_str(), &format!("cred-{n}"));
        self.api
            .put_credential(&u, &format!("cred-{n}"))
            .await
            .unwrap();
        u
    }

    /// Prepare + confirm: the intent id.
    async fn confirm(&self, u: &UserId, seat: &str) -> IntentId {
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
    async fn relay_outbox(&self) -> usize {
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
    async fn work_queue(&self) -> usize {
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
    async fn pump(&self) {
        loop {
            let moved = self.relay_outbox().await + self.work_queue().await;
            if moved == 0 {
                return;
            }
        }
    }

    async fn intent(&self, id: &IntentId) -> Intent {
        self.backend.get_intent(id).await.unwrap().unwrap()
    }

    async fn status(&self, id: &IntentId) -> IntentStatus {
        self.intent(id).await.status
    }

    fn past_lease(&self) {
        self.clock
            .advance(self.timing.lease() + self.timing.reaper_grace + Duration::from_millis(1));
    }

    fn claim(&self, id: &IntentId, seat: &str) -> TransitionRequest {
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

    async fn drain_outbox_without_relaying(&self) {
        let rows = self.backend.fetch_outbox(100).await.unwrap();
        let seqs: Vec<i64> = rows.iter().map(|r| r.seq).collect();
        self.backend.ack_outbox(&seqs).await.unwrap();
    }
}

#[tokio::test]
async fn many_confirms_of_one_seat_make_one_upstream_write() {
    let p = pipeline().await;
    let mut ids = Vec::new();
    for n in 0..25 {
        let u = p.enrol(n).await;
        ids.push(p.confirm(&u, "A-12").await);
    }
    p.pump().await;
    let mut statuses = Vec::new();
    for id in &ids {
        statuses.push(p.status(id).await);
    }
    let won = statuses
        .iter()
        .filter(|s| **s == IntentStatus::Succeeded)
        .count();
    let raced = statuses
        .iter()
        .filter(|s| **s == IntentStatus::FailedRace)
        .count();
    assert_eq!((won, raced), (1, 24), "{statuses:?}");
    assert_eq!(p.sim.stats().get(POSTS), 1);
    let occupant = p.sim.occupant("A-12").expect("the seat is taken upstream");
    let winner = statuses
        .iter()
        .position(|s| *s == IntentStatus::Succeeded)
        .unwrap();
    assert_eq!(occupant, format!("u{winner}"));

    // The seat is suppressed for the action TTL: a later confirm closes without a write.
    let late = p.enrol(99).await;
    let id = p.confirm(&late, "A-12").await;
    p.pump().await;
    let i = p.intent(&id).await;
    assert_eq!((i.status, i.attempts), (IntentStatus::FailedRace, 0));
    assert_eq!(p.sim.stats().get(POSTS), 1);
}

#[tokio::test]
async fn a_lost_response_is_settled_by_a_charge_read_not_a_second_write() {
    let p = pipeline().await;
    let u = p.enrol(1).await;
    p.sim.set_faults(Faults {
        drop_response_after_commit: 1,
        ..Faults::default()
    });
    let id = p.confirm(&u, "B-1").await;
    p.pump().await;
    assert_eq!(p.status(&id).await, IntentStatus::Reserving);
    assert_eq!(
        p.sim.occupant("B-1").as_deref(),
        Some("u1"),
        "the upstream committed"
    );

    // Within the lease the reaper leaves it alone: the attempt might still be in flight.
    let report = p.reaper.run_once(100).await.unwrap();
    assert_eq!(report.settled_succeeded, 0);
    assert_eq!(p.sim.stats().get(CHARGE_READS), 0);

    p.past_lease();
    let report = p.reaper.run_once(100).await.unwrap();
    assert_eq!(report.settled_succeeded, 1);
    let i = p.intent(&id).await;
    assert_eq!(i.status, IntentStatus::Succeeded);
    assert_eq!(i.reason.map(String::from).as_deref(), Some("charge_read"));
    assert!(i.charge_id.is_some());
    let stats = p.sim.stats();
    assert_eq!(stats.get(POSTS), 1, "never re-sent");
    assert_eq!(stats.get(CHARGE_READS), 1);
}

/// A user who won a seat (and perhaps never read the answer) confirms it again once its
/// suppression window is over: their charge is read, and the attempt succeeds with it, with no
/// second reserve, even after another user's attempt found the seat taken in between. Once
/// the charge is released, the next attempt writes again.
#[tokio::test]
async fn a_winners_later_confirm_reads_the_charge_instead_of_writing_again() {
    let p = pipeline().await;
    let (u1, u2) = (p.enrol(1).await, p.enrol(2).await);
    let past_window = || {
        p.clock
            .advance(p.timing.action_ttl + Duration::from_millis(1))
    };
    let first = p.confirm(&u1, "B-1").await;
    p.pump().await;
    let won = p.intent(&first).await;
    assert_eq!(won.status, IntentStatus::Succeeded);
    assert_eq!(p.sim.stats().get(POSTS), 1);

    // Another user tries after the window: the upstream says taken, and the seat's record
    // keeps its winner.
    past_window();
    let lost = p.confirm(&u2, "B-1").await;
    p.pump().await;
    assert_eq!(p.status(&lost).await, IntentStatus::FailedRace);
    assert_eq!(p.sim.stats().get(POSTS), 2);

    past_window();
    let again = p.confirm(&u1, "B-1").await;
    p.pump().await;
    let again = p.intent(&again).await;
    assert_eq!(
        (again.status, again.reason, again.charge_id.clone()),
        (
            IntentStatus::Succeeded,
            Some(Reason::ChargeRead),
            won.charge_id.clone()
        ),
        "the charge they hold, read, not written"
    );
    let stats = p.sim.stats();
    assert_eq!(
        stats.get(POSTS),
        2,
        "no second reserve for the seat they hold"
    );
    assert_eq!(stats.get(CHARGE_READS), 1);

    // Released upstream: the charge read finds none, and the reserve goes out.
    assert!(p.sim.release("u1"));
    past_window();
    let after_release = p.confirm(&u1, "B-1").await;
    p.pump().await;
    let after_release = p.intent(&after_release).await;
    assert_eq!(
        (after_release.status, after_release.reason),
        (IntentStatus::Succeeded, Some(Reason::Reserved))
    );
    let stats = p.sim.stats();
    assert_eq!((stats.get(POSTS), stats.get(CHARGE_READS)), (3, 2));
}

/// A worker that claimed and died: the lease runs out, the reaper settles from the charge, and
/// the dead worker's late completion (stale fencing token) is refused.
#[tokio::test]
async fn a_dead_workers_claim_is_settled_and_its_late_completion_refused() {
    let p = pipeline().await;
    let u = p.enrol(1).await;
    let id = p.confirm(&u, "C-1").await;
    p.relay_outbox().await;
    // The "worker" claims, then dies before the upstream call.
    let claimed = p.backend.transition(&p.claim(&id, "C-1")).await.unwrap();
    assert_eq!(claimed.fencing_token, 1);
    // Its message is delivered again meanwhile: a stale message, ignored.
    p.work_queue().await;
    assert_eq!(p.status(&id).await, IntentStatus::Reserving);

    p.past_lease();
    p.reaper.run_once(100).await.unwrap();
    let settled = p.intent(&id).await;
    assert_eq!(settled.status, IntentStatus::FailedUpstream);
    assert_eq!(
        settled.reason.map(String::from).as_deref(),
        Some("no_charge")
    );

    let late = p
        .backend
        .transition(&TransitionRequest {
            intent_id: id.clone(),
            seat_id: Some(SeatId::parse("C-1").unwrap()),
            now: p.clock.now(),
            transition: Transition::Complete {
                token: claimed.fencing_token,
                status: Terminal::Succeeded,
                charge_id: Some("late".into()),
                reason: Reason::Reserved,
                suppress: None,
            },
        })
        .await;
    match late {
        Err(TransitionError::Refused(current)) => {
            assert_eq!(current.status, IntentStatus::FailedUpstream)
        }
        other => panic!("late completion must be refused, got {other:?}"),
    }
    assert_eq!(p.sim.stats().get(POSTS), 0);
}

/// A dead worker that *did* reserve before dying: the charge read finds the seat.
#[tokio::test]
async fn a_dead_worker_that_reserved_is_settled_as_succeeded() {
    let p = pipeline().await;
    let u = p.enrol(7).await;
    let id = p.confirm(&u, "C-2").await;
    p.backend.transition(&p.claim(&id, "C-2")).await.unwrap();
    let reserved = reqwest::Client::new()
        .post(format!("{}/api/reservations", p.sim_url))
        .bearer_auth("cred-7")
        .json(&serde_json::json!({"seat_id": "C-2"}))
        .send()
        .await
        .unwrap();
    assert_eq!(reserved.status(), 201);
    p.past_lease();
    p.reaper.run_once(100).await.unwrap();
    assert_eq!(p.status(&id).await, IntentStatus::Succeeded);
    assert_eq!(p.sim.stats().get(POSTS), 1);
}

#[tokio::test]
async fn redelivered_messages_and_replayed_outbox_rows_change_nothing() {
    let p = pipeline().await;
    let u = p.enrol(1).await;
    let id = p.confirm(&u, "D-1").await;
    let rows = p.backend.fetch_outbox(10).await.unwrap();
    assert_eq!(rows.len(), 1);
    let change: IntentChange = rows[0].change.clone();
    // The same outbox row relayed three times: one message (deduplicated by intent id + version).
    for _ in 0..3 {
        let results = p.relay.handle(std::slice::from_ref(&change)).await;
        assert!(results.iter().all(Result::is_ok));
    }
    p.backend.ack_outbox(&[rows[0].seq]).await.unwrap();
    let batch = p.backend.receive(10).await.unwrap();
    assert_eq!(batch.len(), 1, "replays were deduplicated");
    let record = QueueRecord {
        message_id: batch[0].message_id.clone(),
        group_id: batch[0].group_id.clone(),
        body: batch[0].body.clone(),
        receipt: String::new(),
    };
    assert!(
        p.worker
            .handle_batch(std::slice::from_ref(&record))
            .await
            .is_empty()
    );
    let after_first = p.intent(&id).await;
    assert_eq!(after_first.status, IntentStatus::Succeeded);
    // The same message delivered again (e.g. the delete was lost): nothing changes.
    assert!(
        p.worker
            .handle_batch(&[record.clone(), record])
            .await
            .is_empty()
    );
    assert_eq!(p.intent(&id).await, after_first);
    assert_eq!(p.sim.stats().get(POSTS), 1);
}

#[tokio::test]
async fn a_bad_credential_fails_auth_and_the_seat_goes_to_the_next_in_line() {
    let p = pipeline().await;
    let bad = user(1);
    p.sim.register_user(bad.as_str(), "the-real-one");
    p.api.put_credential(&bad, "a-wrong-one").await.unwrap();
    let good = p.enrol(2).await;
    let third_user = p.enrol(3).await;
    // Relayed one by one: the relay sends concurrent changes in any order, and this test is
    // about the order of one seat's queue, so it fixes it. They are then worked as one batch.
    let first = p.confirm(&bad, "E-1").await;
    p.relay_outbox().await;
    let second = p.confirm(&good, "E-1").await;
    p.relay_outbox().await;
    let third = p.confirm(&third_user, "E-1").await;
    p.relay_outbox().await;
    p.pump().await;
    let f = p.intent(&first).await;
    assert_eq!(
        (f.status, f.reason.map(String::from).as_deref()),
        (IntentStatus::FailedAuth, Some("credential_rejected"))
    );
    assert_eq!(p.status(&second).await, IntentStatus::Succeeded);
    assert_eq!(p.status(&third).await, IntentStatus::FailedRace);
    assert_eq!(p.sim.occupant("E-1").as_deref(), Some("u2"));
    assert_eq!(
        p.sim.stats().get(POSTS),
        2,
        "the rejected write and the winning one"
    );
}

#[tokio::test]
async fn an_upstream_outage_puts_the_attempt_back_in_line_instead_of_failing_it() {
    let p = pipeline().await;
    let u = p.enrol(1).await;
    p.sim.set_faults(Faults {
        outage_for_ms: 60_000,
        ..Faults::default()
    });
    let id = p.confirm(&u, "F-1").await;
    p.pump().await;
    // 503 is the upstream saying "not now" before doing anything: no failure, no hold.
    let i = p.intent(&id).await;
    assert_eq!(
        (i.status, i.reason.map(String::from).as_deref()),
        (IntentStatus::Requested, Some("upstream_busy"))
    );
    let retry_at = i.next_attempt_at.expect("a retry time");
    assert!(retry_at > i.updated_at, "back in line for later, not now");
    assert_eq!(
        p.backend
            .hold(&SeatId::parse("F-1").unwrap())
            .await
            .unwrap(),
        None
    );
    // Nothing is sent before its retry time, however often the reaper runs.
    p.reaper.run_once(100).await.unwrap();
    p.pump().await;
    assert_eq!(p.sim.stats().get(POSTS), 1);

    p.sim.set_faults(Faults::default());
    p.clock.advance(Duration::from_millis(
        (retry_at.0 - p.clock.now().0).max(0) as u64
    ));
    let report = p.reaper.run_once(100).await.unwrap();
    assert_eq!(report.woken, 1, "{report:?}");
    p.pump().await;
    let i = p.intent(&id).await;
    assert_eq!(i.status, IntentStatus::Succeeded, "{i:?}");
    let stats = p.sim.stats();
    assert_eq!(stats.get(POSTS), 2, "the refused write is sent again, once");
    assert_eq!(stats.get(CHARGE_READS), 0);
}

#[tokio::test]
async fn a_timed_out_reserve_is_settled_by_a_charge_read_and_an_unreadable_charge_postpones_it() {
    let p = pipeline().await;
    let u = p.enrol(1).await;
    // Slower than the upstream timeout: the caller gives up before the write, which never
    // happens. The outcome is unknown all the same.
    p.sim.set_faults(Faults {
        latency_ms: 2_000,
        routes: Some(vec![POSTS.into()]),
        ..Faults::default()
    });
    let id = p.confirm(&u, "F-2").await;
    p.pump().await;
    assert_eq!(
        p.status(&id).await,
        IntentStatus::Reserving,
        "a timeout is not an answer"
    );
    p.sim.set_faults(Faults {
        outage_for_ms: 60_000,
        routes: Some(vec![CHARGE_READS.into()]),
        ..Faults::default()
    });
    p.past_lease();
    let report = p.reaper.run_once(100).await.unwrap();
    assert_eq!(
        report.postponed, 1,
        "charge unreadable during the outage: {report:?}"
    );
    let postponed = p.intent(&id).await;
    assert_eq!(postponed.status, IntentStatus::Reserving);
    assert!(
        postponed.due_at.unwrap() > p.clock.now(),
        "due again later, not every pass"
    );
    // Not due yet: the next pass leaves it alone.
    assert_eq!(p.reaper.run_once(100).await.unwrap().examined, 0);

    p.sim.set_faults(Faults::default());
    p.clock.advance(p.timing.settle_retry_max);
    p.reaper.run_once(100).await.unwrap();
    let i = p.intent(&id).await;
    assert_eq!(
        (i.status, i.reason.map(String::from).as_deref()),
        (IntentStatus::FailedUpstream, Some("no_charge"))
    );
    let stats = p.sim.stats();
    assert_eq!(stats.get(POSTS), 1, "the write was never repeated");
    assert_eq!(stats.get(CHARGE_READS), 2);
}

#[tokio::test]
async fn a_requested_intent_whose_message_was_lost_is_enqueued_again() {
    let p = pipeline().await;
    let u = p.enrol(1).await;
    let id = p.confirm(&u, "G-1").await;
    // The outbox row is consumed but the message never reaches the queue.
    p.drain_outbox_without_relaying().await;
    assert_eq!(
        p.reaper.run_once(100).await.unwrap().requeued,
        0,
        "not yet overdue"
    );
    p.clock.advance(p.timing.requeue_after);
    assert_eq!(p.reaper.run_once(100).await.unwrap().requeued, 1);
    p.pump().await;
    let i = p.intent(&id).await;
    assert_eq!((i.status, i.requeues), (IntentStatus::Succeeded, 1));
}

#[tokio::test]
async fn a_requested_intent_is_closed_after_too_many_requeues() {
    let p = pipeline().await;
    let u = p.enrol(1).await;
    let id = p.confirm(&u, "G-2").await;
    for _ in 0..=p.timing.max_requeues {
        p.drain_outbox_without_relaying().await;
        p.clock.advance(p.timing.requeue_after);
        p.reaper.run_once(100).await.unwrap();
    }
    let i = p.intent(&id).await;
    assert_eq!(
        (i.status, i.reason.map(String::from).as_deref()),
        (IntentStatus::FailedUpstream, Some("never_processed"))
    );
    assert_eq!(p.sim.stats().get(POSTS), 0);
}

#[tokio::test]
async fn a_wait_backs_off_while_the_seat_is_taken_and_wins_when_it_frees() {
    let p = pipeline().await;
    let holder = p.enrol(1).await;
    let holder_intent = p.confirm(&holder, "H-1").await;
    p.pump().await;
    assert_eq!(p.status(&holder_intent).await, IntentStatus::Succeeded);

    let waiter = p.enrol(2).await;
    let until = p.clock.now().plus(Duration::from_secs(600));
    let wait = p
        .api
        .register_wait(&waiter, SeatId::parse("H-1").unwrap(), until)
        .await
        .unwrap();
    assert_eq!(wait.status, IntentStatus::WaitingForSeat);
    p.pump().await;
    let w = p.intent(&wait.intent_id).await;
    assert_eq!(
        w.status,
        IntentStatus::WaitingForSeat,
        "suppressed: backs off"
    );
    assert!(w.next_attempt_at.unwrap() > p.clock.now());
    assert_eq!(p.sim.stats().get(POSTS), 1, "no write while suppressed");

    // The holder gives the seat back upstream; the suppression window passes.
    let released = reqwest::Client::new()
        .delete(format!("{}/api/reservations/current", p.sim_url))
        .bearer_auth("cred-1")
        .send()
        .await
        .unwrap();
    assert_eq!(released.status(), 204);
    p.clock.advance(p.timing.action_ttl);
    let report = p.reaper.run_once(100).await.unwrap();
    assert_eq!(report.woken, 1);
    p.pump().await;
    let w = p.intent(&wait.intent_id).await;
    assert_eq!(w.status, IntentStatus::Succeeded);
    assert_eq!(p.sim.occupant("H-1").as_deref(), Some("u2"));
}

#[tokio::test]
async fn waits_can_be_cancelled_by_their_owner_and_expire_at_their_deadline() {
    let p = pipeline().await;
    let holder = p.enrol(1).await;
    p.confirm(&holder, "J-1").await;
    p.pump().await;
    let waiter = p.enrol(2).await;
    let other = p.enrol(3).await;
    let seat = SeatId::parse("J-1").unwrap();
    let until = p.clock.now().plus(Duration::from_secs(5));
    let a = p
        .api
        .register_wait(&waiter, seat.clone(), until)
        .await
        .unwrap();
    let b = p
        .api
        .register_wait(&waiter, seat.clone(), until)
        .await
        .unwrap();
    p.pump().await;

    assert!(
        p.api.cancel_wait(&other, &a.intent_id).await.is_err(),
        "not the owner"
    );
    let cancelled = p.api.cancel_wait(&waiter, &a.intent_id).await.unwrap();
    assert_eq!(cancelled.status, IntentStatus::Cancelled);
    assert_eq!(
        p.api
            .cancel_wait(&waiter, &a.intent_id)
            .await
            .unwrap()
            .status,
        IntentStatus::Cancelled,
        "cancelling twice answers the same"
    );

    p.clock.advance(Duration::from_secs(6));
    let report = p.reaper.run_once(100).await.unwrap();
    assert_eq!(report.expired, 1);
    assert_eq!(p.status(&b.intent_id).await, IntentStatus::WaitExpired);
    // The consent behind each wait is kept.
    assert!(p.backend.get_consent(&b.intent_id).await.unwrap().is_some());
}

#[tokio::test]
async fn a_stale_or_malformed_message_is_handled_without_an_upstream_call() {
    let p = pipeline().await;
    let u = p.enrol(1).await;
    let id = p.confirm(&u, "K-1").await;
    p.pump().await;
    let done = p.intent(&id).await;
    // A message for an older version of a finished intent.
    let stale = SeatMessage {
        intent_id: id.clone(),
        seat_id: SeatId::parse("K-1").unwrap(),
        version: 1,
    };
    p.backend.send(&stale).await.unwrap();
    let records = vec![
        QueueRecord {
            message_id: "m-bad".into(),
            group_id: "K-2".into(),
            body: "{not json".into(),
            receipt: String::new(),
        },
        QueueRecord {
            // Valid JSON whose seat id is not one: refused when decoded, like any poison.
            message_id: "m-bad-seat".into(),
            group_id: "K-3".into(),
            body: format!(r#"{{"intent_id":"{id}","seat_id":"K 3","version":2}}"#),
            receipt: String::new(),
        },
        QueueRecord {
            message_id: "m-stale".into(),
            group_id: "K-1".into(),
            body: serde_json::to_string(&stale).unwrap(),
            receipt: String::new(),
        },
    ];
    let failed = p.worker.handle_batch(&records).await;
    assert_eq!(
        failed,
        vec!["m-bad".to_string(), "m-bad-seat".to_string()],
        "a poison message fails (and will dead-letter)"
    );
    assert_eq!(p.intent(&id).await, done);
    assert_eq!(p.sim.stats().get(POSTS), 1);
}

/// Issue 7's first broken promise: after a lost response, later confirms of the same seat,
/// arriving in separate batches while the charge endpoint is down for longer than the
/// visibility timeout, must not cause a second reserve.
#[tokio::test]
async fn a_lost_response_holds_the_seat_for_later_batches_until_a_charge_read_settles_it() {
    let p = pipeline().await;
    let seat = SeatId::parse("H-1").unwrap();
    let users = [p.enrol(1).await, p.enrol(2).await, p.enrol(3).await];
    p.sim.set_faults(Faults {
        drop_response_after_commit: 1,
        ..Faults::default()
    });
    let first = p.confirm(&users[0], "H-1").await;
    p.pump().await;
    assert_eq!(p.status(&first).await, IntentStatus::Reserving);
    let hold = p
        .backend
        .hold(&seat)
        .await
        .unwrap()
        .expect("the seat is held");
    assert_eq!(hold.intent_id, first);
    p.sim.set_faults(Faults {
        outage_for_ms: 120_000,
        routes: Some(vec![CHARGE_READS.into()]),
        ..Faults::default()
    });

    let second = p.confirm(&users[1], "H-1").await;
    p.pump().await;
    assert_eq!(
        p.status(&second).await,
        IntentStatus::Requested,
        "handed back, not claimed"
    );
    let third = p.confirm(&users[2], "H-1").await;
    // Longer than the visibility timeout, four times over, with reaper passes in between: the
    // handed-back messages come back and are handed back again, until the queue dead-letters
    // them; the reaper must not requeue (or give up on) intents that wait on a held seat.
    for _ in 0..4 {
        p.clock
            .advance(p.timing.visibility_timeout + Duration::from_millis(1));
        p.reaper.run_once(100).await.unwrap();
        p.pump().await;
        assert_eq!(
            p.sim.stats().get(POSTS),
            1,
            "exactly one reserve while unsettled"
        );
        assert_eq!(p.status(&first).await, IntentStatus::Reserving);
        for id in [&second, &third] {
            assert_eq!(p.status(id).await, IntentStatus::Requested);
        }
    }
    assert!(
        p.sim.stats().get(CHARGE_READS) >= 3,
        "the reaper kept trying"
    );

    p.sim.set_faults(Faults::default());
    p.clock
        .advance(p.timing.settle_retry_max + Duration::from_millis(1));
    let report = p.reaper.run_once(100).await.unwrap();
    assert_eq!(report.settled_succeeded, 1, "{report:?}");
    assert_eq!(
        p.backend.hold(&seat).await.unwrap(),
        None,
        "released by the settlement"
    );
    // Handed-back messages come back; dead-lettered ones are requeued by the reaper now that
    // the seat is no longer held. Either way each ends without an upstream call.
    for _ in 0..4 {
        p.clock
            .advance(p.timing.visibility_timeout + Duration::from_millis(1));
        p.reaper.run_once(100).await.unwrap();
        p.pump().await;
    }
    assert_eq!(p.status(&first).await, IntentStatus::Succeeded);
    for id in [&second, &third] {
        let i = p.intent(id).await;
        assert_eq!(i.status, IntentStatus::FailedRace, "{i:?}");
    }
    assert_eq!(p.sim.stats().get(POSTS), 1);
}

/// Issue 7's second broken promise: a 409 that means "you already hold a charge" is about the
/// user, not the seat. It ends that user's intent (a wait too) and leaves the seat to the next.
#[tokio::test]
async fn already_charged_ends_that_users_intent_and_leaves_the_seat_open() {
    let p = pipeline().await;
    let (u1, u2) = (p.enrol(1).await, p.enrol(2).await);
    let held = p.confirm(&u1, "G-1").await;
    p.pump().await;
    assert_eq!(p.status(&held).await, IntentStatus::Succeeded);

    // u1 already holds G-1 upstream: both an immediate confirm and a wait for G-2 end.
    let again = p.confirm(&u1, "G-2").await;
    let until = p.clock.now().plus(Duration::from_secs(600));
    let wait = p
        .api
        .register_wait(&u1, SeatId::parse("G-2").unwrap(), until)
        .await
        .unwrap();
    p.pump().await;
    for id in [&again, &wait.intent_id] {
        let i = p.intent(id).await;
        assert_eq!(
            (i.status, i.reason.map(String::from).as_deref()),
            (IntentStatus::FailedUpstream, Some("already_charged")),
            "{i:?}"
        );
    }
    let g2 = SeatId::parse("G-2").unwrap();
    assert_eq!(
        p.backend.suppression(&g2, p.clock.now()).await.unwrap(),
        None,
        "no suppression"
    );
    assert_eq!(p.backend.hold(&g2).await.unwrap(), None);

    // G-2 is free upstream, and u2 gets it with one write.
    let posts = p.sim.stats().get(POSTS);
    let other = p.confirm(&u2, "G-2").await;
    p.pump().await;
    assert_eq!(p.status(&other).await, IntentStatus::Succeeded);
    assert_eq!(p.sim.stats().get(POSTS), posts + 1);
    assert_eq!(p.sim.occupant("G-2").as_deref(), Some("u2"));
}

/// A 429 storm: every intent goes back in line (none fails for the upstream's load), each group
/// waits at least the upstream's `Retry-After`, and all succeed once it relents.
#[tokio::test]
async fn a_429_storm_fails_no_one_and_waits_out_retry_after() {
    let p = pipeline().await;
    let mut ids = Vec::new();
    for n in 1..=6 {
        let u = p.enrol(n).await;
        ids.push(p.confirm(&u, &format!("S-{}", n % 3)).await);
    }
    p.sim.set_faults(Faults {
        rate_limited_for_ms: 60_000,
        retry_after_secs: 2,
        routes: Some(vec![POSTS.into()]),
        ..Faults::default()
    });
    let attempted_at = p.clock.now();
    p.pump().await;
    let posts = p.sim.stats().get(POSTS);
    // The seat groups of one batch run at once, so up to one attempt each is out before the
    // first 429 holds the reserve route; the rest of each group is handed back.
    assert!(
        (1..=3).contains(&posts),
        "at most one attempt per seat group: {posts}"
    );
    // The Retry-After holds the route fleet-wide: until it passes, no reserve at all.
    p.clock.advance(Duration::from_millis(1_900));
    p.reaper.run_once(100).await.unwrap();
    p.pump().await;
    assert_eq!(
        p.sim.stats().get(POSTS),
        posts,
        "no reserve inside Retry-After"
    );
    for _ in 0..3 {
        p.clock
            .advance(p.timing.visibility_timeout + Duration::from_millis(1));
        p.reaper.run_once(100).await.unwrap();
        p.pump().await;
    }
    for id in &ids {
        let i = p.intent(id).await;
        assert!(
            !i.status.is_terminal(),
            "nobody fails for the upstream's load: {i:?}"
        );
        if i.reason.is_some() {
            assert_eq!(i.reason.map(String::from).as_deref(), Some("upstream_busy"));
            assert!(
                i.next_attempt_at.unwrap() >= attempted_at.plus(Duration::from_secs(2)),
                "waits at least Retry-After: {i:?}"
            );
        }
    }

    p.sim.set_faults(Faults::default());
    for _ in 0..6 {
        p.clock
            .advance(p.timing.visibility_timeout + Duration::from_millis(1));
        p.reaper.run_once(100).await.unwrap();
        p.pump().await;
    }
    let mut outcomes = std::collections::BTreeMap::new();
    for id in &ids {
        *outcomes.entry(p.status(id).await.as_str()).or_insert(0) += 1;
    }
    assert_eq!(
        outcomes,
        [("FAILED_RACE", 3), ("SUCCEEDED", 3)].into_iter().collect(),
        "three seats, two confirms each"
    );
}

/// A wait on a taken seat whose reads are rate-limited (`Retry-After: 2`): the failed read is
/// remembered and the wait is postponed past it, so 60 reaper passes over 6 s read the seat
/// once per Retry-After (at 0, 2 and 4 s), not once or more per pass.
#[tokio::test]
async fn a_wait_whose_seat_cannot_be_read_is_postponed_past_the_retry_after() {
    let p = pipeline().await;
    let holder = p.enrol(1).await;
    let held = p.confirm(&holder, "RA-1").await;
    p.pump().await;
    assert_eq!(p.status(&held).await, IntentStatus::Succeeded);
    let waiter = p.enrol(2).await;
    let until = p.clock.now().plus(Duration::from_secs(600));
    let wait = p
        .api
        .register_wait(&waiter, SeatId::parse("RA-1").unwrap(), until)
        .await
        .unwrap();
    p.pump().await;
    p.sim.set_faults(Faults {
        rate_limited_for_ms: 60_000,
        retry_after_secs: 2,
        routes: Some(vec![SEAT_READS.into()]),
        ..Faults::default()
    });
    // Past the suppression, the wait comes due and its seat is read through the cache.
    p.clock.advance(p.timing.action_ttl);
    let first_pass = p.clock.now();
    p.reaper.run_once(100).await.unwrap();
    let w = p.intent(&wait.intent_id).await;
    assert!(
        w.next_attempt_at.unwrap() >= first_pass.plus(Duration::from_secs(2)),
        "postponed past the Retry-After: {w:?}"
    );
    assert_eq!(p.sim.stats().get(SEAT_READS), 1);
    for _ in 0..59 {
        p.clock.advance(p.timing.reaper_interval);
        p.reaper.run_once(100).await.unwrap();
        p.pump().await;
    }
    let reads = p.sim.stats().get(SEAT_READS);
    assert!(
        (1..=3).contains(&reads),
        "{reads} seat reads in 60 passes over 6 s with Retry-After: 2"
    );
    let w = p.intent(&wait.intent_id).await;
    assert_eq!(w.status, IntentStatus::WaitingForSeat);
    assert!(
        w.next_attempt_at.unwrap() > p.clock.now(),
        "still postponed: {w:?}"
    );
}

/// More stuck RESERVING intents than one pass handles, with an expired wait behind them: each
/// pass ends within its budget, stuck attempts are pushed out instead of being re-read every
/// pass (which would starve everything behind them), and the wait expires.
#[tokio::test]
async fn a_reaper_facing_hundreds_of_unreadable_charges_still_expires_the_wait_behind_them() {
    let p = pipeline().await;
    p.sim.set_faults(Faults {
        outage_for_ms: 120_000,
        routes: Some(vec![CHARGE_READS.into()]),
        ..Faults::default()
    });
    const STUCK: usize = 520;
    const LIMIT: usize = 500;
    for n in 0..STUCK {
        let u = p.enrol(n).await;
        let seat = format!("R-{n}");
        let id = p.confirm(&u, &seat).await;
        p.backend.transition(&p.claim(&id, &seat)).await.unwrap();
    }
    p.past_lease();
    // Due after every stuck attempt, so a pass that re-read them all would never reach it.
    let deadline = p.clock.now().plus(Duration::from_secs(1));
    let wait = p
        .api
        .register_wait(&user(0), SeatId::parse("W-1").unwrap(), deadline)
        .await
        .unwrap();
    p.clock.advance(Duration::from_secs(1));

    let mut postponed = 0;
    let mut passes = 0;
    while p.status(&wait.intent_id).await != IntentStatus::WaitExpired {
        passes += 1;
        assert!(passes <= 3, "the wait did not expire within 3 passes");
        let started = std::time::Instant::now();
        let report = p.reaper.run_once(LIMIT).await.unwrap();
        let took = started.elapsed();
        assert!(
            took < p.timing.reaper_pass_budget + p.timing.upstream_timeout,
            "a pass took {took:?}: {report:?}"
        );
        postponed += report.postponed;
    }
    assert_eq!(
        passes, 2,
        "the first pass fills its limit with stuck attempts, the second ends the wait"
    );
    assert_eq!(postponed, STUCK, "every stuck attempt was pushed out once");
    let i = p.intent(&wait.intent_id).await;
    assert_eq!(i.reason.map(String::from).as_deref(), Some("deadline"));
    assert_eq!(p.sim.stats().get(POSTS), 0);
}

/// A write whose first try committed and whose answer was lost, sent again (the SDK's retry):
/// the refusal shows the write's own result and is taken as the caller's success.
#[tokio::test]
async fn a_committed_then_retried_settlement_is_the_callers_success() {
    let p = pipeline().await;
    let u = p.enrol(1).await;
    p.sim.set_faults(Faults {
        drop_response_after_commit: 1,
        ..Faults::default()
    });
    let id = p.confirm(&u, "X-1").await;
    p.pump().await;
    assert_eq!(p.status(&id).await, IntentStatus::Reserving);
    p.past_lease();
    let faulty = Arc::new(FaultyStore::new(p.backend.clone()));
    faulty.replay_next(StoreOp::Transition, 1);
    let upstream = HttpUpstream::new(&p.sim_url, p.timing.upstream_timeout).unwrap();
    let reaper = Services::new(
        Ports::from_store(faulty.clone(), Arc::new(upstream), p.clock.clone()),
        p.timing.clone(),
    )
    .reaper();
    let report = reaper.run_once(100).await.unwrap();
    assert_eq!(faulty.injected(), 1, "the settlement was sent twice");
    assert_eq!(
        report.settled_succeeded, 1,
        "recognised as its own write: {report:?}"
    );
    assert_eq!(report.deferred, 0);
    assert_eq!(p.status(&id).await, IntentStatus::Succeeded);
}

/// Messages of a held seat are handed back to return when the holder's settlement is next due,
/// not after the whole visibility timeout.
#[tokio::test]
async fn messages_of_a_held_seat_come_back_when_the_hold_is_next_due() {
    let p = pipeline().await;
    let (u1, u2) = (p.enrol(1).await, p.enrol(2).await);
    p.sim.set_faults(Faults {
        drop_response_after_commit: 1,
        ..Faults::default()
    });
    let first = p.confirm(&u1, "V-1").await;
    p.pump().await;
    let holder = p.intent(&first).await;
    assert_eq!(holder.status, IntentStatus::Reserving);
    let second = p.confirm(&u2, "V-1").await;
    p.pump().await;
    assert_eq!(p.status(&second).await, IntentStatus::Requested);
    assert!(
        p.backend.receive(10).await.unwrap().is_empty(),
        "handed back, not visible yet"
    );
    // The holder is due at its lease's end plus grace; the reaper acts within an interval.
    let due_in = Duration::from_millis((holder.due_at.unwrap().0 - p.clock.now().0) as u64)
        + p.timing.reaper_interval;
    assert!(
        due_in < p.timing.visibility_timeout,
        "the test needs the gap"
    );
    p.clock.advance(due_in + Duration::from_millis(1));
    let back = p.backend.receive(10).await.unwrap();
    assert_eq!(back.len(), 1, "back when the hold is next due");
    assert_eq!(back[0].group_id, "V-1");
}

/// A subscriber that never accepts: the event is retried with a backoff, off the relay's path,
/// until the event queue's max receive count parks it as dead (the dead-letter queue).
#[tokio::test]
async fn terminal_events_go_through_the_event_queue_and_dead_letter_after_their_retries() {
    struct Refusing(std::sync::atomic::AtomicU32);
    #[async_trait::async_trait]
    impl seatgate::ports::Subscribers for Refusing {
        async fn publish(
            &self,
            _: &seatgate::domain::IntentEvent,
        ) -> Result<(), seatgate::ports::PublishError> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Err(seatgate::ports::PublishError(
                "subscriber answered 500".into(),
            ))
        }
    }
    let p = pipeline().await;
    let u = p.enrol(1).await;
    let id = p.confirm(&u, "EV-1").await;
    p.pump().await;
    assert_eq!(p.status(&id).await, IntentStatus::Succeeded);
    p.relay_outbox().await;

    let events = p.backend.events();
    let refusing = Arc::new(Refusing(Default::default()));
    let deliverer = seatgate::service::Deliverer::new(
        refusing.clone(),
        Some(Arc::new(events.clone())),
        &p.timing,
    );
    let max = p.backend.config().event_max_receive_count;
    for attempt in 1..=max {
        let batch = events.receive(10).await.unwrap();
        assert_eq!(batch.len(), 1, "attempt {attempt}: the event is back");
        assert_eq!(batch[0].receive_count, attempt);
        let event: serde_json::Value = serde_json::from_str(&batch[0].body).unwrap();
        assert_eq!(event["intent_id"], id.as_str());
        assert_eq!(event["status"], "SUCCEEDED");
        let records: Vec<_> = batch
            .iter()
            .map(|d| seatgate::service::EventRecord {
                message_id: d.message_id.clone(),
                body: d.body.clone(),
                receipt: d.receipt.clone(),
                receive_count: d.receive_count,
            })
            .collect();
        assert_eq!(deliverer.handle_batch(&records).await.len(), 1);
        assert!(
            events.receive(10).await.unwrap().is_empty(),
            "not before its backoff"
        );
        p.clock
            .advance(p.timing.delivery_backoff_max + Duration::from_millis(1));
    }
    assert!(
        events.receive(10).await.unwrap().is_empty(),
        "retries are bounded"
    );
    assert_eq!(
        events.dead().await.unwrap().len(),
        1,
        "parked in the dead-letter state"
    );
    assert_eq!(
        refusing.0.load(std::sync::atomic::Ordering::SeqCst),
        max,
        "one post per receive"
    );
}

/// The lost races behind a taken seat are closed together, and a close that fails hands back
/// only its own message: the others are final whatever order they were written in, so none is
/// handed back or sent upstream, and the failed one is closed when it comes back.
#[tokio::test]
async fn lost_races_close_together_and_a_failed_close_hands_back_only_its_message() {
    let p = pipeline().await;
    let winner = p.enrol(1).await;
    let first = p.confirm(&winner, "LR-1").await;
    p.pump().await;
    assert_eq!(p.status(&first).await, IntentStatus::Succeeded);
    let mut losers = Vec::new();
    for n in 2..=8 {
        let u = p.enrol(n).await;
        losers.push(p.confirm(&u, "LR-1").await);
    }
    p.relay_outbox().await;
    let batch = p.backend.receive(10).await.unwrap();
    assert_eq!(batch.len(), losers.len(), "one group, one batch");
    let records = records(&batch);

    let faulty = Arc::new(FaultyStore::new(p.backend.clone()));
    faulty.fail_next(
        StoreOp::Transition,
        seatgate::ports::StoreError::Unavailable("injected".into()),
        1,
    );
    let upstream = HttpUpstream::new(&p.sim_url, p.timing.upstream_timeout).unwrap();
    let worker = Services::new(
        Ports::from_store(faulty.clone(), Arc::new(upstream), p.clock.clone()),
        p.timing.clone(),
    )
    .worker();
    let failed = worker.handle_batch(&records).await;
    assert_eq!(faulty.injected(), 1);
    assert_eq!(
        failed.len(),
        1,
        "only the failed close is handed back: {failed:?}"
    );
    let mut open = Vec::new();
    for id in &losers {
        match p.status(id).await {
            IntentStatus::FailedRace => {}
            IntentStatus::Requested => open.push(id.clone()),
            other => panic!("{id}: {other:?}"),
        }
    }
    assert_eq!(open.len(), 1, "the failed close's intent is still open");
    let handed_back = batch
        .iter()
        .find(|d| d.message_id == failed[0])
        .expect("a message of the batch");
    assert!(
        handed_back.body.contains(open[0].as_str()),
        "the handed-back message is the open intent's"
    );

    // Processed messages are deleted; the failed one returns after its visibility timeout.
    let done: Vec<String> = batch
        .iter()
        .filter(|d| !failed.contains(&d.message_id))
        .map(|d| d.receipt.clone())
        .collect();
    p.backend.delete(&done).await.unwrap();
    p.clock
        .advance(p.timing.visibility_timeout + Duration::from_millis(1));
    p.pump().await;
    for id in &losers {
        assert_eq!(p.status(id).await, IntentStatus::FailedRace);
    }
    assert_eq!(p.sim.stats().get(POSTS), 1, "one reserve for the seat");
}
