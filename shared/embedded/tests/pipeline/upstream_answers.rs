//! What the upstream answers, and what the pipeline makes of it: a bad credential fails that
//! user's attempt only, an outage or a 429 storm puts attempts back in line (failing no one,
//! waiting out `Retry-After`), and `already charged` ends that user's intent leaving the seat open.

use super::common::{pipeline, user};
use seatgate::domain::{IntentStatus, SeatId};
use seatgate::ports::{Clock, Intents};
use seatgate_testkit::setup::{CHARGE_READS, POSTS};
use std::time::Duration;
use upstream_sim::Faults;

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
            .seat_claim(&SeatId::parse("F-1").unwrap())
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
    assert_eq!(p.backend.seat_claim(&g2).await.unwrap(), None);

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
    // The Retry-After pauses the route fleet-wide: until it passes, no reserve at all.
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
