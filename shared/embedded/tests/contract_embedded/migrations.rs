//! Files an older version wrote, opened by this one: each migration keeps what the file held and
//! adds what the new version needs.

use super::*;

#[tokio::test]
async fn a_version_11_files_outbox_gains_its_kind_and_its_rows_stay_intents() {
    let dir = TempDir::new("migrate-11");
    let raw = rusqlite::Connection::open(dir.db()).unwrap();
    // The outbox as versions 1 to 11 created it: no `kind`, and one pending intent row.
    let intent = Intent::requested(
        IntentId::generate(),
        UserId::parse("u1").unwrap(),
        SeatId::parse("A-1").unwrap(),
        seatgate::domain::ActionId::generate(),
        Millis(5),
        Millis(5),
    );
    raw.execute_batch(
        "CREATE TABLE outbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, intent_id TEXT NOT NULL, \
         old TEXT, new TEXT NOT NULL, created_at INTEGER NOT NULL, \
         attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at INTEGER NOT NULL, \
         state TEXT NOT NULL DEFAULT 'pending', last_error TEXT);",
    )
    .unwrap();
    raw.execute(
        "INSERT INTO outbox (intent_id, new, created_at, next_attempt_at) VALUES (?1, ?2, 5, 5)",
        rusqlite::params![
            intent.intent_id.as_str(),
            serde_json::to_string(&intent).unwrap()
        ],
    )
    .unwrap();
    raw.pragma_update(None, "user_version", 11).unwrap();
    drop(raw);
    let mut backend = None;
    for _ in 0..2 {
        // Twice: the column is added once, and the second open is a no-op.
        backend = Some(EmbeddedBackend::open(&dir.db(), manual_clock(), config()).unwrap());
    }
    let rows = backend.unwrap().fetch_outbox(10).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].change.intent().and_then(|c| c.new.as_ref()),
        Some(&intent),
        "an old row is an intent's"
    );
    let raw = rusqlite::Connection::open(dir.db()).unwrap();
    let version: i32 = raw
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
}

#[tokio::test]
async fn a_version_10_file_gains_offers_and_its_one_live_hold_index_leaves_them_out() {
    let dir = TempDir::new("migrate-10");
    let raw = rusqlite::Connection::open(dir.db()).unwrap();
    // checkout_holds as version 10 created it: no `offer_for`, and the old one-live-hold index.
    raw.execute_batch(
        "CREATE TABLE checkout_holds (hold_id TEXT PRIMARY KEY, user_id TEXT NOT NULL, \
         flight_id TEXT NOT NULL, status TEXT NOT NULL, expires_at INTEGER NOT NULL, \
         item TEXT NOT NULL); \
         CREATE UNIQUE INDEX checkout_holds_one_live ON checkout_holds (flight_id, user_id) \
         WHERE status = 'HELD'; \
         INSERT INTO checkout_holds VALUES ('h-old', 'u1', 'F-OLD', 'HELD', 5, '{}');",
    )
    .unwrap();
    raw.pragma_update(None, "user_version", 10).unwrap();
    drop(raw);
    for _ in 0..2 {
        // Twice: the column is added once, and the second open is a no-op.
        drop(EmbeddedBackend::open(&dir.db(), manual_clock(), config()).unwrap());
    }
    let raw = rusqlite::Connection::open(dir.db()).unwrap();
    let offer_for: Option<String> = raw
        .query_row(
            "SELECT offer_for FROM checkout_holds WHERE hold_id = 'h-old'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(offer_for, None, "the old hold is one its user asked for");
    // An offer beside the user's live hold: the new index allows it, the old one would not.
    raw.execute(
        "INSERT INTO checkout_holds VALUES ('h-offer', 'u1', 'F-OLD', 'HELD', 9, '{}', 'e1')",
        [],
    )
    .unwrap();
    let second_asked = raw.execute(
        "INSERT INTO checkout_holds VALUES ('h-two', 'u1', 'F-OLD', 'HELD', 9, '{}', NULL)",
        [],
    );
    assert!(second_asked.is_err(), "still one live hold asked for");
    let waitlist: i64 = raw
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE name = 'waitlist_entries'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(waitlist, 1);
    let version: i32 = raw
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
}

#[tokio::test]
async fn a_version_9_file_gains_the_shards_held_column_and_keeps_its_counts() {
    let dir = TempDir::new("migrate-9");
    let raw = rusqlite::Connection::open(dir.db()).unwrap();
    // flight_shards as version 5 to 9 created it: no `held`.
    raw.execute_batch(
        "CREATE TABLE flight_shards (flight_id TEXT NOT NULL, shard INTEGER NOT NULL, \
         available INTEGER NOT NULL CHECK (available >= 0), PRIMARY KEY (flight_id, shard)); \
         INSERT INTO flight_shards VALUES ('F-OLD', 0, 7);",
    )
    .unwrap();
    raw.pragma_update(None, "user_version", 9).unwrap();
    drop(raw);
    let backend = EmbeddedBackend::open(&dir.db(), manual_clock(), config()).unwrap();
    drop(backend);
    // Opened again at the current version: the column is not added twice.
    let backend = EmbeddedBackend::open(&dir.db(), manual_clock(), config()).unwrap();
    drop(backend);
    let raw = rusqlite::Connection::open(dir.db()).unwrap();
    let (available, held): (u32, u32) = raw
        .query_row(
            "SELECT available, held FROM flight_shards WHERE flight_id = 'F-OLD'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((available, held), (7, 0));
    let version: i32 = raw
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
}
