//! The upstream seat system over HTTP (reqwest).
//!
//! The reserve write is sent exactly once: there is no retry layer here, because a reserve whose
//! answer was lost may already have taken the seat. Answers are read by their body's `error`
//! code, not the status alone: a 409 is `seat_taken` (a lost race) or `already_charged` (this
//! user's problem, not the seat's). 429 and 503 are the upstream saying "not now" before doing
//! anything (`Busy`, with its `Retry-After` when it gave one, in either of its two forms). Every
//! transport failure, lost or unreadable body and other 5xx is a typed [`CallFailure`]; on a
//! reserve it is [`ReserveOutcome::Unknown`], and the reaper settles it by reading the charge.
//!
//! Every call is counted here ([`Metric::UpstreamCalls`] by route and outcome), where it goes
//! on the wire: probes and calls alike, none that the breaker kept back.

use crate::domain::{RoomId, SeatAvailability, SeatId, Secret, UpstreamRoute};
use crate::metrics::{self, Metric};
use crate::ports::{CallFailure, Charge, ChargeReadError, ReadError, ReserveOutcome, Upstream};
use async_trait::async_trait;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde::Deserialize;
use std::time::{Duration, SystemTime};

#[derive(Debug, Clone)]
pub struct HttpUpstream {
    client: reqwest::Client,
    base_url: String,
}

/// An error answer: `{"error": "<code>"}`.
#[derive(Deserialize)]
struct ErrorBody {
    error: String,
}

/// `Retry-After` as a delay: delta-seconds, or an HTTP-date taken relative to the answer's own
/// `Date` (the upstream's clock, so a skew between the two machines does not stretch or cut the
/// pause), or to this machine's clock when the answer has none. A date in the past is no
/// pause; anything unreadable counts as not said. The cap is the breaker's business
/// (`Timing::retry_after_max`), not the parser's.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    let now = headers
        .get(reqwest::header::DATE)
        .and_then(|d| d.to_str().ok())
        .and_then(|d| httpdate::parse_http_date(d.trim()).ok())
        .unwrap_or_else(SystemTime::now);
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Whether an answer of `status` says "not now" (429, 503), with its `Retry-After` if it gave
/// one. `None`: not a busy answer.
fn busy(status: StatusCode, headers: &HeaderMap) -> Option<Option<Duration>> {
    matches!(
        status,
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
    )
    .then(|| retry_after(headers))
}

#[derive(Deserialize)]
struct ChargeBody {
    charge_id: String,
    seat_id: String,
}

impl ChargeBody {
    fn into_charge(self) -> Result<Charge, CallFailure> {
        let seat_id = SeatId::parse(&self.seat_id).map_err(|_| CallFailure::Unreadable)?;
        Ok(Charge {
            charge_id: self.charge_id,
            seat_id,
        })
    }
}

#[derive(Deserialize)]
struct SeatBody {
    seat_id: String,
    occupied: bool,
}

impl SeatBody {
    fn into_availability(self) -> Result<SeatAvailability, ReadError> {
        Ok(SeatAvailability {
            seat_id: SeatId::parse(&self.seat_id)
                .map_err(|_| ReadError::Failed(CallFailure::Unreadable))?,
            available: !self.occupied,
        })
    }
}

#[derive(Deserialize)]
struct RoomBody {
    seats: Vec<SeatBody>,
}

impl HttpUpstream {
    /// `timeout` bounds each call from connect to last byte (the lease arithmetic relies on it).
    pub fn new(base_url: impl Into<String>, timeout: Duration) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .pool_max_idle_per_host(64)
            .build()?;
        Ok(HttpUpstream {
            client,
            base_url: base_url.into().trim_end_matches('/').to_owned(),
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base_url, path)
    }
}

/// A transport or body error as a failure. reqwest's own text can embed the URL; the
/// credential travels in a header, so it would be safe, but the type says all a caller needs.
fn failure(e: &reqwest::Error) -> CallFailure {
    if e.is_timeout() {
        CallFailure::Timeout
    } else if e.is_decode() {
        CallFailure::Unreadable
    } else {
        CallFailure::Dropped
    }
}

/// A read's answer as an `outcome`.
fn read_outcome<T>(result: &Result<T, ReadError>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(ReadError::NoSuchRoom | ReadError::Refused(_)) => "refused",
        Err(ReadError::Busy { .. }) => "busy",
        Err(ReadError::Failed(f)) => f.as_outcome(),
        Err(ReadError::HeldBack(_)) => "held",
    }
}

