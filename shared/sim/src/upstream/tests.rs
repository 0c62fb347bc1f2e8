//! The model's own checks: one charge per user and one holder per seat, a lost answer that
//! commits and times out, and windows, latency and abandoned calls in the record.

use super::*;
use seatgate::domain::{Millis, SeatId, Secret, UserId};
use seatgate::ports::{CallFailure, ReadError, ReserveOutcome, Upstream};
use seatgate_memory::runtime::TokioClock;
use std::sync::Arc;
use std::time::Duration;

fn user(s: &str) -> UserId {
    UserId::parse(s).unwrap()
}

fn seat(s: &str) -> SeatId {
    SeatId::parse(s).unwrap()
}

fn model() -> UpstreamModel {
    let clock = Arc::new(TokioClock::starting_at(Millis(1_000_000)));
    let m = UpstreamModel::new(1, clock, Duration::from_secs(2));
    m.register(&user("u1"), "c1");
    m.register(&user("u2"), "c2");
    m
}

#[tokio::test(start_paused = true)]
async fn one_charge_per_user_and_one_holder_per_seat() {
    let m = model();
    let (c1, c2) = (Secret::new("c1"), Secret::new("c2"));
    assert!(matches!(
        m.reserve(&c1, &seat("A")).await,
        ReserveOutcome::Reserved(_)
    ));
    assert_eq!(m.reserve(&c2, &seat("A")).await, ReserveOutcome::SeatTaken);
    assert_eq!(
        m.reserve(&c1, &seat("A")).await,
        ReserveOutcome::SeatTaken,
        "even its holder"
    );
    assert_eq!(
        m.reserve(&c1, &seat("B")).await,
        ReserveOutcome::AlreadyCharged
    );
    assert_eq!(
        m.reserve(&Secret::new("nope"), &seat("B")).await,
        ReserveOutcome::CredentialRejected
    );
    assert_eq!(m.release(&user("u1")), Some(seat("A")));
    assert!(matches!(
        m.reserve(&c2, &seat("A")).await,
        ReserveOutcome::Reserved(_)
    ));
    let log = m.call_log();
    assert_eq!(log.len(), 7, "six reserves and a release");
    assert!(log[6].ends_with("POST /api/reservations seat=A user=u2 -> 201 ch-000002"));
    assert!(
        log.iter().all(|l| !l.contains("c1") && !l.contains("nope")),
        "no credential in the record: {log:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_lost_answer_commits_and_times_out() {
    let m = model();
    m.lose_next_commits(1);
    let started = tokio::time::Instant::now();
    assert_eq!(
        m.reserve(&Secret::new("c1"), &seat("A")).await,
        ReserveOutcome::Unknown(CallFailure::Timeout)
    );
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(2),
        "the caller's timeout"
    );
    assert_eq!(m.occupant(&seat("A")), Some(user("u1")));
    let charge = m.current_charge(&Secret::new("c1")).await.unwrap().unwrap();
    assert_eq!(charge.seat_id, seat("A"));
    assert!(m.commits()[0].answer_lost);
}

#[tokio::test(start_paused = true)]
async fn windows_latency_and_abandoned_calls() {
    let m = model();
    m.outage_for(Duration::from_secs(1), Some(Duration::from_secs(3)));
    assert_eq!(
        m.seat(&seat("A")).await,
        Err(ReadError::Busy {
            retry_after: Some(Duration::from_secs(3))
        })
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(m.seat(&seat("A")).await, Ok(true));
    m.set_faults(Faults {
        latency: Duration::from_secs(5),
        ..Faults::default()
    });
    assert_eq!(
        m.reserve(&Secret::new("c1"), &seat("A")).await,
        ReserveOutcome::Unknown(CallFailure::Timeout)
    );
    assert_eq!(m.occupant(&seat("A")), None, "nothing done");
    m.set_faults(Faults {
        latency: Duration::from_millis(500),
        ..Faults::default()
    });
    let cut = tokio::time::timeout(Duration::from_millis(100), m.seat(&seat("A"))).await;
    assert!(cut.is_err());
    let log = m.call_log();
    assert!(log[0].ends_with("-> 503 retry-after 3000ms"), "{log:?}");
    assert!(log[2].ends_with("-> timeout (nothing done)"), "{log:?}");
    assert!(log[3].ends_with("-> abandoned"), "{log:?}");
}

#[tokio::test(start_paused = true)]
async fn a_reserve_handled_late_times_out_for_its_caller_and_lands_inside_the_margin() {
    let m = model();
    m.set_faults(Faults {
        late_commit_rate: 1.0,
        late_commit_within: Duration::from_millis(500),
        ..Faults::default()
    });
    let (c1, c2) = (Secret::new("c1"), Secret::new("c2"));
    let started = tokio::time::Instant::now();
    assert_eq!(
        m.reserve(&c1, &seat("A")).await,
        ReserveOutcome::Unknown(CallFailure::Timeout)
    );
    assert_eq!(started.elapsed(), Duration::from_secs(2), "at the timeout");
    assert_eq!(m.occupant(&seat("A")), None, "not landed yet");
    // A second reserve of the same seat, also late, lands after the first: a 409 nobody hears.
    assert_eq!(
        m.reserve(&c2, &seat("A")).await,
        ReserveOutcome::Unknown(CallFailure::Timeout)
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(m.occupant(&seat("A")), Some(user("u1")));
    let commits = m.commits();
    assert_eq!(commits.len(), 1);
    assert!(commits[0].answer_lost, "its caller never heard of it");
    let landed = commits[0].at.since(Millis(1_000_000));
    assert!(
        landed > Duration::from_secs(2) && landed <= Duration::from_millis(2_500),
        "past the timeout, within the margin: {landed:?}"
    );
    let log = m.call_log();
    assert!(
        log[0].contains("-> timeout; landed late at +")
            && log[0].ends_with("201 ch-000001 (answer lost)"),
        "{log:?}"
    );
    assert!(log[1].ends_with("409 seat_taken"), "{log:?}");
}
