//! The baselines' HTTP front: seatgate's flash-sale routes on axum, behind the runner's JWT
//! check, over any [`Inventory`].
//!
//! It serves exactly what the flash-sale driver calls (`POST /dev/token`, `POST /admin/flights`,
//! `POST /flights/{id}/bookings`, `GET /flights/{id}`, `GET /me/bookings`) with the same
//! status codes and JSON shapes, and verifies tokens with [`TokenAuthority`] as
//! `infra/local/src/gateway.rs` does, so a comparison measures the inventory strategy and not a
//! lighter HTTP path. `GET /me/bookings` answers every booking on one page (`next_cursor`
//! null): the driver reads only the first page.

use super::{Booked, BookingRow, Inventory, StoreError};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use seatgate::domain::{Secret, UserId};
use seatgate_local::auth::{Claims, TokenAuthority};
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::task::JoinHandle;

struct App<S> {
    store: S,
    auth: TokenAuthority,
}

/// A baseline serving on 127.0.0.1; stopped when dropped.
pub(crate) struct BaselineServer {
    pub(crate) url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Drop for BaselineServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // In-flight requests of a finished measurement are not worth waiting for.
        self.task.abort();
    }
}

/// Serves `store` on a fresh loopback port, with a fresh random token key.
pub(crate) async fn serve<S: Inventory>(store: S) -> anyhow::Result<BaselineServer> {
    let key = Secret::new(uuid::Uuid::new_v4().simple().to_string());
    let app = Arc::new(App {
        store,
        auth: TokenAuthority::new(&key)?,
    });
    let router = Router::new()
        .route("/dev/token", post(issue_token::<S>))
        .route("/admin/flights", post(create_flight::<S>))
        .route("/flights/{id}", get(get_flight::<S>))
        .route("/flights/{id}/bookings", post(book::<S>))
        .route("/me/bookings", get(my_bookings::<S>))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "route_not_found") })
        .with_state(app);
    BaselineServer::spawn(router).await
}

impl BaselineServer {
    /// Serves `router` on a fresh loopback port until dropped (every baseline app goes through
    /// here, so each one listens on 127.0.0.1 only and stops with its handle).
    pub(super) async fn spawn(router: Router) -> anyhow::Result<BaselineServer> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
        Ok(BaselineServer {
            url,
            stop: Some(tx),
            task,
        })
    }
}

pub(super) fn error(status: StatusCode, code: &str) -> Response {
    (
        status,
        axum::Json(json!({ "error": code, "message": code })),
    )
        .into_response()
}

/// Store failures printed per process; the rest are only counted by the driver (a saturated
/// baseline can fail thousands of requests a second).
const FAILURES_PRINTED: u64 = 5;
static FAILURES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn store_failure(e: StoreError) -> Response {
    let n = FAILURES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (status, code, why) = match e {
        StoreError::Busy(why) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable", why),
        StoreError::Other(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("{e:#}"),
        ),
    };
    if n < FAILURES_PRINTED {
        eprintln!("baseline: {status}: {why}");
    }
    error(status, code)
}

