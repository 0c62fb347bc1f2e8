//! Flights: a sale of exactly the capacity, cancels, bookings page by page, idempotency keys and
//! bad booking input.

use super::*;

#[tokio::test]
async fn a_flight_sells_its_capacity_once_and_cancels_return_seats_once() {
    let stack = stack().await;
    let admin = Caller::admin(&stack, "ops");
    let alice = Caller::new(&stack, "alice");
    let bob = Caller::new(&stack, "bob");

    let flight = json!({"flight_id": "KE-1", "capacity": 3, "max_per_user": 2});
    let (status, body) = alice
        .call(Method::POST, "/admin/flights", Some(flight.clone()))
        .await;
    assert_error(status, &body, 403, "forbidden");
    let (status, body) = admin
        .call(Method::POST, "/admin/flights", Some(flight.clone()))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        (body["capacity"].as_u64(), body["available"].as_u64()),
        (Some(3), Some(3))
    );
    let (status, body) = admin
        .call(Method::POST, "/admin/flights", Some(flight))
        .await;
    assert_error(status, &body, 409, "flight_exists");

    let (status, a1) = alice.book("KE-1", json!({"headCount": 2}), None).await;
    assert_eq!(status, StatusCode::CREATED, "{a1}");
    assert_eq!(a1["headCount"], 2);
    let (status, body) = alice.book("KE-1", json!({"headCount": 1}), None).await;
    assert_error(status, &body, 409, "limit_reached");
    let (status, body) = bob.book("KE-1", json!({"headCount": 2}), None).await;
    assert_error(status, &body, 409, "sold_out");
    let (status, b1) = bob.book("KE-1", json!({"headCount": 1}), None).await;
    assert_eq!(status, StatusCode::CREATED, "{b1}");
    let (status, body) = bob.book("KE-1", json!({"headCount": 1}), None).await;
    assert_error(status, &body, 409, "sold_out");
    let (_, body) = bob.call(Method::GET, "/flights/KE-1", None).await;
    assert_eq!(
        body,
        json!({"flight_id": "KE-1", "capacity": 3, "available": 0, "held": 0})
    );

    // Only the owner cancels; a retried cancel returns the seats once.
    let a1_path = format!(
        "/flights/KE-1/bookings/{}",
        a1["booking_id"].as_str().unwrap()
    );
    let (status, body) = bob.call(Method::DELETE, &a1_path, None).await;
    assert_error(status, &body, 404, "not_found");
    for _ in 0..3 {
        let (status, body) = alice.call(Method::DELETE, &a1_path, None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["status"], "CANCELLED");
    }
    let (_, body) = bob.call(Method::GET, "/flights/KE-1", None).await;
    assert_eq!(body["available"], 2);
    let (status, body) = alice.call(Method::GET, "/me/bookings", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["bookings"].as_array().unwrap().len(), 1);
    assert_eq!(body["bookings"][0]["status"], "CANCELLED");
    let (_, body) = bob.call(Method::GET, "/me/bookings", None).await;
    assert_eq!(body["bookings"][0]["booking_id"], b1["booking_id"]);
    assert_eq!(body["next_cursor"], Value::Null);
}

