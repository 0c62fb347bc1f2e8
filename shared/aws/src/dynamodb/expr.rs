//! Condition and update expressions: the DynamoDB form of [`Intent::admits`] and
//! [`Intent::apply`].
//!
//! [`transition`] turns a [`TransitionRequest`] into one `UpdateItem`'s condition and update.
//! It must agree with the domain's reference semantics exactly; the contract suite and the
//! differential test in `shared/aws/tests/contract_dynamodb.rs` (every status x every transition x
//! boundary times, against DynamoDB Local) check that it does. Optional fields are absent when
//! `None` (see [`super::item`]), so "is none" is `attribute_not_exists`, and a comparison with a
//! missing attribute is false, which is what `Option::is_some_and` means.
//!
//! Every attribute name goes through a `#placeholder`: `status`, `ttl` and others are DynamoDB
//! reserved words, and uniform placeholders make the expressions easy to read in tests.
//!
//! [`Intent::admits`]: seatgate::domain::Intent::admits
//! [`Intent::apply`]: seatgate::domain::Intent::apply

use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;

use super::item::{attr, due_shard, open_seat};
use seatgate::domain::{
    IntentId, IntentStatus, Reason, SeatClaim, Suppression, Transition, TransitionRequest,
};

/// One write's expressions and their placeholders.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Expr {
    /// Empty for an unconditional update (`suppress`).
    pub condition: String,
    /// Empty for a write that only needs a condition (a put).
    pub update: String,
    pub names: HashMap<String, String>,
    pub values: HashMap<String, AttributeValue>,
}

/// Collects placeholders so each name and value is declared exactly once (DynamoDB refuses
/// unused declarations).
#[derive(Default)]
struct Builder {
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
    set: Vec<String>,
    remove: Vec<String>,
    add: Vec<String>,
}

impl Builder {
    fn name(&mut self, attr: &str) -> String {
        let placeholder = format!("#{attr}");
        self.names.insert(placeholder.clone(), attr.to_owned());
        placeholder
    }

    fn value(&mut self, v: AttributeValue) -> String {
        if let Some((k, _)) = self.values.iter().find(|(_, existing)| **existing == v) {
            return k.clone();
        }
        let placeholder = format!(":v{}", self.values.len());
        self.values.insert(placeholder.clone(), v);
        placeholder
    }

    fn s(&mut self, v: &str) -> String {
        self.value(AttributeValue::S(v.to_owned()))
    }

    fn n(&mut self, v: impl ToString) -> String {
        self.value(AttributeValue::N(v.to_string()))
    }

    fn set(&mut self, attr: &str, placeholder: String) {
        let name = self.name(attr);
        self.set.push(format!("{name} = {placeholder}"));
    }

    /// A whole `SET` clause, for the forms `set` cannot write (`if_not_exists`).
    fn set_raw(&mut self, clause: String) {
        self.set.push(clause);
    }

    fn set_s(&mut self, attr: &str, v: &str) {
        let p = self.s(v);
        self.set(attr, p);
    }

    fn set_n(&mut self, attr: &str, v: impl ToString) {
        let p = self.n(v);
        self.set(attr, p);
    }

    fn remove(&mut self, attr: &str) {
        let name = self.name(attr);
        self.remove.push(name);
    }

    fn add_one(&mut self, attr: &str) {
        let name = self.name(attr);
        let one = self.n(1);
        self.add.push(format!("{name} {one}"));
    }

    fn finish(self, condition: String) -> Expr {
        let mut update = Vec::new();
        if !self.set.is_empty() {
            update.push(format!("SET {}", self.set.join(", ")));
        }
        if !self.remove.is_empty() {
            update.push(format!("REMOVE {}", self.remove.join(", ")));
        }
        if !self.add.is_empty() {
            update.push(format!("ADD {}", self.add.join(", ")));
        }
        Expr {
            condition,
            update: update.join(" "),
            names: self.names,
            values: self.values,
        }
    }
}

/// The condition and update of one intent transition.
pub fn transition(req: &TransitionRequest) -> Expr {
    transition_indexed(req, OpenIndex::Keep)
}

/// What a write does to the intent's entry in the `open_seat` index, which only the intent's
/// state before and after the write decide (not the request alone: a busy upstream's release
/// puts an immediate intent back to REQUESTED and a wait back to waiting).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenIndex {
    Keep,
    /// The intent is REQUESTED after the write: this `open_seat` value.
    Set(String),
    /// It was REQUESTED and is no longer.
    Remove,
}

