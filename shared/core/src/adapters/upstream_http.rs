//! The upstream seat system over HTTP (reqwest).
//!
//! The reserve write is sent exactly once: there is no retry layer here, because a reserve whose
//! answer was lost may already have taken the seat. Answers are read by their body's `error`
//! code, not the status alone: a 409 is `seat_taken` (a lost race) or `already_charged` (this
//! user's problem, not the seat's). 429 and 503 are the upstream saying "not now" before doing
//! anything ([`ReserveOutcome::Busy`], with its `Retry-After`). Every transport failure and any
//! other 5xx is [`ReserveOutcome::Unknown`], and the reaper settles it by reading the charge.
//!
//! Every call is counted here ([`Metric::UpstreamCalls`] by route and outcome), where it goes
//! on the wire: probes and calls alike, none that the breaker kept back, and timeouts told
//! apart from lost answers.

use crate::domain::{RoomId, SeatAvailability, SeatId, Secret};
use crate::metrics::{self, Metric};
use crate::ports::{Charge, ChargeReadError, ReadError, ReserveOutcome, Upstream};
use async_trait::async_trait;
use reqwest::StatusCode;
use serde::Deserialize;
use std::time::Duration;

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

/// `Retry-After` in seconds; an HTTP date (or anything else) counts as not said.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let secs: u64 = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs))
}

#[derive(Deserialize)]
struct ChargeBody {
    charge_id: String,
    seat_id: String,
}

impl ChargeBody {
    fn into_charge(self) -> Result<Charge, String> {
        let seat_id = SeatId::parse(&self.seat_id).map_err(|e| e.to_string())?;
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
                .map_err(|e| ReadError::Unavailable(format!("bad seat in response: {e}")))?,
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

/// What [`describe`] calls a timeout, so the call's outcome can be counted as one.
const TIMEOUT: &str = "timeout";

/// reqwest errors can embed the URL; the credential travels in a header, so they are safe to
/// show, but keep them short.
fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        TIMEOUT.into()
    } else if e.is_connect() {
        "connect failed".into()
    } else if e.is_body() || e.is_decode() {
        "response body lost".into()
    } else {
        "transport error".into()
    }
}

/// A reserve's answer as the `outcome` of [`Metric::UpstreamCalls`] (and
/// [`Metric::ReservePosts`]): ok, taken, busy, refused (a definite no that wrote nothing),
/// timeout, unknown (any other answer that may hide a write).
pub fn reserve_outcome(outcome: &ReserveOutcome) -> &'static str {
    match outcome {
        ReserveOutcome::Reserved(_) => "ok",
        ReserveOutcome::SeatTaken => "taken",
        ReserveOutcome::Busy { .. } => "busy",
        ReserveOutcome::AlreadyCharged
        | ReserveOutcome::CredentialRejected
        | ReserveOutcome::Refused(_) => "refused",
        ReserveOutcome::Unknown(why) if why == TIMEOUT => "timeout",
        ReserveOutcome::Unknown(_) => "unknown",
    }
}

/// A read's answer as an `outcome`: a failed read wrote nothing, so it is `failed`, not unknown.
fn read_outcome<T>(result: &Result<T, ReadError>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(ReadError::NoSuchRoom) => "refused",
        Err(ReadError::Unavailable(why)) if why == TIMEOUT => "timeout",
        Err(ReadError::Unavailable(_)) | Err(ReadError::CircuitOpen(_)) => "failed",
    }
}

fn counted(route: &'static str, outcome: &'static str) {
    metrics::count(
        Metric::UpstreamCalls,
        &[("route", route), ("outcome", outcome)],
        1,
    );
}

#[async_trait]
impl Upstream for HttpUpstream {
    async fn reserve(&self, credential: &Secret, seat_id: &SeatId) -> ReserveOutcome {
        let outcome = self.send_reserve(credential, seat_id).await;
        counted("reserve", reserve_outcome(&outcome));
        outcome
    }

    async fn seat(&self, seat_id: &SeatId) -> Result<bool, ReadError> {
        let result = self.read_seat(seat_id).await;
        counted("seat", read_outcome(&result));
        result
    }

    async fn room(&self, room_id: &RoomId) -> Result<Vec<SeatAvailability>, ReadError> {
        let result = self.read_room(room_id).await;
        counted("room", read_outcome(&result));
        result
    }

