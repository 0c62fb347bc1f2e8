//! End-to-end tests of the simulator over real HTTP, the way the worker, reaper and benchmarks
//! talk to it: a server on 127.0.0.1:0 and a plain reqwest client.
//!
//! Each test spawns its own simulator so tests can run in parallel without sharing seats, faults
//! or counts.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use reqwest::{Client, StatusCode};
use serde_json::{Value, json};
use upstream_sim::{Faults, Simulator, Stats};

/// Long enough never to trip on a loaded 2-core machine, short enough that a hang fails the test.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

struct Harness {
    sim: Simulator,
    base: String,
    http: Client,
}

impl Harness {
    async fn start() -> Self {
        let sim = Simulator::new();
        let addr = sim
            .clone()
            .spawn(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("spawn simulator");
        let http = Client::builder()
            .timeout(CLIENT_TIMEOUT)
            .build()
            .expect("client");
        sim.register_user("u1", "cred-1");
        sim.register_user("u2", "cred-2");
        Self {
            sim,
            base: format!("http://{addr}"),
            http,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn reserve(&self, credential: &str, seat_id: &str) -> (StatusCode, Value) {
        let response = self
            .http
            .post(self.url("/api/reservations"))
            .bearer_auth(credential)
            .json(&json!({ "seat_id": seat_id }))
            .send()
            .await
            .expect("reserve request");
        let status = response.status();
        (status, response.json().await.expect("json body"))
    }

    async fn charge(&self, credential: &str) -> (StatusCode, Value) {
        let response = self
            .http
            .get(self.url("/api/charge"))
            .bearer_auth(credential)
            .send()
            .await
            .expect("charge request");
        let status = response.status();
        (status, response.json().await.expect("json body"))
    }

    async fn seat(&self, seat_id: &str) -> (StatusCode, Value) {
        let response = self
            .http
            .get(self.url(&format!("/api/seats/{seat_id}")))
            .send()
            .await
            .expect("seat request");
        let status = response.status();
        (status, response.json().await.expect("json body"))
    }

    async fn stats(&self) -> Stats {
        self.http
            .get(self.url("/__admin/stats"))
            .send()
            .await
            .expect("stats request")
            .json()
            .await
            .expect("stats body")
    }

    async fn set_faults(&self, faults: Value) {
        let response = self
            .http
            .post(self.url("/__admin/faults"))
            .json(&faults)
            .send()
            .await
            .expect("faults request");
        assert_eq!(response.status(), StatusCode::NO_CONTENT);
    }
}

#[tokio::test]
async fn reserve_succeeds_once_and_is_not_idempotent() {
    let h = Harness::start().await;

    let (status, body) = h.reserve("cred-1", "A-1").await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(body["seat_id"], "A-1");
    assert!(!body["charge_id"].as_str().unwrap().is_empty());
    assert_eq!(h.sim.occupant("A-1").as_deref(), Some("u1"));

    // The same user asking again for the same seat is a lost race, not a replay.
    let (status, body) = h.reserve("cred-1", "A-1").await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body, json!({ "error": "seat_taken" }));

    let (status, body) = h.reserve("cred-2", "A-1").await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body, json!({ "error": "seat_taken" }));

    let (status, body) = h.reserve("cred-1", "B-2").await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body, json!({ "error": "already_charged" }));
    assert_eq!(h.sim.occupant("B-2"), None);

    let (status, body) = h.seat("A-1").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({ "seat_id": "A-1", "occupied": true }));
    let (_, body) = h.seat("B-2").await;
    assert_eq!(body, json!({ "seat_id": "B-2", "occupied": false }));
}

#[tokio::test]
async fn bad_credentials_are_401_and_change_nothing() {
    let h = Harness::start().await;

    let no_header = h
        .http
        .post(h.url("/api/reservations"))
        .json(&json!({ "seat_id": "A-1" }))
        .send()
        .await
        .unwrap();
    assert_eq!(no_header.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        no_header.json::<Value>().await.unwrap(),
        json!({ "error": "unauthorized" })
    );

    let (status, body) = h.reserve("not-a-credential", "A-1").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body, json!({ "error": "unauthorized" }));

    let wrong_scheme = h
        .http
        .post(h.url("/api/reservations"))
        .basic_auth("u1", Some("cred-1"))
        .json(&json!({ "seat_id": "A-1" }))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_scheme.status(), StatusCode::UNAUTHORIZED);

    let (status, _) = h.charge("nope").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(h.sim.occupant("A-1"), None);

    // Re-registering replaces the credential: the old one stops working.
    h.sim.register_user("u1", "cred-1b");
    let (status, _) = h.reserve("cred-1", "A-1").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = h.reserve("cred-1b", "A-1").await;
    assert_eq!(status, StatusCode::CREATED);
}

