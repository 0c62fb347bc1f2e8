//! The embedded database's schema, created idempotently so any number of processes may open a
//! file at once, with its version in `PRAGMA user_version` so a newer file is refused rather than
//! misread.
//!
//! Each table mirrors an AWS resource: `actions`, `intents`, `consents`, `credentials`,
//! `suppressions`, `holds` (seats' claims), `readings`, `breakers`, `upstream_holds` (routes'
//! pauses) and `operator_leases` are the DynamoDB items (the two named for holds keep the names
//! they had before those were told apart from checkout holds); `outbox` is the table's stream;
//! `queue_messages` and `queue_dedup` are the SQS FIFO queue. Items keep their JSON in `item` and copy what conditions
//! and queries need into columns.

use super::{begin_immediate, sql};
use rusqlite::Connection;
use seatgate::ports::StoreError;

/// Bumped whenever the schema changes; a migration from the previous version goes in [`migrate`].
/// Version 2 added `holds`, version 3 `events`, version 4 `readings` and `breakers`, version 5
/// the flash sale's tables, version 6 `rate_windows`, version 7 `intent_history` (an older file's intents have the
/// history of their writes from then on), version 8 `operator_leases`, version 9 the index a
/// page of a user's bookings reads (`bookings_by_user_id`), version 10 checkout holds (and a
/// shard's `held` column, the one change `CREATE ... IF NOT EXISTS` cannot make: [`migrate`]
/// adds it to a file from versions 5 to 9), version 11 the waiting list (and a hold's `offer_for`,
/// which [`migrate`] adds to a version 10 file, with the one-live-hold index that now leaves
/// offers out), version 12 the outbox's `kind` (an offer's rows beside the intents', which
/// [`migrate`] adds to an older file's outbox), version 13 a flight's holds by status in listing
/// order (an index only); `CREATE ... IF NOT EXISTS` adds the rest to an older file.
pub const SCHEMA_VERSION: i32 = 13;

/// The first version with `checkout_holds`, and the first whose holds have `offer_for`.
const HOLDS_SINCE: i32 = 10;
const OFFERS_SINCE: i32 = 11;

