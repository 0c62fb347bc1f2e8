//! The HTTP contract through the local runner: who may see and do what, and what bad input gets.
//!
//! Every bad request must get a 4xx with a stable `error` code and a message, never a 5xx.

use reqwest::{Client, Method, StatusCode};
use seatgate_local::{RunnerConfig, Stack, start};
use serde_json::{Value, json};
use std::time::Duration;

async fn stack() -> Stack {
    let mut config = RunnerConfig::ephemeral(None);
    config.timing = seatgate::config::Timing::fast();
    start(config).await.expect("stack starts")
}

struct Caller<'a> {
    http: Client,
    api: &'a str,
    token: String,
}

impl<'a> Caller<'a> {
    fn new(stack: &'a Stack, user: &str) -> Self {
        Caller {
            http: Client::new(),
            api: &stack.api_url,
            token: stack.token(user, false).unwrap(),
        }
    }

    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.api))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    async fn prepare(&self, seat: &str) -> String {
        let (status, body) = self
            .call(
                Method::POST,
                "/actions",
                Some(json!({"kind": "reserve_seat", "seat_id": seat})),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        assert_eq!(body["seat_id"], seat);
        assert_eq!(body["kind"], "reserve_seat");
        assert!(body["expires_at"].as_str().unwrap().ends_with('Z'));
        body["action_id"].as_str().unwrap().to_owned()
    }
}

fn assert_error(status: StatusCode, body: &Value, want_status: u16, want_code: &str) {
    assert_eq!(status.as_u16(), want_status, "{body}");
    assert_eq!(body["error"], want_code, "{body}");
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
}

#[tokio::test]
async fn one_user_cannot_confirm_read_or_cancel_anothers_action_or_intent() {
    let stack = stack().await;
    let alice = Caller::new(&stack, "alice");
    let mallory = Caller::new(&stack, "mallory");

    let action = alice.prepare("A-1").await;
    let (status, body) = mallory
        .call(Method::POST, &format!("/actions/{action}/confirm"), None)
        .await;
    assert_error(status, &body, 404, "not_found");

    let (status, body) = alice
        .call(Method::POST, &format!("/actions/{action}/confirm"), None)
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["status"], "REQUESTED");
    let intent = body["intent_id"].as_str().unwrap().to_owned();

    // Confirming again: 200 and the same intent; a stranger still gets 404.
    let (status, again) = alice
        .call(Method::POST, &format!("/actions/{action}/confirm"), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again["intent_id"], intent.as_str());
    let (status, body) = mallory
        .call(Method::POST, &format!("/actions/{action}/confirm"), None)
        .await;
    assert_error(status, &body, 404, "not_found");

    let (status, body) = mallory
        .call(Method::GET, &format!("/intents/{intent}"), None)
        .await;
    assert_error(status, &body, 404, "not_found");
    let (status, body) = alice
        .call(Method::GET, &format!("/intents/{intent}"), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["intent_id"], intent.as_str());
    assert_eq!(body["seat_id"], "A-1");

    // A wait: only its owner may cancel it.
    let until = seatgate::domain::Millis::now()
        .plus(Duration::from_secs(3600))
        .to_rfc3339();
    let (status, wait) = alice
        .call(
            Method::POST,
            "/waits",
            Some(json!({"seat_id": "A-2", "until": until})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{wait}");
    assert_eq!(wait["status"], "WAITING_FOR_SEAT");
    let wait_id = wait["intent_id"].as_str().unwrap();
    let (status, body) = mallory
        .call(Method::DELETE, &format!("/intents/{wait_id}"), None)
        .await;
    assert_error(status, &body, 404, "not_found");
    stack.shutdown().await;
}

#[tokio::test]
async fn bad_input_gets_a_clear_4xx_with_a_stable_code() {
    let stack = stack().await;
    let user = Caller::new(&stack, "u1");
    let api = &stack.api_url;
    let http = Client::new();

    let raw = |method: Method, path: &str, body: &'static str| {
        http.request(method, format!("{api}{path}"))
            .bearer_auth(&user.token)
            .header("content-type", "application/json")
            .body(body)
    };
    let read = |resp: reqwest::Response| async move {
        let status = resp.status();
        (status, resp.json::<Value>().await.unwrap_or(Value::Null))
    };

    let cases: Vec<(reqwest::RequestBuilder, u16, &str)> = vec![
        (
            raw(Method::POST, "/actions", "{not json"),
            400,
            "invalid_json",
        ),
        (raw(Method::POST, "/actions", ""), 400, "invalid_json"),
        (
            raw(Method::POST, "/actions", r#"{"kind":"reserve_seat"}"#),
            400,
            "invalid_json",
        ),
        (
            raw(
                Method::POST,
                "/actions",
                r#"{"kind":"steal_seat","seat_id":"A-1"}"#,
            ),
            400,
            "unknown_kind",
        ),
        (
            raw(
                Method::POST,
                "/actions",
                r#"{"kind":"reserve_seat","seat_id":""}"#,
            ),
            400,
            "invalid_seat_id",
        ),
        (
            raw(
                Method::POST,
                "/actions",
                r#"{"kind":"reserve_seat","seat_id":"A/../../12"}"#,
            ),
            400,
            "invalid_seat_id",
        ),
        (
            raw(
                Method::POST,
                "/waits",
                r#"{"seat_id":"A-1","until":"tomorrow"}"#,
            ),
            400,
            "invalid_until",
        ),
        (
            raw(
                Method::POST,
                "/waits",
                r#"{"seat_id":"A-1","until":"2001-01-01T00:00:00Z"}"#,
            ),
            400,
            "invalid_until",
        ),
        (
            raw(Method::PUT, "/me/credential", r#"{"upstream_token":""}"#),
            400,
            "invalid_credential",
        ),
        (
            raw(Method::POST, "/actions/not-a-uuid/confirm", ""),
            404,
            "not_found",
        ),
        (
            raw(
                Method::POST,
                "/actions/0192d0f5-0000-7000-8000-000000000000/confirm",
                "",
            ),
            404,
            "not_found",
        ),
        (raw(Method::GET, "/intents/nope", ""), 404, "not_found"),
        (
            raw(Method::GET, "/no/such/route", ""),
            404,
            "route_not_found",
        ),
        (
            raw(Method::PATCH, "/actions", "{}"),
            405,
            "method_not_allowed",
        ),
    ];
    for (req, want_status, want_code) in cases {
        let (status, body) = read(req.send().await.unwrap()).await;
        assert_error(status, &body, want_status, want_code);
    }

    // Oversized: a seat id past the limit, and a body past 16 KiB.
    let long_seat = "S".repeat(65);
    let (status, body) = user
        .call(
            Method::POST,
            "/actions",
            Some(json!({"kind":"reserve_seat","seat_id": long_seat})),
        )
        .await;
    assert_error(status, &body, 400, "invalid_seat_id");
    let huge = "x".repeat(20 * 1024);
    let (status, body) = user
        .call(
            Method::PUT,
            "/me/credential",
            Some(json!({"upstream_token": huge})),
        )
        .await;
    assert_error(status, &body, 413, "payload_too_large");

    // Missing, malformed and forged tokens.
    let no_token = http
        .post(format!("{api}/actions"))
        .json(&json!({"kind":"reserve_seat","seat_id":"A-1"}))
        .send()
        .await
        .unwrap();
    let (status, body) = read(no_token).await;
    assert_error(status, &body, 401, "unauthorized");
    for token in ["garbage", &forge(&user.token)] {
        let resp = http
            .post(format!("{api}/actions"))
            .bearer_auth(token)
            .json(&json!({"kind":"reserve_seat","seat_id":"A-1"}))
            .send()
            .await
            .unwrap();
        let (status, body) = read(resp).await;
        assert_error(status, &body, 401, "unauthorized");
    }
    stack.shutdown().await;
}

/// The same claims with the signature of another key: the payload part of a real token with
/// `sub` swapped, re-attached to the original signature.
fn forge(token: &str) -> String {
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3);
    let payload = base64_url::decode(parts[1]);
    let mut claims: Value = serde_json::from_slice(&payload).unwrap();
    claims["sub"] = json!("someone-else");
    let forged = base64_url::encode(&serde_json::to_vec(&claims).unwrap());
    format!("{}.{}.{}", parts[0], forged, parts[2])
}

/// Just enough base64url for `forge`, to avoid a dependency for one test.
mod base64_url {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

    pub fn encode(bytes: &[u8]) -> String {
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
            for i in 0..=chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            }
        }
        out
    }

    pub fn decode(text: &str) -> Vec<u8> {
        let values: Vec<u32> = text
            .bytes()
            .map(|c| ALPHABET.iter().position(|a| *a == c).unwrap() as u32)
            .collect();
        let mut out = Vec::new();
        for chunk in values.chunks(4) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |acc, (i, v)| acc | (v << (18 - 6 * i)));
            for i in 0..chunk.len().saturating_sub(1) {
                out.push((n >> (16 - 8 * i)) as u8);
            }
        }
        out
    }
}

