//! The use cases, written once against the ports and run unchanged by the Lambda functions and
//! the local runner: the API (prepare, confirm, wait, read, cancel), the relay (outbox -> queue
//! and subscribers), the worker (one upstream write per seat) and the reaper (expired leases,
//! due waits, lost messages).

pub mod api;
pub mod reaper;
pub mod relay;
pub mod worker;

pub use api::ApiService;
pub use reaper::{Reaper, ReaperReport};
pub use relay::{Relay, RelayError};
pub use worker::{QueueRecord, Worker};

use crate::ports::StoreError;
use std::future::Future;
use std::time::Duration;

/// Retries a store call that failed with a retryable error (throttling, transaction conflict).
///
/// Safe for conditional writes: both errors mean the write did not happen, and a repeated
/// conditional write cannot apply twice. Other errors are returned at once: a timeout may hide a
/// write that did happen, and the caller's state machine (leases, the reaper) deals with that.
pub(crate) async fn with_retry<T, E, F, Fut>(mut call: F) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: AsStoreError,
{
    const ATTEMPTS: u32 = 4;
    let mut delay = Duration::from_millis(10);
    let mut attempt = 1;
    loop {
        match call().await {
            Err(e)
                if attempt < ATTEMPTS && e.store_error().is_some_and(StoreError::is_retryable) =>
            {
                let jitter = rand::random_range(0..=delay.as_millis() as u64);
                tokio::time::sleep(delay + Duration::from_millis(jitter)).await;
                delay *= 2;
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// Errors that may wrap a [`StoreError`], so [`with_retry`] can tell whether to try again.
pub(crate) trait AsStoreError {
    fn store_error(&self) -> Option<&StoreError>;
}

impl AsStoreError for StoreError {
    fn store_error(&self) -> Option<&StoreError> {
        Some(self)
    }
}

impl AsStoreError for crate::ports::TransitionError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            crate::ports::TransitionError::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl AsStoreError for crate::ports::ConfirmError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            crate::ports::ConfirmError::Store(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    /// The runner spawns these on a multi-threaded runtime: their futures must be `Send`.
    #[allow(dead_code)]
    fn service_futures_are_send(
        relay: &super::Relay,
        reaper: &super::Reaper,
        worker: &super::Worker,
        changes: &[crate::domain::IntentChange],
        records: &[super::QueueRecord],
    ) {
        fn send<T: Send>(_: T) {}
        send(relay.handle(changes));
        send(reaper.run_once(1));
        send(worker.handle_batch(records));
    }
}