/// `GET /me/bookings` comes 20 to a page: the pages, followed by their cursors, list each of
/// the user's bookings once, oldest first, and the last page hands out no cursor.
#[tokio::test]
async fn a_users_bookings_come_a_page_at_a_time() {
    let stack = stack().await;
    let admin = Caller::admin(&stack, "ops");
    let carol = Caller::new(&stack, "carol");
    let flight = json!({"flight_id": "KE-9", "capacity": 30});
    let (status, body) = admin
        .call(Method::POST, "/admin/flights", Some(flight))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // 23 bookings, under the default rate limit (30 per 10 s).
    let mut made = Vec::new();
    for _ in 0..23 {
        let (status, b) = carol.book("KE-9", json!({"headCount": 1}), None).await;
        assert_eq!(status, StatusCode::CREATED, "{b}");
        made.push(b["booking_id"].as_str().unwrap().to_owned());
    }
    let (status, first) = carol.call(Method::GET, "/me/bookings", None).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let ids = |page: &Value| -> Vec<String> {
        page["bookings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["booking_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&first).len(), 20);
    let cursor = first["next_cursor"]
        .as_str()
        .expect("a second page")
        .to_owned();
    assert_eq!(
        Some(&cursor),
        ids(&first).last(),
        "the cursor is the page's last key"
    );
    let (status, second) = carol
        .call(Method::GET, &format!("/me/bookings?cursor={cursor}"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert_eq!(ids(&second).len(), 3);
    assert_eq!(second["next_cursor"], Value::Null, "the last page");
    let listed: Vec<String> = [ids(&first), ids(&second)].concat();
    assert_eq!(listed, made, "every booking once, oldest first");
    for bad in ["", "a%20b", "%E2%9C%88"] {
        let (status, body) = carol
            .call(Method::GET, &format!("/me/bookings?cursor={bad}"), None)
            .await;
        assert_error(status, &body, 400, "invalid_cursor");
    }
}

#[tokio::test]
async fn an_idempotency_key_returns_the_first_answer_and_refuses_another_request() {
    let stack = stack().await;
    let admin = Caller::admin(&stack, "ops");
    let alice = Caller::new(&stack, "alice");
    let (status, _) = admin
        .call(
            Method::POST,
            "/admin/flights",
            Some(json!({"flight_id": "OZ-1", "capacity": 5})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let first = alice
        .book("OZ-1", json!({"headCount": 2}), Some("key-1"))
        .await;
    assert_eq!(first.0, StatusCode::CREATED, "{}", first.1);
    for _ in 0..3 {
        assert_eq!(
            alice
                .book("OZ-1", json!({"headCount": 2}), Some("key-1"))
                .await,
            first
        );
    }
    let (_, body) = alice.call(Method::GET, "/flights/OZ-1", None).await;
    assert_eq!(body["available"], 3, "one booking for four requests");
    let (status, body) = alice
        .book("OZ-1", json!({"headCount": 1}), Some("key-1"))
        .await;
    assert_error(status, &body, 422, "idempotency_key_reused");
    // Another user's key of the same name is their own.
    let bob = Caller::new(&stack, "bob");
    let (status, _) = bob
        .book("OZ-1", json!({"headCount": 1}), Some("key-1"))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    // A refusal is an answer too: retried, it is the same refusal, even once seats are back.
    let (status, body) = alice
        .book("OZ-1", json!({"headCount": 9}), Some("key-2"))
        .await;
    assert_error(status, &body, 409, "sold_out");
    let again = alice
        .book("OZ-1", json!({"headCount": 9}), Some("key-2"))
        .await;
    assert_eq!(again, (status, body));
}

/// A keyed request on a flight known sold out is refused from the cache, its answer stored at
/// once: replayed after a cancel has brought seats back, it is still the first answer, while a
/// new key books one of them.
#[tokio::test]
async fn a_keyed_refusal_from_the_sold_out_cache_is_replayed_after_seats_come_back() {
    let stack = stack().await;
    let admin = Caller::admin(&stack, "ops");
    let (status, _) = admin
        .call(
            Method::POST,
            "/admin/flights",
            Some(json!({"flight_id": "OZ-9", "capacity": 2})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let alice = Caller::new(&stack, "alice");
    let (status, booked) = alice.book("OZ-9", json!({"headCount": 2}), None).await;
    assert_eq!(status, StatusCode::CREATED, "{booked}");
    let bob = Caller::new(&stack, "bob");
    // The first refusal finds the shard empty and marks the flight; the second is the cache's.
    for key in ["marks-it", "from-the-cache"] {
        let (status, body) = bob.book("OZ-9", json!({"headCount": 1}), Some(key)).await;
        assert_error(status, &body, 409, "sold_out");
    }
    let booking_id = booked["booking_id"].as_str().expect("a booking id");
    let (status, body) = alice
        .call(
            Method::DELETE,
            &format!("/flights/OZ-9/bookings/{booking_id}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for key in ["marks-it", "from-the-cache"] {
        let (status, body) = bob.book("OZ-9", json!({"headCount": 1}), Some(key)).await;
        assert_error(status, &body, 409, "sold_out");
    }
    let (status, body) = bob
        .book("OZ-9", json!({"headCount": 1}), Some("after-the-cancel"))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

#[tokio::test]
async fn bad_booking_input_gets_a_clear_4xx() {
    let stack = stack().await;
    let admin = Caller::admin(&stack, "ops");
    let alice = Caller::new(&stack, "alice");
    for (body, code) in [
        (json!({"flight_id": "X-1", "capacity": 0}), "invalid_flight"),
        (
            json!({"flight_id": "X-1", "capacity": 5, "shards": 6}),
            "invalid_flight",
        ),
        (
            json!({"flight_id": "X-1", "capacity": 5, "max_per_user": 0}),
            "invalid_flight",
        ),
        (
            json!({"flight_id": "bad id", "capacity": 5}),
            "invalid_flight_id",
        ),
        (json!({"flight_id": "X-1", "capacity": -1}), "invalid_json"),
        (json!({"flight_id": "X-1"}), "invalid_json"),
    ] {
        let (status, resp) = admin.call(Method::POST, "/admin/flights", Some(body)).await;
        assert_error(status, &resp, 400, code);
    }
    let (status, _) = admin
        .call(
            Method::POST,
            "/admin/flights",
            Some(json!({"flight_id": "X-1", "capacity": 5})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    for (body, code) in [
        (json!({"headCount": 0}), "invalid_head_count"),
        (json!({"headCount": 10}), "invalid_head_count"),
        (json!({"headCount": "1"}), "invalid_json"),
        (json!({"headCount": 1.5}), "invalid_json"),
        (json!({"headcount": 1}), "invalid_json"),
        (json!({}), "invalid_json"),
    ] {
        let (status, resp) = alice.book("X-1", body, None).await;
        assert_error(status, &resp, 400, code);
    }
    let (status, resp) = alice
        .book("X-1", json!({"headCount": 1}), Some("has space"))
        .await;
    assert_error(status, &resp, 400, "invalid_idempotency_key");
    let (status, resp) = alice.book("NOPE", json!({"headCount": 1}), None).await;
    assert_error(status, &resp, 404, "not_found");
    let (status, resp) = alice.call(Method::GET, "/flights/NOPE", None).await;
    assert_error(status, &resp, 404, "not_found");
    let (status, resp) = alice
        .call(Method::DELETE, "/flights/X-1/bookings/not-a-booking", None)
        .await;
    assert_error(status, &resp, 404, "not_found");
    let (_, body) = alice.call(Method::GET, "/flights/X-1", None).await;
    assert_eq!(body["available"], 5, "no bad request took a seat");
}
