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
