//! Flash-sale inventory: flight options with a counted capacity, bookings against it, and the
//! idempotency records that make a retried booking return its first answer.
//!
//! Seed 004 oversold with a lock-free check-then-write and then bought correctness back with
//! locks. Here a booking is one conditional decrement (`available >= k`) in the same
//! transaction as the booking record, so the count can never go below zero at any rate, and
//! nothing is ever locked. One counter item has a write ceiling (about 1,000 writes/s on
//! DynamoDB), so a flight may split its capacity over several shards: each booking takes all its
//! seats from one shard (never split: all or nothing stays one condition), so the shards together
//! can never sell more than the capacity. The price: a shard may say "not enough" while another
//! still has stock; the service then tries the other shards, and a flight is marked sold out only
//! when every shard is at zero. Cancelled seats go back to the shard they came from.

use super::{Millis, UserId};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Seats one booking may take.
pub const MAX_HEAD_COUNT: u32 = 9;
/// Counter items one flight may spread over (one transaction creates them all).
pub const MAX_SHARDS: u32 = 16;
pub const MAX_CAPACITY: u32 = 1_000_000;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FlightError {
    #[error("capacity must be 1 to {MAX_CAPACITY}")]
    Capacity,
    #[error("shards must be 1 to {MAX_SHARDS} and at most the capacity")]
    Shards,
    #[error("max_per_user must be at least 1")]
    MaxPerUser,
}