/// A refusal before the store is asked: its status and error code.
pub(super) type Refusal = (StatusCode, &'static str);

fn claims<S>(app: &App<S>, headers: &HeaderMap) -> Result<Claims, Refusal> {
    verify(&app.auth, headers)
}

/// The runner's bearer check, as every baseline app runs it before anything else.
pub(super) fn verify(auth: &TokenAuthority, headers: &HeaderMap) -> Result<Claims, Refusal> {
    let header = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    auth.verify_header(header)
        .map_err(|_| (StatusCode::UNAUTHORIZED, "unauthorized"))
}

pub(super) fn parse(body: &Bytes) -> Result<Value, Refusal> {
    serde_json::from_slice(body).map_err(|_| (StatusCode::BAD_REQUEST, "invalid_json"))
}

async fn issue_token<S: Inventory>(State(app): State<Arc<App<S>>>, body: Bytes) -> Response {
    token_answer(&app.auth, &body)
}

/// `POST /dev/token`'s answer: a token for `sub`, with the admin claim when asked.
pub(super) fn token_answer(auth: &TokenAuthority, body: &Bytes) -> Response {
    let v = match parse(body) {
        Ok(v) => v,
        Err((status, code)) => return error(status, code),
    };
    let Some(user) = v["sub"].as_str().and_then(|s| UserId::parse(s).ok()) else {
        return error(StatusCode::BAD_REQUEST, "invalid_request");
    };
    match auth.issue(&user, v["admin"] == true) {
        Ok(token) => (StatusCode::OK, axum::Json(json!({ "token": token }))).into_response(),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal"),
    }
}

async fn create_flight<S: Inventory>(
    State(app): State<Arc<App<S>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let who = match claims(&app, &headers) {
        Ok(c) => c,
        Err((status, code)) => return error(status, code),
    };
    if !who.admin {
        return error(StatusCode::FORBIDDEN, "forbidden");
    }
    let v = match parse(&body) {
        Ok(v) => v,
        Err((status, code)) => return error(status, code),
    };
    let (Some(id), Some(capacity)) = (v["flight_id"].as_str(), v["capacity"].as_i64()) else {
        return error(StatusCode::BAD_REQUEST, "invalid_flight");
    };
    if id.is_empty() || id.len() > 64 || !(1..=10_000_000).contains(&capacity) {
        return error(StatusCode::BAD_REQUEST, "invalid_flight");
    }
    match app.store.create_flight(id, capacity).await {
        Ok(true) => (
            StatusCode::CREATED,
            axum::Json(json!({
                "flight_id": id, "capacity": capacity, "available": capacity,
                "max_per_user": null, "shards": 1,
            })),
        )
            .into_response(),
        Ok(false) => error(StatusCode::CONFLICT, "flight_exists"),
        Err(e) => store_failure(e),
    }
}

async fn get_flight<S: Inventory>(
    State(app): State<Arc<App<S>>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Err((status, code)) = claims(&app, &headers) {
        return error(status, code);
    }
    match app.store.flight(&id).await {
        Ok(Some((capacity, available))) => axum::Json(json!({
            "flight_id": id, "capacity": capacity, "available": available,
        }))
        .into_response(),
        Ok(None) => error(StatusCode::NOT_FOUND, "not_found"),
        Err(e) => store_failure(e),
    }
}

async fn book<S: Inventory>(
    State(app): State<Arc<App<S>>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let who = match claims(&app, &headers) {
        Ok(c) => c,
        Err((status, code)) => return error(status, code),
    };
    let v = match parse(&body) {
        Ok(v) => v,
        Err((status, code)) => return error(status, code),
    };
    let Some(k) = v["headCount"].as_i64().filter(|k| (1..=9).contains(k)) else {
        return error(StatusCode::BAD_REQUEST, "invalid_head_count");
    };
    match app.store.book(&id, &who.sub, k).await {
        Ok(Booked::Created(booking_id)) => (
            StatusCode::CREATED,
            axum::Json(json!({ "booking_id": booking_id, "flight_id": id, "headCount": k })),
        )
            .into_response(),
        Ok(Booked::SoldOut) => error(StatusCode::CONFLICT, "sold_out"),
        Ok(Booked::Conflict) => error(StatusCode::CONFLICT, "conflict"),
        Err(e) => store_failure(e),
    }
}

fn rfc3339(ms: i64) -> Value {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .map_or(Value::Null, Value::String)
}

async fn my_bookings<S: Inventory>(State(app): State<Arc<App<S>>>, headers: HeaderMap) -> Response {
    let who = match claims(&app, &headers) {
        Ok(c) => c,
        Err((status, code)) => return error(status, code),
    };
    match app.store.bookings(&who.sub).await {
        Ok(rows) => {
            let list: Vec<Value> = rows
                .iter()
                .map(|b: &BookingRow| {
                    json!({
                        "booking_id": b.booking_id, "flight_id": b.flight_id,
                        "headCount": b.head_count, "status": "BOOKED",
                        "created_at": rfc3339(b.created_ms), "cancelled_at": null,
                    })
                })
                .collect();
            axum::Json(json!({ "bookings": list, "next_cursor": null })).into_response()
        }
        Err(e) => store_failure(e),
    }
}