impl OpenIndex {
    /// From the intent as the write finds it and as it leaves it.
    pub fn between(before: &seatgate::domain::Intent, after: &seatgate::domain::Intent) -> Self {
        if after.status == IntentStatus::Requested {
            OpenIndex::Set(open_seat(after))
        } else if before.status == IntentStatus::Requested {
            OpenIndex::Remove
        } else {
            OpenIndex::Keep
        }
    }
}

/// [`transition`], keeping the `open_seat` index in step as `open` says.
pub fn transition_indexed(req: &TransitionRequest, open: OpenIndex) -> Expr {
    let mut b = Builder::default();
    match open {
        OpenIndex::Keep => {}
        OpenIndex::Set(value) => b.set_s(attr::OPEN_SEAT, &value),
        OpenIndex::Remove => b.remove(attr::OPEN_SEAT),
    }
    let pk = b.name(attr::PK);
    let status = b.name(attr::STATUS);
    let now = b.n(req.now.0);
    let mut condition = vec![format!("attribute_exists({pk})")];
    let shard = due_shard(&req.intent_id);
    if req.touches_seat_claim() {
        // Intent::admits: a claim or settlement must name the intent's own seat.
        match &req.seat_id {
            Some(seat) => {
                let seat_attr = b.name(attr::SEAT_ID);
                let seat = b.s(seat.as_str());
                condition.push(format!("{seat_attr} = {seat}"));
            }
            None => condition.push(format!("attribute_not_exists({pk})")),
        }
    }
    match &req.transition {
        Transition::Claim {
            lease_until,
            due_at,
        } => {
            let requested = b.s(IntentStatus::Requested.as_str());
            let waiting = b.s(IntentStatus::WaitingForSeat.as_str());
            let next = b.name(attr::NEXT_ATTEMPT_AT);
            let deadline = b.name(attr::DEADLINE);
            // Intent::is_due_request or is_due_wait: next_attempt_at none or <= now, and for a
            // wait its deadline none or > now.
            condition.push(format!(
                "(attribute_not_exists({next}) OR {next} <= {now}) AND ({status} = {requested} \
                 OR ({status} = {waiting} \
                 AND (attribute_not_exists({deadline}) OR {deadline} > {now})))"
            ));
            b.set_s(attr::STATUS, IntentStatus::Reserving.as_str());
            b.set_n(attr::LEASE_UNTIL, lease_until.0);
            b.set_n(attr::DUE_AT, due_at.0);
            b.set_s(attr::DUE_SHARD, &shard);
            b.add_one(attr::FENCING_TOKEN);
            b.add_one(attr::ATTEMPTS);
        }
        Transition::Complete {
            token,
            status: to,
            charge_id,
            reason,
            ..
        } => {
            condition.push(fenced(&mut b, &status, *token));
            b.set_s(attr::STATUS, to.status().as_str());
            b.set_s(attr::REASON, &reason.to_string());
            match charge_id {
                Some(c) => b.set_s(attr::CHARGE_ID, c),
                None => b.remove(attr::CHARGE_ID),
            }
            b.remove(attr::LEASE_UNTIL);
            b.remove(attr::DUE_AT);
            b.remove(attr::DUE_SHARD);
        }
        Transition::Release {
            token,
            back_to,
            next_attempt_at,
            due_at,
        } => {
            condition.push(fenced(&mut b, &status, *token));
            b.set_s(attr::STATUS, back_to.status().as_str());
            b.set_n(attr::NEXT_ATTEMPT_AT, next_attempt_at.0);
            b.set_n(attr::DUE_AT, due_at.0);
            b.set_s(attr::DUE_SHARD, &shard);
            b.set_s(attr::REASON, &Reason::UpstreamBusy.to_string());
            b.remove(attr::LEASE_UNTIL);
        }
        Transition::Rewait {
            token,
            next_attempt_at,
            due_at,
            reason,
            ..
        } => {
            condition.push(fenced(&mut b, &status, *token));
            b.set_s(attr::STATUS, IntentStatus::WaitingForSeat.as_str());
            b.set_n(attr::NEXT_ATTEMPT_AT, next_attempt_at.0);
            b.set_n(attr::DUE_AT, due_at.0);
            b.set_s(attr::DUE_SHARD, &shard);
            b.set_s(attr::REASON, &reason.to_string());
            b.remove(attr::LEASE_UNTIL);
        }
        Transition::Close {
            from,
            owner,
            deadline_passed,
            status: to,
            reason,
        } => {
            if from.is_empty() {
                // `from.contains(..)` is false for every state: a condition that never holds
                // (IN () is not valid syntax).
                condition.push(format!("attribute_not_exists({pk})"));
            } else {
                let list: Vec<String> = from.iter().map(|s| b.s(s.as_str())).collect();
                condition.push(format!("{status} IN ({})", list.join(", ")));
            }
            if let Some(owner) = owner {
                let user = b.name(attr::USER_ID);
                let owner = b.s(owner.as_str());
                condition.push(format!("{user} = {owner}"));
            }
            if *deadline_passed {
                // `deadline.is_some_and(|d| d <= now)`: false when the attribute is missing.
                let deadline = b.name(attr::DEADLINE);
                condition.push(format!("{deadline} <= {now}"));
            }
            b.set_s(attr::STATUS, to.status().as_str());
            b.set_s(attr::REASON, &reason.to_string());
            b.remove(attr::LEASE_UNTIL);
            b.remove(attr::DUE_AT);
            b.remove(attr::DUE_SHARD);
        }
        Transition::Bump {
            from,
            version,
            next_attempt_at,
            due_at,
            requeue,
        } => {
            let from = b.s(from.as_str());
            let v = b.name(attr::VERSION);
            let expected = b.n(version);
            condition.push(format!("{status} = {from} AND {v} = {expected}"));
            if let Some(t) = next_attempt_at {
                b.set_n(attr::NEXT_ATTEMPT_AT, t.0);
            }
            b.set_n(attr::DUE_AT, due_at.0);
            b.set_s(attr::DUE_SHARD, &shard);
            if *requeue {
                b.add_one(attr::REQUEUES);
            }
        }
    }
    // Every write: a new version (names the state for outbox dedup) and the time of the change.
    b.set(attr::UPDATED_AT, now);
    b.add_one(attr::VERSION);
    b.finish(condition.join(" AND "))
}