#[tokio::test]
async fn an_expired_action_cannot_be_confirmed() {
    let mut config = RunnerConfig::ephemeral(None);
    config.timing = seatgate::config::Timing::fast();
    config.timing.action_ttl = Duration::from_millis(200);
    let stack = start(config).await.unwrap();
    let user = Caller::new(&stack, "u1");
    let action = user.prepare("Z-1").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, body) = user
        .call(Method::POST, &format!("/actions/{action}/confirm"), None)
        .await;
    assert_error(status, &body, 410, "action_expired");
    stack.shutdown().await;
}

/// The route table in effect: the runner's gateway puts exactly the handler's `ROUTES` behind
/// its authorizer (401 without a token), the handler serves each of them (never 404/405 with a
/// token), and a path outside the table is unknown to both. (`template.yaml` is held to the same
/// table by `shared/aws/tests/template.rs`.)
#[tokio::test]
async fn the_gateway_and_the_handler_serve_exactly_the_route_table() {
    use seatgate::handlers::http::ROUTES;
    let stack = stack().await;
    let caller = Caller::new(&stack, "router");
    let anonymous = Client::new();
    assert!(!ROUTES.is_empty());
    for route in ROUTES {
        // Path parameters get a well-formed id that names nothing.
        let path = route
            .path
            .split('/')
            .map(|part| {
                if part.starts_with('{') {
                    uuid::Uuid::now_v7().to_string()
                } else {
                    part.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join("/");
        let resp = anonymous
            .request(route.method.clone(), format!("{}{path}", stack.api_url))
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        assert_error(status, &body, 401, "unauthorized");
        let (status, body) = caller.call(route.method.clone(), &path, None).await;
        assert!(
            status.is_client_error() || status.is_success(),
            "{} {path}: {status} {body}",
            route.method
        );
        assert!(
            !matches!(
                body["error"].as_str(),
                Some("route_not_found" | "method_not_allowed")
            ),
            "{} {path} is in ROUTES but the handler does not serve it: {body}",
            route.method
        );
    }
    // Outside the table: unknown with or without a token, so nothing undeclared is authorized.
    for (method, path) in [
        (Method::GET, "/seat-map/A-1"),
        (Method::GET, "/flight/F-1"),
        (Method::POST, "/admin/intents"),
    ] {
        assert!(
            seatgate::handlers::http::match_route(&method, path).is_err(),
            "{method} {path} is in ROUTES now: pick a path outside the table"
        );
        let resp = anonymous
            .request(method.clone(), format!("{}{path}", stack.api_url))
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let body: Value = resp.json().await.unwrap();
        assert_error(status, &body, 404, "route_not_found");
        let (status, body) = caller.call(method, path, None).await;
        assert_error(status, &body, 404, "route_not_found");
    }
    let (status, body) = caller.call(Method::PATCH, "/actions", None).await;
    assert_error(status, &body, 405, "method_not_allowed");
    stack.shutdown().await;
}

/// Schemathesis found every 405 without `Allow`, which RFC 9110 requires: a client must be able
/// to learn what the path does take.
#[tokio::test]
async fn a_405_names_the_methods_the_path_has_in_allow() {
    let stack = stack().await;
    let caller = Caller::new(&stack, "u1");
    let intent = format!("/intents/{}", uuid::Uuid::now_v7());
    for (method, path, allow) in [
        (Method::PATCH, "/actions", "POST"),
        (Method::TRACE, "/me/bookings", "GET"),
        (Method::PUT, intent.as_str(), "GET, DELETE"),
        (Method::GET, "/me/credential", "PUT"),
        // The runner's own routes too (schemathesis: TRACE /dev/token was a 404).
        (Method::GET, "/dev/token", "POST"),
        (Method::TRACE, "/__metrics", "GET"),
    ] {
        let resp = caller
            .http
            .request(method.clone(), format!("{}{path}", stack.api_url))
            .bearer_auth(&caller.token)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let header = resp.headers().get("allow").cloned();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        assert_error(status, &body, 405, "method_not_allowed");
        assert_eq!(
            header.as_ref().and_then(|v| v.to_str().ok()),
            Some(allow),
            "{method} {path}"
        );
    }
    stack.shutdown().await;
}

#[tokio::test]
async fn seat_and_room_reads_answer_from_the_upstream_and_refuse_bad_input() {
    let stack = stack().await;
    let sim = stack.upstream.clone().expect("the stack's own simulator");
    sim.put_room("R-1", &["R-1-1", "R-1-2"]);
    let caller = Caller::new(&stack, "alice");

    let (status, body) = caller.call(Method::GET, "/seats/S-9", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["seat_id"], "S-9");
    assert_eq!(body["available"], true);
    assert_eq!(body["stale"], false);
    assert!(body["as_of"].as_str().unwrap().ends_with('Z'));

    let (status, body) = caller.call(Method::GET, "/rooms/R-1/seats", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["room_id"], "R-1");
    assert_eq!(
        body["seats"],
        json!([
            {"seat_id": "R-1-1", "available": true},
            {"seat_id": "R-1-2", "available": true}
        ])
    );

    let (status, body) = caller.call(Method::GET, "/rooms/NOPE/seats", None).await;
    assert_error(status, &body, 404, "room_not_found");
    let (status, body) = caller.call(Method::GET, "/seats/bad%20seat", None).await;
    assert_error(status, &body, 400, "invalid_seat_id");
    let long = "x".repeat(65);
    let (status, body) = caller
        .call(Method::GET, &format!("/seats/{long}"), None)
        .await;
    assert_error(status, &body, 400, "invalid_seat_id");
    let (status, body) = caller.call(Method::GET, "/rooms/a%21b/seats", None).await;
    assert_error(status, &body, 400, "invalid_room_id");
    let (status, body) = caller.call(Method::POST, "/seats/S-9", None).await;
    assert_error(status, &body, 405, "method_not_allowed");
}

/// `.` and `..` as ids: an HTTP client resolves them out of the path, and so did the upstream
/// adapter's URL, so `GET /seats/..` read `/api/` upstream and answered 503 (a 5xx for bad input,
/// and a failure counted against the shared breaker). Found while writing docs/openapi.yaml.
#[tokio::test]
async fn dot_segment_ids_are_bad_input_not_an_upstream_failure() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stack = stack().await;
    let caller = Caller::new(&stack, "u1");
    let addr = stack.api_url.trim_start_matches("http://").to_owned();
    // Sent raw: reqwest, like any client, would resolve the dot-segment before sending.
    for (path, code) in [
        ("/seats/..", "invalid_seat_id"),
        ("/seats/.", "invalid_seat_id"),
        ("/rooms/../seats", "invalid_room_id"),
    ] {
        let mut conn = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let request = format!(
            "GET {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {}\r\nconnection: close\r\n\r\n",
            caller.token
        );
        conn.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        conn.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 400"), "{path}: {answer}");
        let body: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        assert_error(StatusCode::BAD_REQUEST, &body, 400, code);
    }
    for seat in [".", ".."] {
        let (status, body) = caller
            .call(
                Method::POST,
                "/actions",
                Some(json!({"kind": "reserve_seat", "seat_id": seat})),
            )
            .await;
        assert_error(status, &body, 400, "invalid_seat_id");
    }
    let (status, body) = caller.call(Method::GET, "/seats/...", None).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "three dots are an ordinary id: {body}"
    );
    stack.shutdown().await;
}

#[tokio::test]
async fn with_the_upstream_down_a_never_read_seat_is_a_503_that_says_when_to_retry() {
    let stack = stack().await;
    let sim = stack.upstream.clone().expect("the stack's own simulator");
    let caller = Caller::new(&stack, "alice");
    let (status, _) = caller.call(Method::GET, "/seats/KNOWN", None).await;
    assert_eq!(status, StatusCode::OK);
    sim.set_faults(upstream_sim::Faults {
        outage_for_ms: 30_000,
        ..Default::default()
    });
    tokio::time::sleep(stack.timing.read_ttl).await;
    // Until the breaker opens each miss tries the upstream; then none does.
    for n in 0..stack.timing.breaker_min_calls * 2 {
        let (status, body) = caller
            .call(Method::GET, &format!("/seats/NEW-{n}"), None)
            .await;
        assert_error(status, &body, 503, "upstream_unavailable");
    }
    let calls = sim.stats().get("GET /api/seats");
    let resp = Client::new()
        .get(format!("{}/seats/NEW-LAST", stack.api_url))
        .bearer_auth(stack.token("alice", false).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    let retry_after: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=1 + stack.timing.breaker_open_interval.as_secs()).contains(&retry_after));
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"], "upstream_unavailable");
    // A seat read before serves its last reading, marked stale, without a call.
    let (status, body) = caller.call(Method::GET, "/seats/KNOWN", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["stale"], true);
    assert_eq!(
        sim.stats().get("GET /api/seats"),
        calls,
        "no call while the breaker is open"
    );
}

