//! Checkout holds on the flash sale: a hold takes seats for the flight's hold TTL while the
//! buyer pays; a confirm turns it into its booking, a release or a lapse gives the seats back.
//!
//! A hold is made by the sale ([`super::FlightService::hold`], the booking's own path: rate
//! limit, idempotency record, sold-out cache); this service is the rest of its life. The store
//! decides every race (see [`crate::domain::checkout`]): this service maps the hold rule's
//! answers to what the caller sees. A repeated confirm answers the same booking; a repeated release the
//! released hold. Lapses are the reaper's: [`CheckoutService::lapse_due`] gives back each hold past
//! its deadline, one conditional transaction each, within the pass's budget.

use super::known_flights::KnownFlights;
use super::with_retry;
use crate::domain::{
    Booking, CheckoutHold, FlightHoldKey, FlightId, HoldAction, HoldId, HoldRefusal, HoldStatus,
    Millis, Page, PageSize, UserId,
};
use crate::metrics::{self, Metric};
use crate::ports::{CheckoutHolds, Clock, Random, ResolveHoldError, StoreError};
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use tracing::info;

/// How a hold's confirm, release or extension ended when it did not do what was asked.
#[derive(Debug, Error)]
pub enum HoldError {
    #[error("no such hold")]
    NotFound,
    /// Past its deadline: its seats are (or are about to be) back on sale.
    #[error("the hold expired; its seats went back on sale")]
    Expired,
    #[error("the hold was released")]
    Released,
    #[error("the hold was confirmed")]
    Confirmed,
    #[error("the hold is at its maximum lifetime or no longer held")]
    NotExtendable,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a confirm came to: the booking, and whether this request made it (`false`: a repeat).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirmed {
    pub booking: Booking,
    pub new: bool,
}

/// What one reaper pass did with the holds past their deadline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LapseReport {
    /// Holds given back by this pass.
    pub lapsed: usize,
    /// Listed as due but resolved meanwhile (confirmed, released, or lapsed by another pass).
    pub already_resolved: usize,
    /// Due holds left for the next pass (out of budget).
    pub left: usize,
}

/// A checkout hold's life once made: read, confirm, release, extend, and lapse past its
/// deadline (the reaper's). Holding only its ports: the holds, the flights it reads the hold
/// times from, the clock and randomness for retries. Made by the sale
/// ([`super::FlightService::hold`]), which shares the booking's path.
pub struct CheckoutService {
    holds: Arc<dyn CheckoutHolds>,
    known: KnownFlights,
    clock: Arc<dyn Clock>,
    random: Arc<dyn Random>,
}

impl CheckoutService {
    pub(super) fn new(ports: &super::Ports, known: KnownFlights) -> Self {
        CheckoutService {
            holds: ports.holds.clone(),
            known,
            clock: ports.clock.clone(),
            random: ports.random.clone(),
        }
    }

    /// The user's hold on `flight_id`; another user's is not found. A hold past its deadline
    /// reads as `LAPSED` even before the reaper returns it: it can never be confirmed.
    pub async fn hold_of(
        &self,
        user: &UserId,
        flight_id: &FlightId,
        id: &HoldId,
    ) -> Result<CheckoutHold, HoldError> {
        let found = with_retry(&*self.random, || self.holds.hold(user, id)).await?;
        match found {
            Some(h) if h.user_id == *user && h.flight_id == *flight_id => {
                Ok(as_seen(h, self.clock.now()))
            }
            _ => Err(HoldError::NotFound),
        }
    }

    /// How many holds one page of `GET /me/holds` lists.
    pub const HOLDS_PAGE: PageSize = match PageSize::new(20) {
        Some(size) => size,
        None => panic!("page size out of bounds"),
    };

