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
//!
//! The rules a store applies live here once: [`Flight::book`] (the per-user limit and the
//! shard's stock, in that order), [`Flight::shard_order`], [`Booking::cancel`] (once),
//! [`Inventory::is_sold_out`] and the idempotency record's [`IdempotencyRecord::may_begin`] and
//! [`IdempotencyRecord::is_in_progress_under`]. The embedded backend calls them; DynamoDB's
//! conditions are their hand-written twins, and a contract case per rule holds each backend to
//! the rule's answers.

use super::checkout::CheckoutTimes;
use super::ids::id_type;
use super::{Millis, UserId};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Seats one booking may take.
pub const MAX_HEAD_COUNT: u32 = 9;
/// Counter items one flight may spread over (one transaction creates them all).
pub const MAX_SHARDS: u32 = 16;
pub const MAX_CAPACITY: u32 = 1_000_000;
/// Seats a shard gets when the operator names no shard count: a shard counter takes a hundred
/// or two bookings a second before its transactions conflict (BENCHMARKS.md, "The sale at the
/// seeds' scale on AWS"), and a flight's opening draws about as many buyers a second as it has
/// seats to the hundred, so one shard per hundred seats keeps each counter within that.
pub const SEATS_PER_DEFAULT_SHARD: u32 = 100;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FlightError {
    #[error("capacity must be 1 to {MAX_CAPACITY}")]
    Capacity,
    #[error("shards must be 1 to {MAX_SHARDS} and at most the capacity")]
    Shards,
    #[error("max_per_user must be at least 1")]
    MaxPerUser,
    #[error(
        "hold_ttl_secs, hold_max_secs and offer_ttl_secs must be 1 to {}, and hold_max_secs at least hold_ttl_secs",
        super::checkout::MAX_CHECKOUT_SECS
    )]
    CheckoutTimes,
}

id_type!(
    /// A flight option on sale, e.g. `KE-081-2026-12-24`.
    FlightId,
    "flight_id",
    token(64)
);
id_type!(
    /// One booking; generated (a UUID v7).
    BookingId,
    "booking_id",
    token(64)
);
id_type!(
    /// The client's `Idempotency-Key`: retrying under it returns the first answer.
    IdempotencyKey,
    "idempotency_key",
    token(128)
);

impl BookingId {
    /// A fresh id from the wall clock and the OS: for tests and tools. The services take theirs
    /// from their `Ids` port ([`BookingId::from_uuid`]).
    pub fn generate() -> Self {
        Self::from_uuid(uuid::Uuid::now_v7())
    }

    pub fn from_uuid(id: uuid::Uuid) -> Self {
        BookingId(id.hyphenated().to_string())
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
    /// How long its checkout holds and offers last; a flight stored before holds existed reads
    /// with the defaults.
    #[serde(default)]
    pub checkout: CheckoutTimes,
}

impl Flight {
    /// The shards of a flight of `capacity` seats whose operator named none: one per
    /// [`SEATS_PER_DEFAULT_SHARD`] seats, 1 to [`MAX_SHARDS`] (so never over the capacity).
    pub fn default_shards(capacity: u32) -> u32 {
        capacity
            .div_ceil(SEATS_PER_DEFAULT_SHARD)
            .clamp(1, MAX_SHARDS)
    }

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
            checkout: CheckoutTimes::default(),
        })
    }

    /// The same flight with its holds and offers lasting `times`.
    pub fn with_checkout(self, times: CheckoutTimes) -> Self {
        Flight {
            checkout: times,
            ..self
        }
    }

    /// The booking rule: `head_count` seats taken from a shard with `available`, by a user who
    /// holds `held` seats of this flight (counted only when the flight has a per-user limit),
    /// leave the returned stock behind, or are refused, checked in this order:
    ///
    /// 1. more seats than the limit allows at all: [`BookingRefusal::LimitReached`] (no shard
    ///    could ever serve it, so it is not worth a shard's answer);
    /// 2. the shard has fewer than `head_count`: [`BookingRefusal::ShardShort`] with what it has
    ///    (the caller moves to the next shard);
    /// 3. `held + head_count` would pass the limit: [`BookingRefusal::LimitReached`].
    pub fn book(
        available: u32,
        held: u32,
        head_count: u32,
        max_per_user: Option<u32>,
    ) -> Result<Taken, BookingRefusal> {
        if Flight::never_fits(head_count, max_per_user) {
            return Err(BookingRefusal::LimitReached);
        }
        let Some(left) = available.checked_sub(head_count) else {
            return Err(BookingRefusal::ShardShort { available });
        };
        let held = match max_per_user {
            None => None,
            Some(max) => match held.checked_add(head_count) {
                Some(after) if after <= max => Some(after),
                _ => return Err(BookingRefusal::LimitReached),
            },
        };
        Ok(Taken {
            available: left,
            held,
        })
    }

    /// The booking rule's first step alone: a request for more seats than the limit allows at
    /// all, which no store needs to see.
    pub fn never_fits(head_count: u32, max_per_user: Option<u32>) -> bool {
        max_per_user.is_some_and(|max| head_count > max)
    }

    /// The order in which a booking tries the shards, from `start` (a random draw, so bookings
    /// spread over the counters) round the ring once.
    pub fn shard_order(&self, start: u32) -> impl Iterator<Item = u32> + use<> {
        let shards = self.shards;
        let start = start % shards;
        (0..shards).map(move |i| (start + i) % shards)
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
    /// Seats in live or not yet returned checkout holds, per shard: taken from `available`,
    /// not yet booked. So booked = capacity - available - held, per shard and in all.
    pub held: Vec<u32>,
    /// Marked when every shard reached zero (and cleared by a cancel).
    pub sold_out: bool,
}

