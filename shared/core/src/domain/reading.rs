//! Seat readings: what the upstream last said about a seat or a room, shared by every instance.
//!
//! On Lambda each instance has its own memory, so an in-process cache alone would let every
//! instance call the upstream on the same miss. The shared half lives in the store as one entry
//! per key: the last [`Reading`] and, while someone refreshes it, a [`RefreshLease`]. Taking the
//! lease is one conditional write whose rule is [`CacheEntry::may_lease`]; recording a reading is
//! one conditional write whose rule is [`CacheEntry::may_record`]. Both adapters apply exactly
//! these rules (the embedded one by calling them, the DynamoDB one as condition expressions),
//! and the contract suite checks that they agree.
//!
//! A reading's `as_of` is when the call that produced it was *sent*, not answered: a read sent
//! before this system reserved a seat may be answered after, and must not overwrite the
//! reservation's own (later) record.
//!
//! A refresh that failed is remembered too ([`ReadFailure`], written by one conditional write
//! whose rule is [`CacheEntry::may_record_failure`]): until its `until` nobody fleet-wide takes
//! the lease, so single-flight covers failures as well, and an upstream that fails is asked
//! about a key no more often than one that answers. Recording a reading (a later refresh, or
//! this system reserving the seat) clears it at once.

use super::{Millis, RoomId, SeatId, UpstreamRoute};
use serde::{Deserialize, Serialize};

/// What is cached: one seat, or one room's seat map.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "id", rename_all = "snake_case")]
pub enum ReadKey {
    Seat(SeatId),
    Room(RoomId),
}

impl ReadKey {
    /// The store key: `SEAT#<seat_id>` or `ROOM#<room_id>`.
    pub fn as_key(&self) -> String {
        match self {
            ReadKey::Seat(s) => format!("SEAT#{s}"),
            ReadKey::Room(r) => format!("ROOM#{r}"),
        }
    }

    /// The upstream route that reads it.
    pub fn route(&self) -> UpstreamRoute {
        match self {
            ReadKey::Seat(_) => UpstreamRoute::Seat,
            ReadKey::Room(_) => UpstreamRoute::Room,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeatAvailability {
    pub seat_id: SeatId,
    pub available: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadValue {
    Seat {
        available: bool,
    },
    Room {
        seats: Vec<SeatAvailability>,
    },
    /// The upstream knows no such room.
    NoSuchRoom,
}

/// What the upstream said (or what this system just did to the seat), and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reading {
    pub key: ReadKey,
    pub value: ReadValue,
    pub as_of: Millis,
}

impl Reading {
    pub fn seat(seat_id: SeatId, available: bool, as_of: Millis) -> Self {
        Reading {
            key: ReadKey::Seat(seat_id),
            value: ReadValue::Seat { available },
            as_of,
        }
    }

    /// Fresh while younger than `ttl` at `now`.
    pub fn is_fresh(&self, now: Millis, ttl: std::time::Duration) -> bool {
        now < self.as_of.plus(ttl)
    }

    /// For a seat reading, whether the seat is free.
    pub fn seat_available(&self) -> Option<bool> {
        match self.value {
            ReadValue::Seat { available } => Some(available),
            ReadValue::Room { .. } | ReadValue::NoSuchRoom => None,
        }
    }
}

/// One instance refreshing a key: the others serve the last reading (marked stale) meanwhile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefreshLease {
    /// The instance that holds it (a random id per process).
    pub holder: String,
    pub since: Millis,
    pub until: Millis,
}

/// A refresh of a key that brought no reading: no refresh fleet-wide before `until`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadFailure {
    /// When the failed call was sent; a reading recorded from a call sent later wins over it.
    pub at: Millis,
    /// No refresh of the key before this.
    pub until: Millis,
    /// Failures in a row, this one included: the pause grows with it.
    pub count: u32,
}

impl ReadFailure {
    /// The failure of a call sent at `at` and known to have failed at `known`, after
    /// `previous` (the one stored when the refresh began, if any): the pause, from `known` so
    /// that two calls are always at least a TTL apart however slow the first, is `ttl` doubled
    /// per failure in a row, at most `max`, and at least until `not_before` (a `Retry-After`
    /// the upstream gave).
    pub fn after(
        previous: Option<&ReadFailure>,
        at: Millis,
        known: Millis,
        ttl: std::time::Duration,
        max: std::time::Duration,
        not_before: Option<Millis>,
    ) -> ReadFailure {
        let count = previous.map_or(1, |p| p.count.saturating_add(1));
        // Bounded doubling: 2^16 TTLs is past any sensible max already.
        let pause = ttl
            .saturating_mul(1 << (count - 1).min(16))
            .min(max.max(ttl));
        let until = known.max(at).plus(pause).max(not_before.unwrap_or(at));
        ReadFailure { at, until, count }
    }
}

/// A key's shared entry.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CacheEntry {
    pub reading: Option<Reading>,
    pub lease: Option<RefreshLease>,
    /// The last refresh failed: nobody refreshes before its `until`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<ReadFailure>,
}

