//! The one place that maps errors to HTTP statuses and stable codes, and the JSON error body
//! every failure leaves as: `{"error": "<stable code>", "message": "..."}`, with `Retry-After`
//! or `Allow` where the status calls for them.

use crate::domain::IdError;
use crate::service::admin::{
    AdminIntentError, AdminQueuesError, AdminSeatError, ReconcileError, RedriveError,
};
use crate::service::api::{
    CancelError, ConfirmError, CredentialError, PrepareError, ReadIntentError, ReadSeatError,
    WaitError,
};
use crate::service::checkout::HoldError;
use crate::service::flights::{BookError, CancelBookingError, CreateFlightError, ReadFlightError};
use crate::service::waitlist::WaitlistRequestError;
use http::{Method, StatusCode};
use lambda_http::{Body, Response};
use serde_json::{Value, json};
use tracing::error;

use super::MAX_BODY_BYTES;

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

pub fn invalid_cursor() -> Failure {
    Failure::new(
        StatusCode::BAD_REQUEST,
        "invalid_cursor",
        "cursor is not one this listing handed out; start without it",
    )
}

pub fn invalid_status() -> Failure {
    Failure::new(
        StatusCode::BAD_REQUEST,
        "invalid_status",
        "status must be one of HELD, CONFIRMED, RELEASED, LAPSED",
    )
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
impl From<ReadSeatError> for Failure {
    fn from(e: ReadSeatError) -> Self {
        match e {
            ReadSeatError::NoSuchRoom => {
                Failure::new(StatusCode::NOT_FOUND, "room_not_found", "no such room")
            }
            ReadSeatError::Unavailable { retry_after } => Failure::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "upstream_unavailable",
                "the seat system is unavailable and no recent answer is cached; retry later",
            )
            .with_retry_after(retry_after),
            ReadSeatError::Store(s) => store(&s),
        }
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

/// A booking's or a hold's refusals (`render::booking_answer` picks one per answer): each a 409
/// with its own code.
pub fn sold_out() -> Failure {
    Failure::new(
        StatusCode::CONFLICT,
        "sold_out",
        "not enough seats left on this flight",
    )
}

pub fn limit_reached() -> Failure {
    Failure::new(
        StatusCode::CONFLICT,
        "limit_reached",
        "this booking would pass the flight's per-user limit",
    )
}

pub fn hold_exists() -> Failure {
    Failure::new(
        StatusCode::CONFLICT,
        "hold_exists",
        "you already hold seats on this flight; confirm or release that hold first",
    )
}

pub fn unknown_kind(kind: &str) -> Failure {
    Failure::new(
        StatusCode::BAD_REQUEST,
        "unknown_kind",
        format!("unknown action kind {kind:?}; known: reserve_seat"),
    )
}

pub fn invalid_until() -> Failure {
    Failure::new(
        StatusCode::BAD_REQUEST,
        "invalid_until",
        "until must be an RFC 3339 timestamp",
    )
}

pub fn invalid_flight(message: String) -> Failure {
    Failure::new(StatusCode::BAD_REQUEST, "invalid_flight", message)
}

impl From<HoldError> for Failure {
    fn from(e: HoldError) -> Self {
        match e {
            HoldError::NotFound => not_found("hold"),
            HoldError::Expired => Failure::new(StatusCode::GONE, "hold_expired", e.to_string()),
            HoldError::Released => {
                Failure::new(StatusCode::CONFLICT, "hold_released", e.to_string())
            }
            HoldError::Confirmed => {
                Failure::new(StatusCode::CONFLICT, "hold_confirmed", e.to_string())
            }
            HoldError::NotExtendable => {
                Failure::new(StatusCode::CONFLICT, "hold_not_extendable", e.to_string())
            }
            HoldError::Store(s) => store(&s),
        }
    }
}

impl From<WaitlistRequestError> for Failure {
    fn from(e: WaitlistRequestError) -> Self {
        let message = e.to_string();
        match e {
            WaitlistRequestError::HeadCount => {
                Failure::new(StatusCode::BAD_REQUEST, "invalid_head_count", message)
            }
            WaitlistRequestError::NoSuchFlight => not_found("flight"),
            WaitlistRequestError::NotFound => not_found("waiting-list entry"),
            WaitlistRequestError::SeatsAvailable => {
                Failure::new(StatusCode::CONFLICT, "seats_available", message)
            }
            WaitlistRequestError::AlreadyWaiting => {
                Failure::new(StatusCode::CONFLICT, "already_waiting", message)
            }
            WaitlistRequestError::LimitReached => {
                Failure::new(StatusCode::CONFLICT, "limit_reached", message)
            }
            WaitlistRequestError::Offered => {
                Failure::new(StatusCode::CONFLICT, "offer_made", message)
            }
            WaitlistRequestError::RateLimited(after) => rate_limited(message, after),
            WaitlistRequestError::Store(s) => store(&s),
        }
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

impl From<AdminQueuesError> for Failure {
    fn from(e: AdminQueuesError) -> Self {
        match e {
            AdminQueuesError::NotConfigured => Failure::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "queues_not_configured",
                e.to_string(),
            ),
            AdminQueuesError::Queue(q) => queue(&q),
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
