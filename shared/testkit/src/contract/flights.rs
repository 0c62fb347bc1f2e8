//! Flights: creation, bookings against shards, the per-user limit, cancels, idempotency records,
//! and the differential cases for the booking and cancel rules.

#[allow(unused_imports)]
use super::fixtures::*;
#[allow(unused_imports)]
use super::*;
use crate::paging::all_bookings;

pub(super) fn new_flight(
    capacity: u32,
    max_per_user: Option<u32>,
    shards: u32,
    now: Millis,
) -> Flight {
    let id = FlightId::parse(&unique("F")).unwrap();
    Flight::new(id, capacity, max_per_user, shards, now).unwrap()
}

pub(super) fn booking_of(
    flight: &Flight,
    user: &UserId,
    head_count: u32,
    shard: u32,
    now: Millis,
) -> Booking {
    Booking {
        booking_id: BookingId::generate(),
        flight_id: flight.flight_id.clone(),
        user_id: user.clone(),
        head_count,
        shard,
        status: BookingStatus::Booked,
        created_at: now,
        cancelled_at: None,
    }
}

pub async fn a_flight_is_created_once_with_its_capacity_split_over_its_shards(h: &Harness) {
    let f = &h.flights;
    let flight = new_flight(301, None, 4, h.now());
    assert!(f.create_flight(&flight).await.unwrap());
    let mut again = flight.clone();
    again.capacity = 5;
    assert!(
        !f.create_flight(&again).await.unwrap(),
        "an existing id is not overwritten"
    );
    let inv = f.inventory(&flight.flight_id).await.unwrap().unwrap();
    assert_eq!(inv.flight, flight);
    assert_eq!(inv.available, vec![76, 75, 75, 75]);
    assert!(!inv.sold_out);
    let unknown = FlightId::parse(&unique("F")).unwrap();
    assert_eq!(f.inventory(&unknown).await.unwrap(), None);
}

pub async fn a_booking_takes_seats_from_its_shard_only_while_it_has_them_and_a_cancel_returns_them_once(
    h: &Harness,
) {
    let f = &h.flights;
    let now = h.now();
    let flight = new_flight(5, None, 1, now);
    f.create_flight(&flight).await.unwrap();
    let (alice, bob) = (new_user(), new_user());
    let first = booking_of(&flight, &alice, 3, 0, now);
    f.book(&first, None, None, None).await.unwrap();
    let too_many = booking_of(&flight, &bob, 3, 0, now);
    assert_eq!(
        f.book(&too_many, None, None, None).await,
        Err(BookRefusal::ShardShort { available: 2 })
    );
    assert!(
        !f.mark_sold_out(&flight.flight_id, 1).await.unwrap(),
        "2 seats left"
    );
    let second = booking_of(&flight, &bob, 2, 0, now);
    f.book(&second, None, None, None).await.unwrap();
    let inv = f.inventory(&flight.flight_id).await.unwrap().unwrap();
    assert_eq!(inv.available(), 0);
    assert!(f.mark_sold_out(&flight.flight_id, 1).await.unwrap());
    assert!(
        f.inventory(&flight.flight_id)
            .await
            .unwrap()
            .unwrap()
            .sold_out
    );
    assert_eq!(
        all_bookings(&**f, &alice).await.unwrap(),
        vec![first.clone()]
    );
    assert_eq!(
        all_bookings(&**f, &bob).await.unwrap(),
        vec![second.clone()]
    );

    // Only the owner, on the booking's own flight, may cancel; seats come back once.
    let other_flight = FlightId::parse(&unique("F")).unwrap();
    assert_eq!(
        f.cancel_booking(&bob, &flight.flight_id, &first.booking_id, now)
            .await,
        Err(CancelBookingRefusal::NotFound)
    );
    assert_eq!(
        f.cancel_booking(&alice, &other_flight, &first.booking_id, now)
            .await,
        Err(CancelBookingRefusal::NotFound)
    );
    let later = Millis(now.0 + 5);
    let cancelled = f
        .cancel_booking(&alice, &flight.flight_id, &first.booking_id, later)
        .await
        .unwrap();
    assert_eq!(
        (cancelled.status, cancelled.cancelled_at),
        (BookingStatus::Cancelled, Some(later))
    );
    assert_eq!(
        f.cancel_booking(&alice, &flight.flight_id, &first.booking_id, later)
            .await,
        Err(CancelBookingRefusal::AlreadyCancelled(Box::new(
            cancelled.clone()
        )))
    );
    let inv = f.inventory(&flight.flight_id).await.unwrap().unwrap();
    assert_eq!(
        (inv.available(), inv.sold_out),
        (3, false),
        "returned once, mark cleared"
    );
    assert_eq!(all_bookings(&**f, &alice).await.unwrap(), vec![cancelled]);
}

