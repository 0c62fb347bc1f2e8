//! The local stand-in for the HTTP API's JWT authorizer: it issues HS256 tokens at
//! `POST /dev/token` and verifies them on every other route.
//!
//! On AWS the authorizer checks a token from a real identity provider and hands the Lambda the
//! verified claims as strings in the API Gateway v2 request context. Locally there is no
//! identity provider, so the runner both mints and checks tokens; what the handler receives is
//! the same shape of claims map, which is the point.
//!
//! The signing key comes from `SEATGATE_JWT_SECRET`, or is generated once and kept next to the
//! database (`<db>.jwt-key`, mode 0600) so tokens outlive a restart just like the data they
//! refer to. It is never a command-line flag: process lists are world-readable.

use anyhow::Context as _;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use seatgate::domain::{Secret, UserId};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The `iss` claim of every token the runner issues (and the only one it accepts).
pub const ISSUER: &str = "seatgate-local";

/// How long an issued token is valid.
pub const TOKEN_TTL: Duration = Duration::from_secs(24 * 3600);

/// Environment variable that, when set, is the HS256 key.
pub const SECRET_ENV: &str = "SEATGATE_JWT_SECRET";

/// The claims of a runner token. `admin` is omitted unless granted, as an identity provider
/// would only add a group claim to members.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub sub: String,
    pub iss: String,
    pub iat: u64,
    pub exp: u64,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub admin: bool,
}

impl Claims {
    /// The claims as API Gateway puts them in `requestContext.authorizer.jwt.claims`: every value
    /// a string.
    pub fn as_context_claims(&self) -> HashMap<String, String> {
        let mut claims = HashMap::from([
            ("sub".to_owned(), self.sub.clone()),
            ("iss".to_owned(), self.iss.clone()),
            ("iat".to_owned(), self.iat.to_string()),
            ("exp".to_owned(), self.exp.to_string()),
        ]);
        if self.admin {
            claims.insert("admin".to_owned(), "true".to_owned());
        }
        claims
    }
}

/// Why a bearer token was refused. The messages go to the client, so they say what to do and
/// nothing about the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("missing bearer token; get one with POST /dev/token")]
    Missing,
    #[error("the token has expired; get a new one with POST /dev/token")]
    Expired,
    #[error("the token is not valid for this API")]
    Invalid,
}

/// Signs and verifies runner tokens with one HS256 key.
#[derive(Clone)]
pub struct TokenAuthority {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
}

impl std::fmt::Debug for TokenAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenAuthority(***)")
    }
}

impl TokenAuthority {
    pub fn new(key: &Secret) -> anyhow::Result<Self> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[ISSUER]);
        validation.set_required_spec_claims(&["exp", "iss", "sub"]);
        // Client and runner share one clock; a little leeway only forgives rounding.
        validation.leeway = 5;
        Ok(TokenAuthority {
            encoding: EncodingKey::from_secret(key.expose().as_bytes()).context("the token key")?,
            decoding: DecodingKey::from_secret(key.expose().as_bytes()).context("the token key")?,
            validation,
        })
    }

    /// A token for `user`, valid for [`TOKEN_TTL`] from now.
    pub fn issue(&self, user: &UserId, admin: bool) -> anyhow::Result<String> {
        let iat = jsonwebtoken::get_current_timestamp();
        self.issue_with(&Claims {
            sub: user.as_str().to_owned(),
            iss: ISSUER.to_owned(),
            iat,
            exp: iat + TOKEN_TTL.as_secs(),
            admin,
        })
    }

    /// Signs arbitrary claims; tests use it to mint expired tokens.
    pub fn issue_with(&self, claims: &Claims) -> anyhow::Result<String> {
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &self.encoding)
            .context("signing a token")
    }

    /// Verifies signature, issuer and expiry, and that `sub` is a valid user id.
    pub fn verify(&self, token: &str) -> Result<Claims, TokenError> {
        use jsonwebtoken::errors::ErrorKind;
        let data = jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .map_err(|e| match e.kind() {
                ErrorKind::ExpiredSignature => TokenError::Expired,
                _ => TokenError::Invalid,
            })?;
        UserId::parse(&data.claims.sub).map_err(|_| TokenError::Invalid)?;
        Ok(data.claims)
    }

    /// Verifies an `Authorization` header value (`Bearer <token>`, scheme case-insensitive).
    pub fn verify_header(&self, header: Option<&str>) -> Result<Claims, TokenError> {
        let value = header.map(str::trim).filter(|v| !v.is_empty());
        let Some(value) = value else {
            return Err(TokenError::Missing);
        };
        if value.eq_ignore_ascii_case("bearer") {
            return Err(TokenError::Missing);
        }
        let token = match value.split_once(' ') {
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token.trim(),
            _ => return Err(TokenError::Invalid),
        };
        if token.is_empty() {
            return Err(TokenError::Missing);
        }
        self.verify(token)
    }
}

