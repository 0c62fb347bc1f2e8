//! Credentials sealed under a KMS key: the AWS half of [`seatgate::adapters::sealing`].
//!
//! Sealing asks KMS for a data key (`GenerateDataKey`, AES-256) and encrypts the credential
//! with it locally; the envelope keeps KMS's wrapped copy of the data key. Opening sends that
//! wrapped copy to `Decrypt`. Both calls carry the user id as the encryption context, so KMS
//! itself refuses to unwrap a data key for another user's item, and CloudTrail names the user
//! whose credential was opened. The key policy (template.yaml, `CredentialsKey`) lets the API
//! role only generate data keys and the worker and reaper roles only decrypt, so a role that
//! can read the table but not decrypt sees ciphertext only.
//!
//! One KMS request per seal and per open: credentials are written rarely and read once per
//! reserve attempt, well inside KMS's request quotas, so no data key is cached.

use aws_sdk_kms::Client;
use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::DataKeySpec;
use seatgate::adapters::sealing::{Envelope, SealError};
use seatgate::domain::{Secret, UserId};

/// The encryption-context key naming the credential's owner.
pub const CONTEXT_USER: &str = "seatgate:user_id";

#[derive(Debug, Clone)]
pub struct KmsKey {
    client: Client,
    key_id: String,
}

impl KmsKey {
    /// `key_id`: the key's id, ARN or alias (`CREDENTIALS_KEY_ID`).
    pub fn new(client: Client, key_id: impl Into<String>) -> Self {
        KmsKey {
            client,
            key_id: key_id.into(),
        }
    }

    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    pub async fn seal(&self, user: &UserId, credential: &Secret) -> Result<String, SealError> {
        let out = self
            .client
            .generate_data_key()
            .key_id(&self.key_id)
            .key_spec(DataKeySpec::Aes256)
            .encryption_context(CONTEXT_USER, user.as_str())
            .send()
            .await
            .map_err(|e| unavailable("GenerateDataKey", e))?;
        let plain: [u8; 32] = out
            .plaintext()
            .map(|b| b.as_ref())
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| SealError::KeyUnavailable("GenerateDataKey: no 32-byte key".into()))?;
        let wrapped = out
            .ciphertext_blob()
            .ok_or_else(|| SealError::KeyUnavailable("GenerateDataKey: no wrapped key".into()))?;
        Ok(Envelope::seal(&plain, wrapped.as_ref().to_vec(), user, credential).to_text())
    }

    pub async fn open(&self, user: &UserId, sealed: &str) -> Result<Secret, SealError> {
        let envelope = Envelope::parse(sealed)?;
        let out = self
            .client
            .decrypt()
            .key_id(&self.key_id)
            .ciphertext_blob(Blob::new(envelope.wrapped_key.clone()))
            .encryption_context(CONTEXT_USER, user.as_str())
            .send()
            .await
            .map_err(|e| match e.as_service_error() {
                // The wrapped key is not this key's, or not for this user: the item was moved
                // or tampered with, which no retry mends.
                Some(
                    aws_sdk_kms::operation::decrypt::DecryptError::InvalidCiphertextException(_)
                    | aws_sdk_kms::operation::decrypt::DecryptError::IncorrectKeyException(_),
                ) => SealError::Unreadable("KMS refused the wrapped key"),
                _ => unavailable("Decrypt", e),
            })?;
        let plain: [u8; 32] = out
            .plaintext()
            .map(|b| b.as_ref())
            .and_then(|b| b.try_into().ok())
            .ok_or(SealError::Unreadable("Decrypt: not a 32-byte key"))?;
        envelope.open(&plain, user)
    }
}

/// KMS error messages name keys and operations, never plaintext.
fn unavailable(operation: &str, e: impl std::error::Error) -> SealError {
    SealError::KeyUnavailable(format!(
        "{operation}: {}",
        aws_sdk_kms::error::DisplayErrorContext(e)
    ))
}
