//! seatgate: seat reservations in front of a fragile upstream seat system.
//!
//! The crate is laid out hexagonally so the same service code runs on AWS Lambda and in the
//! local runner:
//! - [`domain`]: intents, actions, leases, fencing tokens, outbox events. No AWS types.
//! - [`ports`]: the small capability traits the services need (stores, queue, upstream,
//!   subscribers, clock). Each store operation is shaped to be exactly one DynamoDB conditional
//!   write, one `TransactWriteItems` or one `Query`, so no adapter can hide a read-then-write.
//! - [`service`]: the use cases (API, relay, worker, reaper) written once against the ports.
//! - [`handlers`]: thin edges that turn Lambda events into service calls and back.
//! - [`adapters`]: `embedded` (SQLite), `dynamodb`, `sqs`, and the HTTP upstream and webhook.
//! - [`contract`]: the contract suite every store and queue adapter must pass.

pub mod adapters;
pub mod config;
pub mod contract;
pub mod domain;
pub mod handlers;
pub mod lambda_env;
pub mod ports;
pub mod service;
pub mod telemetry;
