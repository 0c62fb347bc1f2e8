//! Truth: what seatgate tells a user about an intent is what the upstream did. The upstream
//! model's commits are the truth of charges; the store's final intents are what users are told.
//!
//! Definitions, each judged on the final snapshot's intents against the model's record:
//! 1. succeeded means charged: an intent that ended SUCCEEDED names a charge id, and the upstream
//!    committed exactly that charge for the intent's user on the intent's seat, during the
//!    intent's life (`created_at ..= updated_at`). An intent settled by reading the charge
//!    (`charge_read`) may name an earlier charge that stood during its life (committed by
//!    `updated_at`, not released by `created_at`): a later attempt on a seat this system had
//!    won for the user reads their charge instead of writing again, and what the user is told,
//!    "you hold this seat", is then true;
//! 2. charged means succeeded: every charge the upstream committed (standing at the end, or
//!    released since) is named by a SUCCEEDED intent of its user on its seat. A charge standing
//!    at the end with no such intent is a seat taken from everyone and reported to nobody; a
//!    released one with none was a user charged while told otherwise. (The default workload's
//!    users release only a charge they were told they won, so every release is of a charge an
//!    intent reported.) If an intent of that user on that seat is still not terminal at the end,
//!    the message says so: that is a liveness failure showing up here;
//! 3. the reason tells the truth, for the two reasons that blame someone else:
//!    - FAILED_RACE `seat_taken` only when the upstream said so or this system knew: it holds if
//!      a reserve of this (user, seat) during the intent's life was answered `409 seat_taken`;
//!      or, when no reserve of it in its life got a definite answer (201 or 409: the intent was
//!      closed without one, by the seat's suppression), if the seat was held upstream by
//!      someone at some instant in `created_at - action_ttl ..= updated_at`. Allowance: the
//!      suppression window is one `action_ttl` after the seat was taken or found taken, so a
//!      seat freed inside it may still be reported taken (the design's accepted cost, "a
//!      suppression hiding a freed seat"); an intent whose own reserves were definitely answered,
//!      none `seat_taken`, was told something else by the upstream and reports a lie;
//!    - `already_charged` only when the user held a charge at some instant of the intent's life
//!      (a commit of that user not released before `created_at`, made by `updated_at`).
//!
//! Linking calls to intents: the record keys a reserve by (seat, user), not by intent, so an
//! intent's reserves are those of its (user, seat) arriving while it was RESERVING: from each
//! claim in its history (a record into RESERVING) to the record that ended that attempt, both
//! instants included. A reserve is sent only by a claimed attempt, and the seat's claim keeps
//! two attempts on one seat from being claimed at once, so two intents of one user on one seat
//! alive together (a user who stopped polling one and confirmed the seat again) do not lend
//! each other answers. (Linking by the intent's whole life did: seed 312 of the default
//! workload blamed a lost race for two `already_charged` answers its user's later intents got.)
//! Allowance: a call arriving in the very millisecond one attempt ended and the next was
//! claimed counts for both; and no 201 whose charge another intent reports is this one's.
//! A call inside two such intents' spans once each is widened by the clock skew (below) counts
//! for the one whose unwidened span it lies nearer (both, if equally near): seed 61042 of the
//! default workload with holders and waiters lent a later intent's `already_charged` to an
//! earlier one claimed 71 ms after it, on an instance whose clock ran ahead.
//! Clock steps: an intent's times (its life, its attempts' spans) are its instances' readings,
//! while commits and calls are recorded in true time, so each span is widened by
//! `Record::clock_skew` at both ends.

use super::{Checker, Record, Violation, reserve_key};
use crate::upstream::{Commit, Route};
use seatgate::domain::{Intent, IntentStatus, Millis, Reason, SeatId, UserId};

pub fn check(record: &Record) -> Vec<Violation> {
    let mut out = Vec::new();
    let intents = &record.last.intents;
    for intent in intents {
        if intent.status == IntentStatus::Succeeded {
            succeeded_means_charged(record, intent, &mut out);
        }
        match (&intent.status, intent.reason.as_ref()) {
            (IntentStatus::FailedRace, Some(Reason::SeatTaken)) => {
                seat_taken_is_true(record, intent, &mut out);
            }
            (_, Some(Reason::AlreadyCharged)) => already_charged_is_true(record, intent, &mut out),
            _ => {}
        }
    }
    for commit in &record.commits {
        charged_means_succeeded(record, commit, intents, &mut out);
    }
    out
}

