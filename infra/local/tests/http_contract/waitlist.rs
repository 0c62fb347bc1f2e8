//! The waiting list through the API: returned seats offered in order, and bad input.

use super::*;

#[tokio::test]
async fn a_waiting_list_is_offered_returned_seats_in_order_and_bad_input_gets_a_clear_4xx() {
    let stack = stack().await;
    let admin = Caller::admin(&stack, "ops");
    let (alice, bob, carol, dave) = (
        Caller::new(&stack, "alice"),
        Caller::new(&stack, "bob"),
        Caller::new(&stack, "carol"),
        Caller::new(&stack, "dave"),
    );
    let flight = json!({"flight_id": "KE-W", "capacity": 2, "hold_ttl_secs": 60,
        "hold_max_secs": 120, "offer_ttl_secs": 1});
    let (status, body) = admin
        .call(Method::POST, "/admin/flights", Some(flight))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    async fn join(who: &Caller<'_>, k: u32) -> (StatusCode, Value) {
        who.call(
            Method::POST,
            "/flights/KE-W/waitlist",
            Some(json!({"headCount": k})),
        )
        .await
    }
    let (status, body) = join(&bob, 2).await;
    assert_error(status, &body, 409, "seats_available");
    let (status, hold) = alice
        .call(
            Method::POST,
            "/flights/KE-W/holds",
            Some(json!({"headCount": 2})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{hold}");
    let (status, b) = join(&bob, 2).await;
    assert_eq!(status, StatusCode::CREATED, "{b}");
    assert_eq!(
        (b["status"].as_str(), b["position"].as_u64()),
        (Some("WAITING"), Some(1))
    );
    assert_eq!(b["offer"], Value::Null);
    let (status, c) = join(&carol, 1).await;
    assert_eq!(
        (status, c["position"].as_u64()),
        (StatusCode::CREATED, Some(2))
    );
    let (status, body) = join(&bob, 1).await;
    assert_error(status, &body, 409, "already_waiting");
    let b_path = format!("/flights/KE-W/waitlist/{}", b["entry_id"].as_str().unwrap());
    let c_path = format!("/flights/KE-W/waitlist/{}", c["entry_id"].as_str().unwrap());
    let (status, body) = carol.call(Method::GET, &b_path, None).await;
    assert_error(status, &body, 404, "not_found");

    // Alice gives her two seats back: they are offered to Bob, first in line, not put on sale.
    let hold_path = format!("/flights/KE-W/holds/{}", hold["hold_id"].as_str().unwrap());
    let (status, body) = alice.call(Method::DELETE, &hold_path, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, b) = bob.call(Method::GET, &b_path, None).await;
    assert_eq!(
        (b["status"].as_str(), b["position"].as_u64()),
        (Some("OFFERED"), None),
        "{b}"
    );
    let offer = format!(
        "/flights/KE-W/holds/{}",
        b["offer"]["hold_id"].as_str().unwrap()
    );
    let (_, c) = carol.call(Method::GET, &c_path, None).await;
    assert_eq!(c["position"].as_u64(), Some(1), "{c}");
    let (_, body) = dave.call(Method::GET, "/flights/KE-W", None).await;
    assert_eq!(
        (body["available"].as_u64(), body["held"].as_u64()),
        (Some(0), Some(2))
    );
    let (status, booking) = bob
        .call(Method::POST, &format!("{offer}/confirm"), None)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{booking}");
    let (status, body) = bob.call(Method::DELETE, &b_path, None).await;
    assert_error(status, &body, 409, "offer_made");

    // Carol leaves once; Dave joins behind nobody.
    let (status, left) = carol.call(Method::DELETE, &c_path, None).await;
    assert_eq!(
        (status, left["status"].as_str()),
        (StatusCode::OK, Some("LEFT"))
    );
    let (status, again) = carol.call(Method::DELETE, &c_path, None).await;
    assert_eq!((status, again), (StatusCode::OK, left));
    let (status, d) = join(&dave, 1).await;
    assert_eq!(
        (status, d["position"].as_u64()),
        (StatusCode::CREATED, Some(1))
    );
    // The operator's view: one waiting, Dave next; the admin claim is needed, the flight known.
    let (status, list) = admin
        .call(Method::GET, "/admin/flights/KE-W/waitlist", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(
        (list["waiting"].as_u64(), &list["oldest"]["entry_id"]),
        (Some(1), &d["entry_id"])
    );
    let (status, body) = dave
        .call(Method::GET, "/admin/flights/KE-W/waitlist", None)
        .await;
    assert_error(status, &body, 403, "forbidden");
    let (status, body) = admin
        .call(Method::GET, "/admin/flights/NOPE/waitlist", None)
        .await;
    assert_error(status, &body, 404, "not_found");

    // Bob cancels: one of his seats is offered to Dave; Dave's one-second offer lapses, and with
    // nobody waiting, a reaper pass puts it on sale.
    let (status, body) = bob
        .call(
            Method::DELETE,
            &format!(
                "/flights/KE-W/bookings/{}",
                booking["booking_id"].as_str().unwrap()
            ),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let d_path = format!("/flights/KE-W/waitlist/{}", d["entry_id"].as_str().unwrap());
    let (_, d) = dave.call(Method::GET, &d_path, None).await;
    assert_eq!(d["status"], "OFFERED", "{d}");
    let (_, body) = dave.call(Method::GET, "/flights/KE-W", None).await;
    assert_eq!(
        (body["available"].as_u64(), body["held"].as_u64()),
        (Some(1), Some(1))
    );
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let (status, report) = admin.call(Method::POST, "/admin/reconcile", None).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    let (_, body) = dave.call(Method::GET, "/flights/KE-W", None).await;
    assert_eq!(
        (body["available"].as_u64(), body["held"].as_u64()),
        (Some(2), Some(0))
    );

    // Bad input: a stable 4xx on every waiting-list route.
    for (body, code) in [
        (json!({"headCount": 0}), "invalid_head_count"),
        (json!({"seats": 1}), "invalid_json"),
    ] {
        let (status, answer) = dave
            .call(Method::POST, "/flights/KE-W/waitlist", Some(body))
            .await;
        assert_error(status, &answer, 400, code);
    }
    let (status, body) = dave
        .call(
            Method::POST,
            "/flights/NOPE/waitlist",
            Some(json!({"headCount": 1})),
        )
        .await;
    assert_error(status, &body, 404, "not_found");
    for method in [Method::GET, Method::DELETE] {
        let (status, body) = dave
            .call(method, "/flights/KE-W/waitlist/a%20b", None)
            .await;
        assert_error(status, &body, 404, "not_found");
    }
    stack.shutdown().await;
}