impl Inventory {
    pub fn available(&self) -> u32 {
        self.available.iter().sum()
    }

    pub fn held(&self) -> u32 {
        self.held.iter().sum()
    }

    /// The sold-out rule: every one of the flight's shards at zero (a shard with stock, even one
    /// seat, keeps the flight on sale).
    pub fn is_sold_out(available: &[u32]) -> bool {
        available.iter().all(|a| *a == 0)
    }
}

/// Why [`Flight::book`] refuses a booking.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum BookingRefusal {
    /// The user would hold more than the flight's `max_per_user`.
    #[error("the per-user limit would be passed")]
    LimitReached,
    /// The shard has fewer seats than asked; how many it has.
    #[error("the shard has {available} seats left")]
    ShardShort { available: u32 },
}

/// What a booking leaves behind: the shard's stock, and the user's count (when counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    pub available: u32,
    pub held: Option<u32>,
}

/// Why [`Booking::cancel`] refuses a cancel.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CancelRefusal {
    /// No such booking of this user on this flight (another user's is indistinguishable).
    #[error("no such booking")]
    NotFound,
    /// Cancelled before: the booking as it is.
    #[error("already cancelled")]
    AlreadyCancelled(Box<Booking>),
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

impl Booking {
    /// The cancel rule: the booking `found` under the id (if any), cancelled by `user` on
    /// `flight` at `now`, becomes the returned booking, or is refused: missing, another user's
    /// or another flight's is [`CancelRefusal::NotFound`]; a cancelled one is
    /// [`CancelRefusal::AlreadyCancelled`], so its seats go back once.
    pub fn cancel(
        found: Option<&Booking>,
        user: &UserId,
        flight: &FlightId,
        now: Millis,
    ) -> Result<Booking, CancelRefusal> {
        let booking = match found {
            Some(b) if b.user_id == *user && b.flight_id == *flight => b,
            _ => return Err(CancelRefusal::NotFound),
        };
        if booking.status == BookingStatus::Cancelled {
            return Err(CancelRefusal::AlreadyCancelled(Box::new(booking.clone())));
        }
        Ok(Booking {
            status: BookingStatus::Cancelled,
            cancelled_at: Some(now),
            ..booking.clone()
        })
    }
}

