//! The audit: every intent can be explained after the fact. Its consent record says who asked
//! for what, and its history (one record per write, written by that very write) says every
//! state it went through. An operator answering "why was I charged?" or "why did I lose?" reads
//! these, so a gap or a disagreement is a broken promise even when the final state is right.
//!
//! Definition, for every intent in the final snapshot:
//! 1. consent: a consent record exists with the intent's user, seat and kind, consented no later
//!    than the intent was created;
//! 2. history: its records' versions are exactly `1..=version`, in order (gapless, increasing);
//!    the first is the creation (no `from`, `to` the intent's first status: REQUESTED for an
//!    immediate intent, WAITING_FOR_SEAT for a wait); each record's `from` is the previous one's
//!    `to`; no record leaves a terminal status; fencing tokens never go back; and the last
//!    record agrees with the intent (status, reason, `updated_at`, fencing token).
//!
//! Not required: that times increase with versions. Each record's time is its writer's `now`,
//! taken when the write was built: a write retried after a store error, or built on another
//! instance (another Lambda's clock), can land after a write stamped later. The history is
//! ordered by version, which the conditional writes make exact. (The first 20,000 seeds of the
//! default workload showed 19 such histories before this was dropped.)
//!
//! No other allowance: both are written in the same transaction as the state they describe,
//! so nothing about timing or faults excuses a difference.

use super::{Checker, Record, Violation};
use seatgate::domain::{Intent, IntentKind, IntentStatus, TransitionRecord};

pub fn check(record: &Record) -> Vec<Violation> {
    let mut out = Vec::new();
    for intent in &record.last.intents {
        consent(record, intent, &mut out);
        let history = record
            .audit
            .histories
            .get(&intent.intent_id)
            .map_or(&[][..], Vec::as_slice);
        if let Err(why) = history_explains(intent, history) {
            out.push(Violation::new(
                Checker::Audit,
                format!(
                    "intent {} (user {} seat {}, {} version {}): {why}",
                    intent.intent_id,
                    intent.user_id,
                    intent.seat_id,
                    intent.status.as_str(),
                    intent.version
                ),
            ));
        }
    }
    out
}

fn consent(record: &Record, intent: &Intent, out: &mut Vec<Violation>) {
    let why = match record.audit.consents.get(&intent.intent_id) {
        None => "has no consent record".to_owned(),
        Some(c) if c.user_id != intent.user_id || c.seat_id != intent.seat_id => format!(
            "has a consent record for user {} seat {}",
            c.user_id, c.seat_id
        ),
        Some(c) if c.kind != intent.kind => format!("has a consent record of kind {:?}", c.kind),
        Some(c) if c.consented_at > intent.created_at => format!(
            "was created at {} before its consent at {}",
            record.t(intent.created_at),
            record.t(c.consented_at)
        ),
        Some(_) => return,
    };
    out.push(Violation::new(
        Checker::Audit,
        format!("intent {} {why}", intent.intent_id),
    ));
}

/// Whether `history` explains `intent` (the definition's second part); the first mismatch.
fn history_explains(intent: &Intent, history: &[TransitionRecord]) -> Result<(), String> {
    let versions: Vec<u64> = history.iter().map(|r| r.version).collect();
    if versions != (1..=intent.version).collect::<Vec<_>>() {
        return Err(format!(
            "history versions {versions:?}, not 1..={}",
            intent.version
        ));
    }
    let first = &history[0];
    let born = match intent.kind {
        IntentKind::Immediate => IntentStatus::Requested,
        IntentKind::Wait => IntentStatus::WaitingForSeat,
    };
    if first.from.is_some() || first.to != born {
        return Err(format!(
            "history begins {:?} -> {:?}, not its creation as {born:?}",
            first.from, first.to
        ));
    }
    for pair in history.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if b.from != Some(a.to) {
            return Err(format!(
                "version {} comes from {:?}, but version {} left it {:?}",
                b.version, b.from, a.version, a.to
            ));
        }
        if a.to.is_terminal() {
            return Err(format!(
                "version {} leaves the terminal {:?}",
                b.version, a.to
            ));
        }
        if b.fencing_token < a.fencing_token {
            return Err(format!(
                "version {}'s fencing token {} is below version {}'s {}",
                b.version, b.fencing_token, a.version, a.fencing_token
            ));
        }
    }
    let last = history.last().expect("versions start at 1");
    let told = (last.to, last.reason, last.at, last.fencing_token);
    let is = (
        intent.status,
        intent.reason,
        intent.updated_at,
        intent.fencing_token,
    );
    if told != is {
        return Err(format!(
            "its last history record says {told:?}, the intent {is:?}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use seatgate::domain::{Millis, SeatId, UserId};

    fn intent() -> Intent {
        Intent::waiting(
            UserId::parse("u-1").unwrap(),
            SeatId::parse("S-1").unwrap(),
            Millis(1_000),
            Millis(10),
        )
    }

    #[test]
    fn a_creation_alone_explains_a_new_intent_and_a_gap_or_mismatch_does_not() {
        let i = intent();
        let created = TransitionRecord::of(None, &i);
        assert_eq!(history_explains(&i, std::slice::from_ref(&created)), Ok(()));
        assert!(history_explains(&i, &[]).is_err(), "missing history");
        let mut later = i.clone();
        later.version = 2;
        later.status = IntentStatus::Cancelled;
        later.updated_at = Millis(20);
        assert!(
            history_explains(&later, std::slice::from_ref(&created)).is_err(),
            "a gap: version 2 unrecorded"
        );
        let cancelled = TransitionRecord::of(Some(&i), &later);
        assert_eq!(
            history_explains(&later, &[created.clone(), cancelled.clone()]),
            Ok(())
        );
        let mut wrong_chain = cancelled.clone();
        wrong_chain.from = Some(IntentStatus::Reserving);
        assert!(history_explains(&later, &[created, wrong_chain]).is_err());
    }
}
