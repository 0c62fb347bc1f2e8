//! The runner's two pages, the seat map at `/` and the ops page at `/ops`, and the runner-only
//! JSON routes behind them: `POST /__demo/setup`, `GET /__ops`, `GET /__ops/history` and
//! `GET /__ops/flights[/{id}]`.
//!
//! They exist so that the point of seatgate (a hundred clicks on one seat, one write upstream) can
//! be watched rather than read from curl output. The pages are plain HTML, CSS and JavaScript
//! compiled into the binary with `include_str!`: no build step, nothing to fetch, and the files
//! served are the files in `infra/local/ui/`. Everything they do to the stack goes through the
//! API a client would use (`POST /dev/token`, `PUT /me/credential`, `POST /actions`, the
//! confirm, `GET /intents/{id}`, `GET /rooms/{id}/seats`) and `GET /__metrics`; the two routes
//! here only do what no API route does:
//!
//! - `POST /__demo/setup` `{"users": n, "prefix": "u"}` registers `<prefix>1..n` with the
//!   upstream (credential `cred-<user>`, as `--demo-users` does) and seeds the demo room
//!   ([`DEMO_ROOM`], [`demo_seats`]) when the upstream has no room of that id. So the page works
//!   with the README's plain `cargo run`, and a burst can use users who hold no charge yet (the
//!   upstream allows one charge per user; a previous winner would be refused `already_charged`
//!   and the next in line would try, a second reserve).
//! - `GET /__ops` is what `/__metrics` cannot say: the breaker's shared state, the seat queue's
//!   and the dead-letter queues' depths, the demo room's seats held now, and the last terminal
//!   intents (recorded by [`Recording`] as the event pipeline publishes them), plus whether the
//!   admin routes are in this build's route table, so the ops page uses them when they are.
//! - `GET /__ops/history?since=<ms>&series_from=<n>` is the last ten minutes of those figures
//!   and of `/__metrics`, a sample a second ([`crate::history`]), for the ops page's timelines.
//! - `GET /__ops/flights` lists the flights the runner watches (created through it, or looked
//!   at on the ops page: no port lists flights, and a flash sale's few are what an on-call
//!   engineer follows), and `GET /__ops/flights/{id}` is one flight's exact stock, shard by
//!   shard, from the same inventory read `GET /flights/{id}` makes (which needs a token and
//!   gives only the sum). Looking a flight up starts watching it.
//!
//! They are served only where `POST /dev/token` is (see [`crate::exposure`]), and besides only to
//! a loopback `Host` (unless `--insecure-dev-tokens`): a page elsewhere on the web that
//! rebinds its DNS name to 127.0.0.1 must not be able to drive the runner from a browser.

use crate::gateway::{Gateway, failure, to_axum};
use crate::history::History;
use anyhow::{Context as _, bail};
use async_trait::async_trait;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use seatgate::domain::{Event, FlightId, IntentEvent, SeatId};
use seatgate::handlers::http::{ROUTES, errors, respond};
use seatgate::ports::{BreakerStates, Intents, PublishError, QueueAdmin, Subscribers};
use seatgate::service::flights::ReadFlightError;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use upstream_sim::Simulator;

/// The room the seat map shows and seeds.
pub const DEMO_ROOM: &str = "demo";

/// Most users one `POST /__demo/setup` registers: the burst's largest N.
pub const MAX_SETUP_USERS: usize = 1000;

/// How many terminal intents the ops page lists.
const RECENT_CAPACITY: usize = 50;

/// The demo room's seats: rows A to E, eight seats each (`A-1` .. `E-8`).
pub fn demo_seats() -> Vec<String> {
    ('A'..='E')
        .flat_map(|row| (1..=8).map(move |n| format!("{row}-{n}")))
        .collect()
}

