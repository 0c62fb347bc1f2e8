//! The local runner end to end, in-process: a stack on ephemeral ports with the simulator,
//! driven over real HTTP the way a client (or the benchmark) drives it.
//!
//! These check what the runner itself adds around the handlers (token issuing, the authorizer,
//! the body limit, the event source mappings, restart on the same database), not the handlers'
//! own rules, which the seatgate crate tests.

use reqwest::StatusCode;
use seatgate::config::Timing;
use seatgate_local::auth::{AUDIENCE, Claims, ISSUER, TokenAuthority};
use seatgate_local::{Role, RunnerConfig, Stack, start};
use seatgate_testkit::setup::{self, POSTS};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;

mod common;
use common::{confirm_seat, dev_token, put_credential, wait_for_status};

/// How long an intent may take to settle here.
const PATIENCE: Duration = Duration::from_secs(10);

fn temp_db() -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("seatgate-local-{}", uuid::Uuid::new_v4()));
    let db = dir.join("nested").join("seatgate.sqlite3");
    (dir, db)
}

async fn stack(db: Option<PathBuf>) -> Stack {
    let config = RunnerConfig {
        timing: Timing::fast(),
        ..RunnerConfig::ephemeral(db)
    };
    start(config).await.expect("stack starts")
}

async fn error_code(resp: reqwest::Response) -> (StatusCode, String) {
    let status = resp.status();
    let body: Value = resp.json().await.unwrap();
    assert!(
        body["message"].is_string(),
        "error body has a message: {body}"
    );
    (status, body["error"].as_str().unwrap().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_token_is_issued_and_validated() {
    let stack = stack(None).await;
    assert!(stack.api_url.starts_with("http://127.0.0.1:"));
    assert!(stack.upstream_url.starts_with("http://127.0.0.1:"));
    let client = reqwest::Client::new();
    let api = &stack.api_url;

    let t = dev_token(&client, api, "u1", false).await.unwrap();
    let claims = stack.tokens.verify(&t).unwrap();
    assert_eq!((claims.sub.as_str(), claims.admin), ("u1", false));

    let resp = client
        .post(format!("{api}/dev/token"))
        .json(&json!({ "sub": "u1", "admin": true }))
        .send()
        .await
        .unwrap();
    let admin: Value = resp.json().await.unwrap();
    assert!(
        stack
            .tokens
            .verify(admin["token"].as_str().unwrap())
            .unwrap()
            .admin
    );

    for (body, code) in [
        ("not json", "invalid_json"),
        ("{\"user\":\"u1\"}", "invalid_json"),
        ("{\"sub\":\"\"}", "invalid_request"),
        ("{\"sub\":\"a\\u0007b\"}", "invalid_request"),
    ] {
        let resp = client
            .post(format!("{api}/dev/token"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(
            error_code(resp).await,
            (StatusCode::BAD_REQUEST, code.into()),
            "{body}"
        );
    }
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_authorizer_refuses_missing_forged_and_expired_tokens() {
    let stack = stack(None).await;
    let client = reqwest::Client::new();
    let url = format!("{}/actions", stack.api_url);
    let body = json!({ "kind": "reserve_seat", "seat_id": "A-1" });

    let missing = client.post(&url).json(&body).send().await.unwrap();
    assert_eq!(
        error_code(missing).await,
        (StatusCode::UNAUTHORIZED, "unauthorized".into())
    );

    let forger = TokenAuthority::new(&seatgate::domain::Secret::new("someone-else")).unwrap();
    let forged = forger
        .issue(&seatgate::domain::UserId::parse("u1").unwrap(), true)
        .unwrap();
    let resp = client
        .post(&url)
        .bearer_auth(forged)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(resp).await,
        (StatusCode::UNAUTHORIZED, "unauthorized".into())
    );

    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let expired = stack
        .tokens
        .issue_with(&Claims {
            sub: "u1".into(),
            iss: ISSUER.into(),
            aud: AUDIENCE.into(),
            iat: now - 90_000,
            exp: now - 3_600,
            nbf: None,
            admin: false,
        })
        .unwrap();
    let resp = client
        .post(&url)
        .bearer_auth(expired)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(resp).await,
        (StatusCode::UNAUTHORIZED, "unauthorized".into())
    );

    let garbage = client
        .post(&url)
        .header("authorization", "Bearer not.a.jwt")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(garbage).await,
        (StatusCode::UNAUTHORIZED, "unauthorized".into())
    );

    // Unknown routes are answered 404 before any authorizer, as API Gateway does.
    let unknown = client
        .get(format!("{}/nope", stack.api_url))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(unknown).await,
        (StatusCode::NOT_FOUND, "route_not_found".into())
    );

    // A valid token passes, and an oversized body is refused before the handler.
    let valid = dev_token(&client, &stack.api_url, "u1", false)
        .await
        .unwrap();
    let ok = client
        .post(&url)
        .bearer_auth(&valid)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::CREATED);
    let huge = client
        .post(&url)
        .bearer_auth(&valid)
        .header("content-type", "application/json")
        .body(vec![b' '; 16 * 1024 + 1])
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(huge).await,
        (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large".into())
    );
    stack.shutdown().await;
}

