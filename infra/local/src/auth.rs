//! The local stand-in for the HTTP API's JWT authorizer: it issues HS256 tokens at
//! `POST /dev/token` and verifies them on every other route.
//!
//! On AWS the authorizer checks a token from a real identity provider and hands the Lambda the
//! verified claims as strings in the API Gateway v2 request context. Locally there is no
//! identity provider, so the runner both mints and checks tokens; what the handler receives is
//! the same shape of claims map, which is the point.
//!
//! A token is refused on the same grounds as the deployed authorizer refuses it, so a client
//! that works against the runner is not surprised on AWS: the issuer (`iss`), the audience
//! (`aud`), expiry (`exp`), and neither `nbf` nor `iat` in the future, each within
//! [`CLOCK_LEEWAY`]. On top of that the token must be HS256, the only algorithm the runner signs
//! with (any other, `none` included, is refused before the signature is looked at), and name a
//! valid user id as `sub`, which the handler needs. Each refusal names the claim that failed and
//! never repeats the token.
//!
//! The signing key comes from `SEATGATE_JWT_SECRET`, or is generated once and kept next to the
//! database (`<db>.jwt-key`, mode 0600) so tokens outlive a restart just like the data they
//! refer to. It is never a command-line flag: process lists are world-readable.

use anyhow::Context as _;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use seatgate::domain::{Secret, UserId};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The `iss` claim of every token the runner issues (and the only one it accepts): the local
/// counterpart of the SAM template's `JwtIssuer` parameter.
pub const ISSUER: &str = "seatgate-local";

/// The `aud` claim of every token the runner issues, and the only audience it accepts: the local
/// counterpart of the SAM template's `JwtAudience` parameter, the audiences the deployed JWT
/// authorizer is configured with. A token minted for some other API is refused here as it would
/// be there.
pub const AUDIENCE: &str = "seatgate-api";

/// How far `exp` may be past, and `nbf` or `iat` ahead of, the runner's clock. The runner usually
/// checks tokens it minted itself, but processes sharing a database (`--role`) or a
/// `SEATGATE_JWT_SECRET` may run on hosts whose clocks disagree by a few seconds; a minute
/// forgives that (it is also jsonwebtoken's default) while a token ten minutes early is still
/// refused, which is what the deployed authorizer's `nbf` and `iat` checks are for.
pub const CLOCK_LEEWAY: Duration = Duration::from_secs(60);

/// How long an issued token is valid.
pub const TOKEN_TTL: Duration = Duration::from_secs(24 * 3600);

/// Environment variable that, when set, is the HS256 key.
pub const SECRET_ENV: &str = "SEATGATE_JWT_SECRET";

/// The only algorithm the runner signs and accepts.
const ALGORITHM: Algorithm = Algorithm::HS256;

/// The claims of a runner token. `admin` is omitted unless granted, as an identity provider
/// would only add a group claim to members; `nbf` is omitted unless set, as the runner's own
/// tokens are valid from `iat`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub sub: String,
    pub iss: String,
    pub aud: String,
    pub iat: u64,
    pub exp: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<u64>,
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
            ("aud".to_owned(), self.aud.clone()),
            ("iat".to_owned(), self.iat.to_string()),
            ("exp".to_owned(), self.exp.to_string()),
        ]);
        if let Some(nbf) = self.nbf {
            claims.insert("nbf".to_owned(), nbf.to_string());
        }
        if self.admin {
            claims.insert("admin".to_owned(), "true".to_owned());
        }
        claims
    }

    /// The typed claims of a token whose signature, `exp`, `nbf`, `iss` and `aud` jsonwebtoken
    /// has checked; what is left is `iat` (jsonwebtoken does not look at it), `sub`, and that
    /// each claim has the form the runner issues. `now` is in seconds since the epoch.
    fn from_verified(claims: &Map<String, Value>, now: u64) -> Result<Claims, TokenError> {
        let iat = numeric(claims, "iat")?.ok_or(TokenError::MissingClaim("iat"))?;
        if iat > now.saturating_add(CLOCK_LEEWAY.as_secs()) {
            return Err(TokenError::IssuedInFuture);
        }
        let sub = string(claims, "sub")?.unwrap_or_default();
        if sub.is_empty() {
            return Err(TokenError::MissingClaim("sub"));
        }
        UserId::parse(sub).map_err(|_| TokenError::BadSubject)?;
        let admin = match claims.get("admin") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(admin)) => *admin,
            Some(_) => return Err(TokenError::InvalidClaim("admin")),
        };
        Ok(Claims {
            sub: sub.to_owned(),
            iss: string(claims, "iss")?
                .ok_or(TokenError::MissingClaim("iss"))?
                .to_owned(),
            // A list of audiences is valid JWT, but the runner only ever issues one string, so a
            // list is refused as malformed rather than flattened into a form nobody specified.
            aud: string(claims, "aud")?
                .ok_or(TokenError::MissingClaim("aud"))?
                .to_owned(),
            iat,
            exp: numeric(claims, "exp")?.ok_or(TokenError::MissingClaim("exp"))?,
            nbf: numeric(claims, "nbf")?,
            admin,
        })
    }
}

