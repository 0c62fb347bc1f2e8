//! `GET /__metrics` on the runner: after one confirm flow through the simulator, the counters
//! say what happened (one hold, one reserve POST, one attempt settled, one SUCCEEDED intent),
//! and a replayed confirm counts as a replay.
//!
//! Its own test binary (so its own process): the registry is process-wide, and another test
//! running beside it would add to the counts.

use reqwest::StatusCode;
use seatgate::config::Timing;
use seatgate::metrics::prometheus::sample;
use seatgate_local::{RunnerConfig, start};
use seatgate_testkit::setup::POSTS;
use std::time::Duration;

mod common;
use common::{dev_token, prepare_seat, put_credential};

async fn metrics(client: &reqwest::Client, api: &str) -> String {
    let resp = client.get(format!("{api}/__metrics")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        resp.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    resp.text().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_flow_shows_up_in_the_counters() {
    let stack = start(RunnerConfig {
        timing: Timing::fast(),
        ..RunnerConfig::ephemeral(None)
    })
    .await
    .expect("stack starts");
    let sim = stack.upstream.clone().expect("an in-process simulator");
    sim.register_user("u1", "cred-u1");
    let client = reqwest::Client::new();
    let api = &stack.api_url;

    // Unauthenticated, like /dev/token; nothing recorded yet but what starting took.
    let before = metrics(&client, api).await;
    assert_eq!(sample(&before, "seatgate_reserve_posts_total", &[]), 0.0);

    let t = dev_token(&client, api, "u1", false).await.unwrap();
    put_credential(&client, api, &t, "cred-u1").await.unwrap();
    let action_id = prepare_seat(&client, api, &t, "M-1").await.unwrap();
    let confirm = format!("{api}/actions/{action_id}/confirm");
    let first = client.post(&confirm).bearer_auth(&t).send().await.unwrap();
    assert_eq!(first.status(), StatusCode::ACCEPTED);
    let again = client.post(&confirm).bearer_auth(&t).send().await.unwrap();
    assert_eq!(again.status(), StatusCode::OK);

    // The counters follow the intent to its end.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = metrics(&client, api).await;
        let terminal = sample(&text, "seatgate_intents_terminal_total", &[]);
        if terminal >= 1.0 {
            break text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no terminal intent counted:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let local = [("service", "local")];
    assert_eq!(
        sample(
            &text,
            "seatgate_intents_terminal_total",
            &[
                ("service", "local"),
                ("status", "SUCCEEDED"),
                ("reason", "reserved")
            ]
        ),
        1.0,
        "{text}"
    );
    assert_eq!(sample(&text, "seatgate_intents_terminal_total", &[]), 1.0);
    assert_eq!(
        sample(&text, "seatgate_reserve_posts_total", &[("outcome", "ok")]),
        1.0
    );
    assert_eq!(sample(&text, "seatgate_reserve_posts_total", &local), 1.0);
    assert_eq!(sim.stats().get(POSTS), 1, "the simulator agrees");
    assert_eq!(
        sample(
            &text,
            "seatgate_upstream_calls_total",
            &[("route", "reserve"), ("outcome", "ok")]
        ),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            "seatgate_attempts_settled_total",
            &[("outcome", "reserved")]
        ),
        1.0
    );
    assert_eq!(
        sample(&text, "seatgate_seat_claims_taken_total", &local),
        1.0
    );
    assert_eq!(
        sample(&text, "seatgate_confirms_total", &[("kind", "fresh")]),
        1.0
    );
    assert_eq!(
        sample(&text, "seatgate_confirms_total", &[("kind", "replay")]),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            "seatgate_time_to_terminal_milliseconds_count",
            &[("status", "SUCCEEDED")]
        ),
        1.0
    );
    assert!(
        text.contains("# TYPE seatgate_time_to_terminal_milliseconds histogram\n"),
        "{text}"
    );
    stack.shutdown().await;
}
