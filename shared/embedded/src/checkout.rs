//! Checkout holds on SQLite: the hold rows, a shard's `held` column, and the transactions that
//! take, confirm and give back a hold's seats.
//!
//! Each operation is one write-locked transaction shaped like its DynamoDB twin: the stored hold
//! is read, the hold rule ([`CheckoutHold::resolve`]) decides on it, and the writes follow. The
//! writer runs one transaction at a time, so the rule decides on exactly what the write
//! replaces, as DynamoDB's `status = HELD` condition does. One live hold per user and flight is
//! the partial unique index `checkout_holds_one_live`, checked before the insert so the refusal
//! comes back in the port's order. A return (a release or lapse) serves the waiting list in the
//! same transaction ([`super::waitlist`]).

use super::{Cached, EmbeddedBackend, from_json, immediate, refuse_duplicate, sql, to_json};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use seatgate::domain::{
    BookingAnswer, CheckoutHold, Flight, FlightHoldKey, FlightId, HoldAction, HoldId, HoldStatus,
    IdempotencyKey, Millis, Page, PageSize, RequestState, UserId,
};
use seatgate::ports::{CheckoutHolds, CreateHoldRefusal, ResolveHoldError, StoreError};

/// The holds a listing's query selects (its one column, `item`), decoded in its order.
fn holds_where(
    conn: &Connection,
    query: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<CheckoutHold>, StoreError> {
    let mut stmt = conn.prepare_cached(query).map_err(sql)?;
    let items = stmt
        .query_map(params, |r| r.get::<_, String>(0))
        .map_err(sql)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(sql)?;
    items
        .iter()
        .map(|i| from_json("checkout hold", i))
        .collect()
}

fn load_hold(conn: &Connection, id: &HoldId) -> Result<Option<CheckoutHold>, StoreError> {
    let item: Option<String> = conn
        .one(
            "SELECT item FROM checkout_holds WHERE hold_id = ?1",
            [id.as_str()],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql)?;
    item.map(|json| from_json("checkout hold", &json))
        .transpose()
}

/// A new hold's row (a hold asked for, or an offer).
pub(super) fn insert_hold(conn: &Connection, hold: &CheckoutHold) -> Result<(), StoreError> {
    conn.exec(
        "INSERT INTO checkout_holds \
         (hold_id, user_id, flight_id, status, expires_at, item, offer_for) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            hold.hold_id.as_str(),
            hold.user_id.as_str(),
            hold.flight_id.as_str(),
            hold.status.as_str(),
            hold.expires_at.0,
            to_json(hold)?,
            hold.offer_for.as_ref().map(|e| e.as_str())
        ],
    )
    .map_err(refuse_duplicate("hold id"))?;
    Ok(())
}

fn store_hold(conn: &Connection, hold: &CheckoutHold) -> Result<(), StoreError> {
    conn.exec(
        "UPDATE checkout_holds SET status = ?2, expires_at = ?3, item = ?4 WHERE hold_id = ?1",
        params![
            hold.hold_id.as_str(),
            hold.status.as_str(),
            hold.expires_at.0,
            to_json(hold)?
        ],
    )
    .map_err(sql)?;
    Ok(())
}

