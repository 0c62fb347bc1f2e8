//! What rides in another write: a confirm's and a booking's rate window, a settlement's seat
//! reading, and the
//! caller's copy of an intent that a transition may pin instead of reading it first. Each saves
//! DynamoDB a request per intent; these cases hold every backend to the same answers, so the
//! saving can never change what a caller sees.

#[allow(unused_imports)]
use super::fixtures::*;
#[allow(unused_imports)]
use super::*;
use seatgate::domain::{Admission, LimitedRoute, RateWindow};

/// A confirm counts in its user's window in the same write: the window admits `limit` confirms,
/// the next is refused `RateLimited` having written nothing (its action still prepared, no
/// intent, the counter unmoved), and a replay of a confirmed action still answers with its
/// intent: the action's own refusals come first.
pub async fn a_confirm_counts_in_its_rate_window_and_a_spent_window_refuses_it_unwritten(
    h: &Harness,
) {
    let limit = seatgate::domain::RateLimit {
        requests: 2,
        window: Duration::from_secs(60),
    };
    let user = new_user();
    let now = h.now();
    let admission = Admission {
        window: RateWindow::at(&user, LimitedRoute::Confirm, now, &limit),
        limit: limit.requests,
    };
    let mut confirmed = Vec::new();
    for i in 0..limit.requests {
        let action = prepared(h, &user, &new_seat());
        h.actions.put_action(&action).await.unwrap();
        let c = confirmation_of(&action, &user, now).admitted_by(admission.clone());
        h.actions
            .confirm(&c)
            .await
            .unwrap_or_else(|e| panic!("confirm {i} is within the window: {e:?}"));
        confirmed.push(c);
    }
    let over = prepared(h, &user, &new_seat());
    h.actions.put_action(&over).await.unwrap();
    let c = confirmation_of(&over, &user, now).admitted_by(admission.clone());
    assert_eq!(
        confirm_refusal(h.actions.confirm(&c).await),
        ConfirmRefusal::RateLimited
    );
    assert_eq!(
        h.actions.get_action(&over.action_id).await.unwrap(),
        Some(over.clone()),
        "a refused confirm changed its action"
    );
    assert_eq!(
        h.intents.get_intent(&c.intent.intent_id).await.unwrap(),
        None,
        "a refused confirm wrote its intent"
    );
    let replay = Confirmation {
        intent: Intent {
            intent_id: IntentId::generate(),
            ..confirmed[0].intent.clone()
        },
        ..confirmed[0].clone()
    };
    assert_eq!(
        confirm_refusal(h.actions.confirm(&replay).await),
        ConfirmRefusal::AlreadyConfirmed(confirmed[0].intent.intent_id.clone()),
        "a replay answers with its intent, even with the window spent"
    );
    // The counter is the one `RateLimits::take` counts: spent, and unmoved by the refusals.
    assert_counted_exactly(h, &admission, "confirms").await;
    // Without an admission nothing is counted or refused.
    let free = prepared(h, &user, &new_seat());
    h.actions.put_action(&free).await.unwrap();
    h.actions
        .confirm(&confirmation_of(&free, &user, now))
        .await
        .unwrap();
}

/// A booking counts in its user's window in the same transaction: the window admits `limit`
/// bookings, the next is refused `RateLimited` having written nothing (the shard and the user's
/// bookings unmoved); a booking refused for another reason (a short shard, checked first) spends
/// nothing of the window; and a booking without an admission is neither counted nor refused.
pub async fn a_booking_counts_in_its_rate_window_and_a_spent_window_refuses_it_unwritten(
    h: &Harness,
) {
    let limit = seatgate::domain::RateLimit {
        requests: 2,
        window: Duration::from_secs(60),
    };
    let f = &h.flights;
    let now = h.now();
    let flight = new_flight(10, None, 1, now);
    f.create_flight(&flight).await.unwrap();
    let user = new_user();
    let admission = Admission {
        window: RateWindow::at(&user, LimitedRoute::Book, now, &limit),
        limit: limit.requests,
    };
    let short = booking_of(&flight, &user, 11, 0, now);
    assert_eq!(
        f.book(&short, None, None, Some(&admission)).await,
        Err(BookRefusal::ShardShort { available: 10 }),
    );
    for i in 0..limit.requests {
        f.book(
            &booking_of(&flight, &user, 1, 0, now),
            None,
            None,
            Some(&admission),
        )
        .await
        .unwrap_or_else(|e| panic!("booking {i} is within the window: {e:?}"));
    }
    let over = booking_of(&flight, &user, 1, 0, now);
    assert_eq!(
        f.book(&over, None, None, Some(&admission)).await,
        Err(BookRefusal::RateLimited)
    );
    assert_eq!(
        f.book(&short, None, None, Some(&admission)).await,
        Err(BookRefusal::ShardShort { available: 8 }),
        "the shard's refusal comes before the window's"
    );
    let inv = f.inventory(&flight.flight_id).await.unwrap().unwrap();
    assert_eq!(inv.available(), 8, "a refused booking took seats");
    let mine = crate::paging::all_bookings(f.as_ref(), &user)
        .await
        .unwrap();
    assert_eq!(mine.len(), 2, "a refused booking was stored: {mine:?}");
    assert!(!mine.iter().any(|b| b.booking_id == over.booking_id));
    // The counter is the one `RateLimits::take` counts: spent by exactly the two admitted.
    assert_counted_exactly(h, &admission, "bookings").await;
    // Without an admission nothing is counted or refused.
    f.book(&booking_of(&flight, &user, 1, 0, now), None, None, None)
        .await
        .unwrap();
}

