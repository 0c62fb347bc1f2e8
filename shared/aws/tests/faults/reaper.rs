//! The reaper under store faults and the seat's claim on DynamoDB: a throttled query that clears is
//! retried, one that stays throttled fails the pass having written nothing, a lost response holds
//! the seat until the charge read settles it, a committed-then-retried settlement is recognised,
//! `already charged` ends that user's intents leaving the seat open, and a 429 storm fails no one.

use super::common::{ATTEMPTS, Rig, message, rig};
use seatgate::domain::{Intent, IntentStatus, SeatId, SeatMessage, Secret, TransitionRequest};
use seatgate::ports::{Clock, Intents, ReserveOutcome, StoreError, Upstream};
use seatgate::service::QueueRecord;
use seatgate_testkit::StoreOp;
use seatgate_testkit::setup::{CHARGE_READS, POSTS};
use std::time::Duration;
use upstream_sim::Faults;

/// An intent whose worker claimed it, reserved upstream and died.
async fn expired_lease(r: &Rig) -> Intent {
    let user = r.enrol("u1").await;
    let intent = r.requested(&user, "L-1").await;
    let now = r.clock.now();
    let lease_until = now.plus(r.timing.lease());
    r.plain
        .transition(&TransitionRequest {
            seen: None,
            reading: None,
            intent_id: intent.intent_id.clone(),
            seat_id: Some(intent.seat_id.clone()),
            now,
            transition: seatgate::domain::Transition::Claim {
                lease_until,
                due_at: lease_until.plus(r.timing.reaper_grace),
            },
        })
        .await
        .unwrap();
    let reserved = r
        .upstream
        .reserve(&Secret::new("cred-u1"), &intent.seat_id)
        .await;
    assert!(matches!(reserved, ReserveOutcome::Reserved(_)));
    r.clock
        .advance(r.timing.lease() + r.timing.reaper_grace + Duration::from_secs(1));
    intent
}

#[tokio::test]
async fn the_reaper_retries_a_throttled_query_that_clears() {
    let r = rig().await;
    let intent = expired_lease(&r).await;
    r.faulty.fail_next(
        StoreOp::DueIntents,
        StoreError::Throttled,
        (ATTEMPTS - 1) as u32,
    );
    let report = r.reaper().run_once(100).await.unwrap();
    assert_eq!(report.settled_succeeded, 1, "{report:?}");
    assert_eq!(r.faulty.calls(StoreOp::DueIntents), ATTEMPTS);
    assert_eq!(
        r.intent(&intent.intent_id).await.status,
        IntentStatus::Succeeded
    );
    r.finish().await;
}

#[tokio::test]
async fn a_reaper_pass_whose_query_stays_throttled_fails_and_writes_nothing() {
    let r = rig().await;
    let intent = expired_lease(&r).await;
    let writes_before = r.plain.write_requests();
    r.faulty
        .fail_next(StoreOp::DueIntents, StoreError::Throttled, 1000);

    let result = r.reaper().run_once(100).await;
    assert_eq!(
        result,
        Err(StoreError::Throttled),
        "the error reaches the function"
    );
    assert_eq!(r.faulty.calls(StoreOp::DueIntents), ATTEMPTS);
    assert_eq!(
        r.sent("Query"),
        0,
        "refused before DynamoDB, as throttling is"
    );
    assert_eq!(r.plain.write_requests(), writes_before, "nothing written");
    assert_eq!(r.faulty.calls(StoreOp::Transition), 0);
    assert_eq!(r.sim.stats().get(CHARGE_READS), 0);
    assert_eq!(
        r.intent(&intent.intent_id).await.status,
        IntentStatus::Reserving
    );

    // The next tick, with the store back, settles it.
    r.faulty.heal();
    let report = r.reaper().run_once(100).await.unwrap();
    assert_eq!(report.settled_succeeded, 1, "{report:?}");
    r.finish().await;
}

