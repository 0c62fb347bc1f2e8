//! The HTTP API handler (API Gateway HTTP API, payload v2).
//!
//! The caller is the `sub` claim the JWT authorizer put in the request context: on AWS the HTTP
//! API's authorizer verifies the token; locally the runner verifies its own tokens and fills in
//! the same context, so this code cannot tell the two apart.
//!
//! [`ROUTES`] is the one route table: this handler matches requests on it, the local runner's
//! gateway declares exactly these routes to its authorizer, and a test checks that
//! `template.yaml` declares the same set of method + path on the HTTP API.
//!
//! Every error leaves as `{"error": "<stable code>", "message": "..."}`; the status for each
//! service error is decided in [`errors`], and nowhere else.

use crate::domain::{
    ActionId, ActionKind, IdError, Intent, IntentId, Millis, ReadKey, ReadValue, RoomId, SeatId,
    UserId,
};
use crate::domain::{Booking, BookingAnswer, BookingId, FlightId, IdempotencyKey, Inventory};
use crate::service::admin::{
    AdminIntentError, AdminSeatError, IntentAudit, ReconcileError, RedriveError, SeatState,
};
use crate::service::api::{
    CancelError, ConfirmError, CredentialError, PrepareError, ReadIntentError, WaitError,
};
use crate::service::flights::{BookError, CancelBookingError, CreateFlightError, ReadFlightError};
use crate::service::{ApiService, SeatReadError, Served};
use http::{Method, StatusCode};
use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use tracing::error;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// A failed request: status, stable code, human message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// Seconds for a `Retry-After` header, when the service knows when to come back.
    pub retry_after: Option<u64>,
    /// The `Allow` header of a 405: the methods the path does have (RFC 9110 requires it).
    pub allow: Option<String>,
}

impl Failure {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Failure {
            status,
            code,
            message: message.into(),
            retry_after: None,
            allow: None,
        }
    }

    pub fn with_retry_after(mut self, after: std::time::Duration) -> Self {
        // Whole seconds, rounded up and at least 1: "0" would invite an immediate retry.
        self.retry_after = Some(after.as_millis().div_ceil(1000).max(1) as u64);
        self
    }

    pub fn into_response(self) -> Response<Body> {
        let mut resp = respond(
            self.status,
            &json!({ "error": self.code, "message": self.message }),
        );
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(http::header::RETRY_AFTER, http::HeaderValue::from(secs));
        }
        if let Some(value) = self.allow.and_then(|a| http::HeaderValue::try_from(a).ok()) {
            resp.headers_mut().insert(http::header::ALLOW, value);
        }
        resp
    }
}

pub fn respond(status: StatusCode, body: &Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::Text(body.to_string()))
        .expect("static response parts are valid")
}

/// The one place that maps errors to HTTP statuses and codes.
pub mod errors {
    use super::*;
    use crate::ports::{QueueError, StoreError};

