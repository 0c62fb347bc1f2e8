//! What the users' requests add to a run's record beside the world's own: every booking answer
//! under its `Idempotency-Key`, the bookings listings and the intent histories read, each as the
//! client got it, for the idempotency and listing checkers.

use crate::checkers::idempotency::KeyedAnswers;
use crate::checkers::listing::{BookingsListing, HistoryRead};
use crate::client::Client;
use crate::world::World;
use seatgate::domain::{BookingAnswer, FlightId, IdempotencyKey, IntentId};
use std::sync::{Arc, Mutex, PoisonError};

/// The booking answers the users' clients got, as they got them.
pub(super) type Keyed = Arc<Mutex<Vec<KeyedAnswers>>>;

/// What a user's requests add to the record beside the world's own: booking answers by key,
/// and the listings read.
pub(super) struct Recorded {
    pub(super) keyed: Keyed,
    pub(super) listings: Listings,
}

/// The listings the users' clients read, as they finished them.
#[derive(Clone, Default)]
pub(super) struct Listings {
    bookings: Arc<Mutex<Vec<BookingsListing>>>,
    histories: Arc<Mutex<Vec<HistoryRead>>>,
}

impl Listings {
    /// Lists the user's bookings through `client`, every page, and records what it read.
    pub(super) async fn bookings(&self, world: &World, client: &Client, at_end: bool) {
        let at = world.now();
        let listed = client.bookings().await;
        self.bookings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(BookingsListing {
                user: client.user().clone(),
                at,
                at_end,
                bookings: listed.items,
                pages: listed.pages,
                complete: listed.complete,
            });
    }

    /// Reads `intent`'s history as the admin does, every page, and records what it read.
    pub(super) async fn history(&self, world: &World, client: &Client, intent: &IntentId) {
        let at = world.now();
        // The user asks only of intents they were given, so "no such intent" is recorded as a
        // read that found nothing, for the checker to judge.
        let read = match client.intent_history(intent).await {
            Ok(listed) => HistoryRead {
                intent: intent.clone(),
                at,
                found: true,
                records: listed.items,
                pages: listed.pages,
                complete: listed.complete,
            },
            Err(_) => HistoryRead {
                intent: intent.clone(),
                at,
                found: false,
                records: Vec::new(),
                pages: 0,
                complete: false,
            },
        };
        self.histories
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(read);
    }

    pub(super) fn take(&self) -> (Vec<BookingsListing>, Vec<HistoryRead>) {
        (
            std::mem::take(&mut *self.bookings.lock().unwrap_or_else(PoisonError::into_inner)),
            std::mem::take(
                &mut *self
                    .histories
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
            ),
        )
    }
}

/// Books under `key` through `client`, recording the answer under (user, key).
pub(super) async fn book_keyed(
    client: &Client,
    flight: &FlightId,
    key: &IdempotencyKey,
    head_count: u32,
    keyed: &Keyed,
) -> Result<BookingAnswer, String> {
    let answer = client.book(flight, head_count, Some(key)).await;
    let mut all = keyed.lock().unwrap_or_else(PoisonError::into_inner);
    let user = client.user();
    match all.iter_mut().find(|k| &k.user == user && &k.key == key) {
        Some(k) => k.answers.push(answer.clone()),
        None => all.push(KeyedAnswers {
            user: user.clone(),
            key: key.clone(),
            answers: vec![answer.clone()],
        }),
    }
    answer
}