/// `RESERVING` under the given fencing token: only the current claimer (or the reaper acting on
/// the same token) may settle the attempt.
fn fenced(b: &mut Builder, status: &str, token: u64) -> String {
    let reserving = b.s(IntentStatus::Reserving.as_str());
    let fencing = b.name(attr::FENCING_TOKEN);
    let token = b.n(token);
    format!("{status} = {reserving} AND {fencing} = {token}")
}

/// The confirm's condition and update on the action item: `PREPARED`, owned by the caller and
/// unexpired at `now` -> `CONFIRMED` with the intent's id.
pub fn confirm_action(user_id: &str, now: seatgate::domain::Millis, intent_id: &str) -> Expr {
    let mut b = Builder::default();
    let pk = b.name(attr::PK);
    let status = b.name(attr::STATUS);
    let user = b.name(attr::USER_ID);
    let expires = b.name(attr::EXPIRES_AT);
    let prepared = b.s(seatgate::domain::ActionStatus::Prepared.as_str());
    let caller = b.s(user_id);
    let now = b.n(now.0);
    let condition = format!(
        "attribute_exists({pk}) AND {status} = {prepared} AND {user} = {caller} AND {expires} > {now}"
    );
    b.set_s(
        attr::STATUS,
        seatgate::domain::ActionStatus::Confirmed.as_str(),
    );
    b.set_s(attr::INTENT_ID, intent_id);
    b.finish(condition)
}

/// A claim's side of the seat: free, or already claimed by this very intent, and then claimed by it
/// (keeping the first claim's `since`).
pub fn take_seat_claim(claim: &SeatClaim) -> Expr {
    let mut b = Builder::default();
    let pk = b.name(attr::PK);
    let holder = b.name(attr::INTENT_ID);
    let me = b.s(claim.intent_id.as_str());
    let since = b.name(attr::SINCE);
    let now = b.n(claim.since.0);
    b.set_s(attr::SEAT_ID, claim.seat_id.as_str());
    b.set(attr::INTENT_ID, me.clone());
    b.set_raw(format!("{since} = if_not_exists({since}, {now})"));
    b.finish(format!("attribute_not_exists({pk}) OR {holder} = {me}"))
}

/// A settlement's suppression of its seat, unconditional (the latest wins): its seat, intent
/// and window replace the item's, and `winner` is set when this settlement won the seat and
/// otherwise left as it was, so a record that found the seat taken keeps the last winner
/// (`Suppression::over`, whose twin this is). No `ttl`: the item outlives its window.
pub fn suppress(s: &Suppression) -> Expr {
    let mut b = Builder::default();
    b.set_s(attr::SEAT_ID, s.seat_id.as_str());
    b.set_s(attr::INTENT_ID, s.intent_id.as_str());
    b.set_n(attr::UNTIL, s.until.0);
    if let Some(winner) = &s.winner {
        b.set_s(attr::WINNER, winner.as_str());
    }
    b.finish(String::new())
}