#[tokio::test]
async fn malformed_bodies_are_400() {
    let h = Harness::start().await;
    for body in ["not json", "{}", r#"{"seat_id": 7}"#, r#"{"seat_id": ""}"#] {
        let response = h
            .http
            .post(h.url("/api/reservations"))
            .bearer_auth("cred-1")
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "body {body:?}");
    }
    assert_eq!(h.stats().await.get("POST /api/reservations"), 4);

    let response = h
        .http
        .post(h.url("/__admin/faults"))
        .body("{ nope")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn charge_read_release_and_admin_users() {
    let h = Harness::start().await;
    let response = h
        .http
        .post(h.url("/__admin/users"))
        .json(&json!({ "users": [{ "user_id": "u3", "credential": "cred-3" }] }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NO_CONTENT);

    let (status, body) = h.charge("cred-3").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, json!({ "error": "no_charge" }));

    let (_, reserved) = h.reserve("cred-3", "C-3").await;
    let (status, body) = h.charge("cred-3").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, reserved);

    let release = |credential: &'static str| {
        h.http
            .delete(h.url("/api/reservations/current"))
            .bearer_auth(credential)
            .send()
    };
    assert_eq!(
        release("cred-3").await.unwrap().status(),
        StatusCode::NO_CONTENT
    );
    assert_eq!(h.sim.occupant("C-3"), None);
    assert_eq!(
        release("cred-3").await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        release("bogus").await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    let (status, _) = h.charge("cred-3").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Freed seat and uncharged user can reserve again, with a fresh charge.
    let (status, again) = h.reserve("cred-3", "C-3").await;
    assert_eq!(status, StatusCode::CREATED);
    assert_ne!(again["charge_id"], reserved["charge_id"]);
    assert_eq!(h.stats().await.get("DELETE /api/reservations"), 3);
}

#[tokio::test]
async fn stats_count_every_request_that_reaches_a_route() {
    let h = Harness::start().await;
    let zero = h.stats().await;
    for key in [
        "POST /api/reservations",
        "GET /api/charge",
        "GET /api/seats",
        "DELETE /api/reservations",
    ] {
        assert_eq!(zero.calls.get(key), Some(&0), "{key} present at 0");
    }

    h.reserve("cred-1", "A-1").await; // 201
    h.reserve("cred-2", "A-1").await; // 409
    h.reserve("bad", "A-1").await; // 401
    h.charge("cred-1").await;
    h.charge("cred-2").await; // 404
    h.seat("A-1").await;
    h.seat("A-2").await;
    h.seat("A-3").await;
    h.set_faults(json!({ "error_rate": 1.0 })).await;
    h.reserve("cred-2", "A-9").await; // 503 injected, still counted

    let stats = h.stats().await;
    assert_eq!(stats.get("POST /api/reservations"), 4);
    assert_eq!(stats.get("GET /api/charge"), 2);
    assert_eq!(stats.get("GET /api/seats"), 3);
    assert_eq!(stats.get("DELETE /api/reservations"), 0);
    assert_eq!(stats, h.sim.stats());
}

#[tokio::test]
async fn outage_window_refuses_then_recovers() {
    let h = Harness::start().await;
    h.set_faults(json!({ "outage_for_ms": 1_000 })).await;
    let started = Instant::now();

    let (status, body) = h.reserve("cred-1", "A-1").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body, json!({ "error": "outage" }));
    assert_eq!(h.sim.occupant("A-1"), None, "an outage does nothing");
    let (status, _) = h.seat("A-1").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        started.elapsed() < Duration::from_millis(1_000),
        "checked inside the window"
    );

    tokio::time::sleep_until((started + Duration::from_millis(1_050)).into()).await;
    let (status, _) = h.reserve("cred-1", "A-1").await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(h.stats().await.get("POST /api/reservations"), 2);
}

