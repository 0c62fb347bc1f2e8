//! The HTTP face of the simulator: `/api/*` as the fragile upstream, `/__admin/*` for tests.
//!
//! Every `/api` handler follows the same order: count the call and roll the faults in one short
//! lock ([`Simulator::admit`]), sleep the injected latency with no lock held, then either answer the
//! injected failure or do the work in a second short lock. Bodies are parsed by hand rather than
//! with axum's `Json` extractor so that every malformed body is a plain `400`, as the real
//! upstream answers, instead of axum's mix of 400/415/422.

use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::connect_info::ConnectInfo;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::json;

use crate::Simulator;
use crate::conn::ConnectionKill;
use crate::world::{Faults, Refusal, ReserveError, RetryAfterForm, Route};

pub(crate) fn router(sim: Simulator) -> Router {
    Router::new()
        .route("/api/seats/{seat_id}", get(read_seat))
        .route("/api/rooms/{room_id}/seats", get(read_room))
        .route("/api/reservations", post(reserve))
        .route("/api/reservations/current", delete(release))
        .route("/api/charge", get(read_charge))
        .route("/__admin/stats", get(admin_stats))
        .route("/__admin/faults", post(admin_faults))
        .route("/__admin/reset", post(admin_reset))
        .route("/__admin/users", post(admin_users))
        .route("/__admin/rooms", post(admin_rooms))
        .route("/__admin/calls", get(admin_calls))
        .with_state(sim)
}

/// Every non-success answer of the `/api` routes. Kept small (unlike `Response`) so handlers can
/// use `?`, and in one place so the wire codes cannot drift apart between routes.
#[derive(Debug)]
enum ApiError {
    Refused(Refusal),
    Unauthorized,
    BadRequest,
    SeatTaken,
    AlreadyCharged,
    NoCharge,
    NoRoom,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = match self {
            ApiError::Refused(Refusal::RateLimited {
                retry_after_secs,
                form,
            }) => {
                return busy(
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate_limited",
                    retry_after_secs,
                    form,
                );
            }
            ApiError::Refused(Refusal::Outage {
                retry_after: Some((secs, form)),
            }) => return busy(StatusCode::SERVICE_UNAVAILABLE, "outage", secs, form),
            ApiError::Refused(Refusal::Outage { retry_after: None }) => {
                (StatusCode::SERVICE_UNAVAILABLE, "outage")
            }
            ApiError::Refused(Refusal::Injected) => (StatusCode::SERVICE_UNAVAILABLE, "injected"),
            ApiError::Unauthorized => (StatusCode::UNAUTHORIZED, "unauthorized"),
            ApiError::BadRequest => (StatusCode::BAD_REQUEST, "bad_request"),
            ApiError::SeatTaken => (StatusCode::CONFLICT, "seat_taken"),
            ApiError::AlreadyCharged => (StatusCode::CONFLICT, "already_charged"),
            ApiError::NoCharge => (StatusCode::NOT_FOUND, "no_charge"),
            ApiError::NoRoom => (StatusCode::NOT_FOUND, "room_not_found"),
        };
        (status, Json(json!({ "error": code }))).into_response()
    }
}

/// A busy answer with its `Retry-After`: delta-seconds, or the time to come back as an HTTP
/// date with the answer's own `Date` beside it (so a client can take the difference on the
/// upstream's clock).
fn busy(status: StatusCode, code: &str, secs: u64, form: RetryAfterForm) -> Response {
    let retry_after = match form {
        RetryAfterForm::Seconds => secs.to_string(),
        RetryAfterForm::HttpDate => {
            let now = std::time::SystemTime::now();
            let at = httpdate::fmt_http_date(now + std::time::Duration::from_secs(secs));
            return (
                status,
                [
                    (header::RETRY_AFTER, at),
                    (header::DATE, httpdate::fmt_http_date(now)),
                ],
                Json(json!({ "error": code })),
            )
                .into_response();
        }
    };
    (
        status,
        [(header::RETRY_AFTER, retry_after)],
        Json(json!({ "error": code })),
    )
        .into_response()
}

type ApiResult = Result<Response, ApiError>;

/// The bearer credential, if the header is well formed. The scheme is case-insensitive per RFC 7235.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, credential) = value.split_once(' ')?;
    let credential = credential.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !credential.is_empty()).then_some(credential)
}

impl Simulator {
    /// Counts the call and applies latency, outage and error injection. On `Err` the caller must
    /// answer it and do nothing else.
    async fn admit(&self, route: Route) -> Result<(), ApiError> {
        let admission = self.lock().admit(route, Instant::now());
        if !admission.delay.is_zero() {
            tokio::time::sleep(admission.delay).await;
        }
        admission
            .refusal
            .map_or(Ok(()), |r| Err(ApiError::Refused(r)))
    }

    fn caller(&self, headers: &HeaderMap) -> Result<String, ApiError> {
        let credential = bearer(headers).ok_or(ApiError::Unauthorized)?;
        self.lock()
            .authenticate(credential)
            .ok_or(ApiError::Unauthorized)
    }
}

async fn read_seat(State(sim): State<Simulator>, Path(seat_id): Path<String>) -> ApiResult {
    sim.admit(Route::Seats).await?;
    let occupied = sim.occupant(&seat_id).is_some();
    Ok(Json(json!({ "seat_id": seat_id, "occupied": occupied })).into_response())
}