/// A settlement's side of the seat: the claim goes if it is this intent's (or there is none).
pub fn release_seat_claim(intent_id: &IntentId) -> Expr {
    let mut b = Builder::default();
    let pk = b.name(attr::PK);
    let holder = b.name(attr::INTENT_ID);
    let me = b.s(intent_id.as_str());
    b.finish(format!("attribute_not_exists({pk}) OR {holder} = {me}"))
}

/// The condition of a put that must not overwrite: ids are generated, a collision is a bug.
pub fn absent() -> Expr {
    let mut b = Builder::default();
    let pk = b.name(attr::PK);
    b.finish(format!("attribute_not_exists({pk})"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use seatgate::domain::{IntentId, Millis, Reason, SeatId, Terminal, UserId};

    fn req(transition: Transition) -> TransitionRequest {
        TransitionRequest {
            seen: None,
            reading: None,
            intent_id: IntentId::generate(),
            seat_id: Some(SeatId::parse("A-1").unwrap()),
            now: Millis(100),
            transition,
        }
    }

    /// Every placeholder the expressions use is declared, and every declared one is used.
    fn assert_consistent(e: &Expr) {
        let text = format!("{} {}", e.condition, e.update);
        for k in e.names.keys().chain(e.values.keys()) {
            assert!(text.contains(k.as_str()), "{k} unused in {text}");
        }
        for token in text.split(|c: char| !(c.is_alphanumeric() || "#:_".contains(c))) {
            if token.starts_with('#') {
                assert!(e.names.contains_key(token), "{token} undeclared");
            }
            if token.starts_with(':') {
                assert!(e.values.contains_key(token), "{token} undeclared");
            }
        }
    }

    #[test]
    fn claim_bumps_token_attempts_and_version_and_keeps_the_index_keys() {
        let e = transition(&req(Transition::Claim {
            lease_until: Millis(500),
            due_at: Millis(600),
        }));
        assert_consistent(&e);
        assert!(e.update.contains("ADD #fencing_token :"));
        assert!(e.update.contains("#attempts"));
        assert!(e.update.contains("#version"));
        assert!(e.update.contains("#due_shard = "));
    }

    #[test]
    fn complete_removes_the_lease_and_the_index_keys() {
        let e = transition(&req(Transition::Complete {
            token: 3,
            status: Terminal::Succeeded,
            charge_id: None,
            reason: Reason::Reserved,
            suppress: None,
        }));
        assert_consistent(&e);
        assert!(
            e.update
                .contains("REMOVE #charge_id, #lease_until, #due_at, #due_shard")
        );
        assert!(e.condition.contains("#fencing_token = "));
    }

    #[test]
    fn close_expresses_owner_deadline_and_an_empty_from() {
        let e = transition(&req(Transition::Close {
            from: vec![IntentStatus::WaitingForSeat, IntentStatus::Requested],
            owner: Some(UserId::parse("u").unwrap()),
            deadline_passed: true,
            status: Terminal::Cancelled,
            reason: Reason::Cancelled,
        }));
        assert_consistent(&e);
        assert!(e.condition.contains("#status IN (:"));
        assert!(e.condition.contains("#deadline <= "));
        let never = transition(&req(Transition::Close {
            from: vec![],
            owner: None,
            deadline_passed: false,
            status: Terminal::Cancelled,
            reason: Reason::Deadline,
        }));
        assert_consistent(&never);
        assert!(never.condition.contains("attribute_not_exists(#pk)"));
    }

    #[test]
    fn bump_and_rewait_and_confirm_are_consistent() {
        for t in [
            Transition::Bump {
                from: IntentStatus::Requested,
                version: 4,
                next_attempt_at: Some(Millis(9)),
                due_at: Millis(9),
                requeue: true,
            },
            Transition::Bump {
                from: IntentStatus::WaitingForSeat,
                version: 1,
                next_attempt_at: None,
                due_at: Millis(1),
                requeue: false,
            },
            Transition::Rewait {
                token: 1,
                next_attempt_at: Millis(5),
                due_at: Millis(5),
                reason: Reason::SeatTaken,
                suppress: None,
            },
        ] {
            assert_consistent(&transition(&req(t)));
        }
        assert_consistent(&confirm_action("u", Millis(1), "i"));
        assert_consistent(&absent());
    }
}