/// The differential case for [`Booking::cancel`]: a missing booking, another user's, one on
/// another flight, a live one and a cancelled one, cancelled through the port, answer as the
/// rule does on the booking as it was; the seats go back only when the rule cancels.
pub async fn cancels_answer_as_the_cancel_rule(h: &Harness) {
    #[derive(Debug, Clone, Copy)]
    enum Case {
        Missing,
        Theirs,
        OtherFlight,
        Live,
        Cancelled,
    }
    let f = &h.flights;
    for case in [
        Case::Missing,
        Case::Theirs,
        Case::OtherFlight,
        Case::Live,
        Case::Cancelled,
    ] {
        let now = h.now();
        let flight = new_flight(4, Some(4), 1, now);
        f.create_flight(&flight).await.unwrap();
        let (me, them) = (new_user(), new_user());
        let owner = if matches!(case, Case::Theirs) {
            &them
        } else {
            &me
        };
        let booking = booking_of(&flight, owner, 2, 0, now);
        if !matches!(case, Case::Missing) {
            f.book(&booking, flight.max_per_user, None, None)
                .await
                .unwrap();
        }
        if matches!(case, Case::Cancelled) {
            f.cancel_booking(&me, &flight.flight_id, &booking.booking_id, now)
                .await
                .unwrap();
        }
        let on = match case {
            Case::OtherFlight => FlightId::parse(&unique("F")).unwrap(),
            _ => flight.flight_id.clone(),
        };
        let before = all_bookings(&**f, owner)
            .await
            .unwrap()
            .into_iter()
            .find(|b| b.booking_id == booking.booking_id);
        let stock = |inv: Option<Inventory>| inv.map(|i| i.available()).unwrap_or(0);
        let stock_before = stock(f.inventory(&flight.flight_id).await.unwrap());
        let later = Millis(now.0 + 7);
        let expected =
            Booking::cancel(before.as_ref(), &me, &on, later).map_err(CancelBookingRefusal::from);
        let got = f.cancel_booking(&me, &on, &booking.booking_id, later).await;
        assert_eq!(got, expected, "{case:?}: the rule's answer");
        let returned = if expected.is_ok() { 2 } else { 0 };
        assert_eq!(
            stock(f.inventory(&flight.flight_id).await.unwrap()),
            stock_before + returned,
            "{case:?}: seats go back only on the rule's cancel"
        );
    }
}