/// A string claim; `null` counts as absent, as it does for jsonwebtoken.
fn string<'a>(
    claims: &'a Map<String, Value>,
    name: &'static str,
) -> Result<Option<&'a str>, TokenError> {
    match claims.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(TokenError::InvalidClaim(name)),
    }
}

/// A NumericDate claim: seconds since the epoch, which RFC 7519 allows to be fractional.
fn numeric(claims: &Map<String, Value>, name: &'static str) -> Result<Option<u64>, TokenError> {
    match claims.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.is_finite() && *f >= 0.0 && *f < u64::MAX as f64)
                    .map(|f| f as u64)
            })
            .map(Some)
            .ok_or(TokenError::InvalidClaim(name)),
        Some(_) => Err(TokenError::InvalidClaim(name)),
    }
}

/// What a claim is called in a refusal, so that the client reads a word and the claim's name.
fn describe(claim: &str) -> &'static str {
    match claim {
        "sub" => "subject",
        "iss" => "issuer",
        "aud" => "audience",
        "exp" => "expiry",
        "nbf" => "not-before time",
        "iat" => "issue time",
        "admin" => "admin claim",
        _ => "claim",
    }
}

/// The claims a refusal may name; jsonwebtoken reports them as `String`s.
fn known_claim(claim: &str) -> Option<&'static str> {
    ["sub", "iss", "aud", "exp", "nbf", "iat"]
        .into_iter()
        .find(|known| *known == claim)
}

