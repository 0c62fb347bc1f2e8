//! The baselines of `seatgate-bench compare` (issue 21): the flash-sale routes served by the
//! usual alternatives to seatgate's store, so one driver can measure them side by side.
//!
//! Every baseline is the same axum app ([`server`]) with the runner's own JWT check
//! (`seatgate_local::auth`); only the [`Inventory`] behind it differs. Each inventory keeps its
//! bookings where the driver can read them back (`GET /me/bookings`), so a 201 the store did not
//! keep, or a seat sold twice, shows in the driver's checks as it does for seatgate.
//!
//! One baseline is not an inventory: [`direct`] is seed 000's direct confirm, the runner's
//! confirm routes with the request itself writing the upstream, for the same-seat burst
//! (`compare --burst`). It shares the server's JWT check and its start and stop.

pub(crate) mod direct;
pub(crate) mod mariadb;
pub(crate) mod noop;
pub(crate) mod postgres;
mod process;
pub(crate) mod redis;
pub(crate) mod server;

use std::future::Future;

/// What a booking attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Booked {
    /// The seats were taken and the booking stored under this id.
    Created(String),
    /// Fewer seats left than asked for.
    SoldOut,
    /// The strategy gave up without knowing (an optimistic version conflict after its tries):
    /// answered `409 conflict`, which the driver counts apart from `sold_out`.
    Conflict,
}

/// A stored booking, as `GET /me/bookings` lists it.
#[derive(Debug, Clone)]
pub(crate) struct BookingRow {
    pub(crate) booking_id: String,
    pub(crate) flight_id: String,
    pub(crate) head_count: i64,
    pub(crate) created_ms: i64,
}

/// Why a store call failed: `Busy` is a lock not obtained in time (answered 503), anything
/// else a 500.
#[derive(Debug)]
pub(crate) enum StoreError {
    Busy(String),
    Other(anyhow::Error),
}

impl<E: Into<anyhow::Error>> From<E> for StoreError {
    fn from(e: E) -> Self {
        StoreError::Other(e.into())
    }
}

pub(crate) type StoreResult<T> = Result<T, StoreError>;

/// One inventory strategy. `create_flight` answers `false` when the id is taken.
pub(crate) trait Inventory: Send + Sync + 'static {
    fn create_flight(
        &self,
        flight: &str,
        capacity: i64,
    ) -> impl Future<Output = StoreResult<bool>> + Send;
    fn book(
        &self,
        flight: &str,
        user: &str,
        head_count: i64,
    ) -> impl Future<Output = StoreResult<Booked>> + Send;
    /// `(capacity, available)`, `None` for an unknown flight.
    fn flight(&self, flight: &str) -> impl Future<Output = StoreResult<Option<(i64, i64)>>> + Send;
    fn bookings(&self, user: &str) -> impl Future<Output = StoreResult<Vec<BookingRow>>> + Send;
}

/// A booking id that sorts by creation, as seatgate's do.
pub(crate) fn new_booking_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