/// Issue 7 on DynamoDB Local: a lost response keeps the seat claimed; later confirms of that seat,
/// in batches of their own, are handed back (not claimed, no upstream call) while the charge
/// endpoint is down, across several reaper passes; once it reads again, one settlement frees
/// the seat and the rest close as lost races. Exactly one reserve throughout.
#[tokio::test]
async fn a_lost_response_holds_the_seat_on_dynamodb_until_the_charge_read_settles_it() {
    let r = rig().await;
    let seat = SeatId::parse("DH-1").unwrap();
    let (u1, u2, u3) = (
        r.enrol("dh1").await,
        r.enrol("dh2").await,
        r.enrol("dh3").await,
    );
    r.sim.set_faults(Faults {
        drop_response_after_commit: 1,
        ..Faults::default()
    });
    let first = r.requested(&u1, "DH-1").await;
    let worker = r.worker(r.plain.clone(), r.upstream.clone());
    assert!(worker.handle_batch(&[message(&first)]).await.is_empty());
    assert_eq!(
        r.intent(&first.intent_id).await.status,
        IntentStatus::Reserving
    );
    let hold = r.plain.seat_claim(&seat).await.unwrap().expect("held");
    assert_eq!(hold.intent_id, first.intent_id);
    r.sim.set_faults(Faults {
        outage_for_ms: 120_000,
        routes: Some(vec![CHARGE_READS.into()]),
        ..Faults::default()
    });
    let later = [
        r.requested(&u2, "DH-1").await,
        r.requested(&u3, "DH-1").await,
    ];
    let reaper = r.reaper();
    for round in 0..3 {
        // Each later confirm arrives in a batch of its own, every round (redeliveries).
        for intent in &later {
            let failed = worker.handle_batch(&[message(intent)]).await;
            assert_eq!(
                failed,
                vec![message(intent).message_id],
                "round {round}: handed back"
            );
            assert_eq!(
                r.intent(&intent.intent_id).await.status,
                IntentStatus::Requested
            );
        }
        r.clock
            .advance(r.timing.lease() + r.timing.reaper_grace + r.timing.settle_retry_max);
        let report = reaper.run_once(100).await.unwrap();
        assert_eq!(report.postponed, 1, "round {round}: {report:?}");
        assert_eq!(
            r.sim.stats().get(POSTS),
            1,
            "round {round}: one reserve while unsettled"
        );
    }
    r.sim.set_faults(Faults::default());
    r.clock.advance(r.timing.settle_retry_max);
    let report = reaper.run_once(100).await.unwrap();
    assert_eq!(report.settled_succeeded, 1, "{report:?}");
    assert_eq!(r.plain.seat_claim(&seat).await.unwrap(), None, "released");
    let failed = worker
        .handle_batch(&[message(&later[0]), message(&later[1])])
        .await;
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(
        r.intent(&first.intent_id).await.status,
        IntentStatus::Succeeded
    );
    for intent in &later {
        assert_eq!(
            r.intent(&intent.intent_id).await.status,
            IntentStatus::FailedRace
        );
    }
    assert_eq!(r.sim.stats().get(POSTS), 1);
    r.finish().await;
}

/// A settlement whose first try committed and whose answer was lost, sent again by the SDK's
/// retry, on DynamoDB Local: the refusal shows the write's own result (same version and
/// fencing token), which the reaper takes as its success.
#[tokio::test]
async fn a_committed_then_retried_settlement_is_recognised_on_dynamodb() {
    let r = rig().await;
    let u = r.enrol("dr1").await;
    r.sim.set_faults(Faults {
        drop_response_after_commit: 1,
        ..Faults::default()
    });
    let intent = r.requested(&u, "DR-1").await;
    let worker = r.worker(r.plain.clone(), r.upstream.clone());
    assert!(worker.handle_batch(&[message(&intent)]).await.is_empty());
    r.clock
        .advance(r.timing.lease() + r.timing.reaper_grace + Duration::from_secs(1));
    r.faulty.replay_next(StoreOp::Transition, 1);
    let report = r.reaper().run_once(100).await.unwrap();
    assert_eq!(r.faulty.injected(), 1);
    assert_eq!(report.settled_succeeded, 1, "{report:?}");
    let done = r.intent(&intent.intent_id).await;
    assert_eq!(done.status, IntentStatus::Succeeded);
    assert_eq!(done.fencing_token, 1);
    r.finish().await;
}

