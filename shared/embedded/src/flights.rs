//! The flash sale's store on SQLite: flights, their shard counters, bookings, per-user counts
//! and idempotency records.
//!
//! A booking is one `BEGIN IMMEDIATE` transaction shaped like the DynamoDB one: a decrement that
//! applies only while the shard has the seats (`available >= k`, and a `CHECK` that the count
//! never goes below zero as a second guard), the booking insert, the per-user count and the
//! idempotency answer. Any refusal returns an error from the closure, which rolls back
//! everything the transaction wrote.

use super::{Cached, EmbeddedBackend, from_json, immediate, refuse_duplicate, sql, to_json};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use seatgate::domain::{
    Admission, Booking, BookingAnswer, BookingId, Flight, FlightId, IdempotencyKey,
    IdempotencyRecord, Inventory, Millis, Page, PageSize, RequestState, UserId,
};
use seatgate::ports::{Begun, BookRefusal, CancelBookingRefusal, Flights, StoreError};

fn load_booking(conn: &Connection, id: &BookingId) -> Result<Option<Booking>, StoreError> {
    let item: Option<String> = conn
        .prepare_cached("SELECT item FROM bookings WHERE booking_id = ?1")
        .map_err(sql)?
        .query_row([id.as_str()], |r| r.get(0))
        .optional()
        .map_err(sql)?;
    item.map(|json| from_json("booking", &json)).transpose()
}

pub(super) fn load_record(
    conn: &Connection,
    user: &UserId,
    key: &IdempotencyKey,
) -> Result<Option<IdempotencyRecord>, StoreError> {
    let item: Option<String> = conn
        .prepare_cached("SELECT item FROM idempotency WHERE user_id = ?1 AND key = ?2")
        .map_err(sql)?
        .query_row([user.as_str(), key.as_str()], |r| r.get(0))
        .optional()
        .map_err(sql)?;
    item.map(|json| from_json("idempotency record", &json))
        .transpose()
}

pub(super) fn store_record(
    conn: &Connection,
    record: &IdempotencyRecord,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO idempotency (user_id, key, item) VALUES (?1, ?2, ?3) \
         ON CONFLICT (user_id, key) DO UPDATE SET item = excluded.item",
    )
    .map_err(sql)?
    .execute(params![
        record.user_id.as_str(),
        record.key.as_str(),
        to_json(record)?
    ])
    .map_err(sql)?;
    Ok(())
}

#[async_trait]
impl Flights for EmbeddedBackend {
    async fn create_flight(&self, flight: &Flight) -> Result<bool, StoreError> {
        let flight = flight.clone();
        self.run(move |conn, _| {
            immediate(conn, |tx| {
                let inserted = tx
                    .exec(
                        "INSERT INTO flights (flight_id, sold_out, item) VALUES (?1, 0, ?2) \
                         ON CONFLICT (flight_id) DO NOTHING",
                        params![flight.flight_id.as_str(), to_json(&flight)?],
                    )
                    .map_err(sql)?;
                if inserted == 0 {
                    return Ok(false);
                }
                for shard in 0..flight.shards {
                    tx.exec(
                        "INSERT INTO flight_shards (flight_id, shard, available) VALUES (?1, ?2, ?3)",
                        params![flight.flight_id.as_str(), shard, flight.shard_capacity(shard)],
                    )
                    .map_err(sql)?;
                }
                Ok(true)
            })
        })
        .await
    }

