//! The reaper's schedule-driven work: a REQUESTED intent whose message was lost is enqueued again
//! (and closed after too many requeues), and waits back off while their seat is taken, win when it
//! frees, can be cancelled, expire at their deadline, and are postponed past a failed read's
//! `Retry-After`, even behind hundreds of unreadable charges.

use super::common::{pipeline, user};
use seatgate::domain::{IntentStatus, SeatId};
use seatgate::ports::{Clock, Intents};
use seatgate_testkit::protection::SEAT_READS;
use seatgate_testkit::setup::{CHARGE_READS, POSTS};
use std::time::Duration;
use upstream_sim::Faults;

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

/// A backlog larger than one pass's limit (intents parked behind an outage come due together)
/// is worked through in one invocation, pass after pass, not one limit a schedule period.
#[tokio::test]
async fn one_invocation_runs_passes_until_the_backlog_is_worked_through() {
    let p = pipeline().await;
    for n in 0..25 {
        let u = p.enrol(n).await;
        p.confirm(&u, &format!("BL-{n}")).await;
    }
    p.drain_outbox_without_relaying().await;
    p.clock.advance(p.timing.requeue_after);
    let once = p.reaper.run_once(10).await.unwrap();
    assert_eq!(
        (once.examined, once.requeued),
        (10, 10),
        "one pass, its limit"
    );
    let report = p.reaper.run(10).await.unwrap();
    assert_eq!(
        (report.examined, report.requeued, report.left),
        (15, 15, 0),
        "the other 15 in one invocation (passes of 10 and 5): {report:?}"
    );
    assert_eq!(p.reaper.run(10).await.unwrap().examined, 0, "nothing left");
}

/// But not into a store that refuses: a pass that deferred intents (their writes failed) ends
/// the invocation, rather than meeting the same intents again at once.
#[tokio::test]
async fn a_pass_that_deferred_intents_ends_the_invocation() {
    use seatgate::adapters::upstream_http::HttpUpstream;
    use seatgate::service::{Ports, Services};
    use seatgate_testkit::{FaultyStore, StoreOp};
    use std::sync::Arc;
    let p = pipeline().await;
    for n in 0..25 {
        let u = p.enrol(n).await;
        p.confirm(&u, &format!("BD-{n}")).await;
    }
    p.drain_outbox_without_relaying().await;
    p.clock.advance(p.timing.requeue_after);
    let faulty = Arc::new(FaultyStore::new(p.backend.clone()));
    faulty.fail_next(
        StoreOp::Transition,
        seatgate::ports::StoreError::Throttled,
        1_000,
    );
    let upstream = HttpUpstream::new(&p.sim_url, p.timing.upstream_timeout).unwrap();
    let reaper = Services::new(
        Ports::from_store(faulty.clone(), Arc::new(upstream), p.clock.clone()),
        p.timing.clone(),
    )
    .reaper();
    let report = reaper.run(10).await.unwrap();
    assert_eq!(
        (report.examined, report.deferred, report.requeued),
        (10, 10, 0),
        "one pass, then stop: {report:?}"
    );
    assert_eq!(faulty.calls(StoreOp::DueIntents), 1, "one due scan");
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