/// The differential case for [`Flight::book`]: a grid of stock, seats the user already holds,
/// head counts and limits (including a request over the limit on a short shard, where the
/// rule's order decides which refusal wins), each booked through the port, answers as the rule
/// does and leaves the stock the rule says.
pub async fn bookings_answer_as_the_booking_rule(h: &Harness) {
    let f = &h.flights;
    for available in [0, 1, 3] {
        for held in [0, 2] {
            for head_count in [1, 2, 3] {
                for max in [None, Some(2), Some(4)] {
                    let label = format!(
                        "available {available}, held {held}, asking {head_count}, max {max:?}"
                    );
                    let now = h.now();
                    // One seat more than the grid needs, taken by someone else, so a flight
                    // with nothing available is still a valid flight.
                    let flight = new_flight(available + held + 1, max, 1, now);
                    f.create_flight(&flight).await.unwrap();
                    f.book(
                        &booking_of(&flight, &new_user(), 1, 0, now),
                        None,
                        None,
                        None,
                    )
                    .await
                    .unwrap();
                    let me = new_user();
                    if held > 0 {
                        f.book(
                            &booking_of(&flight, &me, held, 0, now),
                            Some(held),
                            None,
                            None,
                        )
                        .await
                        .unwrap();
                    }
                    let probe = booking_of(&flight, &me, head_count, 0, now);
                    let counted = if max.is_some() { held } else { 0 };
                    let expected = Flight::book(available, counted, head_count, max)
                        .map_err(BookRefusal::from);
                    let got = f.book(&probe, max, None, None).await;
                    let left = f
                        .inventory(&flight.flight_id)
                        .await
                        .unwrap()
                        .expect("the flight")
                        .available();
                    let mine = all_bookings(&**f, &me).await.unwrap();
                    match expected {
                        Ok(taken) => {
                            assert_eq!(got, Ok(()), "{label}: the rule books");
                            assert_eq!(left, taken.available, "{label}: stock left");
                            assert!(mine.contains(&probe), "{label}: the booking is stored");
                        }
                        Err(refusal) => {
                            assert_eq!(got, Err(refusal), "{label}: the rule's refusal");
                            assert_eq!(left, available, "{label}: a refusal takes nothing");
                            assert!(!mine.contains(&probe), "{label}: nor leaves a record");
                        }
                    }
                }
            }
        }
    }
}

pub async fn the_per_user_limit_is_kept_in_the_booking_transaction(h: &Harness) {
    let f = &h.flights;
    let now = h.now();
    let flight = new_flight(10, Some(2), 1, now);
    f.create_flight(&flight).await.unwrap();
    let alice = new_user();
    let first = booking_of(&flight, &alice, 2, 0, now);
    f.book(&first, Some(2), None, None).await.unwrap();
    assert_eq!(
        f.book(&booking_of(&flight, &alice, 1, 0, now), Some(2), None, None)
            .await,
        Err(BookRefusal::LimitReached)
    );
    let inv = f.inventory(&flight.flight_id).await.unwrap().unwrap();
    assert_eq!(inv.available(), 8, "a refused booking took no seats");
    assert_eq!(
        all_bookings(&**f, &alice).await.unwrap().len(),
        1,
        "nor left a record"
    );
    // Another user is not limited by alice; alice may book again after a cancel.
    f.book(
        &booking_of(&flight, &new_user(), 2, 0, now),
        Some(2),
        None,
        None,
    )
    .await
    .unwrap();
    f.cancel_booking(&alice, &flight.flight_id, &first.booking_id, now)
        .await
        .unwrap();
    f.book(&booking_of(&flight, &alice, 1, 0, now), Some(2), None, None)
        .await
        .unwrap();
    assert_eq!(
        f.inventory(&flight.flight_id)
            .await
            .unwrap()
            .unwrap()
            .available(),
        7
    );
}