    async fn inventory(&self, id: &FlightId) -> Result<Option<Inventory>, StoreError> {
        let id = id.clone();
        self.read(move |conn, _| {
            let row: Option<(String, bool)> = conn
                .prepare_cached("SELECT item, sold_out FROM flights WHERE flight_id = ?1")
                .map_err(sql)?
                .query_row([id.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
                .map_err(sql)?;
            let Some((item, sold_out)) = row else {
                return Ok(None);
            };
            let flight: Flight = from_json("flight", &item)?;
            let mut stmt = conn
                .prepare_cached(
                    "SELECT available, held FROM flight_shards WHERE flight_id = ?1 ORDER BY shard",
                )
                .map_err(sql)?;
            let (available, held) = stmt
                .query_map([id.as_str()], |r| {
                    Ok((r.get::<_, u32>(0)?, r.get::<_, u32>(1)?))
                })
                .map_err(sql)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(sql)?
                .into_iter()
                .unzip();
            Ok(Some(Inventory {
                flight,
                available,
                held,
                sold_out,
            }))
        })
        .await
    }

    async fn book(
        &self,
        booking: &Booking,
        max_per_user: Option<u32>,
        answer_to: Option<(&IdempotencyKey, &str)>,
        admission: Option<&Admission>,
    ) -> Result<(), BookRefusal> {
        let booking = booking.clone();
        let answer_to = answer_to.map(|(k, t)| (k.clone(), t.to_owned()));
        let admission = admission.cloned();
        self.run(move |conn, _| {
            immediate(conn, |tx| {
                let k = booking.head_count;
                let available: u32 = tx
                    .one(
                        "SELECT available FROM flight_shards WHERE flight_id = ?1 AND shard = ?2",
                        params![booking.flight_id.as_str(), booking.shard],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(sql)?
                    .ok_or_else(|| StoreError::Unavailable("no such flight shard".into()))?;
                let held: u32 = match max_per_user {
                    None => 0,
                    Some(_) => tx
                        .one(
                            "SELECT booked FROM flight_users WHERE flight_id = ?1 AND user_id = ?2",
                            params![booking.flight_id.as_str(), booking.user_id.as_str()],
                            |r| r.get(0),
                        )
                        .optional()
                        .map_err(sql)?
                        .unwrap_or(0),
                };
                // Read and written inside one write-locked transaction: the rule decides on
                // what the write replaces, as DynamoDB's conditions do.
                let taken = Flight::book(available, held, k, max_per_user)?;
                tx.exec(
                    "UPDATE flight_shards SET available = ?3 WHERE flight_id = ?1 AND shard = ?2",
                    params![booking.flight_id.as_str(), booking.shard, taken.available],
                )
                .map_err(sql)?;
                tx.prepare_cached(
                    "INSERT INTO bookings (booking_id, user_id, flight_id, status, created_at, item) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .map_err(sql)?
                .execute(params![
                    booking.booking_id.as_str(),
                    booking.user_id.as_str(),
                    booking.flight_id.as_str(),
                    booking.status.as_str(),
                    booking.created_at.0,
                    to_json(&booking)?,
                ])
                .map_err(refuse_duplicate("booking id"))?;
                if let Some(held) = taken.held {
                    tx.exec(
                        "INSERT INTO flight_users (flight_id, user_id, booked) VALUES (?1, ?2, ?3) \
                         ON CONFLICT (flight_id, user_id) DO UPDATE SET booked = ?3",
                        params![booking.flight_id.as_str(), booking.user_id.as_str(), held],
                    )
                    .map_err(sql)?;
                }
                if let Some((key, token)) = &answer_to {
                    let mut record = match load_record(tx, &booking.user_id, key)? {
                        Some(r) if r.is_in_progress_under(token) => r,
                        _ => return Err(BookRefusal::RequestTakenOver),
                    };
                    record.state = RequestState::Done {
                        answer: BookingAnswer::Booked {
                            booking: booking.clone(),
                        },
                    };
                    store_record(tx, &record)?;
                }
                // Last, as the port orders the refusals; a refusal rolls back the writes above.
                if let Some(a) = &admission
                    && !crate::rate_limits::count(tx, &a.window, a.limit)?
                {
                    return Err(BookRefusal::RateLimited);
                }
                Ok(())
            })
        })
        .await
    }

    async fn mark_sold_out(&self, id: &FlightId, shards: u32) -> Result<bool, StoreError> {
        let id = id.clone();
        self.run(move |conn, _| {
            immediate(conn, |tx| {
                let available = {
                    let mut stmt = tx
                        .prepare_cached(
                            "SELECT available FROM flight_shards \
                             WHERE flight_id = ?1 AND shard < ?2 ORDER BY shard",
                        )
                        .map_err(sql)?;
                    stmt.query_map(params![id.as_str(), shards], |r| r.get::<_, u32>(0))
                        .map_err(sql)?
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(sql)?
                };
                if available.len() != shards as usize || !Inventory::is_sold_out(&available) {
                    return Ok(false);
                }
                let marked = tx
                    .exec(
                        "UPDATE flights SET sold_out = 1 WHERE flight_id = ?1",
                        [id.as_str()],
                    )
                    .map_err(sql)?;
                Ok(marked == 1)
            })
        })
        .await
    }

    async fn bookings_of(
        &self,
        user: &UserId,
        after: Option<&BookingId>,
        size: PageSize,
    ) -> Result<Page<Booking, BookingId>, StoreError> {
        let user = user.clone();
        // Booking ids are non-empty, so "" sorts before every one of them.
        let after = after.map(|id| id.as_str().to_owned()).unwrap_or_default();
        self.read(move |conn, _| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT item FROM bookings WHERE user_id = ?1 AND booking_id > ?2 \
                     ORDER BY booking_id LIMIT ?3",
                )
                .map_err(sql)?;
            let items = stmt
                .query_map(params![user.as_str(), after, size.overread()], |r| {
                    r.get::<_, String>(0)
                })
                .map_err(sql)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(sql)?;
            let bookings = items
                .iter()
                .map(|i| from_json("booking", i))
                .collect::<Result<Vec<Booking>, _>>()?;
            Ok(Page::from_overread(bookings, size, |b| {
                b.booking_id.clone()
            }))
        })
        .await
    }

    async fn cancel_booking(
        &self,
        user: &UserId,
        flight: &FlightId,
        id: &BookingId,
        now: Millis,
    ) -> Result<Booking, CancelBookingRefusal> {
        let (user, flight, id) = (user.clone(), flight.clone(), id.clone());
        self.run(move |conn, ctx| {
            immediate(conn, |tx| {
                let found = load_booking(tx, &id)?;
                let booking = Booking::cancel(found.as_ref(), &user, &flight, now)?;
                tx.exec(
                    "UPDATE bookings SET status = ?2, item = ?3 WHERE booking_id = ?1",
                    params![id.as_str(), booking.status.as_str(), to_json(&booking)?],
                )
                .map_err(sql)?;
                tx.exec(
                    "UPDATE flight_shards SET available = available + ?3 \
                     WHERE flight_id = ?1 AND shard = ?2",
                    params![flight.as_str(), booking.shard, booking.head_count],
                )
                .map_err(sql)?;
                tx.exec(
                    "UPDATE flight_users SET booked = booked - ?3 \
                     WHERE flight_id = ?1 AND user_id = ?2 AND booked >= ?3",
                    params![flight.as_str(), user.as_str(), booking.head_count],
                )
                .map_err(sql)?;
                tx.exec(
                    "UPDATE flights SET sold_out = 0 WHERE flight_id = ?1",
                    [flight.as_str()],
                )
                .map_err(sql)?;
                super::waitlist::serve_waitlist(tx, &flight, booking.shard, now, ctx.clock.now())?;
                Ok(booking)
            })
        })
        .await
    }

    async fn begin_request(&self, record: &IdempotencyRecord) -> Result<Begun, StoreError> {
        let record = record.clone();
        if let RequestState::Done { .. } = record.state {
            return self.begin_answered(record).await;
        }
        self.run(move |conn, _| {
            immediate(conn, |tx| {
                match load_record(tx, &record.user_id, &record.key)? {
                    Some(found)
                        if !IdempotencyRecord::may_begin(Some(&found), record.created_at) =>
                    {
                        Ok(Begun::Existing(found))
                    }
                    _ => {
                        store_record(tx, &record)?;
                        Ok(Begun::Started)
                    }
                }
            })
        })
        .await
    }

    async fn finish_request(
        &self,
        user: &UserId,
        key: &IdempotencyKey,
        token: &str,
        answer: &BookingAnswer,
    ) -> Result<bool, StoreError> {
        let (user, key, token, answer) =
            (user.clone(), key.clone(), token.to_owned(), answer.clone());
        self.run(move |conn, _| {
            immediate(conn, |tx| {
                let Some(mut record) = load_record(tx, &user, &key)? else {
                    return Ok(false);
                };
                if !record.is_in_progress_under(&token) {
                    return Ok(false);
                }
                record.state = RequestState::Done { answer };
                store_record(tx, &record)?;
                Ok(true)
            })
        })
        .await
    }

    async fn abandon_request(
        &self,
        user: &UserId,
        key: &IdempotencyKey,
        token: &str,
    ) -> Result<(), StoreError> {
        let (user, key, token) = (user.clone(), key.clone(), token.to_owned());
        self.run(move |conn, _| {
            immediate(conn, |tx| {
                if load_record(tx, &user, &key)?.is_some_and(|r| r.is_in_progress_under(&token)) {
                    tx.exec(
                        "DELETE FROM idempotency WHERE user_id = ?1 AND key = ?2",
                        [user.as_str(), key.as_str()],
                    )
                    .map_err(sql)?;
                }
                Ok(())
            })
        })
        .await
    }
}

impl EmbeddedBackend {
    /// An already answered record (a refusal that wrote nothing else): the key's stored record
    /// read beside the writer, and when the key is free, the conditional put queued without
    /// waiting for its group's commit (the port allows it). The writer's queue keeps the put
    /// ahead of any later write, so a retry that attempts something finds the answer; a retry
    /// that reads before the commit finds nothing and is refused the same way.
    async fn begin_answered(&self, record: IdempotencyRecord) -> Result<Begun, StoreError> {
        let (user, key) = (record.user_id.clone(), record.key.clone());
        let found = self
            .read(move |conn, _| load_record(conn, &user, &key))
            .await?;
        if let Some(found) = found
            && !IdempotencyRecord::may_begin(Some(&found), record.created_at)
        {
            return Ok(Begun::Existing(found));
        }
        self.run_detached(move |tx, _| {
            let found = load_record(tx, &record.user_id, &record.key)?;
            if IdempotencyRecord::may_begin(found.as_ref(), record.created_at) {
                store_record(tx, &record).inspect_err(
                    |e| tracing::warn!(error = %e, "an answered idempotency record was not stored"),
                )?;
            }
            Ok(())
        })
        .await?;
        Ok(Begun::Started)
    }
}
