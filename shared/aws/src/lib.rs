//! seatgate on AWS: the ports on DynamoDB (+ Streams) and SQS FIFO, the table and queue
//! definitions `template.yaml` is checked against, and the Lambda wiring.
//!
//! - [`dynamodb`]: the store ports on one table, each state change one conditional write or one
//!   `TransactWriteItems`; the stream records the relay reads, decoded into domain changes.
//! - [`sqs`]: the per-seat FIFO queue and its dead-letter queue.
//! - [`events`]: the (standard) queue of terminal-intent events for the delivery function.
//! - [`wake_ups`]: the (standard, delayed) queue of the breaker's wake-ups of the reaper.
//! - [`lambda`]: what a function reads from its environment, and its adapters built once per
//!   cold start.
//!
//! The Lambda binaries link this crate and `seatgate` only: no SQLite, no test support.

pub mod dynamodb;
pub mod events;
pub mod kms;
pub mod lambda;
pub mod queue_admin;
pub mod reaper_pass;
pub mod sqs;
pub mod wake_ups;