impl CacheEntry {
    /// Whether `lease` may be taken at `now` on this entry (`None`: no entry yet). Only when the
    /// reading is missing or older than `stale_before`, and no other holder's lease is live. A
    /// lease that a reading recorded after it began has done its job, so it no longer counts; a
    /// holder may take over its own lease (a cancelled refresh in the same instance).
    pub fn may_lease(
        entry: Option<&CacheEntry>,
        lease: &RefreshLease,
        stale_before: Millis,
    ) -> bool {
        let Some(entry) = entry else { return true };
        let now = lease.since;
        let stale = entry
            .reading
            .as_ref()
            .is_none_or(|r| r.as_of < stale_before);
        let lease_free = entry.lease.as_ref().is_none_or(|l| {
            l.until <= now
                || l.holder == lease.holder
                || entry.reading.as_ref().is_some_and(|r| l.since <= r.as_of)
        });
        let not_failing = entry.failure.as_ref().is_none_or(|f| f.until <= now);
        stale && lease_free && not_failing
    }

    /// The live failure at `now`, if the last refresh failed and its pause has not ended.
    pub fn failing_until(&self, now: Millis) -> Option<Millis> {
        self.failure
            .as_ref()
            .map(|f| f.until)
            .filter(|until| now < *until)
    }

    /// Whether `failure` may be recorded over this entry: only if no reading from a call sent
    /// at or after it is stored (that reading is newer news), and it does not end an already
    /// recorded failure sooner. Recording a reading clears the failure ([`CacheEntry::may_record`]
    /// is the only rule for that write).
    pub fn may_record_failure(entry: Option<&CacheEntry>, failure: &ReadFailure) -> bool {
        let Some(entry) = entry else { return true };
        entry.reading.as_ref().is_none_or(|r| r.as_of < failure.at)
            && entry
                .failure
                .as_ref()
                .is_none_or(|f| f.until < failure.until)
    }

