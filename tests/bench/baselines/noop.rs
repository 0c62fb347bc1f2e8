//! The load generator's ceiling: the flash-sale routes over an in-memory inventory that does
//! next to nothing (one mutex, no I/O), behind the same axum app and JWT check as the
//! baselines.
//!
//! It still keeps its bookings, so the driver's correctness checks pass and its saturation
//! search stops only at latency, errors or drops: whatever rate this reaches is the most the
//! driver (and this machine's HTTP path) can show for any target. A target whose saturation is
//! at or above it is reported as bounded by the generator, not by its store.

use super::{Booked, BookingRow, Inventory, StoreResult, new_booking_id, now_ms};
use std::collections::HashMap;
use std::sync::Mutex;

/// Bookings kept at most; past it a booking is refused with an error (bounds the memory of a
/// long saturation search).
const MAX_BOOKINGS: usize = 2_000_000;

#[derive(Default)]
struct State {
    flights: HashMap<String, (i64, i64)>,
    by_user: HashMap<String, Vec<BookingRow>>,
    bookings: usize,
}

#[derive(Default)]
pub(crate) struct Noop {
    state: Mutex<State>,
}

impl Inventory for Noop {
    async fn create_flight(&self, flight: &str, capacity: i64) -> StoreResult<bool> {
        let mut s = self.state.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        if s.flights.contains_key(flight) {
            return Ok(false);
        }
        s.flights.insert(flight.to_owned(), (capacity, capacity));
        Ok(true)
    }

    async fn book(&self, flight: &str, user: &str, head_count: i64) -> StoreResult<Booked> {
        let mut s = self.state.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        if s.bookings >= MAX_BOOKINGS {
            return Err(anyhow::anyhow!("more than {MAX_BOOKINGS} bookings kept").into());
        }
        let Some((_, available)) = s.flights.get_mut(flight) else {
            return Ok(Booked::SoldOut);
        };
        if *available < head_count {
            return Ok(Booked::SoldOut);
        }
        *available -= head_count;
        let id = new_booking_id();
        s.bookings += 1;
        s.by_user
            .entry(user.to_owned())
            .or_default()
            .push(BookingRow {
                booking_id: id.clone(),
                flight_id: flight.to_owned(),
                head_count,
                created_ms: now_ms(),
            });
        Ok(Booked::Created(id))
    }

    async fn flight(&self, flight: &str) -> StoreResult<Option<(i64, i64)>> {
        let s = self.state.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        Ok(s.flights.get(flight).copied())
    }

    async fn bookings(&self, user: &str) -> StoreResult<Vec<BookingRow>> {
        let s = self.state.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        Ok(s.by_user.get(user).cloned().unwrap_or_default())
    }
}
