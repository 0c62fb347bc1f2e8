//! Upstream credentials sealed at rest: what both stores keep instead of the credential.
//!
//! Envelope encryption: each credential is encrypted with AES-256-GCM under a data key of its
//! own, and the sealed form carries that data key wrapped by a key the store never holds (a KMS
//! key on AWS, whose policy lets the API only create data keys and the worker and reaper only
//! unwrap them; locally, a key file beside the database). The user id is the ciphertext's
//! authenticated data, so a sealed credential copied onto another user's item does not open.
//!
//! The text form is `sg1.<wrapped key>.<nonce>.<ciphertext and tag>`, each part in hex, so either
//! store keeps it as a plain string. What wraps the data key is the adapter's business: the KMS
//! adapter puts KMS's ciphertext blob there; [`LocalKey`] wraps with AES-256-GCM under the file
//! key. Nothing here logs, and no error carries key or credential bytes.

use crate::domain::{Secret, UserId};
use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use std::path::Path;
use thiserror::Error;

/// The prefix of every sealed credential; a new format gets a new one.
pub const FORMAT: &str = "sg1";

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SealError {
    /// Not a sealed credential of a known format, or it does not open under this key and user.
    #[error("the stored credential cannot be opened ({0})")]
    Unreadable(&'static str),
    /// The key could not be used (the key service refused or could not be reached).
    #[error("the credential key is unavailable: {0}")]
    KeyUnavailable(String),
}

/// A credential as stored: the wrapped data key, the nonce and the ciphertext.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    pub wrapped_key: Vec<u8>,
    nonce: [u8; 12],
    ciphertext: Vec<u8>,
}

impl Envelope {
    /// Encrypts `credential` for `user` under the plaintext data key `key`, carrying
    /// `wrapped_key` (the same key, wrapped by the key-encryption key) beside it.
    pub fn seal(key: &[u8; 32], wrapped_key: Vec<u8>, user: &UserId, credential: &Secret) -> Self {
        let nonce: [u8; 12] = rand::random();
        let ciphertext = Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key))
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: credential.expose().as_bytes(),
                    aad: aad(user).as_bytes(),
                },
            )
            .expect("AES-GCM encrypts any input of this size");
        Envelope {
            wrapped_key,
            nonce,
            ciphertext,
        }
    }

    /// Decrypts with the unwrapped data key.
    pub fn open(&self, key: &[u8; 32], user: &UserId) -> Result<Secret, SealError> {
        let plain = Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key))
            .decrypt(
                Nonce::from_slice(&self.nonce),
                Payload {
                    msg: &self.ciphertext,
                    aad: aad(user).as_bytes(),
                },
            )
            .map_err(|_| SealError::Unreadable("it does not open for this user under this key"))?;
        String::from_utf8(plain)
            .map(Secret::new)
            .map_err(|_| SealError::Unreadable("not text"))
    }

    pub fn to_text(&self) -> String {
        format!(
            "{FORMAT}.{}.{}.{}",
            hex::encode(&self.wrapped_key),
            hex::encode(self.nonce),
            hex::encode(&self.ciphertext)
        )
    }

    pub fn parse(text: &str) -> Result<Envelope, SealError> {
        let mut parts = text.split('.');
        if parts.next() != Some(FORMAT) {
            return Err(SealError::Unreadable("not a sealed credential"));
        }
        let mut part = || {
            parts
                .next()
                .and_then(|p| hex::decode(p).ok())
                .ok_or(SealError::Unreadable("malformed"))
        };
        let wrapped_key = part()?;
        let nonce = part()?
            .try_into()
            .map_err(|_| SealError::Unreadable("malformed nonce"))?;
        let ciphertext = part()?;
        if parts.next().is_some() {
            return Err(SealError::Unreadable("malformed"));
        }
        Ok(Envelope {
            wrapped_key,
            nonce,
            ciphertext,
        })
    }

    /// Whether `text` is in a sealed format at all (a store migrating older plaintext rows).
    pub fn is_sealed(text: &str) -> bool {
        text.starts_with(&format!("{FORMAT}."))
    }
}

fn aad(user: &UserId) -> String {
    format!("seatgate credential for {user}")
}

/// A local key-encryption key: 32 random bytes in a file only its owner may read. Each
/// credential still gets a data key of its own, wrapped under this one, so the local sealed
/// form is the same envelope as on AWS.
#[derive(Clone)]
pub struct LocalKey([u8; 32]);

impl std::fmt::Debug for LocalKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LocalKey(***)")
    }
}

