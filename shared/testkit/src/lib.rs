//! Test support for seatgate, kept out of every function's dependency tree (the test command
//! checks that no Lambda binary links it):
//! - [`contract`]: what every store and queue adapter must do, written once and run against the
//!   embedded backend, DynamoDB Local and moto ([`store_contract!`], [`queue_contract!`]).
//! - [`faults`]: a store decorator that fails chosen calls the way DynamoDB can (throttling,
//!   conflicts, a timeout after the write committed), which no emulator produces.
//! - [`protection`]: the upstream's protections across several instances on one store (single-
//!   flight reads, stale serving, a cancelled leader, one probe), run on every backend
//!   ([`protection_contract!`]).
//! - [`lambda`]: the Lambda `Invoke` API on loopback, answering with a handler the test gives.
//! - [`redrive`]: the dead-letter redrive contract, run against both queue adapters.
//! - [`ManualClock`]: time that moves only when a test says so. Tokio's (paused) time as a clock,
//!   and seeded randomness and ids, are `seatgate_memory::runtime`'s, beside the deterministic
//!   backend, so the simulator need not link this crate.
//! - [`setup`]: the one set-up of the upstream simulator and the emulator clients that every
//!   test file uses, with the message that says how to start a missing emulator.

pub mod clock;
pub mod contract;
pub mod faults;
pub mod flow;
pub mod lambda;
pub mod paging;
pub mod protection;
pub mod redrive;
pub mod setup;

pub use clock::ManualClock;
pub use faults::{Fault, FaultKind, FaultyStore, StoreOp};
