//! Intents: waits, claims, settlements, fencing tokens, the due index and suppression.

#[allow(unused_imports)]
use super::fixtures::*;
#[allow(unused_imports)]
use super::*;

pub async fn register_wait_then_read_it_back(h: &Harness) {
    let deadline = h.now().plus(Duration::from_secs(3600));
    let intent = Intent::waiting(new_user(), new_seat(), deadline, h.now());
    let consent = wait_consent(&intent);
    h.intents.register_wait(&intent, &consent).await.unwrap();

    let stored = h.intents.get_intent(&intent.intent_id).await.unwrap();
    assert_eq!(stored, Some(intent.clone()));
    assert_eq!(intent.status, IntentStatus::WaitingForSeat);
    assert_eq!(
        h.intents.get_consent(&intent.intent_id).await.unwrap(),
        Some(consent.clone())
    );
    let unknown = IntentId::generate();
    assert_eq!(h.intents.get_intent(&unknown).await.unwrap(), None);
    assert_eq!(h.intents.get_consent(&unknown).await.unwrap(), None);

    // Ids are generated: registering over an existing intent is a bug, never an overwrite.
    let mut clash = Intent::waiting(new_user(), new_seat(), deadline, h.now());
    clash.intent_id = intent.intent_id.clone();
    assert!(
        h.intents
            .register_wait(&clash, &wait_consent(&clash))
            .await
            .is_err(),
        "register_wait over an existing intent id succeeded"
    );
    assert_eq!(
        h.intents.get_intent(&intent.intent_id).await.unwrap(),
        Some(intent.clone())
    );
    assert_eq!(
        h.intents.get_consent(&intent.intent_id).await.unwrap(),
        Some(consent)
    );
}

pub async fn claim_bumps_token_and_version(h: &Harness) {
    let intent = requested_intent(h).await;
    let now = h.now().plus(Duration::from_secs(1));
    let claimed = applied(h, &intent, &request(&intent, now, claim(now))).await;
    assert_eq!(claimed.status, IntentStatus::Reserving);
    assert_eq!(claimed.fencing_token, intent.fencing_token + 1);
    assert_eq!(claimed.version, intent.version + 1);
    assert_eq!(claimed.attempts, 1);
    assert_eq!(claimed.lease_until, Some(now.plus(Duration::from_secs(10))));
    assert_eq!(claimed.due_at, Some(now.plus(Duration::from_secs(12))));
    assert_eq!(claimed.updated_at, now);

    // A due wait is claimable too.
    let wait = waiting_intent(h, h.now().plus(Duration::from_secs(60))).await;
    let claimed = applied(h, &wait, &request(&wait, now, claim(now))).await;
    assert_eq!(
        (claimed.status, claimed.fencing_token, claimed.version),
        (IntentStatus::Reserving, 1, 2)
    );
}

pub async fn second_claim_is_refused(h: &Harness) {
    let intent = requested_intent(h).await;
    let now = h.now();
    let claimed = applied(h, &intent, &request(&intent, now, claim(now))).await;
    let later = now.plus(Duration::from_secs(1));
    refused(h, &claimed, &request(&intent, later, claim(later))).await;
}

pub async fn complete_needs_the_current_token(h: &Harness) {
    let intent = requested_intent(h).await;
    let now = h.now();
    let claimed = applied(h, &intent, &request(&intent, now, claim(now))).await;
    let token = claimed.fencing_token;

    refused(
        h,
        &claimed,
        &request(&intent, now, complete(token - 1, None)),
    )
    .await;
    refused(
        h,
        &claimed,
        &request(&intent, now, complete(token + 1, None)),
    )
    .await;
    let done = applied(h, &claimed, &request(&intent, now, complete(token, None))).await;
    assert_eq!(done.status, IntentStatus::Succeeded);
    assert_eq!(done.charge_id.as_deref(), Some("charge-1"));
    assert_eq!(done.due_at, None);
    assert_eq!(done.lease_until, None);
    // Terminal: even the right token settles it only once.
    refused(h, &done, &request(&intent, now, complete(token, None))).await;
}

