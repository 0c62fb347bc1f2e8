//! The transitions' unit tests: every rule of `Intent::apply`, one case per refusal.

use super::*;

fn requested(now: Millis) -> Intent {
    Intent::requested(
        IntentId::generate(),
        UserId::parse("u1").unwrap(),
        SeatId::parse("A-1").unwrap(),
        ActionId::generate(),
        now,
        now.plus(std::time::Duration::from_secs(60)),
    )
}

fn req(intent: &Intent, now: i64, transition: Transition) -> TransitionRequest {
    TransitionRequest::on(intent, Millis(now), transition)
}

fn claim(lease: i64) -> Transition {
    Transition::Claim {
        lease_until: Millis(lease),
        due_at: Millis(lease + 10),
    }
}

fn complete(token: u64) -> Transition {
    Transition::Complete {
        token,
        status: Terminal::Succeeded,
        charge_id: Some("c1".into()),
        reason: Reason::Reserved,
        suppress: None,
    }
}

#[test]
fn claim_bumps_the_fencing_token_and_only_that_token_settles() {
    let i = requested(Millis(0));
    let claimed = i.apply(&req(&i, 1, claim(100))).unwrap();
    assert_eq!(claimed.status, IntentStatus::Reserving);
    assert_eq!(claimed.fencing_token, 1);
    assert_eq!(claimed.version, 2);
    assert!(claimed.apply(&req(&claimed, 2, claim(100))).is_none());
    assert!(claimed.apply(&req(&claimed, 2, complete(0))).is_none());
    let done = claimed.apply(&req(&claimed, 2, complete(1))).unwrap();
    assert_eq!(done.status, IntentStatus::Succeeded);
    assert_eq!(done.due_at, None);
    assert!(done.apply(&req(&done, 3, complete(1))).is_none());
}

#[test]
fn a_wait_is_claimable_only_when_due_and_before_its_deadline() {
    let w = Intent::waiting(
        UserId::parse("u").unwrap(),
        SeatId::parse("S").unwrap(),
        Millis(1_000),
        Millis(0),
    );
    assert!(w.apply(&req(&w, 10, claim(100))).is_some());
    let mut later = w.clone();
    later.next_attempt_at = Some(Millis(500));
    assert!(later.apply(&req(&later, 400, claim(100))).is_none());
    assert!(later.apply(&req(&later, 500, claim(600))).is_some());
    assert!(later.apply(&req(&later, 1_000, claim(1_100))).is_none());
}

#[test]
fn close_checks_owner_and_deadline() {
    let w = Intent::waiting(
        UserId::parse("u").unwrap(),
        SeatId::parse("S").unwrap(),
        Millis(1_000),
        Millis(0),
    );
    let cancel = |owner: &str, deadline_passed| Transition::Close {
        from: vec![IntentStatus::WaitingForSeat],
        owner: Some(UserId::parse(owner).unwrap()),
        deadline_passed,
        status: Terminal::Cancelled,
        reason: Reason::Cancelled,
    };
    assert!(w.apply(&req(&w, 5, cancel("other", false))).is_none());
    assert!(w.apply(&req(&w, 5, cancel("u", true))).is_none());
    assert!(w.apply(&req(&w, 1_000, cancel("u", true))).is_some());
    assert_eq!(
        w.apply(&req(&w, 5, cancel("u", false))).unwrap().status,
        IntentStatus::Cancelled
    );
}

#[test]
fn bump_needs_the_exact_version() {
    let i = requested(Millis(0));
    let bump = |version| Transition::Bump {
        from: IntentStatus::Requested,
        version,
        next_attempt_at: None,
        due_at: Millis(99),
        requeue: true,
    };
    assert!(i.apply(&req(&i, 1, bump(2))).is_none());
    let b = i.apply(&req(&i, 1, bump(1))).unwrap();
    assert_eq!((b.version, b.requeues, b.due_at), (2, 1, Some(Millis(99))));
}

#[test]
fn statuses_round_trip_and_know_terminality() {
    for s in IntentStatus::ALL {
        assert_eq!(IntentStatus::parse(s.as_str()), Some(s));
    }
    assert!(!IntentStatus::Reserving.is_terminal());
    assert!(IntentStatus::WaitExpired.is_terminal());
}

#[test]
fn reasons_keep_their_stable_strings() {
    let all = [
        (Reason::Reserved, "reserved"),
        (Reason::SeatTaken, "seat_taken"),
        (Reason::NoCredential, "no_credential"),
        (Reason::CredentialRejected, "credential_rejected"),
        (Reason::UpstreamRefused(422), "upstream_refused_422"),
        (Reason::ChargeRead, "charge_read"),
        (Reason::NoCharge, "no_charge"),
        (Reason::Deadline, "deadline"),
        (Reason::Cancelled, "cancelled"),
        (Reason::NeverProcessed, "never_processed"),
        (Reason::AlreadyCharged, "already_charged"),
        (Reason::UpstreamBusy, "upstream_busy"),
    ];
    for (reason, text) in all {
        assert_eq!(reason.to_string(), text);
        assert_eq!(Reason::parse(text), Some(reason));
        assert_eq!(
            serde_json::to_string(&reason).unwrap(),
            format!("\"{text}\"")
        );
    }
    for bad in [
        "",
        "suppressed",
        "upstream_refused_",
        "upstream_refused_42",
        "upstream_refused_x",
    ] {
        assert_eq!(Reason::parse(bad), None, "{bad:?}");
    }
    assert!(serde_json::from_str::<Reason>("\"closed\"").is_err());
}