pub async fn an_idempotency_record_is_begun_once_and_keeps_its_answer(h: &Harness) {
    let f = &h.flights;
    let now = h.now();
    let flight = new_flight(3, None, 1, now);
    f.create_flight(&flight).await.unwrap();
    let user = new_user();
    let key = IdempotencyKey::parse(&unique("k-")).unwrap();
    let record = |token: &str, created: Millis| IdempotencyRecord {
        user_id: user.clone(),
        key: key.clone(),
        fingerprint: IdempotencyRecord::fingerprint(&flight.flight_id, 1),
        state: RequestState::InProgress {
            token: token.into(),
            expires_at: Millis(created.0 + 1_000),
        },
        created_at: created,
    };
    let first = record("t1", now);
    assert_eq!(f.begin_request(&first).await.unwrap(), Begun::Started);
    assert_eq!(
        f.begin_request(&record("t2", Millis(now.0 + 10)))
            .await
            .unwrap(),
        Begun::Existing(first.clone()),
        "in progress: the second request sees the first's record"
    );
    // A booking under a token that does not hold the record writes nothing.
    let stale = booking_of(&flight, &user, 1, 0, now);
    assert_eq!(
        f.book(&stale, None, Some((&key, "t2")), None).await,
        Err(BookRefusal::RequestTakenOver)
    );
    assert_eq!(
        f.inventory(&flight.flight_id)
            .await
            .unwrap()
            .unwrap()
            .available(),
        3
    );
    let booking = booking_of(&flight, &user, 1, 0, now);
    f.book(&booking, None, Some((&key, "t1")), None)
        .await
        .unwrap();
    let answered = IdempotencyRecord {
        state: RequestState::Done {
            answer: BookingAnswer::Booked {
                booking: booking.clone(),
            },
        },
        ..first.clone()
    };
    assert_eq!(
        f.begin_request(&record("t3", Millis(now.0 + 5_000)))
            .await
            .unwrap(),
        Begun::Existing(answered.clone()),
        "answered: kept past the in-progress expiry"
    );
    assert!(
        !f.finish_request(&user, &key, "t1", &BookingAnswer::SoldOut)
            .await
            .unwrap()
    );

    // Another key: finished with an answer, abandoned, and taken over once expired.
    let key2 = IdempotencyKey::parse(&unique("k-")).unwrap();
    let r = |token: &str, created: Millis| IdempotencyRecord {
        key: key2.clone(),
        ..record(token, created)
    };
    assert_eq!(f.begin_request(&r("a", now)).await.unwrap(), Begun::Started);
    f.abandon_request(&user, &key2, "not-a").await.unwrap();
    assert!(matches!(
        f.begin_request(&r("b", now)).await.unwrap(),
        Begun::Existing(_)
    ));
    f.abandon_request(&user, &key2, "a").await.unwrap();
    assert_eq!(f.begin_request(&r("b", now)).await.unwrap(), Begun::Started);
    assert_eq!(
        f.begin_request(&r("c", Millis(now.0 + 1_000)))
            .await
            .unwrap(),
        Begun::Started,
        "abandoned in progress past its expiry: taken over"
    );
    assert!(
        !f.finish_request(&user, &key2, "b", &BookingAnswer::SoldOut)
            .await
            .unwrap()
    );
    assert!(
        f.finish_request(&user, &key2, "c", &BookingAnswer::SoldOut)
            .await
            .unwrap()
    );
    let Begun::Existing(done) = f
        .begin_request(&r("d", Millis(now.0 + 9_000)))
        .await
        .unwrap()
    else {
        panic!("answered");
    };
    assert_eq!(
        done.state,
        RequestState::Done {
            answer: BookingAnswer::SoldOut
        }
    );
}