macro_rules! token_id {
    ($(#[$m:meta])* $name:ident, $what:literal, $max:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub fn parse(s: &str) -> Result<Self, super::IdError> {
                super::ids::check(s, $what, $max)?;
                Ok($name(s.to_owned()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = super::IdError;
            fn try_from(s: String) -> Result<Self, super::IdError> {
                $name::parse(&s)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

token_id!(
    /// A flight option on sale, e.g. `KE-081-2026-12-24`.
    FlightId,
    "flight_id",
    64
);
token_id!(
    /// One booking; generated (a UUID v7).
    BookingId,
    "booking_id",
    64
);
token_id!(
    /// The client's `Idempotency-Key`: retrying under it returns the first answer.
    IdempotencyKey,
    "idempotency_key",
    128
);

impl BookingId {
    pub fn generate() -> Self {
        BookingId(uuid::Uuid::now_v7().to_string())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flight {
    pub flight_id: FlightId,
    pub capacity: u32,
    /// Seats one user may hold on this flight at once, if limited.
    pub max_per_user: Option<u32>,
    pub shards: u32,
    pub created_at: Millis,
}

impl Flight {
    pub fn new(
        flight_id: FlightId,
        capacity: u32,
        max_per_user: Option<u32>,
        shards: u32,
        now: Millis,
    ) -> Result<Self, FlightError> {
        if !(1..=MAX_CAPACITY).contains(&capacity) {
            return Err(FlightError::Capacity);
        }
        if !(1..=MAX_SHARDS).contains(&shards) || shards > capacity {
            return Err(FlightError::Shards);
        }
        if max_per_user == Some(0) {
            return Err(FlightError::MaxPerUser);
        }
        Ok(Flight {
            flight_id,
            capacity,
            max_per_user,
            shards,
            created_at: now,
        })
    }

    /// Shard `shard`'s share of the capacity: even, the remainder on the first shards.
    pub fn shard_capacity(&self, shard: u32) -> u32 {
        let base = self.capacity / self.shards;
        base + u32::from(shard < self.capacity % self.shards)
    }
}

/// A flight and what is left of it, per shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inventory {
    pub flight: Flight,
    /// Seats left in each shard, indexed by shard.
    pub available: Vec<u32>,
    /// Marked when every shard reached zero (and cleared by a cancel).
    pub sold_out: bool,
}

impl Inventory {
    pub fn available(&self) -> u32 {
        self.available.iter().sum()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BookingStatus {
    Booked,
    Cancelled,
}

impl BookingStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            BookingStatus::Booked => "BOOKED",
            BookingStatus::Cancelled => "CANCELLED",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Booking {
    pub booking_id: BookingId,
    pub flight_id: FlightId,
    pub user_id: UserId,
    pub head_count: u32,
    /// The counter the seats came from, and go back to on a cancel.
    pub shard: u32,
    pub status: BookingStatus,
    pub created_at: Millis,
    pub cancelled_at: Option<Millis>,
}

/// What a booking request came to: what the first request under an idempotency key answered,
/// and what every retry under it answers again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum BookingAnswer {
    Booked { booking: Booking },
    SoldOut,
    LimitReached,
    NoSuchFlight,
}

/// An idempotency record: the request's fingerprint, and either the token of the request still
/// working on it (until `expires_at`) or its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdempotencyRecord {
    pub user_id: UserId,
    pub key: IdempotencyKey,
    /// What was asked (flight and head count), so a reuse with another request is told apart.
    pub fingerprint: String,
    pub state: RequestState,
    pub created_at: Millis,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum RequestState {
    /// A request is working on it; past `expires_at` another may take over.
    InProgress {
        token: String,
        expires_at: Millis,
    },
    Done {
        answer: BookingAnswer,
    },
}

impl IdempotencyRecord {
    /// The fingerprint of a booking request.
    pub fn fingerprint(flight_id: &FlightId, head_count: u32) -> String {
        format!("book:{flight_id}:{head_count}")
    }

    /// Whether a new request may take this key over at `now`: only an abandoned one (in
    /// progress past its expiry).
    pub fn is_abandoned(&self, now: Millis) -> bool {
        matches!(self.state, RequestState::InProgress { expires_at, .. } if expires_at <= now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flight(capacity: u32, shards: u32) -> Flight {
        Flight::new(
            FlightId::parse("F-1").unwrap(),
            capacity,
            None,
            shards,
            Millis(0),
        )
        .unwrap()
    }

    #[test]
    fn shards_split_the_capacity_exactly() {
        for (capacity, shards) in [(300, 1), (300, 7), (10, 10), (1_000_000, 16), (17, 16)] {
            let f = flight(capacity, shards);
            let total: u32 = (0..shards).map(|s| f.shard_capacity(s)).sum();
            assert_eq!(total, capacity, "{capacity} over {shards}");
            let (min, max) = (
                (0..shards).map(|s| f.shard_capacity(s)).min().unwrap(),
                (0..shards).map(|s| f.shard_capacity(s)).max().unwrap(),
            );
            assert!(max - min <= 1);
        }
    }

    #[test]
    fn bad_flights_are_refused() {
        let id = || FlightId::parse("F-1").unwrap();
        assert_eq!(
            Flight::new(id(), 0, None, 1, Millis(0)),
            Err(FlightError::Capacity)
        );
        assert_eq!(
            Flight::new(id(), 5, None, 6, Millis(0)),
            Err(FlightError::Shards)
        );
        assert_eq!(
            Flight::new(id(), 5, None, 0, Millis(0)),
            Err(FlightError::Shards)
        );
        assert_eq!(
            Flight::new(id(), 5, Some(0), 1, Millis(0)),
            Err(FlightError::MaxPerUser)
        );
        assert!(FlightId::parse("a b").is_err());
        assert!(IdempotencyKey::parse(&"k".repeat(129)).is_err());
    }

    #[test]
    fn answers_round_trip_as_json() {
        let b = BookingAnswer::Booked {
            booking: Booking {
                booking_id: BookingId::generate(),
                flight_id: FlightId::parse("F-1").unwrap(),
                user_id: UserId::parse("u1").unwrap(),
                head_count: 2,
                shard: 0,
                status: BookingStatus::Booked,
                created_at: Millis(5),
                cancelled_at: None,
            },
        };
        for a in [b, BookingAnswer::SoldOut, BookingAnswer::LimitReached] {
            let json = serde_json::to_string(&a).unwrap();
            assert_eq!(serde_json::from_str::<BookingAnswer>(&json).unwrap(), a);
        }
    }
}