impl<'a> Caller<'a> {
    fn admin(stack: &'a Stack, user: &str) -> Self {
        Caller {
            http: Client::new(),
            api: &stack.api_url,
            token: stack.token(user, true).unwrap(),
        }
    }

    async fn book(&self, flight: &str, body: Value, key: Option<&str>) -> (StatusCode, Value) {
        let mut req = self
            .http
            .post(format!("{}/flights/{flight}/bookings", self.api))
            .bearer_auth(&self.token)
            .json(&body);
        if let Some(key) = key {
            req = req.header("idempotency-key", key);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        (status, resp.json().await.unwrap_or(Value::Null))
    }
}

#[tokio::test]
async fn a_flight_sells_its_capacity_once_and_cancels_return_seats_once() {
    let stack = stack().await;
    let admin = Caller::admin(&stack, "ops");
    let alice = Caller::new(&stack, "alice");
    let bob = Caller::new(&stack, "bob");

    let flight = json!({"flight_id": "KE-1", "capacity": 3, "max_per_user": 2});
    let (status, body) = alice
        .call(Method::POST, "/admin/flights", Some(flight.clone()))
        .await;
    assert_error(status, &body, 403, "forbidden");
    let (status, body) = admin
        .call(Method::POST, "/admin/flights", Some(flight.clone()))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        (body["capacity"].as_u64(), body["available"].as_u64()),
        (Some(3), Some(3))
    );
    let (status, body) = admin
        .call(Method::POST, "/admin/flights", Some(flight))
        .await;
    assert_error(status, &body, 409, "flight_exists");

