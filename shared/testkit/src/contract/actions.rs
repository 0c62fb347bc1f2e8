//! Actions: put, get, and the confirm with its refusal order (and its differential case against
//! `Action::confirm`).

#[allow(unused_imports)]
use super::fixtures::*;
#[allow(unused_imports)]
use super::*;

pub async fn put_and_get_action(h: &Harness) {
    let action = prepared(h, &new_user(), &new_seat());
    assert_eq!(h.actions.get_action(&action.action_id).await.unwrap(), None);
    h.actions.put_action(&action).await.unwrap();
    assert_eq!(
        h.actions.get_action(&action.action_id).await.unwrap(),
        Some(action.clone())
    );
    assert_eq!(
        h.actions.get_action(&ActionId::generate()).await.unwrap(),
        None
    );
}

pub async fn put_action_over_existing_id_fails(h: &Harness) {
    let first = prepared(h, &new_user(), &new_seat());
    h.actions.put_action(&first).await.unwrap();
    let mut second = prepared(h, &new_user(), &new_seat());
    second.action_id = first.action_id.clone();
    let result = h.actions.put_action(&second).await;
    assert!(
        matches!(result, Err(StoreError::Unavailable(_))),
        "put over an existing action id: expected Unavailable, got {result:?}"
    );
    assert_eq!(
        h.actions.get_action(&first.action_id).await.unwrap(),
        Some(first),
        "the first action was overwritten"
    );
}

pub async fn confirm_writes_intent_and_consent(h: &Harness) {
    let user = new_user();
    let action = prepared(h, &user, &new_seat());
    h.actions.put_action(&action).await.unwrap();
    let c = confirmation_of(&action, &user, h.now().plus(Duration::from_secs(1)));
    h.actions.confirm(&c).await.unwrap();

    let intent = h
        .intents
        .get_intent(&c.intent.intent_id)
        .await
        .unwrap()
        .expect("the confirmed intent");
    assert_eq!(intent, c.intent);
    assert_eq!(intent.status, IntentStatus::Requested);
    assert_eq!(intent.version, 1);
    assert_eq!(intent.fencing_token, 0);
    assert_eq!(
        h.intents.get_consent(&c.intent.intent_id).await.unwrap(),
        Some(c.consent.clone())
    );
    let mut expected = action.clone();
    expected.status = ActionStatus::Confirmed;
    expected.intent_id = Some(c.intent.intent_id.clone());
    assert_eq!(
        h.actions.get_action(&action.action_id).await.unwrap(),
        Some(expected)
    );
}

pub async fn confirm_twice_is_already_confirmed(h: &Harness) {
    let user = new_user();
    let action = prepared(h, &user, &new_seat());
    h.actions.put_action(&action).await.unwrap();
    let first = confirmation_of(&action, &user, h.now());
    h.actions.confirm(&first).await.unwrap();
    let after_first = h.actions.get_action(&action.action_id).await.unwrap();

    let again = confirmation_of(&action, &user, h.now().plus(Duration::from_secs(1)));
    assert_eq!(
        confirm_refusal(h.actions.confirm(&again).await),
        ConfirmRefusal::AlreadyConfirmed(first.intent.intent_id.clone())
    );
    assert_eq!(
        h.intents.get_intent(&again.intent.intent_id).await.unwrap(),
        None
    );
    assert_eq!(
        h.intents
            .get_consent(&again.intent.intent_id)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        h.actions.get_action(&action.action_id).await.unwrap(),
        after_first
    );

    // Still "already confirmed" once the action has expired: the caller learns its intent.
    let late = confirmation_of(
        &action,
        &user,
        action.expires_at.plus(Duration::from_secs(1)),
    );
    assert_eq!(
        confirm_refusal(h.actions.confirm(&late).await),
        ConfirmRefusal::AlreadyConfirmed(first.intent.intent_id.clone())
    );
}

pub async fn confirm_by_another_user_is_not_found(h: &Harness) {
    let owner = new_user();
    let action = prepared(h, &owner, &new_seat());
    h.actions.put_action(&action).await.unwrap();

    let intruder = new_user();
    let c = confirmation_of(&action, &intruder, h.now());
    assert_eq!(
        confirm_refusal(h.actions.confirm(&c).await),
        ConfirmRefusal::NotFound
    );
    nothing_confirmed(h, &c, &action).await;

    // Once the owner confirmed, another user still sees nothing, not "already confirmed".
    h.actions
        .confirm(&confirmation_of(&action, &owner, h.now()))
        .await
        .unwrap();
    let c = confirmation_of(&action, &intruder, h.now());
    assert_eq!(
        confirm_refusal(h.actions.confirm(&c).await),
        ConfirmRefusal::NotFound
    );
}

