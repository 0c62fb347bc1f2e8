//! The HTTP contract through the local runner: who may see and do what, and what bad input gets.
//!
//! Every bad request must get a 4xx with a stable `error` code and a message, never a 5xx.

use reqwest::{Client, Method, StatusCode};

use seatgate_local::{RunnerConfig, Stack, start};

use serde_json::{Value, json};

use std::time::Duration;

async fn stack() -> Stack {
    let mut config = RunnerConfig::ephemeral(None);
    config.timing = seatgate::config::Timing::fast();
    start(config).await.expect("stack starts")
}

struct Caller<'a> {
    http: Client,
    api: &'a str,
    token: String,
}

impl<'a> Caller<'a> {
    fn new(stack: &'a Stack, user: &str) -> Self {
        Caller {
            http: Client::new(),
            api: &stack.api_url,
            token: stack.token(user, false).unwrap(),
        }
    }

    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.api))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    async fn prepare(&self, seat: &str) -> String {
        let (status, body) = self
            .call(
                Method::POST,
                "/actions",
                Some(json!({"kind": "reserve_seat", "seat_id": seat})),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        assert_eq!(body["seat_id"], seat);
        assert_eq!(body["kind"], "reserve_seat");
        assert!(body["expires_at"].as_str().unwrap().ends_with('Z'));
        body["action_id"].as_str().unwrap().to_owned()
    }
}

fn assert_error(status: StatusCode, body: &Value, want_status: u16, want_code: &str) {
    assert_eq!(status.as_u16(), want_status, "{body}");
    assert_eq!(body["error"], want_code, "{body}");
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
}

/// The same claims with the signature of another key: the payload part of a real token with
/// `sub` swapped, re-attached to the original signature.
fn forge(token: &str) -> String {
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3);
    let payload = base64_url::decode(parts[1]);
    let mut claims: Value = serde_json::from_slice(&payload).unwrap();
    claims["sub"] = json!("someone-else");
    let forged = base64_url::encode(&serde_json::to_vec(&claims).unwrap());
    format!("{}.{}.{}", parts[0], forged, parts[2])
}

/// Just enough base64url for `forge`, to avoid a dependency for one test.
mod base64_url {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

    pub fn encode(bytes: &[u8]) -> String {
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
            for i in 0..=chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            }
        }
        out
    }

    pub fn decode(text: &str) -> Vec<u8> {
        let values: Vec<u32> = text
            .bytes()
            .map(|c| ALPHABET.iter().position(|a| *a == c).unwrap() as u32)
            .collect();
        let mut out = Vec::new();
        for chunk in values.chunks(4) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |acc, (i, v)| acc | (v << (18 - 6 * i)));
            for i in 0..chunk.len().saturating_sub(1) {
                out.push((n >> (16 - 8 * i)) as u8);
            }
        }
        out
    }
}

impl<'a> Caller<'a> {
    fn admin(stack: &'a Stack, user: &str) -> Self {
        Caller {
            http: Client::new(),
            api: &stack.api_url,
            token: stack.token(user, true).unwrap(),
        }
    }

    async fn book(&self, flight: &str, body: Value, key: Option<&str>) -> (StatusCode, Value) {
        let mut req = self
            .http
            .post(format!("{}/flights/{flight}/bookings", self.api))
            .bearer_auth(&self.token)
            .json(&body);
        if let Some(key) = key {
            req = req.header("idempotency-key", key);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        (status, resp.json().await.unwrap_or(Value::Null))
    }
}

mod admin;
mod callers;
mod flights;
mod holds;
mod routes;
mod seats;
mod waitlist;