/// `admission`'s window holds exactly `admission.limit` counted `what`, read through the counter
/// `RateLimits::take` uses: a take at that limit is refused (none missed), one at the limit plus
/// one is admitted (no refusal counted).
async fn assert_counted_exactly(h: &Harness, admission: &Admission, what: &str) {
    let take = |limit| h.rate_limits.take(&admission.window, limit);
    assert!(
        !take(admission.limit).await.unwrap(),
        "the window missed admitted {what}"
    );
    assert!(
        take(admission.limit + 1).await.unwrap(),
        "the window counted refused {what}"
    );
}

/// A transition decides on the stored intent whatever copy the caller pinned: a stale copy (the
/// version moved since) still applies when the stored state admits it, a copy that would refuse
/// does not refuse when the stored state admits, and a refusal carries the stored state, never
/// the copy. Another intent's copy is ignored.
pub async fn a_transition_decides_on_the_stored_intent_whatever_copy_it_pinned(h: &Harness) {
    let intent = requested_intent(h).await;
    let t = h.now();
    // Stale: the claim moved the version; the settlement names the pre-claim copy.
    let claimed = applied(h, &intent, &request(&intent, t, claim(t))).await;
    let settle = request(&claimed, t, complete(claimed.fencing_token, None)).seen_as(&intent);
    let done = applied(h, &claimed, &settle).await;
    // A copy that would refuse (terminal) on a stored state that admits.
    let other = requested_intent(h).await;
    let close = TransitionRequest::new(other.intent_id.clone(), t, Transition::lost_race())
        .seen_as(&Intent {
            intent_id: other.intent_id.clone(),
            ..done.clone()
        });
    applied(h, &other, &close).await;
    // A copy that admits on a stored state that refuses: refused with the stored state.
    let again = TransitionRequest::new(intent.intent_id.clone(), t, Transition::lost_race())
        .seen_as(&intent);
    refused(h, &done, &again).await;
    // Another intent's copy is no copy at all.
    let third = requested_intent(h).await;
    let mismatched = TransitionRequest::new(third.intent_id.clone(), t, Transition::lost_race())
        .seen_as(&intent);
    assert_eq!(mismatched.seen(), None);
    applied(h, &third, &mismatched).await;
}

/// A settlement's reading is recorded by the same write, unless the cache holds a newer one: the
/// settlement then applies anyway and the newer reading stays.
pub async fn a_settlement_records_its_reading_unless_a_newer_one_is_there(h: &Harness) {
    let t = h.now();
    let seat = new_seat();
    let key = ReadKey::Seat(seat.clone());
    let first = requested_on(h, &seat).await;
    let claimed = applied(h, &first, &request(&first, t, claim(t))).await;
    let taken = Reading::seat(seat.clone(), false, Millis(t.0 + 5));
    let settle =
        request(&claimed, t, complete(claimed.fencing_token, None)).recording(taken.clone());
    applied(h, &claimed, &settle).await;
    assert_eq!(
        h.readings
            .entry(&key)
            .await
            .unwrap()
            .and_then(|e| e.reading),
        Some(taken.clone()),
        "the settlement did not record its reading"
    );

    let newer = Reading::seat(seat.clone(), true, Millis(t.0 + 50));
    assert!(h.readings.record(&newer).await.unwrap());
    let second = requested_on(h, &seat).await;
    let claimed = applied(h, &second, &request(&second, t, claim(t))).await;
    let stale = Reading::seat(seat.clone(), false, Millis(t.0 + 10));
    let settle = request(&claimed, t, complete(claimed.fencing_token, None)).recording(stale);
    applied(h, &claimed, &settle).await;
    assert_eq!(
        h.readings
            .entry(&key)
            .await
            .unwrap()
            .and_then(|e| e.reading),
        Some(newer),
        "an older reading replaced a newer one"
    );
}
