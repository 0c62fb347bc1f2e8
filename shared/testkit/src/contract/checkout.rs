//! Checkout holds: creation against a shard (the booking's rule plus one live hold per user),
//! confirm, release, extension and lapse (each once, as the hold rule says), the due index, and
//! a confirm racing its own lapse, many times over, and a flight's holds listed by status.

#[allow(unused_imports)]
use super::fixtures::*;
use super::flights::new_flight;
#[allow(unused_imports)]
use super::*;
use seatgate::domain::{CheckoutHold, CheckoutTimes, HoldAction, HoldId, HoldRefusal, HoldStatus};
use seatgate::ports::{CreateHoldRefusal, ResolveHoldError};

/// A 10 s hold that may be extended to 25 s in all.
fn times() -> CheckoutTimes {
    CheckoutTimes::new(10, 25, 10).unwrap()
}

fn hold_of(flight: &Flight, user: &UserId, k: u32, shard: u32, now: Millis) -> CheckoutHold {
    CheckoutHold::new(
        HoldId::from_uuid(uuid::Uuid::now_v7()),
        flight.flight_id.clone(),
        user.clone(),
        k,
        shard,
        BookingId::generate(),
        &times(),
        now,
    )
}

/// The flight's (available, held, sold out), all shards.
pub(super) async fn counts(h: &Harness, flight: &Flight) -> (u32, u32, bool) {
    let inv = h
        .flights
        .inventory(&flight.flight_id)
        .await
        .unwrap()
        .unwrap();
    (inv.available(), inv.held(), inv.sold_out)
}

