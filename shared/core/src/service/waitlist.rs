//! The flash sale's waiting list: a buyer a flight cannot sell to joins it, and seats that come
//! back are offered to the list in order before anyone can book them.
//!
//! This service only joins, shows and leaves entries. Serving the list is the stores' work inside
//! every return of seats (see [`crate::domain::waitlist`]), so that no booking can slip between a
//! seat's return and its offer; an offer is a hold in the waiting user's name, confirmed,
//! released and lapsed through the hold routes like any other.

use super::known_flights::KnownFlights;
use super::{AdmitError, with_retry};
use crate::domain::{
    EntryId, FlightId, LimitedRoute, MAX_HEAD_COUNT, UserId, WaitEntry, WaitRefusal, WaitStatus,
};
use crate::ports::{Clock, Ids, Random, StoreError, WaitingLists, WaitlistError, WaitlistSummary};
use std::sync::Arc;
use thiserror::Error;
use tracing::info;

/// Why a join, a look or a leave did not do what was asked.
#[derive(Debug, Error)]
pub enum WaitlistRequestError {
    #[error("headCount must be 1 to {MAX_HEAD_COUNT}")]
    HeadCount,
    #[error("no such flight")]
    NoSuchFlight,
    #[error("seats are available: book them instead")]
    SeatsAvailable,
    #[error("already on this flight's waiting list")]
    AlreadyWaiting,
    #[error("the flight's per-user limit would be passed")]
    LimitReached,
    #[error("no such waiting-list entry")]
    NotFound,
    /// Served: the offer is a hold, released through the hold's route.
    #[error("an offer was made to this entry; release its hold instead")]
    Offered,
    #[error("too many requests from this user; retry after Retry-After seconds")]
    RateLimited(std::time::Duration),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An entry as its owner sees it: with its place in the list while it waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryView {
    pub entry: WaitEntry,
    /// 1 for the next to be served; `None` once served or left.
    pub position: Option<u64>,
}

/// A flight's waiting list: join, read your place, leave, and the operator's summary. Offers
/// are made by the store in the write that returns seats (a cancel, a release, a lapse), so
/// this service never serves the line itself. Holding only its ports: the lists, the flights
/// it checks, the per-user rate limit a join counts against, and the clock, randomness and ids.
pub struct WaitlistService {
    waitlist: Arc<dyn WaitingLists>,
    known: KnownFlights,
    limiter: super::RateLimiter,
    clock: Arc<dyn Clock>,
    random: Arc<dyn Random>,
    ids: Arc<dyn Ids>,
}

impl WaitlistService {
    pub(super) fn new(
        ports: &super::Ports,
        limiter: super::RateLimiter,
        known: KnownFlights,
    ) -> Self {
        WaitlistService {
            waitlist: ports.waitlist.clone(),
            known,
            limiter,
            clock: ports.clock.clone(),
            random: ports.random.clone(),
            ids: ports.ids.clone(),
        }
    }
    /// Puts `user` on `flight_id`'s waiting list for `head_count` seats, if a booking of that
    /// many would be refused now. Rate-limited as a booking is.
    pub async fn join_waitlist(
        &self,
        user: &UserId,
        flight_id: &FlightId,
        head_count: u32,
    ) -> Result<EntryView, WaitlistRequestError> {
        if !(1..=MAX_HEAD_COUNT).contains(&head_count) {
            return Err(WaitlistRequestError::HeadCount);
        }
        let Some(known) = self.known.get(flight_id).await? else {
            return Err(WaitlistRequestError::NoSuchFlight);
        };
        match self.limiter.admit(user, LimitedRoute::Book).await {
            Ok(()) => {}
            Err(AdmitError::Limited(after)) => {
                return Err(WaitlistRequestError::RateLimited(after));
            }
            Err(AdmitError::Store(e)) => return Err(e.into()),
        }
        let entry = WaitEntry::new(
            EntryId::from_uuid(self.ids.next_uuid()),
            flight_id.clone(),
            user.clone(),
            head_count,
            self.clock.now(),
        );
        let max = known.flight.max_per_user;
        with_retry(&*self.random, || async {
            match self.waitlist.join_waitlist(&entry, max).await {
                Ok(()) => Ok(Ok(())),
                Err(WaitlistError::Refused(r)) => Ok(Err(r)),
                Err(WaitlistError::Store(e)) => Err(e),
            }
        })
        .await?
        .map_err(refused)?;
        info!(flight_id = %flight_id, entry_id = %entry.entry_id, head_count, "joined the waiting list");
        self.entry_view(entry).await
    }

    /// The user's entry `id` on `flight_id`, with its position while it waits.
    pub async fn wait_entry(
        &self,
        user: &UserId,
        flight_id: &FlightId,
        id: &EntryId,
    ) -> Result<EntryView, WaitlistRequestError> {
        let found = with_retry(&*self.random, || {
            self.waitlist.wait_entry(user, flight_id, id)
        })
        .await?
        .ok_or(WaitlistRequestError::NotFound)?;
        self.entry_view(found).await
    }

    /// Takes the user's entry off the list (a repeat answers the entry as left).
    pub async fn leave_waitlist(
        &self,
        user: &UserId,
        flight_id: &FlightId,
        id: &EntryId,
    ) -> Result<WaitEntry, WaitlistRequestError> {
        let now = self.clock.now();
        let left = with_retry(&*self.random, || async {
            match self.waitlist.leave_waitlist(user, flight_id, id, now).await {
                Ok(e) => Ok(Ok(e)),
                Err(WaitlistError::Refused(r)) => Ok(Err(r)),
                Err(WaitlistError::Store(e)) => Err(e),
            }
        })
        .await?
        .map_err(refused)?;
        info!(flight_id = %flight_id, entry_id = %id, "left the waiting list");
        Ok(left)
    }

    /// The list's length and its next entry, for the operator; an unknown flight is not found.
    pub async fn waitlist_of(
        &self,
        flight_id: &FlightId,
    ) -> Result<WaitlistSummary, super::flights::ReadFlightError> {
        if self.known.get(flight_id).await?.is_none() {
            return Err(super::flights::ReadFlightError::NotFound);
        }
        Ok(with_retry(&*self.random, || self.waitlist.waitlist_summary(flight_id)).await?)
    }

    async fn entry_view(&self, entry: WaitEntry) -> Result<EntryView, WaitlistRequestError> {
        let position = match entry.status {
            WaitStatus::Waiting => Some(
                with_retry(&*self.random, || {
                    self.waitlist
                        .waiting_ahead(&entry.flight_id, &entry.entry_id)
                })
                .await?
                    + 1,
            ),
            WaitStatus::Offered | WaitStatus::Left => None,
        };
        Ok(EntryView { entry, position })
    }
}

fn refused(refusal: WaitRefusal) -> WaitlistRequestError {
    match refusal {
        WaitRefusal::SeatsAvailable => WaitlistRequestError::SeatsAvailable,
        WaitRefusal::AlreadyWaiting(_) => WaitlistRequestError::AlreadyWaiting,
        WaitRefusal::LimitReached => WaitlistRequestError::LimitReached,
        WaitRefusal::NotFound => WaitlistRequestError::NotFound,
        WaitRefusal::Offered(_) => WaitlistRequestError::Offered,
    }
}
