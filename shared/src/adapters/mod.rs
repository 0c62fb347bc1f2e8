//! Adapters: the ports implemented on real infrastructure.
//!
//! `embedded` (SQLite, one process, durable) is the default for local runs; `dynamodb` and `sqs`
//! are the production path. `upstream_http` and `webhook` talk HTTP to the upstream seat system and
//! to subscribers. `clock` is the system clock and a manual one for tests.

pub mod clock;
pub mod dynamodb;
pub mod embedded;
pub mod sqs;
pub mod upstream_http;
pub mod webhook;
