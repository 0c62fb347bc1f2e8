//! What the runner's test files share: a user's way through the HTTP API (a dev token, the
//! upstream credential, a reservation confirmed, its intent read until a status), each step
//! asserting the answer the contract promises, so a test reads as the flow it checks.
//!
//! Each test file includes this with `mod common;` and uses what it needs.
#![allow(dead_code)]

use reqwest::{Client, StatusCode};
use serde_json::{Value, json};
use std::time::Duration;

/// A token for `sub` from the runner's `POST /dev/token` (`admin` adds the admin claim).
pub async fn dev_token(client: &Client, api: &str, sub: &str, admin: bool) -> String {
    let resp = client
        .post(format!("{api}/dev/token"))
        .json(&json!({ "sub": sub, "admin": admin }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let body: Value = resp.json().await.unwrap();
    body["token"].as_str().unwrap().to_owned()
}

/// Stores the user's upstream credential: `204`.
pub async fn put_credential(client: &Client, api: &str, token: &str, credential: &str) {
    let resp = client
        .put(format!("{api}/me/credential"))
        .bearer_auth(token)
        .json(&json!({ "upstream_token": credential }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
}

/// Prepares a reservation of `seat`: the action's id.
pub async fn prepare_seat(client: &Client, api: &str, token: &str, seat: &str) -> String {
    let resp = client
        .post(format!("{api}/actions"))
        .bearer_auth(token)
        .json(&json!({ "kind": "reserve_seat", "seat_id": seat }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let action: Value = resp.json().await.unwrap();
    action["action_id"].as_str().expect("action id").to_owned()
}

/// Confirms the prepared action: `202` REQUESTED, the intent's id.
pub async fn confirm_action(client: &Client, api: &str, token: &str, action_id: &str) -> String {
    let resp = client
        .post(format!("{api}/actions/{action_id}/confirm"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let confirmed: Value = resp.json().await.unwrap();
    assert_eq!(confirmed["status"], "REQUESTED");
    confirmed["intent_id"].as_str().unwrap().to_owned()
}

/// Prepares and confirms a reservation of `seat`: `202` REQUESTED, the intent's id.
pub async fn confirm_seat(client: &Client, api: &str, token: &str, seat: &str) -> String {
    let action_id = prepare_seat(client, api, token, seat).await;
    confirm_action(client, api, token, &action_id).await
}

/// The user's intent: `200`, its body.
pub async fn get_intent(client: &Client, api: &str, token: &str, intent_id: &str) -> Value {
    let resp = client
        .get(format!("{api}/intents/{intent_id}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    resp.json().await.unwrap()
}

/// Reads the intent until it is `want` (or `patience` ran out: a failure that shows the last
/// answer); returns it.
pub async fn wait_for_status(
    client: &Client,
    api: &str,
    token: &str,
    intent_id: &str,
    want: &str,
    patience: Duration,
) -> Value {
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        let intent = get_intent(client, api, token, intent_id).await;
        if intent["status"] == want {
            return intent;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "intent never reached {want}: {intent}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