fn describe(record: &Record, intent: &Intent) -> String {
    format!(
        "intent {} ({} {:?}, user {} seat {}, {}..{}, {} attempts)",
        intent.intent_id,
        intent.status.as_str(),
        intent.reason,
        intent.user_id,
        intent.seat_id,
        record.t(intent.created_at),
        record.t(intent.updated_at),
        intent.attempts
    )
}

fn succeeded_means_charged(record: &Record, intent: &Intent, out: &mut Vec<Violation>) {
    let what = describe(record, intent);
    let Some(charge_id) = &intent.charge_id else {
        out.push(Violation::new(
            Checker::Truth,
            format!("{what} ended SUCCEEDED naming no charge"),
        ));
        return;
    };
    let Some(commit) = record.commits.iter().find(|c| &c.charge_id == charge_id) else {
        out.push(Violation::new(
            Checker::Truth,
            format!(
                "{what} ended SUCCEEDED with charge {charge_id}, which the upstream never committed"
            ),
        ));
        return;
    };
    if commit.user_id != intent.user_id || commit.seat_id != intent.seat_id {
        out.push(Violation::new(
            Checker::Truth,
            format!(
                "{what} ended SUCCEEDED with charge {charge_id}, which the upstream committed for user {} on seat {}",
                commit.user_id, commit.seat_id
            ),
        ));
    } else if let (born, ended) = life(record, intent)
        && (commit.at > ended
            || (commit.at < born
                && !(intent.reason == Some(Reason::ChargeRead)
                    && commit.released_at.is_none_or(|r| r > born))))
    {
        out.push(Violation::new(
            Checker::Truth,
            format!(
                "{what} ended SUCCEEDED with charge {charge_id}, committed at {}, outside its life",
                record.t(commit.at)
            ),
        ));
    }
}

fn charged_means_succeeded(
    record: &Record,
    commit: &Commit,
    intents: &[Intent],
    out: &mut Vec<Violation>,
) {
    let named = intents.iter().any(|i| {
        i.status == IntentStatus::Succeeded
            && i.charge_id.as_deref() == Some(commit.charge_id.as_str())
            && i.user_id == commit.user_id
            && i.seat_id == commit.seat_id
    });
    if named {
        return;
    }
    let theirs: Vec<String> = intents
        .iter()
        .filter(|i| i.user_id == commit.user_id && i.seat_id == commit.seat_id)
        .map(|i| {
            format!(
                "{} {} {:?} {}..{}",
                i.intent_id,
                i.status.as_str(),
                i.reason,
                record.t(i.created_at),
                record.t(i.updated_at)
            )
        })
        .collect();
    let unsettled = intents.iter().any(|i| {
        i.user_id == commit.user_id && i.seat_id == commit.seat_id && !i.status.is_terminal()
    });
    let standing = match commit.released_at {
        None => "stands at the end".to_owned(),
        Some(r) => format!("was released at {}", record.t(r)),
    };
    out.push(Violation::new(
        Checker::Truth,
        format!(
            "charge {} of user {} on seat {}, committed at {}{}, {standing} without a SUCCEEDED intent naming it{}; that user's intents on that seat: [{}]",
            commit.charge_id,
            commit.user_id,
            commit.seat_id,
            record.t(commit.at),
            if commit.answer_lost { " (answer lost)" } else { "" },
            if unsettled { " (one is still not terminal: unsettled at the end)" } else { "" },
            theirs.join("; ")
        ),
    ));
}