    /// One page of the user's holds, oldest first, after hold `after`.
    pub async fn holds_of(
        &self,
        user: &UserId,
        after: Option<&HoldId>,
    ) -> Result<Page<CheckoutHold, HoldId>, StoreError> {
        let now = self.clock.now();
        let page = with_retry(&*self.random, || {
            self.holds.holds_of(user, after, Self::HOLDS_PAGE)
        })
        .await?;
        Ok(Page {
            items: page.items.into_iter().map(|h| as_seen(h, now)).collect(),
            next: page.next,
        })
    }

    /// How many holds one page of `GET /admin/flights/{id}/holds` lists.
    pub const FLIGHT_HOLDS_PAGE: PageSize = match PageSize::new(50) {
        Some(size) => size,
        None => panic!("page size out of bounds"),
    };

    /// One page of the flight's holds in `status`, by shard then id, after `after`: the
    /// operator's view of its live holds and its lapses. Statuses as stored, not as a buyer
    /// sees them: a hold past its deadline stays `HELD` here until the reaper has returned its
    /// seats (its `expires_at` shows it is due), which is what an operator watching the reaper
    /// needs to see.
    pub async fn flight_holds(
        &self,
        flight_id: &FlightId,
        status: HoldStatus,
        after: Option<&FlightHoldKey>,
    ) -> Result<Page<CheckoutHold, FlightHoldKey>, super::flights::ReadFlightError> {
        let Some(known) = self.known.get(flight_id).await? else {
            return Err(super::flights::ReadFlightError::NotFound);
        };
        Ok(with_retry(&*self.random, || {
            self.holds
                .flight_holds(&known.flight, status, after, Self::FLIGHT_HOLDS_PAGE)
        })
        .await?)
    }

    /// Confirms the user's live hold into its booking (no second decrement: the held seats are
    /// the booking's). A repeat answers the same booking.
    pub async fn confirm_hold(
        &self,
        user: &UserId,
        flight_id: &FlightId,
        id: &HoldId,
    ) -> Result<Confirmed, HoldError> {
        match self
            .resolve(user, flight_id, id, HoldAction::Confirm)
            .await?
        {
            Ok(hold) => {
                info!(flight_id = %flight_id, hold_id = %id, booking_id = %hold.booking_id, "hold confirmed");
                metrics::count(Metric::Checkout, &[("event", "confirmed")], 1);
                Ok(Confirmed {
                    booking: booking_of(&hold)?,
                    new: true,
                })
            }
            Err(HoldRefusal::Confirmed(hold)) => Ok(Confirmed {
                booking: booking_of(&hold)?,
                new: false,
            }),
            Err(refusal) => Err(refused(refusal)),
        }
    }

    /// Gives the user's hold back. A repeat answers the released hold; a hold already past its
    /// deadline is given back as a lapse and answered [`HoldError::Expired`].
    pub async fn release_hold(
        &self,
        user: &UserId,
        flight_id: &FlightId,
        id: &HoldId,
    ) -> Result<CheckoutHold, HoldError> {
        match self
            .resolve(user, flight_id, id, HoldAction::Release)
            .await?
        {
            Ok(hold) => {
                info!(flight_id = %flight_id, hold_id = %id, status = hold.status.as_str(), "hold given back");
                let event = if hold.status == HoldStatus::Lapsed {
                    "lapsed"
                } else {
                    "released"
                };
                metrics::count(Metric::Checkout, &[("event", event)], 1);
                self.known.invalidate(flight_id).await;
                if hold.status == HoldStatus::Lapsed {
                    return Err(HoldError::Expired);
                }
                Ok(hold)
            }
            Err(HoldRefusal::Released(hold)) => Ok(*hold),
            Err(refusal) => Err(refused(refusal)),
        }
    }

