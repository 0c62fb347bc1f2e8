//! Who may see and do what: another user's action or intent, an expired action, the body's
//! bounds, the credential's.

use super::*;

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