/// The figures of the ops page that only the runner knows, and how to reach the upstream.
pub(crate) struct Ui {
    pub(crate) upstream_url: String,
    pub(crate) sim: Option<Simulator>,
    /// Both queues' depths (and, for the admin routes, their redrive).
    pub(crate) queues: Option<Arc<dyn QueueAdmin>>,
    pub(crate) breaker: Arc<dyn BreakerStates>,
    pub(crate) intents: Arc<dyn Intents>,
    pub(crate) recent: Arc<Recent>,
    /// The last ten minutes, sampled by [`crate::history::sample_loop`].
    pub(crate) history: Arc<History>,
    /// `--demo-users`: the seat map offers at least these users.
    pub(crate) demo_users: usize,
    /// `--insecure-dev-tokens`: the operator exposed the runner on purpose; any `Host` is served.
    pub(crate) any_host: bool,
    pub(crate) http: reqwest::Client,
}

/// The last terminal intent events, newest first, one per event id.
#[derive(Default)]
pub struct Recent {
    events: Mutex<VecDeque<IntentEvent>>,
}

impl Recent {
    fn push(&self, event: &IntentEvent) {
        let mut events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        // A redelivered event (the subscriber failed, the queue handed it back) is the same
        // transition, not a new one.
        if events.iter().any(|e| e.event_id == event.event_id) {
            return;
        }
        events.push_front(event.clone());
        events.truncate(RECENT_CAPACITY);
    }

    fn list(&self) -> Vec<IntentEvent> {
        let events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        events.iter().cloned().collect()
    }
}

/// The subscribers the runner publishes terminal events to, with each event also kept in
/// [`Recent`]: no port lists intents, and the event pipeline already carries exactly the
/// terminal transitions, once each.
pub(crate) struct Recording {
    pub(crate) inner: Arc<dyn Subscribers>,
    pub(crate) recent: Arc<Recent>,
}

#[async_trait]
impl Subscribers for Recording {
    async fn publish(&self, event: &Event) -> Result<(), PublishError> {
        // The panel lists intents; offers have their own place (the waiting list's admin route).
        if let Some(intent) = event.intent() {
            self.recent.push(intent);
        }
        self.inner.publish(event).await
    }
}

const INDEX_HTML: &str = include_str!("../ui/index.html");
const OPS_HTML: &str = include_str!("../ui/ops.html");
const APP_CSS: &str = include_str!("../ui/app.css");
const COMMON_JS: &str = include_str!("../ui/common.js");
const SEATMAP_JS: &str = include_str!("../ui/seatmap.js");
const OPS_JS: &str = include_str!("../ui/ops.js");
const CHARTS_JS: &str = include_str!("../ui/charts.js");
const TIMELINES_JS: &str = include_str!("../ui/timelines.js");

/// Paths and files, so the gateway can tell a page from an API route.
const FILES: [(&str, &str, &str); 8] = [
    ("/", "text/html; charset=utf-8", INDEX_HTML),
    ("/ops", "text/html; charset=utf-8", OPS_HTML),
    ("/__ui/app.css", "text/css; charset=utf-8", APP_CSS),
    (
        "/__ui/common.js",
        "text/javascript; charset=utf-8",
        COMMON_JS,
    ),
    (
        "/__ui/seatmap.js",
        "text/javascript; charset=utf-8",
        SEATMAP_JS,
    ),
    ("/__ui/ops.js", "text/javascript; charset=utf-8", OPS_JS),
    (
        "/__ui/charts.js",
        "text/javascript; charset=utf-8",
        CHARTS_JS,
    ),
    (
        "/__ui/timelines.js",
        "text/javascript; charset=utf-8",
        TIMELINES_JS,
    ),
];

pub(crate) const SETUP_PATH: &str = "/__demo/setup";
pub(crate) const OPS_PATH: &str = "/__ops";
pub(crate) const HISTORY_PATH: &str = "/__ops/history";
pub(crate) const FLIGHTS_PATH: &str = "/__ops/flights";

