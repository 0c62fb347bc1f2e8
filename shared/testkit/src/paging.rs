//! Whole listings read page by page, for tests that judge a store's complete history or a
//! user's every booking. Production code reads one page per request; a test that wants all of
//! them follows the cursors here, with a bound on the pages so a cursor that never ends fails
//! the test instead of hanging it.

use seatgate::domain::{
    Booking, BookingId, CheckoutHold, Flight, FlightHoldKey, HoldStatus, IntentId, Page, PageSize,
    TransitionRecord, UserId,
};
use seatgate::ports::{CheckoutHolds, Flights, Intents, StoreError};

/// More pages than any test's listing spans: a cursor loop past it is a bug in the adapter.
pub const MAX_PAGES: usize = 1_000;

/// Follows `next` from the first page until the last, at most [`MAX_PAGES`] pages.
async fn follow<T, C: Clone + PartialEq + std::fmt::Debug, F, Fut>(
    mut read: F,
) -> Result<Vec<T>, StoreError>
where
    F: FnMut(Option<C>) -> Fut,
    Fut: std::future::Future<Output = Result<Page<T, C>, StoreError>>,
{
    let mut all = Vec::new();
    let mut after: Option<C> = None;
    for _ in 0..MAX_PAGES {
        let page = read(after.clone()).await?;
        all.extend(page.items);
        match page.next {
            Some(next) => {
                assert_ne!(after.as_ref(), Some(&next), "a cursor that does not move");
                after = Some(next);
            }
            None => return Ok(all),
        }
    }
    panic!("a listing ran past {MAX_PAGES} pages");
}

/// The intent's whole history, in version order.
pub async fn whole_history(
    intents: &dyn Intents,
    id: &IntentId,
) -> Result<Vec<TransitionRecord>, StoreError> {
    follow(|after| intents.history(id, after, page_max())).await
}

/// All of the user's bookings, in booking id order.
pub async fn all_bookings(
    flights: &dyn Flights,
    user: &UserId,
) -> Result<Vec<Booking>, StoreError> {
    follow(|after: Option<BookingId>| async move {
        flights.bookings_of(user, after.as_ref(), page_max()).await
    })
    .await
}

/// All of a flight's holds in `status`, in listing order, `size` a page; every page but the last
/// full, as the port promises.
pub async fn all_flight_holds(
    holds: &dyn CheckoutHolds,
    flight: &Flight,
    status: HoldStatus,
    size: PageSize,
) -> Result<Vec<CheckoutHold>, StoreError> {
    follow(|after: Option<FlightHoldKey>| async move {
        let page = holds
            .flight_holds(flight, status, after.as_ref(), size)
            .await?;
        assert!(
            page.next.is_none() || page.items.len() == size.get(),
            "a page with more to follow is full: {} of {}",
            page.items.len(),
            size.get()
        );
        Ok(page)
    })
    .await
}

fn page_max() -> PageSize {
    PageSize::new(PageSize::MAX).expect("the largest page is a page size")
}
