//! The moves of the default workload that take more than one request: a waiter's turn in line,
//! a hold confirmed many times at once, the eager client's burst, the limited sale's opening,
//! and a refused buyer who comes back with the same key. Each has a stated bound on its
//! requests and polls.

use super::record::{Keyed, book_keyed};
use super::{
    COME_BACK_EVERY, COME_BACK_POLLS, COME_BACKS, CONFIRMS_AT_ONCE, EAGER_BURST,
    FIRST_WAITER_PATIENCE, LIMIT_PER_USER, LIMITED_RUSH, LINE_AT_OPENING, Mix, OPENING_RUSH,
    RUSH_CANCELLED_AFTER, eager_flight, limited_flight,
};
use crate::client::{Client, HoldAsk};
use seatgate::domain::{BookingAnswer, BookingId, FlightId, HoldId, IdempotencyKey};
use std::time::Duration;

/// [`CONFIRMS_AT_ONCE`] confirms of one hold sent at once, spread over the instances: whether
/// any was answered confirmed.
pub(super) async fn confirm_many(
    client: &Client,
    flight: &FlightId,
    hold: &HoldId,
    instances: usize,
) -> bool {
    let sends: Vec<_> = (0..CONFIRMS_AT_ONCE)
        .map(|k| {
            let (client, flight, hold) = (client.on(k % instances), flight.clone(), hold.clone());
            tokio::spawn(async move { client.on_hold(&flight, &hold, HoldAsk::Confirm).await })
        })
        .collect();
    let mut confirmed = false;
    for send in sends {
        confirmed |= send.await.expect("a confirm").is_ok();
    }
    confirmed
}

/// The eager client's burst: [`EAGER_BURST`] bookings of one seat on [`eager_flight`], each
/// under its own key, sent at once; the bookings made.
pub(super) async fn eager_burst(
    client: &Client,
    i: usize,
    n: u32,
    keyed: &Keyed,
) -> Vec<BookingId> {
    let sends: Vec<_> = (0..EAGER_BURST)
        .map(|b| {
            let (client, keyed) = (client.clone(), keyed.clone());
            let key = IdempotencyKey::parse(&format!("key-{i:02}-{n}-{b}"))
                .expect("a valid idempotency key");
            tokio::spawn(async move { book_keyed(&client, &eager_flight(), &key, 1, &keyed).await })
        })
        .collect();
    let mut booked = Vec::new();
    for send in sends {
        if let Ok(BookingAnswer::Booked { booking }) = send.await.expect("a burst's booking") {
            booked.push(booking.booking_id);
        }
    }
    booked
}

/// A waiter's turn: joins the list for `head_count` seats, polls the entry (every 200 ms, for
/// `patience`: at most 40 polls), then confirms the offer if one came and `takes_offer`, walks away from it
/// otherwise (its hold lapses), or leaves the list. The booking an offer became, if any; `Err`,
/// the join's refusal.
pub(super) async fn wait_in_line(
    client: &Client,
    flight: &FlightId,
    head_count: u32,
    patience: Duration,
    takes_offer: bool,
) -> Result<Option<BookingId>, String> {
    const EVERY: Duration = Duration::from_millis(200);
    let joined = client.waitlist(flight, head_count, None).await?;
    let id = joined.entry.entry_id;
    let mut offer = None;
    // Bounded: one poll per 200 ms of patience (at most 20).
    for _ in 0..patience.as_millis().div_ceil(EVERY.as_millis()) {
        tokio::time::sleep(EVERY).await;
        if let Ok(view) = client
            .waitlist(flight, head_count, Some((&id, false)))
            .await
            && view.entry.offer.is_some()
        {
            offer = view.entry.offer;
            break;
        }
    }
    Ok(match offer {
        Some(offer) if takes_offer => client
            .on_hold(flight, &offer.hold_id, HoldAsk::Confirm)
            .await
            .ok()
            .map(|()| id.offer_booking_id()),
        Some(_) => None,
        None => {
            // Refused `offer_made` if an offer came since the last poll: it will lapse.
            let _ = client.waitlist(flight, head_count, Some((&id, true))).await;
            None
        }
    })
}