/// The first version whose `flight_shards` has `held`.
const SHARDS_HELD_SINCE: i32 = 10;
/// The version that created `flight_shards`.
const FLIGHT_SHARDS_SINCE: i32 = 5;

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS actions (
    action_id   TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL,
    seat_id     TEXT NOT NULL,
    status      TEXT NOT NULL,
    intent_id   TEXT,
    expires_at  INTEGER NOT NULL,
    item        TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS intents (
    intent_id       TEXT PRIMARY KEY,
    user_id         TEXT NOT NULL,
    seat_id         TEXT NOT NULL,
    kind            TEXT NOT NULL,
    status          TEXT NOT NULL,
    version         INTEGER NOT NULL,
    fencing_token   INTEGER NOT NULL,
    lease_until     INTEGER,
    -- NULL once terminal, so the due index holds only intents the reaper may act on.
    due_at          INTEGER,
    deadline        INTEGER,
    next_attempt_at INTEGER,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    item            TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS intents_due ON intents (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS intents_seat ON intents (seat_id, status);
CREATE INDEX IF NOT EXISTS intents_user ON intents (user_id);

CREATE TABLE IF NOT EXISTS consents (
    intent_id    TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL,
    consented_at INTEGER NOT NULL,
    item         TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS credentials (
    user_id    TEXT PRIMARY KEY,
    credential TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS suppressions (
    seat_id   TEXT PRIMARY KEY,
    intent_id TEXT NOT NULL,
    until     INTEGER NOT NULL,
    item      TEXT NOT NULL
);

-- Version 2: a seat's claim by its one unsettled attempt (no TTL: only a settlement releases
-- it). The table keeps its first name, holds.
CREATE TABLE IF NOT EXISTS holds (
    seat_id   TEXT PRIMARY KEY,
    intent_id TEXT NOT NULL,
    since     INTEGER NOT NULL,
    item      TEXT NOT NULL
);

-- Version 3: the event queue (terminal-intent events on their way to subscribers).
CREATE TABLE IF NOT EXISTS events (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id    TEXT NOT NULL UNIQUE,
    body          TEXT NOT NULL,
    sent_at       INTEGER NOT NULL,
    visible_at    INTEGER NOT NULL,
    receipt       TEXT,
    receive_count INTEGER NOT NULL DEFAULT 0,
    state         TEXT NOT NULL CHECK (state IN ('ready', 'inflight', 'dead'))
);
CREATE INDEX IF NOT EXISTS events_by_state ON events (state, visible_at, seq);

-- Version 4: the seat-read cache's shared entries (a reading and a refresh lease, as JSON) and
-- the circuit breaker's state.
CREATE TABLE IF NOT EXISTS readings (
    key  TEXT PRIMARY KEY,
    item TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS breakers (
    name       TEXT PRIMARY KEY,
    generation INTEGER NOT NULL,
    item       TEXT NOT NULL
);

-- One row per upstream route the upstream asked to leave alone (a Retry-After), until when.
CREATE TABLE IF NOT EXISTS upstream_holds (
    route       TEXT PRIMARY KEY,
    until_ms    INTEGER NOT NULL
);

-- Version 5: flights, their shard counters (never below zero), per-user counts, bookings and
-- booking idempotency records.
CREATE TABLE IF NOT EXISTS flights (
    flight_id TEXT PRIMARY KEY,
    sold_out  INTEGER NOT NULL DEFAULT 0,
    item      TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS flight_shards (
    flight_id TEXT NOT NULL,
    shard     INTEGER NOT NULL,
    available INTEGER NOT NULL CHECK (available >= 0),
    -- Version 10 (added to an older file by `migrate`): seats in checkout holds.
    held      INTEGER NOT NULL DEFAULT 0 CHECK (held >= 0),
    PRIMARY KEY (flight_id, shard)
);
CREATE TABLE IF NOT EXISTS flight_users (
    flight_id TEXT NOT NULL,
    user_id   TEXT NOT NULL,
    booked    INTEGER NOT NULL CHECK (booked >= 0),
    PRIMARY KEY (flight_id, user_id)
);
CREATE TABLE IF NOT EXISTS bookings (
    booking_id TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL,
    flight_id  TEXT NOT NULL,
    status     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    item       TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS bookings_by_user ON bookings (user_id, created_at);
CREATE TABLE IF NOT EXISTS idempotency (
    user_id TEXT NOT NULL,
    key     TEXT NOT NULL,
    item    TEXT NOT NULL,
    PRIMARY KEY (user_id, key)
);
CREATE TABLE IF NOT EXISTS rate_windows (
    user_id TEXT NOT NULL,
    route   TEXT NOT NULL,
    start   INTEGER NOT NULL,
    count   INTEGER NOT NULL CHECK (count >= 1),
    ends_at INTEGER NOT NULL,
    PRIMARY KEY (user_id, route, start)
);

CREATE TABLE IF NOT EXISTS outbox (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    -- The id of the item the row records: an intent's, or (kind 'hold') an offer's hold.
    intent_id       TEXT NOT NULL,
    kind            TEXT NOT NULL DEFAULT 'intent' CHECK (kind IN ('intent', 'hold')),
    old             TEXT,
    new             TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done', 'dead')),
    last_error      TEXT
);
CREATE INDEX IF NOT EXISTS outbox_by_state ON outbox (state, seq);

-- One row per intent write, inserted with its outbox row: the admin history. Kept when the
-- outbox is pruned.
CREATE TABLE IF NOT EXISTS intent_history (
    intent_id TEXT NOT NULL,
    version   INTEGER NOT NULL,
    item      TEXT NOT NULL,
    PRIMARY KEY (intent_id, version)
);

CREATE TABLE IF NOT EXISTS queue_messages (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id    TEXT NOT NULL UNIQUE,
    group_id      TEXT NOT NULL,
    dedup_id      TEXT NOT NULL,
    body          TEXT NOT NULL,
    sent_at       INTEGER NOT NULL,
    visible_at    INTEGER NOT NULL,
    receipt       TEXT,
    receive_count INTEGER NOT NULL DEFAULT 0,
    state         TEXT NOT NULL CHECK (state IN ('ready', 'inflight', 'dead'))
);
CREATE INDEX IF NOT EXISTS queue_by_group ON queue_messages (group_id, state, visible_at);
CREATE INDEX IF NOT EXISTS queue_by_state ON queue_messages (state, seq);
CREATE UNIQUE INDEX IF NOT EXISTS queue_by_receipt ON queue_messages (receipt)
    WHERE receipt IS NOT NULL;

-- Version 8: leases on operator actions (one dead-letter redrive at a time).
CREATE TABLE IF NOT EXISTS operator_leases (
    name   TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    until  INTEGER NOT NULL
);

-- Version 9: a user's bookings in booking id order, one page at a time.
CREATE INDEX IF NOT EXISTS bookings_by_user_id ON bookings (user_id, booking_id);

CREATE TABLE IF NOT EXISTS queue_dedup (
    dedup_id   TEXT PRIMARY KEY,
    expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS queue_dedup_expiry ON queue_dedup (expires_at);

-- Version 10: checkout holds. At most one HELD per user and flight (the partial unique index is
-- the DynamoDB per-user item's `live_hold` condition); the reaper reads the due ones by deadline.
CREATE TABLE IF NOT EXISTS checkout_holds (
    hold_id    TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL,
    flight_id  TEXT NOT NULL,
    status     TEXT NOT NULL CHECK (status IN ('HELD', 'CONFIRMED', 'RELEASED', 'LAPSED')),
    expires_at INTEGER NOT NULL,
    item       TEXT NOT NULL,
    -- Version 11: the waiting-list entry an offer was made to; NULL for a hold the user asked for.
    offer_for  TEXT
);
-- An offer is not the user's live hold: the index leaves offers out (version 11).
CREATE UNIQUE INDEX IF NOT EXISTS checkout_holds_one_live_asked
    ON checkout_holds (flight_id, user_id) WHERE status = 'HELD' AND offer_for IS NULL;
CREATE INDEX IF NOT EXISTS checkout_holds_due
    ON checkout_holds (expires_at) WHERE status = 'HELD';
CREATE INDEX IF NOT EXISTS checkout_holds_by_user ON checkout_holds (user_id, hold_id);
-- Version 13: a flight's holds by status, by the shard their seats came from, then by id (the
-- operator's listing; the DynamoDB `flight_holds` index's order). The shard is only in `item`,
-- which never changes it, so the index takes the expression.
CREATE INDEX IF NOT EXISTS checkout_holds_by_flight
    ON checkout_holds (flight_id, status, json_extract(item, '$.shard'), hold_id);

-- Version 11: the waiting list. One WAITING entry per user and flight (the DynamoDB entry item's
-- condition); the list's order is the entry ids' (UUIDv7), read through the partial index.
CREATE TABLE IF NOT EXISTS waitlist_entries (
    entry_id  TEXT PRIMARY KEY,
    flight_id TEXT NOT NULL,
    user_id   TEXT NOT NULL,
    status    TEXT NOT NULL CHECK (status IN ('WAITING', 'OFFERED', 'LEFT')),
    item      TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS waitlist_one_waiting
    ON waitlist_entries (flight_id, user_id) WHERE status = 'WAITING';
CREATE INDEX IF NOT EXISTS waitlist_queue
    ON waitlist_entries (flight_id, entry_id) WHERE status = 'WAITING';
"#;

/// Creates or checks the schema under the write lock, so two processes opening a new file at
/// once cannot interleave.
pub(super) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    begin_immediate(conn, |tx| {
        let found: i32 = tx
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(sql)?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::Unavailable(format!(
                "database schema version {found} is newer than this build's {SCHEMA_VERSION}"
            )));
        }
        if (HOLDS_SINCE..OFFERS_SINCE).contains(&found) {
            // Before SCHEMA, whose new index names the column.
            tx.execute_batch(
                "ALTER TABLE checkout_holds ADD COLUMN offer_for TEXT; \
                 DROP INDEX IF EXISTS checkout_holds_one_live;",
            )
            .map_err(sql)?;
        }
        tx.execute_batch(SCHEMA).map_err(sql)?;
        if (FLIGHT_SHARDS_SINCE..SHARDS_HELD_SINCE).contains(&found) {
            tx.execute_batch(
                "ALTER TABLE flight_shards ADD COLUMN held INTEGER NOT NULL DEFAULT 0 \
                 CHECK (held >= 0);",
            )
            .map_err(sql)?;
        }
        // Asked of the table, not the version: a file's outbox may predate any version that
        // `found` names (CREATE ... IF NOT EXISTS made the rest), and this runs on every open.
        let outbox_has_kind: bool = tx
            .query_row(
                "SELECT COUNT(*) FROM pragma_table_info('outbox') WHERE name = 'kind'",
                [],
                |r| r.get::<_, i64>(0).map(|n| n > 0),
            )
            .map_err(sql)?;
        if !outbox_has_kind {
            tx.execute_batch(
                "ALTER TABLE outbox ADD COLUMN kind TEXT NOT NULL DEFAULT 'intent' \
                 CHECK (kind IN ('intent', 'hold'));",
            )
            .map_err(sql)?;
        }
        if found != SCHEMA_VERSION {
            tx.pragma_update(None, "user_version", SCHEMA_VERSION)
                .map_err(sql)?;
        }
        Ok(())
    })
}