pub async fn confirm_expired_is_expired(h: &Harness) {
    let user = new_user();
    let action = prepared(h, &user, &new_seat());
    h.actions.put_action(&action).await.unwrap();

    // Expired at exactly `expires_at` (`Action::is_expired`).
    let c = confirmation_of(&action, &user, action.expires_at);
    assert_eq!(
        confirm_refusal(h.actions.confirm(&c).await),
        ConfirmRefusal::Expired
    );
    nothing_confirmed(h, &c, &action).await;

    // The owner check comes first.
    let c = confirmation_of(&action, &new_user(), action.expires_at);
    assert_eq!(
        confirm_refusal(h.actions.confirm(&c).await),
        ConfirmRefusal::NotFound
    );

    // A millisecond earlier it was still confirmable.
    let c = confirmation_of(
        &action,
        &user,
        action.expires_at.minus(Duration::from_millis(1)),
    );
    h.actions.confirm(&c).await.unwrap();
}

pub async fn confirm_unknown_action_is_not_found(h: &Harness) {
    let user = new_user();
    let never_stored = prepared(h, &user, &new_seat());
    let c = confirmation_of(&never_stored, &user, h.now());
    assert_eq!(
        confirm_refusal(h.actions.confirm(&c).await),
        ConfirmRefusal::NotFound
    );
    assert_eq!(
        h.intents.get_intent(&c.intent.intent_id).await.unwrap(),
        None
    );
    assert_eq!(
        h.intents.get_consent(&c.intent.intent_id).await.unwrap(),
        None
    );
    assert_eq!(h.actions.get_action(&c.action_id).await.unwrap(), None);
}

/// The differential case for [`Action::confirm`]: every kind of stored action (missing, the
/// user's or another's, prepared or confirmed, live or expired) confirmed through the port
/// answers exactly as the rule answers on the action as it was, and writes what the rule says.
pub async fn confirms_answer_as_the_confirm_rule(h: &Harness) {
    let ttl = Duration::from_secs(10);
    let mut cases = vec![(None, false, false)];
    for mine in [true, false] {
        for confirmed in [false, true] {
            for expired in [false, true] {
                cases.push((Some(mine), confirmed, expired));
            }
        }
    }
    for (owner, confirmed, expired) in cases {
        let label = format!("mine {owner:?}, confirmed {confirmed}, expired {expired}");
        let me = new_user();
        let made_at = h.now();
        let action_id = match owner {
            None => ActionId::generate(),
            Some(mine) => {
                let owner = if mine { me.clone() } else { new_user() };
                let action = Action::prepare(
                    owner.clone(),
                    ActionKind::ReserveSeat,
                    new_seat(),
                    made_at,
                    ttl,
                );
                h.actions.put_action(&action).await.expect("put_action");
                if confirmed {
                    let c = confirmation_of(&action, &owner, made_at);
                    h.actions.confirm(&c).await.expect("the first confirm");
                }
                action.action_id
            }
        };
        let at = made_at.plus(if expired { ttl * 2 } else { ttl / 2 });
        let before = h.actions.get_action(&action_id).await.unwrap();
        let probe = Action {
            action_id: action_id.clone(),
            user_id: me.clone(),
            kind: ActionKind::ReserveSeat,
            seat_id: new_seat(),
            status: ActionStatus::Prepared,
            intent_id: None,
            created_at: made_at,
            expires_at: made_at.plus(ttl),
        };
        let c = confirmation_of(before.as_ref().unwrap_or(&probe), &me, at);
        let expected = Action::confirm(before.as_ref(), &me, &c.intent.intent_id, at)
            .map_err(ConfirmError::from);
        let got = h.actions.confirm(&c).await;
        match expected {
            Ok(action) => {
                assert_eq!(got, Ok(()), "{label}: the rule confirms");
                assert_eq!(
                    h.actions.get_action(&action_id).await.unwrap(),
                    Some(action),
                    "{label}: the stored action is the rule's"
                );
                assert_eq!(
                    h.intents.get_intent(&c.intent.intent_id).await.unwrap(),
                    Some(c.intent.clone()),
                    "{label}"
                );
            }
            Err(refusal) => {
                assert_eq!(got, Err(refusal), "{label}: the rule's refusal");
                if let Some(before) = &before {
                    nothing_confirmed(h, &c, before).await;
                }
            }
        }
    }
}
