//! Seed 000's "direct confirm" (issue 21): the confirm request itself writes the upstream.
//!
//! Before its intent worker, seed 000 had the request thread that consumed a confirm call the
//! upstream's reserve and answer with what it said; a lock on the action row stopped one user
//! from consuming one action twice, and nothing stopped a hundred users confirming one seat
//! from sending a hundred writes. This app is that design on seatgate's own HTTP stack: the
//! runner's routes the same-seat burst walks (`POST /dev/token`, `PUT /me/credential`,
//! `POST /actions`, `POST /actions/{id}/confirm`), the runner's JWT check in front of each
//! ([`super::server::verify`]), and the project's own upstream client
//! ([`HttpUpstream`]), which reads the upstream's answer by its body. So beside the intent
//! worker only the path from confirm to upstream differs.
//!
//! The confirm answers `200` with the outcome, named as seatgate names its terminal statuses:
//! `SUCCEEDED` on a 201, `FAILED_RACE` on `409 seat_taken`, `FAILED_AUTH` on a rejected
//! credential, `FAILED_UPSTREAM` on any other definite no. A call without a definite answer is
//! `UNKNOWN`: this design has no reaper to read the charge afterwards, which is one of the
//! things the intent worker added.
//!
//! Its state (credentials, actions, outcomes) is in memory, not durable: its confirm latency is
//! the floor of a direct design (one upstream round trip behind the HTTP stack), lower than a
//! direct confirm that also commits its action row would be.

use super::server::{BaselineServer, Refusal, error, parse, token_answer, verify};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use seatgate::adapters::upstream_http::HttpUpstream;
use seatgate::domain::{SeatId, Secret};
use seatgate::ports::{ReserveOutcome, Upstream as _};
use seatgate_local::auth::TokenAuthority;
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// A prepared action: whose, which seat, and what its confirm came to once consumed.
struct Action {
    user: String,
    seat: SeatId,
    consumed: bool,
    outcome: Option<&'static str>,
}

#[derive(Default)]
struct Memory {
    /// The user's upstream credential, by user id.
    credentials: HashMap<String, Secret>,
    actions: HashMap<String, Action>,
}

struct App {
    auth: TokenAuthority,
    upstream: HttpUpstream,
    state: Mutex<Memory>,
}

impl App {
    /// The lock is held only between awaits (never across the upstream call), so a poisoned
    /// lock can only follow a panic in plain map code; its data is still consistent.
    fn state(&self) -> MutexGuard<'_, Memory> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Serves the direct-confirm app on a fresh loopback port, writing to the upstream at
/// `upstream_url`, each reserve bounded by `upstream_timeout` (the runner's own bound).
pub(crate) async fn serve(
    upstream_url: &str,
    upstream_timeout: Duration,
) -> anyhow::Result<BaselineServer> {
    let key = Secret::new(uuid::Uuid::new_v4().simple().to_string());
    let app = Arc::new(App {
        auth: TokenAuthority::new(&key)?,
        upstream: HttpUpstream::new(upstream_url, upstream_timeout)?,
        state: Mutex::new(Memory::default()),
    });
    let router = Router::new()
        .route("/dev/token", post(issue_token))
        .route("/me/credential", put(put_credential))
        .route("/actions", post(prepare))
        .route("/actions/{id}/confirm", post(confirm))
        .route("/intents/{id}", get(outcome))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "route_not_found") })
        .with_state(app);
    BaselineServer::spawn(router).await
}

fn refused((status, code): Refusal) -> Response {
    error(status, code)
}

async fn issue_token(State(app): State<Arc<App>>, body: Bytes) -> Response {
    token_answer(&app.auth, &body)
}

async fn put_credential(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    let who = match verify(&app.auth, &headers) {
        Ok(c) => c,
        Err(r) => return refused(r),
    };
    let v = match parse(&body) {
        Ok(v) => v,
        Err(r) => return refused(r),
    };
    let Some(token) = v["upstream_token"].as_str().filter(|t| !t.is_empty()) else {
        return error(StatusCode::BAD_REQUEST, "invalid_credential");
    };
    app.state()
        .credentials
        .insert(who.sub, Secret::new(token.to_owned()));
    StatusCode::NO_CONTENT.into_response()
}