fn counted(route: UpstreamRoute, outcome: &'static str) {
    metrics::count(
        Metric::UpstreamCalls,
        &[("route", route.as_str()), ("outcome", outcome)],
        1,
    );
}

#[async_trait]
impl Upstream for HttpUpstream {
    async fn reserve(&self, credential: &Secret, seat_id: &SeatId) -> ReserveOutcome {
        let outcome = self.send_reserve(credential, seat_id).await;
        counted(UpstreamRoute::Reserve, outcome.as_outcome());
        outcome
    }

    async fn seat(&self, seat_id: &SeatId) -> Result<bool, ReadError> {
        let result = self.read_seat(seat_id).await;
        counted(UpstreamRoute::Seat, read_outcome(&result));
        result
    }

    async fn room(&self, room_id: &RoomId) -> Result<Vec<SeatAvailability>, ReadError> {
        let result = self.read_room(room_id).await;
        counted(UpstreamRoute::Room, read_outcome(&result));
        result
    }

    async fn current_charge(&self, credential: &Secret) -> Result<Option<Charge>, ChargeReadError> {
        let result = self.read_charge(credential).await;
        let outcome = match &result {
            Ok(_) => "ok",
            Err(ChargeReadError::CredentialRejected | ChargeReadError::Refused(_)) => "refused",
            Err(ChargeReadError::Busy { .. }) => "busy",
            Err(ChargeReadError::Failed(f)) => f.as_outcome(),
            Err(ChargeReadError::HeldBack(_)) => "held",
        };
        counted(UpstreamRoute::Charge, outcome);
        result
    }
}

/// How a read answered with a status other than the route's own: busy, a definite refusal
/// (a 4xx but 408 and 429), or a failure.
fn read_status_error(status: StatusCode, headers: &HeaderMap) -> ReadError {
    if let Some(retry_after) = busy(status, headers) {
        ReadError::Busy { retry_after }
    } else if status.is_client_error() && status != StatusCode::REQUEST_TIMEOUT {
        ReadError::Refused(status.as_u16())
    } else {
        ReadError::Failed(CallFailure::Status(status.as_u16()))
    }
}

impl HttpUpstream {
    async fn send_reserve(&self, credential: &Secret, seat_id: &SeatId) -> ReserveOutcome {
        let sent = self
            .client
            .post(self.url("/api/reservations"))
            .bearer_auth(credential.expose())
            .json(&serde_json::json!({ "seat_id": seat_id }))
            .send()
            .await;
        let resp = match sent {
            Ok(r) => r,
            Err(e) => return ReserveOutcome::Unknown(failure(&e)),
        };
        let status = resp.status();
        if let Some(retry_after) = busy(status, resp.headers()) {
            return ReserveOutcome::Busy { retry_after };
        }
        match status {
            StatusCode::OK | StatusCode::CREATED => match resp.json::<ChargeBody>().await {
                Ok(body) => match body.into_charge() {
                    Ok(charge) => ReserveOutcome::Reserved(charge),
                    Err(f) => ReserveOutcome::Unknown(f),
                },
                Err(e) => ReserveOutcome::Unknown(failure(&e)),
            },
            StatusCode::CONFLICT => match resp.json::<ErrorBody>().await {
                Ok(body) if body.error == "seat_taken" => ReserveOutcome::SeatTaken,
                Ok(body) if body.error == "already_charged" => ReserveOutcome::AlreadyCharged,
                // A conflict we cannot name is still a definite refusal; taking it for a lost
                // race would close a seat that may be free.
                _ => ReserveOutcome::Refused(status.as_u16()),
            },
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => ReserveOutcome::CredentialRejected,
            s if s.is_client_error() && s != StatusCode::REQUEST_TIMEOUT => {
                ReserveOutcome::Refused(s.as_u16())
            }
            s => ReserveOutcome::Unknown(CallFailure::Status(s.as_u16())),
        }
    }

    async fn read_seat(&self, seat_id: &SeatId) -> Result<bool, ReadError> {
        let resp = self
            .client
            .get(self.url(&format!("/api/seats/{seat_id}")))
            .send()
            .await
            .map_err(|e| ReadError::Failed(failure(&e)))?;
        if resp.status() != StatusCode::OK {
            return Err(read_status_error(resp.status(), resp.headers()));
        }
        let body: SeatBody = resp
            .json()
            .await
            .map_err(|e| ReadError::Failed(failure(&e)))?;
        Ok(body.into_availability()?.available)
    }