/// The limited sale's opening ([`Mix::limited`]): [`LIMITED_RUSH`] users after the opening rush
/// book [`LIMIT_PER_USER`] seats each at once, (with [`Mix::waiters`]) the next joins its
/// list [`LINE_AT_OPENING`] later and waits in line, taking any offer, and the one after is
/// refused and comes back ([`refused_comes_back`]).
pub(super) fn limited_rush(
    users: &[Client],
    mix: Mix,
    keyed: &Keyed,
) -> Vec<tokio::task::JoinHandle<()>> {
    if !mix.limited {
        return Vec::new();
    }
    let mut tasks: Vec<_> = (OPENING_RUSH..OPENING_RUSH + LIMITED_RUSH)
        .map(|i| {
            let (client, keyed) = (users[i].on(i), keyed.clone());
            tokio::spawn(async move {
                let key = IdempotencyKey::parse(&format!("key-{i:02}-limited-opening"))
                    .expect("a valid idempotency key");
                let booked =
                    book_keyed(&client, &limited_flight(), &key, LIMIT_PER_USER, &keyed).await;
                // They change their minds after the list has formed, so the seats come back
                // to meet it (an offer in every seed) and the sale goes on.
                if let Ok(BookingAnswer::Booked { booking }) = booked {
                    tokio::time::sleep(RUSH_CANCELLED_AFTER * (i - OPENING_RUSH + 1) as u32).await;
                    let _ = client
                        .cancel_booking(&limited_flight(), &booking.booking_id)
                        .await;
                }
            })
        })
        .collect();
    if mix.waiters {
        let i = OPENING_RUSH + LIMITED_RUSH;
        let client = users[i].on(i);
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(LINE_AT_OPENING).await;
            let _ = wait_in_line(&client, &limited_flight(), 1, FIRST_WAITER_PATIENCE, true).await;
        }));
    }
    let i = OPENING_RUSH + LIMITED_RUSH + 1;
    let (client, keyed) = (users[i].on(i), keyed.clone());
    tasks.push(tokio::spawn(async move {
        refused_comes_back(&client, i, &keyed).await;
    }));
    tasks
}

/// A buyer refused at the sold-out limited sale who comes back with the same key once seats
/// are on sale again, as a user whose client shows the flight and retries the request does:
/// half of [`LINE_AT_OPENING`] after the opening has sold it out, they book under one key and
/// then under a second on the same instance (the first refusal tells that instance's cache the
/// sale is sold out, so the second is answered from the cache, its key's record put already
/// answered: `Flights::begin_request`); then, from the first of the rush's cancels, they read
/// the flight every [`COME_BACK_EVERY`] ([`COME_BACK_POLLS`] reads, each on the next instance,
/// taken modulo their count) and send the second key again on that instance whenever the read
/// shows seats on sale, at most [`COME_BACKS`] times. Every answer under the key must be the
/// first again, though a fresh attempt would book one of those seats: a refusal's record that
/// was never kept shows as a booking.
async fn refused_comes_back(client: &Client, i: usize, keyed: &Keyed) {
    let flight = limited_flight();
    let key = |n: &str| {
        IdempotencyKey::parse(&format!("key-{i:02}-refused-{n}")).expect("a valid idempotency key")
    };
    let (first, second) = (key("first"), key("again"));
    tokio::time::sleep(LINE_AT_OPENING / 2).await;
    let _ = book_keyed(client, &flight, &first, 1, keyed).await;
    let _ = book_keyed(client, &flight, &second, 1, keyed).await;
    tokio::time::sleep(RUSH_CANCELLED_AFTER - LINE_AT_OPENING / 2).await;
    let mut sent = 0;
    // Bounded: COME_BACK_POLLS reads, COME_BACKS replays.
    for n in 0..COME_BACK_POLLS {
        if sent == COME_BACKS {
            break;
        }
        tokio::time::sleep(COME_BACK_EVERY).await;
        let on = client.on(i + n);
        if on
            .flight(&flight)
            .await
            .is_ok_and(|seen| seen.available.iter().any(|&a| a > 0))
        {
            let _ = book_keyed(&on, &flight, &second, 1, keyed).await;
            sent += 1;
        }
    }
}
