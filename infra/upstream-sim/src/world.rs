//! The simulator's whole state as one plain, synchronous value.
//!
//! Everything the upstream "knows" (users, seats, charges, faults, call counts) lives in [`World`],
//! which the HTTP layer keeps behind a single `std::sync::Mutex`. Keeping it free of async and I/O
//! makes every operation one short critical section: a reservation checks and takes a seat in the
//! same lock, so concurrent callers can never both win, and the lock is never held across an
//! `.await`.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use rand::Rng;
use serde::{Deserialize, Serialize};

/// The routes the simulator counts and can inject faults into, keyed as callers name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    Seats,
    Rooms,
    Reserve,
    Charge,
    Release,
}

impl Route {
    pub(crate) const ALL: [Route; 5] = [
        Route::Reserve,
        Route::Charge,
        Route::Seats,
        Route::Rooms,
        Route::Release,
    ];

    /// The key used both in `/__admin/stats` and in `Faults::routes`.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Route::Seats => "GET /api/seats",
            Route::Rooms => "GET /api/rooms",
            Route::Reserve => "POST /api/reservations",
            Route::Charge => "GET /api/charge",
            Route::Release => "DELETE /api/reservations",
        }
    }

    fn index(self) -> usize {
        match self {
            Route::Reserve => 0,
            Route::Charge => 1,
            Route::Seats => 2,
            Route::Release => 3,
            Route::Rooms => 4,
        }
    }
}

/// Fault injection settings. Every field is optional in JSON; an empty object means "behave".
///
/// Setting faults replaces the previous ones wholesale (there is no merging), so a test states the
/// complete misbehaviour it wants and an outage window always starts at the moment of the call.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Faults {
    /// Fixed delay spent before an `/api` request is handled.
    ///
    /// It is spent *before* the work, so a caller that gives up during it leaves no trace but the
    /// call count; use `drop_response_after_commit` for "it happened but you never heard".
    pub latency_ms: u64,
    /// Uniformly random extra delay in `0..=jitter_ms`, on top of `latency_ms`.
    pub jitter_ms: u64,
    /// Probability (clamped to `0..=1`, NaN counts as 0) that an `/api` request answers
    /// `503 {"error":"injected"}` without doing anything.
    pub error_rate: f64,
    /// From the moment the faults are set, every `/api` request answers `503 {"error":"outage"}`
    /// without doing anything, for this many milliseconds.
    pub outage_for_ms: u64,
    /// From the moment the faults are set, every `/api` request answers
    /// `429 {"error":"rate_limited"}` with a `Retry-After` header, without doing anything, for
    /// this many milliseconds (the outage wins where both apply).
    pub rate_limited_for_ms: u64,
    /// The `Retry-After` a rate-limited answer carries, in whole seconds (0 means 1).
    pub retry_after_secs: u64,
    /// When above 0, the outage's 503s carry a `Retry-After` of this many seconds too (an
    /// upstream that knows how long its maintenance lasts); 0: they carry none.
    pub outage_retry_after_secs: u64,
    /// How every `Retry-After` is written: `"seconds"` (delta-seconds, the default) or
    /// `"http_date"` (the time to come back, as an IMF-fixdate beside the answer's `Date`).
    pub retry_after_form: RetryAfterForm,
    /// The next n successful `POST /api/reservations` commit, then the connection is aborted
    /// instead of answering. Not limited by `routes`: it only ever concerns reservations.
    pub drop_response_after_commit: u32,
    /// Route keys (as in the stats, e.g. `"POST /api/reservations"`) that latency, errors and
    /// outages apply to; `None` means every `/api` route.
    pub routes: Option<Vec<String>>,
}

/// The two forms of `Retry-After` (RFC 9110, 10.2.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryAfterForm {
    #[default]
    Seconds,
    HttpDate,
}

impl Faults {
    fn applies_to(&self, route: Route) -> bool {
        self.routes
            .as_ref()
            .is_none_or(|routes| routes.iter().any(|r| r == route.key()))
    }
}

/// Per-route call counts, as served by `GET /__admin/stats`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    pub calls: BTreeMap<String, u64>,
}

impl Stats {
    /// The count for one route key, 0 when absent.
    pub fn get(&self, route: &str) -> u64 {
        self.calls.get(route).copied().unwrap_or(0)
    }
}

/// One call as it arrived: when (wall-clock milliseconds since the Unix epoch, so a benchmark
/// can line it up with its own timeline) and on which route. Refused calls are logged too.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRecord {
    pub at_ms: u64,
    pub route: String,
}

/// The most calls the log keeps; older ones are dropped first (the counts stay exact).
pub(crate) const CALL_LOG_CAPACITY: usize = 200_000;

/// A user's current charge: the upstream's proof that a seat was reserved for them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Charge {
    pub(crate) charge_id: String,
    pub(crate) seat_id: String,
}