    let (status, a1) = alice.book("KE-1", json!({"headCount": 2}), None).await;
    assert_eq!(status, StatusCode::CREATED, "{a1}");
    assert_eq!(a1["headCount"], 2);
    let (status, body) = alice.book("KE-1", json!({"headCount": 1}), None).await;
    assert_error(status, &body, 409, "limit_reached");
    let (status, body) = bob.book("KE-1", json!({"headCount": 2}), None).await;
    assert_error(status, &body, 409, "sold_out");
    let (status, b1) = bob.book("KE-1", json!({"headCount": 1}), None).await;
    assert_eq!(status, StatusCode::CREATED, "{b1}");
    let (status, body) = bob.book("KE-1", json!({"headCount": 1}), None).await;
    assert_error(status, &body, 409, "sold_out");
    let (_, body) = bob.call(Method::GET, "/flights/KE-1", None).await;
    assert_eq!(
        body,
        json!({"flight_id": "KE-1", "capacity": 3, "available": 0, "held": 0})
    );

    // Only the owner cancels; a retried cancel returns the seats once.
    let a1_path = format!(
        "/flights/KE-1/bookings/{}",
        a1["booking_id"].as_str().unwrap()
    );
    let (status, body) = bob.call(Method::DELETE, &a1_path, None).await;
    assert_error(status, &body, 404, "not_found");
    for _ in 0..3 {
        let (status, body) = alice.call(Method::DELETE, &a1_path, None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["status"], "CANCELLED");
    }
    let (_, body) = bob.call(Method::GET, "/flights/KE-1", None).await;
    assert_eq!(body["available"], 2);
    let (status, body) = alice.call(Method::GET, "/me/bookings", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["bookings"].as_array().unwrap().len(), 1);
    assert_eq!(body["bookings"][0]["status"], "CANCELLED");
    let (_, body) = bob.call(Method::GET, "/me/bookings", None).await;
    assert_eq!(body["bookings"][0]["booking_id"], b1["booking_id"]);
    assert_eq!(body["next_cursor"], Value::Null);
}