async fn prepare(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    let who = match verify(&app.auth, &headers) {
        Ok(c) => c,
        Err(r) => return refused(r),
    };
    let v = match parse(&body) {
        Ok(v) => v,
        Err(r) => return refused(r),
    };
    if v["kind"] != "reserve_seat" {
        return error(StatusCode::BAD_REQUEST, "invalid_action");
    }
    let Some(seat) = v["seat_id"].as_str().and_then(|s| SeatId::parse(s).ok()) else {
        return error(StatusCode::BAD_REQUEST, "invalid_seat");
    };
    let action_id = uuid::Uuid::now_v7().to_string();
    let answer = json!({ "action_id": action_id, "kind": "reserve_seat", "seat_id": seat });
    app.state().actions.insert(
        action_id,
        Action {
            user: who.sub,
            seat,
            consumed: false,
            outcome: None,
        },
    );
    (StatusCode::CREATED, axum::Json(answer)).into_response()
}

/// The seatgate status a reserve's answer comes to.
fn status_of(outcome: &ReserveOutcome) -> &'static str {
    match outcome {
        ReserveOutcome::Reserved(_) => "SUCCEEDED",
        ReserveOutcome::SeatTaken => "FAILED_RACE",
        ReserveOutcome::CredentialRejected => "FAILED_AUTH",
        ReserveOutcome::AlreadyCharged
        | ReserveOutcome::Busy { .. }
        | ReserveOutcome::Refused(_) => "FAILED_UPSTREAM",
        ReserveOutcome::Unknown(_) => "UNKNOWN",
    }
}

async fn confirm(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let who = match verify(&app.auth, &headers) {
        Ok(c) => c,
        Err(r) => return refused(r),
    };
    // Consumed under the lock, before the call: the seed's action-row lock, so one action is
    // written upstream at most once, whatever the user's client retries.
    let taken = {
        let mut state = app.state();
        let credential = state.credentials.get(&who.sub).cloned();
        match state.actions.get_mut(&id) {
            Some(a) if a.user == who.sub && !a.consumed => match credential {
                Some(c) => {
                    a.consumed = true;
                    Ok((c, a.seat.clone()))
                }
                None => Err((StatusCode::CONFLICT, "no_credential")),
            },
            Some(a) if a.user == who.sub => Err((StatusCode::CONFLICT, "action_consumed")),
            _ => Err((StatusCode::NOT_FOUND, "not_found")),
        }
    };
    let (credential, seat) = match taken {
        Ok(t) => t,
        Err(r) => return refused(r),
    };
    let outcome = app.upstream.reserve(&credential, &seat).await;
    let status = status_of(&outcome);
    if let Some(a) = app.state().actions.get_mut(&id) {
        a.outcome = Some(status);
    }
    let mut answer = json!({ "action_id": id, "seat_id": seat, "status": status });
    if let ReserveOutcome::Reserved(charge) = &outcome {
        answer["charge_id"] = json!(charge.charge_id);
    }
    (StatusCode::OK, axum::Json(answer)).into_response()
}

/// A confirmed action's recorded outcome, read back by its action id (this design has no
/// intents of its own). Checked like every route, so the burst's warm-up, which sends no
/// token, opens its connections here without touching the state.
async fn outcome(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let who = match verify(&app.auth, &headers) {
        Ok(c) => c,
        Err(r) => return refused(r),
    };
    let status = match app.state().actions.get(&id) {
        Some(a) if a.user == who.sub => a.outcome,
        _ => return error(StatusCode::NOT_FOUND, "not_found"),
    };
    match status {
        Some(s) => axum::Json(json!({ "intent_id": id, "status": s })).into_response(),
        None => error(StatusCode::NOT_FOUND, "not_confirmed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_take_seatgate_names() {
        assert_eq!(status_of(&ReserveOutcome::SeatTaken), "FAILED_RACE");
        assert_eq!(
            status_of(&ReserveOutcome::CredentialRejected),
            "FAILED_AUTH"
        );
        assert_eq!(
            status_of(&ReserveOutcome::AlreadyCharged),
            "FAILED_UPSTREAM"
        );
        assert_eq!(
            status_of(&ReserveOutcome::Unknown(
                seatgate::ports::CallFailure::Timeout
            )),
            "UNKNOWN"
        );
    }
}