    /// Moves the user's live hold's deadline to now plus the flight's hold TTL, never past its
    /// creation plus the flight's maximum.
    pub async fn extend_hold(
        &self,
        user: &UserId,
        flight_id: &FlightId,
        id: &HoldId,
    ) -> Result<CheckoutHold, HoldError> {
        let times = match self.known.get(flight_id).await? {
            Some(known) => known.flight.checkout,
            None => return Err(HoldError::NotFound),
        };
        match self
            .resolve(user, flight_id, id, HoldAction::Extend(times))
            .await?
        {
            Ok(hold) => Ok(hold),
            Err(HoldRefusal::NotExtendable(_) | HoldRefusal::Expired(_)) => {
                Err(HoldError::NotExtendable)
            }
            Err(refusal) => Err(refused(refusal)),
        }
    }

    async fn resolve(
        &self,
        user: &UserId,
        flight_id: &FlightId,
        id: &HoldId,
        action: HoldAction,
    ) -> Result<Result<CheckoutHold, HoldRefusal>, StoreError> {
        let now = self.clock.now();
        with_retry(&*self.random, || async {
            match self
                .holds
                .resolve_hold(user, flight_id, id, action, now)
                .await
            {
                Ok(h) => Ok(Ok(h)),
                Err(ResolveHoldError::Refused(r)) => Ok(Err(r)),
                Err(ResolveHoldError::Store(e)) => Err(e),
            }
        })
        .await
    }

    /// Gives back up to `limit` holds past their deadline, starting none once `budget` is
    /// spent: the reaper's share of the flash sale.
    pub async fn lapse_due(
        &self,
        limit: usize,
        budget: Duration,
    ) -> Result<LapseReport, StoreError> {
        let started = self.clock.now();
        let now = started;
        let due = with_retry(&*self.random, || self.holds.due_holds(now, limit)).await?;
        let mut report = LapseReport::default();
        let mut returned: Vec<FlightId> = Vec::new();
        for (i, due_hold) in due.iter().enumerate() {
            let (flight_id, hold_id) = (&due_hold.flight_id, &due_hold.hold_id);
            if self.clock.now().since(started) >= budget {
                report.left = due.len() - i;
                break;
            }
            let now: Millis = self.clock.now();
            let result = with_retry(&*self.random, || async {
                match self
                    .holds
                    .resolve_hold(
                        &due_hold.user_id,
                        flight_id,
                        hold_id,
                        HoldAction::Lapse,
                        now,
                    )
                    .await
                {
                    Ok(h) => Ok(Some(h)),
                    Err(ResolveHoldError::Refused(_)) => Ok(None),
                    Err(ResolveHoldError::Store(e)) => Err(e),
                }
            })
            .await?;
            match result {
                Some(hold) => {
                    info!(flight_id = %flight_id, hold_id = %hold_id, head_count = hold.head_count, "hold lapsed");
                    metrics::count(Metric::Checkout, &[("event", "lapsed")], 1);
                    report.lapsed += 1;
                    if !returned.contains(flight_id) {
                        returned.push(flight_id.clone());
                    }
                }
                None => report.already_resolved += 1,
            }
        }
        for flight_id in &returned {
            self.known.invalidate(flight_id).await;
        }
        Ok(report)
    }
}

/// The hold as its owner should see it at `now`.
fn as_seen(hold: CheckoutHold, now: Millis) -> CheckoutHold {
    if hold.status == HoldStatus::Held && now >= hold.expires_at {
        CheckoutHold {
            status: HoldStatus::Lapsed,
            ..hold
        }
    } else {
        hold
    }
}

fn booking_of(hold: &CheckoutHold) -> Result<Booking, HoldError> {
    hold.booking().ok_or_else(|| {
        HoldError::Store(StoreError::Corrupt(format!(
            "hold {} confirmed without a confirm time",
            hold.hold_id
        )))
    })
}

fn refused(refusal: HoldRefusal) -> HoldError {
    match refusal {
        HoldRefusal::NotFound | HoldRefusal::NotDue => HoldError::NotFound,
        HoldRefusal::Expired(_) => HoldError::Expired,
        HoldRefusal::Released(_) => HoldError::Released,
        HoldRefusal::Confirmed(_) => HoldError::Confirmed,
        HoldRefusal::NotExtendable(_) => HoldError::NotExtendable,
    }
}
