//! A seat's claim: claiming an intent claims its seat until a settlement releases it.

#[allow(unused_imports)]
use super::fixtures::*;
#[allow(unused_imports)]
use super::*;

pub async fn a_claim_keeps_its_seat_until_a_settlement_releases_it(h: &Harness) {
    let now = h.now();
    let seat = new_seat();
    let intent = requested_on(h, &seat).await;
    assert_eq!(h.intents.seat_claim(&seat).await.unwrap(), None);
    let claimed = applied(h, &intent, &request(&intent, now, claim(now))).await;
    let claim = h
        .intents
        .seat_claim(&seat)
        .await
        .unwrap()
        .expect("a claim keeps its seat");
    assert_eq!(
        (claim.seat_id.clone(), claim.intent_id.clone(), claim.since),
        (seat.clone(), intent.intent_id.clone(), now)
    );
    // A lease running out does not release it: only a settlement does.
    let later = now.plus(Duration::from_secs(3600));
    assert_eq!(h.intents.seat_claim(&seat).await.unwrap(), Some(claim));
    applied(
        h,
        &claimed,
        &request(&claimed, later, complete(claimed.fencing_token, None)),
    )
    .await;
    assert_eq!(
        h.intents.seat_claim(&seat).await.unwrap(),
        None,
        "settled: released"
    );
}

pub async fn a_claim_on_a_seat_another_intent_claimed_is_refused(h: &Harness) {
    let now = h.now();
    let seat = new_seat();
    let first = requested_on(h, &seat).await;
    let second = requested_on(h, &seat).await;
    let claimed = applied(h, &first, &request(&first, now, claim(now))).await;
    match h
        .intents
        .transition(&request(&second, now, claim(now)))
        .await
    {
        Err(TransitionError::SeatClaimed(claim)) => {
            assert_eq!(
                (claim.seat_id, claim.intent_id),
                (seat.clone(), first.intent_id.clone())
            )
        }
        other => panic!("expected SeatClaimed, got {other:?}"),
    }
    assert_eq!(
        h.intents.get_intent(&second.intent_id).await.unwrap(),
        Some(second.clone()),
        "a claim refused for the seat's claim wrote nothing"
    );
    // An intent that is not claimable anyway hears about itself first, not about the seat.
    let settled = applied(
        h,
        &claimed,
        &request(&claimed, now, complete(claimed.fencing_token, None)),
    )
    .await;
    refused(h, &settled, &request(&first, now, claim(now))).await;
    // Released: the next in line gets it.
    applied(h, &second, &request(&second, now, claim(now))).await;
    let claim = h
        .intents
        .seat_claim(&seat)
        .await
        .unwrap()
        .expect("claimed by the second");
    assert_eq!(claim.intent_id, second.intent_id);
}

pub async fn claims_and_settlements_must_name_the_intents_seat(h: &Harness) {
    let now = h.now();
    let intent = requested_intent(h).await;
    let unnamed = TransitionRequest::new(intent.intent_id.clone(), now, claim(now));
    refused(h, &intent, &unnamed).await;
    let elsewhere =
        TransitionRequest::on_seat(intent.intent_id.clone(), new_seat(), now, claim(now));
    refused(h, &intent, &elsewhere).await;
    assert_eq!(h.intents.seat_claim(&intent.seat_id).await.unwrap(), None);
    let claimed = applied(h, &intent, &request(&intent, now, claim(now))).await;
    let settle = TransitionRequest::new(
        intent.intent_id.clone(),
        now,
        complete(claimed.fencing_token, None),
    );
    refused(h, &claimed, &settle).await;
    assert!(
        h.intents
            .seat_claim(&intent.seat_id)
            .await
            .unwrap()
            .is_some(),
        "still claimed"
    );
}

pub async fn release_puts_an_attempt_back_in_line_and_frees_the_seat(h: &Harness) {
    let now = h.now();
    let seat = new_seat();
    let intent = requested_on(h, &seat).await;
    let claimed = applied(h, &intent, &request(&intent, now, claim(now))).await;
    let retry_at = now.plus(Duration::from_secs(5));
    let release = Transition::Release {
        token: claimed.fencing_token,
        back_to: BackTo::Requested,
        next_attempt_at: retry_at,
        due_at: retry_at,
    };
    let back = applied(h, &claimed, &request(&claimed, now, release)).await;
    assert_eq!(back.status, IntentStatus::Requested);
    assert_eq!(
        (back.next_attempt_at, back.due_at),
        (Some(retry_at), Some(retry_at))
    );
    assert_eq!(back.reason, Some(Reason::UpstreamBusy));
    assert_eq!(h.intents.seat_claim(&seat).await.unwrap(), None, "released");
    // Not claimable before its retry time; claimable from then on, by its new token.
    let early = retry_at.minus(Duration::from_millis(1));
    refused(h, &back, &request(&back, early, claim(early))).await;
    let again = applied(h, &back, &request(&back, retry_at, claim(retry_at))).await;
    assert_eq!(again.fencing_token, claimed.fencing_token + 1);
}