impl LocalKey {
    /// A key that lives as long as this process (an in-memory database).
    pub fn generate() -> Self {
        LocalKey(rand::random())
    }

    /// Reads the key at `path`, or creates it (mode 0600, hex) if there is none. Several
    /// processes may race to create it: the file is created exclusively, and the loser reads
    /// the winner's.
    pub fn load_or_create(path: &Path) -> std::io::Result<Self> {
        match std::fs::read_to_string(path) {
            Ok(text) => return Self::decode(path, &text),
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            Err(_) => {}
        }
        let key = LocalKey::generate();
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        match options.open(path) {
            Ok(mut file) => {
                use std::io::Write;
                file.write_all(hex::encode(key.0).as_bytes())?;
                file.sync_all()?;
                Ok(key)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                // Another process is writing it; its first read may catch it half written.
                for _ in 0..50 {
                    if let Ok(key) = Self::decode(path, &std::fs::read_to_string(path)?) {
                        return Ok(key);
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Self::decode(path, &std::fs::read_to_string(path)?)
            }
            Err(e) => Err(e),
        }
    }

    fn decode(path: &Path, text: &str) -> std::io::Result<Self> {
        hex::decode(text.trim())
            .ok()
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .map(LocalKey)
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{} is not a 32-byte hex key", path.display()),
                )
            })
    }

    /// Seals `credential` for `user`: a fresh data key, wrapped under this key.
    pub fn seal(&self, user: &UserId, credential: &Secret) -> String {
        let data_key: [u8; 32] = rand::random();
        let wrapped = Envelope::seal(
            &self.0,
            Vec::new(),
            user,
            &Secret::new(hex::encode(data_key)),
        );
        Envelope::seal(&data_key, wrapped.to_text().into_bytes(), user, credential).to_text()
    }

    pub fn open(&self, user: &UserId, sealed: &str) -> Result<Secret, SealError> {
        let envelope = Envelope::parse(sealed)?;
        let wrapped = std::str::from_utf8(&envelope.wrapped_key)
            .map_err(|_| SealError::Unreadable("malformed wrapped key"))?;
        let data_key = Envelope::parse(wrapped)?.open(&self.0, user)?;
        let data_key: [u8; 32] = hex::decode(data_key.expose())
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or(SealError::Unreadable("malformed data key"))?;
        envelope.open(&data_key, user)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(s: &str) -> UserId {
        UserId::parse(s).unwrap()
    }

    #[test]
    fn a_sealed_credential_opens_for_its_user_only_and_hides_the_plaintext() {
        let key = LocalKey::generate();
        let sealed = key.seal(&user("u1"), &Secret::new("hunter2-credential"));
        assert!(Envelope::is_sealed(&sealed));
        assert!(!sealed.contains("hunter2"));
        assert!(!sealed.contains(&hex::encode("hunter2")));
        assert_eq!(
            key.open(&user("u1"), &sealed).unwrap().expose(),
            "hunter2-credential"
        );
        assert!(matches!(
            key.open(&user("u2"), &sealed),
            Err(SealError::Unreadable(_))
        ));
        assert!(matches!(
            LocalKey::generate().open(&user("u1"), &sealed),
            Err(SealError::Unreadable(_))
        ));
        let again = key.seal(&user("u1"), &Secret::new("hunter2-credential"));
        assert_ne!(again, sealed, "a fresh data key and nonce each time");
    }

    #[test]
    fn tampering_and_other_formats_are_unreadable() {
        let key = LocalKey::generate();
        let sealed = key.seal(&user("u1"), &Secret::new("c"));
        let mut tampered = sealed.clone().into_bytes();
        let last = tampered.len() - 1;
        tampered[last] = if tampered[last] == b'0' { b'1' } else { b'0' };
        let tampered = String::from_utf8(tampered).unwrap();
        for bad in [
            tampered.as_str(),
            "plain",
            "sg1.zz.00.00",
            "sg2.00.00.00",
            "",
        ] {
            assert!(
                matches!(key.open(&user("u1"), bad), Err(SealError::Unreadable(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_key_file_is_created_once_owner_only_and_read_back() {
        let dir = std::env::temp_dir().join(format!("sg-key-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("db.credentials-key");
        let first = LocalKey::load_or_create(&path).unwrap();
        let sealed = first.seal(&user("u1"), &Secret::new("c"));
        let second = LocalKey::load_or_create(&path).unwrap();
        assert_eq!(second.open(&user("u1"), &sealed).unwrap().expose(), "c");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        std::fs::write(&path, "not a key").unwrap();
        assert!(LocalKey::load_or_create(&path).is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
