//! The waiting list: who may join (only when a booking of that many would be refused, one waiting
//! entry per user), positions and leaving, and the serving that every return of seats runs in its
//! own transaction: seats go to the first entries they fit, in the list's order, as offers (holds
//! in the waiting user's name) that no booking can beat, and an offer that lapses passes on.

use super::checkout::counts;
#[allow(unused_imports)]
use super::fixtures::*;
use super::flights::{booking_of, new_flight};
#[allow(unused_imports)]
use super::*;
use seatgate::domain::{
    Change, CheckoutHold, CheckoutTimes, EntryId, HoldAction, HoldId, HoldStatus, OfferEvent,
    WaitEntry, WaitRefusal, WaitStatus,
};
use seatgate::ports::{BookRefusal, CreateHoldRefusal, StoreError, WaitlistError};

/// Holds of 10 s, offers of 5 s.
fn times() -> CheckoutTimes {
    CheckoutTimes::new(10, 25, 5).unwrap()
}

fn entry_of(flight: &Flight, user: &UserId, k: u32, now: Millis) -> WaitEntry {
    WaitEntry::new(
        EntryId::from_uuid(uuid::Uuid::now_v7()),
        flight.flight_id.clone(),
        user.clone(),
        k,
        now,
    )
}

fn hold_of(flight: &Flight, user: &UserId, k: u32, now: Millis) -> CheckoutHold {
    CheckoutHold::new(
        HoldId::from_uuid(uuid::Uuid::now_v7()),
        flight.flight_id.clone(),
        user.clone(),
        k,
        0,
        BookingId::generate(),
        &times(),
        now,
    )
}

async fn entry(h: &Harness, e: &WaitEntry) -> WaitEntry {
    h.waitlist
        .wait_entry(&e.user_id, &e.flight_id, &e.entry_id)
        .await
        .unwrap()
        .expect("the entry is there")
}