/// Why a bearer token was refused. The messages go to the client, so they name the claim (or
/// header) that failed and say what to do, and say nothing about the key or the token itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("missing bearer token; get one with POST /dev/token")]
    Missing,
    #[error("the Authorization header is not `Bearer <token>`")]
    NotBearer,
    #[error("the token is not a well-formed JWT")]
    Malformed,
    #[error("the token is not signed with HS256 (alg)")]
    Algorithm,
    #[error("the token's signature does not verify; get a new one with POST /dev/token")]
    Signature,
    #[error("the token has expired (exp); get a new one with POST /dev/token")]
    Expired,
    #[error("the token is not yet valid (nbf)")]
    NotYetValid,
    #[error("the token was issued in the future (iat)")]
    IssuedInFuture,
    #[error("the token's issuer is not accepted (iss)")]
    WrongIssuer,
    #[error("the token is for another audience (aud)")]
    WrongAudience,
    #[error("the token has no {what} ({0})", what = describe(.0))]
    MissingClaim(&'static str),
    #[error("the token's {what} is malformed ({0})", what = describe(.0))]
    InvalidClaim(&'static str),
    #[error("the token's subject is not a valid user id (sub)")]
    BadSubject,
    #[error("the token is not valid for this API")]
    Invalid,
}

impl TokenError {
    fn from_jwt(kind: &jsonwebtoken::errors::ErrorKind) -> TokenError {
        use jsonwebtoken::errors::ErrorKind;
        match kind {
            ErrorKind::ExpiredSignature => TokenError::Expired,
            ErrorKind::ImmatureSignature => TokenError::NotYetValid,
            ErrorKind::InvalidIssuer => TokenError::WrongIssuer,
            ErrorKind::InvalidAudience => TokenError::WrongAudience,
            ErrorKind::MissingRequiredClaim(claim) => {
                known_claim(claim).map_or(TokenError::Invalid, TokenError::MissingClaim)
            }
            ErrorKind::InvalidClaimFormat(claim) => {
                known_claim(claim).map_or(TokenError::Invalid, TokenError::InvalidClaim)
            }
            ErrorKind::InvalidAlgorithm
            | ErrorKind::InvalidAlgorithmName
            | ErrorKind::UnsupportedAlgorithm
            | ErrorKind::MissingAlgorithm => TokenError::Algorithm,
            ErrorKind::InvalidSignature => TokenError::Signature,
            ErrorKind::InvalidToken
            | ErrorKind::Base64(_)
            | ErrorKind::Json(_)
            | ErrorKind::Utf8(_) => TokenError::Malformed,
            _ => TokenError::Invalid,
        }
    }
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
        let mut validation = Validation::new(ALGORITHM);
        validation.set_issuer(&[ISSUER]);
        validation.set_audience(&[AUDIENCE]);
        // jsonwebtoken checks only the claims it is told are required to be present; `iat` is
        // not among the ones it knows, so `from_verified` requires it.
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_exp = true;
        // Off by default in jsonwebtoken; the deployed authorizer refuses a token before its
        // `nbf`.
        validation.validate_nbf = true;
        validation.validate_aud = true;
        validation.leeway = CLOCK_LEEWAY.as_secs();
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
            aud: AUDIENCE.to_owned(),
            iat,
            exp: iat + TOKEN_TTL.as_secs(),
            nbf: None,
            admin,
        })
    }

    /// Signs arbitrary claims; tests use it to mint expired tokens.
    pub fn issue_with(&self, claims: &Claims) -> anyhow::Result<String> {
        jsonwebtoken::encode(&Header::new(ALGORITHM), claims, &self.encoding)
            .context("signing a token")
    }

    /// Verifies the algorithm, signature, `exp`, `nbf`, `iat`, `iss`, `aud`, and that `sub` is a
    /// valid user id.
    pub fn verify(&self, token: &str) -> Result<Claims, TokenError> {
        // jsonwebtoken cannot even parse a header whose `alg` it does not know (`none`), and
        // would call it malformed; the client is better told which field is wrong.
        if header_alg(token).is_some_and(|alg| alg != "HS256") {
            return Err(TokenError::Algorithm);
        }
        // Into a plain map rather than `Claims`: jsonwebtoken deserializes before it validates,
        // and a missing field would otherwise surface as malformed JSON instead of naming the
        // claim.
        let data =
            jsonwebtoken::decode::<Map<String, Value>>(token, &self.decoding, &self.validation)
                .map_err(|e| TokenError::from_jwt(e.kind()))?;
        Claims::from_verified(&data.claims, jsonwebtoken::get_current_timestamp())
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
            _ => return Err(TokenError::NotBearer),
        };
        if token.is_empty() {
            return Err(TokenError::Missing);
        }
        self.verify(token)
    }
}

/// The `alg` a token's header names, if the header is base64url JSON with a string `alg`. Only
/// used to word a refusal; the signature check does not rely on it.
fn header_alg(token: &str) -> Option<String> {
    let header = base64url_decode(token.split('.').next()?)?;
    let header: Value = serde_json::from_slice(&header).ok()?;
    header.get("alg")?.as_str().map(str::to_owned)
}

