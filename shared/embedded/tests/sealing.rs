//! Credentials at rest on the embedded backend: sealed before they are written, so neither the
//! database file nor its WAL ever holds one in plain text; the file and the key beside it are
//! readable by their owner only; and a database from before sealing has its plaintext rows
//! sealed when it is opened, without losing them.

use seatgate::domain::{Millis, Secret, UserId};
use seatgate::ports::Credentials;
use seatgate_embedded::{EmbeddedBackend, EmbeddedConfig};
use seatgate_testkit::ManualClock;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const CREDENTIAL: &str = "plaintext-credential-7f3a9c";

fn temp_db() -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("sg-seal-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("seatgate.sqlite3");
    (dir, db)
}

fn open(db: &Path) -> EmbeddedBackend {
    EmbeddedBackend::open(
        db,
        Arc::new(ManualClock::new(Millis::now())),
        EmbeddedConfig::default(),
    )
    .unwrap()
}

/// Every byte the database keeps on disk: the file and its WAL.
fn on_disk(db: &Path) -> Vec<u8> {
    let mut bytes = std::fs::read(db).unwrap();
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    if let Ok(more) = std::fs::read(PathBuf::from(wal)) {
        bytes.extend(more);
    }
    bytes
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn a_stored_credential_is_never_in_the_file_and_the_files_are_owner_only() {
    let (dir, db) = temp_db();
    let backend = open(&db);
    let u = UserId::parse("u1").unwrap();
    backend
        .put_credential(&u, &Secret::new(CREDENTIAL))
        .await
        .unwrap();
    assert_eq!(
        backend.credential(&u).await.unwrap().unwrap().expose(),
        CREDENTIAL
    );
    let bytes = on_disk(&db);
    assert!(bytes.len() > 4096, "the file was read");
    assert!(!contains(&bytes, CREDENTIAL), "plaintext in the database");
    assert!(!contains(&bytes, &hex::encode(CREDENTIAL)));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let key = EmbeddedBackend::credentials_key_path(&db);
        for path in [db.clone(), key] {
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", path.display());
        }
    }
    drop(backend);
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn another_process_on_the_file_opens_the_credential_and_another_key_does_not() {
    let (dir, db) = temp_db();
    let u = UserId::parse("u1").unwrap();
    open(&db)
        .put_credential(&u, &Secret::new(CREDENTIAL))
        .await
        .unwrap();
    let second = open(&db);
    assert_eq!(
        second.credential(&u).await.unwrap().unwrap().expose(),
        CREDENTIAL,
        "the key beside the file is shared"
    );
    std::fs::remove_file(EmbeddedBackend::credentials_key_path(&db)).unwrap();
    let rekeyed = open(&db);
    let err = rekeyed.credential(&u).await.unwrap_err();
    assert!(!err.to_string().contains(CREDENTIAL), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn plaintext_rows_of_an_older_database_are_sealed_on_open() {
    let (dir, db) = temp_db();
    drop(open(&db));
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute(
            "INSERT INTO credentials (user_id, credential, updated_at) VALUES ('u9', ?1, 0)",
            [CREDENTIAL],
        )
        .unwrap();
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
    }
    assert!(
        contains(&on_disk(&db), CREDENTIAL),
        "the legacy row is plain"
    );
    let backend = open(&db);
    let u = UserId::parse("u9").unwrap();
    assert_eq!(
        backend.credential(&u).await.unwrap().unwrap().expose(),
        CREDENTIAL,
        "kept"
    );
    drop(backend);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let stored: String = conn
        .query_row(
            "SELECT credential FROM credentials WHERE user_id = 'u9'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(stored.starts_with("sg1."), "sealed: {stored}");
    drop(conn);
    assert!(
        !contains(&on_disk(&db), CREDENTIAL),
        "no copy of the plaintext is left in free pages or the WAL"
    );
    std::fs::remove_dir_all(dir).unwrap();
}
