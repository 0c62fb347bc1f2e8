//! Checkout holds: seats taken from a flight for a bounded time while the buyer pays, then
//! confirmed into a booking or given back, each exactly once.
//!
//! A hold is a pending transfer in TigerBeetle's sense: it resolves at most once, and its
//! deadline is the store's clock, never the client's. Every resolution is one conditional write
//! on the hold's `status` (and, for a confirm, its `expires_at`), so a confirm racing the hold's
//! own lapse is decided by the store: the booking wins or the return does, never both, never
//! neither. A confirm past `expires_at` is refused by its own condition whatever the reaper has
//! done yet, so a late reaper can delay a lapse's seats but never sell them twice.
//!
//! The rules here are the ones every store applies: [`CheckoutHold::resolve`] decides what a
//! confirm, release, extension or lapse of a stored hold comes to; the stores' conditions are
//! its twins, and the contract suite holds each backend to its answers.

use super::flight::{Booking, BookingId, BookingStatus, FlightError, FlightId};
use super::ids::id_type;
use super::{Millis, UserId};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use thiserror::Error;

/// How long a flight's holds and offers last, in whole seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckoutTimes {
    /// A new or extended hold's lifetime.
    pub hold_ttl_secs: u32,
    /// How long after its creation a hold may be extended to, at most.
    pub hold_max_secs: u32,
    /// An offer's lifetime (a hold made for a waiting-list entry).
    pub offer_ttl_secs: u32,
}

/// A week: no checkout waits longer, and it keeps every deadline far from overflow.
pub const MAX_CHECKOUT_SECS: u32 = 7 * 24 * 3600;

impl Default for CheckoutTimes {
    /// seats.io's 15-minute hold is the peers' norm; 10 minutes here, extendable to 2 hours in
    /// all, and an offer lasts 15 minutes.
    fn default() -> Self {
        CheckoutTimes {
            hold_ttl_secs: 600,
            hold_max_secs: 7200,
            offer_ttl_secs: 900,
        }
    }
}

impl CheckoutTimes {
    pub fn new(
        hold_ttl_secs: u32,
        hold_max_secs: u32,
        offer_ttl_secs: u32,
    ) -> Result<Self, FlightError> {
        let in_range = |s: u32| (1..=MAX_CHECKOUT_SECS).contains(&s);
        if !(in_range(hold_ttl_secs) && in_range(hold_max_secs) && in_range(offer_ttl_secs))
            || hold_max_secs < hold_ttl_secs
        {
            return Err(FlightError::CheckoutTimes);
        }
        Ok(CheckoutTimes {
            hold_ttl_secs,
            hold_max_secs,
            offer_ttl_secs,
        })
    }

    pub fn hold_ttl(&self) -> Duration {
        Duration::from_secs(u64::from(self.hold_ttl_secs))
    }

    pub fn hold_max(&self) -> Duration {
        Duration::from_secs(u64::from(self.hold_max_secs))
    }

    pub fn offer_ttl(&self) -> Duration {
        Duration::from_secs(u64::from(self.offer_ttl_secs))
    }
}

id_type!(
    /// The hold's id; generated (a UUID v7), so a user's holds list oldest first.
    HoldId,
    "hold_id",
    token(64)
);

impl HoldId {
    pub fn from_uuid(id: uuid::Uuid) -> Self {
        HoldId(id.hyphenated().to_string())
    }

    /// Which of `shards` due-index shards the hold is listed under while held.
    pub fn shard(&self, shards: u32) -> u32 {
        super::ids::shard_of(&self.0, shards)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum HoldStatus {
    /// Seats taken from the shard, not yet sold; live until `expires_at`.
    Held,
    /// Became its booking.
    Confirmed,
    /// Given back by its owner.
    Released,
    /// Given back because it passed `expires_at` unconfirmed.
    Lapsed,
}

impl HoldStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            HoldStatus::Held => "HELD",
            HoldStatus::Confirmed => "CONFIRMED",
            HoldStatus::Released => "RELEASED",
            HoldStatus::Lapsed => "LAPSED",
        }
    }

    /// Whether a hold that moved to this status gave its seats back to its shard.
    pub fn returns_seats(self) -> bool {
        matches!(self, HoldStatus::Released | HoldStatus::Lapsed)
    }

    pub const ALL: [HoldStatus; 4] = [
        HoldStatus::Held,
        HoldStatus::Confirmed,
        HoldStatus::Released,
        HoldStatus::Lapsed,
    ];

    /// The status its wire name (`HELD`, `CONFIRMED`, `RELEASED`, `LAPSED`) names.
    pub fn parse(s: &str) -> Option<HoldStatus> {
        Self::ALL.into_iter().find(|status| status.as_str() == s)
    }
}