/// `GET /me/bookings` comes 20 to a page: the pages, followed by their cursors, list each of
/// the user's bookings once, oldest first, and the last page hands out no cursor.
#[tokio::test]
async fn a_users_bookings_come_a_page_at_a_time() {
    let stack = stack().await;
    let admin = Caller::admin(&stack, "ops");
    let carol = Caller::new(&stack, "carol");
    let flight = json!({"flight_id": "KE-9", "capacity": 30});
    let (status, body) = admin
        .call(Method::POST, "/admin/flights", Some(flight))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // 23 bookings, under the default rate limit (30 per 10 s).
    let mut made = Vec::new();
    for _ in 0..23 {
        let (status, b) = carol.book("KE-9", json!({"headCount": 1}), None).await;
        assert_eq!(status, StatusCode::CREATED, "{b}");
        made.push(b["booking_id"].as_str().unwrap().to_owned());
    }
    let (status, first) = carol.call(Method::GET, "/me/bookings", None).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let ids = |page: &Value| -> Vec<String> {
        page["bookings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["booking_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&first).len(), 20);
    let cursor = first["next_cursor"]
        .as_str()
        .expect("a second page")
        .to_owned();
    assert_eq!(
        Some(&cursor),
        ids(&first).last(),
        "the cursor is the page's last key"
    );
    let (status, second) = carol
        .call(Method::GET, &format!("/me/bookings?cursor={cursor}"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert_eq!(ids(&second).len(), 3);
    assert_eq!(second["next_cursor"], Value::Null, "the last page");
    let listed: Vec<String> = [ids(&first), ids(&second)].concat();
    assert_eq!(listed, made, "every booking once, oldest first");
    for bad in ["", "a%20b", "%E2%9C%88"] {
        let (status, body) = carol
            .call(Method::GET, &format!("/me/bookings?cursor={bad}"), None)
            .await;
        assert_error(status, &body, 400, "invalid_cursor");
    }
}

#[tokio::test]
async fn an_idempotency_key_returns_the_first_answer_and_refuses_another_request() {
    let stack = stack().await;
    let admin = Caller::admin(&stack, "ops");
    let alice = Caller::new(&stack, "alice");
    let (status, _) = admin
        .call(
            Method::POST,
            "/admin/flights",
            Some(json!({"flight_id": "OZ-1", "capacity": 5})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let first = alice
        .book("OZ-1", json!({"headCount": 2}), Some("key-1"))
        .await;
    assert_eq!(first.0, StatusCode::CREATED, "{}", first.1);
    for _ in 0..3 {
        assert_eq!(
            alice
                .book("OZ-1", json!({"headCount": 2}), Some("key-1"))
                .await,
            first
        );
    }
    let (_, body) = alice.call(Method::GET, "/flights/OZ-1", None).await;
    assert_eq!(body["available"], 3, "one booking for four requests");
    let (status, body) = alice
        .book("OZ-1", json!({"headCount": 1}), Some("key-1"))
        .await;
    assert_error(status, &body, 422, "idempotency_key_reused");
    // Another user's key of the same name is their own.
    let bob = Caller::new(&stack, "bob");
    let (status, _) = bob
        .book("OZ-1", json!({"headCount": 1}), Some("key-1"))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    // A refusal is an answer too: retried, it is the same refusal, even once seats are back.
    let (status, body) = alice
        .book("OZ-1", json!({"headCount": 9}), Some("key-2"))
        .await;
    assert_error(status, &body, 409, "sold_out");
    let again = alice
        .book("OZ-1", json!({"headCount": 9}), Some("key-2"))
        .await;
    assert_eq!(again, (status, body));
}

#[tokio::test]
async fn bad_booking_input_gets_a_clear_4xx() {
    let stack = stack().await;
    let admin = Caller::admin(&stack, "ops");
    let alice = Caller::new(&stack, "alice");
    for (body, code) in [
        (json!({"flight_id": "X-1", "capacity": 0}), "invalid_flight"),
        (
            json!({"flight_id": "X-1", "capacity": 5, "shards": 6}),
            "invalid_flight",
        ),
        (
            json!({"flight_id": "X-1", "capacity": 5, "max_per_user": 0}),
            "invalid_flight",
        ),
        (
            json!({"flight_id": "bad id", "capacity": 5}),
            "invalid_flight_id",
        ),
        (json!({"flight_id": "X-1", "capacity": -1}), "invalid_json"),
        (json!({"flight_id": "X-1"}), "invalid_json"),
    ] {
        let (status, resp) = admin.call(Method::POST, "/admin/flights", Some(body)).await;
        assert_error(status, &resp, 400, code);
    }
    let (status, _) = admin
        .call(
            Method::POST,
            "/admin/flights",
            Some(json!({"flight_id": "X-1", "capacity": 5})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    for (body, code) in [
        (json!({"headCount": 0}), "invalid_head_count"),
        (json!({"headCount": 10}), "invalid_head_count"),
        (json!({"headCount": "1"}), "invalid_json"),
        (json!({"headCount": 1.5}), "invalid_json"),
        (json!({"headcount": 1}), "invalid_json"),
        (json!({}), "invalid_json"),
    ] {
        let (status, resp) = alice.book("X-1", body, None).await;
        assert_error(status, &resp, 400, code);
    }
    let (status, resp) = alice
        .book("X-1", json!({"headCount": 1}), Some("has space"))
        .await;
    assert_error(status, &resp, 400, "invalid_idempotency_key");
    let (status, resp) = alice.book("NOPE", json!({"headCount": 1}), None).await;
    assert_error(status, &resp, 404, "not_found");
    let (status, resp) = alice.call(Method::GET, "/flights/NOPE", None).await;
    assert_error(status, &resp, 404, "not_found");
    let (status, resp) = alice
        .call(Method::DELETE, "/flights/X-1/bookings/not-a-booking", None)
        .await;
    assert_error(status, &resp, 404, "not_found");
    let (_, body) = alice.call(Method::GET, "/flights/X-1", None).await;
    assert_eq!(body["available"], 5, "no bad request took a seat");
}

/// `upstream_token` is limited to 4096 characters, as the error and docs/openapi.yaml say; it was
/// 4096 bytes, so 4096 two-byte characters (a schema-valid string) were refused.
#[tokio::test]
async fn a_credential_is_limited_in_characters_not_bytes() {
    let stack = stack().await;
    let user = Caller::new(&stack, "u1");
    let (status, body) = user
        .call(
            Method::PUT,
            "/me/credential",
            Some(json!({"upstream_token": "é".repeat(4096)})),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let (status, body) = user
        .call(
            Method::PUT,
            "/me/credential",
            Some(json!({"upstream_token": "a".repeat(4097)})),
        )
        .await;
    assert_error(status, &body, 400, "invalid_credential");
    stack.shutdown().await;
}

/// Schemathesis sent `"headCount": 9.0` and `"capacity": 171330.0`, valid JSON Schema integers
/// that were refused as `invalid_json`: JSON has one number type, so a whole number counts
/// however it is written.
#[tokio::test]
async fn whole_numbers_written_with_a_fraction_are_counts() {
    let stack = stack().await;
    let admin = Caller::admin(&stack, "ops");
    let (status, body) = admin
        .call(
            Method::POST,
            "/admin/flights",
            Some(json!({"flight_id": "W-1", "capacity": 10.0, "max_per_user": 4.0, "shards": 2.0})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        (&body["capacity"], &body["max_per_user"], &body["shards"]),
        (&json!(10), &json!(4), &json!(2))
    );
    let (status, body) = admin.book("W-1", json!({"headCount": 3.0}), None).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["headCount"], 3);
    for body in [
        json!({"headCount": 2.5}),
        json!({"headCount": -3.0}),
        json!({"headCount": 1e10}),
    ] {
        let (status, resp) = admin.book("W-1", body, None).await;
        assert_error(status, &resp, 400, "invalid_json");
    }
    let (_, body) = admin.call(Method::GET, "/flights/W-1", None).await;
    assert_eq!(body["available"], 7, "only the one good booking took seats");
    stack.shutdown().await;
}

#[tokio::test]
async fn the_admin_routes_need_the_claim_check_their_ids_and_show_an_intents_history() {
    let stack = stack().await;
    let admin = Caller::admin(&stack, "ops");
    let alice = Caller::new(&stack, "alice");

    let until = seatgate::domain::Millis::now()
        .plus(Duration::from_secs(3600))
        .to_rfc3339();
    let (status, wait) = alice
        .call(
            Method::POST,
            "/waits",
            Some(json!({"seat_id": "H-1", "until": until})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{wait}");
    let intent = wait["intent_id"].as_str().unwrap().to_owned();
    // The runner's worker may end the wait first (alice has no credential: FAILED_AUTH); either
    // way the history must end with the intent's terminal write.
    let (status, cancelled) = alice
        .call(Method::DELETE, &format!("/intents/{intent}"), None)
        .await;
    let was_cancelled = match status {
        StatusCode::OK => true,
        StatusCode::CONFLICT => {
            assert_eq!(cancelled["error"], "not_cancellable", "{cancelled}");
            false
        }
        other => panic!("cancel answered {other}: {cancelled}"),
    };

    // Without the claim: 403 before anything else, even for a bad id.
    for (method, path) in [
        (Method::GET, format!("/admin/intents/{intent}")),
        (Method::GET, "/admin/intents/not-a-uuid".to_owned()),
        (Method::GET, "/admin/seats/H-1".to_owned()),
        (Method::POST, "/admin/reconcile".to_owned()),
        (Method::POST, "/admin/dead-letters/redrive".to_owned()),
    ] {
        let (status, body) = alice.call(method, &path, None).await;
        assert_error(status, &body, 403, "forbidden");
    }

    let (status, audit) = admin
        .call(Method::GET, &format!("/admin/intents/{intent}"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{audit}");
    assert_eq!(audit["intent"]["user_id"], "alice");
    let status_now = audit["intent"]["status"].as_str().unwrap().to_owned();
    if was_cancelled {
        assert_eq!(status_now, "CANCELLED");
    } else {
        assert_eq!(status_now, "FAILED_AUTH", "{audit}");
    }
    assert_eq!(audit["consent"]["kind"], "WAIT");
    assert_eq!(audit["consent"]["action_id"], Value::Null);
    let history = audit["history"].as_array().unwrap();
    // One record per write: versions 1..=version, the creation first, the terminal write last.
    let version = audit["intent"]["version"].as_u64().unwrap();
    assert_eq!(
        history
            .iter()
            .map(|r| r["version"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        (1..=version).collect::<Vec<_>>()
    );
    assert_eq!(
        audit["next_cursor"],
        Value::Null,
        "a short history is one page"
    );
    // A page after the cursor holds the later records only; a cursor no page hands out is 400.
    let (status, later) = admin
        .call(
            Method::GET,
            &format!("/admin/intents/{intent}?cursor=1"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{later}");
    assert_eq!(
        later["history"][0]["version"], 2,
        "the page starts after version 1: {later}"
    );
    for bad in [
        "0",
        "01",
        "x",
        "-1",
        "1.5",
        "%2B1",
        "1&cursor=2",
        "18446744073709551616",
    ] {
        let (status, body) = admin
            .call(
                Method::GET,
                &format!("/admin/intents/{intent}?cursor={bad}"),
                None,
            )
            .await;
        assert_error(status, &body, 400, "invalid_cursor");
    }
    assert_eq!(history[0]["from"], Value::Null);
    assert_eq!(history[0]["to"], "WAITING_FOR_SEAT");
    let last = history.last().unwrap();
    assert_eq!(last["to"], json!(status_now));
    assert!(!last["at"].is_null(), "{last}");
    assert_eq!(last["at"], audit["intent"]["updated_at"]);
    if was_cancelled {
        assert_eq!(
            (&last["from"], &last["reason"]),
            (&json!("WAITING_FOR_SEAT"), &json!("cancelled"))
        );
        assert_eq!(last["at"], cancelled["updated_at"]);
    }

    let (status, body) = admin
        .call(Method::GET, "/admin/intents/not-a-uuid", None)
        .await;
    assert_error(status, &body, 400, "invalid_intent_id");
    let unknown = "00000000-0000-4000-8000-000000000000";
    let (status, body) = admin
        .call(Method::GET, &format!("/admin/intents/{unknown}"), None)
        .await;
    assert_error(status, &body, 404, "not_found");

    let (status, seat) = admin.call(Method::GET, "/admin/seats/H-1", None).await;
    assert_eq!(status, StatusCode::OK, "{seat}");
    assert_eq!(seat["seat_id"], "H-1");
    assert_eq!(seat["hold"], Value::Null);
    assert_eq!(seat["suppression"], Value::Null);
    for depth in ["ready", "in_flight", "dead"] {
        assert!(seat["queue"][depth].is_u64(), "{seat}");
    }
    let (status, body) = admin
        .call(Method::GET, "/admin/seats/bad%20seat", None)
        .await;
    assert_error(status, &body, 400, "invalid_seat_id");

    let (status, report) = admin.call(Method::POST, "/admin/reconcile", None).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert!(report["examined"].is_u64(), "{report}");
    assert!(report["left"].is_u64(), "{report}");
    stack.shutdown().await;
}

#[tokio::test]
async fn a_hold_is_confirmed_released_or_lapsed_once_and_bad_input_gets_a_clear_4xx() {
    let stack = stack().await;
    let admin = Caller::admin(&stack, "ops");
    let alice = Caller::new(&stack, "alice");
    let bob = Caller::new(&stack, "bob");
    let flight = json!({"flight_id": "KE-H", "capacity": 4, "max_per_user": 3,
        "hold_ttl_secs": 1, "hold_max_secs": 2, "offer_ttl_secs": 5});
    let (status, body) = admin
        .call(Method::POST, "/admin/flights", Some(flight))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        (
            body["hold_ttl_secs"].as_u64(),
            body["hold_max_secs"].as_u64(),
            body["held"].as_u64()
        ),
        (Some(1), Some(2), Some(0))
    );
    for bad in [
        json!({"flight_id": "KE-X", "capacity": 4, "hold_ttl_secs": 0}),
        json!({"flight_id": "KE-X", "capacity": 4, "hold_ttl_secs": 10, "hold_max_secs": 5}),
        json!({"flight_id": "KE-X", "capacity": 4, "offer_ttl_secs": 604801}),
    ] {
        let (status, body) = admin.call(Method::POST, "/admin/flights", Some(bad)).await;
        assert_error(status, &body, 400, "invalid_flight");
    }

    async fn hold(who: &Caller<'_>, k: u32) -> (StatusCode, Value) {
        who.call(
            Method::POST,
            "/flights/KE-H/holds",
            Some(json!({"headCount": k})),
        )
        .await
    }
    let (status, h1) = hold(&alice, 2).await;
    assert_eq!(status, StatusCode::CREATED, "{h1}");
    let h1_path = format!("/flights/KE-H/holds/{}", h1["hold_id"].as_str().unwrap());
    let (status, body) = hold(&alice, 1).await;
    assert_error(status, &body, 409, "hold_exists");
    let (_, body) = bob.call(Method::GET, "/flights/KE-H", None).await;
    assert_eq!(
        (body["available"].as_u64(), body["held"].as_u64()),
        (Some(2), Some(2))
    );
    // Another user's hold is not found, whatever they ask of it.
    for (method, suffix) in [
        (Method::GET, ""),
        (Method::DELETE, ""),
        (Method::POST, "/confirm"),
        (Method::POST, "/extend"),
    ] {
        let (status, body) = bob.call(method, &format!("{h1_path}{suffix}"), None).await;
        assert_error(status, &body, 404, "not_found");
    }
    let (status, booking) = alice
        .call(Method::POST, &format!("{h1_path}/confirm"), None)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{booking}");
    assert_eq!(booking["status"], "BOOKED");
    let (status, again) = alice
        .call(Method::POST, &format!("{h1_path}/confirm"), None)
        .await;
    assert_eq!(
        (status, &again),
        (StatusCode::OK, &booking),
        "a repeat answers the same booking"
    );
    let (status, body) = alice.call(Method::DELETE, &h1_path, None).await;
    assert_error(status, &body, 409, "hold_confirmed");
    let (_, body) = bob.call(Method::GET, "/flights/KE-H", None).await;
    assert_eq!(
        (body["available"].as_u64(), body["held"].as_u64()),
        (Some(2), Some(0))
    );
    // Two held and booked: one more hold of two passes the limit of three.
    let (status, body) = hold(&alice, 2).await;
    assert_error(status, &body, 409, "limit_reached");

    // Bob releases once; a repeat answers the released hold.
    let (status, h2) = hold(&bob, 2).await;
    assert_eq!(status, StatusCode::CREATED, "{h2}");
    let (status, body) = hold(&alice, 1).await;
    assert_error(status, &body, 409, "sold_out");
    let h2_path = format!("/flights/KE-H/holds/{}", h2["hold_id"].as_str().unwrap());
    let (status, released) = bob.call(Method::DELETE, &h2_path, None).await;
    assert_eq!(
        (status, released["status"].as_str()),
        (StatusCode::OK, Some("RELEASED"))
    );
    let (status, again) = bob.call(Method::DELETE, &h2_path, None).await;
    assert_eq!((status, &again), (StatusCode::OK, &released));
    let (status, body) = bob
        .call(Method::POST, &format!("{h2_path}/confirm"), None)
        .await;
    assert_error(status, &body, 409, "hold_released");
    let (_, body) = bob.call(Method::GET, "/flights/KE-H", None).await;
    assert_eq!(
        (body["available"].as_u64(), body["held"].as_u64()),
        (Some(2), Some(0))
    );

    // Bob's next hold lapses: it reads LAPSED, cannot be confirmed or extended, and a reaper
    // pass gives its seats back.
    let (status, h3) = hold(&bob, 2).await;
    assert_eq!(status, StatusCode::CREATED, "{h3}");
    let h3_path = format!("/flights/KE-H/holds/{}", h3["hold_id"].as_str().unwrap());
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let (_, body) = bob.call(Method::GET, &h3_path, None).await;
    assert_eq!(body["status"], "LAPSED", "{body}");
    let (status, body) = bob
        .call(Method::POST, &format!("{h3_path}/confirm"), None)
        .await;
    assert_error(status, &body, 410, "hold_expired");
    let (status, body) = bob
        .call(Method::POST, &format!("{h3_path}/extend"), None)
        .await;
    assert_error(status, &body, 409, "hold_not_extendable");
    let (status, report) = admin.call(Method::POST, "/admin/reconcile", None).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    // This pass, or the runner's scheduled one before it, gave the hold back: once.
    assert!(report["holds_lapsed"].as_u64() <= Some(1), "{report}");
    let (_, body) = bob.call(Method::GET, "/flights/KE-H", None).await;
    assert_eq!(
        (body["available"].as_u64(), body["held"].as_u64()),
        (Some(2), Some(0))
    );
    let (_, mine) = bob.call(Method::GET, "/me/holds", None).await;
    let statuses: Vec<_> = mine["holds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(statuses, vec!["RELEASED", "LAPSED"]);

    // The operator's view of the flight's holds, by status: the lapse, the release, the confirm;
    // a page of one hands out a cursor that reads on. The admin claim is needed, the flight
    // known, the status and the cursor valid.
    let listed = |status: &'static str| {
        let admin = &admin;
        async move {
            let (code, body) = admin
                .call(
                    Method::GET,
                    &format!("/admin/flights/KE-H/holds?status={status}"),
                    None,
                )
                .await;
            assert_eq!(code, StatusCode::OK, "{body}");
            assert_eq!(body["next_cursor"], Value::Null, "{body}");
            body["holds"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| (h["hold_id"].clone(), h["user_id"].clone()))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        listed("LAPSED").await,
        vec![(h3["hold_id"].clone(), json!("bob"))]
    );
    assert_eq!(
        listed("RELEASED").await,
        vec![(h2["hold_id"].clone(), json!("bob"))]
    );
    assert_eq!(
        listed("CONFIRMED").await,
        vec![(h1["hold_id"].clone(), json!("alice"))]
    );
    let (status, held) = admin
        .call(Method::GET, "/admin/flights/KE-H/holds", None)
        .await;
    assert_eq!(
        (status, &held["holds"]),
        (StatusCode::OK, &json!([])),
        "{held}"
    );
    assert_eq!(held["status"], "HELD");
    for (bad, code) in [
        ("status=held", "invalid_status"),
        ("status=HELD&status=LAPSED", "invalid_status"),
        ("status=", "invalid_status"),
        ("cursor=12.x", "invalid_cursor"),
        ("cursor=0001..", "invalid_cursor"),
        ("cursor=0001", "invalid_cursor"),
    ] {
        let (status, body) = admin
            .call(
                Method::GET,
                &format!("/admin/flights/KE-H/holds?{bad}"),
                None,
            )
            .await;
        assert_error(status, &body, 400, code);
    }
    let (status, body) = bob
        .call(Method::GET, "/admin/flights/KE-H/holds", None)
        .await;
    assert_error(status, &body, 403, "forbidden");
    let (status, body) = admin
        .call(Method::GET, "/admin/flights/NOPE/holds", None)
        .await;
    assert_error(status, &body, 404, "not_found");

    // Bad input: a stable 4xx on every hold route.
    let (status, body) = alice
        .call(
            Method::POST,
            "/flights/KE-H/holds",
            Some(json!({"headCount": 0})),
        )
        .await;
    assert_error(status, &body, 400, "invalid_head_count");
    let (status, body) = alice
        .call(
            Method::POST,
            "/flights/KE-H/holds",
            Some(json!({"seats": 1})),
        )
        .await;
    assert_error(status, &body, 400, "invalid_json");
    let (status, body) = alice
        .call(
            Method::POST,
            "/flights/NOPE/holds",
            Some(json!({"headCount": 1})),
        )
        .await;
    assert_error(status, &body, 404, "not_found");
    let (status, body) = alice
        .call(Method::GET, "/flights/KE-H/holds/a%20b", None)
        .await;
    assert_error(status, &body, 404, "not_found");
    let (status, body) = alice.call(Method::GET, "/me/holds?cursor=..", None).await;
    assert_error(status, &body, 400, "invalid_cursor");

    // Every kind of ending this case made is counted (the registry is the process's, shared
    // with the cases running beside this one: at least this case's own).
    let text = reqwest::get(format!("{}/__metrics", stack.api_url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for event in ["held", "confirmed", "released", "lapsed"] {
        let counted = seatgate::metrics::prometheus::sample(
            &text,
            "seatgate_checkout_total",
            &[("event", event)],
        );
        assert!(
            counted >= 1.0,
            "seatgate_checkout_total{{event={event}}} is {counted}"
        );
    }
}

#[tokio::test]
async fn a_waiting_list_is_offered_returned_seats_in_order_and_bad_input_gets_a_clear_4xx() {
    let stack = stack().await;
    let admin = Caller::admin(&stack, "ops");
    let (alice, bob, carol, dave) = (
        Caller::new(&stack, "alice"),
        Caller::new(&stack, "bob"),
        Caller::new(&stack, "carol"),
        Caller::new(&stack, "dave"),
    );
    let flight = json!({"flight_id": "KE-W", "capacity": 2, "hold_ttl_secs": 60,
        "hold_max_secs": 120, "offer_ttl_secs": 1});
    let (status, body) = admin
        .call(Method::POST, "/admin/flights", Some(flight))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    async fn join(who: &Caller<'_>, k: u32) -> (StatusCode, Value) {
        who.call(
            Method::POST,
            "/flights/KE-W/waitlist",
            Some(json!({"headCount": k})),
        )
        .await
    }
    let (status, body) = join(&bob, 2).await;
    assert_error(status, &body, 409, "seats_available");
    let (status, hold) = alice
        .call(
            Method::POST,
            "/flights/KE-W/holds",
            Some(json!({"headCount": 2})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{hold}");
    let (status, b) = join(&bob, 2).await;
    assert_eq!(status, StatusCode::CREATED, "{b}");
    assert_eq!(
        (b["status"].as_str(), b["position"].as_u64()),
        (Some("WAITING"), Some(1))
    );
    assert_eq!(b["offer"], Value::Null);
    let (status, c) = join(&carol, 1).await;
    assert_eq!(
        (status, c["position"].as_u64()),
        (StatusCode::CREATED, Some(2))
    );
    let (status, body) = join(&bob, 1).await;
    assert_error(status, &body, 409, "already_waiting");
    let b_path = format!("/flights/KE-W/waitlist/{}", b["entry_id"].as_str().unwrap());
    let c_path = format!("/flights/KE-W/waitlist/{}", c["entry_id"].as_str().unwrap());
    let (status, body) = carol.call(Method::GET, &b_path, None).await;
    assert_error(status, &body, 404, "not_found");

    // Alice gives her two seats back: they are offered to Bob, first in line, not put on sale.
    let hold_path = format!("/flights/KE-W/holds/{}", hold["hold_id"].as_str().unwrap());
    let (status, body) = alice.call(Method::DELETE, &hold_path, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, b) = bob.call(Method::GET, &b_path, None).await;
    assert_eq!(
        (b["status"].as_str(), b["position"].as_u64()),
        (Some("OFFERED"), None),
        "{b}"
    );
    let offer = format!(
        "/flights/KE-W/holds/{}",
        b["offer"]["hold_id"].as_str().unwrap()
    );
    let (_, c) = carol.call(Method::GET, &c_path, None).await;
    assert_eq!(c["position"].as_u64(), Some(1), "{c}");
    let (_, body) = dave.call(Method::GET, "/flights/KE-W", None).await;
    assert_eq!(
        (body["available"].as_u64(), body["held"].as_u64()),
        (Some(0), Some(2))
    );
    let (status, booking) = bob
        .call(Method::POST, &format!("{offer}/confirm"), None)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{booking}");
    let (status, body) = bob.call(Method::DELETE, &b_path, None).await;
    assert_error(status, &body, 409, "offer_made");

    // Carol leaves once; Dave joins behind nobody.
    let (status, left) = carol.call(Method::DELETE, &c_path, None).await;
    assert_eq!(
        (status, left["status"].as_str()),
        (StatusCode::OK, Some("LEFT"))
    );
    let (status, again) = carol.call(Method::DELETE, &c_path, None).await;
    assert_eq!((status, again), (StatusCode::OK, left));
    let (status, d) = join(&dave, 1).await;
    assert_eq!(
        (status, d["position"].as_u64()),
        (StatusCode::CREATED, Some(1))
    );
    // The operator's view: one waiting, Dave next; the admin claim is needed, the flight known.
    let (status, list) = admin
        .call(Method::GET, "/admin/flights/KE-W/waitlist", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(
        (list["waiting"].as_u64(), &list["oldest"]["entry_id"]),
        (Some(1), &d["entry_id"])
    );
    let (status, body) = dave
        .call(Method::GET, "/admin/flights/KE-W/waitlist", None)
        .await;
    assert_error(status, &body, 403, "forbidden");
    let (status, body) = admin
        .call(Method::GET, "/admin/flights/NOPE/waitlist", None)
        .await;
    assert_error(status, &body, 404, "not_found");

    // Bob cancels: one of his seats is offered to Dave; Dave's one-second offer lapses, and with
    // nobody waiting, a reaper pass puts it on sale.
    let (status, body) = bob
        .call(
            Method::DELETE,
            &format!(
                "/flights/KE-W/bookings/{}",
                booking["booking_id"].as_str().unwrap()
            ),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let d_path = format!("/flights/KE-W/waitlist/{}", d["entry_id"].as_str().unwrap());
    let (_, d) = dave.call(Method::GET, &d_path, None).await;
    assert_eq!(d["status"], "OFFERED", "{d}");
    let (_, body) = dave.call(Method::GET, "/flights/KE-W", None).await;
    assert_eq!(
        (body["available"].as_u64(), body["held"].as_u64()),
        (Some(1), Some(1))
    );
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let (status, report) = admin.call(Method::POST, "/admin/reconcile", None).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    let (_, body) = dave.call(Method::GET, "/flights/KE-W", None).await;
    assert_eq!(
        (body["available"].as_u64(), body["held"].as_u64()),
        (Some(2), Some(0))
    );

    // Bad input: a stable 4xx on every waiting-list route.
    for (body, code) in [
        (json!({"headCount": 0}), "invalid_head_count"),
        (json!({"seats": 1}), "invalid_json"),
    ] {
        let (status, answer) = dave
            .call(Method::POST, "/flights/KE-W/waitlist", Some(body))
            .await;
        assert_error(status, &answer, 400, code);
    }
    let (status, body) = dave
        .call(
            Method::POST,
            "/flights/NOPE/waitlist",
            Some(json!({"headCount": 1})),
        )
        .await;
    assert_error(status, &body, 404, "not_found");
    for method in [Method::GET, Method::DELETE] {
        let (status, body) = dave
            .call(method, "/flights/KE-W/waitlist/a%20b", None)
            .await;
        assert_error(status, &body, 404, "not_found");
    }
    stack.shutdown().await;
}
