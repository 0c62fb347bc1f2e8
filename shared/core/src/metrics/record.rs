//! What several services record alike, and the dimension values of domain types: each a fixed
//! string, so a status code or a reason with a payload cannot grow a dimension.

use super::{Metric, count, observe_ms};
use crate::domain::{BreakerPhase, Intent, Outcome, Reason};

/// An intent's `reason` as a dimension value (`upstream_refused` for every refused status).
pub fn reason(reason: Option<Reason>) -> &'static str {
    match reason {
        None => "none",
        Some(Reason::Reserved) => "reserved",
        Some(Reason::SeatTaken) => "seat_taken",
        Some(Reason::NoCredential) => "no_credential",
        Some(Reason::CredentialRejected) => "credential_rejected",
        Some(Reason::UpstreamRefused(_)) => "upstream_refused",
        Some(Reason::ChargeRead) => "charge_read",
        Some(Reason::NoCharge) => "no_charge",
        Some(Reason::Deadline) => "deadline",
        Some(Reason::Cancelled) => "cancelled",
        Some(Reason::NeverProcessed) => "never_processed",
        Some(Reason::AlreadyCharged) => "already_charged",
        Some(Reason::UpstreamBusy) => "upstream_busy",
    }
}

/// A settled attempt's outcome as a dimension value.
pub fn outcome(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Charged {
            how: Reason::ChargeRead,
            ..
        } => "charge_read",
        Outcome::Charged { .. } => "reserved",
        Outcome::SeatTaken => "seat_taken",
        Outcome::Suppressed => "suppressed",
        Outcome::NoCharge => "no_charge",
        Outcome::NoCredential => "no_credential",
        Outcome::CredentialRejected => "credential_rejected",
        Outcome::Refused(_) => "refused",
        Outcome::AlreadyCharged => "already_charged",
        Outcome::Busy { .. } => "busy",
    }
}

/// A breaker phase as a dimension value.
pub fn phase(phase: &BreakerPhase) -> &'static str {
    match phase {
        BreakerPhase::Closed => "closed",
        BreakerPhase::Open { .. } => "open",
        BreakerPhase::Probing { .. } => "probing",
    }
}

/// An attempt's outcome was written under its fencing token (by the worker, or by the reaper
/// from the charge).
pub fn attempt_settled(settled: &Outcome) {
    count(Metric::AttemptsSettled, &[("outcome", outcome(settled))], 1);
}

/// `written` is what a conditional write returned: if it is terminal, this write made it so
/// (no transition leaves a terminal status, so the store admits it once per intent), and it is
/// counted with its time from creation to here.
///
/// Counted where the write is answered rather than in the relay from the stream: the stream is
/// delivered at least once (a batch retried after a failure or a timeout, the runner re-reading
/// from the trim horizon after a restart), while the conditional write that ends an intent
/// succeeds exactly once. A retried write whose first try committed is counted by its caller,
/// which recognises its own result.
pub fn if_terminal(written: &Intent) {
    if !written.status.is_terminal() {
        return;
    }
    let status = written.status.as_str();
    count(
        Metric::IntentsTerminal,
        &[("status", status), ("reason", reason(written.reason))],
        1,
    );
    let ms = (written.updated_at.0 - written.created_at.0).max(0) as u64;
    observe_ms(Metric::TimeToTerminal, &[("status", status)], ms);
}
