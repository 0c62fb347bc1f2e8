//! The waiting list: people who asked for seats a flight could not sell them, served in the order
//! they joined when seats come back.
//!
//! A seat that comes back (a release, a lapse, a cancel) while someone waits is offered, not
//! sold: the store's return writes the seats straight into an offer for the first waiting entries
//! whose head counts fit, in the same transaction as the return, so no plain booker can take them
//! between the two. An offer is a [`CheckoutHold`] in the waiting user's name that lasts the
//! flight's `offer_ttl_secs`; confirmed, it is a booking like any hold's; lapsed or released, its
//! seats come back and the same rule offers them to the next entries.
//!
//! The rules every store applies live here: who may join ([`WaitEntry::may_join`]), who may
//! leave ([`WaitEntry::leave`]), and who a shard's free seats go to ([`serve`]). An offer's hold
//! and booking ids are the entry's own id, so a store writing an offer inside its return needs no
//! id source, and a replayed return names the same offer.

use super::checkout::{CheckoutHold, CheckoutTimes, HoldId, HoldStatus};
use super::flight::{BookingId, FlightId};
use super::ids::id_type;
use super::{Millis, UserId};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// How many waiting entries one return reads, in list order, looking for those its seats fit.
/// Bounds the return's work and, on DynamoDB, its transaction (three items an offer). An entry
/// beyond it whose head count would fit waits for the next return, or for those ahead of it to
/// be served or leave.
pub const MAX_ENTRIES_SCANNED: usize = 50;

/// How many offers one return makes at most: a return of many seats to many single-seat entries
/// makes several, and DynamoDB's 100-item transaction must hold them with the return's own items.
pub const MAX_OFFERS_PER_RETURN: usize = 16;

id_type!(
    /// A waiting-list entry's id; generated (a UUID v7), so the list's order is the ids' order.
    EntryId,
    "entry_id",
    token(64)
);

impl EntryId {
    pub fn from_uuid(id: uuid::Uuid) -> Self {
        EntryId(id.hyphenated().to_string())
    }

    /// The id of the hold offered to this entry (one offer per entry at most).
    pub fn offer_hold_id(&self) -> HoldId {
        HoldId::parse(&self.0).expect("an entry id is a valid hold id")
    }

    /// The id of the booking that offer becomes when confirmed.
    pub fn offer_booking_id(&self) -> BookingId {
        BookingId::parse(&self.0).expect("an entry id is a valid booking id")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WaitStatus {
    /// In the list, in the order of its id.
    Waiting,
    /// Served: its offer (a hold) was made; what became of it is the hold's status.
    Offered,
    /// Left the list before an offer.
    Left,
}

impl WaitStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            WaitStatus::Waiting => "WAITING",
            WaitStatus::Offered => "OFFERED",
            WaitStatus::Left => "LEFT",
        }
    }
}

/// The offer an entry was served: its hold and that hold's first deadline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offer {
    pub hold_id: HoldId,
    pub expires_at: Millis,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitEntry {
    pub entry_id: EntryId,
    pub flight_id: FlightId,
    pub user_id: UserId,
    pub head_count: u32,
    pub status: WaitStatus,
    pub created_at: Millis,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offer: Option<Offer>,
    /// When it left `WAITING`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_at: Option<Millis>,
    /// Whether its seats count against the user's per-user limit from its join on (a flight with
    /// a limit): the join adds its head count to the user's count, a leave takes it off, and its
    /// offer is already counted when made. So a user cannot book past the limit while waiting and
    /// then be offered more. `false` on an entry stored before entries counted: its offer is
    /// counted when made, as it then was.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub counted: bool,
}

/// Why a join or a leave wrote nothing.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum WaitRefusal {
    /// A booking of this head count would succeed now: book instead.
    #[error("seats are available")]
    SeatsAvailable,
    /// The user already has an entry waiting on this flight.
    #[error("already on the waiting list")]
    AlreadyWaiting(Box<WaitEntry>),
    /// More than the flight lets one user book.
    #[error("over the per-user limit")]
    LimitReached,
    /// No such entry of this user on this flight.
    #[error("no such waiting-list entry")]
    NotFound,
    /// Served already: the offer is a hold, released through the hold.
    #[error("an offer was made to this entry")]
    Offered(Box<WaitEntry>),
}

impl WaitEntry {
    pub fn new(
        entry_id: EntryId,
        flight_id: FlightId,
        user_id: UserId,
        head_count: u32,
        now: Millis,
    ) -> Self {
        WaitEntry {
            entry_id,
            flight_id,
            user_id,
            head_count,
            status: WaitStatus::Waiting,
            created_at: now,
            offer: None,
            resolved_at: None,
            counted: false,
        }
    }

    /// The entry as a join stores it: counted against the user's limit when the flight has one.
    pub fn joining(self, max_per_user: Option<u32>) -> Self {
        WaitEntry {
            counted: max_per_user.is_some(),
            ..self
        }
    }

    /// Seats its join adds to the user's count on a flight that keeps counts.
    pub fn counted_at_join(&self) -> u32 {
        if self.counted { self.head_count } else { 0 }
    }