#[tokio::test]
async fn error_rate_one_fails_everything_it_targets() {
    let h = Harness::start().await;
    h.set_faults(json!({ "error_rate": 1.0, "routes": ["POST /api/reservations"] }))
        .await;
    for _ in 0..5 {
        let (status, body) = h.reserve("cred-1", "A-1").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body, json!({ "error": "injected" }));
    }
    assert_eq!(h.sim.occupant("A-1"), None);
    // Other routes are untouched by a targeted fault.
    let (status, _) = h.seat("A-1").await;
    assert_eq!(status, StatusCode::OK);

    h.sim.set_faults(Faults {
        error_rate: 1.0,
        ..Faults::default()
    });
    let (status, _) = h.seat("A-1").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);

    h.set_faults(json!({})).await;
    let (status, _) = h.reserve("cred-1", "A-1").await;
    assert_eq!(status, StatusCode::CREATED);
}

#[tokio::test]
async fn dropped_response_still_commits() {
    let h = Harness::start().await;
    // Warm a keep-alive connection first, so the drop also works on a reused connection.
    h.seat("warm").await;
    h.set_faults(json!({ "drop_response_after_commit": 1 }))
        .await;

    let started = Instant::now();
    let outcome = h
        .http
        .post(h.url("/api/reservations"))
        .bearer_auth("cred-1")
        .json(&json!({ "seat_id": "A-1" }))
        .send()
        .await;
    let err = match outcome {
        Ok(response) => panic!("expected a transport error, got {}", response.status()),
        Err(err) => err,
    };
    // The server resets the connection after committing: a transport error on the request.
    assert!(err.is_request(), "{err:?}");
    assert!(
        !err.is_timeout(),
        "the connection is aborted, not left hanging: {err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));

    // The write happened: the charge is there and the seat is taken.
    let (status, charge) = h.charge("cred-1").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(charge["seat_id"], "A-1");
    assert_eq!(h.sim.occupant("A-1").as_deref(), Some("u1"));
    let (_, seat) = h.seat("A-1").await;
    assert_eq!(seat["occupied"], true);
    // One request reached the route; the client did not silently retry it.
    assert_eq!(h.stats().await.get("POST /api/reservations"), 1);

    // A retry by the caller is what the fragile upstream punishes.
    let (status, body) = h.reserve("cred-1", "A-1").await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["error"], "seat_taken");

    // The drop was used up: the next success answers normally.
    let (status, _) = h.reserve("cred-2", "B-1").await;
    assert_eq!(status, StatusCode::CREATED);
}

#[tokio::test]
async fn drops_only_count_successful_reservations() {
    let h = Harness::start().await;
    h.sim.register_user("u3", "cred-3");
    h.sim.set_faults(Faults {
        drop_response_after_commit: 2,
        ..Faults::default()
    });
    // Failed reservations do not consume a drop.
    let (status, _) = h.reserve("bad", "A-1").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    for (credential, seat) in [("cred-1", "A-1"), ("cred-2", "A-2")] {
        let result = h
            .http
            .post(h.url("/api/reservations"))
            .bearer_auth(credential)
            .json(&json!({ "seat_id": seat }))
            .send()
            .await;
        assert!(result.is_err(), "{seat} answer should be dropped");
    }
    let (status, _) = h.reserve("cred-3", "A-3").await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(h.sim.occupant("A-1").as_deref(), Some("u1"));
    assert_eq!(h.sim.occupant("A-2").as_deref(), Some("u2"));
}

#[tokio::test]
async fn reset_clears_everything_including_users() {
    let h = Harness::start().await;
    h.reserve("cred-1", "A-1").await;
    h.sim.set_faults(Faults {
        latency_ms: 5_000,
        ..Faults::default()
    });

    let response = h.http.post(h.url("/__admin/reset")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::NO_CONTENT);

    let stats = h.stats().await;
    assert!(stats.calls.values().all(|&n| n == 0), "{stats:?}");
    assert_eq!(h.sim.occupant("A-1"), None);
    let started = Instant::now();
    let (_, seat) = h.seat("A-1").await;
    assert_eq!(seat["occupied"], false);
    assert!(started.elapsed() < Duration::from_secs(1), "faults cleared");
    let (status, _) = h.charge("cred-1").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "users cleared");

    h.sim.register_user("u1", "cred-1");
    let (status, _) = h.reserve("cred-1", "A-1").await;
    assert_eq!(status, StatusCode::CREATED);
}

