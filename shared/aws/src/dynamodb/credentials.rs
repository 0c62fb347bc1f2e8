//! `Credentials` on the table: sealed before they are written, opened after they are read, so
//! the table never holds a credential in the clear (`seatgate::adapters::sealing`).

use async_trait::async_trait;

use super::{DynamoStore, item, map_sdk_error};
use seatgate::domain::{Secret, UserId};
use seatgate::ports::{Credentials, StoreError};

#[async_trait]
impl Credentials for DynamoStore {
    async fn put_credential(
        &self,
        user_id: &UserId,
        credential: &Secret,
    ) -> Result<(), StoreError> {
        let sealed = self
            .credentials_key()?
            .seal(user_id, credential)
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))?;
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item::credential_to_item(user_id, &sealed)))
            .send()
            .await
            .map_err(|e| map_sdk_error("PutItem", e))?;
        Ok(())
    }

    async fn credential(&self, user_id: &UserId) -> Result<Option<Secret>, StoreError> {
        let key = self.credentials_key()?;
        let Some(item) = self.get(item::credential_key(user_id)).await? else {
            return Ok(None);
        };
        let sealed = item::credential_from_item(&item)?;
        match key.open(user_id, &sealed).await {
            Ok(credential) => Ok(Some(credential)),
            Err(e @ seatgate::adapters::sealing::SealError::Unreadable(_)) => {
                Err(StoreError::Corrupt(format!("credential of {user_id}: {e}")))
            }
            Err(e) => Err(StoreError::Unavailable(e.to_string())),
        }
    }
}