pub async fn complete_with_suppression_suppresses_until_it_ends(h: &Harness) {
    let intent = requested_intent(h).await;
    let seat = intent.seat_id.clone();
    let now = h.now();
    let claimed = applied(h, &intent, &request(&intent, now, claim(now))).await;
    let suppression = Suppression {
        seat_id: seat.clone(),
        intent_id: intent.intent_id.clone(),
        until: now.plus(Duration::from_secs(60)),
        winner: Some(intent.user_id.clone()),
    };

    // A refused write writes no suppression either.
    let stale = complete(claimed.fencing_token + 1, Some(suppression.clone()));
    refused(h, &claimed, &request(&intent, now, stale)).await;
    assert_eq!(h.intents.suppression(&seat, now).await.unwrap(), None);
    assert_eq!(h.intents.last_taken(&seat).await.unwrap(), None);

    let with = complete(claimed.fencing_token, Some(suppression.clone()));
    applied(h, &claimed, &request(&intent, now, with)).await;
    assert_eq!(
        h.intents.suppression(&seat, now).await.unwrap(),
        Some(suppression.clone())
    );
    let last_ms = suppression.until.minus(Duration::from_millis(1));
    assert_eq!(
        h.intents.suppression(&seat, last_ms).await.unwrap(),
        Some(suppression.clone())
    );
    assert_eq!(
        h.intents
            .suppression(&seat, suppression.until)
            .await
            .unwrap(),
        None,
        "a suppression is in force only while until > now"
    );
    assert_eq!(h.intents.suppression(&new_seat(), now).await.unwrap(), None);
    assert_eq!(
        h.intents.last_taken(&seat).await.unwrap(),
        Some(suppression.clone()),
        "the seat's latest record outlives its window, with its winner"
    );
    assert!(
        h.intents
            .last_taken(&seat)
            .await
            .unwrap()
            .is_some_and(|s| !s.was_won_for(&claimed)),
        "the winning intent itself is not a later attempt"
    );

    // The next settlement that takes the seat replaces it; one that found it taken keeps the
    // last winner (`Suppression::over`), one that won it names its own.
    let other = requested_on(h, &seat).await;
    let claimed_other = applied(h, &other, &request(&other, now, claim(now))).await;
    let found_taken = Suppression {
        intent_id: other.intent_id.clone(),
        until: now.plus(Duration::from_secs(90)),
        winner: None,
        ..suppression.clone()
    };
    let lost = complete(claimed_other.fencing_token, Some(found_taken.clone()));
    applied(h, &claimed_other, &request(&other, now, lost)).await;
    let kept = h.intents.last_taken(&seat).await.unwrap();
    assert_eq!(kept, Some(found_taken.clone().over(Some(&suppression))));
    assert_eq!(
        kept.map(|k| (k.intent_id, k.until, k.winner)),
        Some((
            other.intent_id.clone(),
            found_taken.until,
            Some(intent.user_id.clone())
        )),
        "found taken: its intent and window, the last winner kept"
    );
    let third = requested_on(h, &seat).await;
    let claimed_third = applied(h, &third, &request(&third, now, claim(now))).await;
    let won_again = Suppression {
        intent_id: third.intent_id.clone(),
        winner: Some(third.user_id.clone()),
        ..found_taken
    };
    let won = complete(claimed_third.fencing_token, Some(won_again.clone()));
    applied(h, &claimed_third, &request(&third, now, won)).await;
    assert_eq!(h.intents.last_taken(&seat).await.unwrap(), Some(won_again));
    assert_eq!(h.intents.last_taken(&new_seat()).await.unwrap(), None);
}

pub async fn rewait_backs_off_and_fences_the_old_token(h: &Harness) {
    let t0 = h.now();
    let wait = waiting_intent(h, t0.plus(Duration::from_secs(600))).await;
    let first = applied(h, &wait, &request(&wait, t0, claim(t0))).await;

    let retry_at = t0.plus(Duration::from_secs(5));
    let suppression = Suppression {
        seat_id: wait.seat_id.clone(),
        intent_id: wait.intent_id.clone(),
        until: t0.plus(Duration::from_secs(30)),
        winner: None,
    };
    let rewait = Transition::Rewait {
        token: first.fencing_token,
        next_attempt_at: retry_at,
        due_at: retry_at,
        reason: Reason::SeatTaken,
        suppress: Some(suppression.clone()),
    };
    let waiting = applied(h, &first, &request(&wait, t0, rewait.clone())).await;
    assert_eq!(waiting.status, IntentStatus::WaitingForSeat);
    assert_eq!(waiting.next_attempt_at, Some(retry_at));
    assert_eq!(waiting.due_at, Some(retry_at));
    assert_eq!(waiting.lease_until, None);
    assert_eq!(waiting.reason, Some(Reason::SeatTaken));
    assert_eq!(
        h.intents.suppression(&wait.seat_id, t0).await.unwrap(),
        Some(suppression)
    );
    // The same rewait again is refused: the intent is no longer RESERVING.
    refused(h, &waiting, &request(&wait, t0, rewait)).await;

    // Not claimable before its next attempt, claimable at it.
    let early = t0.plus(Duration::from_secs(1));
    refused(h, &waiting, &request(&wait, early, claim(early))).await;
    let second = applied(h, &waiting, &request(&wait, retry_at, claim(retry_at))).await;
    assert_eq!(second.fencing_token, first.fencing_token + 1);
    assert_eq!(second.attempts, 2);

    // The first attempt's worker is fenced off.
    refused(
        h,
        &second,
        &request(&wait, retry_at, complete(first.fencing_token, None)),
    )
    .await;
    applied(
        h,
        &second,
        &request(&wait, retry_at, complete(second.fencing_token, None)),
    )
    .await;
}