#[test]
fn terminal_statuses_are_exactly_the_terminal_ones() {
    for status in IntentStatus::ALL {
        assert_eq!(
            Terminal::of(status).map(Terminal::status),
            status.is_terminal().then_some(status)
        );
    }
}

fn claimed(kind: IntentKind, deadline: Option<Millis>) -> Intent {
    let mut i = requested(Millis(0));
    i.kind = kind;
    i.deadline = deadline;
    i.apply(&req(&i, 1, claim(100))).unwrap()
}

#[test]
fn settle_decides_each_outcome() {
    let t = Timing::fast();
    let now = Millis(10);
    let immediate = claimed(IntentKind::Immediate, None);
    let done = |i: &Intent, o: Outcome| i.apply(&i.settle(o, now, &t)).unwrap();

    let won = done(
        &immediate,
        Outcome::Charged {
            charge_id: "c".into(),
            how: Reason::Reserved,
        },
    );
    assert_eq!(
        (won.status, won.reason, won.charge_id.as_deref()),
        (IntentStatus::Succeeded, Some(Reason::Reserved), Some("c"))
    );
    let charged = Outcome::Charged {
        charge_id: "c".into(),
        how: Reason::Reserved,
    };
    let won_record = immediate.settle(charged, now, &t).suppression().cloned();
    assert_eq!(
        won_record,
        Some(Suppression::won(&immediate, now, &t)),
        "a charge suppresses the seat and names its winner"
    );
    let won_record = won_record.unwrap();
    assert_eq!(won_record.winner.as_ref(), Some(&immediate.user_id));
    assert!(!won_record.was_won_for(&immediate), "not the winner itself");
    let later_attempt = Intent {
        intent_id: IntentId::generate(),
        ..immediate.clone()
    };
    assert!(
        won_record.was_won_for(&later_attempt),
        "the same user, later"
    );
    let someone_else = Intent {
        user_id: UserId::parse("another-user").unwrap(),
        ..later_attempt.clone()
    };
    assert!(!won_record.was_won_for(&someone_else));
    let request = immediate.settle(Outcome::SeatTaken, now, &t);
    assert_eq!(
        request.suppression(),
        Some(&Suppression::of(&immediate, now, &t))
    );
    assert!(
        !Suppression::of(&immediate, now, &t).was_won_for(&later_attempt),
        "found taken: no winner"
    );
    assert_eq!(
        immediate.apply(&request).unwrap().status,
        IntentStatus::FailedRace
    );
    let no_charge = immediate.settle(Outcome::NoCharge, now, &t);
    assert_eq!(
        no_charge.suppression(),
        None,
        "no charge means the seat was never taken"
    );
    assert_eq!(
        immediate.apply(&no_charge).unwrap().status,
        IntentStatus::FailedUpstream
    );
    // Suppressed after the claim: a lost race, and the suppression in force is not rewritten.
    let suppressed = immediate.settle(Outcome::Suppressed, now, &t);
    assert_eq!(suppressed.suppression(), None);
    let lost = immediate.apply(&suppressed).unwrap();
    assert_eq!(
        (lost.status, lost.reason),
        (IntentStatus::FailedRace, Some(Reason::SeatTaken))
    );
    let refused = done(&immediate, Outcome::Refused(422));
    assert_eq!(refused.reason, Some(Reason::UpstreamRefused(422)));
    assert_eq!(
        done(&immediate, Outcome::NoCredential).status,
        IntentStatus::FailedAuth
    );

    // A wait with time left waits again; one whose next attempt would pass its deadline ends.
    let wait = claimed(IntentKind::Wait, Some(Millis(60_000)));
    let again = done(&wait, Outcome::SeatTaken);
    assert_eq!(again.status, IntentStatus::WaitingForSeat);
    let backs_off = wait.settle(Outcome::Suppressed, now, &t);
    assert_eq!(backs_off.suppression(), None);
    assert_eq!(
        wait.apply(&backs_off).unwrap().status,
        IntentStatus::WaitingForSeat
    );
    assert_eq!(again.next_attempt_at, wait.next_wait_attempt(now, &t));
    assert_eq!(
        done(&wait, Outcome::NoCharge).reason,
        Some(Reason::NoCharge)
    );
    let late = claimed(IntentKind::Wait, Some(now.plus(t.wait_backoff(1))));
    assert_eq!(late.next_wait_attempt(now, &t), None);
    let ended = done(&late, Outcome::SeatTaken);
    assert_eq!(
        (ended.status, ended.reason),
        (IntentStatus::WaitExpired, Some(Reason::Deadline))
    );
    // A settlement carries the claim's fencing token: a stale copy is refused.
    let mut stale = immediate.clone();
    stale.fencing_token -= 1;
    assert!(
        immediate
            .apply(&stale.settle(Outcome::SeatTaken, now, &t))
            .is_none()
    );
}