/// Why an `/api` request is answered without being handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    Outage {
        /// The `Retry-After` it carries, if any, and in which form.
        retry_after: Option<(u64, RetryAfterForm)>,
    },
    Injected,
    /// Too many requests: come back after this many seconds.
    RateLimited {
        retry_after_secs: u64,
        form: RetryAfterForm,
    },
}

/// What the fault settings decided for one `/api` request on arrival.
pub(crate) struct Admission {
    pub(crate) delay: Duration,
    pub(crate) refusal: Option<Refusal>,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ReserveError {
    SeatTaken,
    AlreadyCharged,
}

/// A committed reservation, plus whether its answer must be swallowed.
pub(crate) struct Reserved {
    pub(crate) charge: Charge,
    pub(crate) drop_response: bool,
}

#[derive(Default)]
pub(crate) struct World {
    credential_by_user: HashMap<String, String>,
    user_by_credential: HashMap<String, String>,
    /// seat id -> user id holding it.
    seats: HashMap<String, String>,
    /// user id -> their one current charge.
    charges: HashMap<String, Charge>,
    faults: Faults,
    outage_until: Option<Instant>,
    rate_limited_until: Option<Instant>,
    drops_left: u32,
    calls: [u64; Route::ALL.len()],
    call_log: std::collections::VecDeque<CallRecord>,
    /// room id -> its seats, in the order they were registered.
    rooms: HashMap<String, Vec<String>>,
}

impl World {
    /// One credential per user and one user per credential: re-registering a user retires their
    /// old credential, and handing a credential to another user takes it from its previous owner.
    pub(crate) fn register(&mut self, user_id: &str, credential: &str) {
        if let Some(old) = self
            .credential_by_user
            .insert(user_id.to_owned(), credential.to_owned())
            && self
                .user_by_credential
                .get(&old)
                .is_some_and(|u| u == user_id)
        {
            self.user_by_credential.remove(&old);
        }
        if let Some(previous) = self
            .user_by_credential
            .insert(credential.to_owned(), user_id.to_owned())
            && previous != user_id
        {
            self.credential_by_user.remove(&previous);
        }
    }

    pub(crate) fn authenticate(&self, credential: &str) -> Option<String> {
        self.user_by_credential.get(credential).cloned()
    }

    /// Counts the call, then rolls the dice for this request. Counting first means refused
    /// requests still show up in the stats, which is what tests and benchmarks assert on.
    pub(crate) fn admit(&mut self, route: Route, now: Instant) -> Admission {
        self.calls[route.index()] += 1;
        if self.call_log.len() == CALL_LOG_CAPACITY {
            self.call_log.pop_front();
        }
        self.call_log.push_back(CallRecord {
            at_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            route: route.key().to_owned(),
        });
        let faults = &self.faults;
        if !faults.applies_to(route) {
            return Admission {
                delay: Duration::ZERO,
                refusal: None,
            };
        }
        let mut rng = rand::rng();
        let jitter = if faults.jitter_ms > 0 {
            rng.random_range(0..=faults.jitter_ms)
        } else {
            0
        };
        let delay = Duration::from_millis(faults.latency_ms.saturating_add(jitter));
        let refusal = if self.outage_until.is_some_and(|until| now < until) {
            Some(Refusal::Outage {
                retry_after: (faults.outage_retry_after_secs > 0)
                    .then_some((faults.outage_retry_after_secs, faults.retry_after_form)),
            })
        } else if self.rate_limited_until.is_some_and(|until| now < until) {
            Some(Refusal::RateLimited {
                retry_after_secs: faults.retry_after_secs.max(1),
                form: faults.retry_after_form,
            })
        } else if faults.error_rate > 0.0 && rng.random_bool(faults.error_rate) {
            Some(Refusal::Injected)
        } else {
            None
        };
        Admission { delay, refusal }
    }

    /// Deliberately not idempotent: asking again for the seat you already hold is `SeatTaken`,
    /// exactly like the real upstream, so a retried write looks like a lost race.
    pub(crate) fn reserve(
        &mut self,
        user_id: &str,
        seat_id: &str,
    ) -> Result<Reserved, ReserveError> {
        if self.seats.contains_key(seat_id) {
            return Err(ReserveError::SeatTaken);
        }
        if self.charges.contains_key(user_id) {
            return Err(ReserveError::AlreadyCharged);
        }
        let charge = Charge {
            charge_id: uuid::Uuid::new_v4().to_string(),
            seat_id: seat_id.to_owned(),
        };
        self.seats.insert(seat_id.to_owned(), user_id.to_owned());
        self.charges.insert(user_id.to_owned(), charge.clone());
        // Decided in the same critical section as the commit so that exactly n reservations
        // are swallowed even under concurrency.
        let drop_response = self.drops_left > 0;
        if drop_response {
            self.drops_left -= 1;
        }
        Ok(Reserved {
            charge,
            drop_response,
        })
    }

    pub(crate) fn charge(&self, user_id: &str) -> Option<Charge> {
        self.charges.get(user_id).cloned()
    }

    pub(crate) fn release(&mut self, user_id: &str) -> Option<Charge> {
        let charge = self.charges.remove(user_id)?;
        self.seats.remove(&charge.seat_id);
        Some(charge)
    }

