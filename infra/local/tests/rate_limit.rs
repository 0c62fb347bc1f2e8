//! The per-user rate limit through the runner's HTTP API: past the budget a confirm, a wait or a
//! booking is `429 rate_limited` with `Retry-After`, other users and routes keep theirs, and a
//! booking answered from the sold-out cache is not counted (it writes nothing, so it must not
//! cost a counter write either).

use reqwest::StatusCode;
use seatgate::config::Timing;
use seatgate_local::{RunnerConfig, Stack, start};
use serde_json::{Value, json};
use std::time::Duration;

const LIMIT: u32 = 3;

async fn stack() -> Stack {
    let timing = Timing {
        rate_limit_requests: LIMIT,
        // Long enough that a slow machine cannot roll the window over mid-test.
        rate_limit_window: Duration::from_secs(600),
        ..Timing::fast()
    };
    start(RunnerConfig {
        timing,
        ..RunnerConfig::ephemeral(None)
    })
    .await
    .expect("stack starts")
}

struct Caller {
    client: reqwest::Client,
    api: String,
    token: String,
}

impl Caller {
    async fn new(api: &str, sub: &str, admin: bool) -> Caller {
        let client = reqwest::Client::new();
        let body: Value = client
            .post(format!("{api}/dev/token"))
            .json(&json!({ "sub": sub, "admin": admin }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        Caller {
            client,
            api: api.to_owned(),
            token: body["token"].as_str().unwrap().to_owned(),
        }
    }

    async fn post(&self, path: &str, body: Value) -> (StatusCode, Option<String>, Value) {
        let resp = self
            .client
            .post(format!("{}{path}", self.api))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_owned());
        (
            status,
            retry_after,
            resp.json().await.unwrap_or(Value::Null),
        )
    }

    async fn book(&self, flight: &str) -> (StatusCode, Option<String>, Value) {
        self.post(
            &format!("/flights/{flight}/bookings"),
            json!({"headCount": 1}),
        )
        .await
    }

    async fn confirm(&self, seat: &str) -> (StatusCode, Option<String>, Value) {
        let (status, _, action) = self
            .post("/actions", json!({"kind": "reserve_seat", "seat_id": seat}))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{action}");
        let id = action["action_id"].as_str().unwrap();
        self.post(&format!("/actions/{id}/confirm"), json!({}))
            .await
    }
}

fn assert_limited(answer: &(StatusCode, Option<String>, Value)) {
    let (status, retry_after, body) = answer;
    assert_eq!(*status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["error"], "rate_limited", "{body}");
    let secs: u64 = retry_after
        .as_deref()
        .expect("a Retry-After header")
        .parse()
        .unwrap();
    assert!((1..=600).contains(&secs), "Retry-After {secs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirms_and_waits_past_the_budget_are_429_and_other_users_keep_theirs() {
    let stack = stack().await;
    let alice = Caller::new(&stack.api_url, "alice", false).await;
    let bob = Caller::new(&stack.api_url, "bob", false).await;
    for i in 0..LIMIT {
        let (status, _, body) = alice.confirm(&format!("RL-{i}")).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    }
    assert_limited(&alice.confirm("RL-9").await);
    let metrics = alice
        .client
        .get(format!("{}/__metrics", alice.api))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("seatgate_rate_limited_total{")
                && l.contains(r#"route="confirm""#)
                && !l.ends_with(" 0")),
        "the refusal is counted:\n{metrics}"
    );
    let (status, _, body) = bob.confirm("RL-9").await;
    assert_eq!(
        status,
        StatusCode::ACCEPTED,
        "another user's budget: {body}"
    );

    // Waits have a budget of their own.
    let until = seatgate::domain::Millis::now()
        .plus(Duration::from_secs(3600))
        .to_rfc3339();
    for i in 0..LIMIT {
        let (status, _, body) = alice
            .post(
                "/waits",
                json!({"seat_id": format!("RW-{i}"), "until": until}),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    }
    assert_limited(
        &alice
            .post("/waits", json!({"seat_id": "RW-9", "until": until}))
            .await,
    );
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookings_past_the_budget_are_429_but_sold_out_answers_cost_nothing() {
    let stack = stack().await;
    let admin = Caller::new(&stack.api_url, "ops", true).await;
    let alice = Caller::new(&stack.api_url, "alice", false).await;
    for (flight, capacity) in [("RL-1", 100), ("RL-2", 1)] {
        let (status, _, body) = admin
            .post(
                "/admin/flights",
                json!({"flight_id": flight, "capacity": capacity}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    // RL-2 sells out to bob; alice's doomed bookings then come from the sold-out cache.
    let bob = Caller::new(&stack.api_url, "bob", false).await;
    assert_eq!(bob.book("RL-2").await.0, StatusCode::CREATED);
    let (status, _, body) = alice.book("RL-2").await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::CONFLICT, Some("sold_out"))
    );
    for _ in 0..2 * LIMIT {
        let (status, _, body) = alice.book("RL-2").await;
        assert_eq!(status, StatusCode::CONFLICT, "never limited: {body}");
    }
    // A booking is counted inside its own transaction: the first sold-out answer's (it found the
    // shards empty) was refused and spent nothing, the cached ones never wrote, so alice has all
    // LIMIT bookings left.
    for _ in 0..LIMIT {
        let (status, _, body) = alice.book("RL-1").await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    assert_limited(&alice.book("RL-1").await);
    stack.shutdown().await;
}
