//! Fixtures: unique ids, the actions and intents cases start from, and the checks that compare a
//! port's answer with the reference semantics.

#[allow(unused_imports)]
use super::*;

pub(super) fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

pub(super) fn new_seat() -> SeatId {
    SeatId::parse(&unique("seat")).expect("a valid seat id")
}

pub(super) fn new_user() -> UserId {
    UserId::parse(&unique("user")).expect("a valid user id")
}

pub(super) const ACTION_TTL: Duration = Duration::from_secs(300);

pub(super) fn prepared(h: &Harness, user: &UserId, seat: &SeatId) -> Action {
    Action::prepare(
        user.clone(),
        ActionKind::ReserveSeat,
        seat.clone(),
        h.now(),
        ACTION_TTL,
    )
}

pub(super) fn confirmation_of(action: &Action, user: &UserId, now: Millis) -> Confirmation {
    Confirmation::of(
        action,
        IntentId::generate(),
        user,
        now,
        now.plus(Duration::from_secs(60)),
    )
}

pub(super) fn wait_consent(intent: &Intent) -> ConsentRecord {
    ConsentRecord {
        intent_id: intent.intent_id.clone(),
        user_id: intent.user_id.clone(),
        seat_id: intent.seat_id.clone(),
        kind: IntentKind::Wait,
        action_id: None,
        consented_at: intent.created_at,
    }
}

/// A stored REQUESTED intent, made the way the API makes one.
pub(super) async fn requested_intent(h: &Harness) -> Intent {
    requested_on(h, &new_seat()).await
}

/// A stored REQUESTED intent for `seat`.
pub(super) async fn requested_on(h: &Harness, seat: &SeatId) -> Intent {
    let user = new_user();
    let action = prepared(h, &user, seat);
    h.actions.put_action(&action).await.expect("put_action");
    let c = confirmation_of(&action, &user, h.now());
    h.actions.confirm(&c).await.expect("confirm");
    c.intent
}

/// A stored WAITING_FOR_SEAT intent, due at `now`, with the given deadline.
pub(super) async fn waiting_intent(h: &Harness, deadline: Millis) -> Intent {
    let intent = Intent::waiting(new_user(), new_seat(), deadline, h.now());
    h.intents
        .register_wait(&intent, &wait_consent(&intent))
        .await
        .expect("register_wait");
    intent
}

pub(super) fn request(intent: &Intent, now: Millis, transition: Transition) -> TransitionRequest {
    TransitionRequest::on(intent, now, transition)
}

pub(super) fn claim(now: Millis) -> Transition {
    Transition::Claim {
        lease_until: now.plus(Duration::from_secs(10)),
        due_at: now.plus(Duration::from_secs(12)),
    }
}

pub(super) fn complete(token: u64, suppress: Option<Suppression>) -> Transition {
    Transition::Complete {
        token,
        status: Terminal::Succeeded,
        charge_id: Some("charge-1".into()),
        reason: Reason::Reserved,
        suppress,
    }
}

/// Applies `req` through the port and checks it against the reference semantics on `current`
/// (the state the caller knows is stored). Returns the new state.
pub(super) async fn applied(h: &Harness, current: &Intent, req: &TransitionRequest) -> Intent {
    let expected = current
        .apply(req)
        .unwrap_or_else(|| panic!("test bug: {:?} does not apply", req.transition));
    let got =
        h.intents.transition(req).await.unwrap_or_else(|e| {
            panic!("{:?} on {:?} failed: {e:?}", req.transition, current.status)
        });
    assert_eq!(
        got, expected,
        "transition result differs from Intent::apply"
    );
    assert_eq!(
        h.intents.get_intent(&current.intent_id).await.unwrap(),
        Some(expected.clone()),
        "stored intent differs from the returned one"
    );
    expected
}

/// Checks `req` is refused with exactly `current` as the state seen, and nothing changed.
pub(super) async fn refused(h: &Harness, current: &Intent, req: &TransitionRequest) {
    assert!(
        current.apply(req).is_none(),
        "test bug: {:?} would apply",
        req.transition
    );
    match h.intents.transition(req).await {
        Err(TransitionError::Refused(seen)) => assert_eq!(*seen, *current, "refusal's state"),
        other => panic!(
            "{:?} on {:?}: expected Refused(current), got {other:?}",
            req.transition, current.status
        ),
    }
    assert_eq!(
        h.intents.get_intent(&current.intent_id).await.unwrap(),
        Some(current.clone()),
        "a refused transition changed the intent"
    );
}

pub(super) fn confirm_refusal(result: Result<(), ConfirmError>) -> ConfirmRefusal {
    match result {
        Err(ConfirmError::Refused(r)) => r,
        other => panic!("expected a confirm refusal, got {other:?}"),
    }
}

/// Nothing of a refused confirmation was written.
pub(super) async fn nothing_confirmed(h: &Harness, c: &Confirmation, action_before: &Action) {
    assert_eq!(
        h.actions.get_action(&c.action_id).await.unwrap().as_ref(),
        Some(action_before),
        "a refused confirm changed the action"
    );
    assert_eq!(
        h.intents.get_intent(&c.intent.intent_id).await.unwrap(),
        None,
        "a refused confirm wrote the intent"
    );
    assert_eq!(
        h.intents.get_consent(&c.intent.intent_id).await.unwrap(),
        None,
        "a refused confirm wrote the consent"
    );
}