/// Whether `path` is one of this module's; the gateway hands those to [`serve`].
pub(crate) fn owns(path: &str) -> bool {
    path == SETUP_PATH
        || path == OPS_PATH
        || path == HISTORY_PATH
        || path == FLIGHTS_PATH
        || flight_path(path).is_some()
        || FILES.iter().any(|(p, _, _)| *p == path)
}

/// The `{id}` of `/__ops/flights/{id}` (one segment, not empty).
fn flight_path(path: &str) -> Option<&str> {
    path.strip_prefix(FLIGHTS_PATH)?
        .strip_prefix('/')
        .filter(|id| !id.is_empty() && !id.contains('/'))
}

/// Answers a request for one of the paths [`owns`].
pub(crate) async fn serve(
    gateway: &Gateway,
    method: &Method,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let ui = &gateway.ui;
    if !ui.any_host && !loopback_host(headers) {
        return failure(seatgate::handlers::http::Failure::new(
            StatusCode::FORBIDDEN,
            errors::forbidden().code,
            "the runner's pages answer only a loopback Host (127.0.0.1, [::1], localhost)",
        ));
    }
    if path == SETUP_PATH {
        if method != Method::POST {
            return failure(errors::method_not_allowed(&[&Method::POST]));
        }
        return setup(gateway, body).await;
    }
    if method != Method::GET && method != Method::HEAD {
        return failure(errors::method_not_allowed(&[&Method::GET, &Method::HEAD]));
    }
    if path == OPS_PATH {
        return ops(ui).await;
    }
    if path == HISTORY_PATH {
        return history(ui, query);
    }
    if path == FLIGHTS_PATH {
        return watched_flights(gateway).await;
    }
    if let Some(id) = flight_path(path) {
        return flight(gateway, id).await;
    }
    let (_, content_type, text) = FILES
        .iter()
        .find(|(p, _, _)| *p == path)
        .expect("owns() checked the path");
    let mut response = (StatusCode::OK, *text).into_response();
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // The files are in the binary: a new build is a new page, so revalidate every load.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
             img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// `Host` names this machine's loopback interface. A missing one is refused: every browser
/// sends it, and what else calls these routes can send it too.
fn loopback_host(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetupRequest {
    users: Option<usize>,
    prefix: Option<String>,
}

async fn setup(gateway: &Gateway, body: &[u8]) -> Response {
    let request: SetupRequest = if body.iter().all(u8::is_ascii_whitespace) {
        SetupRequest {
            users: None,
            prefix: None,
        }
    } else {
        match serde_json::from_slice(body) {
            Ok(r) => r,
            Err(e) => return failure(errors::invalid_json(e)),
        }
    };
    let ui = &gateway.ui;
    // A handful to pick from by default, or the `--demo-users` the runner was started with.
    let n = request.users.unwrap_or(ui.demo_users.clamp(5, 20));
    if !(1..=MAX_SETUP_USERS).contains(&n) {
        return failure(errors::invalid_request(format!(
            "users must be 1 to {MAX_SETUP_USERS}"
        )));
    }
    let prefix = request.prefix.unwrap_or_else(|| "u".to_owned());
    if prefix.is_empty()
        || prefix.len() > 24
        || !prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return failure(errors::invalid_request(
            "prefix must be 1 to 24 of A-Z, a-z, 0-9, '-', '_'",
        ));
    }
    let users: Vec<(String, String)> = (1..=n)
        .map(|i| {
            let user = format!("{prefix}{i}");
            let credential = format!("cred-{user}");
            (user, credential)
        })
        .collect();
    let done = async {
        register_users(&ui.http, &ui.upstream_url, ui.sim.as_ref(), &users).await?;
        seed_demo_room(&ui.http, &ui.upstream_url, ui.sim.as_ref()).await
    };
    if let Err(e) = done.await {
        tracing::warn!(error = %format!("{e:#}"), "demo setup failed");
        return failure(seatgate::handlers::http::Failure::new(
            StatusCode::BAD_GATEWAY,
            "upstream_unavailable",
            format!("the upstream did not take the demo setup: {e:#}"),
        ));
    }
    let users: Vec<Value> = users
        .iter()
        .map(|(user, credential)| json!({ "user_id": user, "credential": credential }))
        .collect();
    to_axum(respond(
        StatusCode::OK,
        &json!({ "room_id": DEMO_ROOM, "seats": demo_seats(), "users": users }),
    ))
}

/// Registers each `(user, credential)` with the upstream: directly with an in-process
/// simulator, else through its `POST /__admin/users`.
pub(crate) async fn register_users(
    http: &reqwest::Client,
    upstream_url: &str,
    sim: Option<&Simulator>,
    users: &[(String, String)],
) -> anyhow::Result<()> {
    if let Some(sim) = sim {
        for (user, credential) in users {
            sim.register_user(user, credential);
        }
        return Ok(());
    }
    let body = json!({
        "users": users
            .iter()
            .map(|(u, c)| json!({ "user_id": u, "credential": c }))
            .collect::<Vec<_>>(),
    });
    let resp = http
        .post(format!("{upstream_url}/__admin/users"))
        .json(&body)
        .send()
        .await
        .context("registering users with the upstream")?;
    if !resp.status().is_success() {
        bail!("the upstream refused the users: {}", resp.status());
    }
    Ok(())
}

/// Puts [`DEMO_ROOM`] on the upstream unless it already has a room of that id (someone's own
/// layout is left alone).
pub(crate) async fn seed_demo_room(
    http: &reqwest::Client,
    upstream_url: &str,
    sim: Option<&Simulator>,
) -> anyhow::Result<()> {
    let seats = demo_seats();
    if let Some(sim) = sim {
        if !sim.has_room(DEMO_ROOM) {
            let seats: Vec<&str> = seats.iter().map(String::as_str).collect();
            sim.put_room(DEMO_ROOM, &seats);
        }
        return Ok(());
    }
    let existing = http
        .get(format!("{upstream_url}/api/rooms/{DEMO_ROOM}"))
        .send()
        .await
        .context("asking the upstream for the demo room")?;
    match existing.status() {
        s if s.is_success() => return Ok(()),
        StatusCode::NOT_FOUND => {}
        s => bail!("the upstream answered {s} for the demo room"),
    }
    let resp = http
        .post(format!("{upstream_url}/__admin/rooms"))
        .json(&json!({ "rooms": [{ "room_id": DEMO_ROOM, "seats": seats }] }))
        .send()
        .await
        .context("registering the demo room with the upstream")?;
    if !resp.status().is_success() {
        bail!("the upstream refused the demo room: {}", resp.status());
    }
    Ok(())
}

async fn ops(ui: &Ui) -> Response {
    let breaker = match ui.breaker.breaker().await {
        Ok(state) => json!(state),
        Err(e) => json!({ "error": e.to_string() }),
    };
    // The routes a Retry-After pauses now, beside the breaker: either keeps calls back.
    let now = seatgate::domain::Millis::now();
    let route_pauses = match ui.breaker.pauses().await {
        Ok(pauses) => json!(
            pauses
                .active(now)
                .map(|(route, until)| json!({ "route": route.as_str(), "until": until }))
                .collect::<Vec<_>>()
        ),
        Err(e) => json!({ "error": e.to_string() }),
    };
    let mut seat_claims = Vec::new();
    for seat in demo_seats() {
        let Ok(seat_id) = SeatId::parse(&seat) else {
            continue;
        };
        match ui.intents.seat_claim(&seat_id).await {
            Ok(Some(claim)) => seat_claims.push(json!({
                "seat_id": claim.seat_id,
                "intent_id": claim.intent_id,
                "since": claim.since,
            })),
            Ok(None) => {}
            Err(e) => {
                seat_claims.push(json!({ "seat_id": seat, "error": e.to_string() }));
            }
        }
    }
    let queues = queue_depths(ui.queues.as_ref()).await;
    let admin_routes: Vec<String> = ROUTES
        .iter()
        // The route table says which routes need the admin claim; nothing here guesses by path.
        .filter(|r| r.admin)
        .map(|r| r.key())
        .collect();
    to_axum(respond(
        StatusCode::OK,
        &json!({
            "breaker": breaker,
            "upstream_pauses": route_pauses,
            "queues": queues,
            "seat_claims": { "room_id": DEMO_ROOM, "seats": seat_claims },
            "recent": ui.recent.list(),
            "admin_routes": admin_routes,
        }),
    ))
}

/// `GET /__ops/history`: `since` (ms since the epoch: only later samples) and `series_from`
/// (the series the page already has) are both optional.
fn history(ui: &Ui, query: Option<&str>) -> Response {
    let mut since = None;
    let mut series_from = 0;
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let parsed = match key {
            "since" => value.parse::<i64>().map(|v| since = Some(v)).is_ok(),
            "series_from" => value.parse::<usize>().map(|v| series_from = v).is_ok(),
            _ => false,
        };
        if !parsed {
            return failure(errors::invalid_request(format!(
                "unknown or bad query parameter {key:?}: since=<ms> and series_from=<n> are taken"
            )));
        }
    }
    to_axum(respond(
        StatusCode::OK,
        &ui.history.json(since, series_from),
    ))
}

