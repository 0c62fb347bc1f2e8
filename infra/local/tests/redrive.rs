//! `POST /admin/dead-letters/redrive`, `GET /admin/queues` and the queue depth of
//! `GET /admin/seats/{id}` through the runner's HTTP API, on both backends: dead letters over
//! several seat groups and webhook deliveries, visible to the operator before the redrive, two
//! operators redriving at once, every message back in its queue exactly once.
//!
//! The stacks serve the API only (`Role::Api`), so no worker takes the redriven messages before
//! the test counts them. The AWS case needs the emulators (`eval "$(scripts/emulators.sh
//! start)"`) and fails saying so without them.

use reqwest::{Client, Method, StatusCode};
use seatgate::domain::{IntentEvent, SeatMessage};
use seatgate::ports::{EventQueue, HandBack, QueueConsumer, SeatQueue};
use seatgate_local::{Role, RunnerConfig, Stack, start};
use seatgate_testkit::redrive;
use seatgate_testkit::setup;
use serde_json::Value;
use std::time::Duration;

async fn call(
    stack: &Stack,
    user: &str,
    admin: bool,
    method: Method,
    path: &str,
) -> (StatusCode, Value) {
    let resp = Client::new()
        .request(method, format!("{}{path}", stack.api_url))
        .bearer_auth(stack.token(user, admin).unwrap())
        .send()
        .await
        .unwrap();
    let status = resp.status();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// Receives each message and hands it straight back until the queue parks it as dead (its max
/// receive count passed): what a poison message does to a worker.
async fn receive_until_dead(queue: &(impl QueueConsumer + HandBack)) {
    for _ in 0..100 {
        let got = queue.receive(100).await.unwrap();
        if got.is_empty() {
            return;
        }
        let receipts: Vec<String> = got.into_iter().map(|d| d.receipt).collect();
        queue.hand_back(&receipts, Duration::ZERO).await.unwrap();
    }
    panic!("messages never went dead");
}

async fn bury(stack: &Stack, messages: &[SeatMessage], events: &[IntentEvent]) {
    if let Some(b) = stack.backend.embedded() {
        for m in messages {
            b.send(m).await.unwrap();
        }
        receive_until_dead(b).await;
        let queue = b.events();
        for e in events {
            queue.enqueue(&e.clone().into()).await.unwrap();
        }
        receive_until_dead(&queue).await;
        return;
    }
    // On SQS the dead-letter queues are ordinary queues: sent to directly.
    let b = stack.backend.aws().unwrap();
    redrive::bury_on_sqs(
        &b.sqs,
        b.dead_letter_url
            .as_deref()
            .expect("the seat dead-letter queue"),
        b.event_dead_letter_url
            .as_deref()
            .expect("the event dead-letter queue"),
        messages,
        events,
    )
    .await;
}

async fn drain_seats(stack: &Stack, expected: usize) -> Vec<String> {
    let patience = Duration::from_secs(60);
    match stack.backend.embedded() {
        Some(b) => redrive::drain(b, expected, patience).await,
        None => redrive::drain(&stack.backend.aws().unwrap().queue, expected, patience).await,
    }
}

async fn redrive_through_the_api(stack: Stack) {
    // The figure: 100 dead letters (ten seat groups of ten) redriven twice at once.
    let messages = redrive::seat_messages(10, 10);
    let events = redrive::events(20);
    let seat = messages[0].seat_id.to_string();

    let (status, body) = call(
        &stack,
        "alice",
        false,
        Method::POST,
        "/admin/dead-letters/redrive",
    )
    .await;
    assert_eq!(
        (status, &body["error"]),
        (StatusCode::FORBIDDEN, &"forbidden".into()),
        "{body}"
    );

    let (status, body) = call(&stack, "alice", false, Method::GET, "/admin/queues").await;
    assert_eq!(
        (status, &body["error"]),
        (StatusCode::FORBIDDEN, &"forbidden".into()),
        "{body}"
    );

    bury(&stack, &messages, &events).await;
    // The operator sees both kinds of dead letter before moving them: a webhook delivery that
    // ran out of attempts is visible only here.
    let (status, depths) = call(&stack, "ops", true, Method::GET, "/admin/queues").await;
    assert_eq!(status, StatusCode::OK, "{depths}");
    assert_eq!(depths["seat_messages"]["dead"], 100, "{depths}");
    assert_eq!(depths["webhook_deliveries"]["dead"], 20, "{depths}");
    let (status, state) = call(
        &stack,
        "ops",
        true,
        Method::GET,
        &format!("/admin/seats/{seat}"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{state}");
    assert_eq!(state["queue"]["dead"], 100, "{state}");

    let (a, b) = tokio::join!(
        call(
            &stack,
            "ops",
            true,
            Method::POST,
            "/admin/dead-letters/redrive"
        ),
        call(
            &stack,
            "ops2",
            true,
            Method::POST,
            "/admin/dead-letters/redrive"
        ),
    );
    // One redrive at a time: the other call either came after (and moved nothing) or was
    // refused while the first held the lease; either way each dead letter moved once.
    let mut moved = (0, 0);
    let mut answered = 0;
    for (status, body) in [&a, &b] {
        match *status {
            StatusCode::OK => {
                answered += 1;
                moved.0 += body["seat_messages"].as_u64().unwrap();
                moved.1 += body["webhook_deliveries"].as_u64().unwrap();
                assert_eq!(body["more"], false, "{body}");
            }
            StatusCode::CONFLICT => {
                assert_eq!(body["error"], "redrive_in_progress", "{body}");
            }
            other => panic!("a redrive answered {other}: {body}"),
        }
    }
    assert!(answered >= 1, "{} {}", a.1, b.1);
    assert_eq!(moved, (100, 20), "{} {}", a.1, b.1);

    let (_, state) = call(
        &stack,
        "ops",
        true,
        Method::GET,
        &format!("/admin/seats/{seat}"),
    )
    .await;
    assert_eq!(state["queue"]["dead"], 0, "{state}");
    assert_eq!(state["queue"]["ready"], 100, "{state}");
    let (_, depths) = call(&stack, "ops", true, Method::GET, "/admin/queues").await;
    assert_eq!(depths["webhook_deliveries"]["dead"], 0, "{depths}");
    assert_eq!(depths["webhook_deliveries"]["ready"], 20, "{depths}");

    let arrived = drain_seats(&stack, 100).await;
    assert_eq!(
        arrived.len(),
        100,
        "each dead letter arrived back exactly once"
    );
    let mut want: Vec<String> = messages
        .iter()
        .map(|m| serde_json::to_string(m).unwrap())
        .collect();
    let mut got = arrived.clone();
    want.sort();
    got.sort();
    assert_eq!(got, want);

    let (status, again) = call(
        &stack,
        "ops",
        true,
        Method::POST,
        "/admin/dead-letters/redrive",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(
        (&again["seat_messages"], &again["webhook_deliveries"]),
        (&0.into(), &0.into())
    );
    stack.shutdown().await;
}

/// While another redrive holds the lease, a redrive is refused with `409 redrive_in_progress`
/// and a `Retry-After`, and moves nothing; once the lease is released it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redrive_while_another_holds_the_lease_is_refused_and_moves_nothing() {
    use seatgate::ports::OperatorLeases;
    use seatgate::service::admin::{REDRIVE_LEASE, REDRIVE_LEASE_NAME};
    let mut config = RunnerConfig::ephemeral(None);
    config.timing = seatgate::config::Timing::fast();
    config.role = Role::Api;
    let stack = start(config).await.expect("stack starts");
    let b = stack.backend.embedded().unwrap().clone();
    bury(&stack, &redrive::seat_messages(2, 3), &[]).await;
    let now = seatgate::domain::Millis::now();
    assert!(
        b.take_lease(
            REDRIVE_LEASE_NAME,
            "someone-else",
            now,
            now.plus(REDRIVE_LEASE)
        )
        .await
        .unwrap()
    );

    let resp = Client::new()
        .post(format!("{}/admin/dead-letters/redrive", stack.api_url))
        .bearer_auth(stack.token("ops", true).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CONFLICT);
    assert!(resp.headers().contains_key("retry-after"));
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"], "redrive_in_progress", "{body}");
    use seatgate::ports::QueueAdmin;
    assert_eq!(
        b.depths().await.unwrap().seat_messages.dead,
        6,
        "nothing moved"
    );

    b.release_lease(REDRIVE_LEASE_NAME, "someone-else")
        .await
        .unwrap();
    let (status, moved) = call(
        &stack,
        "ops",
        true,
        Method::POST,
        "/admin/dead-letters/redrive",
    )
    .await;
    assert_eq!(
        (status, &moved["seat_messages"]),
        (StatusCode::OK, &6.into()),
        "{moved}"
    );
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redrive_on_the_embedded_backend() {
    let mut config = RunnerConfig::ephemeral(None);
    config.timing = seatgate::config::Timing::fast();
    config.role = Role::Api;
    let stack = start(config).await.expect("stack starts");
    redrive_through_the_api(stack).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redrive_on_the_aws_backend() {
    let sdk = setup::sdk_config().await;
    setup::dynamodb_from(&sdk).await;
    setup::sqs_from(&sdk).await;
    let mut config = RunnerConfig::ephemeral_aws("seatgate-it-redrive");
    config.role = Role::Api;
    let stack = start(config).await.expect("stack starts");
    let backend = stack.backend.aws().unwrap().clone();
    redrive_through_the_api(stack).await;
    backend.delete_resources().await.unwrap();
}
