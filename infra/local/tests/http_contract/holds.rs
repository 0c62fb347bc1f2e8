//! Checkout holds through the API: confirmed, released or lapsed once, and bad input.

use super::*;

#[tokio::test]
async fn a_hold_is_confirmed_released_or_lapsed_once_and_bad_input_gets_a_clear_4xx() {
    let stack = stack().await;
    let admin = Caller::admin(&stack, "ops");
    let alice = Caller::new(&stack, "alice");
    let bob = Caller::new(&stack, "bob");
    let flight = json!({"flight_id": "KE-H", "capacity": 4, "max_per_user": 3,
        "hold_ttl_secs": 1, "hold_max_secs": 2, "offer_ttl_secs": 5});
    let (status, body) = admin
        .call(Method::POST, "/admin/flights", Some(flight))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        (
            body["hold_ttl_secs"].as_u64(),
            body["hold_max_secs"].as_u64(),
            body["held"].as_u64()
        ),
        (Some(1), Some(2), Some(0))
    );
    for bad in [
        json!({"flight_id": "KE-X", "capacity": 4, "hold_ttl_secs": 0}),
        json!({"flight_id": "KE-X", "capacity": 4, "hold_ttl_secs": 10, "hold_max_secs": 5}),
        json!({"flight_id": "KE-X", "capacity": 4, "offer_ttl_secs": 604801}),
    ] {
        let (status, body) = admin.call(Method::POST, "/admin/flights", Some(bad)).await;
        assert_error(status, &body, 400, "invalid_flight");
    }

    async fn hold(who: &Caller<'_>, k: u32) -> (StatusCode, Value) {
        who.call(
            Method::POST,
            "/flights/KE-H/holds",
            Some(json!({"headCount": k})),
        )
        .await
    }
    let (status, h1) = hold(&alice, 2).await;
    assert_eq!(status, StatusCode::CREATED, "{h1}");
    let h1_path = format!("/flights/KE-H/holds/{}", h1["hold_id"].as_str().unwrap());
    let (status, body) = hold(&alice, 1).await;
    assert_error(status, &body, 409, "hold_exists");
    let (_, body) = bob.call(Method::GET, "/flights/KE-H", None).await;
    assert_eq!(
        (body["available"].as_u64(), body["held"].as_u64()),
        (Some(2), Some(2))
    );
    // Another user's hold is not found, whatever they ask of it.
    for (method, suffix) in [
        (Method::GET, ""),
        (Method::DELETE, ""),
        (Method::POST, "/confirm"),
        (Method::POST, "/extend"),
    ] {
        let (status, body) = bob.call(method, &format!("{h1_path}{suffix}"), None).await;
        assert_error(status, &body, 404, "not_found");
    }
    let (status, booking) = alice
        .call(Method::POST, &format!("{h1_path}/confirm"), None)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{booking}");
    assert_eq!(booking["status"], "BOOKED");
    let (status, again) = alice
        .call(Method::POST, &format!("{h1_path}/confirm"), None)
        .await;
    assert_eq!(
        (status, &again),
        (StatusCode::OK, &booking),
        "a repeat answers the same booking"
    );
    let (status, body) = alice.call(Method::DELETE, &h1_path, None).await;
    assert_error(status, &body, 409, "hold_confirmed");
    let (_, body) = bob.call(Method::GET, "/flights/KE-H", None).await;
    assert_eq!(
        (body["available"].as_u64(), body["held"].as_u64()),
        (Some(2), Some(0))
    );
    // Two held and booked: one more hold of two passes the limit of three.
    let (status, body) = hold(&alice, 2).await;
    assert_error(status, &body, 409, "limit_reached");

    // Bob releases once; a repeat answers the released hold.
    let (status, h2) = hold(&bob, 2).await;
    assert_eq!(status, StatusCode::CREATED, "{h2}");
    let (status, body) = hold(&alice, 1).await;
    assert_error(status, &body, 409, "sold_out");
    let h2_path = format!("/flights/KE-H/holds/{}", h2["hold_id"].as_str().unwrap());
    let (status, released) = bob.call(Method::DELETE, &h2_path, None).await;
    assert_eq!(
        (status, released["status"].as_str()),
        (StatusCode::OK, Some("RELEASED"))
    );
    let (status, again) = bob.call(Method::DELETE, &h2_path, None).await;
    assert_eq!((status, &again), (StatusCode::OK, &released));
    let (status, body) = bob
        .call(Method::POST, &format!("{h2_path}/confirm"), None)
        .await;
    assert_error(status, &body, 409, "hold_released");
    let (_, body) = bob.call(Method::GET, "/flights/KE-H", None).await;
    assert_eq!(
        (body["available"].as_u64(), body["held"].as_u64()),
        (Some(2), Some(0))
    );

    // Bob's next hold lapses: it reads LAPSED, cannot be confirmed or extended, and a reaper
    // pass gives its seats back.
    let (status, h3) = hold(&bob, 2).await;
    assert_eq!(status, StatusCode::CREATED, "{h3}");
    let h3_path = format!("/flights/KE-H/holds/{}", h3["hold_id"].as_str().unwrap());
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let (_, body) = bob.call(Method::GET, &h3_path, None).await;
    assert_eq!(body["status"], "LAPSED", "{body}");
    let (status, body) = bob
        .call(Method::POST, &format!("{h3_path}/confirm"), None)
        .await;
    assert_error(status, &body, 410, "hold_expired");
    let (status, body) = bob
        .call(Method::POST, &format!("{h3_path}/extend"), None)
        .await;
    assert_error(status, &body, 409, "hold_not_extendable");
    let (status, report) = admin.call(Method::POST, "/admin/reconcile", None).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    // This pass, or the runner's scheduled one before it, gave the hold back: once.
    assert!(report["holds_lapsed"].as_u64() <= Some(1), "{report}");
    let (_, body) = bob.call(Method::GET, "/flights/KE-H", None).await;
    assert_eq!(
        (body["available"].as_u64(), body["held"].as_u64()),
        (Some(2), Some(0))
    );
    let (_, mine) = bob.call(Method::GET, "/me/holds", None).await;
    let statuses: Vec<_> = mine["holds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(statuses, vec!["RELEASED", "LAPSED"]);

    // The operator's view of the flight's holds, by status: the lapse, the release, the confirm;
    // a page of one hands out a cursor that reads on. The admin claim is needed, the flight
    // known, the status and the cursor valid.
    let listed = |status: &'static str| {
        let admin = &admin;
        async move {
            let (code, body) = admin
                .call(
                    Method::GET,
                    &format!("/admin/flights/KE-H/holds?status={status}"),
                    None,
                )
                .await;
            assert_eq!(code, StatusCode::OK, "{body}");
            assert_eq!(body["next_cursor"], Value::Null, "{body}");
            body["holds"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| (h["hold_id"].clone(), h["user_id"].clone()))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        listed("LAPSED").await,
        vec![(h3["hold_id"].clone(), json!("bob"))]
    );
    assert_eq!(
        listed("RELEASED").await,
        vec![(h2["hold_id"].clone(), json!("bob"))]
    );
    assert_eq!(
        listed("CONFIRMED").await,
        vec![(h1["hold_id"].clone(), json!("alice"))]
    );
    let (status, held) = admin
        .call(Method::GET, "/admin/flights/KE-H/holds", None)
        .await;
    assert_eq!(
        (status, &held["holds"]),
        (StatusCode::OK, &json!([])),
        "{held}"
    );
    assert_eq!(held["status"], "HELD");
    for (bad, code) in [
        ("status=held", "invalid_status"),
        ("status=HELD&status=LAPSED", "invalid_status"),
        ("status=", "invalid_status"),
        ("cursor=12.x", "invalid_cursor"),
        ("cursor=0001..", "invalid_cursor"),
        ("cursor=0001", "invalid_cursor"),
    ] {
        let (status, body) = admin
            .call(
                Method::GET,
                &format!("/admin/flights/KE-H/holds?{bad}"),
                None,
            )
            .await;
        assert_error(status, &body, 400, code);
    }
    let (status, body) = bob
        .call(Method::GET, "/admin/flights/KE-H/holds", None)
        .await;
    assert_error(status, &body, 403, "forbidden");
    let (status, body) = admin
        .call(Method::GET, "/admin/flights/NOPE/holds", None)
        .await;
    assert_error(status, &body, 404, "not_found");

    // Bad input: a stable 4xx on every hold route.
    let (status, body) = alice
        .call(
            Method::POST,
            "/flights/KE-H/holds",
            Some(json!({"headCount": 0})),
        )
        .await;
    assert_error(status, &body, 400, "invalid_head_count");
    let (status, body) = alice
        .call(
            Method::POST,
            "/flights/KE-H/holds",
            Some(json!({"seats": 1})),
        )
        .await;
    assert_error(status, &body, 400, "invalid_json");
    let (status, body) = alice
        .call(
            Method::POST,
            "/flights/NOPE/holds",
            Some(json!({"headCount": 1})),
        )
        .await;
    assert_error(status, &body, 404, "not_found");
    let (status, body) = alice
        .call(Method::GET, "/flights/KE-H/holds/a%20b", None)
        .await;
    assert_error(status, &body, 404, "not_found");
    let (status, body) = alice.call(Method::GET, "/me/holds?cursor=..", None).await;
    assert_error(status, &body, 400, "invalid_cursor");

    // Every kind of ending this case made is counted (the registry is the process's, shared
    // with the cases running beside this one: at least this case's own).
    let text = reqwest::get(format!("{}/__metrics", stack.api_url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for event in ["held", "confirmed", "released", "lapsed"] {
        let counted = seatgate::metrics::prometheus::sample(
            &text,
            "seatgate_checkout_total",
            &[("event", event)],
        );
        assert!(
            counted >= 1.0,
            "seatgate_checkout_total{{event={event}}} is {counted}"
        );
    }
}
