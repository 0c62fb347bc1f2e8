//! The runner's pages and the routes behind them, over HTTP without a browser (the browser
//! tests, `scripts/browser-tests.sh`, drive the pages themselves): the files are served with
//! their types and a strict content security policy, only to a loopback `Host`; the demo setup
//! registers users with the upstream and seeds the demo room once, leaving a room someone else
//! put there alone; `GET /__ops` reports the breaker, queues, holds and the terminal intent of
//! a reservation just made.

use reqwest::StatusCode;
use seatgate::config::Timing;
use seatgate_local::ui::{DEMO_ROOM, demo_seats};
use seatgate_local::{RunnerConfig, start};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

mod common;
use common::{confirm_seat, dev_token, put_credential};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_are_served_with_their_types_only_to_a_loopback_host() {
    let stack = start(RunnerConfig::ephemeral(None)).await.unwrap();
    let client = reqwest::Client::new();
    let api = &stack.api_url;
    for (path, kind, needle) in [
        ("/", "text/html", "Burst: many users, one seat"),
        ("/ops", "text/html", "Upstream calls"),
        ("/__ui/app.css", "text/css", ":focus-visible"),
        ("/__ui/common.js", "text/javascript", "parseMetrics"),
        ("/__ui/seatmap.js", "text/javascript", "/__demo/setup"),
        ("/__ui/ops.js", "text/javascript", "/__ops"),
    ] {
        let resp = client.get(format!("{api}{path}")).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{path}");
        let headers = resp.headers().clone();
        assert!(
            headers["content-type"].to_str().unwrap().starts_with(kind),
            "{path}: {:?}",
            headers["content-type"]
        );
        let csp = headers["content-security-policy"].to_str().unwrap();
        assert!(
            csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
            "{csp}"
        );
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert!(resp.text().await.unwrap().contains(needle), "{path}");
    }
    // A page that rebinds its DNS name to 127.0.0.1 sends its own name as the Host.
    for path in ["/", "/ops", "/__ops", "/__ui/seatmap.js"] {
        let resp = client
            .get(format!("{api}{path}"))
            .header("host", "seatgate.evil.example")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::FORBIDDEN, "{path}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"], "forbidden");
    }
    let resp = client
        .post(format!("{api}/__demo/setup"))
        .header("host", "seatgate.evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    // Another method is a 405 with Allow, like the API's routes.
    let resp = client.post(format!("{api}/ops")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(resp.headers()["allow"], "GET, HEAD");
    let resp = client
        .get(format!("{api}/__demo/setup"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_seeds_the_room_once_and_ops_reports_a_reservation() {
    let stack = start(RunnerConfig {
        timing: Timing::fast(),
        ..RunnerConfig::ephemeral(None)
    })
    .await
    .unwrap();
    let sim = stack.upstream.clone().unwrap();
    let client = reqwest::Client::new();
    let api = &stack.api_url;
    let post = |path: &str, body: Value| client.post(format!("{api}{path}")).json(&body).send();

    // Bad input is a 400 with the API's codes, never a registration.
    for bad in [
        json!({ "users": 0 }),
        json!({ "users": 1001 }),
        json!({ "prefix": "a b" }),
        json!({ "prefix": "" }),
        json!({ "surprise": 1 }),
    ] {
        let resp = post("/__demo/setup", bad.clone()).await.unwrap();
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "{bad}");
    }
    assert!(!sim.has_room(DEMO_ROOM));

    // The default: five users u1..u5 and the demo room.
    let resp = post("/__demo/setup", json!({})).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let setup: Value = resp.json().await.unwrap();
    assert_eq!(setup["room_id"], DEMO_ROOM);
    assert_eq!(setup["seats"].as_array().unwrap().len(), 40);
    let users: Vec<&str> = setup["users"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["user_id"].as_str().unwrap())
        .collect();
    assert_eq!(users, ["u1", "u2", "u3", "u4", "u5"]);
    assert!(sim.has_room(DEMO_ROOM));
    // A burst's fresh users, with their prefix.
    let burst: Value = post("/__demo/setup", json!({ "users": 3, "prefix": "b7-u" }))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(burst["users"][2]["user_id"], "b7-u3");
    assert_eq!(burst["users"][2]["credential"], "cred-b7-u3");

    // The seeded room reads through the API; a reservation as u1 goes through.
    let t = dev_token(&client, api, "u1", false).await.unwrap();
    let room: Value = client
        .get(format!("{api}/rooms/{DEMO_ROOM}/seats"))
        .bearer_auth(&t)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(room["seats"].as_array().unwrap().len(), demo_seats().len());
    put_credential(&client, api, &t, "cred-u1").await.unwrap();
    let intent_id = confirm_seat(&client, api, &t, "C-3").await.unwrap();

    // Its terminal event reaches the ops figures once the event pipeline has carried it.
    let deadline = Instant::now() + Duration::from_secs(15);
    let ops = loop {
        let ops: Value = client
            .get(format!("{api}/__ops"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if ops["recent"]
            .as_array()
            .is_some_and(|r| r.iter().any(|e| e["intent_id"] == intent_id.as_str()))
        {
            break ops;
        }
        assert!(Instant::now() < deadline, "no terminal event in {ops}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let event = &ops["recent"][0];
    assert_eq!(event["status"], "SUCCEEDED");
    assert_eq!(event["seat_id"], "C-3");
    assert_eq!(event["user_id"], "u1");
    assert_eq!(ops["breaker"]["phase"], "closed");
    assert_eq!(ops["queues"]["seats"]["dead"], 0);
    assert_eq!(ops["queues"]["events_dead"], 0);
    assert_eq!(ops["seat_claims"]["room_id"], DEMO_ROOM);
    assert!(
        ops["admin_routes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == "POST /admin/flights"),
        "{ops}"
    );
    assert_eq!(sim.occupant("C-3").as_deref(), Some("u1"));

    // Someone's own room of that id is left as it is.
    sim.reset();
    sim.put_room(DEMO_ROOM, &["Z-1"]);
    let again: Value = post("/__demo/setup", json!({ "users": 1 }))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(again["users"][0]["user_id"], "u1");
    let stats = sim.stats();
    assert_eq!(
        stats.get("GET /api/rooms"),
        0,
        "seeding asks no counted call"
    );
    let room: Value = client
        .get(format!(
            "{}/api/rooms/{DEMO_ROOM}/seats",
            stack.upstream_url
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        room["seats"],
        json!([{ "seat_id": "Z-1", "occupied": false }])
    );
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_users_at_start_also_seed_the_room_and_the_page_offers_them() {
    let stack = start(RunnerConfig {
        demo_users: 30,
        ..RunnerConfig::ephemeral(None)
    })
    .await
    .unwrap();
    let sim = stack.upstream.clone().unwrap();
    assert!(sim.has_room(DEMO_ROOM), "seeded at start");
    // The picker offers at most 20 of them; all 30 can reserve (registered at start).
    let setup: Value = reqwest::Client::new()
        .post(format!("{}/__demo/setup", stack.api_url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(setup["users"].as_array().unwrap().len(), 20);
    let charge = reqwest::Client::new()
        .get(format!("{}/api/charge", stack.upstream_url))
        .bearer_auth("cred-u30")
        .send()
        .await
        .unwrap();
    assert_eq!(
        charge.status(),
        StatusCode::NOT_FOUND,
        "u30's credential is accepted (no charge yet), not refused"
    );
    stack.shutdown().await;
}