    pub fn unauthorized() -> Failure {
        Failure::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a valid bearer token is required",
        )
    }

    pub fn forbidden() -> Failure {
        Failure::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "this route needs the admin claim",
        )
    }

    pub fn route_not_found() -> Failure {
        Failure::new(StatusCode::NOT_FOUND, "route_not_found", "no such route")
    }

    /// `allowed`: the methods the path has, for the `Allow` header.
    pub fn method_not_allowed(allowed: &[&Method]) -> Failure {
        let allow = allowed
            .iter()
            .map(|m| m.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let mut failure = Failure::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!("method not allowed on this route; allowed: {allow}"),
        );
        failure.allow = Some(allow);
        failure
    }

    pub fn not_found(what: &str) -> Failure {
        Failure::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no such {what}"),
        )
    }

    pub fn invalid_json(detail: impl std::fmt::Display) -> Failure {
        Failure::new(
            StatusCode::BAD_REQUEST,
            "invalid_json",
            format!("request body is not the expected JSON: {detail}"),
        )
    }

    pub fn invalid_request(message: impl Into<String>) -> Failure {
        Failure::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    pub fn too_large() -> Failure {
        Failure::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("request body exceeds {MAX_BODY_BYTES} bytes"),
        )
    }

    pub fn invalid_id(e: &IdError) -> Failure {
        let code = match e.what() {
            "seat_id" => "invalid_seat_id",
            "room_id" => "invalid_room_id",
            "flight_id" => "invalid_flight_id",
            "intent_id" => "invalid_intent_id",
            "idempotency_key" => "invalid_idempotency_key",
            _ => "invalid_request",
        };
        Failure::new(StatusCode::BAD_REQUEST, code, e.to_string())
    }

    /// Store failures: retryable ones are 503 with a stable code (the client may retry; nothing
    /// was written), the rest 500 without internals.
    pub fn store(e: &StoreError) -> Failure {
        error!(error = %e, "store failure");
        if e.is_retryable() || matches!(e, StoreError::Unavailable(_)) {
            Failure::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "temporarily unavailable; retry shortly",
            )
        } else {
            Failure::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "internal error",
            )
        }
    }

    /// The per-user rate limit: 429 with when the user's window ends.
    pub fn rate_limited(message: String, retry_after: std::time::Duration) -> Failure {
        Failure::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", message)
            .with_retry_after(retry_after)
    }

    impl From<CredentialError> for Failure {
        fn from(e: CredentialError) -> Self {
            match e {
                CredentialError::Invalid { .. } => {
                    Failure::new(StatusCode::BAD_REQUEST, "invalid_credential", e.to_string())
                }
                CredentialError::Store(s) => store(&s),
            }
        }
    }

    impl From<PrepareError> for Failure {
        fn from(e: PrepareError) -> Self {
            match e {
                PrepareError::Store(s) => store(&s),
            }
        }
    }

    impl From<ConfirmError> for Failure {
        fn from(e: ConfirmError) -> Self {
            match e {
                ConfirmError::NotFound => not_found("action"),
                ConfirmError::Expired => {
                    Failure::new(StatusCode::GONE, "action_expired", e.to_string())
                }
                ConfirmError::RateLimited(after) => rate_limited(e.to_string(), after),
                ConfirmError::Store(s) => store(&s),
            }
        }
    }

    impl From<WaitError> for Failure {
        fn from(e: WaitError) -> Self {
            match e {
                WaitError::DeadlineInPast | WaitError::DeadlineTooFar { .. } => {
                    Failure::new(StatusCode::BAD_REQUEST, "invalid_until", e.to_string())
                }
                WaitError::RateLimited(after) => rate_limited(e.to_string(), after),
                WaitError::Store(s) => store(&s),
            }
        }
    }

    impl From<ReadIntentError> for Failure {
        fn from(e: ReadIntentError) -> Self {
            match e {
                ReadIntentError::NotFound => not_found("intent"),
                ReadIntentError::Store(s) => store(&s),
            }
        }
    }

    /// Seat reads. With nothing cached and the upstream unavailable (or its breaker open) the
    /// answer is a 503 that says when to come back.
    pub fn seat_read(e: SeatReadError, now: Millis) -> Failure {
        match e {
            SeatReadError::NoSuchRoom => {
                Failure::new(StatusCode::NOT_FOUND, "room_not_found", "no such room")
            }
            SeatReadError::Unavailable { retry_at } => Failure::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "upstream_unavailable",
                "the seat system is unavailable and no recent answer is cached; retry later",
            )
            .with_retry_after(retry_at.since(now)),
            SeatReadError::Store(s) => store(&s),
        }
    }

    impl From<CreateFlightError> for Failure {
        fn from(e: CreateFlightError) -> Self {
            match e {
                CreateFlightError::Invalid(_) => {
                    Failure::new(StatusCode::BAD_REQUEST, "invalid_flight", e.to_string())
                }
                CreateFlightError::Exists => {
                    Failure::new(StatusCode::CONFLICT, "flight_exists", e.to_string())
                }
                CreateFlightError::Store(s) => store(&s),
            }
        }
    }

    impl From<ReadFlightError> for Failure {
        fn from(e: ReadFlightError) -> Self {
            match e {
                ReadFlightError::NotFound => not_found("flight"),
                ReadFlightError::Store(s) => store(&s),
            }
        }
    }

    impl From<BookError> for Failure {
        fn from(e: BookError) -> Self {
            match e {
                BookError::HeadCount => {
                    Failure::new(StatusCode::BAD_REQUEST, "invalid_head_count", e.to_string())
                }
                BookError::KeyReused => Failure::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "idempotency_key_reused",
                    e.to_string(),
                ),
                BookError::InProgress => {
                    Failure::new(StatusCode::CONFLICT, "in_progress", e.to_string())
                }
                BookError::RateLimited(after) => rate_limited(e.to_string(), after),
                BookError::Store(s) => store(&s),
            }
        }
    }

    impl From<CancelBookingError> for Failure {
        fn from(e: CancelBookingError) -> Self {
            match e {
                CancelBookingError::NotFound => not_found("booking"),
                CancelBookingError::Store(s) => store(&s),
            }
        }
    }

    /// A booking request's answer: the same status and body every time it is given (a retry
    /// under its idempotency key gets exactly this again).
    pub fn booking_answer(answer: &BookingAnswer) -> Result<Response<Body>, Failure> {
        match answer {
            BookingAnswer::Booked { booking } => Ok(respond(
                StatusCode::CREATED,
                &json!({
                    "booking_id": booking.booking_id,
                    "flight_id": booking.flight_id,
                    "headCount": booking.head_count,
                }),
            )),
            BookingAnswer::SoldOut => Err(Failure::new(
                StatusCode::CONFLICT,
                "sold_out",
                "not enough seats left on this flight",
            )),
            BookingAnswer::LimitReached => Err(Failure::new(
                StatusCode::CONFLICT,
                "limit_reached",
                "this booking would pass the flight's per-user limit",
            )),
            BookingAnswer::NoSuchFlight => Err(not_found("flight")),
        }
    }

    impl From<AdminIntentError> for Failure {
        fn from(e: AdminIntentError) -> Self {
            match e {
                AdminIntentError::NotFound => not_found("intent"),
                AdminIntentError::Store(s) => store(&s),
            }
        }
    }

    /// Queue failures: the queue is throttling or unreachable, nothing is lost (a redrive that
    /// failed part way left the rest in the dead-letter queue), so 503 and call again.
    pub fn queue(e: &QueueError) -> Failure {
        error!(error = %e, "queue failure");
        Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "queue_unavailable",
            "the queues are temporarily unavailable; retry shortly",
        )
    }

    impl From<AdminSeatError> for Failure {
        fn from(e: AdminSeatError) -> Self {
            match e {
                AdminSeatError::Store(s) => store(&s),
                AdminSeatError::Queue(q) => queue(&q),
            }
        }
    }

    impl From<ReconcileError> for Failure {
        fn from(e: ReconcileError) -> Self {
            match e {
                ReconcileError::Store(s) => store(&s),
                ReconcileError::Unavailable(m) => {
                    error!(error = %m, "reaper pass failed");
                    Failure::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "reaper_unavailable",
                        "the reaper pass did not run; the schedule's next pass will, or retry shortly",
                    )
                }
            }
        }
    }

    impl From<RedriveError> for Failure {
        fn from(e: RedriveError) -> Self {
            match e {
                RedriveError::NotConfigured => Failure::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "queues_not_configured",
                    e.to_string(),
                ),
                RedriveError::InProgress { retry_after } => {
                    Failure::new(StatusCode::CONFLICT, "redrive_in_progress", e.to_string())
                        .with_retry_after(retry_after)
                }
                RedriveError::Store(s) => store(&s),
                RedriveError::Queue(q) => queue(&q),
            }
        }
    }

    impl From<CancelError> for Failure {
        fn from(e: CancelError) -> Self {
            match e {
                CancelError::NotFound => not_found("intent"),
                CancelError::NotCancellable(_) => {
                    Failure::new(StatusCode::CONFLICT, "not_cancellable", e.to_string())
                }
                CancelError::Store(s) => store(&s),
            }
        }
    }
}

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