pub async fn concurrent_bookings_never_oversell(h: &Harness) {
    // Thousands of bookers at once, each wanting 1 to 3 seats: about four times the supply.
    const BOOKERS: u32 = 2_000;
    const CAPACITY: u32 = 1_000;
    const SHARDS: u32 = 4;
    let now = h.now();
    let flight = new_flight(CAPACITY, None, SHARDS, now);
    h.flights.create_flight(&flight).await.unwrap();
    let tasks: Vec<_> = (0..BOOKERS)
        .map(|i| {
            let (flights, flight) = (h.flights.clone(), flight.clone());
            tokio::spawn(async move {
                let user = new_user();
                let k = 1 + i % 3;
                for s in 0..SHARDS {
                    let b = booking_of(&flight, &user, k, (i + s) % SHARDS, now);
                    loop {
                        match flights.book(&b, None, None, None).await {
                            Ok(()) => return Some((user, k)),
                            Err(BookRefusal::ShardShort { .. }) => break,
                            Err(BookRefusal::Store(e)) if e.is_retryable() => continue,
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
                None
            })
        })
        .collect();
    let mut sold = 0;
    let mut booked = Vec::new();
    for t in tasks {
        if let Some((user, k)) = t.await.unwrap() {
            sold += k;
            booked.push((user, k));
        }
    }
    let inv = h
        .flights
        .inventory(&flight.flight_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        sold + inv.available(),
        CAPACITY,
        "every seat sold once or still there"
    );
    assert!(sold <= CAPACITY);
    assert!(
        inv.available() < 3 * SHARDS,
        "demand outran supply: at most a few seats per shard left"
    );
    // Every winner holds exactly the one booking it was told of: no seat sold without a record.
    for (user, k) in &booked {
        let bookings = all_bookings(&*h.flights, user).await.unwrap();
        assert_eq!(bookings.iter().map(|b| b.head_count).sum::<u32>(), *k);
    }
}

/// The differential case for [`IdempotencyRecord::may_begin`]: a key that is new, in progress
/// and live, in progress past its expiry (also exactly at it), and answered, begun again through
/// the port, answers as the rule does on the record as it was: `Started` (and the new record
/// stored) when the rule lets the request take the key, else the stored record.
pub async fn idempotency_records_begin_as_the_begin_rule(h: &Harness) {
    let f = &h.flights;
    let now = h.now();
    let flight = new_flight(3, None, 1, now);
    f.create_flight(&flight).await.unwrap();
    #[derive(Debug, Clone, Copy)]
    enum Stored {
        Nothing,
        Live,
        Expired,
        ExpiringNow,
        Answered,
    }
    // The second request attempts something (in progress), or is a refusal answered at once
    // (a flight known sold out), which a backend may store after its answer: either way the
    // rule's answer, and what a third request then finds, are the same.
    let cases = [
        Stored::Nothing,
        Stored::Live,
        Stored::Expired,
        Stored::ExpiringNow,
        Stored::Answered,
    ]
    .into_iter()
    .flat_map(|stored| [(stored, false), (stored, true)]);
    for (stored, answered_at_once) in cases {
        let user = new_user();
        let key = IdempotencyKey::parse(&unique("k-")).unwrap();
        let record = |token: &str, created: Millis, expires: Millis| IdempotencyRecord {
            user_id: user.clone(),
            key: key.clone(),
            fingerprint: IdempotencyRecord::fingerprint(&flight.flight_id, 1),
            state: RequestState::InProgress {
                token: token.into(),
                expires_at: expires,
            },
            created_at: created,
        };
        let before = match stored {
            Stored::Nothing => None,
            Stored::Live | Stored::Answered => {
                Some(record("t1", Millis(now.0 - 10), Millis(now.0 + 60_000)))
            }
            Stored::Expired => Some(record("t1", Millis(now.0 - 90_000), Millis(now.0 - 30_000))),
            Stored::ExpiringNow => Some(record("t1", Millis(now.0 - 60_000), now)),
        };
        let mut before = before;
        if let Some(first) = &before {
            assert_eq!(
                f.begin_request(first).await.unwrap(),
                Begun::Started,
                "{stored:?}: set-up"
            );
        }
        if let (Stored::Answered, Some(first)) = (stored, before.as_mut()) {
            assert!(
                f.finish_request(&user, &key, "t1", &BookingAnswer::SoldOut)
                    .await
                    .unwrap()
            );
            first.state = RequestState::Done {
                answer: BookingAnswer::SoldOut,
            };
        }
        let mut second = record("t2", now, Millis(now.0 + 60_000));
        if answered_at_once {
            second.state = RequestState::Done {
                answer: BookingAnswer::SoldOut,
            };
        }
        let expected = if IdempotencyRecord::may_begin(before.as_ref(), now) {
            Begun::Started
        } else {
            Begun::Existing(
                before
                    .clone()
                    .expect("the rule refuses only a stored record"),
            )
        };
        let got = f.begin_request(&second).await.unwrap();
        assert_eq!(
            got, expected,
            "{stored:?}, answered at once {answered_at_once}: the rule's answer"
        );
        // What the key holds now: the second request's record exactly when it took the key.
        let again = record("t3", now, Millis(now.0 + 60_000));
        let holder = match f.begin_request(&again).await.unwrap() {
            Begun::Existing(r) => r,
            Begun::Started => panic!("{stored:?}: a live record must hold the key"),
        };
        let expected_holder = match expected {
            Begun::Started => second.clone(),
            Begun::Existing(r) => r,
        };
        assert_eq!(
            holder, expected_holder,
            "{stored:?}, answered at once {answered_at_once}: the record the key holds"
        );
    }
}
