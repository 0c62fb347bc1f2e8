//! The waiting list (`WaitingLists`), and the serving of it that every return of seats runs.
//!
//! Every call runs under the backend's one lock, so a join that read the shards and a return that
//! read the list decide on exactly what they then write, as the DynamoDB conditions make them.

use crate::faults::Op;
use crate::{MemoryBackend, Tx};
use async_trait::async_trait;
use seatgate::domain::waitlist::{self, MAX_ENTRIES_SCANNED};
use seatgate::domain::{EntryId, FlightId, Millis, UserId, WaitEntry};
use seatgate::ports::{StoreError, WaitingLists, WaitlistError, WaitlistSummary};

/// The flight's first `limit` waiting entries, in the list's order.
fn first_waiting(tx: &Tx<'_>, flight: &FlightId, limit: usize) -> Vec<WaitEntry> {
    tx.state
        .waiting
        .get(flight)
        .into_iter()
        .flatten()
        .take(limit)
        .filter_map(|id| tx.state.wait_entries.get(id).cloned())
        .collect()
}

/// Serves `flight`'s waiting list from shard `shard`'s free seats at `now`, inside the caller's
/// call (a return's): each served entry `OFFERED`, its offer's hold stored, the seats moved from
/// `available` to `held`, counted for the user when the flight keeps counts and the entry's join
/// did not count it already.
pub(crate) fn serve_in(tx: &mut Tx<'_>, flight: &FlightId, shard: u32, now: Millis) {
    let mut waiting = first_waiting(tx, flight, MAX_ENTRIES_SCANNED);
    if tx.config.planted(crate::StorePlant::OfferSkipsTheLine) {
        // The bug: the newest first.
        waiting.reverse();
    }
    let Some(row) = tx.state.flights.get(flight) else {
        return;
    };
    let (free, times, counts) = (
        row.available[shard as usize],
        row.flight.checkout,
        row.flight.max_per_user.is_some(),
    );
    for i in waitlist::serve(free, &waiting) {
        let (entry, hold) = waiting[i].offer(shard, &times, now);
        tx.log(&entry);
        tx.log(&hold);
        if let Some(row) = tx.state.flights.get_mut(flight) {
            row.available[shard as usize] -= hold.head_count;
            row.held[shard as usize] += hold.head_count;
        }
        if counts {
            *tx.state
                .flight_users
                .entry((flight.clone(), hold.user_id.clone()))
                .or_default() += waiting[i].counted_at_offer();
        }
        tx.state.store_wait_entry(entry);
        tx.record_offer(None, &hold);
        tx.state.store_checkout_hold(hold);
    }
}

#[async_trait]
impl WaitingLists for MemoryBackend {
    async fn join_waitlist(
        &self,
        entry: &WaitEntry,
        max_per_user: Option<u32>,
    ) -> Result<(), WaitlistError> {
        let entry = &entry.clone().joining(max_per_user);
        self.timed(Op::JoinWaitlist, |tx| {
            let user_key = (entry.flight_id.clone(), entry.user_id.clone());
            let available = tx
                .state
                .flights
                .get(&entry.flight_id)
                .map(|row| row.available.clone())
                .ok_or_else(|| StoreError::Unavailable("no such flight".into()))?;
            let existing = tx
                .state
                .user_entries
                .get(&user_key)
                .and_then(|id| tx.state.wait_entries.get(id));
            let counted = tx.state.flight_users.get(&user_key).copied().unwrap_or(0);
            WaitEntry::may_join(
                &available,
                entry.head_count,
                max_per_user,
                counted,
                existing,
            )?;
            if tx.state.wait_entries.contains_key(&entry.entry_id) {
                return Err(StoreError::Unavailable("entry id already exists".into()).into());
            }
            tx.log(entry);
            if entry.counted {
                *tx.state.flight_users.entry(user_key).or_default() += entry.head_count;
            }
            tx.state.store_wait_entry(entry.clone());
            Ok(())
        })
        .await
    }

    async fn wait_entry(
        &self,
        user: &UserId,
        flight: &FlightId,
        id: &EntryId,
    ) -> Result<Option<WaitEntry>, StoreError> {
        self.timed(Op::WaitEntry, |tx| {
            Ok(tx
                .state
                .wait_entries
                .get(id)
                .filter(|e| e.user_id == *user && e.flight_id == *flight)
                .cloned())
        })
        .await
    }

    async fn waiting_ahead(&self, flight: &FlightId, id: &EntryId) -> Result<u64, StoreError> {
        self.timed(Op::WaitingAhead, |tx| {
            Ok(tx
                .state
                .waiting
                .get(flight)
                .map_or(0, |list| list.range::<EntryId, _>(..id).count() as u64))
        })
        .await
    }

    async fn leave_waitlist(
        &self,
        user: &UserId,
        flight: &FlightId,
        id: &EntryId,
        now: Millis,
    ) -> Result<WaitEntry, WaitlistError> {
        self.timed(Op::LeaveWaitlist, |tx| {
            let found = tx.state.wait_entries.get(id).cloned();
            let entry = WaitEntry::leave(found.as_ref(), user, flight, id, now)?;
            if Some(&entry) != found.as_ref() {
                tx.log(&entry);
                if let Some(count) = tx
                    .state
                    .flight_users
                    .get_mut(&(flight.clone(), user.clone()))
                {
                    *count = count.saturating_sub(entry.counted_at_join());
                }
                tx.state.store_wait_entry(entry.clone());
            }
            Ok(entry)
        })
        .await
    }

    async fn waitlist_summary(&self, flight: &FlightId) -> Result<WaitlistSummary, StoreError> {
        self.timed(Op::WaitlistSummary, |tx| {
            Ok(WaitlistSummary {
                waiting: tx.state.waiting.get(flight).map_or(0, |l| l.len() as u64),
                oldest: first_waiting(tx, flight, 1).pop(),
            })
        })
        .await
    }
}
