//! Attempts whose outcome is unknown (a lost response, a timed-out reserve, a worker that died
//! holding its lease, a settlement committed but its answer lost) are settled by a charge read,
//! never by a second write, and hold their seat for later batches until then.

use super::common::pipeline;
use seatgate::adapters::upstream_http::HttpUpstream;
use seatgate::domain::{IntentStatus, Reason, SeatId, Terminal, Transition, TransitionRequest};
use seatgate::ports::{Clock, Intents, QueueConsumer, TransitionError};
use seatgate::service::{Ports, Services};
use seatgate_testkit::setup::{CHARGE_READS, POSTS};
use seatgate_testkit::{FaultyStore, StoreOp};
use std::sync::Arc;
use std::time::Duration;
use upstream_sim::Faults;

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
            seen: None,
            reading: None,
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
        .seat_claim(&seat)
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
        p.backend.seat_claim(&seat).await.unwrap(),
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
