//! The route table as served: the gateway and the handler agree with it, and a 405 names the
//! methods a path has.

use super::*;

/// The route table in effect: the runner's gateway puts exactly the handler's `ROUTES` behind
/// its authorizer (401 without a token), the handler serves each of them (never 404/405 with a
/// token), and a path outside the table is unknown to both. (`template.yaml` is held to the same
/// table by `shared/aws/tests/template.rs`.)
#[tokio::test]
async fn the_gateway_and_the_handler_serve_exactly_the_route_table() {
    use seatgate::handlers::http::ROUTES;
    let stack = stack().await;
    let caller = Caller::new(&stack, "router");
    let anonymous = Client::new();
    assert!(!ROUTES.is_empty());
    for route in ROUTES {
        // Path parameters get a well-formed id that names nothing.
        let path = route
            .path
            .split('/')
            .map(|part| {
                if part.starts_with('{') {
                    uuid::Uuid::now_v7().to_string()
                } else {
                    part.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join("/");
        let resp = anonymous
            .request(route.method.clone(), format!("{}{path}", stack.api_url))
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        assert_error(status, &body, 401, "unauthorized");
        let (status, body) = caller.call(route.method.clone(), &path, None).await;
        assert!(
            status.is_client_error() || status.is_success(),
            "{} {path}: {status} {body}",
            route.method
        );
        assert!(
            !matches!(
                body["error"].as_str(),
                Some("route_not_found" | "method_not_allowed")
            ),
            "{} {path} is in ROUTES but the handler does not serve it: {body}",
            route.method
        );
    }
    // Outside the table: unknown with or without a token, so nothing undeclared is authorized.
    for (method, path) in [
        (Method::GET, "/seat-map/A-1"),
        (Method::GET, "/flight/F-1"),
        (Method::POST, "/admin/intents"),
    ] {
        assert!(
            seatgate::handlers::http::match_route(&method, path).is_err(),
            "{method} {path} is in ROUTES now: pick a path outside the table"
        );
        let resp = anonymous
            .request(method.clone(), format!("{}{path}", stack.api_url))
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let body: Value = resp.json().await.unwrap();
        assert_error(status, &body, 404, "route_not_found");
        let (status, body) = caller.call(method, path, None).await;
        assert_error(status, &body, 404, "route_not_found");
    }
    let (status, body) = caller.call(Method::PATCH, "/actions", None).await;
    assert_error(status, &body, 405, "method_not_allowed");
    stack.shutdown().await;
}

/// Schemathesis found every 405 without `Allow`, which RFC 9110 requires: a client must be able
/// to learn what the path does take.
#[tokio::test]
async fn a_405_names_the_methods_the_path_has_in_allow() {
    let stack = stack().await;
    let caller = Caller::new(&stack, "u1");
    let intent = format!("/intents/{}", uuid::Uuid::now_v7());
    for (method, path, allow) in [
        (Method::PATCH, "/actions", "POST"),
        (Method::TRACE, "/me/bookings", "GET"),
        (Method::PUT, intent.as_str(), "GET, DELETE"),
        (Method::GET, "/me/credential", "PUT"),
        // The runner's own routes too (schemathesis: TRACE /dev/token was a 404).
        (Method::GET, "/dev/token", "POST"),
        (Method::TRACE, "/__metrics", "GET"),
    ] {
        let resp = caller
            .http
            .request(method.clone(), format!("{}{path}", stack.api_url))
            .bearer_auth(&caller.token)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let header = resp.headers().get("allow").cloned();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        assert_error(status, &body, 405, "method_not_allowed");
        assert_eq!(
            header.as_ref().and_then(|v| v.to_str().ok()),
            Some(allow),
            "{method} {path}"
        );
    }
    stack.shutdown().await;
}