fn refused(r: Result<(), WaitlistError>) -> WaitRefusal {
    match r {
        Err(WaitlistError::Refused(refusal)) => refusal,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

pub async fn only_a_flight_that_cannot_sell_takes_a_waiter_and_each_user_waits_once(h: &Harness) {
    let now = h.now();
    // Two shards of 2: three seats fit no shard, so a booking of 3 is refused and 3 may wait.
    let flight = new_flight(4, None, 2, now);
    h.flights.create_flight(&flight).await.unwrap();
    let f = &flight.flight_id;
    let (me, you) = (new_user(), new_user());
    let two = entry_of(&flight, &me, 2, now);
    assert_eq!(
        refused(h.waitlist.join_waitlist(&two, None).await),
        WaitRefusal::SeatsAvailable
    );
    let mine = entry_of(&flight, &me, 3, now);
    h.waitlist.join_waitlist(&mine, None).await.unwrap();
    assert_eq!(entry(h, &mine).await, mine);
    assert_eq!(
        refused(
            h.waitlist
                .join_waitlist(&entry_of(&flight, &me, 3, now), None)
                .await
        ),
        WaitRefusal::AlreadyWaiting(Box::new(mine.clone()))
    );
    let yours = entry_of(&flight, &you, 4, now);
    h.waitlist.join_waitlist(&yours, None).await.unwrap();
    assert_eq!(
        h.waitlist.waiting_ahead(f, &mine.entry_id).await.unwrap(),
        0
    );
    assert_eq!(
        h.waitlist.waiting_ahead(f, &yours.entry_id).await.unwrap(),
        1
    );
    assert_eq!(
        h.waitlist
            .wait_entry(&you, f, &mine.entry_id)
            .await
            .unwrap(),
        None,
        "another user's entry is not found"
    );
    let summary = h.waitlist.waitlist_summary(f).await.unwrap();
    assert_eq!((summary.waiting, summary.oldest), (2, Some(mine.clone())));

    // Leaving: once, a repeat answers the left entry, and the user may join again, at the back.
    let at = Millis(now.0 + 1);
    let left = h
        .waitlist
        .leave_waitlist(&me, f, &mine.entry_id, at)
        .await
        .unwrap();
    assert_eq!(
        (left.status, left.resolved_at),
        (WaitStatus::Left, Some(at))
    );
    assert_eq!(
        h.waitlist
            .leave_waitlist(&me, f, &mine.entry_id, Millis(at.0 + 5))
            .await,
        Ok(left)
    );
    assert_eq!(
        h.waitlist.waiting_ahead(f, &yours.entry_id).await.unwrap(),
        0
    );
    let again = entry_of(&flight, &me, 3, at);
    h.waitlist.join_waitlist(&again, None).await.unwrap();
    assert_eq!(
        h.waitlist.waiting_ahead(f, &again.entry_id).await.unwrap(),
        1
    );
    assert_eq!(
        h.waitlist.wait_entry(&me, f, &mine.entry_id).await.unwrap(),
        None,
        "a user's earlier entry is replaced by their next"
    );
    assert_eq!(
        h.waitlist.leave_waitlist(&me, f, &mine.entry_id, at).await,
        Err(WaitlistError::Refused(WaitRefusal::NotFound))
    );

    // The per-user limit: what the user holds and owns plus what they wait for.
    let limited = new_flight(2, Some(3), 1, now);
    h.flights.create_flight(&limited).await.unwrap();
    h.flights
        .book(&booking_of(&limited, &me, 2, 0, now), Some(3), None, None)
        .await
        .unwrap();
    assert_eq!(
        refused(
            h.waitlist
                .join_waitlist(&entry_of(&limited, &me, 2, now), Some(3))
                .await
        ),
        WaitRefusal::LimitReached
    );
    h.waitlist
        .join_waitlist(&entry_of(&limited, &me, 1, now), Some(3))
        .await
        .unwrap();
}

pub async fn returned_seats_go_to_the_first_entries_they_fit_before_any_booking(h: &Harness) {
    let now = h.now();
    let flight = new_flight(3, None, 1, now).with_checkout(times());
    h.flights.create_flight(&flight).await.unwrap();
    let f = &flight.flight_id;
    let (me, you, first, second) = (new_user(), new_user(), new_user(), new_user());
    let mine = hold_of(&flight, &me, 1, now);
    h.holds.create_hold(&mine, None, None).await.unwrap();
    let yours = booking_of(&flight, &you, 2, 0, now);
    h.flights.book(&yours, None, None, None).await.unwrap();
    let (w1, w2) = (
        entry_of(&flight, &first, 2, now),
        entry_of(&flight, &second, 1, now),
    );
    h.waitlist.join_waitlist(&w1, None).await.unwrap();
    h.waitlist.join_waitlist(&w2, None).await.unwrap();

    // One seat back: the first entry needs two, so the second is served, and nobody can book it.
    let at = Millis(now.0 + 100);
    h.holds
        .resolve_hold(&me, f, &mine.hold_id, HoldAction::Release, at)
        .await
        .unwrap();
    assert_eq!(counts(h, &flight).await, (0, 1, false));
    assert_eq!(entry(h, &w1).await.status, WaitStatus::Waiting);
    let served = entry(h, &w2).await;
    let (expected, offer) = w2.offer(0, &times(), at);
    assert_eq!(served, expected);
    assert_eq!(
        h.holds.hold(&second, &offer.hold_id).await.unwrap(),
        Some(offer.clone())
    );
    assert_eq!(
        h.flights
            .book(
                &booking_of(&flight, &new_user(), 1, 0, at),
                None,
                None,
                None
            )
            .await,
        Err(BookRefusal::ShardShort { available: 0 })
    );
    assert_eq!(h.waitlist.waiting_ahead(f, &w1.entry_id).await.unwrap(), 0);

    // Two seats back from a cancel: now the first entry fits.
    let later = Millis(at.0 + 100);
    h.flights
        .cancel_booking(&you, f, &yours.booking_id, later)
        .await
        .unwrap();
    assert_eq!(counts(h, &flight).await, (0, 3, false));
    let (expected, first_offer) = w1.offer(0, &times(), later);
    assert_eq!(entry(h, &w1).await, expected);
    let summary = h.waitlist.waitlist_summary(f).await.unwrap();
    assert_eq!((summary.waiting, summary.oldest), (0, None));

    // An offer is a hold: confirmed, it is a booking; lapsed, its seats come back (nobody waits).
    let booked = h
        .holds
        .resolve_hold(&first, f, &first_offer.hold_id, HoldAction::Confirm, later)
        .await
        .unwrap();
    assert_eq!(booked.status, HoldStatus::Confirmed);
    assert_eq!(counts(h, &flight).await, (0, 1, false));
    let lapsed = h
        .holds
        .resolve_hold(
            &second,
            f,
            &offer.hold_id,
            HoldAction::Lapse,
            offer.expires_at,
        )
        .await
        .unwrap();
    assert_eq!(lapsed.status, HoldStatus::Lapsed);
    assert_eq!(counts(h, &flight).await, (1, 0, false));
}

pub async fn a_lapsed_offer_passes_to_the_next_entry_and_never_touches_the_users_own_hold(
    h: &Harness,
) {
    let now = h.now();
    let flight = new_flight(2, None, 1, now).with_checkout(times());
    h.flights.create_flight(&flight).await.unwrap();
    let f = &flight.flight_id;
    let (me, you, next) = (new_user(), new_user(), new_user());
    let secs = |s: i64| Millis(now.0 + s * 1_000);
    // You hold one seat; I hold the other (7 s later, so mine outlives yours) and wait for one
    // more, behind nobody; then the next user waits.
    let yours = hold_of(&flight, &you, 1, now);
    h.holds.create_hold(&yours, None, None).await.unwrap();
    let mine = hold_of(&flight, &me, 1, secs(7));
    h.holds.create_hold(&mine, None, None).await.unwrap();
    let (wait, after) = (
        entry_of(&flight, &me, 1, secs(7)),
        entry_of(&flight, &next, 1, secs(7)),
    );
    h.waitlist.join_waitlist(&wait, None).await.unwrap();
    h.waitlist.join_waitlist(&after, None).await.unwrap();
    // Your hold lapses: its seat is offered to me.
    h.holds
        .resolve_hold(&you, f, &yours.hold_id, HoldAction::Lapse, secs(10))
        .await
        .unwrap();
    let (served, offer) = wait.offer(0, &times(), secs(10));
    assert_eq!(entry(h, &wait).await, served);
    assert_eq!(
        h.holds.hold(&me, &offer.hold_id).await.unwrap(),
        Some(offer.clone())
    );
    assert_eq!(counts(h, &flight).await, (0, 2, false));
    // I give the offer back: it passes to the next entry.
    let released = h
        .holds
        .resolve_hold(&me, f, &offer.hold_id, HoldAction::Release, secs(11))
        .await
        .unwrap();
    assert_eq!(released.status, HoldStatus::Released);
    let (served, next_offer) = after.offer(0, &times(), secs(11));
    assert_eq!(entry(h, &after).await, served);
    assert_eq!(counts(h, &flight).await, (0, 2, false));
    // Served, my entry cannot be left: its offer is a hold.
    assert!(matches!(
        h.waitlist
            .leave_waitlist(&me, f, &wait.entry_id, secs(11))
            .await,
        Err(WaitlistError::Refused(WaitRefusal::Offered(_)))
    ));
    // The next user's offer lapses with nobody waiting: its seat goes back on sale.
    assert_eq!(
        h.holds
            .resolve_hold(
                &next,
                f,
                &next_offer.hold_id,
                HoldAction::Lapse,
                next_offer.expires_at
            )
            .await
            .unwrap()
            .status,
        HoldStatus::Lapsed
    );
    assert_eq!(counts(h, &flight).await, (1, 1, false));
    // My own hold is still my live hold: neither my offer nor its release touched it.
    assert!(next_offer.expires_at < mine.expires_at);
    assert_eq!(
        h.holds
            .create_hold(&hold_of(&flight, &me, 1, next_offer.expires_at), None, None)
            .await,
        Err(CreateHoldRefusal::HoldExists)
    );
}

/// Joins racing returns: holders give their seats back while as many waiters join, all at
/// once, over a few rounds. Whatever the interleaving, no seat is left on sale while a waiter it fits is still
/// waiting (a join ordered before a return is served by it; one ordered after sees the seat and
/// is refused `SeatsAvailable`), and the books stay exact.
///
/// A loaded machine can order every release first in a round (a join reads the flight before
/// its transaction, and one cancelled by a `TransactionConflict` retries into a seat on sale), so
/// every other round lets its first join land before the releases are spawned: the rest still
/// race, and the served path is taken in every run rather than by luck.
pub async fn joins_racing_returns_never_leave_a_seat_unsold_while_someone_waits(h: &Harness) {
    const SEATS: u32 = 6;
    const ROUNDS: usize = 3;
    let mut served_in_all = 0;
    for round in 0..ROUNDS {
        served_in_all += one_race_of_joins_and_returns(h, SEATS, round % 2 == 0).await;
    }
    // Not a vacuous race: some joins landed before the returns that then served them.
    assert!(
        served_in_all > 0,
        "no join was served by a return in {ROUNDS} rounds"
    );
}

/// One round: `seats` single-seat holds released while as many waiters join, every task spawned
/// before any is awaited, joins and releases alternating; with `first_join_lands`, the first
/// join is awaited before anything else is spawned. Returns how many joins were served.
async fn one_race_of_joins_and_returns(h: &Harness, seats: u32, first_join_lands: bool) -> u32 {
    let now = h.now();
    let flight = new_flight(seats, None, 1, now).with_checkout(times());
    h.flights.create_flight(&flight).await.unwrap();
    let mut holds = Vec::new();
    for _ in 0..seats {
        let hold = hold_of(&flight, &new_user(), 1, now);
        h.holds.create_hold(&hold, None, None).await.unwrap();
        holds.push(hold);
    }
    let at = Millis(now.0 + 1);
    let spawn_join = |wait: WaitEntry| {
        let store = h.waitlist.clone();
        tokio::spawn(async move {
            for _ in 0..50 {
                match store.join_waitlist(&wait, None).await {
                    Err(WaitlistError::Store(e)) if e.is_retryable() => continue,
                    Ok(()) => return Some(wait),
                    Err(WaitlistError::Refused(WaitRefusal::SeatsAvailable)) => return None,
                    Err(e) => panic!("{e}"),
                }
            }
            panic!("a join kept conflicting")
        })
    };
    let spawn_release = |hold: CheckoutHold| {
        let store = h.holds.clone();
        tokio::spawn(async move {
            for _ in 0..50 {
                let r = store
                    .resolve_hold(
                        &hold.user_id,
                        &hold.flight_id,
                        &hold.hold_id,
                        HoldAction::Release,
                        at,
                    )
                    .await;
                match r {
                    Err(seatgate::ports::ResolveHoldError::Store(e)) if e.is_retryable() => {
                        continue;
                    }
                    other => return other.map(|_| ()),
                }
            }
            Err(StoreError::TransactionConflict.into())
        })
    };
    let mut releases = Vec::new();
    let mut joins = Vec::new();
    let mut landed_first = None;
    if first_join_lands {
        let wait = entry_of(&flight, &new_user(), 1, at);
        let landed = spawn_join(wait).await.unwrap();
        assert!(landed.is_some(), "a join with every seat held is accepted");
        landed_first = landed;
    }
    for hold in holds {
        joins.push(spawn_join(entry_of(&flight, &new_user(), 1, at)));
        releases.push(spawn_release(hold));
    }
    for r in futures::future::join_all(releases).await {
        r.unwrap().expect("every release applies");
    }
    let joined: Vec<WaitEntry> = futures::future::join_all(joins)
        .await
        .into_iter()
        .filter_map(|j| j.unwrap())
        .chain(landed_first)
        .collect();
    let (available, held, _) = counts(h, &flight).await;
    let mut offered = 0;
    let mut waiting = 0;
    for e in &joined {
        match entry(h, e).await.status {
            WaitStatus::Offered => offered += 1,
            WaitStatus::Waiting => waiting += 1,
            WaitStatus::Left => panic!("nobody left"),
        }
    }
    assert_eq!(held, offered, "every offer holds its seat");
    assert_eq!(available + held, seats, "the books stay exact");
    assert!(
        available == 0 || waiting == 0,
        "{available} seats on sale while {waiting} single-seat entries wait"
    );
    offered
}

/// Offers are announced from the outbox, so the write that makes or lapses one must record it
/// there, in the same write: a return that serves the list records the offer's creation, the
/// offer's lapse records its expiry (and the lapse's own serving the next offer), and nothing
/// else a hold does on the way makes an event.
pub async fn an_offer_is_recorded_in_the_outbox_when_made_and_when_it_lapses(h: &Harness) {
    let log = h.changes.clone().expect(
        "this backend's harness reads no outbox: build it with Harness::with_changes \
         (for DynamoDB, the table's stream on DynamoDB Local: scripts/emulators.sh start)",
    );
    let now = h.now();
    let flight = new_flight(1, None, 1, now).with_checkout(times());
    h.flights.create_flight(&flight).await.unwrap();
    let f = &flight.flight_id;
    let (holder, first, second) = (new_user(), new_user(), new_user());
    let secs = |s: i64| Millis(now.0 + s * 1_000);
    let held = hold_of(&flight, &holder, 1, now);
    h.holds.create_hold(&held, None, None).await.unwrap();
    let (wait, after) = (
        entry_of(&flight, &first, 1, now),
        entry_of(&flight, &second, 1, now),
    );
    h.waitlist.join_waitlist(&wait, None).await.unwrap();
    h.waitlist.join_waitlist(&after, None).await.unwrap();
    // The holder gives the seat back: the first waiter is offered it.
    h.holds
        .resolve_hold(&holder, f, &held.hold_id, HoldAction::Release, secs(1))
        .await
        .unwrap();
    let (_, offer) = wait.offer(0, &times(), secs(1));
    // An extension is a write of the offer, not an event.
    let extended = h
        .holds
        .resolve_hold(
            &first,
            f,
            &offer.hold_id,
            HoldAction::Extend(times()),
            secs(2),
        )
        .await
        .unwrap();
    // It lapses: the second waiter is offered the seat, and confirms.
    h.holds
        .resolve_hold(
            &first,
            f,
            &offer.hold_id,
            HoldAction::Lapse,
            extended.expires_at,
        )
        .await
        .unwrap();
    let (_, next) = after.offer(0, &times(), extended.expires_at);
    h.holds
        .resolve_hold(
            &second,
            f,
            &next.hold_id,
            HoldAction::Confirm,
            extended.expires_at,
        )
        .await
        .unwrap();

    let mut announced: Vec<(String, UserId)> = Vec::new();
    let mut made_before_lapsed = Vec::new();
    for change in log.recorded().await {
        let Change::Hold(c) = change else { continue };
        let Some(hold) = c.new.as_ref().or(c.old.as_ref()) else {
            continue;
        };
        if hold.flight_id != *f {
            continue;
        }
        if let Some(event) = OfferEvent::of(&c) {
            made_before_lapsed.push((event.hold_id.clone(), event.event_type.clone()));
            announced.push((event.event_type, event.user_id));
        }
    }
    announced.sort();
    let mut wanted = vec![
        ("offer.created".to_owned(), first.clone()),
        ("offer.expired".to_owned(), first.clone()),
        ("offer.created".to_owned(), second.clone()),
    ];
    wanted.sort();
    assert_eq!(announced, wanted);
    // One item's records keep their order (a stream orders by item, not across items).
    let of_first: Vec<&str> = made_before_lapsed
        .iter()
        .filter(|(id, _)| *id == offer.hold_id)
        .map(|(_, t)| t.as_str())
        .collect();
    assert_eq!(of_first, ["offer.created", "offer.expired"]);
}

/// On a flight with a per-user limit a waiting entry counts from its join: a booking meanwhile
/// cannot take its user past the limit (and leave the offer to pass it), leaving gives the seats
/// back to the user's room, and an offer made to a counted entry adds nothing.
pub async fn a_waiting_entry_counts_against_the_limit_from_its_join(h: &Harness) {
    let now = h.now();
    let max = Some(2);
    let flight = new_flight(5, max, 1, now);
    h.flights.create_flight(&flight).await.unwrap();
    let f = &flight.flight_id;
    let (a, b, c, w, v) = (new_user(), new_user(), new_user(), new_user(), new_user());
    let held = hold_of(&flight, &a, 2, now);
    h.holds.create_hold(&held, max, None).await.unwrap();
    h.flights
        .book(&booking_of(&flight, &b, 2, 0, now), max, None, None)
        .await
        .unwrap();
    let c_booking = booking_of(&flight, &c, 1, 0, now);
    h.flights.book(&c_booking, max, None, None).await.unwrap();
    // W waits for two, their whole limit.
    let wait = entry_of(&flight, &w, 2, now);
    h.waitlist.join_waitlist(&wait, max).await.unwrap();
    assert!(entry(h, &wait).await.counted, "stored counted");
    // C cancels: one seat does not fit W's two, so it is on sale, but not to W.
    h.flights
        .cancel_booking(&c, f, &c_booking.booking_id, now)
        .await
        .unwrap();
    assert_eq!(counts(h, &flight).await, (1, 2, false));
    assert_eq!(
        h.flights
            .book(&booking_of(&flight, &w, 1, 0, now), max, None, None)
            .await,
        Err(BookRefusal::LimitReached),
        "W's two waiting seats count"
    );
    // W leaves: their room comes back, and they book the seat.
    h.waitlist
        .leave_waitlist(&w, f, &wait.entry_id, now)
        .await
        .unwrap();
    h.flights
        .book(&booking_of(&flight, &w, 1, 0, now), max, None, None)
        .await
        .unwrap();
    // V waits for one; A releases two: V is offered one, counted once (at the join), so V may
    // still book the other.
    let v_wait = entry_of(&flight, &v, 1, now);
    h.waitlist.join_waitlist(&v_wait, max).await.unwrap();
    h.holds
        .resolve_hold(&a, f, &held.hold_id, HoldAction::Release, now)
        .await
        .unwrap();
    assert_eq!(entry(h, &v_wait).await.status, WaitStatus::Offered);
    assert_eq!(counts(h, &flight).await, (1, 1, false));
    h.flights
        .book(&booking_of(&flight, &v, 1, 0, now), max, None, None)
        .await
        .unwrap();
    assert_eq!(counts(h, &flight).await, (0, 1, false));
}
