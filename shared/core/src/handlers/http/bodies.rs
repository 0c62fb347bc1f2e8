//! What a request carries: the caller (from the authorizer's JWT claims), the JSON bodies the
//! routes accept (unknown fields refused, counts accepted however JSON writes a whole number),
//! the `Idempotency-Key` header and a listing's `cursor` query parameter.

use crate::domain::IdempotencyKey;
use crate::domain::UserId;
use http::StatusCode;
use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt};
use serde::Deserialize;

use super::MAX_BODY_BYTES;
use super::errors::{self, Failure};

/// The caller, from the authorizer's JWT claims in the request context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub user_id: UserId,
    pub admin: bool,
}

pub fn caller(req: &Request) -> Option<Caller> {
    let Some(RequestContext::ApiGatewayV2(ctx)) = req.request_context_ref() else {
        return None;
    };
    let claims = &ctx.authorizer.as_ref()?.jwt.as_ref()?.claims;
    let user_id = UserId::parse(claims.get("sub")?).ok()?;
    let admin = claims.get("admin").is_some_and(|v| v == "true");
    Some(Caller { user_id, admin })
}

pub(super) fn body_json<T: for<'de> Deserialize<'de>>(req: &Request) -> Result<T, Failure> {
    let bytes: &[u8] = match req.body() {
        Body::Empty => b"",
        Body::Text(t) => t.as_bytes(),
        Body::Binary(b) => b,
        _ => b"",
    };
    if bytes.len() > MAX_BODY_BYTES {
        return Err(errors::too_large());
    }
    serde_json::from_slice(bytes).map_err(errors::invalid_json)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CredentialBody {
    pub(super) upstream_token: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ActionBody {
    pub(super) kind: String,
    pub(super) seat_id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WaitBody {
    pub(super) seat_id: String,
    pub(super) until: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FlightBody {
    pub(super) flight_id: String,
    #[serde(deserialize_with = "count::whole")]
    pub(super) capacity: u32,
    #[serde(default, deserialize_with = "count::optional")]
    pub(super) max_per_user: Option<u32>,
    #[serde(default, deserialize_with = "count::optional")]
    pub(super) shards: Option<u32>,
    #[serde(default, deserialize_with = "count::optional")]
    pub(super) hold_ttl_secs: Option<u32>,
    #[serde(default, deserialize_with = "count::optional")]
    pub(super) hold_max_secs: Option<u32>,
    #[serde(default, deserialize_with = "count::optional")]
    pub(super) offer_ttl_secs: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BookingBody {
    #[serde(rename = "headCount", deserialize_with = "count::whole")]
    pub(super) head_count: u32,
}

/// Counts in request bodies. JSON has one number type, and JSON Schema's `integer` (what
/// docs/openapi.yaml promises) includes `9.0`, so a whole number is accepted however it is
/// written; a fraction, a negative number or one past `u32` is refused as before.
pub(super) mod count {
    use serde::Deserialize;
    use serde::de::{Deserializer, Error};
    use serde_json::Number;

    fn to_u32(n: &Number) -> Option<u32> {
        if let Some(u) = n.as_u64() {
            return u32::try_from(u).ok();
        }
        let f = n.as_f64()?;
        (f.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&f)).then_some(f as u32)
    }

    fn check<E: Error>(n: Number) -> Result<u32, E> {
        to_u32(&n).ok_or_else(|| {
            E::custom(format!(
                "expected a whole number from 0 to {}, got {n}",
                u32::MAX
            ))
        })
    }

    pub(super) fn whole<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        check(Number::deserialize(d)?)
    }

    pub(super) fn optional<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
        Option::<Number>::deserialize(d)?.map(check).transpose()
    }

    #[cfg(test)]
    mod tests {
        use super::to_u32;

        #[test]
        fn whole_numbers_however_written_and_nothing_else() {
            let n = |s: &str| to_u32(&serde_json::from_str(s).unwrap());
            assert_eq!(n("9"), Some(9));
            assert_eq!(n("9.0"), Some(9));
            assert_eq!(n("1e3"), Some(1000));
            assert_eq!(n("4294967295"), Some(u32::MAX));
            assert_eq!(n("4294967296"), None);
            assert_eq!(n("9.5"), None);
            assert_eq!(n("-1"), None);
            assert_eq!(n("-1.0"), None);
            assert_eq!(n("1e300"), None);
        }
    }
}

/// The `Idempotency-Key` header, if sent.
pub(super) fn idempotency_key(req: &Request) -> Result<Option<IdempotencyKey>, Failure> {
    let Some(value) = req.headers().get("idempotency-key") else {
        return Ok(None);
    };
    let value = value.to_str().map_err(|_| {
        Failure::new(
            StatusCode::BAD_REQUEST,
            "invalid_idempotency_key",
            "Idempotency-Key must be visible ASCII",
        )
    })?;
    IdempotencyKey::parse(value)
        .map(Some)
        .map_err(|e| errors::invalid_id(&e))
}

/// A paginated listing's `cursor` query parameter, if sent: the previous page's `next_cursor`,
/// which `parse` turns back into a key. One value at most; anything `parse` refuses is
/// `400 invalid_cursor`, since a cursor is only ever one a page handed out.
pub(super) fn cursor<C>(
    req: &Request,
    parse: impl FnOnce(&str) -> Option<C>,
) -> Result<Option<C>, Failure> {
    let Some(values) = req
        .query_string_parameters_ref()
        .and_then(|q| q.all("cursor"))
    else {
        return Ok(None);
    };
    match values.as_slice() {
        [value] => parse(value).map(Some).ok_or_else(errors::invalid_cursor),
        _ => Err(errors::invalid_cursor()),
    }
}

/// `?status=` of a flight's holds listing: one of the four statuses, `HELD` when absent.
pub(super) fn hold_status(req: &Request) -> Result<crate::domain::HoldStatus, Failure> {
    let Some(values) = req
        .query_string_parameters_ref()
        .and_then(|q| q.all("status"))
    else {
        return Ok(crate::domain::HoldStatus::Held);
    };
    match values.as_slice() {
        [value] => crate::domain::HoldStatus::parse(value).ok_or_else(errors::invalid_status),
        _ => Err(errors::invalid_status()),
    }
}

/// A history cursor: a version as a page writes it, `[1-9][0-9]{0,18}` (no sign, no leading
/// zero; 19 digits at most, so every one fits a `u64`).
pub(super) fn version_cursor(s: &str) -> Option<u64> {
    let canonical =
        (1..=19).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit()) && !s.starts_with('0');
    canonical.then(|| s.parse().ok()).flatten()
}
