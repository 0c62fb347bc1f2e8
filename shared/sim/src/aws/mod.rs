//! The AWS path, predicted: the simulator's world run on the latencies and limits a deployed
//! stack meets ([`profile`]: a table of published figures, each with its source), with the
//! store's calls timed as the requests they stand for ([`service_time`]), and the scenarios an
//! operator sizes a sale by ([`predict`]).
//!
//! Why in the simulator: nothing here can reach AWS, and DynamoDB Local applies transactions
//! one at a time, so the emulator's latencies describe the emulator. The simulator runs the
//! real services on simulated time; given AWS's service times it says what the deployed
//! pipeline would do with them, as a function of a seed, in seconds of wall time.

pub mod capacity;
pub mod cost;
pub mod predict;
pub mod profile;
pub mod service_time;

pub use profile::{AwsProfile, Dist, Input};
pub use service_time::{AwsServiceTime, input_of};
