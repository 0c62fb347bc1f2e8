//! What DynamoDB Local cannot produce (throttling, transaction conflicts, a timeout after a
//! write committed) injected with `FaultyStore` around a real `DynamoStore` on DynamoDB Local, so
//! the services' retries (`service::with_retry`: 4 attempts, for `Throttled` and
//! `TransactionConflict` only) and their failure paths run against the real adapter:
//!
//! - a fault that clears within the retry budget is retried and the call succeeds;
//! - one that does not fails cleanly: the API answers `503 {"error":"unavailable"}` with nothing
//!   written, the worker hands the message back with the rest of its group without calling the
//!   upstream, the reaper surfaces the error having written nothing;
//! - a timeout (`Unavailable`) is never retried by the services: the write may have happened,
//!   and the state machine (an idempotent confirm, the lease and the reaper) settles it.
//!
//! `FaultyStore::fail_next` fails a call before it reaches DynamoDB (what throttling and conflicts
//! mean: nothing written); `fail_after_next` lets it through and loses the answer.
//!
//! Needs DynamoDB Local: `eval "$(scripts/emulators.sh start)"`. Without it every test here fails
//! saying so; none is skipped.
//!
//! Layout, one file per service under `faults/`, declared below in an inline `mod faults` (so
//! this file stays the binary's root: `cargo test -p seatgate-aws --test faults`):
//!
//! - `common.rs`: the rig (real store, `FaultyStore`, clock, simulator) and request helpers.
//! - `api.rs`: the confirm under throttling and timeouts.
//! - `worker.rs`: claim and settle writes under conflicts and lost answers.
//! - `reaper.rs`: reaper passes under throttling, and a seat's claim on DynamoDB.

mod faults {
    mod api;
    mod common;
    mod reaper;
    mod worker;
}