fn body_json<T: for<'de> Deserialize<'de>>(req: &Request) -> Result<T, Failure> {
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
struct CredentialBody {
    upstream_token: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ActionBody {
    kind: String,
    seat_id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WaitBody {
    seat_id: String,
    until: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FlightBody {
    flight_id: String,
    #[serde(deserialize_with = "count::whole")]
    capacity: u32,
    #[serde(default, deserialize_with = "count::optional")]
    max_per_user: Option<u32>,
    #[serde(default, deserialize_with = "count::optional")]
    shards: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BookingBody {
    #[serde(rename = "headCount", deserialize_with = "count::whole")]
    head_count: u32,
}

/// Counts in request bodies. JSON has one number type, and JSON Schema's `integer` (what
/// docs/openapi.yaml promises) includes `9.0`, so a whole number is accepted however it is
/// written; a fraction, a negative number or one past `u32` is refused as before.
mod count {
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

fn flight_json(i: &Inventory) -> Value {
    json!({
        "flight_id": i.flight.flight_id,
        "capacity": i.flight.capacity,
        "available": i.available(),
        "max_per_user": i.flight.max_per_user,
        "shards": i.flight.shards,
    })
}

fn booking_json(b: &Booking) -> Value {
    json!({
        "booking_id": b.booking_id,
        "flight_id": b.flight_id,
        "headCount": b.head_count,
        "status": b.status.as_str(),
        "created_at": b.created_at.to_rfc3339(),
        "cancelled_at": b.cancelled_at.map(Millis::to_rfc3339),
    })
}

/// The `Idempotency-Key` header, if sent.
fn idempotency_key(req: &Request) -> Result<Option<IdempotencyKey>, Failure> {
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

fn reading_json(served: &Served) -> Value {
    let r = &served.reading;
    let mut body = match (&r.key, &r.value) {
        (ReadKey::Seat(seat_id), ReadValue::Seat { available }) => {
            json!({ "seat_id": seat_id, "available": available })
        }
        (ReadKey::Room(room_id), ReadValue::Room { seats }) => {
            json!({ "room_id": room_id, "seats": seats })
        }
        // A reading never pairs a key with another kind's value; say what was asked, nothing more.
        (ReadKey::Seat(seat_id), _) => json!({ "seat_id": seat_id }),
        (ReadKey::Room(room_id), _) => json!({ "room_id": room_id, "seats": [] }),
    };
    body["as_of"] = json!(r.as_of.to_rfc3339());
    body["stale"] = json!(served.stale);
    body
}

fn intent_json(intent: &Intent) -> Value {
    json!({
        "intent_id": intent.intent_id,
        "seat_id": intent.seat_id,
        "kind": intent.kind.as_str(),
        "status": intent.status.as_str(),
        "reason": intent.reason,
        "created_at": intent.created_at.to_rfc3339(),
        "updated_at": intent.updated_at.to_rfc3339(),
    })
}

/// `GET /admin/intents/{intent_id}`: the intent, its consent and its history.
fn intent_audit_json(a: &IntentAudit) -> Value {
    let i = &a.intent;
    json!({
        "intent": {
            "intent_id": i.intent_id,
            "user_id": i.user_id,
            "seat_id": i.seat_id,
            "kind": i.kind.as_str(),
            "status": i.status.as_str(),
            "reason": i.reason,
            "version": i.version,
            "fencing_token": i.fencing_token,
            "attempts": i.attempts,
            "created_at": i.created_at.to_rfc3339(),
            "updated_at": i.updated_at.to_rfc3339(),
        },
        "consent": a.consent.as_ref().map(|c| json!({
            "user_id": c.user_id,
            "seat_id": c.seat_id,
            "kind": c.kind.as_str(),
            "action_id": c.action_id,
            "consented_at": c.consented_at.to_rfc3339(),
        })),
        "history": a.history.iter().map(|r| json!({
            "version": r.version,
            "at": r.at.to_rfc3339(),
            "from": r.from.map(|s| s.as_str()),
            "to": r.to.as_str(),
            "fencing_token": r.fencing_token,
            "reason": r.reason,
        })).collect::<Vec<_>>(),
    })
}

/// `GET /admin/seats/{seat_id}`: hold, suppression, last reading and the intent behind them.
fn seat_state_json(s: &SeatState) -> Value {
    json!({
        "seat_id": s.seat_id,
        "hold": s.hold.as_ref().map(|h| json!({
            "intent_id": h.intent_id,
            "since": h.since.to_rfc3339(),
        })),
        "suppression": s.suppression.as_ref().map(|x| json!({
            "intent_id": x.intent_id,
            "until": x.until.to_rfc3339(),
        })),
        "reading": s.reading.as_ref().map(|r| json!({
            "available": matches!(r.value, ReadValue::Seat { available: true }),
            "as_of": r.as_of.to_rfc3339(),
        })),
        "last_intent": s.last_intent.as_ref().map(|i| json!({
            "intent_id": i.intent_id,
            "status": i.status.as_str(),
            "reason": i.reason,
            "updated_at": i.updated_at.to_rfc3339(),
        })),
        "queue": s.queue,
    })
}

/// What a route does; each [`RouteSpec`] names one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operation {
    PutCredential,
    PrepareAction,
    Confirm,
    RegisterWait,
    GetIntent,
    CancelIntent,
    GetSeat,
    GetRoomSeats,
    CreateFlight,
    GetFlight,
    Book,
    MyBookings,
    CancelBooking,
    AdminIntent,
    AdminSeat,
    Reconcile,
    Redrive,
}

/// One route of the HTTP API: a method and a path template whose `{name}` segments are path
/// parameters, written as API Gateway writes route keys.
#[derive(Debug)]
pub struct RouteSpec {
    pub method: Method,
    pub path: &'static str,
    operation: Operation,
}

impl RouteSpec {
    /// The API Gateway route key, e.g. `POST /actions/{action_id}/confirm`.
    pub fn key(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

const fn route(method: Method, path: &'static str, operation: Operation) -> RouteSpec {
    RouteSpec {
        method,
        path,
        operation,
    }
}

/// Every route the API serves. (`POST /dev/token` is the local runner's own, outside the API.)
pub const ROUTES: &[RouteSpec] = &[
    route(Method::PUT, "/me/credential", Operation::PutCredential),
    route(Method::POST, "/actions", Operation::PrepareAction),
    route(
        Method::POST,
        "/actions/{action_id}/confirm",
        Operation::Confirm,
    ),
    route(Method::POST, "/waits", Operation::RegisterWait),
    route(Method::GET, "/intents/{intent_id}", Operation::GetIntent),
    route(
        Method::DELETE,
        "/intents/{intent_id}",
        Operation::CancelIntent,
    ),
    route(Method::GET, "/seats/{seat_id}", Operation::GetSeat),
    route(
        Method::GET,
        "/rooms/{room_id}/seats",
        Operation::GetRoomSeats,
    ),
    route(Method::POST, "/admin/flights", Operation::CreateFlight),
    route(Method::GET, "/flights/{flight_id}", Operation::GetFlight),
    route(
        Method::POST,
        "/flights/{flight_id}/bookings",
        Operation::Book,
    ),
    route(Method::GET, "/me/bookings", Operation::MyBookings),
    route(
        Method::DELETE,
        "/flights/{flight_id}/bookings/{booking_id}",
        Operation::CancelBooking,
    ),
    route(
        Method::GET,
        "/admin/intents/{intent_id}",
        Operation::AdminIntent,
    ),
    route(Method::GET, "/admin/seats/{seat_id}", Operation::AdminSeat),
    route(Method::POST, "/admin/reconcile", Operation::Reconcile),
    route(
        Method::POST,
        "/admin/dead-letters/redrive",
        Operation::Redrive,
    ),
];

/// A request matched to its route, with its path parameters by name.
#[derive(Debug)]
pub struct Matched {
    pub route: &'static RouteSpec,
    pub params: HashMap<&'static str, String>,
}

impl Matched {
    fn param(&self, name: &str) -> &str {
        self.params.get(name).map_or("", String::as_str)
    }
}

fn path_params(template: &'static str, path: &str) -> Option<HashMap<&'static str, String>> {
    let parts: Vec<&'static str> = template.trim_matches('/').split('/').collect();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    if parts.len() != segments.len() {
        return None;
    }
    let mut params = HashMap::new();
    for (part, segment) in parts.into_iter().zip(segments) {
        match part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
            Some(name) if !segment.is_empty() => {
                params.insert(name, segment.to_owned());
            }
            Some(_) => return None,
            None if part == segment => {}
            None => return None,
        }
    }
    Some(params)
}

/// The route `method` + `path` names: `404 route_not_found` when no route has that path,
/// `405 method_not_allowed` (with `Allow`) when some route has it with another method.
pub fn match_route(method: &Method, path: &str) -> Result<Matched, Failure> {
    let mut allowed = Vec::new();
    for route in ROUTES {
        if let Some(params) = path_params(route.path, path) {
            if route.method == *method {
                return Ok(Matched { route, params });
            }
            allowed.push(&route.method);
        }
    }
    Err(if allowed.is_empty() {
        errors::route_not_found()
    } else {
        errors::method_not_allowed(&allowed)
    })
}

/// Handles one API request. Never fails: every error becomes a JSON error response.
pub async fn handle(api: &ApiService, req: Request) -> Response<Body> {
    match dispatch(api, &req).await {
        Ok(resp) => resp,
        Err(failure) => failure.into_response(),
    }
}

async fn dispatch(api: &ApiService, req: &Request) -> Result<Response<Body>, Failure> {
    let matched = match_route(req.method(), req.uri().path())?;
    let caller = caller(req).ok_or_else(errors::unauthorized)?;
    let user = &caller.user_id;
    match matched.route.operation {
        Operation::PutCredential => {
            let body: CredentialBody = body_json(req)?;
            api.put_credential(user, &body.upstream_token).await?;
            Ok(Response::builder()
                .status(StatusCode::NO_CONTENT)
                .body(Body::Empty)
                .expect("static response parts are valid"))
        }
        Operation::PrepareAction => {
            let body: ActionBody = body_json(req)?;
            let kind = ActionKind::parse(&body.kind).ok_or_else(|| {
                Failure::new(
                    StatusCode::BAD_REQUEST,
                    "unknown_kind",
                    format!("unknown action kind {:?}; known: reserve_seat", body.kind),
                )
            })?;
            let seat_id = SeatId::parse(&body.seat_id).map_err(|e| errors::invalid_id(&e))?;
            let action = api.prepare(user, kind, seat_id).await?;
            Ok(respond(
                StatusCode::CREATED,
                &json!({
                    "action_id": action.action_id,
                    "kind": action.kind.as_str(),
                    "seat_id": action.seat_id,
                    "expires_at": action.expires_at.to_rfc3339(),
                }),
            ))
        }
        Operation::Confirm => {
            let action_id = ActionId::parse(matched.param("action_id"))
                .map_err(|_| errors::not_found("action"))?;
            let confirmed = api.confirm(user, &action_id).await?;
            let status = if confirmed.created {
                StatusCode::ACCEPTED
            } else {
                StatusCode::OK
            };
            Ok(respond(
                status,
                &json!({
                    "intent_id": confirmed.intent.intent_id,
                    "status": confirmed.intent.status.as_str(),
                }),
            ))
        }
        Operation::RegisterWait => {
            let body: WaitBody = body_json(req)?;
            let seat_id = SeatId::parse(&body.seat_id).map_err(|e| errors::invalid_id(&e))?;
            let until = Millis::parse_rfc3339(&body.until).ok_or_else(|| {
                Failure::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_until",
                    "until must be an RFC 3339 timestamp",
                )
            })?;
            let intent = api.register_wait(user, seat_id, until).await?;
            Ok(respond(
                StatusCode::ACCEPTED,
                &json!({ "intent_id": intent.intent_id, "status": intent.status.as_str() }),
            ))
        }
        Operation::GetIntent => {
            let intent_id = IntentId::parse(matched.param("intent_id"))
                .map_err(|_| errors::not_found("intent"))?;
            let intent = api.intent(user, &intent_id).await?;
            Ok(respond(StatusCode::OK, &intent_json(&intent)))
        }
        Operation::CancelIntent => {
            let intent_id = IntentId::parse(matched.param("intent_id"))
                .map_err(|_| errors::not_found("intent"))?;
            let intent = api.cancel_wait(user, &intent_id).await?;
            Ok(respond(StatusCode::OK, &intent_json(&intent)))
        }
        Operation::GetSeat => {
            let seat_id =
                SeatId::parse(matched.param("seat_id")).map_err(|e| errors::invalid_id(&e))?;
            let served = api
                .seat(&seat_id)
                .await
                .map_err(|e| errors::seat_read(e, api.now()))?;
            Ok(respond(StatusCode::OK, &reading_json(&served)))
        }
        Operation::CreateFlight => {
            if !caller.admin {
                return Err(errors::forbidden());
            }
            let body: FlightBody = body_json(req)?;
            let flight_id = FlightId::parse(&body.flight_id).map_err(|e| errors::invalid_id(&e))?;
            let created = api
                .flights()
                .create(
                    flight_id,
                    body.capacity,
                    body.max_per_user,
                    body.shards.unwrap_or(1),
                )
                .await?;
            Ok(respond(StatusCode::CREATED, &flight_json(&created)))
        }
        Operation::GetFlight => {
            let flight_id = FlightId::parse(matched.param("flight_id"))
                .map_err(|_| errors::not_found("flight"))?;
            let inventory = api.flights().inventory(&flight_id).await?;
            Ok(respond(
                StatusCode::OK,
                &json!({
                    "flight_id": inventory.flight.flight_id,
                    "capacity": inventory.flight.capacity,
                    "available": inventory.available(),
                }),
            ))
        }
        Operation::Book => {
            let flight_id = FlightId::parse(matched.param("flight_id"))
                .map_err(|_| errors::not_found("flight"))?;
            let key = idempotency_key(req)?;
            let body: BookingBody = body_json(req)?;
            let answer = api
                .flights()
                .book(user, &flight_id, body.head_count, key.as_ref())
                .await?;
            errors::booking_answer(&answer)
        }
        Operation::MyBookings => {
            let bookings = api
                .flights()
                .bookings_of(user)
                .await
                .map_err(|e| errors::store(&e))?;
            let list: Vec<Value> = bookings.iter().map(booking_json).collect();
            Ok(respond(StatusCode::OK, &json!({ "bookings": list })))
        }
        Operation::CancelBooking => {
            let not_found = || errors::not_found("booking");
            let flight_id = FlightId::parse(matched.param("flight_id")).map_err(|_| not_found())?;
            let booking_id =
                BookingId::parse(matched.param("booking_id")).map_err(|_| not_found())?;
            let booking = api.flights().cancel(user, &flight_id, &booking_id).await?;
            Ok(respond(StatusCode::OK, &booking_json(&booking)))
        }
        Operation::AdminIntent => {
            if !caller.admin {
                return Err(errors::forbidden());
            }
            let intent_id =
                IntentId::parse(matched.param("intent_id")).map_err(|e| errors::invalid_id(&e))?;
            let audit = api.admin().intent(&intent_id).await?;
            Ok(respond(StatusCode::OK, &intent_audit_json(&audit)))
        }
        Operation::AdminSeat => {
            if !caller.admin {
                return Err(errors::forbidden());
            }
            let seat_id =
                SeatId::parse(matched.param("seat_id")).map_err(|e| errors::invalid_id(&e))?;
            let state = api.admin().seat(&seat_id).await?;
            Ok(respond(StatusCode::OK, &seat_state_json(&state)))
        }
        Operation::Reconcile => {
            if !caller.admin {
                return Err(errors::forbidden());
            }
            let report = api.admin().reconcile().await?;
            Ok(respond(StatusCode::OK, &json!(report)))
        }
        Operation::Redrive => {
            if !caller.admin {
                return Err(errors::forbidden());
            }
            let moved = api.admin().redrive().await?;
            Ok(respond(StatusCode::OK, &json!(moved)))
        }
        Operation::GetRoomSeats => {
            let room_id =
                RoomId::parse(matched.param("room_id")).map_err(|e| errors::invalid_id(&e))?;
            let served = api
                .room(&room_id)
                .await
                .map_err(|e| errors::seat_read(e, api.now()))?;
            Ok(respond(StatusCode::OK, &reading_json(&served)))
        }
    }
}
