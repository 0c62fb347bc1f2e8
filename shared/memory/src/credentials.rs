//! Each user's credential for the upstream (`Credentials`): a plain map, replaced on put.
//!
//! Kept as the `Secret` itself: nothing here reaches a disk, so there is nothing to seal (the
//! embedded backend seals because its file outlives the process). The write log records that a
//! credential was written, never its value.

use crate::MemoryBackend;
use crate::faults::Op;
use async_trait::async_trait;
use seatgate::domain::{Secret, UserId};
use seatgate::ports::{Credentials, StoreError};

#[async_trait]
impl Credentials for MemoryBackend {
    async fn put_credential(
        &self,
        user_id: &UserId,
        credential: &Secret,
    ) -> Result<(), StoreError> {
        self.timed(Op::PutCredential, |tx| {
            let at = tx.now;
            tx.log(&serde_json::json!({ "user_id": user_id, "updated_at": at }));
            tx.state
                .credentials
                .insert(user_id.clone(), credential.clone());
            Ok(())
        })
        .await
    }

    async fn credential(&self, user_id: &UserId) -> Result<Option<Secret>, StoreError> {
        self.timed(Op::Credential, |tx| {
            Ok(tx.state.credentials.get(user_id).cloned())
        })
        .await
    }
}
