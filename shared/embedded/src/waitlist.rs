//! The waiting list on SQLite: the entry rows, and the serving of the list that every return of
//! seats runs inside its own transaction.
//!
//! The writer runs one transaction at a time, so a join reads the shards' counts and a return
//! reads the list's first entries knowing nothing moves under them: the twin of DynamoDB's
//! conditions on the shards and on each served entry. A user's entry that is no longer waiting is
//! replaced by their next join, as the DynamoDB entry item (one per user and flight) is.

use super::{Cached, EmbeddedBackend, from_json, immediate, sql, to_json};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use seatgate::domain::waitlist::{self, MAX_ENTRIES_SCANNED};
use seatgate::domain::{CheckoutHold, EntryId, Flight, FlightId, Millis, UserId, WaitEntry};
use seatgate::ports::{StoreError, WaitingLists, WaitlistError, WaitlistSummary};

fn load_entry(conn: &Connection, id: &EntryId) -> Result<Option<WaitEntry>, StoreError> {
    let item: Option<String> = conn
        .one(
            "SELECT item FROM waitlist_entries WHERE entry_id = ?1",
            [id.as_str()],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql)?;
    item.map(|json| from_json("waiting-list entry", &json))
        .transpose()
}

fn store_entry(conn: &Connection, entry: &WaitEntry) -> Result<(), StoreError> {
    conn.exec(
        "UPDATE waitlist_entries SET status = ?2, item = ?3 WHERE entry_id = ?1",
        params![
            entry.entry_id.as_str(),
            entry.status.as_str(),
            to_json(entry)?
        ],
    )
    .map_err(sql)?;
    Ok(())
}

/// The flight's first `limit` waiting entries, in the list's order.
fn first_waiting(
    conn: &Connection,
    flight: &FlightId,
    limit: usize,
) -> Result<Vec<WaitEntry>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT item FROM waitlist_entries WHERE flight_id = ?1 AND status = 'WAITING' \
             ORDER BY entry_id LIMIT ?2",
        )
        .map_err(sql)?;
    let items = stmt
        .query_map(params![flight.as_str(), super::int(limit as u64)], |r| {
            r.get::<_, String>(0)
        })
        .map_err(sql)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(sql)?;
    items
        .iter()
        .map(|i| from_json("waiting-list entry", i))
        .collect()
}

/// Adds `k` seats to the user's count on the flight (nothing when `k` is 0).
fn count_seats(
    tx: &Connection,
    flight: &FlightId,
    user: &UserId,
    k: u32,
) -> Result<(), StoreError> {
    if k == 0 {
        return Ok(());
    }
    tx.exec(
        "INSERT INTO flight_users (flight_id, user_id, booked) VALUES (?1, ?2, ?3) \
         ON CONFLICT (flight_id, user_id) DO UPDATE SET booked = booked + ?3",
        params![flight.as_str(), user.as_str(), k],
    )
    .map_err(sql)
    .map(|_| ())
}

/// Serves the flight's waiting list from shard `shard`'s free seats at `now`, inside the caller's
/// transaction (a return's): each served entry `OFFERED`, its offer's hold inserted, the shard's
/// seats moved from `available` to `held`, and each offer's outbox row stamped `recorded_at` (the
/// store clock's reading, as every outbox row is). Returns the offers made.
pub(super) fn serve_waitlist(
    tx: &Connection,
    flight: &FlightId,
    shard: u32,
    now: Millis,
    recorded_at: Millis,
) -> Result<Vec<CheckoutHold>, StoreError> {
    let waiting = first_waiting(tx, flight, MAX_ENTRIES_SCANNED)?;
    if waiting.is_empty() {
        return Ok(Vec::new());
    }
    let available: u32 = tx
        .one(
            "SELECT available FROM flight_shards WHERE flight_id = ?1 AND shard = ?2",
            params![flight.as_str(), shard],
            |r| r.get(0),
        )
        .map_err(sql)?;
    let served = waitlist::serve(available, &waiting);
    if served.is_empty() {
        return Ok(Vec::new());
    }
    let item: String = tx
        .one(
            "SELECT item FROM flights WHERE flight_id = ?1",
            [flight.as_str()],
            |r| r.get(0),
        )
        .map_err(sql)?;
    let flight_item = from_json::<Flight>("flight", &item)?;
    let mut offers = Vec::with_capacity(served.len());
    for i in served {
        let (entry, hold) = waiting[i].offer(shard, &flight_item.checkout, now);
        store_entry(tx, &entry)?;
        super::checkout::insert_hold(tx, &hold)?;
        super::outbox::insert_offer_outbox(tx, None, &hold, recorded_at)?;
        if flight_item.max_per_user.is_some() {
            // Counted like a hold (its return takes the count back down), without a refusal:
            // the join checked the room, and counted it already unless the entry predates that.
            count_seats(tx, flight, &hold.user_id, waiting[i].counted_at_offer())?;
        }
        tx.exec(
            "UPDATE flight_shards SET available = available - ?3, held = held + ?3 \
             WHERE flight_id = ?1 AND shard = ?2",
            params![flight.as_str(), shard, hold.head_count],
        )
        .map_err(sql)?;
        offers.push(hold);
    }
    Ok(offers)
}