    pub(crate) fn occupant(&self, seat_id: &str) -> Option<String> {
        self.seats.get(seat_id).cloned()
    }

    /// Registers (or replaces) a room and the seats it lists.
    pub(crate) fn put_room(&mut self, room_id: &str, seats: Vec<String>) {
        self.rooms.insert(room_id.to_owned(), seats);
    }

    /// A room's seats and whether each is occupied, in one step; `None` for an unknown room.
    pub(crate) fn room(&self, room_id: &str) -> Option<Vec<(String, bool)>> {
        let seats = self.rooms.get(room_id)?;
        Some(
            seats
                .iter()
                .map(|seat| (seat.clone(), self.seats.contains_key(seat)))
                .collect(),
        )
    }

    /// The calls logged since `since_ms` (inclusive), oldest first.
    pub(crate) fn calls_since(&self, since_ms: u64) -> Vec<CallRecord> {
        self.call_log
            .iter()
            .filter(|c| c.at_ms >= since_ms)
            .cloned()
            .collect()
    }

    pub(crate) fn set_faults(&mut self, mut faults: Faults, now: Instant) {
        // `random_bool` panics outside 0..=1; a sloppy benchmark script should not kill the server.
        faults.error_rate = if faults.error_rate.is_nan() {
            0.0
        } else {
            faults.error_rate.clamp(0.0, 1.0)
        };
        self.outage_until = (faults.outage_for_ms > 0)
            .then(|| now.checked_add(Duration::from_millis(faults.outage_for_ms)))
            .flatten();
        self.rate_limited_until = (faults.rate_limited_for_ms > 0)
            .then(|| now.checked_add(Duration::from_millis(faults.rate_limited_for_ms)))
            .flatten();
        self.drops_left = faults.drop_response_after_commit;
        self.faults = faults;
    }

    /// Back to a freshly started simulator: users are forgotten too, so every test registers the
    /// users it needs and none can lean on a previous test's leftovers.
    pub(crate) fn reset(&mut self) {
        *self = World::default();
    }

    pub(crate) fn stats(&self) -> Stats {
        Stats {
            calls: Route::ALL
                .iter()
                .map(|route| (route.key().to_owned(), self.calls[route.index()]))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn re_registering_retires_the_old_credential() {
        let mut world = World::default();
        world.register("u1", "a");
        world.register("u1", "b");
        assert_eq!(world.authenticate("a"), None);
        assert_eq!(world.authenticate("b").as_deref(), Some("u1"));
    }

    #[test]
    fn a_credential_moves_to_its_new_owner() {
        let mut world = World::default();
        world.register("u1", "a");
        world.register("u2", "a");
        assert_eq!(world.authenticate("a").as_deref(), Some("u2"));
        // u1 re-registering must not take "a" away from u2.
        world.register("u1", "c");
        assert_eq!(world.authenticate("a").as_deref(), Some("u2"));
        assert_eq!(world.authenticate("c").as_deref(), Some("u1"));
    }

    #[test]
    fn drops_are_consumed_once_per_commit() {
        let mut world = World::default();
        world.set_faults(
            Faults {
                drop_response_after_commit: 1,
                ..Faults::default()
            },
            Instant::now(),
        );
        assert!(world.reserve("u1", "A").unwrap().drop_response);
        assert_eq!(
            world.reserve("u2", "A").err(),
            Some(ReserveError::SeatTaken)
        );
        assert!(!world.reserve("u2", "B").unwrap().drop_response);
    }

    #[test]
    fn wild_error_rates_are_clamped() {
        let mut world = World::default();
        for rate in [f64::NAN, -1.0, 7.0] {
            world.set_faults(
                Faults {
                    error_rate: rate,
                    ..Faults::default()
                },
                Instant::now(),
            );
            let _ = world.admit(Route::Seats, Instant::now());
        }
        assert_eq!(world.stats().get("GET /api/seats"), 3);
    }

    #[test]
    fn a_room_reports_each_seat_once_with_its_occupancy() {
        let mut world = World::default();
        world.put_room("R1", vec!["R1-1".into(), "R1-2".into()]);
        world.register("u1", "c1");
        world.reserve("u1", "R1-2").unwrap();
        assert_eq!(
            world.room("R1"),
            Some(vec![("R1-1".into(), false), ("R1-2".into(), true)])
        );
        assert_eq!(world.room("R2"), None);
    }

    #[test]
    fn the_call_log_keeps_every_call_in_order_up_to_its_capacity() {
        let mut world = World::default();
        for _ in 0..CALL_LOG_CAPACITY + 3 {
            let _ = world.admit(Route::Rooms, Instant::now());
        }
        let log = world.calls_since(0);
        assert_eq!(log.len(), CALL_LOG_CAPACITY);
        assert!(log.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
        assert_eq!(
            world.stats().get("GET /api/rooms"),
            CALL_LOG_CAPACITY as u64 + 3
        );
    }
}
