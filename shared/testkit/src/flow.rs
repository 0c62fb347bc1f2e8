//! A user's way through the HTTP API, as the runner's tests and the benchmark both walk it: a
//! dev token, the upstream credential, a reservation prepared and confirmed, its intent read
//! until a status, and the upstream simulator's users. Each step checks the status the
//! contract promises and answers `anyhow::Result` with the step named, so the benchmark can
//! report a failed run and a test can `unwrap` it into a message that says which step broke.

use anyhow::{Context as _, ensure};
use reqwest::{Client, Response, StatusCode};
use serde_json::{Value, json};
use std::time::Duration;

/// The answer's JSON body (`Null` when empty), if its status is `want`; otherwise an error
/// naming `what`, the status and the body.
pub async fn expect_status(resp: Response, want: StatusCode, what: &str) -> anyhow::Result<Value> {
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    ensure!(
        status == want,
        "{what}: expected {want}, got {status}: {text}"
    );
    Ok(if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).with_context(|| format!("{what}: body is not JSON"))?
    })
}

/// A token for `sub` from the runner's `POST /dev/token` (`admin` adds the admin claim).
pub async fn dev_token(
    client: &Client,
    api: &str,
    sub: &str,
    admin: bool,
) -> anyhow::Result<String> {
    let resp = client
        .post(format!("{api}/dev/token"))
        .json(&json!({ "sub": sub, "admin": admin }))
        .send()
        .await?;
    let body = expect_status(resp, StatusCode::OK, "dev token").await?;
    Ok(body["token"].as_str().context("token in body")?.to_owned())
}

/// Stores the user's upstream credential: `204`.
pub async fn put_credential(
    client: &Client,
    api: &str,
    token: &str,
    credential: &str,
) -> anyhow::Result<()> {
    let resp = client
        .put(format!("{api}/me/credential"))
        .bearer_auth(token)
        .json(&json!({ "upstream_token": credential }))
        .send()
        .await?;
    expect_status(resp, StatusCode::NO_CONTENT, "put credential").await?;
    Ok(())
}

/// Prepares a reservation of `seat`: `201`, the action's id.
pub async fn prepare_seat(
    client: &Client,
    api: &str,
    token: &str,
    seat: &str,
) -> anyhow::Result<String> {
    let resp = client
        .post(format!("{api}/actions"))
        .bearer_auth(token)
        .json(&json!({ "kind": "reserve_seat", "seat_id": seat }))
        .send()
        .await?;
    let action = expect_status(resp, StatusCode::CREATED, "prepare").await?;
    Ok(action["action_id"]
        .as_str()
        .context("action id")?
        .to_owned())
}

/// Confirms the prepared action: `202` REQUESTED, the intent's id.
pub async fn confirm_action(
    client: &Client,
    api: &str,
    token: &str,
    action_id: &str,
) -> anyhow::Result<String> {
    let resp = client
        .post(format!("{api}/actions/{action_id}/confirm"))
        .bearer_auth(token)
        .send()
        .await?;
    let confirmed = expect_status(resp, StatusCode::ACCEPTED, "confirm").await?;
    ensure!(
        confirmed["status"] == "REQUESTED",
        "confirm: not REQUESTED: {confirmed}"
    );
    Ok(confirmed["intent_id"]
        .as_str()
        .context("intent id")?
        .to_owned())
}

/// Prepares and confirms a reservation of `seat`: the intent's id.
pub async fn confirm_seat(
    client: &Client,
    api: &str,
    token: &str,
    seat: &str,
) -> anyhow::Result<String> {
    let action_id = prepare_seat(client, api, token, seat).await?;
    confirm_action(client, api, token, &action_id).await
}

/// The user's intent: `200`, its body.
pub async fn get_intent(
    client: &Client,
    api: &str,
    token: &str,
    intent_id: &str,
) -> anyhow::Result<Value> {
    let resp = client
        .get(format!("{api}/intents/{intent_id}"))
        .bearer_auth(token)
        .send()
        .await?;
    expect_status(resp, StatusCode::OK, "get intent").await
}

/// Reads the intent every 20 ms until its status is one of `want` (or `patience` ran out: an
/// error that shows the last answer); returns it.
pub async fn wait_for_any(
    client: &Client,
    api: &str,
    token: &str,
    intent_id: &str,
    want: &[&str],
    patience: Duration,
) -> anyhow::Result<Value> {
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        let intent = get_intent(client, api, token, intent_id).await?;
        if intent["status"].as_str().is_some_and(|s| want.contains(&s)) {
            return Ok(intent);
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "intent not {want:?} within {patience:?}: {intent}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// [`wait_for_any`] of one status.
pub async fn wait_for_status(
    client: &Client,
    api: &str,
    token: &str,
    intent_id: &str,
    want: &str,
    patience: Duration,
) -> anyhow::Result<Value> {
    wait_for_any(client, api, token, intent_id, &[want], patience).await
}

/// Registers users and their credentials with the upstream simulator (`POST /__admin/users`),
/// 500 to a request.
pub async fn register_upstream(
    client: &Client,
    upstream: &str,
    users: &[(String, String)],
) -> anyhow::Result<()> {
    for chunk in users.chunks(500) {
        let body = json!({
            "users": chunk.iter().map(|(u, c)| json!({ "user_id": u, "credential": c })).collect::<Vec<_>>(),
        });
        let resp = client
            .post(format!("{upstream}/__admin/users"))
            .json(&body)
            .send()
            .await?;
        ensure!(
            resp.status().is_success(),
            "registering users upstream: {}",
            resp.status()
        );
    }
    Ok(())
}
