//! The local stand-in for API Gateway (HTTP API, payload v2) in front of the api Lambda.
//!
//! Each request is turned into the `lambda_http::Request` the Lambda runtime would build: method,
//! URI, headers, body (text when UTF-8, binary otherwise), path parameters, and an
//! `ApiGatewayV2` request context whose `authorizer.jwt.claims` are the verified token's claims.
//! It is then passed to `seatgate::handlers::http::handle`, the function the api Lambda runs, so
//! the code under test locally is the code that runs on AWS.
//!
//! Like API Gateway, the gateway answers two things itself before the function sees a request:
//! a declared route without a valid bearer token is refused with 401 (the JWT authorizer), and
//! a body over the limit with 413. Requests that match no declared route skip the authorizer
//! and reach the handler, which answers `404 route_not_found` (or 405): API Gateway also answers
//! unknown routes with 404 before authorizing, and doing it in the handler keeps one route table
//! for errors. `POST /dev/token` exists only here, in place of an identity provider.
//!
//! So does `GET /__metrics`: the process's metric totals (the same registry the Lambda
//! functions print as EMF) in Prometheus text, with `service="local"`, for the benchmark and
//! for anyone watching a local run. Like `/dev/token` it is unauthenticated, and it is served
//! only here on the API listener; the deployed API has neither (its metrics are in CloudWatch).
//!
//! The same goes for the runner's pages ([`crate::ui`]): the seat map at `GET /`, the ops page at
//! `GET /ops`, their files under `/__ui/`, and the two JSON routes behind them,
//! `POST /__demo/setup` (registers demo users with the upstream, seeds the demo room) and
//! `GET /__ops` (breaker, queue depths, holds, recent terminal intents) with its ten minutes of
//! history `GET /__ops/history` and the flight view's `GET /__ops/flights[/{id}]` (flights
//! created through this gateway are watched from their `201`). They are served only
//! where `/dev/token` is: [`crate::exposure`] refuses to start the runner on a non-loopback
//! `--listen` (or against remote AWS endpoints) unless `--insecure-dev-tokens`, so they are on
//! loopback too; on top of that they answer only a loopback `Host` header, so a web page
//! elsewhere cannot reach them by rebinding its DNS name to 127.0.0.1. They are not in
//! `docs/openapi.yaml`, because they serve those pages, not clients of the API. Keep any new
//! runner-only route under the same rule.

use crate::auth::{TokenAuthority, TokenError};
use aws_lambda_events::event::apigw::{
    ApiGatewayRequestAuthorizer, ApiGatewayRequestAuthorizerJwtDescription,
    ApiGatewayV2httpRequestContext, ApiGatewayV2httpRequestContextHttpDescription,
};
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, Method, StatusCode, Uri};
use lambda_http::aws_lambda_events::query_map::QueryMap;
use lambda_http::request::RequestContext;
use lambda_http::{Body, RequestExt};
use seatgate::domain::UserId;
use seatgate::handlers::http::{self as handler, Failure, MAX_BODY_BYTES, errors, respond};
use seatgate::service::ApiService;
use serde::Deserialize;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;

/// The matched route key (`"POST /actions/{action_id}/confirm"`) and its path parameters, from
/// the handler's own route table: only declared routes go through the authorizer, exactly as on
/// AWS.
fn match_route(method: &Method, path: &str) -> Option<(String, HashMap<String, String>)> {
    let matched = handler::match_route(method, path).ok()?;
    let params = matched
        .params
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    Some((matched.route.key(), params))
}

pub(crate) struct Gateway {
    pub(crate) api: ApiService,
    pub(crate) auth: TokenAuthority,
    pub(crate) ui: crate::ui::Ui,
}

/// The axum app: one fallback that plays API Gateway for every method and path.
pub(crate) fn router(gateway: Arc<Gateway>) -> axum::Router {
    axum::Router::new()
        .fallback(serve)
        // The gateway enforces its own limit below; axum's default must not answer first with a
        // different body.
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(gateway)
}

pub(crate) fn failure(f: Failure) -> Response {
    to_axum(f.into_response())
}

fn unauthorized(e: TokenError) -> Response {
    failure(Failure::new(
        StatusCode::UNAUTHORIZED,
        errors::unauthorized().code,
        e.to_string(),
    ))
}

