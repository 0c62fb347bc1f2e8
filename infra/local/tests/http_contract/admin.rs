//! The admin routes: the claim, their ids, an intent's history.

use super::*;

#[tokio::test]
async fn the_admin_routes_need_the_claim_check_their_ids_and_show_an_intents_history() {
    let stack = stack().await;
    let admin = Caller::admin(&stack, "ops");
    let alice = Caller::new(&stack, "alice");

    let until = seatgate::domain::Millis::now()
        .plus(Duration::from_secs(3600))
        .to_rfc3339();
    let (status, wait) = alice
        .call(
            Method::POST,
            "/waits",
            Some(json!({"seat_id": "H-1", "until": until})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{wait}");
    let intent = wait["intent_id"].as_str().unwrap().to_owned();
    // The runner's worker may end the wait first (alice has no credential: FAILED_AUTH); either
    // way the history must end with the intent's terminal write.
    let (status, cancelled) = alice
        .call(Method::DELETE, &format!("/intents/{intent}"), None)
        .await;
    let was_cancelled = match status {
        StatusCode::OK => true,
        StatusCode::CONFLICT => {
            assert_eq!(cancelled["error"], "not_cancellable", "{cancelled}");
            false
        }
        other => panic!("cancel answered {other}: {cancelled}"),
    };

    // Without the claim: 403 before anything else, even for a bad id.
    for (method, path) in [
        (Method::GET, format!("/admin/intents/{intent}")),
        (Method::GET, "/admin/intents/not-a-uuid".to_owned()),
        (Method::GET, "/admin/seats/H-1".to_owned()),
        (Method::POST, "/admin/reconcile".to_owned()),
        (Method::POST, "/admin/dead-letters/redrive".to_owned()),
    ] {
        let (status, body) = alice.call(method, &path, None).await;
        assert_error(status, &body, 403, "forbidden");
    }

    let (status, audit) = admin
        .call(Method::GET, &format!("/admin/intents/{intent}"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{audit}");
    assert_eq!(audit["intent"]["user_id"], "alice");
    let status_now = audit["intent"]["status"].as_str().unwrap().to_owned();
    if was_cancelled {
        assert_eq!(status_now, "CANCELLED");
    } else {
        assert_eq!(status_now, "FAILED_AUTH", "{audit}");
    }
    assert_eq!(audit["consent"]["kind"], "WAIT");
    assert_eq!(audit["consent"]["action_id"], Value::Null);
    let history = audit["history"].as_array().unwrap();
    // One record per write: versions 1..=version, the creation first, the terminal write last.
    let version = audit["intent"]["version"].as_u64().unwrap();
    assert_eq!(
        history
            .iter()
            .map(|r| r["version"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        (1..=version).collect::<Vec<_>>()
    );
    assert_eq!(
        audit["next_cursor"],
        Value::Null,
        "a short history is one page"
    );
    // A page after the cursor holds the later records only; a cursor no page hands out is 400.
    let (status, later) = admin
        .call(
            Method::GET,
            &format!("/admin/intents/{intent}?cursor=1"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{later}");
    assert_eq!(
        later["history"][0]["version"], 2,
        "the page starts after version 1: {later}"
    );
    for bad in [
        "0",
        "01",
        "x",
        "-1",
        "1.5",
        "%2B1",
        "1&cursor=2",
        "18446744073709551616",
    ] {
        let (status, body) = admin
            .call(
                Method::GET,
                &format!("/admin/intents/{intent}?cursor={bad}"),
                None,
            )
            .await;
        assert_error(status, &body, 400, "invalid_cursor");
    }
    assert_eq!(history[0]["from"], Value::Null);
    assert_eq!(history[0]["to"], "WAITING_FOR_SEAT");
    let last = history.last().unwrap();
    assert_eq!(last["to"], json!(status_now));
    assert!(!last["at"].is_null(), "{last}");
    assert_eq!(last["at"], audit["intent"]["updated_at"]);
    if was_cancelled {
        assert_eq!(
            (&last["from"], &last["reason"]),
            (&json!("WAITING_FOR_SEAT"), &json!("cancelled"))
        );
        assert_eq!(last["at"], cancelled["updated_at"]);
    }

    let (status, body) = admin
        .call(Method::GET, "/admin/intents/not-a-uuid", None)
        .await;
    assert_error(status, &body, 400, "invalid_intent_id");
    let unknown = "00000000-0000-4000-8000-000000000000";
    let (status, body) = admin
        .call(Method::GET, &format!("/admin/intents/{unknown}"), None)
        .await;
    assert_error(status, &body, 404, "not_found");

    let (status, seat) = admin.call(Method::GET, "/admin/seats/H-1", None).await;
    assert_eq!(status, StatusCode::OK, "{seat}");
    assert_eq!(seat["seat_id"], "H-1");
    assert_eq!(seat["hold"], Value::Null);
    assert_eq!(seat["suppression"], Value::Null);
    for depth in ["ready", "in_flight", "dead"] {
        assert!(seat["queue"][depth].is_u64(), "{seat}");
    }
    let (status, body) = admin
        .call(Method::GET, "/admin/seats/bad%20seat", None)
        .await;
    assert_error(status, &body, 400, "invalid_seat_id");

    let (status, report) = admin.call(Method::POST, "/admin/reconcile", None).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert!(report["examined"].is_u64(), "{report}");
    assert!(report["left"].is_u64(), "{report}");
    stack.shutdown().await;
}
