//! Operator leases (`OperatorLeases`): one row per action name, taken by an upsert that only
//! replaces a lease that has ended, as DynamoDB's conditional `PutItem` does.

use super::{Cached, EmbeddedBackend, sql};
use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};
use seatgate::domain::{Millis, may_take_lease};
use seatgate::ports::{OperatorLeases, StoreError};

#[async_trait]
impl OperatorLeases for EmbeddedBackend {
    async fn take_lease(
        &self,
        name: &str,
        holder: &str,
        now: Millis,
        until: Millis,
    ) -> Result<bool, StoreError> {
        let (name, holder) = (name.to_owned(), holder.to_owned());
        self.run(move |tx, _| {
            let held_until: Option<i64> = tx
                .one(
                    "SELECT until FROM operator_leases WHERE name = ?1",
                    [&name],
                    |r| r.get(0),
                )
                .optional()
                .map_err(sql)?;
            // Decided on what the writer's transaction read: the domain's rule.
            if !may_take_lease(held_until.map(Millis), now) {
                return Ok(false);
            }
            tx.exec(
                "INSERT INTO operator_leases (name, holder, until) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until",
                params![name, holder, until.0],
            )
            .map_err(sql)?;
            Ok(true)
        })
        .await
    }

    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        let (name, holder) = (name.to_owned(), holder.to_owned());
        self.run(move |tx, _| {
            tx.exec(
                "DELETE FROM operator_leases WHERE name = ?1 AND holder = ?2",
                params![name, holder],
            )
            .map_err(sql)?;
            Ok(())
        })
        .await
    }
}
