//! `Credentials` on SQLite: sealed before they are written and opened after they are read, so
//! the database file never holds a credential in the clear; a database from before schema 6 is
//! sealed once, when it is opened.

use super::{Cached, EmbeddedBackend, immediate, sql};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use seatgate::adapters::sealing::LocalKey;
use seatgate::domain::{Secret, UserId};
use seatgate::ports::{Credentials, StoreError};

#[async_trait]
impl Credentials for EmbeddedBackend {
    async fn put_credential(
        &self,
        user_id: &UserId,
        credential: &Secret,
    ) -> Result<(), StoreError> {
        // Sealed before it reaches the writer: the plaintext never enters the database file.
        let sealed = self.inner.credentials_key.seal(user_id, credential);
        let user_id = user_id.clone();
        self.run(move |conn, ctx| {
            immediate(conn, |tx| {
                tx.exec(
                    "INSERT INTO credentials (user_id, credential, updated_at) \
                     VALUES (?1, ?2, ?3) ON CONFLICT (user_id) DO UPDATE \
                     SET credential = excluded.credential, updated_at = excluded.updated_at",
                    params![user_id.as_str(), sealed, ctx.clock.now().0],
                )
                .map_err(sql)?;
                Ok(())
            })
        })
        .await
    }

    async fn credential(&self, user_id: &UserId) -> Result<Option<Secret>, StoreError> {
        let owner = user_id.clone();
        let value: Option<String> = self
            .read(move |conn, _| {
                let value: Option<String> = conn
                    .one(
                        "SELECT credential FROM credentials WHERE user_id = ?1",
                        [owner.as_str()],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(sql)?;
                Ok(value)
            })
            .await?;
        let Some(sealed) = value else {
            return Ok(None);
        };
        self.inner
            .credentials_key
            .open(user_id, &sealed)
            .map(Some)
            .map_err(|e| StoreError::Corrupt(format!("credential of {user_id}: {e}")))
    }
}

/// Seals credentials an older version stored in plain text (before schema 6), once, when the
/// database is opened: a database copied from an earlier run keeps its users' credentials, and
/// from then on none is readable from the file.
pub(super) fn seal_plaintext_credentials(
    conn: &mut Connection,
    key: &LocalKey,
) -> Result<(), StoreError> {
    // Zero the pages the plaintext leaves behind, and fold the WAL into the file afterwards,
    // so no copy of it stays on disk.
    conn.pragma_update(None, "secure_delete", "ON")
        .map_err(sql)?;
    let sealed = super::begin_immediate(conn, |tx| {
        let plain: Vec<(String, String)> = tx
            .prepare(
                "SELECT user_id, credential FROM credentials WHERE credential NOT LIKE 'sg1.%'",
            )
            .and_then(|mut s| {
                s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<Result<_, _>>()
            })
            .map_err(sql)?;
        let plain_was_empty = plain.is_empty();
        for (user, credential) in plain {
            let user_id = UserId::parse(&user)
                .map_err(|_| StoreError::Corrupt("a credential's user id".into()))?;
            let sealed = key.seal(&user_id, &Secret::new(credential));
            tx.exec(
                "UPDATE credentials SET credential = ?2 WHERE user_id = ?1",
                params![user, sealed],
            )
            .map_err(sql)?;
        }
        Ok::<_, StoreError>(!plain_was_empty)
    })?;
    conn.pragma_update(None, "secure_delete", "OFF")
        .map_err(sql)?;
    if sealed {
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .map_err(sql)?;
    }
    Ok(())
}
