//! The open-intent index (`Intents::open_on_seat`) and the batch read of intents
//! (`Intents::intents`): what a won seat's fan-out closes lost races from, and how their
//! messages find them closed.

#[allow(unused_imports)]
use super::fixtures::*;
#[allow(unused_imports)]
use super::*;

/// The index may lag its items (a GSI on DynamoDB): read until it shows `want`, a bounded
/// number of times, and return what it last showed.
async fn open_ids_eventually(h: &Harness, seat: &SeatId, want: &[&IntentId]) -> Vec<IntentId> {
    let mut last = Vec::new();
    for _ in 0..20 {
        let mut ids: Vec<IntentId> = h
            .intents
            .open_on_seat(seat, 100)
            .await
            .unwrap()
            .into_iter()
            .map(|i| i.intent_id)
            .collect();
        ids.sort();
        let mut wanted: Vec<IntentId> = want.iter().map(|&i| i.clone()).collect();
        wanted.sort();
        if ids == wanted {
            return ids;
        }
        last = ids;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    last
}

async fn assert_open(h: &Harness, seat: &SeatId, want: &[&IntentId], what: &str) {
    let mut wanted: Vec<IntentId> = want.iter().map(|&i| i.clone()).collect();
    wanted.sort();
    assert_eq!(open_ids_eventually(h, seat, want).await, wanted, "{what}");
}

pub async fn the_open_index_holds_a_seats_requested_intents_and_nothing_else(h: &Harness) {
    let now = h.now();
    let seat = new_seat();
    let a = requested_on(h, &seat).await;
    let b = requested_on(h, &seat).await;
    let c = requested_on(h, &seat).await;
    let elsewhere = requested_on(h, &new_seat()).await;
    let all = [&a.intent_id, &b.intent_id, &c.intent_id];
    assert_open(
        h,
        &seat,
        &all,
        "the seat's three REQUESTED intents, not the other seat's",
    )
    .await;
    let copies = h.intents.open_on_seat(&seat, 100).await.unwrap();
    assert!(
        copies.contains(&a),
        "the index's copy is the intent as stored: {copies:?}"
    );
    assert_eq!(h.intents.open_on_seat(&seat, 2).await.unwrap().len(), 2);
    assert_eq!(h.intents.open_on_seat(&seat, 0).await.unwrap(), vec![]);

    // A claim takes `a` out; a busy upstream's release puts it back; a lost race takes `b` out
    // for good; a win takes `a` out again.
    let claimed = applied(h, &a, &request(&a, now, claim(now))).await;
    assert_open(
        h,
        &seat,
        &[&b.intent_id, &c.intent_id],
        "a RESERVING intent is not open",
    )
    .await;
    let release = Transition::Release {
        token: claimed.fencing_token,
        back_to: BackTo::Requested,
        next_attempt_at: now,
        due_at: now,
    };
    let back = applied(h, &claimed, &request(&claimed, now, release)).await;
    assert_open(h, &seat, &all, "put back in line, it is open again").await;
    applied(h, &b, &request(&b, now, Transition::lost_race())).await;
    let claimed = applied(h, &back, &request(&back, now, claim(now))).await;
    applied(
        h,
        &claimed,
        &request(&claimed, now, complete(claimed.fencing_token, None)),
    )
    .await;
    assert_open(
        h,
        &seat,
        &[&c.intent_id],
        "closed and won intents leave the index",
    )
    .await;
    assert_open(
        h,
        &elsewhere.seat_id,
        &[&elsewhere.intent_id],
        "the other seat's own",
    )
    .await;
}

pub async fn a_batch_read_returns_the_stored_intents_and_leaves_unknown_ids_out(h: &Harness) {
    let seat = new_seat();
    let a = requested_on(h, &seat).await;
    let b = requested_on(h, &seat).await;
    let unknown = IntentId::generate();
    let mut found = h
        .intents
        .intents(&[a.intent_id.clone(), unknown, b.intent_id.clone()])
        .await
        .unwrap();
    found.sort_by(|x, y| x.intent_id.cmp(&y.intent_id));
    let mut want = vec![a, b];
    want.sort_by(|x, y| x.intent_id.cmp(&y.intent_id));
    assert_eq!(found, want);
    assert_eq!(h.intents.intents(&[]).await.unwrap(), vec![]);
    let too_many: Vec<IntentId> = (0..=seatgate::ports::MAX_BATCH_READ)
        .map(|_| IntentId::generate())
        .collect();
    assert!(matches!(
        h.intents.intents(&too_many).await,
        Err(StoreError::Unavailable(_))
    ));
}
