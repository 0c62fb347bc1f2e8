//! Subscriber delivery by webhook: a signed POST per terminal event.
//!
//! The body is the event JSON; `X-Seatgate-Event-Id` repeats its stable id so receivers can drop
//! duplicates (delivery is at least once); `X-Seatgate-Signature: t=<unix seconds>,v1=<hex>` is
//! HMAC-SHA256 over `"<t>.<body>"`, so a receiver can check origin and refuse stale replays.

use crate::domain::{Event, Secret};
use crate::ports::{PublishError, Subscribers};
use async_trait::async_trait;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::time::Duration;

pub const EVENT_ID_HEADER: &str = "x-seatgate-event-id";
pub const SIGNATURE_HEADER: &str = "x-seatgate-signature";

/// `t=<timestamp>,v1=<hex hmac>` for a body.
pub fn sign(key: &Secret, timestamp: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key.expose().as_bytes())
        .expect("HMAC accepts keys of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!(
        "t={timestamp},v1={}",
        hex::encode(mac.finalize().into_bytes())
    )
}

/// Checks a signature header in constant time. For receivers and tests.
pub fn verify(key: &Secret, header: &str, body: &[u8]) -> bool {
    let mut t = None;
    let mut v1 = None;
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", v)) => t = v.parse::<i64>().ok(),
            Some(("v1", v)) => v1 = hex::decode(v).ok(),
            _ => {}
        }
    }
    let (Some(t), Some(v1)) = (t, v1) else {
        return false;
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(key.expose().as_bytes())
        .expect("HMAC accepts keys of any length");
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.verify_slice(&v1).is_ok()
}

#[derive(Clone)]
pub struct Webhook {
    client: reqwest::Client,
    url: String,
    key: Secret,
    /// The signature's timestamp comes from here: the system clock unless one is given.
    clock: std::sync::Arc<dyn crate::ports::Clock>,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl Webhook {
    pub fn new(url: impl Into<String>, key: Secret, timeout: Duration) -> anyhow::Result<Self> {
        Ok(Webhook {
            client: reqwest::Client::builder().timeout(timeout).build()?,
            url: url.into(),
            key,
            clock: std::sync::Arc::new(crate::adapters::clock::SystemClock),
        })
    }

    /// The same subscriber, signing with `clock`'s time (a deployment's shared clock).
    pub fn with_clock(mut self, clock: std::sync::Arc<dyn crate::ports::Clock>) -> Self {
        self.clock = clock;
        self
    }
}

#[async_trait]
impl Subscribers for Webhook {
    async fn publish(&self, event: &Event) -> Result<(), PublishError> {
        let body = serde_json::to_vec(event).map_err(|e| PublishError(e.to_string()))?;
        let timestamp = self.clock.now().0 / 1000;
        let resp = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header(EVENT_ID_HEADER, event.event_id())
            .header(SIGNATURE_HEADER, sign(&self.key, timestamp, &body))
            .body(body)
            .send()
            .await
            .map_err(|e| {
                PublishError(
                    if e.is_timeout() {
                        "timeout"
                    } else {
                        "transport error"
                    }
                    .into(),
                )
            })?;
        if resp.status().is_success() {
            Ok(())
        } else {
            Err(PublishError(format!(
                "subscriber answered {}",
                resp.status().as_u16()
            )))
        }
    }
}

/// No subscribers configured: events are dropped (and counted as delivered).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoSubscribers;

#[async_trait]
impl Subscribers for NoSubscribers {
    async fn publish(&self, _event: &Event) -> Result<(), PublishError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_verify_and_detect_tampering() {
        let key = Secret::new("k");
        let header = sign(&key, 1_700_000_000, b"{\"a\":1}");
        assert!(header.starts_with("t=1700000000,v1="));
        assert!(verify(&key, &header, b"{\"a\":1}"));
        assert!(!verify(&key, &header, b"{\"a\":2}"));
        assert!(!verify(&Secret::new("other"), &header, b"{\"a\":1}"));
        assert!(!verify(&key, "garbage", b"{\"a\":1}"));
    }
}