/// Unpadded base64url (RFC 4648 §5), as JWT segments are written; `None` on any other byte.
fn base64url_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for byte in text.bytes() {
        let sextet = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(sextet);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
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

    fn claims(now: u64) -> Claims {
        Claims {
            sub: "u1".into(),
            iss: ISSUER.into(),
            aud: AUDIENCE.into(),
            iat: now,
            exp: now + 3600,
            nbf: None,
            admin: false,
        }
    }

    #[test]
    fn issued_tokens_verify_and_carry_the_admin_claim_only_when_granted() {
        let auth = TokenAuthority::new(&Secret::new("k")).unwrap();
        let plain = auth
            .verify(&auth.issue(&user("u1"), false).unwrap())
            .unwrap();
        assert_eq!(plain.sub, "u1");
        assert_eq!(plain.exp, plain.iat + TOKEN_TTL.as_secs());
        let context = plain.as_context_claims();
        assert_eq!(context["aud"], AUDIENCE);
        assert_eq!(context["iss"], ISSUER);
        assert!(!context.contains_key("admin"));
        assert!(!context.contains_key("nbf"));
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
        assert_eq!(auth.verify(&forged), Err(TokenError::Signature));
        let now = jsonwebtoken::get_current_timestamp();
        let expired = auth
            .issue_with(&Claims {
                iat: now - 7200,
                exp: now - 3600,
                ..claims(now)
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
            Err(TokenError::NotBearer)
        );
        assert_eq!(
            auth.verify_header(Some("Bearer x.y.z")),
            Err(TokenError::Malformed)
        );
    }

    #[test]
    fn time_claims_are_checked_within_the_leeway_and_no_further() {
        let auth = TokenAuthority::new(&Secret::new("k")).unwrap();
        let now = jsonwebtoken::get_current_timestamp();
        let within = CLOCK_LEEWAY.as_secs() / 2;
        let beyond = 10 * 60;
        let verify = |c: Claims| auth.verify(&auth.issue_with(&c).unwrap());
        let base = claims(now);
        let nbf = |at| Claims {
            nbf: Some(at),
            ..base.clone()
        };
        let iat = |at| Claims {
            iat: at,
            ..base.clone()
        };
        let exp = |at| Claims {
            exp: at,
            ..base.clone()
        };
        let early = verify(nbf(now + within)).unwrap();
        assert_eq!(early.as_context_claims()["nbf"], (now + within).to_string());
        assert_eq!(verify(nbf(now + beyond)), Err(TokenError::NotYetValid));
        assert!(verify(iat(now + within)).is_ok());
        assert_eq!(verify(iat(now + beyond)), Err(TokenError::IssuedInFuture));
        assert!(verify(exp(now - within)).is_ok());
        assert_eq!(verify(exp(now - beyond)), Err(TokenError::Expired));
    }

    #[test]
    fn claims_of_the_wrong_form_are_refused_by_name() {
        let now = jsonwebtoken::get_current_timestamp();
        let good = serde_json::to_value(claims(now)).unwrap();
        let with = |name: &str, value: Value| {
            let mut c = good.as_object().unwrap().clone();
            c.insert(name.to_owned(), value);
            Claims::from_verified(&c, now)
        };
        let without = |name: &str| {
            let mut c = good.as_object().unwrap().clone();
            c.remove(name);
            Claims::from_verified(&c, now)
        };
        assert_eq!(with("iat", Value::from(now as f64 + 0.5)).unwrap().iat, now);
        assert_eq!(
            with("iat", "now".into()),
            Err(TokenError::InvalidClaim("iat"))
        );
        assert_eq!(without("iat"), Err(TokenError::MissingClaim("iat")));
        assert_eq!(with("sub", "".into()), Err(TokenError::MissingClaim("sub")));
        assert_eq!(with("sub", "a\u{7}b".into()), Err(TokenError::BadSubject));
        assert_eq!(
            with("aud", serde_json::json!([AUDIENCE])),
            Err(TokenError::InvalidClaim("aud"))
        );
        assert_eq!(
            with("admin", "yes".into()),
            Err(TokenError::InvalidClaim("admin"))
        );
        assert_eq!(
            TokenError::MissingClaim("sub").to_string(),
            "the token has no subject (sub)"
        );
        assert_eq!(
            TokenError::MissingClaim("aud").to_string(),
            "the token has no audience (aud)"
        );
    }

    #[test]
    fn the_header_alg_is_read_for_the_refusal_only() {
        assert_eq!(
            base64url_decode("eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0").unwrap(),
            br#"{"alg":"none","typ":"JWT"}"#
        );
        assert_eq!(base64url_decode("a+b/"), None);
        assert_eq!(
            header_alg("eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.e30.").as_deref(),
            Some("none")
        );
        assert_eq!(header_alg("not a token"), None);
        let auth = TokenAuthority::new(&Secret::new("k")).unwrap();
        let token = auth.issue(&user("u1"), false).unwrap();
        assert_eq!(header_alg(&token).as_deref(), Some("HS256"));
        let (_, rest) = token.split_once('.').unwrap();
        let unsigned = format!("eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.{rest}");
        assert_eq!(auth.verify(&unsigned), Err(TokenError::Algorithm));
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
