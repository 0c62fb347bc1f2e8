//! The upstream seat system as an in-process model: the truth of seats and charges, the faults
//! the project names, and a record of every call.
//!
//! It implements [`seatgate::ports::Upstream`] directly, with no HTTP in between, because a
//! simulated run must not touch sockets (they are real time and real scheduling) and because
//! the typed answers ([`ReserveOutcome`], [`ReadError`], [`ChargeReadError`]) are what the
//! services decide on. Each fault answers with the very type the HTTP adapter
//! (`seatgate::adapters::upstream_http`) reads from the wire answer `infra/upstream-sim` gives
//! for it, so the services see here what they would see there:
//! - a second reserve of a taken seat (even by its holder) is `SeatTaken` (409 `seat_taken`);
//!   a user who holds a charge gets `AlreadyCharged` (409 `already_charged`): one charge per
//!   user; an unknown credential is `CredentialRejected` (401);
//! - an outage window answers 503, with its `Retry-After` when it has one: `Busy{retry_after}`
//!   (the adapter reads any 503 as busy, `None` when it gave no time);
//! - a rate-limited window, or a seeded 429, answers `Busy{retry_after: Some(..)}`;
//! - a seeded 5xx answers 500: `Unknown(Status(500))` for a reserve (nothing was written, but
//!   the caller cannot know), `Failed(Status(500))` for a read;
//! - latency is spent with `tokio::time::sleep` (simulated time) before the work, as the HTTP
//!   simulator does; latency past the caller's upstream timeout ends the call as
//!   `Unknown(Timeout)` at the timeout, with nothing done (the HTTP server drops the handler
//!   with the connection);
//! - commit-then-lost-response: the reserve commits, and the caller hears `Unknown(Timeout)`
//!   when its timeout runs out (armed for the next `n` commits, or drawn per reserve);
//! - a reserve handled late: the caller hears `Unknown(Timeout)` at its timeout while the
//!   handler goes on, as an HTTP server's does after the client hangs up, and its write (a
//!   commit or a 409) lands later, on a task of its own (`Faults::late_commit_rate`).
//!
//! Deterministic: all state is in ordered maps behind one `std::sync::Mutex` (never held across
//! an `.await`), charge ids are counters, every draw comes from one `StdRng` seeded by the
//! caller, and time only from the injected [`Clock`] and tokio's (paused) timers. Draws happen
//! in call-arrival order, which a current-thread runtime on paused time fixes.
//!
//! The record: every call, in arrival order, with its simulated arrival and completion time,
//! route, key (seat, room, or the user the credential names; never the credential) and outcome,
//! rendered by [`UpstreamModel::call_log`] as stable strings so two runs compare byte for byte.
//! A call whose caller gave up during its latency is recorded as `abandoned` (it reached the
//! upstream, did nothing). Releases by users ([`UpstreamModel::release`]) are in the record as
//! route `release`: they are not calls from seatgate, but they change the truth, and a checker
//! needs to know when a seat became free. The record holds at most [`CALL_LOG_CAPACITY`]
//! entries; calls past it are counted but not kept.
//!
//! Layout: `record.rs` (routes, calls, commits), `faults.rs` (the fault plan and refusals),
//! `model.rs` (the state and the call machinery), `port.rs` (the `Upstream` port on the model),
//! `tests.rs`.
//!
//! [`ReserveOutcome`]: seatgate::ports::ReserveOutcome
//! [`ReadError`]: seatgate::ports::ReadError
//! [`ChargeReadError`]: seatgate::ports::ChargeReadError
//! [`Clock`]: seatgate::ports::Clock

mod faults;
mod model;
mod port;
mod record;
#[cfg(test)]
mod tests;

pub use faults::{Faults, Window, WindowKind};
pub use model::UpstreamModel;
pub use record::{CALL_LOG_CAPACITY, Call, Commit, Route, peak_in_flight};