pub async fn close_checks_owner_and_deadline(h: &Harness) {
    let t0 = h.now();
    let deadline = t0.plus(Duration::from_secs(60));
    let close =
        |owner: Option<UserId>, deadline_passed: bool, status: Terminal| Transition::Close {
            from: vec![IntentStatus::WaitingForSeat],
            owner,
            deadline_passed,
            status,
            reason: Reason::Cancelled,
        };

    // Expiry: only once the deadline has passed, whoever asks.
    let wait = waiting_intent(h, deadline).await;
    let owner = wait.user_id.clone();
    let cancel_by = |who: &UserId| close(Some(who.clone()), false, Terminal::Cancelled);
    refused(h, &wait, &request(&wait, t0, cancel_by(&new_user()))).await;
    let expire = close(None, true, Terminal::WaitExpired);
    let before = deadline.minus(Duration::from_millis(1));
    refused(h, &wait, &request(&wait, before, expire.clone())).await;
    let expired = applied(h, &wait, &request(&wait, deadline, expire.clone())).await;
    assert_eq!(expired.status, IntentStatus::WaitExpired);
    assert_eq!(expired.due_at, None);
    refused(h, &expired, &request(&wait, deadline, cancel_by(&owner))).await;

    // Cancel: only by its owner, only from the listed states.
    let wait = waiting_intent(h, deadline).await;
    let owner = wait.user_id.clone();
    let cancelled = applied(h, &wait, &request(&wait, t0, cancel_by(&owner))).await;
    assert_eq!(cancelled.status, IntentStatus::Cancelled);
    assert_eq!(cancelled.reason, Some(Reason::Cancelled));
    refused(h, &cancelled, &request(&wait, t0, cancel_by(&owner))).await;

    // A local FAILED_RACE of a REQUESTED intent, with no owner condition; a RESERVING one is not
    // in `from`.
    let intent = requested_intent(h).await;
    let race = Transition::Close {
        from: vec![IntentStatus::Requested],
        owner: None,
        deadline_passed: false,
        status: Terminal::FailedRace,
        reason: Reason::SeatTaken,
    };
    let other = requested_intent(h).await;
    let claimed = applied(h, &other, &request(&other, t0, claim(t0))).await;
    refused(h, &claimed, &request(&other, t0, race.clone())).await;
    let raced = applied(h, &intent, &request(&intent, t0, race)).await;
    assert_eq!(raced.status, IntentStatus::FailedRace);
    assert_eq!(raced.due_at, None);
}

pub async fn bump_needs_the_exact_version(h: &Harness) {
    let intent = requested_intent(h).await;
    let now = h.now().plus(Duration::from_secs(5));
    let due = now.plus(Duration::from_secs(60));
    let bump = |from, version| Transition::Bump {
        from,
        version,
        next_attempt_at: None,
        due_at: due,
        requeue: true,
    };
    refused(
        h,
        &intent,
        &request(&intent, now, bump(IntentStatus::Requested, 2)),
    )
    .await;
    refused(
        h,
        &intent,
        &request(&intent, now, bump(IntentStatus::Requested, 0)),
    )
    .await;
    refused(
        h,
        &intent,
        &request(&intent, now, bump(IntentStatus::WaitingForSeat, 1)),
    )
    .await;
    let bumped = applied(
        h,
        &intent,
        &request(&intent, now, bump(IntentStatus::Requested, 1)),
    )
    .await;
    assert_eq!(bumped.status, IntentStatus::Requested);
    assert_eq!(bumped.version, 2);
    assert_eq!(bumped.requeues, 1);
    assert_eq!(bumped.due_at, Some(due));
    // The same bump again is stale.
    refused(
        h,
        &bumped,
        &request(&intent, now, bump(IntentStatus::Requested, 1)),
    )
    .await;

    // A due wait moved forward: next attempt set, requeue count untouched.
    let wait = waiting_intent(h, h.now().plus(Duration::from_secs(600))).await;
    let next = now.plus(Duration::from_secs(7));
    let moved = applied(
        h,
        &wait,
        &request(
            &wait,
            now,
            Transition::Bump {
                from: IntentStatus::WaitingForSeat,
                version: wait.version,
                next_attempt_at: Some(next),
                due_at: next,
                requeue: false,
            },
        ),
    )
    .await;
    assert_eq!(
        (moved.version, moved.next_attempt_at, moved.requeues),
        (2, Some(next), 0)
    );
}