    /// Whether `reading` may be recorded over this entry: only if nothing newer is stored. A
    /// recorded reading clears any failure.
    pub fn may_record(entry: Option<&CacheEntry>, reading: &Reading) -> bool {
        entry
            .and_then(|e| e.reading.as_ref())
            .is_none_or(|r| r.as_of < reading.as_of)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn seat() -> SeatId {
        SeatId::parse("A-1").unwrap()
    }

    fn lease(holder: &str, since: i64) -> RefreshLease {
        RefreshLease {
            holder: holder.into(),
            since: Millis(since),
            until: Millis(since + 1_000),
        }
    }

    #[test]
    fn a_fresh_reading_or_a_live_lease_refuses_a_new_lease() {
        let fresh = CacheEntry {
            reading: Some(Reading::seat(seat(), true, Millis(900))),
            lease: None,
            failure: None,
        };
        assert!(!CacheEntry::may_lease(
            Some(&fresh),
            &lease("b", 1_000),
            Millis(500)
        ));
        assert!(CacheEntry::may_lease(
            Some(&fresh),
            &lease("b", 1_000),
            Millis(901)
        ));
        assert!(CacheEntry::may_lease(None, &lease("b", 1_000), Millis(0)));

        let leased = CacheEntry {
            reading: Some(Reading::seat(seat(), true, Millis(100))),
            lease: Some(lease("a", 500)),
            failure: None,
        };
        assert!(!CacheEntry::may_lease(
            Some(&leased),
            &lease("b", 1_000),
            Millis(901)
        ));
        assert!(CacheEntry::may_lease(
            Some(&leased),
            &lease("a", 1_000),
            Millis(901)
        ));
        // Expired, or done (a reading recorded since it began): free again.
        assert!(CacheEntry::may_lease(
            Some(&leased),
            &lease("b", 1_500),
            Millis(901)
        ));
        let done = CacheEntry {
            reading: Some(Reading::seat(seat(), true, Millis(600))),
            lease: Some(lease("a", 500)),
            failure: None,
        };
        assert!(CacheEntry::may_lease(
            Some(&done),
            &lease("b", 1_000),
            Millis(901)
        ));
    }

    #[test]
    fn only_a_newer_reading_is_recorded() {
        let entry = CacheEntry {
            reading: Some(Reading::seat(seat(), false, Millis(1_000))),
            lease: None,
            failure: None,
        };
        assert!(!CacheEntry::may_record(
            Some(&entry),
            &Reading::seat(seat(), true, Millis(999))
        ));
        assert!(!CacheEntry::may_record(
            Some(&entry),
            &Reading::seat(seat(), true, Millis(1_000))
        ));
        assert!(CacheEntry::may_record(
            Some(&entry),
            &Reading::seat(seat(), true, Millis(1_001))
        ));
        assert!(CacheEntry::may_record(
            None,
            &Reading::seat(seat(), true, Millis(1))
        ));
        assert!(
            Reading::seat(seat(), true, Millis(0)).is_fresh(Millis(999), Duration::from_secs(1))
        );
        assert!(
            !Reading::seat(seat(), true, Millis(0)).is_fresh(Millis(1_000), Duration::from_secs(1))
        );
    }

    #[test]
    fn a_failed_refresh_keeps_everyone_off_the_key_until_its_pause_ends() {
        let ttl = Duration::from_secs(1);
        let max = Duration::from_secs(8);
        let first = ReadFailure::after(None, Millis(1_000), Millis(1_000), ttl, max, None);
        assert_eq!((first.until, first.count), (Millis(2_000), 1));
        let entry = CacheEntry {
            reading: Some(Reading::seat(seat(), true, Millis(100))),
            lease: None,
            failure: Some(first.clone()),
        };
        assert_eq!(entry.failing_until(Millis(1_999)), Some(Millis(2_000)));
        assert_eq!(entry.failing_until(Millis(2_000)), None);
        assert!(!CacheEntry::may_lease(
            Some(&entry),
            &lease("b", 1_999),
            Millis(1_500)
        ));
        assert!(CacheEntry::may_lease(
            Some(&entry),
            &lease("b", 2_000),
            Millis(1_500)
        ));
        // It grows while it keeps failing, up to the max, and a Retry-After outlasts it.
        let second = ReadFailure::after(Some(&first), Millis(2_000), Millis(2_000), ttl, max, None);
        assert_eq!((second.until, second.count), (Millis(4_000), 2));
        let mut f = second.clone();
        for _ in 0..10 {
            f = ReadFailure::after(Some(&f), Millis(10_000), Millis(10_000), ttl, max, None);
        }
        assert_eq!(f.until, Millis(18_000));
        let told = ReadFailure::after(
            None,
            Millis(1_000),
            Millis(1_000),
            ttl,
            max,
            Some(Millis(31_000)),
        );
        assert_eq!(told.until, Millis(31_000));
        // A slow call: the pause runs from when its failure was known.
        let slow = ReadFailure::after(None, Millis(1_000), Millis(1_700), ttl, max, None);
        assert_eq!((slow.at, slow.until), (Millis(1_000), Millis(2_700)));
        assert_eq!(told.until, Millis(31_000));
        // Recorded over an older reading and a shorter failure only.
        assert!(CacheEntry::may_record_failure(Some(&entry), &second));
        assert!(!CacheEntry::may_record_failure(Some(&entry), &first));
        assert!(CacheEntry::may_record_failure(None, &first));
        let newer = CacheEntry {
            reading: Some(Reading::seat(seat(), false, Millis(2_000))),
            lease: None,
            failure: None,
        };
        assert!(!CacheEntry::may_record_failure(Some(&newer), &second));
    }
}