    async fn current_charge(&self, credential: &Secret) -> Result<Option<Charge>, ChargeReadError> {
        let result = self.read_charge(credential).await;
        let outcome = match &result {
            Ok(_) => "ok",
            Err(ChargeReadError::CredentialRejected) => "refused",
            Err(ChargeReadError::Unavailable(why)) if why == TIMEOUT => "timeout",
            Err(ChargeReadError::Unavailable(_)) | Err(ChargeReadError::CircuitOpen(_)) => "failed",
        };
        counted("charge", outcome);
        result
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
            Err(e) => return ReserveOutcome::Unknown(describe(&e)),
        };
        let status = resp.status();
        match status {
            StatusCode::OK | StatusCode::CREATED => match resp.json::<ChargeBody>().await {
                Ok(body) => match body.into_charge() {
                    Ok(charge) => ReserveOutcome::Reserved(charge),
                    Err(e) => ReserveOutcome::Unknown(format!("bad charge in response: {e}")),
                },
                Err(e) => ReserveOutcome::Unknown(describe(&e)),
            },
            StatusCode::CONFLICT => match resp.json::<ErrorBody>().await {
                Ok(body) if body.error == "seat_taken" => ReserveOutcome::SeatTaken,
                Ok(body) if body.error == "already_charged" => ReserveOutcome::AlreadyCharged,
                // A conflict we cannot name is still a definite refusal; taking it for a lost
                // race would close a seat that may be free.
                _ => ReserveOutcome::Refused(status.as_u16()),
            },
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => {
                ReserveOutcome::Busy {
                    retry_after: retry_after(resp.headers()),
                }
            }
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => ReserveOutcome::CredentialRejected,
            s if s.is_client_error() && s != StatusCode::REQUEST_TIMEOUT => {
                ReserveOutcome::Refused(s.as_u16())
            }
            s => ReserveOutcome::Unknown(format!("upstream answered {}", s.as_u16())),
        }
    }

    async fn read_seat(&self, seat_id: &SeatId) -> Result<bool, ReadError> {
        let resp = self
            .client
            .get(self.url(&format!("/api/seats/{seat_id}")))
            .send()
            .await
            .map_err(|e| ReadError::Unavailable(describe(&e)))?;
        if resp.status() != StatusCode::OK {
            return Err(ReadError::Unavailable(format!(
                "upstream answered {}",
                resp.status().as_u16()
            )));
        }
        let body: SeatBody = resp
            .json()
            .await
            .map_err(|e| ReadError::Unavailable(describe(&e)))?;
        Ok(body.into_availability()?.available)
    }

    async fn read_room(&self, room_id: &RoomId) -> Result<Vec<SeatAvailability>, ReadError> {
        let resp = self
            .client
            .get(self.url(&format!("/api/rooms/{room_id}/seats")))
            .send()
            .await
            .map_err(|e| ReadError::Unavailable(describe(&e)))?;
        match resp.status() {
            StatusCode::OK => resp
                .json::<RoomBody>()
                .await
                .map_err(|e| ReadError::Unavailable(describe(&e)))?
                .seats
                .into_iter()
                .map(SeatBody::into_availability)
                .collect(),
            // Read by its body: a 404 from something in between is not "no such room".
            StatusCode::NOT_FOUND => match resp.json::<ErrorBody>().await {
                Ok(body) if body.error == "room_not_found" => Err(ReadError::NoSuchRoom),
                _ => Err(ReadError::Unavailable("upstream answered 404".into())),
            },
            s => Err(ReadError::Unavailable(format!(
                "upstream answered {}",
                s.as_u16()
            ))),
        }
    }

    async fn read_charge(&self, credential: &Secret) -> Result<Option<Charge>, ChargeReadError> {
        let resp = self
            .client
            .get(self.url("/api/charge"))
            .bearer_auth(credential.expose())
            .send()
            .await
            .map_err(|e| ChargeReadError::Unavailable(describe(&e)))?;
        match resp.status() {
            StatusCode::OK => {
                let body: ChargeBody = resp
                    .json()
                    .await
                    .map_err(|e| ChargeReadError::Unavailable(describe(&e)))?;
                body.into_charge()
                    .map(Some)
                    .map_err(ChargeReadError::Unavailable)
            }
            StatusCode::NOT_FOUND => Ok(None),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                Err(ChargeReadError::CredentialRejected)
            }
            s => Err(ChargeReadError::Unavailable(format!(
                "upstream answered {}",
                s.as_u16()
            ))),
        }
    }
}