async fn read_room(State(sim): State<Simulator>, Path(room_id): Path<String>) -> ApiResult {
    sim.admit(Route::Rooms).await?;
    let seats = sim.lock().room(&room_id).ok_or(ApiError::NoRoom)?;
    let seats: Vec<_> = seats
        .into_iter()
        .map(|(seat_id, occupied)| json!({ "seat_id": seat_id, "occupied": occupied }))
        .collect();
    Ok(Json(json!({ "room_id": room_id, "seats": seats })).into_response())
}

#[derive(Deserialize)]
struct ReserveBody {
    seat_id: String,
}

async fn reserve(
    State(sim): State<Simulator>,
    connection: Option<Extension<ConnectInfo<ConnectionKill>>>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult {
    sim.admit(Route::Reserve).await?;
    let user_id = sim.caller(&headers)?;
    let seat_id = match serde_json::from_slice::<ReserveBody>(&body) {
        Ok(body) if !body.seat_id.is_empty() => body.seat_id,
        _ => return Err(ApiError::BadRequest),
    };
    let outcome = sim.lock().reserve(&user_id, &seat_id);
    let reserved = outcome.map_err(|refused| {
        tracing::debug!(%user_id, %seat_id, ?refused, "reserve refused");
        match refused {
            ReserveError::SeatTaken => ApiError::SeatTaken,
            ReserveError::AlreadyCharged => ApiError::AlreadyCharged,
        }
    })?;
    let charge_id = &reserved.charge.charge_id;
    if reserved.drop_response {
        tracing::info!(%user_id, %seat_id, %charge_id, "reserved; dropping the response on purpose");
        match connection {
            Some(Extension(ConnectInfo(connection))) => connection.kill(),
            // Served by someone else's server (a bare `router()`), there is no connection to
            // kill; never answering is the next best thing, and the caller's timeout ends it.
            None => std::future::pending::<()>().await,
        }
    } else {
        tracing::info!(%user_id, %seat_id, %charge_id, "reserved");
    }
    Ok((StatusCode::CREATED, Json(reserved.charge)).into_response())
}

async fn read_charge(State(sim): State<Simulator>, headers: HeaderMap) -> ApiResult {
    sim.admit(Route::Charge).await?;
    let user_id = sim.caller(&headers)?;
    let charge = sim.lock().charge(&user_id).ok_or(ApiError::NoCharge)?;
    Ok(Json(charge).into_response())
}

async fn release(State(sim): State<Simulator>, headers: HeaderMap) -> ApiResult {
    sim.admit(Route::Release).await?;
    let user_id = sim.caller(&headers)?;
    let charge = sim.lock().release(&user_id).ok_or(ApiError::NoCharge)?;
    tracing::info!(%user_id, seat_id = %charge.seat_id, "released");
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn admin_stats(State(sim): State<Simulator>) -> Response {
    Json(sim.stats()).into_response()
}

async fn admin_faults(State(sim): State<Simulator>, body: Bytes) -> Response {
    match serde_json::from_slice::<Faults>(&body) {
        Ok(faults) => {
            tracing::info!(?faults, "faults set");
            sim.set_faults(faults);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(_) => ApiError::BadRequest.into_response(),
    }
}

async fn admin_reset(State(sim): State<Simulator>) -> Response {
    sim.reset();
    tracing::info!("reset");
    StatusCode::NO_CONTENT.into_response()
}

#[derive(Deserialize)]
struct UsersBody {
    users: Vec<UserEntry>,
}

#[derive(Deserialize)]
struct UserEntry {
    user_id: String,
    credential: String,
}

async fn admin_users(State(sim): State<Simulator>, body: Bytes) -> Response {
    let Ok(body) = serde_json::from_slice::<UsersBody>(&body) else {
        return ApiError::BadRequest.into_response();
    };
    {
        let mut world = sim.lock();
        for user in &body.users {
            world.register(&user.user_id, &user.credential);
        }
    }
    // Only the count: credentials never reach the logs.
    tracing::info!(count = body.users.len(), "users registered");
    StatusCode::NO_CONTENT.into_response()
}

#[derive(Deserialize)]
struct RoomsBody {
    rooms: Vec<RoomEntry>,
}

#[derive(Deserialize)]
struct RoomEntry {
    room_id: String,
    seats: Vec<String>,
}

async fn admin_rooms(State(sim): State<Simulator>, body: Bytes) -> Response {
    let Ok(body) = serde_json::from_slice::<RoomsBody>(&body) else {
        return ApiError::BadRequest.into_response();
    };
    let mut world = sim.lock();
    for room in body.rooms {
        world.put_room(&room.room_id, room.seats);
    }
    StatusCode::NO_CONTENT.into_response()
}

#[derive(Deserialize)]
struct CallsQuery {
    #[serde(default)]
    since_ms: u64,
}

async fn admin_calls(
    State(sim): State<Simulator>,
    axum::extract::Query(q): axum::extract::Query<CallsQuery>,
) -> Response {
    Json(json!({ "calls": sim.lock().calls_since(q.since_ms) })).into_response()
}