/// On DynamoDB Local: a user who already holds a charge confirms, and waits on, another seat.
/// Both end FAILED_UPSTREAM `already_charged`, no suppression or hold is left on that seat, and
/// the next user gets it with one write.
#[tokio::test]
async fn already_charged_ends_that_users_intents_and_leaves_the_seat_open_on_dynamodb() {
    let r = rig().await;
    let (u1, u2) = (r.enrol("dc1").await, r.enrol("dc2").await);
    let worker = r.worker(r.plain.clone(), r.upstream.clone());
    let held = r.requested(&u1, "DC-1").await;
    assert!(worker.handle_batch(&[message(&held)]).await.is_empty());
    assert_eq!(
        r.intent(&held.intent_id).await.status,
        IntentStatus::Succeeded
    );

    let again = r.requested(&u1, "DC-2").await;
    let api = r.plain_api();
    let until = r.clock.now().plus(Duration::from_secs(600));
    let wait = api
        .register_wait(&u1, SeatId::parse("DC-2").unwrap(), until)
        .await
        .unwrap();
    assert!(
        worker
            .handle_batch(&[message(&again), message(&wait)])
            .await
            .is_empty()
    );
    for id in [&again.intent_id, &wait.intent_id] {
        let i = r.intent(id).await;
        assert_eq!(
            (i.status, i.reason.map(String::from).as_deref()),
            (IntentStatus::FailedUpstream, Some("already_charged")),
            "{i:?}"
        );
    }
    let seat = SeatId::parse("DC-2").unwrap();
    assert_eq!(
        r.plain.suppression(&seat, r.clock.now()).await.unwrap(),
        None
    );
    assert_eq!(r.plain.seat_claim(&seat).await.unwrap(), None);
    let posts = r.sim.stats().get(POSTS);
    let other = r.requested(&u2, "DC-2").await;
    assert!(worker.handle_batch(&[message(&other)]).await.is_empty());
    assert_eq!(
        r.intent(&other.intent_id).await.status,
        IntentStatus::Succeeded
    );
    assert_eq!(r.sim.stats().get(POSTS), posts + 1);
    r.finish().await;
}

/// On DynamoDB Local: a 429 storm fails no one. Each attempt goes back in line not before the
/// upstream's Retry-After, releasing the seat's claim, and the reaper puts it back on the queue
/// once that time has come; when the upstream relents, it succeeds.
#[tokio::test]
async fn a_429_storm_fails_no_one_on_dynamodb() {
    let r = rig().await;
    let u = r.enrol("dz1").await;
    r.sim.set_faults(Faults {
        rate_limited_for_ms: 60_000,
        retry_after_secs: 7,
        routes: Some(vec![POSTS.into()]),
        ..Faults::default()
    });
    let worker = r.worker(r.plain.clone(), r.upstream.clone());
    let intent = r.requested(&u, "DZ-1").await;
    let before = r.clock.now();
    assert!(worker.handle_batch(&[message(&intent)]).await.is_empty());
    let back = r.intent(&intent.intent_id).await;
    assert_eq!(
        (back.status, back.reason.map(String::from).as_deref()),
        (IntentStatus::Requested, Some("upstream_busy"))
    );
    let retry_at = back.next_attempt_at.expect("a retry time");
    assert!(
        retry_at >= before.plus(Duration::from_secs(7)),
        "at least Retry-After"
    );
    assert_eq!(
        r.plain
            .seat_claim(&SeatId::parse("DZ-1").unwrap())
            .await
            .unwrap(),
        None
    );
    // Not claimable before its time.
    let early = QueueRecord {
        message_id: "m-early".into(),
        group_id: "DZ-1".into(),
        body: serde_json::to_string(&SeatMessage::for_intent(&back)).unwrap(),
        receipt: String::new(),
    };
    assert!(worker.handle_batch(&[early]).await.is_empty());
    assert_eq!(
        r.sim.stats().get(POSTS),
        1,
        "nothing sent before Retry-After"
    );

    r.sim.set_faults(Faults::default());
    r.clock.advance(Duration::from_secs(7));
    let report = r.reaper().run_once(100).await.unwrap();
    assert_eq!(report.woken, 1, "{report:?}");
    let woken = r.intent(&intent.intent_id).await;
    assert!(worker.handle_batch(&[message(&woken)]).await.is_empty());
    assert_eq!(
        r.intent(&intent.intent_id).await.status,
        IntentStatus::Succeeded
    );
    assert_eq!(r.sim.stats().get(POSTS), 2);
    r.finish().await;
}