/// Where the generated key of a database lives.
pub fn key_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".jwt-key");
    PathBuf::from(name)
}

/// The signing key: the explicit one, else `SEATGATE_JWT_SECRET`, else the one stored next to
/// the database (created on first use), else (in-memory database) a fresh random one.
pub fn load_key(explicit: Option<&Secret>, db: Option<&Path>) -> anyhow::Result<Secret> {
    if let Some(key) = explicit {
        return Ok(key.clone());
    }
    if let Ok(key) = std::env::var(SECRET_ENV)
        && !key.is_empty()
    {
        return Ok(Secret::new(key));
    }
    match db {
        Some(db) => load_or_create(&key_path(db)),
        None => Ok(random_key()),
    }
}

fn random_key() -> Secret {
    Secret::new(hex::encode(rand::random::<[u8; 32]>()))
}

fn load_or_create(path: &Path) -> anyhow::Result<Secret> {
    match std::fs::read_to_string(path) {
        Ok(key) if !key.trim().is_empty() => return Ok(Secret::new(key.trim())),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    }
    let key = random_key();
    write_private(path, key.expose())
        .with_context(|| format!("writing the token key {}", path.display()))?;
    // Another process sharing the database may have won the race to create it: its key is the
    // one on disk, and the one every process must use.
    let stored =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(Secret::new(stored.trim()))
}

#[cfg(unix)]
fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path);
    match file {
        Ok(mut f) => f.write_all(contents.as_bytes()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(not(unix))]
fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(mut f) => std::io::Write::write_all(&mut f, contents.as_bytes()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(s: &str) -> UserId {
        UserId::parse(s).unwrap()
    }

    #[test]
    fn issued_tokens_verify_and_carry_the_admin_claim_only_when_granted() {
        let auth = TokenAuthority::new(&Secret::new("k")).unwrap();
        let plain = auth
            .verify(&auth.issue(&user("u1"), false).unwrap())
            .unwrap();
        assert_eq!(plain.sub, "u1");
        assert!(!plain.as_context_claims().contains_key("admin"));
        let admin = auth
            .verify(&auth.issue(&user("u1"), true).unwrap())
            .unwrap();
        assert_eq!(admin.as_context_claims()["admin"], "true");
    }

    #[test]
    fn forged_expired_and_malformed_tokens_are_refused() {
        let auth = TokenAuthority::new(&Secret::new("k")).unwrap();
        let forger = TokenAuthority::new(&Secret::new("not-k")).unwrap();
        let forged = forger.issue(&user("u1"), true).unwrap();
        assert_eq!(auth.verify(&forged), Err(TokenError::Invalid));
        let now = jsonwebtoken::get_current_timestamp();
        let expired = auth
            .issue_with(&Claims {
                sub: "u1".into(),
                iss: ISSUER.into(),
                iat: now - 7200,
                exp: now - 3600,
                admin: false,
            })
            .unwrap();
        assert_eq!(auth.verify(&expired), Err(TokenError::Expired));
        assert_eq!(auth.verify_header(None), Err(TokenError::Missing));
        assert_eq!(
            auth.verify_header(Some("Bearer ")),
            Err(TokenError::Missing)
        );
        assert_eq!(
            auth.verify_header(Some("Basic abc")),
            Err(TokenError::Invalid)
        );
        assert_eq!(
            auth.verify_header(Some("Bearer x.y.z")),
            Err(TokenError::Invalid)
        );
    }

    #[test]
    fn a_stored_key_is_created_private_and_reused() {
        let dir = std::env::temp_dir().join(format!("seatgate-auth-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join("db.sqlite3");
        let first = load_or_create(&key_path(&db)).unwrap();
        let second = load_or_create(&key_path(&db)).unwrap();
        assert_eq!(first, second);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(key_path(&db))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