/// One flight's stock as the ops page shows it: the sum, each shard's remaining and held seats
/// against its share, and whether the store marked it sold out.
fn inventory_json(inventory: &seatgate::domain::Inventory) -> Value {
    let flight = &inventory.flight;
    let shards: Vec<Value> = inventory
        .available
        .iter()
        .enumerate()
        .map(|(shard, available)| {
            let share = u32::try_from(shard).map_or(0, |s| flight.shard_capacity(s));
            let held = inventory.held.get(shard).copied().unwrap_or(0);
            json!({ "shard": shard, "available": available, "held": held, "share": share })
        })
        .collect();
    json!({
        "flight_id": flight.flight_id,
        "capacity": flight.capacity,
        "available": inventory.available(),
        "held": inventory.held(),
        "sold_out": inventory.sold_out,
        "max_per_user": flight.max_per_user,
        "created_at": flight.created_at,
        "shards": shards,
    })
}

/// `GET /__ops/flights`: the watched flights, most recent first, each with its stock now (a
/// flight that cannot be read is listed with the reason).
async fn watched_flights(gateway: &Gateway) -> Response {
    let mut flights = Vec::new();
    for name in gateway.ui.history.watched() {
        let Ok(id) = FlightId::parse(&name) else {
            continue;
        };
        flights.push(match gateway.api.flights().inventory(&id).await {
            Ok(inventory) => inventory_json(&inventory),
            Err(e) => json!({ "flight_id": &*name, "error": e.to_string() }),
        });
    }
    to_axum(respond(StatusCode::OK, &json!({ "flights": flights })))
}