    async fn read_room(&self, room_id: &RoomId) -> Result<Vec<SeatAvailability>, ReadError> {
        let resp = self
            .client
            .get(self.url(&format!("/api/rooms/{room_id}/seats")))
            .send()
            .await
            .map_err(|e| ReadError::Failed(failure(&e)))?;
        match resp.status() {
            StatusCode::OK => resp
                .json::<RoomBody>()
                .await
                .map_err(|e| ReadError::Failed(failure(&e)))?
                .seats
                .into_iter()
                .map(SeatBody::into_availability)
                .collect(),
            // Read by its body: a 404 from something in between is not "no such room".
            StatusCode::NOT_FOUND => match resp.json::<ErrorBody>().await {
                Ok(body) if body.error == "room_not_found" => Err(ReadError::NoSuchRoom),
                _ => Err(ReadError::Refused(404)),
            },
            s => Err(read_status_error(s, resp.headers())),
        }
    }

    async fn read_charge(&self, credential: &Secret) -> Result<Option<Charge>, ChargeReadError> {
        let resp = self
            .client
            .get(self.url("/api/charge"))
            .bearer_auth(credential.expose())
            .send()
            .await
            .map_err(|e| ChargeReadError::Failed(failure(&e)))?;
        match resp.status() {
            StatusCode::OK => {
                let body: ChargeBody = resp
                    .json()
                    .await
                    .map_err(|e| ChargeReadError::Failed(failure(&e)))?;
                body.into_charge()
                    .map(Some)
                    .map_err(ChargeReadError::Failed)
            }
            StatusCode::NOT_FOUND => Ok(None),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                Err(ChargeReadError::CredentialRejected)
            }
            s => Err(match read_status_error(s, resp.headers()) {
                ReadError::Busy { retry_after } => ChargeReadError::Busy { retry_after },
                ReadError::Refused(code) => ChargeReadError::Refused(code),
                _ => ChargeReadError::Failed(CallFailure::Status(s.as_u16())),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{DATE, HeaderValue, RETRY_AFTER};

    fn headers(pairs: &[(reqwest::header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(k.clone(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates_relative_to_the_answers_date() {
        assert_eq!(
            retry_after(&headers(&[(RETRY_AFTER, " 7 ")])),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after(&headers(&[
                (RETRY_AFTER, "Wed, 21 Oct 2015 07:28:30 GMT"),
                (DATE, "Wed, 21 Oct 2015 07:28:00 GMT"),
            ])),
            Some(Duration::from_secs(30))
        );
        // A date already past is no pause; nonsense is not said at all.
        assert_eq!(
            retry_after(&headers(&[
                (RETRY_AFTER, "Wed, 21 Oct 2015 07:28:00 GMT"),
                (DATE, "Wed, 21 Oct 2015 07:28:30 GMT"),
            ])),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after(&headers(&[(RETRY_AFTER, "soon")])), None);
        assert_eq!(retry_after(&headers(&[(RETRY_AFTER, "-3")])), None);
        assert_eq!(retry_after(&HeaderMap::new()), None);
        // Without a Date of its own, this machine's clock: a date a minute ahead is about that.
        let ahead = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(60));
        let d = retry_after(&headers(&[(RETRY_AFTER, &ahead)])).unwrap();
        assert!(
            d > Duration::from_secs(55) && d <= Duration::from_secs(60),
            "{d:?}"
        );
    }

    #[test]
    fn busy_answers_carry_their_retry_after_and_other_statuses_are_typed() {
        let with = headers(&[(RETRY_AFTER, "2")]);
        assert_eq!(
            busy(StatusCode::SERVICE_UNAVAILABLE, &with),
            Some(Some(Duration::from_secs(2)))
        );
        assert_eq!(
            busy(StatusCode::SERVICE_UNAVAILABLE, &HeaderMap::new()),
            Some(None)
        );
        assert_eq!(
            busy(StatusCode::TOO_MANY_REQUESTS, &HeaderMap::new()),
            Some(None)
        );
        assert_eq!(busy(StatusCode::BAD_GATEWAY, &with), None);
        assert_eq!(
            read_status_error(StatusCode::SERVICE_UNAVAILABLE, &with),
            ReadError::Busy {
                retry_after: Some(Duration::from_secs(2))
            }
        );
        assert_eq!(
            read_status_error(StatusCode::BAD_GATEWAY, &HeaderMap::new()),
            ReadError::Failed(CallFailure::Status(502))
        );
        assert_eq!(
            read_status_error(StatusCode::BAD_REQUEST, &HeaderMap::new()),
            ReadError::Refused(400)
        );
        assert_eq!(
            read_status_error(StatusCode::REQUEST_TIMEOUT, &HeaderMap::new()),
            ReadError::Failed(CallFailure::Status(408))
        );
    }
}
