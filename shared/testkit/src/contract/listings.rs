//! Listings read a page at a time (an intent's history, a user's bookings): every backend pages
//! by key after the cursor, hands out a cursor only when more items follow, and keeps a page
//! stable when items are added after it was read.

#[allow(unused_imports)]
use super::fixtures::*;
use super::flights::{booking_of, new_flight};
#[allow(unused_imports)]
use super::*;
use crate::paging::{all_bookings, whole_history};
use seatgate::domain::{Page, PageSize};

fn size(n: u16) -> PageSize {
    PageSize::new(n).expect("a page size")
}

fn versions<C>(page: &Page<seatgate::domain::TransitionRecord, C>) -> Vec<u64> {
    page.items.iter().map(|r| r.version).collect()
}

pub async fn an_intents_history_pages_by_version(h: &Harness) {
    let t0 = h.now();
    let wait = waiting_intent(h, t0.plus(Duration::from_secs(600))).await;
    let first = applied(h, &wait, &request(&wait, t0, claim(t0))).await;
    let retry_at = t0.plus(Duration::from_secs(5));
    let rewait = Transition::Rewait {
        token: first.fencing_token,
        next_attempt_at: retry_at,
        due_at: retry_at,
        reason: Reason::SeatTaken,
        suppress: None,
    };
    let waiting = applied(h, &first, &request(&wait, t0, rewait)).await;
    let second = applied(h, &waiting, &request(&wait, retry_at, claim(retry_at))).await;
    let done = complete(second.fencing_token, None);
    let last = applied(h, &second, &request(&wait, retry_at, done)).await;
    assert_eq!(last.version, 5, "a creation and four transitions");
    let id = &wait.intent_id;

    let p1 = h.intents.history(id, None, size(2)).await.unwrap();
    assert_eq!((versions(&p1), p1.next), (vec![1, 2], Some(2)));
    let p2 = h.intents.history(id, p1.next, size(2)).await.unwrap();
    assert_eq!((versions(&p2), p2.next), (vec![3, 4], Some(4)));
    let p3 = h.intents.history(id, p2.next, size(2)).await.unwrap();
    assert_eq!(
        (versions(&p3), p3.next),
        (vec![5], None),
        "the last page hands out no cursor"
    );
    let exact = h.intents.history(id, None, size(5)).await.unwrap();
    assert_eq!(
        (versions(&exact), exact.next),
        ((1..=5).collect::<Vec<_>>(), None),
        "a page filled exactly by the last record hands out no cursor"
    );
    let past = h.intents.history(id, Some(5), size(2)).await.unwrap();
    assert_eq!((past.items.len(), past.next), (0, None));
    let unknown = h
        .intents
        .history(&IntentId::generate(), None, size(2))
        .await
        .unwrap();
    assert_eq!((unknown.items.len(), unknown.next), (0, None));

    let whole = whole_history(&*h.intents, id).await.unwrap();
    let paged: Vec<_> = [p1.items, p2.items, p3.items].concat();
    assert_eq!(whole, paged, "pages join into the whole history");
    assert_eq!(whole.last().map(|r| r.to), Some(last.status));
}

pub async fn a_users_bookings_page_by_booking_id_and_stay_put_as_more_are_made(h: &Harness) {
    let f = &h.flights;
    let now = h.now();
    let flight = new_flight(50, None, 1, now);
    f.create_flight(&flight).await.unwrap();
    let (me, other) = (new_user(), new_user());
    let mut mine = Vec::new();
    for _ in 0..5 {
        let b = booking_of(&flight, &me, 1, 0, now);
        f.book(&b, None, None, None).await.unwrap();
        mine.push(b);
        f.book(&booking_of(&flight, &other, 1, 0, now), None, None, None)
            .await
            .unwrap();
    }
    mine.sort_by(|a, b| a.booking_id.cmp(&b.booking_id));
    f.cancel_booking(&me, &flight.flight_id, &mine[1].booking_id, now)
        .await
        .unwrap();

    let p1 = f.bookings_of(&me, None, size(2)).await.unwrap();
    let ids = |p: &Page<Booking, BookingId>| -> Vec<BookingId> {
        p.items.iter().map(|b| b.booking_id.clone()).collect()
    };
    assert_eq!(
        ids(&p1),
        vec![mine[0].booking_id.clone(), mine[1].booking_id.clone()]
    );
    assert_eq!(
        p1.items[1].status,
        BookingStatus::Cancelled,
        "cancelled ones are listed"
    );
    assert_eq!(p1.next.as_ref(), Some(&mine[1].booking_id));

    // A booking made after page 1 was read sorts after it: page 1 stays as it was read.
    let later = booking_of(&flight, &me, 1, 0, now);
    assert!(
        later.booking_id > mine[4].booking_id,
        "booking ids are time-ordered"
    );
    f.book(&later, None, None, None).await.unwrap();
    mine.push(later);

    let p2 = f.bookings_of(&me, p1.next.as_ref(), size(2)).await.unwrap();
    assert_eq!(
        ids(&p2),
        vec![mine[2].booking_id.clone(), mine[3].booking_id.clone()]
    );
    let p3 = f.bookings_of(&me, p2.next.as_ref(), size(2)).await.unwrap();
    assert_eq!(
        ids(&p3),
        vec![mine[4].booking_id.clone(), mine[5].booking_id.clone()]
    );
    assert_eq!(p3.next, None, "the last page hands out no cursor");

    let all = all_bookings(&**f, &me).await.unwrap();
    assert_eq!(all.len(), 6);
    assert!(all.iter().all(|b| b.user_id == me), "only the user's own");
    let none = f.bookings_of(&new_user(), None, size(2)).await.unwrap();
    assert_eq!((none.items.len(), none.next), (0, None));
}