#[tokio::test]
async fn latency_is_added_where_targeted() {
    let h = Harness::start().await;
    h.set_faults(json!({ "latency_ms": 300, "jitter_ms": 50, "routes": ["GET /api/seats"] }))
        .await;

    let started = Instant::now();
    let (status, _) = h.seat("A-1").await;
    assert_eq!(status, StatusCode::OK);
    let slow = started.elapsed();
    assert!(slow >= Duration::from_millis(300), "{slow:?}");

    let started = Instant::now();
    let (status, _) = h.charge("cred-1").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(started.elapsed() < Duration::from_millis(300));

    // A caller that gives up during the latency leaves no reservation behind.
    h.set_faults(json!({ "latency_ms": 500 })).await;
    let impatient = h
        .http
        .post(h.url("/api/reservations"))
        .timeout(Duration::from_millis(100))
        .bearer_auth("cred-1")
        .json(&json!({ "seat_id": "A-1" }))
        .send()
        .await;
    assert!(impatient.unwrap_err().is_timeout());
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(h.sim.occupant("A-1"), None);
}

#[tokio::test]
async fn concurrent_reservations_for_one_seat_have_one_winner() {
    let h = Harness::start().await;
    let users = 40;
    for i in 0..users {
        h.sim.register_user(&format!("r{i}"), &format!("rc-{i}"));
    }
    let attempts = (0..users).map(|i| {
        let http = h.http.clone();
        let url = h.url("/api/reservations");
        tokio::spawn(async move {
            http.post(url)
                .bearer_auth(format!("rc-{i}"))
                .json(&json!({ "seat_id": "HOT" }))
                .send()
                .await
                .unwrap()
                .status()
        })
    });
    let mut created = 0;
    let mut conflicts = 0;
    for attempt in attempts.collect::<Vec<_>>() {
        match attempt.await.unwrap() {
            StatusCode::CREATED => created += 1,
            StatusCode::CONFLICT => conflicts += 1,
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!((created, conflicts), (1, users - 1));
    assert_eq!(h.stats().await.get("POST /api/reservations"), users as u64);
}

#[tokio::test]
async fn bare_router_serves_the_api() {
    // Others may mount `router()` on their own server; everything but the connection abort works.
    let sim = Simulator::new();
    sim.register_user("u1", "cred-1");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = sim.router();
    tokio::spawn(async move { axum_serve(listener, router).await });
    let response = Client::new()
        .post(format!("http://{addr}/api/reservations"))
        .bearer_auth("cred-1")
        .json(&json!({ "seat_id": "A-1" }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    assert_eq!(sim.occupant("A-1").as_deref(), Some("u1"));
}

async fn axum_serve(listener: tokio::net::TcpListener, router: axum::Router) {
    axum::serve(listener, router).await.unwrap();
}

#[tokio::test]
async fn rate_limit_window_answers_429_with_retry_after_then_recovers() {
    let h = Harness::start().await;
    h.set_faults(json!({ "rate_limited_for_ms": 800, "retry_after_secs": 3 }))
        .await;
    let started = Instant::now();
    let resp = h
        .http
        .post(h.url("/api/reservations"))
        .bearer_auth("cred-1")
        .json(&json!({ "seat_id": "R-1" }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        resp.headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("3")
    );
    assert_eq!(
        resp.json::<serde_json::Value>().await.unwrap(),
        json!({ "error": "rate_limited" })
    );
    assert_eq!(
        h.sim.occupant("R-1"),
        None,
        "a rate-limited write does nothing"
    );
    assert!(
        started.elapsed() < Duration::from_millis(800),
        "checked inside the window"
    );

    tokio::time::sleep_until((started + Duration::from_millis(850)).into()).await;
    let (status, _) = h.reserve("cred-1", "R-1").await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(h.stats().await.get("POST /api/reservations"), 2);
}