pub async fn transition_of_unknown_intent_is_not_found(h: &Harness) {
    let now = h.now();
    let ghost = TransitionRequest::on_seat(IntentId::generate(), new_seat(), now, claim(now));
    for transition in [
        claim(now),
        complete(1, None),
        Transition::Close {
            from: vec![IntentStatus::WaitingForSeat],
            owner: None,
            deadline_passed: false,
            status: Terminal::Cancelled,
            reason: Reason::Cancelled,
        },
        Transition::Bump {
            from: IntentStatus::Requested,
            version: 1,
            next_attempt_at: None,
            due_at: now,
            requeue: false,
        },
    ] {
        let req = TransitionRequest {
            seen: None,
            reading: None,
            transition,
            ..ghost.clone()
        };
        let result = h.intents.transition(&req).await;
        assert!(
            matches!(result, Err(TransitionError::NotFound)),
            "{:?} on an unknown intent: expected NotFound, got {result:?}",
            req.transition
        );
        assert_eq!(h.intents.get_intent(&req.intent_id).await.unwrap(), None);
    }
}

pub async fn due_intents_in_due_order_without_terminal_ones(h: &Harness) {
    // A time range of this case's own, long before any other case's "now", so intents other
    // cases leave in a shared table cannot interleave with these.
    let base = Millis(315_532_800_000 + (rand::random_range(0..100_000i64) * 100_000));
    let at = |ms: i64| Millis(base.0 + ms);
    let store = |due: i64| {
        let mut intent = Intent::waiting(new_user(), new_seat(), at(1_000_000), base);
        intent.due_at = Some(at(due));
        async move {
            h.intents
                .register_wait(&intent, &wait_consent(&intent))
                .await
                .unwrap();
            intent
        }
    };
    let w300 = store(300).await;
    let w100 = store(100).await;
    let w200 = store(200).await;
    let future = store(900).await;
    let closed = store(150).await;
    let close = Transition::Close {
        from: vec![IntentStatus::WaitingForSeat],
        owner: None,
        deadline_passed: false,
        status: Terminal::Cancelled,
        reason: Reason::Cancelled,
    };
    applied(h, &closed, &request(&closed, at(1), close)).await;
    // Non-terminal RESERVING intents are due too (at their lease's end).
    let reserving = store(0).await;
    let claim = Transition::Claim {
        lease_until: at(240),
        due_at: at(250),
    };
    applied(h, &reserving, &request(&reserving, at(1), claim)).await;

    let now = at(500);
    let all = h.intents.due_intents(now, 1_000).await.unwrap();
    for pair in all.windows(2) {
        assert!(pair[0].due_at <= pair[1].due_at, "due_intents out of order");
    }
    for intent in &all {
        assert!(
            !intent.status.is_terminal(),
            "due_intents returned a terminal intent"
        );
        assert!(
            intent.due_at.is_some_and(|d| d <= now),
            "not due yet: {intent:?}"
        );
    }
    let mine: Vec<&IntentId> = [&w100, &w200, &reserving, &w300, &future, &closed]
        .iter()
        .map(|i| &i.intent_id)
        .collect();
    let seen: Vec<&IntentId> = all
        .iter()
        .map(|i| &i.intent_id)
        .filter(|id| mine.contains(id))
        .collect();
    assert_eq!(
        seen,
        vec![
            &w100.intent_id,
            &w200.intent_id,
            &reserving.intent_id,
            &w300.intent_id
        ],
        "due intents of this case, in due order, without the future and the terminal one"
    );

    let two = h.intents.due_intents(now, 2).await.unwrap();
    assert_eq!(two.as_slice(), &all[..2.min(all.len())], "limit 2");
    assert_eq!(h.intents.due_intents(now, 0).await.unwrap(), vec![]);
    let early = h.intents.due_intents(at(150), 1_000).await.unwrap();
    assert!(early.iter().any(|i| i.intent_id == w100.intent_id));
    assert!(!early.iter().any(|i| i.intent_id == w200.intent_id));
}