/// What a booking request came to: what the first request under an idempotency key answered,
/// and what every retry under it answers again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum BookingAnswer {
    Booked {
        booking: Booking,
    },
    /// A checkout hold's request: the hold it made.
    Held {
        hold: Box<super::CheckoutHold>,
    },
    SoldOut,
    LimitReached,
    /// A checkout hold's request while the user holds another on the flight.
    HoldExists,
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

    /// The fingerprint of a checkout hold's request (never equal to a booking's, so a key
    /// reused across the two is refused).
    pub fn hold_fingerprint(flight_id: &FlightId, head_count: u32) -> String {
        format!("hold:{flight_id}:{head_count}")
    }

    /// Whether a new request may take this key over at `now`: only an abandoned one (in
    /// progress past its expiry).
    pub fn is_abandoned(&self, now: Millis) -> bool {
        matches!(self.state, RequestState::InProgress { expires_at, .. } if expires_at <= now)
    }

    /// The begin rule: a request takes the key when nothing is stored under it, or what is
    /// stored is abandoned at `now`; otherwise the stored record answers.
    pub fn may_begin(existing: Option<&IdempotencyRecord>, now: Millis) -> bool {
        existing.is_none_or(|found| found.is_abandoned(now))
    }

    /// Whether the request holding `token` still owns this record (so it may write the answer
    /// or give the key up); a request taken over after its expiry does not.
    pub fn is_in_progress_under(&self, token: &str) -> bool {
        matches!(&self.state, RequestState::InProgress { token: t, .. } if t == token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flight_without_a_shard_count_gets_one_per_hundred_seats_within_the_bounds() {
        let cases = [
            (1, 1),
            (100, 1),
            (101, 2),
            (300, 3),
            (1_600, 16),
            (1_000_000, 16),
        ];
        for (capacity, shards) in cases {
            assert_eq!(Flight::default_shards(capacity), shards, "{capacity}");
            assert!(
                Flight::new(
                    FlightId::parse("F-1").unwrap(),
                    capacity,
                    None,
                    shards,
                    Millis(0)
                )
                .is_ok()
            );
        }
    }

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
    fn the_booking_rule_checks_the_limit_then_the_shard_then_the_users_count() {
        use BookingRefusal::*;
        let book = Flight::book;
        // Never fits: refused before the shard is asked, even an empty one.
        assert_eq!(book(0, 0, 3, Some(2)), Err(LimitReached));
        assert_eq!(book(1, 0, 2, Some(5)), Err(ShardShort { available: 1 }));
        // A short shard answers before the user's count.
        assert_eq!(book(1, 4, 2, Some(5)), Err(ShardShort { available: 1 }));
        assert_eq!(book(5, 4, 2, Some(5)), Err(LimitReached));
        assert_eq!(
            book(5, 3, 2, Some(5)),
            Ok(Taken {
                available: 3,
                held: Some(5)
            })
        );
        // Without a limit the user's count is not kept.
        assert_eq!(
            book(2, 40, 2, None),
            Ok(Taken {
                available: 0,
                held: None
            })
        );
        assert_eq!(
            book(u32::MAX, u32::MAX, 1, Some(u32::MAX)),
            Err(LimitReached)
        );
    }

    #[test]
    fn shards_are_tried_once_each_from_the_start() {
        let f = flight(10, 4);
        assert_eq!(f.shard_order(2).collect::<Vec<_>>(), vec![2, 3, 0, 1]);
        assert_eq!(f.shard_order(9).collect::<Vec<_>>(), vec![1, 2, 3, 0]);
        assert!(Inventory::is_sold_out(&[0, 0]));
        assert!(!Inventory::is_sold_out(&[0, 1]));
    }

    #[test]
    fn a_booking_is_cancelled_once_and_only_by_its_owner_on_its_flight() {
        let booking = Booking {
            booking_id: BookingId("b1".into()),
            flight_id: FlightId::parse("F-1").unwrap(),
            user_id: UserId::parse("u1").unwrap(),
            head_count: 2,
            shard: 0,
            status: BookingStatus::Booked,
            created_at: Millis(5),
            cancelled_at: None,
        };
        let (me, them) = (UserId::parse("u1").unwrap(), UserId::parse("u2").unwrap());
        let (f1, f2) = (
            FlightId::parse("F-1").unwrap(),
            FlightId::parse("F-2").unwrap(),
        );
        let cancel =
            |b: Option<&Booking>, u: &UserId, f: &FlightId| Booking::cancel(b, u, f, Millis(9));
        assert_eq!(cancel(None, &me, &f1), Err(CancelRefusal::NotFound));
        assert_eq!(
            cancel(Some(&booking), &them, &f1),
            Err(CancelRefusal::NotFound)
        );
        assert_eq!(
            cancel(Some(&booking), &me, &f2),
            Err(CancelRefusal::NotFound)
        );
        let cancelled = cancel(Some(&booking), &me, &f1).unwrap();
        assert_eq!(cancelled.status, BookingStatus::Cancelled);
        assert_eq!(cancelled.cancelled_at, Some(Millis(9)));
        assert_eq!(
            cancel(Some(&cancelled), &me, &f1),
            Err(CancelRefusal::AlreadyCancelled(Box::new(cancelled.clone())))
        );
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
