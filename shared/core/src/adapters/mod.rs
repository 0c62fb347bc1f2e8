//! The outbound adapters every backend shares: the upstream seat system and webhook subscribers
//! over HTTP, the system clock, and the OS's randomness and UUIDv7 ids.
//!
//! They live in the core crate rather than beside DynamoDB or SQLite because both backends (and
//! the Lambda functions, which link only core and the AWS crate) send the same HTTP; they need
//! reqwest and an HMAC, nothing from a store.

pub mod clock;
pub mod entropy;
pub mod sealing;
pub mod upstream_http;
pub mod wake_timer;
pub mod webhook;