    /// Seats its offer adds to the user's count on a flight that keeps counts: none when its
    /// join counted them already.
    pub fn counted_at_offer(&self) -> u32 {
        self.head_count - self.counted_at_join()
    }

    /// The join rule: `k` seats may wait only within the user's room under the flight's limit
    /// (`counted` is what they hold, own and wait for on it now; the join then counts the
    /// entry's seats too, so its offer needs no second check), and only while no shard has them
    /// (`available` per shard),
    /// as a booking of `k` would then be refused; and the user's entry on the flight still
    /// waiting (`existing`) blocks a second one (one served or left does not: an offer that
    /// lapsed, or one confirmed, may be followed by a new wait). The stores check the shards under
    /// conditions in the join's transaction, so a return racing the join is ordered with it.
    pub fn may_join(
        available: &[u32],
        k: u32,
        max_per_user: Option<u32>,
        counted: u32,
        existing: Option<&WaitEntry>,
    ) -> Result<(), WaitRefusal> {
        if max_per_user.is_some_and(|max| counted.saturating_add(k) > max) {
            return Err(WaitRefusal::LimitReached);
        }
        if let Some(e) = existing.filter(|e| e.status == WaitStatus::Waiting) {
            return Err(WaitRefusal::AlreadyWaiting(Box::new(e.clone())));
        }
        if available.iter().any(|&a| a >= k) {
            return Err(WaitRefusal::SeatsAvailable);
        }
        Ok(())
    }

    /// The leave rule: a waiting entry of `user` on `flight` becomes `LEFT` (the store takes its
    /// [`counted_at_join`](Self::counted_at_join) seats off the user's count in the same write);
    /// a repeat answers the left entry; an offered one is refused (its seats are a hold,
    /// released as one).
    pub fn leave(
        found: Option<&WaitEntry>,
        user: &UserId,
        flight: &FlightId,
        id: &EntryId,
        now: Millis,
    ) -> Result<WaitEntry, WaitRefusal> {
        let entry = match found {
            Some(e) if e.user_id == *user && e.flight_id == *flight && e.entry_id == *id => e,
            _ => return Err(WaitRefusal::NotFound),
        };
        match entry.status {
            WaitStatus::Waiting => Ok(WaitEntry {
                status: WaitStatus::Left,
                resolved_at: Some(now),
                ..entry.clone()
            }),
            WaitStatus::Left => Ok(entry.clone()),
            WaitStatus::Offered => Err(WaitRefusal::Offered(Box::new(entry.clone()))),
        }
    }

    /// This waiting entry served at `now` from `shard`: the entry as `OFFERED`, and its offer, a
    /// hold in the user's name for the flight's offer lifetime. An offer may be extended up to
    /// the hold maximum like any hold.
    pub fn offer(
        &self,
        shard: u32,
        times: &CheckoutTimes,
        now: Millis,
    ) -> (WaitEntry, CheckoutHold) {
        debug_assert_eq!(self.status, WaitStatus::Waiting);
        let expires_at = now.plus(times.offer_ttl());
        let hold = CheckoutHold {
            hold_id: self.entry_id.offer_hold_id(),
            flight_id: self.flight_id.clone(),
            user_id: self.user_id.clone(),
            head_count: self.head_count,
            shard,
            status: HoldStatus::Held,
            created_at: now,
            expires_at,
            booking_id: self.entry_id.offer_booking_id(),
            resolved_at: None,
            offer_for: Some(self.entry_id.clone()),
        };
        let entry = WaitEntry {
            status: WaitStatus::Offered,
            offer: Some(Offer {
                hold_id: hold.hold_id.clone(),
                expires_at,
            }),
            resolved_at: Some(now),
            ..self.clone()
        };
        (entry, hold)
    }
}

