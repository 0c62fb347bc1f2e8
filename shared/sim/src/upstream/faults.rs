//! The fault plan: seeded rates and latency (`Faults`), timed outage and rate-limit windows
//! (`Window`), and the refusal a call is answered with instead of being handled (503, 429 with its
//! `Retry-After`, 500), as the port's answers and as the record's outcome text.

use super::record::Route;
use seatgate::domain::Millis;
use seatgate::ports::{CallFailure, ReadError};
use std::fmt;
use std::time::Duration;

/// Seeded faults, applied to each call on arrival (releases excepted). Rates are probabilities in `0..=1` (others
/// are clamped; NaN is 0). The default behaves.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Faults {
    /// Spent before every call's work.
    pub latency: Duration,
    /// A uniform extra in `0..=jitter`, drawn per call.
    pub jitter: Duration,
    /// A call answers 500 without doing anything.
    pub error_rate: f64,
    /// A call answers 429 with `Retry-After: busy_retry_after`, without doing anything.
    pub busy_rate: f64,
    pub busy_retry_after: Duration,
    /// A reserve that commits has its answer lost (the caller hears `Unknown(Timeout)`).
    pub lost_commit_rate: f64,
    /// A reserve is handled late: its caller hears `Unknown(Timeout)` at its timeout while the
    /// upstream's handler goes on, and its write (a commit, or a 409) lands up to
    /// `late_commit_within` past that timeout. Kept within the lease margin, it lands inside
    /// the attempt's lease, as invariant 5 assumes of the upstream; past it, it would not.
    pub late_commit_rate: f64,
    pub late_commit_within: Duration,
    /// The routes the refusals and lost answers apply to (`None`: every route); latency
    /// applies to every call.
    pub routes: Option<Vec<Route>>,
}

impl Faults {
    pub(super) fn applies_to(&self, route: Route) -> bool {
        self.routes.as_ref().is_none_or(|r| r.contains(&route))
    }
}

/// A window of simulated time in which every call (on every route) is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub from: Millis,
    pub until: Millis,
    pub kind: WindowKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowKind {
    /// 503, with a `Retry-After` if given.
    Outage { retry_after: Option<Duration> },
    /// 429 with this `Retry-After`.
    RateLimited { retry_after: Duration },
}

/// Why a call is answered without being handled.
#[derive(Debug, Clone, Copy)]
pub(super) enum Refusal {
    /// 503, or 429: busy, with the time it gave.
    Busy(Option<Duration>, u16),
    /// 500.
    ServerError,
}

pub(super) fn window_refusal(kind: WindowKind) -> Refusal {
    match kind {
        WindowKind::Outage { retry_after } => Refusal::Busy(retry_after, 503),
        WindowKind::RateLimited { retry_after } => Refusal::Busy(Some(retry_after), 429),
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Busy(Some(after), status) => {
                write!(f, "{status} retry-after {}ms", after.as_millis())
            }
            Refusal::Busy(None, status) => write!(f, "{status}"),
            Refusal::ServerError => f.write_str("500"),
        }
    }
}

pub(super) fn read_refusal<T>(refusal: Refusal) -> Result<T, ReadError> {
    match refusal {
        Refusal::Busy(retry_after, _) => Err(ReadError::Busy { retry_after }),
        Refusal::ServerError => Err(ReadError::Failed(CallFailure::Status(500))),
    }
}