#[async_trait]
impl WaitingLists for EmbeddedBackend {
    async fn join_waitlist(
        &self,
        entry: &WaitEntry,
        max_per_user: Option<u32>,
    ) -> Result<(), WaitlistError> {
        let entry = entry.clone().joining(max_per_user);
        self.run(move |conn, _| {
            immediate(conn, |tx| {
                let (flight, user) = (entry.flight_id.as_str(), entry.user_id.as_str());
                let existing: Option<String> = tx
                    .one(
                        "SELECT item FROM waitlist_entries \
                         WHERE flight_id = ?1 AND user_id = ?2 AND status = 'WAITING'",
                        params![flight, user],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(sql)?;
                let existing: Option<WaitEntry> = existing
                    .map(|json| from_json("waiting-list entry", &json))
                    .transpose()?;
                let mut stmt = tx
                    .prepare_cached(
                        "SELECT available FROM flight_shards WHERE flight_id = ?1 ORDER BY shard",
                    )
                    .map_err(sql)?;
                let available = stmt
                    .query_map([flight], |r| r.get::<_, u32>(0))
                    .map_err(sql)?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(sql)?;
                if available.is_empty() {
                    return Err(StoreError::Unavailable("no such flight".into()).into());
                }
                let counted: u32 = tx
                    .one(
                        "SELECT booked FROM flight_users WHERE flight_id = ?1 AND user_id = ?2",
                        params![flight, user],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(sql)?
                    .unwrap_or(0);
                WaitEntry::may_join(
                    &available,
                    entry.head_count,
                    max_per_user,
                    counted,
                    existing.as_ref(),
                )?;
                // The user's earlier entry (served or left) is replaced, as on DynamoDB.
                tx.exec(
                    "DELETE FROM waitlist_entries WHERE flight_id = ?1 AND user_id = ?2",
                    params![flight, user],
                )
                .map_err(sql)?;
                tx.exec(
                    "INSERT INTO waitlist_entries (entry_id, flight_id, user_id, status, item) \
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![
                        entry.entry_id.as_str(),
                        flight,
                        user,
                        entry.status.as_str(),
                        to_json(&entry)?
                    ],
                )
                .map_err(super::refuse_duplicate("entry id"))?;
                count_seats(
                    tx,
                    &entry.flight_id,
                    &entry.user_id,
                    entry.counted_at_join(),
                )?;
                Ok(())
            })
        })
        .await
    }

    async fn wait_entry(
        &self,
        user: &UserId,
        flight: &FlightId,
        id: &EntryId,
    ) -> Result<Option<WaitEntry>, StoreError> {
        let (user, flight, id) = (user.clone(), flight.clone(), id.clone());
        self.read(move |conn, _| {
            Ok(load_entry(conn, &id)?.filter(|e| e.user_id == user && e.flight_id == flight))
        })
        .await
    }

    async fn waiting_ahead(&self, flight: &FlightId, id: &EntryId) -> Result<u64, StoreError> {
        let (flight, id) = (flight.clone(), id.clone());
        self.read(move |conn, _| {
            conn.one(
                "SELECT COUNT(*) FROM waitlist_entries \
                 WHERE flight_id = ?1 AND status = 'WAITING' AND entry_id < ?2",
                params![flight.as_str(), id.as_str()],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n.unsigned_abs())
            .map_err(sql)
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
        let (user, flight, id) = (user.clone(), flight.clone(), id.clone());
        self.run(move |conn, _| {
            immediate(conn, |tx| {
                let found = load_entry(tx, &id)?;
                let entry = WaitEntry::leave(found.as_ref(), &user, &flight, &id, now)?;
                if Some(&entry) != found.as_ref() {
                    store_entry(tx, &entry)?;
                    tx.exec(
                        "UPDATE flight_users SET booked = max(booked - ?3, 0) \
                         WHERE flight_id = ?1 AND user_id = ?2",
                        params![flight.as_str(), user.as_str(), entry.counted_at_join()],
                    )
                    .map_err(sql)?;
                }
                Ok(entry)
            })
        })
        .await
    }

    async fn waitlist_summary(&self, flight: &FlightId) -> Result<WaitlistSummary, StoreError> {
        let flight = flight.clone();
        self.read(move |conn, _| {
            let waiting: i64 = conn
                .one(
                    "SELECT COUNT(*) FROM waitlist_entries \
                     WHERE flight_id = ?1 AND status = 'WAITING'",
                    [flight.as_str()],
                    |r| r.get(0),
                )
                .map_err(sql)?;
            Ok(WaitlistSummary {
                waiting: waiting.unsigned_abs(),
                oldest: first_waiting(conn, &flight, 1)?.pop(),
            })
        })
        .await
    }
}