/// `GET /__ops/flights/{id}`: read, then watched from now on.
async fn flight(gateway: &Gateway, id: &str) -> Response {
    let id = match FlightId::parse(id) {
        Ok(id) => id,
        Err(e) => return failure(errors::invalid_id(&e)),
    };
    match gateway.api.flights().inventory(&id).await {
        Ok(inventory) => {
            gateway.ui.history.watch(&id);
            let mut body = inventory_json(&inventory);
            // The waiting list beside the stock: its length and the entry served next.
            body["waitlist"] = match gateway.api.waitlist().waitlist_of(&id).await {
                Ok(summary) => json!({
                    "waiting": summary.waiting,
                    "oldest": summary.oldest.map(|e| json!({
                        "entry_id": e.entry_id,
                        "headCount": e.head_count,
                        "created_at": e.created_at.to_rfc3339(),
                    })),
                }),
                Err(e) => json!({ "error": e.to_string() }),
            };
            to_axum(respond(StatusCode::OK, &body))
        }
        Err(ReadFlightError::NotFound) => failure(errors::not_found("flight")),
        Err(ReadFlightError::Store(e)) => failure(errors::store(&e)),
    }
}

/// Both queues' depths through the admin port (what `GET /admin/seats/{id}` reports too); a
/// figure that cannot be read is `null` with the reason beside it, never a made-up zero.
async fn queue_depths(queues: Option<&Arc<dyn QueueAdmin>>) -> Value {
    let Some(queues) = queues else {
        let unknown = json!({ "ready": null, "in_flight": null, "dead": null,
                              "error": "the dead-letter queues are not known to this runner" });
        return json!({ "seats": unknown, "events": unknown, "events_dead": null });
    };
    match queues.depths().await {
        Ok(d) => json!({
            "seats": d.seat_messages,
            "events": d.webhook_deliveries,
            "events_dead": d.webhook_deliveries.dead,
        }),
        Err(e) => {
            let unreadable = json!({ "ready": null, "in_flight": null, "dead": null,
                                     "error": e.to_string() });
            json!({ "seats": unreadable, "events": unreadable, "events_dead": null })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(h: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_str(h).unwrap());
        headers
    }

    #[test]
    fn only_loopback_hosts_pass() {
        for ok in [
            "127.0.0.1:3000",
            "127.0.0.1",
            "localhost:3000",
            "LOCALHOST",
            "[::1]:3000",
            "127.1.2.3:80",
        ] {
            assert!(loopback_host(&host(ok)), "{ok}");
        }
        for refused in [
            "evil.example:3000",
            "10.0.0.5:3000",
            "[::]:3000",
            "localhost.evil.example",
            "0.0.0.0:3000",
        ] {
            assert!(!loopback_host(&host(refused)), "{refused}");
        }
        assert!(!loopback_host(&HeaderMap::new()));
    }

    #[test]
    fn the_demo_room_has_forty_valid_seats() {
        let seats = demo_seats();
        assert_eq!(seats.len(), 40);
        assert!(seats.iter().all(|s| SeatId::parse(s).is_ok()));
        assert_eq!(seats.first().map(String::as_str), Some("A-1"));
    }

    #[test]
    fn every_page_file_is_owned_and_nonempty() {
        for (path, _, text) in FILES {
            assert!(owns(path) && !text.is_empty(), "{path}");
        }
        assert!(owns(SETUP_PATH) && owns(OPS_PATH) && owns(HISTORY_PATH) && owns(FLIGHTS_PATH));
        assert!(owns("/__ops/flights/KE-081") && flight_path("/__ops/flights/KE-081").is_some());
        assert!(!owns("/__ops/flights/") && !owns("/__ops/flights/a/b"));
        assert!(!owns("/actions") && !owns("/opsx") && !owns("/__metrics"));
    }

    #[test]
    fn recent_keeps_one_per_event_newest_first_and_bounded() {
        use seatgate::domain::{IntentId, IntentStatus, UserId};
        let recent = Recent::default();
        let event = |i: usize| IntentEvent {
            event_id: format!("e{i}"),
            event_type: "intent.succeeded".into(),
            intent_id: IntentId::generate(),
            user_id: UserId::parse("u1").unwrap(),
            seat_id: SeatId::parse("A-1").unwrap(),
            status: IntentStatus::Succeeded,
            charge_id: None,
            reason: None,
            occurred_at: String::new(),
        };
        for i in 0..(RECENT_CAPACITY + 5) {
            recent.push(&event(i));
        }
        recent.push(&event(RECENT_CAPACITY + 4));
        let list = recent.list();
        assert_eq!(list.len(), RECENT_CAPACITY);
        assert_eq!(list[0].event_id, format!("e{}", RECENT_CAPACITY + 4));
        assert_eq!(list[1].event_id, format!("e{}", RECENT_CAPACITY + 3));
    }
}