/// A hold's place in its flight's listing (the operator's view of a flight's holds and lapses):
/// by the shard its seats came from, then by id (oldest first within a shard). Shard first
/// because DynamoDB indexes a flight's holds under one partition per shard, as the seats
/// themselves are, so the index takes no more writes a second than the shard's counter does; a
/// page then reads one shard's run after another, never all shards to merge them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlightHoldKey {
    pub shard: u32,
    pub hold_id: HoldId,
}

impl FlightHoldKey {
    pub fn of(hold: &CheckoutHold) -> Self {
        FlightHoldKey {
            shard: hold.shard,
            hold_id: hold.hold_id.clone(),
        }
    }

    /// `<shard>.<hold_id>` as [`Display`](std::fmt::Display) writes it, the shard in four
    /// digits (shards are far fewer; a fixed width lets a schema bound the id's length exactly);
    /// `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        let (shard, id) = s.split_at_checked(4)?;
        let id = id.strip_prefix('.')?;
        if !shard.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(FlightHoldKey {
            shard: shard.parse().ok()?,
            hold_id: HoldId::parse(id).ok()?,
        })
    }
}

impl std::fmt::Display for FlightHoldKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04}.{}", self.shard, self.hold_id)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckoutHold {
    pub hold_id: HoldId,
    pub flight_id: FlightId,
    pub user_id: UserId,
    pub head_count: u32,
    /// The counter the seats came from, and go back to on a release or lapse.
    pub shard: u32,
    pub status: HoldStatus,
    pub created_at: Millis,
    /// The store's deadline: a confirm at or after it is refused.
    pub expires_at: Millis,
    /// The booking a confirm makes, named at creation so a repeated confirm answers the same one.
    pub booking_id: BookingId,
    /// When it left `HELD`.
    pub resolved_at: Option<Millis>,
    /// The waiting-list entry this hold was offered to; `None` for a hold its user asked for.
    /// An offer is not the user's one live hold on the flight: it neither needs nor takes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offer_for: Option<super::waitlist::EntryId>,
}

/// What is asked of a stored hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldAction {
    /// The owner buys the held seats.
    Confirm,
    /// The owner gives the seats back (a lapse, if the hold is already past its deadline).
    Release,
    /// The owner asks for more time: `expires_at` to now plus the TTL, never past creation plus
    /// the maximum.
    Extend(CheckoutTimes),
    /// The reaper gives back a hold past its deadline (no owner check).
    Lapse,
}

/// Why [`CheckoutHold::resolve`] refuses an action.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum HoldRefusal {
    /// No such hold of this user on this flight (another user's is indistinguishable).
    #[error("no such hold")]
    NotFound,
    /// Past its deadline (lapsed, or about to be): it can no longer be confirmed or extended.
    #[error("the hold expired")]
    Expired(Box<CheckoutHold>),
    /// Released by its owner before.
    #[error("the hold was released")]
    Released(Box<CheckoutHold>),
    /// Confirmed before: the hold as it is (its booking is [`CheckoutHold::booking`]).
    #[error("the hold was confirmed")]
    Confirmed(Box<CheckoutHold>),
    /// Already at its maximum lifetime.
    #[error("the hold cannot be extended further")]
    NotExtendable(Box<CheckoutHold>),
    /// A lapse of a hold that is not past its deadline, or no longer held.
    #[error("the hold is not due to lapse")]
    NotDue,
}

