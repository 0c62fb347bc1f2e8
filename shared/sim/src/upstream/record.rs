//! The record's types: the routes (as `infra/upstream-sim`'s stats name them, plus the users'
//! releases), each call with its arrival, answer, key and outcome, and each commit (a seat charged
//! to a user, its answer perhaps lost, its release). Plain data, public, read by the checkers.

use seatgate::domain::{Millis, SeatId, UserId};
use std::fmt;

/// Calls the record keeps at most (a run of the default workload makes a few thousand).
pub const CALL_LOG_CAPACITY: usize = 1_000_000;

/// The upstream's routes, as `infra/upstream-sim`'s stats name them (plus the users' releases).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Route {
    Reserve,
    Charge,
    Seat,
    Room,
    /// A user giving their seat up (not a call from seatgate; never faulted).
    Release,
}

impl Route {
    pub fn key(self) -> &'static str {
        match self {
            Route::Reserve => "POST /api/reservations",
            Route::Charge => "GET /api/charge",
            Route::Seat => "GET /api/seats",
            Route::Room => "GET /api/rooms",
            Route::Release => "release",
        }
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// Simulated time it arrived, and when it answered (`None`: still in flight, or abandoned).
    pub arrived: Millis,
    pub answered: Option<Millis>,
    pub route: Route,
    /// `seat=..`, `room=..`, `user=..` (a reserve: both seat and user).
    pub key: String,
    /// What it did or answered; `None` while in flight.
    pub outcome: Option<String>,
    /// The caller gave up (dropped the call) before it was handled.
    pub abandoned: bool,
    /// The instance that sent it (`None`: a user's release, or a handle no instance owns).
    pub caller: Option<usize>,
}

/// A committed reserve: the truth a checker compares intents with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    pub at: Millis,
    pub user_id: UserId,
    pub seat_id: SeatId,
    pub charge_id: String,
    /// The caller never heard of it.
    pub answer_lost: bool,
    /// When its holder released it, if they did.
    pub released_at: Option<Millis>,
}

/// The most calls of `route` in flight at one instant: each from its arrival to its answer (a
/// call never answered, to the record's last arrival or answer, so a lost answer counts against
/// the cap rather than for it). A call answered in the millisecond another arrives is not counted
/// with it. What the template's cap on reserves in flight is judged by.
pub fn peak_in_flight(calls: &[Call], route: Route) -> usize {
    let last = calls
        .iter()
        .map(|c| c.answered.unwrap_or(c.arrived))
        .max()
        .unwrap_or(Millis(0));
    // (time, +1 arrival / -1 answer): answers sort first within a millisecond.
    let mut edges: Vec<(Millis, i8)> = Vec::new();
    for call in calls.iter().filter(|c| c.route == route) {
        edges.push((call.arrived, 1));
        edges.push((call.answered.unwrap_or(last), -1));
    }
    edges.sort();
    let (mut now, mut peak) = (0usize, 0usize);
    for (_, step) in edges {
        if step > 0 {
            now += 1;
            peak = peak.max(now);
        } else {
            now = now.saturating_sub(1);
        }
    }
    peak
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(route: Route, arrived: i64, answered: Option<i64>) -> Call {
        Call {
            arrived: Millis(arrived),
            answered: answered.map(Millis),
            route,
            key: String::new(),
            outcome: None,
            abandoned: false,
            caller: Some(0),
        }
    }

    #[test]
    fn peak_in_flight_counts_overlaps_of_one_route_and_unanswered_calls_to_the_end() {
        let calls = [
            call(Route::Reserve, 0, Some(10)),
            call(Route::Reserve, 5, Some(20)),
            // Arrives as the first is answered: not with it.
            call(Route::Reserve, 10, Some(12)),
            call(Route::Charge, 6, Some(7)),
            // Never answered: in flight until the last answer (20), so with the second and third.
            call(Route::Reserve, 11, None),
        ];
        assert_eq!(peak_in_flight(&calls, Route::Reserve), 3);
        assert_eq!(peak_in_flight(&calls, Route::Charge), 1);
        assert_eq!(peak_in_flight(&calls[..2], Route::Reserve), 2);
        assert_eq!(peak_in_flight(&[], Route::Reserve), 0);
    }
}