/// Who a shard's `free` seats go to: of `waiting` (the list's first entries, in its order, all
/// `WAITING`), the indices of those served, first come first served, each taken while its head
/// count fits what is left. An entry too large for what is left is passed over, not blocking the
/// smaller ones behind it (the seats would otherwise sit unsold while people wait), and stays
/// first for the next return. At most [`MAX_OFFERS_PER_RETURN`].
pub fn serve(free: u32, waiting: &[WaitEntry]) -> Vec<usize> {
    let mut left = free;
    let mut served = Vec::new();
    for (i, entry) in waiting.iter().enumerate().take(MAX_ENTRIES_SCANNED) {
        if left == 0 || served.len() == MAX_OFFERS_PER_RETURN {
            break;
        }
        if entry.status == WaitStatus::Waiting && entry.head_count <= left {
            left -= entry.head_count;
            served.push(i);
        }
    }
    served
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(n: u32, k: u32) -> WaitEntry {
        WaitEntry::new(
            EntryId::from_uuid(uuid::Uuid::from_u128(u128::from(n))),
            FlightId::parse("F-1").unwrap(),
            UserId::parse(&format!("u{n}")).unwrap(),
            k,
            Millis(i64::from(n)),
        )
    }

    #[test]
    fn free_seats_go_to_the_first_entries_that_fit_in_list_order() {
        let list = [entry(1, 3), entry(2, 1), entry(3, 2), entry(4, 1)];
        // 2 free: the first (3) does not fit, the second does, then 1 left fits the fourth.
        assert_eq!(serve(2, &list), vec![1, 3]);
        assert_eq!(serve(3, &list), vec![0]);
        assert_eq!(serve(7, &list), vec![0, 1, 2, 3]);
        assert_eq!(serve(0, &list), Vec::<usize>::new());
        let mut left = list.clone();
        left[1].status = WaitStatus::Left;
        assert_eq!(serve(1, &left), vec![3]);
    }

    #[test]
    fn an_entry_on_a_limited_flight_counts_from_its_join_and_its_offer_adds_nothing() {
        let limited = entry(1, 3).joining(Some(4));
        assert_eq!(
            (limited.counted_at_join(), limited.counted_at_offer()),
            (3, 0)
        );
        let open = entry(2, 3).joining(None);
        assert_eq!((open.counted_at_join(), open.counted_at_offer()), (0, 3));
        // Stored before entries counted: no `counted` in its JSON, counted at its offer.
        let mut json = serde_json::to_value(&open).unwrap();
        assert!(json.get("counted").is_none(), "{json}");
        json["status"] = serde_json::json!("WAITING");
        let old: WaitEntry = serde_json::from_value(json).unwrap();
        assert_eq!((old.counted_at_join(), old.counted_at_offer()), (0, 3));
        let (offered, _) = limited.offer(0, &CheckoutTimes::default(), Millis(9));
        assert!(offered.counted, "an offered entry stays counted");
    }

    #[test]
    fn a_return_serves_a_bounded_number_of_entries() {
        let list: Vec<_> = (0..100).map(|n| entry(n, 1)).collect();
        assert_eq!(serve(1_000, &list).len(), MAX_OFFERS_PER_RETURN);
        // Only the first MAX_ENTRIES_SCANNED are read: a fitting entry beyond waits.
        let mut big: Vec<_> = (0..100).map(|n| entry(n, 5)).collect();
        big[MAX_ENTRIES_SCANNED] = entry(999, 1);
        assert!(serve(1, &big).is_empty());
    }

    #[test]
    fn only_a_flight_that_cannot_sell_the_seats_takes_a_waiter() {
        let me = entry(1, 2);
        assert_eq!(WaitEntry::may_join(&[1, 0], 2, None, 0, None), Ok(()));
        assert_eq!(
            WaitEntry::may_join(&[1, 2], 2, None, 0, None),
            Err(WaitRefusal::SeatsAvailable)
        );
        assert_eq!(
            WaitEntry::may_join(&[0], 5, Some(4), 0, None),
            Err(WaitRefusal::LimitReached)
        );
        assert_eq!(
            WaitEntry::may_join(&[0], 2, Some(4), 3, None),
            Err(WaitRefusal::LimitReached)
        );
        assert_eq!(WaitEntry::may_join(&[0], 2, Some(4), 2, None), Ok(()));
        assert_eq!(
            WaitEntry::may_join(&[0], 2, None, 0, Some(&me)),
            Err(WaitRefusal::AlreadyWaiting(Box::new(me.clone())))
        );
        let (offered, _) = me.offer(0, &CheckoutTimes::default(), Millis(5));
        assert_eq!(
            WaitEntry::may_join(&[0], 2, None, 0, Some(&offered)),
            Ok(())
        );
        let gone = WaitEntry {
            status: WaitStatus::Left,
            ..me.clone()
        };
        assert_eq!(WaitEntry::may_join(&[0], 2, None, 0, Some(&gone)), Ok(()));
    }

    #[test]
    fn an_entry_leaves_once_and_an_offered_one_is_a_hold_to_release() {
        let me = entry(1, 2);
        let (user, flight, id) = (
            me.user_id.clone(),
            me.flight_id.clone(),
            me.entry_id.clone(),
        );
        let left = WaitEntry::leave(Some(&me), &user, &flight, &id, Millis(9)).unwrap();
        assert_eq!(
            (left.status, left.resolved_at),
            (WaitStatus::Left, Some(Millis(9)))
        );
        assert_eq!(
            WaitEntry::leave(Some(&left), &user, &flight, &id, Millis(10)),
            Ok(left.clone())
        );
        let other = UserId::parse("someone").unwrap();
        assert_eq!(
            WaitEntry::leave(Some(&me), &other, &flight, &id, Millis(9)),
            Err(WaitRefusal::NotFound)
        );
        let times = CheckoutTimes::new(60, 120, 30).unwrap();
        let (offered, hold) = me.offer(3, &times, Millis(1_000));
        assert_eq!(hold.expires_at, Millis(31_000));
        assert_eq!(hold.offer_for.as_ref(), Some(&me.entry_id));
        assert_eq!((hold.shard, hold.head_count), (3, 2));
        assert_eq!(offered.offer.as_ref().unwrap().hold_id, hold.hold_id);
        assert!(matches!(
            WaitEntry::leave(Some(&offered), &user, &flight, &id, Millis(9)),
            Err(WaitRefusal::Offered(_))
        ));
    }
}
