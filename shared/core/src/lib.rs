//! seatgate: seat reservations in front of a fragile upstream seat system.
//!
//! This crate is the inside of the hexagon, so the same service code runs on AWS Lambda and in
//! the local runner, and links neither the AWS SDK nor SQLite:
//! - [`domain`]: intents, actions, leases, fencing tokens, outbox events, and the rules that
//!   decide every transition. No AWS types.
//! - [`ports`]: the small capability traits the services need (stores, queue, upstream,
//!   subscribers, clock). Each store operation is shaped to be exactly one DynamoDB conditional
//!   write, one `TransactWriteItems` or one `Query`, so no adapter can hide a read-then-write.
//! - [`service`]: the use cases (API, relay, worker, reaper) written once against the ports, and
//!   wired once by [`service::Services::new`].
//! - [`handlers`]: thin edges that turn Lambda event shapes into service calls and back.
//! - [`adapters`]: the outbound HTTP adapters both backends share (the upstream, webhooks) and
//!   the system clock.
//!
//! The backends live in their own crates: `seatgate-aws` (DynamoDB, Streams, SQS, Lambda wiring)
//! and `seatgate-embedded` (SQLite). Test support (the contract suite, fault injection, the
//! manual clock) is `seatgate-testkit`, which no function links.

pub mod adapters;
pub mod backoff;
pub mod config;
pub mod domain;
pub mod handlers;
pub mod metrics;
pub mod ports;
pub mod service;
pub mod telemetry;
