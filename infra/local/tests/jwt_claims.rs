//! The runner's JWT authorizer claim by claim, through its real HTTP listener: every way a token
//! can be wrong that API Gateway's JWT authorizer refuses on AWS (`exp`, `nbf`, `iat`, `iss`,
//! `aud`) is refused here too, as are what the runner adds (`sub`, HS256 only, its own key), each
//! with `401 unauthorized`, a message that names the claim, and nothing of the token in the
//! body; a token with every claim right is served.
//!
//! The tokens are signed in the test with jsonwebtoken and the key the stack is started with,
//! not by the runner, so a claim the runner would never mint can be tried.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use reqwest::{Client, StatusCode};
use seatgate::domain::Secret;
use seatgate_local::auth::{AUDIENCE, CLOCK_LEEWAY, ISSUER};
use seatgate_local::{RunnerConfig, Stack, start};
use serde_json::{Value, json};

mod common;
use common::dev_token;

/// The stack's signing key, set explicitly so the test can sign with it.
const KEY: &str = "jwt-claims-test-key";

/// `{"alg":"none","typ":"JWT"}`, base64url: jsonwebtoken will not write such a header.
const NONE_HEADER: &str = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0";

/// Well past [`CLOCK_LEEWAY`], so the refusals do not depend on how fast the test runs.
const FAR: i64 = 10 * 60;

async fn stack() -> Stack {
    let config = RunnerConfig {
        jwt_secret: Some(Secret::new(KEY)),
        ..RunnerConfig::ephemeral(None)
    };
    start(config).await.expect("stack starts")
}

fn now() -> i64 {
    jsonwebtoken::get_current_timestamp() as i64
}

/// Every claim right, as the deployed authorizer and the runner want them.
fn good_claims() -> Value {
    let now = now();
    json!({ "sub": "u1", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "nbf": now, "exp": now + 3600 })
}

/// The good claims with each named claim replaced, or removed where the value is `null`.
fn with(changes: &[(&str, Value)]) -> Value {
    let mut claims = good_claims();
    let map = claims.as_object_mut().unwrap();
    for (name, value) in changes {
        if value.is_null() {
            map.remove(*name);
        } else {
            map.insert((*name).to_owned(), value.clone());
        }
    }
    claims
}

fn sign(alg: Algorithm, key: &str, claims: &Value) -> String {
    jsonwebtoken::encode(
        &Header::new(alg),
        claims,
        &EncodingKey::from_secret(key.as_bytes()).unwrap(),
    )
    .unwrap()
}

fn signed(claims: &Value) -> String {
    sign(Algorithm::HS256, KEY, claims)
}

/// The good token's claims under an unsigned `alg: none` header.
fn unsigned() -> String {
    let token = signed(&good_claims());
    let payload = token.split('.').nth(1).unwrap();
    format!("{NONE_HEADER}.{payload}.")
}

/// `GET /me/bookings` with `token`: status and body text.
async fn call(client: &Client, api: &str, token: &str) -> (StatusCode, String) {
    let resp = client
        .get(format!("{api}/me/bookings"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    (resp.status(), resp.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_wrong_claim_is_refused_by_name_and_a_right_token_is_served() {
    assert!(
        FAR as u64 > 2 * CLOCK_LEEWAY.as_secs(),
        "the cases must be well outside the leeway"
    );
    let stack = stack().await;
    let client = Client::new();
    let api = &stack.api_url;
    let now = now();
    let good = signed(&good_claims());

    // (case, token, what the message must contain)
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "expired",
            signed(&with(&[
                ("iat", json!(now - 2 * 3600)),
                ("nbf", json!(now - 2 * 3600)),
                ("exp", json!(now - 3600)),
            ])),
            "has expired (exp)",
        ),
        (
            "not yet valid",
            signed(&with(&[("nbf", json!(now + FAR))])),
            "not yet valid (nbf)",
        ),
        (
            "issued in the future",
            signed(&with(&[("iat", json!(now + FAR))])),
            "issued in the future (iat)",
        ),
        (
            "wrong issuer",
            signed(&with(&[("iss", json!("https://idp.example.com"))])),
            "issuer is not accepted (iss)",
        ),
        (
            "wrong audience",
            signed(&with(&[("aud", json!("another-api"))])),
            "another audience (aud)",
        ),
        (
            "missing aud",
            signed(&with(&[("aud", Value::Null)])),
            "no audience (aud)",
        ),
        (
            "missing sub",
            signed(&with(&[("sub", Value::Null)])),
            "no subject (sub)",
        ),
        (
            "empty sub",
            signed(&with(&[("sub", json!(""))])),
            "no subject (sub)",
        ),
        (
            "missing iat",
            signed(&with(&[("iat", Value::Null)])),
            "no issue time (iat)",
        ),
        ("alg none", unsigned(), "not signed with HS256 (alg)"),
        (
            "HS512",
            sign(Algorithm::HS512, KEY, &good_claims()),
            "not signed with HS256 (alg)",
        ),
        (
            "wrong key",
            sign(Algorithm::HS256, "someone-elses-key", &good_claims()),
            "signature does not verify",
        ),
        (
            "truncated",
            good[..good.len() / 2].to_owned(),
            "not a well-formed JWT",
        ),
    ];

    let mut failures = Vec::new();
    for (case, token, wanted) in &cases {
        let (status, text) = call(&client, api, token).await;
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let message = body["message"].as_str().unwrap_or_default();
        // The token and each of its parts: none may come back, not even the signature.
        let echoed = std::iter::once(token.as_str())
            .chain(token.split('.').filter(|part| part.len() >= 8))
            .any(|part| text.contains(part));
        if status != StatusCode::UNAUTHORIZED
            || body["error"] != "unauthorized"
            || !message.contains(wanted)
            || echoed
        {
            failures.push(format!(
                "{case}: {status} {text} (wanted 401 unauthorized naming {wanted:?}{})",
                if echoed { ", and the token echoed" } else { "" }
            ));
        }
    }

    let (status, text) = call(&client, api, &good).await;
    if status != StatusCode::OK {
        failures.push(format!("all claims right: {status} {text} (wanted 200)"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_tokens_carry_every_claim_the_authorizer_checks() {
    let stack = stack().await;
    let client = Client::new();
    let token = dev_token(&client, &stack.api_url, "u1", false)
        .await
        .unwrap();

    // Checked here independently of the runner's own validation.
    let mut validation = Validation::new(Algorithm::HS256);
    validation.set_issuer(&[ISSUER]);
    validation.set_audience(&[AUDIENCE]);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    let claims = jsonwebtoken::decode::<Value>(
        &token,
        &DecodingKey::from_secret(KEY.as_bytes()).unwrap(),
        &validation,
    )
    .expect("a dev token verifies with the runner's key")
    .claims;
    assert_eq!(claims["sub"], "u1");
    assert_eq!(claims["aud"], AUDIENCE);
    let iat = claims["iat"].as_i64().expect("iat");
    assert!((iat - now()).abs() <= 5, "iat is now: {claims}");
    assert!(claims["exp"].as_i64().expect("exp") > iat);

    let (status, text) = call(&client, &stack.api_url, &token).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    stack.shutdown().await;
}