/// Prepares and confirms `seat` for `user`; returns the intent id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepare_confirm_reaches_succeeded_through_the_simulator() {
    let stack = stack(None).await;
    let sim = stack.upstream.clone().expect("an in-process simulator");
    sim.register_user("u1", "cred-u1");
    let client = reqwest::Client::new();
    let api = &stack.api_url;
    let t = dev_token(&client, api, "u1", false).await.unwrap();
    put_credential(&client, api, &t, "cred-u1").await.unwrap();

    let intent_id = confirm_seat(&client, api, &t, "A-12").await.unwrap();
    let intent = wait_for_status(&client, api, &t, &intent_id, "SUCCEEDED", PATIENCE)
        .await
        .unwrap();
    assert_eq!(intent["seat_id"], "A-12");
    assert_eq!(sim.occupant("A-12").as_deref(), Some("u1"));
    assert_eq!(sim.stats().get(POSTS), 1);

    // Someone else's token cannot see it.
    let other = dev_token(&client, api, "u2", false).await.unwrap();
    let resp = client
        .get(format!("{api}/intents/{intent_id}"))
        .bearer_auth(other)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_stack_keeps_intents_and_accepts_earlier_tokens() {
    let (dir, db) = temp_db();
    let config = |db: &PathBuf| RunnerConfig {
        timing: Timing::fast(),
        // The key file next to the database, not a fixed key, is what must survive.
        jwt_secret: None,
        ..RunnerConfig::ephemeral(Some(db.clone()))
    };
    // SEATGATE_JWT_SECRET would bypass the key file; this test is about the file.
    if std::env::var_os(seatgate_local::auth::SECRET_ENV).is_some() {
        eprintln!("skipping: {} is set", seatgate_local::auth::SECRET_ENV);
        return;
    }

    let first = start(config(&db)).await.unwrap();
    let sim = first.upstream.clone().unwrap();
    sim.register_user("u1", "cred-u1");
    let client = reqwest::Client::new();
    let t = dev_token(&client, &first.api_url, "u1", false)
        .await
        .unwrap();
    put_credential(&client, &first.api_url, &t, "cred-u1")
        .await
        .unwrap();
    let intent_id = confirm_seat(&client, &first.api_url, &t, "B-7")
        .await
        .unwrap();
    wait_for_status(
        &client,
        &first.api_url,
        &t,
        &intent_id,
        "SUCCEEDED",
        PATIENCE,
    )
    .await
    .unwrap();
    first.shutdown().await;
    assert!(seatgate_local::auth::key_path(&db).exists());

    let second = start(config(&db)).await.unwrap();
    let intent = wait_for_status(
        &client,
        &second.api_url,
        &t,
        &intent_id,
        "SUCCEEDED",
        PATIENCE,
    )
    .await
    .unwrap();
    assert_eq!(intent["seat_id"], "B-7");
    second.shutdown().await;
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_and_worker_roles_share_one_database_and_pending_work_survives() {
    let (dir, db) = temp_db();
    let (sim, upstream) = setup::simulator().await;
    sim.register_user("u1", "cred-u1");
    let config = |role| RunnerConfig {
        timing: Timing::fast(),
        role,
        upstream_url: Some(upstream.clone()),
        ..RunnerConfig::ephemeral(Some(db.clone()))
    };

    // API only: the confirm is stored with its outbox row, and nothing processes it.
    let api = start(config(Role::Api)).await.unwrap();
    assert!(
        api.upstream.is_none(),
        "an external upstream starts no simulator"
    );
    let client = reqwest::Client::new();
    let t = dev_token(&client, &api.api_url, "u1", false).await.unwrap();
    put_credential(&client, &api.api_url, &t, "cred-u1")
        .await
        .unwrap();
    let intent_id = confirm_seat(&client, &api.api_url, &t, "C-3")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(sim.stats().get(POSTS), 0);

    // A workers-only stack on the same file (a second connection, as a second process would
    // have) relays the pending row and settles the intent, which the API stack then serves.
    let workers = start(config(Role::Workers)).await.unwrap();
    assert!(workers.api_url.is_empty());
    wait_for_status(&client, &api.api_url, &t, &intent_id, "SUCCEEDED", PATIENCE)
        .await
        .unwrap();
    assert_eq!(sim.stats().get(POSTS), 1);
    workers.shutdown().await;
    api.shutdown().await;
    std::fs::remove_dir_all(dir).unwrap();
}