fn seat_taken_is_true(record: &Record, intent: &Intent, out: &mut Vec<Violation>) {
    let key = reserve_key(&intent.seat_id, &intent.user_id);
    // Charges other intents report: a 201 naming one was that intent's answer, not this one's.
    let others: Vec<&str> = record
        .last
        .intents
        .iter()
        .filter(|i| i.intent_id != intent.intent_id)
        .filter_map(|i| i.charge_id.as_deref())
        .collect();
    // An intent never claimed (no attempt) sent no reserve: whatever its (user, seat) was
    // answered in its life was another intent's.
    let answers: Vec<&str> = if intent.attempts == 0 {
        Vec::new()
    } else {
        let spans = reserving_spans(record, intent);
        // The user's other claimed intents on this seat: a call nearer one of their attempts
        // than to any of this one's was theirs.
        let twins: Vec<Vec<(Millis, Millis)>> = record
            .last
            .intents
            .iter()
            .filter(|i| {
                i.intent_id != intent.intent_id
                    && i.attempts > 0
                    && i.user_id == intent.user_id
                    && i.seat_id == intent.seat_id
            })
            .map(|i| reserving_spans(record, i))
            .collect();
        record
            .calls
            .iter()
            .filter(|c| {
                c.route == Route::Reserve
                    && c.key == key
                    && !c.abandoned
                    && within(record, &spans, c.arrived)
                    && !twins
                        .iter()
                        .any(|t| distance(t, c.arrived) < distance(&spans, c.arrived))
            })
            .filter_map(|c| c.outcome.as_deref())
            // Definite answers the caller heard (a lost 201 was never heard), not another's.
            .filter(|o| {
                (o.starts_with("201")
                    && !o.ends_with("(answer lost)")
                    && !others.iter().any(|c| o.split(' ').nth(1) == Some(*c)))
                    || o.starts_with("409")
            })
            .collect()
    };
    if answers.contains(&"409 seat_taken") {
        return;
    }
    if answers.is_empty() {
        let (born, ended) = life(record, intent);
        let from = born.minus(record.timing.action_ttl);
        if held_between(record, &intent.seat_id, from, ended) {
            return;
        }
        out.push(Violation::new(
            Checker::Truth,
            format!(
                "{} ended FAILED_RACE seat_taken, but nobody held the seat upstream from {} (one action TTL before it) to its end, and no reserve of it was answered",
                describe(record, intent),
                record.t(from)
            ),
        ));
        return;
    }
    out.push(Violation::new(
        Checker::Truth,
        format!(
            "{} ended FAILED_RACE seat_taken, but the upstream answered its reserves {answers:?}",
            describe(record, intent)
        ),
    ));
}

fn already_charged_is_true(record: &Record, intent: &Intent, out: &mut Vec<Violation>) {
    let (born, ended) = life(record, intent);
    if charged_between(record, &intent.user_id, born, ended) {
        return;
    }
    out.push(Violation::new(
        Checker::Truth,
        format!(
            "{} says already_charged, but the user held no charge upstream during its life",
            describe(record, intent)
        ),
    ));
}

/// Whether `at` falls in one of `spans` widened by `Record::clock_skew` at both ends.
fn within(record: &Record, spans: &[(Millis, Millis)], at: Millis) -> bool {
    spans
        .iter()
        .any(|(from, to)| from.minus(record.clock_skew) <= at && at <= to.plus(record.clock_skew))
}

/// How far `at` lies from the nearest of `spans` (zero inside one), as the spans' instances
/// read time: which of two attempts a call in both widened spans most likely belonged to.
fn distance(spans: &[(Millis, Millis)], at: Millis) -> std::time::Duration {
    spans
        .iter()
        .map(|&(from, to)| {
            if at < from {
                from.since(at)
            } else if at > to {
                at.since(to)
            } else {
                std::time::Duration::ZERO
            }
        })
        .min()
        .unwrap_or(std::time::Duration::MAX)
}

/// The spans `intent` was RESERVING, from its history, as its instances read time: each claim
/// (a record into RESERVING) to the next record (or the end of the run, if it is still
/// RESERVING), both instants included.
fn reserving_spans(record: &Record, intent: &Intent) -> Vec<(Millis, Millis)> {
    let history = record
        .audit
        .histories
        .get(&intent.intent_id)
        .map_or(&[][..], Vec::as_slice);
    history
        .iter()
        .enumerate()
        .filter(|(_, r)| r.to == IntentStatus::Reserving)
        .map(|(i, r)| {
            let end = history.get(i + 1).map_or(record.last.at, |next| next.at);
            (r.at, end)
        })
        .collect()
}

/// An intent's life, `created_at ..= updated_at`, widened by `Record::clock_skew` either way:
/// both are its instances' readings of time, which may be stepped, and the commits they are
/// held against are true time.
fn life(record: &Record, intent: &Intent) -> (Millis, Millis) {
    (
        intent.created_at.minus(record.clock_skew),
        intent.updated_at.plus(record.clock_skew),
    )
}

/// Whether `seat` was held upstream (by anyone) at some instant in `from..=until`.
fn held_between(record: &Record, seat: &SeatId, from: Millis, until: Millis) -> bool {
    record
        .commits
        .iter()
        .any(|c| &c.seat_id == seat && c.at <= until && c.released_at.is_none_or(|r| r >= from))
}

/// Whether `user` held a charge (on any seat) at some instant in `from..=until`.
fn charged_between(record: &Record, user: &UserId, from: Millis, until: Millis) -> bool {
    record
        .commits
        .iter()
        .any(|c| &c.user_id == user && c.at <= until && c.released_at.is_none_or(|r| r >= from))
}