fn refusal(r: Result<CheckoutHold, ResolveHoldError>) -> HoldRefusal {
    match r {
        Err(ResolveHoldError::Refused(refusal)) => refusal,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

pub async fn a_hold_takes_seats_and_its_confirm_books_them_without_a_second_decrement(h: &Harness) {
    let now = h.now();
    let flight = new_flight(10, None, 1, now);
    h.flights.create_flight(&flight).await.unwrap();
    let user = new_user();
    let hold = hold_of(&flight, &user, 3, 0, now);
    h.holds.create_hold(&hold, None, None).await.unwrap();
    assert_eq!(counts(h, &flight).await, (7, 3, false));
    assert_eq!(
        h.holds.hold(&user, &hold.hold_id).await.unwrap(),
        Some(hold.clone())
    );
    assert_eq!(
        h.holds.hold(&new_user(), &hold.hold_id).await.unwrap(),
        None,
        "another user's hold is not found"
    );
    let at = Millis(now.0 + 9_999);
    let id = &hold.hold_id;
    let confirmed = h
        .holds
        .resolve_hold(&user, &flight.flight_id, id, HoldAction::Confirm, at)
        .await
        .unwrap();
    assert_eq!(
        Ok(confirmed.clone()),
        CheckoutHold::resolve(
            Some(&hold),
            Some(&user),
            &flight.flight_id,
            HoldAction::Confirm,
            at
        )
    );
    assert_eq!(
        counts(h, &flight).await,
        (7, 0, false),
        "held seats became booked"
    );
    let booking = confirmed.booking().unwrap();
    let bookings = crate::paging::all_bookings(&*h.flights, &user)
        .await
        .unwrap();
    assert_eq!(bookings, vec![booking]);
    // Confirmed once: a repeat and every other action answer the confirmed hold.
    for action in [
        HoldAction::Confirm,
        HoldAction::Release,
        HoldAction::Extend(times()),
    ] {
        let again = h
            .holds
            .resolve_hold(&user, &flight.flight_id, id, action, at)
            .await;
        assert_eq!(
            refusal(again),
            HoldRefusal::Confirmed(Box::new(confirmed.clone()))
        );
    }
    assert_eq!(counts(h, &flight).await, (7, 0, false));
    let page = h
        .holds
        .holds_of(&user, None, seatgate::domain::PageSize::new(5).unwrap())
        .await
        .unwrap();
    assert_eq!(page.items, vec![confirmed]);
    assert_eq!(page.next, None);
}

pub async fn a_release_or_a_lapse_gives_the_seats_back_once_and_clears_sold_out(h: &Harness) {
    let now = h.now();
    let flight = new_flight(3, None, 1, now);
    h.flights.create_flight(&flight).await.unwrap();
    let (me, you) = (new_user(), new_user());
    let mine = hold_of(&flight, &me, 3, 0, now);
    h.holds.create_hold(&mine, None, None).await.unwrap();
    assert!(h.flights.mark_sold_out(&flight.flight_id, 1).await.unwrap());
    assert_eq!(counts(h, &flight).await, (0, 3, true));
    let short = h
        .holds
        .create_hold(&hold_of(&flight, &you, 1, 0, now), None, None)
        .await;
    assert_eq!(short, Err(CreateHoldRefusal::ShardShort { available: 0 }));
    let f = &flight.flight_id;
    let released = h
        .holds
        .resolve_hold(&me, f, &mine.hold_id, HoldAction::Release, now)
        .await
        .unwrap();
    assert_eq!(released.status, HoldStatus::Released);
    assert_eq!(
        counts(h, &flight).await,
        (3, 0, false),
        "back on sale, mark cleared"
    );
    let again = h
        .holds
        .resolve_hold(&me, f, &mine.hold_id, HoldAction::Release, now)
        .await;
    assert_eq!(refusal(again), HoldRefusal::Released(Box::new(released)));
    assert_eq!(counts(h, &flight).await, (3, 0, false), "given back once");

    // Yours lapses: refused to confirm at its deadline, listed as due, given back once.
    let yours = hold_of(&flight, &you, 2, 0, now);
    h.holds.create_hold(&yours, None, None).await.unwrap();
    let deadline = yours.expires_at;
    assert!(
        h.holds
            .due_holds(Millis(deadline.0 - 1), 100)
            .await
            .unwrap()
            .iter()
            .all(|d| d.hold_id != yours.hold_id)
    );
    let due = h.holds.due_holds(deadline, 100).await.unwrap();
    assert!(due.contains(&yours), "due at its deadline: {due:?}");
    let late = h
        .holds
        .resolve_hold(&you, f, &yours.hold_id, HoldAction::Confirm, deadline)
        .await;
    assert_eq!(refusal(late), HoldRefusal::Expired(Box::new(yours.clone())));
    let early = h
        .holds
        .resolve_hold(
            &you,
            f,
            &yours.hold_id,
            HoldAction::Lapse,
            Millis(deadline.0 - 1),
        )
        .await;
    assert_eq!(refusal(early), HoldRefusal::NotDue);
    assert_eq!(counts(h, &flight).await, (1, 2, false));
    let lapsed = h
        .holds
        .resolve_hold(&you, f, &yours.hold_id, HoldAction::Lapse, deadline)
        .await
        .unwrap();
    assert_eq!(lapsed.status, HoldStatus::Lapsed);
    assert_eq!(counts(h, &flight).await, (3, 0, false));
    let twice = h
        .holds
        .resolve_hold(&you, f, &yours.hold_id, HoldAction::Lapse, deadline)
        .await;
    assert_eq!(refusal(twice), HoldRefusal::NotDue);
    assert!(
        h.holds
            .due_holds(deadline, 100)
            .await
            .unwrap()
            .iter()
            .all(|d| d.hold_id != yours.hold_id),
        "off the due index"
    );
    assert_eq!(counts(h, &flight).await, (3, 0, false), "lapsed once");
}

pub async fn one_live_hold_per_user_and_flight_and_holds_count_against_the_limit(h: &Harness) {
    let now = h.now();
    let flight = new_flight(20, Some(4), 1, now);
    h.flights.create_flight(&flight).await.unwrap();
    let max = flight.max_per_user;
    let me = new_user();
    let first = hold_of(&flight, &me, 3, 0, now);
    h.holds.create_hold(&first, max, None).await.unwrap();
    let second = h
        .holds
        .create_hold(&hold_of(&flight, &me, 1, 0, now), max, None)
        .await;
    assert_eq!(second, Err(CreateHoldRefusal::HoldExists));
    // The limit is checked before the live hold.
    let over = h
        .holds
        .create_hold(&hold_of(&flight, &me, 2, 0, now), max, None)
        .await;
    assert_eq!(over, Err(CreateHoldRefusal::LimitReached));
    // A booking counts with the hold's seats: 3 held + 2 > 4.
    let booking = super::flights::booking_of(&flight, &me, 2, 0, now);
    assert_eq!(
        h.flights.book(&booking, max, None, None).await,
        Err(BookRefusal::LimitReached)
    );
    h.holds
        .resolve_hold(
            &me,
            &flight.flight_id,
            &first.hold_id,
            HoldAction::Confirm,
            now,
        )
        .await
        .unwrap();
    // Confirmed: no live hold, but its 3 seats still count.
    let over = h
        .holds
        .create_hold(&hold_of(&flight, &me, 2, 0, now), max, None)
        .await;
    assert_eq!(over, Err(CreateHoldRefusal::LimitReached));
    let last = hold_of(&flight, &me, 1, 0, now);
    h.holds.create_hold(&last, max, None).await.unwrap();
    // Released: its seat no longer counts, and another hold may start.
    h.holds
        .resolve_hold(
            &me,
            &flight.flight_id,
            &last.hold_id,
            HoldAction::Release,
            now,
        )
        .await
        .unwrap();
    h.holds
        .create_hold(&hold_of(&flight, &me, 1, 0, now), max, None)
        .await
        .unwrap();
    // Another flight is another live hold.
    let other = new_flight(5, None, 1, now);
    h.flights.create_flight(&other).await.unwrap();
    h.holds
        .create_hold(&hold_of(&other, &me, 1, 0, now), None, None)
        .await
        .unwrap();
    assert_eq!(counts(h, &flight).await, (16, 1, false));
}

pub async fn an_extension_moves_the_deadline_and_the_due_index_with_it_up_to_the_maximum(
    h: &Harness,
) {
    let now = h.now();
    let flight = new_flight(5, None, 1, now);
    h.flights.create_flight(&flight).await.unwrap();
    let me = new_user();
    let hold = hold_of(&flight, &me, 1, 0, now);
    h.holds.create_hold(&hold, None, None).await.unwrap();
    let f = &flight.flight_id;
    let extend = |at: i64| {
        h.holds.resolve_hold(
            &me,
            f,
            &hold.hold_id,
            HoldAction::Extend(times()),
            Millis(now.0 + at),
        )
    };
    let once = extend(8_000).await.unwrap();
    assert_eq!(once.expires_at, Millis(now.0 + 18_000));
    let id = &hold.hold_id;
    let listed = |at: i64| async move {
        h.holds
            .due_holds(Millis(now.0 + at), 1_000)
            .await
            .unwrap()
            .iter()
            .any(|d| d.hold_id == *id)
    };
    assert!(!listed(10_000).await, "not due at its old deadline");
    assert!(listed(18_000).await);
    let capped = extend(17_000).await.unwrap();
    assert_eq!(
        capped.expires_at,
        Millis(now.0 + 25_000),
        "creation plus the maximum"
    );
    assert_eq!(
        refusal(extend(20_000).await),
        HoldRefusal::NotExtendable(Box::new(capped.clone()))
    );
    assert_eq!(
        refusal(extend(25_000).await),
        HoldRefusal::Expired(Box::new(capped.clone()))
    );
    assert_eq!(
        h.holds.hold(&me, &hold.hold_id).await.unwrap(),
        Some(capped)
    );
    assert_eq!(
        counts(h, &flight).await,
        (4, 1, false),
        "an extension moves no seats"
    );
}

/// A thousand holds, each confirmed and lapsed at once at its deadline's edges: the confirm
/// sees the hold live (one millisecond before), the lapse sees it due. Exactly one applies,
/// and the seats end up booked or back on sale, never both and never neither.
pub async fn a_confirm_racing_its_own_lapse_applies_exactly_once(h: &Harness) {
    const ROUNDS: usize = 1_000;
    const AT_ONCE: usize = 25;
    let now = h.now();
    let flight = new_flight(ROUNDS as u32, None, 1, now);
    h.flights.create_flight(&flight).await.unwrap();
    let mut booked = 0u32;
    let mut returned = 0u32;
    for chunk in 0..ROUNDS / AT_ONCE {
        let races: Vec<_> = (0..AT_ONCE)
            .map(|i| {
                let lapse_first = i % 2 == 1;
                let (holds, flight) = (h.holds.clone(), flight.clone());
                tokio::spawn(async move {
                    let user = new_user();
                    let hold = hold_of(&flight, &user, 1, 0, now);
                    holds.create_hold(&hold, None, None).await.unwrap();
                    let f = &flight.flight_id;
                    let confirm = retrying(|| {
                        holds.resolve_hold(
                            &user,
                            f,
                            &hold.hold_id,
                            HoldAction::Confirm,
                            Millis(hold.expires_at.0 - 1),
                        )
                    });
                    let lapse = retrying(|| {
                        holds.resolve_hold(
                            &user,
                            f,
                            &hold.hold_id,
                            HoldAction::Lapse,
                            hold.expires_at,
                        )
                    });
                    // Half the rounds start the lapse first: a backend that serialises its
                    // calls then shows both outcomes, one that does not races them.
                    let (confirm, lapse) = if lapse_first {
                        let (lapse, confirm) = tokio::join!(lapse, confirm);
                        (confirm, lapse)
                    } else {
                        tokio::join!(confirm, lapse)
                    };
                    let stored = holds.hold(&user, &hold.hold_id).await.unwrap().unwrap();
                    (confirm, lapse, stored)
                })
            })
            .collect();
        for race in races {
            let (confirm, lapse, stored) = race.await.unwrap();
            match (&confirm, &lapse) {
                (Ok(c), Err(ResolveHoldError::Refused(HoldRefusal::NotDue))) => {
                    assert_eq!(c.status, HoldStatus::Confirmed);
                    assert_eq!(stored.status, HoldStatus::Confirmed);
                    booked += 1;
                }
                (Err(ResolveHoldError::Refused(HoldRefusal::Expired(_))), Ok(l)) => {
                    assert_eq!(l.status, HoldStatus::Lapsed);
                    assert_eq!(stored.status, HoldStatus::Lapsed);
                    returned += 1;
                }
                other => panic!("chunk {chunk}: both or neither applied: {other:?}"),
            }
        }
    }
    let (available, held, _) = counts(h, &flight).await;
    assert_eq!(held, 0);
    assert_eq!(
        available, returned,
        "every lapsed seat back, no confirmed one"
    );
    assert_eq!(booked + returned, ROUNDS as u32);
    assert!(
        booked > 0 && returned > 0,
        "both outcomes raced: {booked} booked, {returned} returned"
    );
}

/// A resolution retried while the store says to retry (a conflict between the two racers).
async fn retrying<F, Fut>(call: F) -> Result<CheckoutHold, ResolveHoldError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<CheckoutHold, ResolveHoldError>>,
{
    // Bounded: a conflict means the other racer's write landed, so the next try decides.
    for _ in 0..20 {
        match call().await {
            Err(ResolveHoldError::Store(e)) if e.is_retryable() => continue,
            other => return other,
        }
    }
    call().await
}

/// Thousands of holders ([`Harness::holders`], hundreds at a time) on a flight with half as
/// many seats: each takes a hold (trying
/// every shard), then confirms it, releases it, extends and confirms it, or walks away and is
/// lapsed by two racing reapers. The books stay exact on every shard: booked + held + available
/// = capacity, nothing held once every hold is resolved, and every confirmed seat booked once.
pub async fn thousands_of_concurrent_holders_keep_the_books_exact(h: &Harness) {
    let holders = h.holders;
    let capacity = holders / 2;
    const SHARDS: u32 = 4;
    // In flight at once: an eighth of the holders (10 of DynamoDB Local's 80: with 100 at once
    // it answered 500s to concurrent transactions on one partition), at most 250.
    let at_once = (holders as usize / 8).clamp(1, 250);
    let now = h.now();
    let flight = new_flight(capacity, None, SHARDS, now);
    h.flights.create_flight(&flight).await.unwrap();
    let gate = Arc::new(tokio::sync::Semaphore::new(at_once));
    let tasks: Vec<_> = (0..holders)
        .map(|i| {
            let (holds, flight, gate) = (h.holds.clone(), flight.clone(), gate.clone());
            tokio::spawn(async move {
                let _turn = gate.acquire_owned().await.expect("the gate stays open");
                let user = new_user();
                let k = 1 + i % 2;
                let mut held = None;
                'shards: for s in 0..SHARDS {
                    let hold = hold_of(&flight, &user, k, (i + s) % SHARDS, now);
                    loop {
                        match holds.create_hold(&hold, None, None).await {
                            Ok(()) => {
                                held = Some(hold);
                                break 'shards;
                            }
                            Err(CreateHoldRefusal::ShardShort { .. }) => break,
                            Err(CreateHoldRefusal::Store(e)) if e.is_retryable() => continue,
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
                let hold = held?;
                let (f, id) = (&flight.flight_id, &hold.hold_id);
                let live = Millis(hold.expires_at.0 - 1);
                let outcome = match i % 4 {
                    0 => {
                        retrying(|| holds.resolve_hold(&user, f, id, HoldAction::Confirm, live))
                            .await
                    }
                    1 => {
                        retrying(|| holds.resolve_hold(&user, f, id, HoldAction::Release, now))
                            .await
                    }
                    2 => {
                        retrying(|| {
                            holds.resolve_hold(&user, f, id, HoldAction::Extend(times()), live)
                        })
                        .await
                        .unwrap();
                        retrying(|| holds.resolve_hold(&user, f, id, HoldAction::Confirm, live))
                            .await
                    }
                    // Walks away: lapsed below.
                    _ => return Some((hold, None)),
                };
                Some((hold, Some(outcome.unwrap().status)))
            })
        })
        .collect();
    let mut confirmed = 0u32;
    let mut walked_away = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            Some((hold, Some(HoldStatus::Confirmed))) => confirmed += hold.head_count,
            Some((_, Some(HoldStatus::Released))) => {}
            Some((hold, None)) => walked_away.push(hold),
            Some((_, Some(other))) => panic!("unexpected {other:?}"),
            None => {}
        }
    }
    let (available, held, _) = counts(h, &flight).await;
    let in_walked: u32 = walked_away.iter().map(|h| h.head_count).sum();
    assert_eq!(
        held, in_walked,
        "only the walked-away holds still hold seats"
    );
    assert_eq!(
        available + held + confirmed,
        capacity,
        "booked + held + available = capacity"
    );
    // Two reapers lapse every walked-away hold at once, past the longest deadline.
    let late = Millis(now.0 + 60_000);
    let lapse_all = || {
        let (holds, flight, walked) = (h.holds.clone(), flight.clone(), walked_away.clone());
        tokio::spawn(async move {
            let mut lapsed = 0u32;
            for hold in &walked {
                match retrying(|| {
                    holds.resolve_hold(
                        &hold.user_id,
                        &flight.flight_id,
                        &hold.hold_id,
                        HoldAction::Lapse,
                        late,
                    )
                })
                .await
                {
                    Ok(_) => lapsed += hold.head_count,
                    Err(ResolveHoldError::Refused(HoldRefusal::NotDue)) => {}
                    Err(e) => panic!("{e}"),
                }
            }
            lapsed
        })
    };
    let (a, b) = (lapse_all(), lapse_all());
    let lapsed = a.await.unwrap() + b.await.unwrap();
    assert_eq!(
        lapsed, in_walked,
        "each walked-away hold lapsed once between the two reapers"
    );
    let (available, held, _) = counts(h, &flight).await;
    assert_eq!(held, 0);
    assert_eq!(available + confirmed, capacity);
    assert!(confirmed > 0 && !walked_away.is_empty());
}

/// A flight's holds list by status, by shard then id, page after page, whatever order they were
/// made and resolved in; another flight's holds never show, and a resolved hold leaves its old
/// status's listing for its new one.
pub async fn a_flights_holds_list_by_status_in_shard_then_id_order_page_by_page(h: &Harness) {
    use seatgate::domain::{FlightHoldKey, PageSize};
    let now = h.now();
    let flight = new_flight(12, None, 3, now);
    let other = new_flight(2, None, 1, now);
    h.flights.create_flight(&flight).await.unwrap();
    h.flights.create_flight(&other).await.unwrap();
    let mut made = Vec::new();
    for shard in [2, 0, 1, 0, 2, 1, 2, 0] {
        let user = new_user();
        let hold = hold_of(&flight, &user, 1, shard, now);
        h.holds.create_hold(&hold, None, None).await.unwrap();
        made.push(hold);
    }
    let elsewhere = hold_of(&other, &new_user(), 1, 0, now);
    h.holds.create_hold(&elsewhere, None, None).await.unwrap();
    let listed = |status: HoldStatus, size: u16| {
        let flight = flight.clone();
        async move {
            crate::paging::all_flight_holds(
                &*h.holds,
                &flight,
                status,
                PageSize::new(size).unwrap(),
            )
            .await
            .unwrap()
        }
    };
    let in_order = |mut holds: Vec<CheckoutHold>| {
        holds.sort_by_key(FlightHoldKey::of);
        holds
    };
    assert_eq!(listed(HoldStatus::Held, 3).await, in_order(made.clone()));
    assert_eq!(listed(HoldStatus::Lapsed, 3).await, Vec::new());

    // Resolve some: two lapse (shards 2 and 0), one is confirmed, one released.
    let deadline = Millis(now.0 + 10_000);
    let mut resolved = Vec::new();
    for (i, action, at) in [
        (0, HoldAction::Lapse, deadline),
        (3, HoldAction::Lapse, deadline),
        (5, HoldAction::Confirm, now),
        (6, HoldAction::Release, now),
    ] {
        let hold = &made[i];
        let done = h
            .holds
            .resolve_hold(&hold.user_id, &flight.flight_id, &hold.hold_id, action, at)
            .await
            .unwrap();
        resolved.push((i, done));
    }
    let of = |status: HoldStatus| {
        in_order(
            resolved
                .iter()
                .filter(|(_, r)| r.status == status)
                .map(|(_, r)| r.clone())
                .collect(),
        )
    };
    let still_held = in_order(
        made.iter()
            .enumerate()
            .filter(|(i, _)| !resolved.iter().any(|(j, _)| j == i))
            .map(|(_, hold)| hold.clone())
            .collect(),
    );
    for size in [1, 2, 50] {
        assert_eq!(
            listed(HoldStatus::Held, size).await,
            still_held,
            "page size {size}"
        );
        let lapsed = listed(HoldStatus::Lapsed, size).await;
        assert_eq!(lapsed, of(HoldStatus::Lapsed), "page size {size}");
        assert_eq!(lapsed.len(), 2);
    }
    assert_eq!(
        listed(HoldStatus::Confirmed, 1).await,
        of(HoldStatus::Confirmed)
    );
    assert_eq!(
        listed(HoldStatus::Released, 1).await,
        of(HoldStatus::Released)
    );
    // A cursor past the last hold of a shard goes on with the next shard's.
    let first = h
        .holds
        .flight_holds(&flight, HoldStatus::Held, None, PageSize::new(1).unwrap())
        .await
        .unwrap();
    let after = first.next.clone().expect("more than one held");
    let rest = h
        .holds
        .flight_holds(
            &flight,
            HoldStatus::Held,
            Some(&after),
            PageSize::new(50).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(rest.next, None);
    assert_eq!(
        first
            .items
            .into_iter()
            .chain(rest.items)
            .collect::<Vec<_>>(),
        still_held
    );
    let elsewhere_listed = crate::paging::all_flight_holds(
        &*h.holds,
        &other,
        HoldStatus::Held,
        PageSize::new(10).unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(elsewhere_listed, vec![elsewhere]);
}
