//! Handlers: the thin edge between Lambda events and the services.
//!
//! Each parses its event into validated domain commands, calls one service and maps the result
//! back. The Lambda binaries in `functions/` and the local runner call these same functions, so
//! the code path under test locally is the one that runs on AWS.

pub mod delivery;
pub mod http;
pub mod queue;
pub mod schedule;
pub mod stream;