async fn serve(
    State(gateway): State<Arc<Gateway>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    let declared_length = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared_length.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return failure(errors::too_large());
    }
    // Chunked bodies carry no length: read at most one byte past the limit to tell.
    let body = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(bytes) => bytes,
        Err(_) => return failure(errors::too_large()),
    };
    // The runner's own routes answer another method as the API's routes do: 405 with `Allow`.
    if uri.path().trim_end_matches('/') == "/dev/token" {
        if method != Method::POST {
            return failure(errors::method_not_allowed(&[&Method::POST]));
        }
        return issue_token(&gateway.auth, &body);
    }
    if uri.path() == METRICS_PATH {
        if method != Method::GET {
            return failure(errors::method_not_allowed(&[&Method::GET]));
        }
        return metrics();
    }
    if crate::ui::owns(uri.path()) {
        return crate::ui::serve(&gateway, &method, uri.path(), uri.query(), &headers, &body).await;
    }
    let (route_key, claims, params) = match match_route(&method, uri.path()) {
        Some((route_key, params)) => {
            let header = headers
                .get(http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok());
            match gateway.auth.verify_header(header) {
                Ok(claims) => (route_key, Some(claims.as_context_claims()), params),
                Err(e) => return unauthorized(e),
            }
        }
        None => ("$default".to_owned(), None, HashMap::new()),
    };
    let created_flight = route_key == CREATE_FLIGHT;
    let request = to_lambda(method, uri, headers, body, route_key, claims, params);
    let response = seatgate::handlers::http::handle(&gateway.api, request).await;
    if created_flight && response.status() == StatusCode::CREATED {
        watch_created_flight(&gateway, response.body());
    }
    to_axum(response)
}

/// The route whose answers name a new flight; no port lists flights, so the ops page's flight
/// view follows the ones created through this runner ([`crate::history::History::watch`]).
const CREATE_FLIGHT: &str = "POST /admin/flights";

fn watch_created_flight(gateway: &Gateway, body: &Body) {
    let Body::Text(text) = body else { return };
    let id = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| v["flight_id"].as_str().map(str::to_owned))
        .and_then(|id| seatgate::domain::FlightId::parse(&id).ok());
    if let Some(id) = id {
        gateway.ui.history.watch(&id);
    }
}

/// Where the runner serves its metrics.
pub const METRICS_PATH: &str = "/__metrics";

fn metrics() -> Response {
    (
        StatusCode::OK,
        [(
            http::header::CONTENT_TYPE,
            seatgate::metrics::prometheus::CONTENT_TYPE,
        )],
        seatgate::metrics::prometheus_text("local"),
    )
        .into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenRequest {
    sub: String,
    #[serde(default)]
    admin: bool,
}

fn issue_token(auth: &TokenAuthority, body: &[u8]) -> Response {
    let request: TokenRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return failure(errors::invalid_json(e)),
    };
    let user = match UserId::parse(&request.sub) {
        Ok(u) => u,
        Err(e) => return failure(errors::invalid_request(e.to_string())),
    };
    match auth.issue(&user, request.admin) {
        Ok(token) => to_axum(respond(StatusCode::OK, &json!({ "token": token }))),
        Err(e) => {
            tracing::error!(error = %e, "token signing failed");
            failure(Failure::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "internal error",
            ))
        }
    }
}

/// The request as the Lambda runtime hands it to the api function.
fn to_lambda(
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
    route_key: String,
    claims: Option<HashMap<String, String>>,
    params: HashMap<String, String>,
) -> lambda_http::Request {
    let body = if body.is_empty() {
        Body::Empty
    } else {
        match String::from_utf8(body.to_vec()) {
            Ok(text) => Body::Text(text),
            Err(e) => Body::Binary(e.into_bytes()),
        }
    };
    let mut http_description = ApiGatewayV2httpRequestContextHttpDescription::default();
    http_description.method = method.clone();
    http_description.path = Some(uri.path().to_owned());
    http_description.protocol = Some("HTTP/1.1".to_owned());
    http_description.user_agent = headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut context = ApiGatewayV2httpRequestContext::default();
    context.route_key = Some(route_key);
    context.stage = Some("$default".to_owned());
    context.request_id = Some(uuid::Uuid::new_v4().to_string());
    context.time_epoch = seatgate::domain::Millis::now().0;
    context.http = http_description;
    context.authorizer = claims.map(|claims| {
        let mut jwt = ApiGatewayRequestAuthorizerJwtDescription::default();
        jwt.claims = claims;
        let mut authorizer = ApiGatewayRequestAuthorizer::default();
        authorizer.jwt = Some(jwt);
        authorizer
    });
    // API Gateway hands the function the decoded query as well as the raw one; so does this.
    let query: QueryMap = uri.query().unwrap_or_default().parse().unwrap_or_default();
    let mut request = http::Request::new(body);
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.headers_mut() = headers;
    request
        .with_path_parameters(params)
        .with_query_string_parameters(query)
        .with_request_context(RequestContext::ApiGatewayV2(context))
}

pub(crate) fn to_axum(response: lambda_http::Response<Body>) -> Response {
    let (parts, body) = response.into_parts();
    let bytes = match body {
        Body::Text(text) => Bytes::from(text),
        Body::Binary(bytes) => Bytes::from(bytes),
        _ => Bytes::new(),
    };
    (parts.status, parts.headers, bytes).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_routes_match_with_their_parameters() {
        let (key, params) = match_route(&Method::POST, "/actions/abc/confirm").unwrap();
        assert_eq!(key, "POST /actions/{action_id}/confirm");
        assert_eq!(params["action_id"], "abc");
        assert!(match_route(&Method::GET, "/actions/abc/confirm").is_none());
        assert!(match_route(&Method::GET, "/intents/").is_none());
        assert!(match_route(&Method::GET, "/nope").is_none());
        assert!(match_route(&Method::PUT, "/me/credential/").is_some());
    }
}