impl CheckoutHold {
    /// A new hold at `now`, live for the flight's hold TTL.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        hold_id: HoldId,
        flight_id: FlightId,
        user_id: UserId,
        head_count: u32,
        shard: u32,
        booking_id: BookingId,
        times: &CheckoutTimes,
        now: Millis,
    ) -> Self {
        CheckoutHold {
            hold_id,
            flight_id,
            user_id,
            head_count,
            shard,
            status: HoldStatus::Held,
            created_at: now,
            expires_at: now.plus(times.hold_ttl()),
            booking_id,
            resolved_at: None,
            offer_for: None,
        }
    }

    /// Held and before its deadline at `now`.
    pub fn is_live(&self, now: Millis) -> bool {
        self.status == HoldStatus::Held && now < self.expires_at
    }

    /// The booking a confirmed hold became; `None` before a confirm.
    pub fn booking(&self) -> Option<Booking> {
        match (self.status, self.resolved_at) {
            (HoldStatus::Confirmed, Some(at)) => Some(Booking {
                booking_id: self.booking_id.clone(),
                flight_id: self.flight_id.clone(),
                user_id: self.user_id.clone(),
                head_count: self.head_count,
                shard: self.shard,
                status: BookingStatus::Booked,
                created_at: at,
                cancelled_at: None,
            }),
            _ => None,
        }
    }

    /// The hold rule: `action` on the hold `found` under its id (if any), asked by `user` (the
    /// reaper's lapse asks as nobody) on `flight` at `now`, becomes the returned hold or is
    /// refused. The stores write the returned hold under the condition that the stored one is
    /// still `HELD` (and, for a confirm or extension, still before its deadline), so whatever
    /// races it, one resolution applies.
    ///
    /// | stored | confirm | release | extend | lapse |
    /// |---|---|---|---|---|
    /// | held, live | `CONFIRMED` | `RELEASED` | later `expires_at`, or `NotExtendable` at the maximum | `NotDue` |
    /// | held, past its deadline | `Expired` | `LAPSED` (its seats go back now) | `Expired` | `LAPSED` |
    /// | lapsed | `Expired` | `Expired` | `Expired` | `NotDue` |
    /// | released | `Released` | `Released` (a repeat) | `Released` | `NotDue` |
    /// | confirmed | `Confirmed` (a repeat) | `Confirmed` | `Confirmed` | `NotDue` |
    pub fn resolve(
        found: Option<&CheckoutHold>,
        user: Option<&UserId>,
        flight: &FlightId,
        action: HoldAction,
        now: Millis,
    ) -> Result<CheckoutHold, HoldRefusal> {
        let hold = match found {
            Some(h) if h.flight_id == *flight && user.is_none_or(|u| h.user_id == *u) => h,
            _ if action == HoldAction::Lapse => return Err(HoldRefusal::NotDue),
            _ => return Err(HoldRefusal::NotFound),
        };
        let boxed = || Box::new(hold.clone());
        let resolved = |status| CheckoutHold {
            status,
            resolved_at: Some(now),
            ..hold.clone()
        };
        let past_deadline = now >= hold.expires_at;
        match (hold.status, action) {
            (HoldStatus::Held, HoldAction::Lapse) if past_deadline => {
                Ok(resolved(HoldStatus::Lapsed))
            }
            (_, HoldAction::Lapse) => Err(HoldRefusal::NotDue),
            (HoldStatus::Held, HoldAction::Release) if past_deadline => {
                Ok(resolved(HoldStatus::Lapsed))
            }
            (HoldStatus::Held, HoldAction::Release) => Ok(resolved(HoldStatus::Released)),
            (HoldStatus::Held, _) if past_deadline => Err(HoldRefusal::Expired(boxed())),
            (HoldStatus::Held, HoldAction::Confirm) => Ok(resolved(HoldStatus::Confirmed)),
            (HoldStatus::Held, HoldAction::Extend(times)) => {
                let until = now
                    .plus(times.hold_ttl())
                    .min(hold.created_at.plus(times.hold_max()));
                if until <= hold.expires_at {
                    return Err(HoldRefusal::NotExtendable(boxed()));
                }
                Ok(CheckoutHold {
                    expires_at: until,
                    ..hold.clone()
                })
            }
            (HoldStatus::Lapsed, _) => Err(HoldRefusal::Expired(boxed())),
            (HoldStatus::Released, _) => Err(HoldRefusal::Released(boxed())),
            (HoldStatus::Confirmed, _) => Err(HoldRefusal::Confirmed(boxed())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flight_hold_key_reads_back_only_as_written() {
        let id = HoldId::parse("0190a0b0-0000-7000-8000-000000000001").unwrap();
        let key = FlightHoldKey {
            shard: 12,
            hold_id: id.clone(),
        };
        assert_eq!(key.to_string(), format!("0012.{id}"));
        assert_eq!(FlightHoldKey::parse(&key.to_string()), Some(key.clone()));
        let zero = FlightHoldKey {
            shard: 0,
            hold_id: id.clone(),
        };
        assert_eq!(FlightHoldKey::parse(&zero.to_string()), Some(zero.clone()));
        assert!(zero < key, "shard first");
        for bad in [
            "", "0012", "0012.", "12.x", "012.x", "+012.x", "-001.x", "00012.x", "0012x", "0012..",
            "0012.a b", "001a.x",
        ] {
            assert_eq!(FlightHoldKey::parse(bad), None, "{bad:?}");
        }
        for status in HoldStatus::ALL {
            assert_eq!(HoldStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(HoldStatus::parse("held"), None);
    }

    fn hold(status: HoldStatus, expires_at: i64) -> CheckoutHold {
        CheckoutHold {
            hold_id: HoldId::parse("h1").unwrap(),
            flight_id: FlightId::parse("F-1").unwrap(),
            user_id: UserId::parse("u1").unwrap(),
            head_count: 2,
            shard: 1,
            status,
            created_at: Millis(0),
            expires_at: Millis(expires_at),
            booking_id: BookingId::from_uuid(uuid::Uuid::nil()),
            resolved_at: None,
            offer_for: None,
        }
    }

    fn times(ttl: u32, max: u32) -> CheckoutTimes {
        CheckoutTimes::new(ttl, max, 1).unwrap()
    }

    #[test]
    fn checkout_times_are_bounded_and_the_maximum_covers_the_ttl() {
        assert!(CheckoutTimes::new(1, 1, 1).is_ok());
        assert!(CheckoutTimes::new(0, 10, 1).is_err());
        assert!(CheckoutTimes::new(10, 9, 1).is_err());
        assert!(CheckoutTimes::new(10, 10, 0).is_err());
        assert!(CheckoutTimes::new(10, MAX_CHECKOUT_SECS + 1, 1).is_err());
        let d = CheckoutTimes::default();
        assert_eq!(
            CheckoutTimes::new(d.hold_ttl_secs, d.hold_max_secs, d.offer_ttl_secs),
            Ok(d)
        );
    }

    #[test]
    fn a_live_hold_resolves_once_and_its_deadline_is_the_stores_clock() {
        let f = FlightId::parse("F-1").unwrap();
        let me = UserId::parse("u1").unwrap();
        let live = hold(HoldStatus::Held, 1_000);
        let at =
            |action, now| CheckoutHold::resolve(Some(&live), Some(&me), &f, action, Millis(now));
        let confirmed = at(HoldAction::Confirm, 999).unwrap();
        assert_eq!(confirmed.status, HoldStatus::Confirmed);
        assert_eq!(confirmed.booking().unwrap().created_at, Millis(999));
        assert_eq!(confirmed.booking().unwrap().booking_id, live.booking_id);
        // At the deadline exactly, the confirm has lost: the lapse owns that instant.
        assert_eq!(
            at(HoldAction::Confirm, 1_000),
            Err(HoldRefusal::Expired(Box::new(live.clone())))
        );
        assert_eq!(at(HoldAction::Lapse, 999), Err(HoldRefusal::NotDue));
        assert_eq!(
            at(HoldAction::Lapse, 1_000).unwrap().status,
            HoldStatus::Lapsed
        );
        assert_eq!(
            at(HoldAction::Release, 10).unwrap().status,
            HoldStatus::Released
        );
        assert_eq!(
            at(HoldAction::Release, 1_000).unwrap().status,
            HoldStatus::Lapsed
        );
        for resolved in [
            HoldStatus::Confirmed,
            HoldStatus::Released,
            HoldStatus::Lapsed,
        ] {
            let after = CheckoutHold::resolve(
                Some(&at_status(&live, resolved)),
                None,
                &f,
                HoldAction::Lapse,
                Millis(5_000),
            );
            assert_eq!(
                after,
                Err(HoldRefusal::NotDue),
                "{resolved:?} never lapses again"
            );
        }
    }

    fn at_status(h: &CheckoutHold, status: HoldStatus) -> CheckoutHold {
        CheckoutHold {
            status,
            resolved_at: Some(Millis(500)),
            ..h.clone()
        }
    }

    #[test]
    fn repeats_answer_the_hold_as_it_is() {
        let f = FlightId::parse("F-1").unwrap();
        let me = UserId::parse("u1").unwrap();
        let live = hold(HoldStatus::Held, 1_000);
        for (status, expected) in [
            (HoldStatus::Confirmed, "confirmed"),
            (HoldStatus::Released, "released"),
            (HoldStatus::Lapsed, "expired"),
        ] {
            let h = at_status(&live, status);
            for action in [
                HoldAction::Confirm,
                HoldAction::Release,
                HoldAction::Extend(times(10, 20)),
            ] {
                let refusal = CheckoutHold::resolve(Some(&h), Some(&me), &f, action, Millis(600))
                    .unwrap_err();
                let got = match refusal {
                    HoldRefusal::Confirmed(b) if *b == h => "confirmed",
                    HoldRefusal::Released(b) if *b == h => "released",
                    HoldRefusal::Expired(b) if *b == h => "expired",
                    other => panic!("{status:?} {action:?}: {other:?}"),
                };
                assert_eq!(got, expected, "{status:?} {action:?}");
            }
        }
    }

    #[test]
    fn only_the_owner_on_the_holds_flight_finds_it() {
        let live = hold(HoldStatus::Held, 1_000);
        let f = FlightId::parse("F-1").unwrap();
        let other_flight = FlightId::parse("F-2").unwrap();
        let (me, them) = (UserId::parse("u1").unwrap(), UserId::parse("u2").unwrap());
        let resolve = |found, user, flight| {
            CheckoutHold::resolve(found, Some(user), flight, HoldAction::Confirm, Millis(1))
        };
        assert_eq!(resolve(None, &me, &f), Err(HoldRefusal::NotFound));
        assert_eq!(resolve(Some(&live), &them, &f), Err(HoldRefusal::NotFound));
        assert_eq!(
            resolve(Some(&live), &me, &other_flight),
            Err(HoldRefusal::NotFound)
        );
        assert!(resolve(Some(&live), &me, &f).is_ok());
    }

    #[test]
    fn an_extension_never_passes_creation_plus_the_maximum() {
        let f = FlightId::parse("F-1").unwrap();
        let me = UserId::parse("u1").unwrap();
        // Created at 0 with a 10 s TTL and a 25 s maximum.
        let h = hold(HoldStatus::Held, 10_000);
        let t = times(10, 25);
        let extend = |h: &CheckoutHold, now| {
            CheckoutHold::resolve(Some(h), Some(&me), &f, HoldAction::Extend(t), Millis(now))
        };
        let once = extend(&h, 8_000).unwrap();
        assert_eq!(once.expires_at, Millis(18_000));
        assert_eq!(once.status, HoldStatus::Held);
        let capped = extend(&once, 17_000).unwrap();
        assert_eq!(
            capped.expires_at,
            Millis(25_000),
            "capped at creation plus the maximum"
        );
        assert_eq!(
            extend(&capped, 24_000),
            Err(HoldRefusal::NotExtendable(Box::new(capped.clone())))
        );
        assert_eq!(
            extend(&capped, 25_000),
            Err(HoldRefusal::Expired(Box::new(capped.clone())))
        );
    }
}
