//! The reservation pipeline's guarantees, exercised through the real services on the embedded
//! backend against the upstream simulator, with a manual clock so leases expire without sleeping.
//!
//! `Pipeline::pump` plays the event source mappings the way the runner does: outbox -> relay
//! (the stream handler), queue -> worker, until nothing moves.
//!
//! Layout, one file per guarantee under `pipeline/`, declared below in an inline `mod pipeline`
//! (so this file stays the binary's root: `cargo test -p seatgate-embedded --test pipeline`):
//!
//! - `common.rs`: `Pipeline` and its `pump`, shared by every test.
//! - `one_write.rs`: one upstream write per seat, whatever is repeated or replayed.
//! - `unknown_outcomes.rs`: lost responses, timeouts and dead workers settled by charge reads.
//! - `upstream_answers.rs`: bad credentials, outages, 429 storms, `already charged`.
//! - `reaper_and_waits.rs`: requeues of lost messages, and waits from back-off to deadline.
//! - `events.rs`: terminal events through the event queue and its dead letters.

mod pipeline {
    mod common;
    mod events;
    mod one_write;
    mod reaper_and_waits;
    mod unknown_outcomes;
    mod upstream_answers;
}
