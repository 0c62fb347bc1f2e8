//! Seat and room reads: the upstream's answers, bad ids, and an upstream that is down.

use super::*;

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