#[async_trait]
impl CheckoutHolds for EmbeddedBackend {
    async fn create_hold(
        &self,
        hold: &CheckoutHold,
        max_per_user: Option<u32>,
        answer_to: Option<(&IdempotencyKey, &str)>,
    ) -> Result<(), CreateHoldRefusal> {
        let hold = hold.clone();
        let answer_to = answer_to.map(|(k, t)| (k.clone(), t.to_owned()));
        self.run(move |conn, _| {
            immediate(conn, |tx| {
                let (flight, user) = (hold.flight_id.as_str(), hold.user_id.as_str());
                let (available, held): (u32, u32) = tx
                    .one(
                        "SELECT available, held FROM flight_shards \
                         WHERE flight_id = ?1 AND shard = ?2",
                        params![flight, hold.shard],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .optional()
                    .map_err(sql)?
                    .ok_or_else(|| StoreError::Unavailable("no such flight shard".into()))?;
                let counted: u32 = match max_per_user {
                    None => 0,
                    Some(_) => tx
                        .one(
                            "SELECT booked FROM flight_users WHERE flight_id = ?1 AND user_id = ?2",
                            params![flight, user],
                            |r| r.get(0),
                        )
                        .optional()
                        .map_err(sql)?
                        .unwrap_or(0),
                };
                let taken = Flight::book(available, counted, hold.head_count, max_per_user)?;
                let live: Option<i64> = tx
                    .one(
                        "SELECT 1 FROM checkout_holds \
                         WHERE flight_id = ?1 AND user_id = ?2 AND status = 'HELD' \
                         AND offer_for IS NULL",
                        params![flight, user],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(sql)?;
                if live.is_some() {
                    return Err(CreateHoldRefusal::HoldExists);
                }
                tx.exec(
                    "UPDATE flight_shards SET available = ?3, held = ?4 \
                     WHERE flight_id = ?1 AND shard = ?2",
                    params![flight, hold.shard, taken.available, held + hold.head_count],
                )
                .map_err(sql)?;
                insert_hold(tx, &hold)?;
                if let Some(counted) = taken.held {
                    tx.exec(
                        "INSERT INTO flight_users (flight_id, user_id, booked) VALUES (?1, ?2, ?3) \
                         ON CONFLICT (flight_id, user_id) DO UPDATE SET booked = ?3",
                        params![flight, user, counted],
                    )
                    .map_err(sql)?;
                }
                if let Some((key, token)) = &answer_to {
                    let mut record = match super::flights::load_record(tx, &hold.user_id, key)? {
                        Some(r) if r.is_in_progress_under(token) => r,
                        _ => return Err(CreateHoldRefusal::RequestTakenOver),
                    };
                    record.state = RequestState::Done {
                        answer: BookingAnswer::Held {
                            hold: Box::new(hold.clone()),
                        },
                    };
                    super::flights::store_record(tx, &record)?;
                }
                Ok(())
            })
        })
        .await
    }

    async fn hold(&self, user: &UserId, id: &HoldId) -> Result<Option<CheckoutHold>, StoreError> {
        let (user, id) = (user.clone(), id.clone());
        self.read(move |conn, _| Ok(load_hold(conn, &id)?.filter(|h| h.user_id == user)))
            .await
    }

    async fn resolve_hold(
        &self,
        user: &UserId,
        flight: &FlightId,
        id: &HoldId,
        action: HoldAction,
        now: Millis,
    ) -> Result<CheckoutHold, ResolveHoldError> {
        let (user, flight, id) = (user.clone(), flight.clone(), id.clone());
        self.run(move |conn, ctx| {
            let recorded_at = ctx.clock.now();
            immediate(conn, |tx| {
                let found = load_hold(tx, &id)?;
                let hold =
                    CheckoutHold::resolve(found.as_ref(), Some(&user), &flight, action, now)?;
                store_hold(tx, &hold)?;
                super::outbox::insert_offer_outbox(tx, found.as_ref(), &hold, recorded_at)?;
                let (f, k) = (flight.as_str(), hold.head_count);
                match hold.status {
                    HoldStatus::Held => {}
                    HoldStatus::Confirmed => {
                        let booking = hold.booking().ok_or_else(|| {
                            StoreError::Corrupt("a confirmed hold without its booking".into())
                        })?;
                        tx.exec(
                            "UPDATE flight_shards SET held = held - ?3 \
                             WHERE flight_id = ?1 AND shard = ?2",
                            params![f, hold.shard, k],
                        )
                        .map_err(sql)?;
                        tx.exec(
                            "INSERT INTO bookings \
                             (booking_id, user_id, flight_id, status, created_at, item) \
                             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                            params![
                                booking.booking_id.as_str(),
                                booking.user_id.as_str(),
                                f,
                                booking.status.as_str(),
                                booking.created_at.0,
                                to_json(&booking)?
                            ],
                        )
                        .map_err(refuse_duplicate("booking id"))?;
                    }
                    HoldStatus::Released | HoldStatus::Lapsed => {
                        tx.exec(
                            "UPDATE flight_shards SET held = held - ?3, available = available + ?3 \
                             WHERE flight_id = ?1 AND shard = ?2",
                            params![f, hold.shard, k],
                        )
                        .map_err(sql)?;
                        tx.exec(
                            "UPDATE flight_users SET booked = booked - ?3 \
                             WHERE flight_id = ?1 AND user_id = ?2 AND booked >= ?3",
                            params![f, hold.user_id.as_str(), k],
                        )
                        .map_err(sql)?;
                        tx.exec("UPDATE flights SET sold_out = 0 WHERE flight_id = ?1", [f])
                            .map_err(sql)?;
                        super::waitlist::serve_waitlist(tx, &flight, hold.shard, now, recorded_at)?;
                    }
                }
                Ok(hold)
            })
        })
        .await
    }

    async fn holds_of(
        &self,
        user: &UserId,
        after: Option<&HoldId>,
        size: PageSize,
    ) -> Result<Page<CheckoutHold, HoldId>, StoreError> {
        let user = user.clone();
        // Hold ids are non-empty, so "" sorts before every one of them.
        let after = after.map(|id| id.as_str().to_owned()).unwrap_or_default();
        self.read(move |conn, _| {
            let holds = holds_where(
                conn,
                "SELECT item FROM checkout_holds WHERE user_id = ?1 AND hold_id > ?2 \
                 ORDER BY hold_id LIMIT ?3",
                params![user.as_str(), after, size.overread()],
            )?;
            Ok(Page::from_overread(holds, size, |h| h.hold_id.clone()))
        })
        .await
    }

    async fn flight_holds(
        &self,
        flight: &Flight,
        status: HoldStatus,
        after: Option<&FlightHoldKey>,
        size: PageSize,
    ) -> Result<Page<CheckoutHold, FlightHoldKey>, StoreError> {
        let flight = flight.flight_id.clone();
        // Shards are never negative and ids never empty: (-1, '') is before every hold.
        let (shard, id) = after.map_or((-1, String::new()), |k| {
            (i64::from(k.shard), k.hold_id.as_str().to_owned())
        });
        self.read(move |conn, _| {
            let holds = holds_where(
                conn,
                "SELECT item FROM checkout_holds \
                 WHERE flight_id = ?1 AND status = ?2 \
                 AND (json_extract(item, '$.shard'), hold_id) > (?3, ?4) \
                 ORDER BY json_extract(item, '$.shard'), hold_id LIMIT ?5",
                params![flight.as_str(), status.as_str(), shard, id, size.overread()],
            )?;
            Ok(Page::from_overread(holds, size, FlightHoldKey::of))
        })
        .await
    }

    async fn due_holds(&self, now: Millis, limit: usize) -> Result<Vec<CheckoutHold>, StoreError> {
        self.read(move |conn, _| {
            holds_where(
                conn,
                "SELECT item FROM checkout_holds \
                 WHERE status = 'HELD' AND expires_at <= ?1 ORDER BY expires_at LIMIT ?2",
                params![now.0, super::int(limit as u64)],
            )
        })
        .await
    }
}
