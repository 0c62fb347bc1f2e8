//! Domain values <-> DynamoDB items.
//!
//! One table holds every record, told apart by its key (see `infra/aws/TABLE.md`):
//!
//! | record      | pk               | sk            |
//! |-------------|------------------|---------------|
//! | action      | `ACTION#<id>`    | `ACTION`      |
//! | intent      | `INTENT#<id>`    | `INTENT`      |
//! | consent     | `INTENT#<id>`    | `CONSENT`     |
//! | transition  | `INTENT#<id>`    | `HISTORY#<version, 20 digits>` |
//! | suppression | `SEAT#<seat>`    | `SUPPRESSION` |
//! | seat claim  | `SEAT#<seat>`    | `HOLD` (its first name) |
//! | credential  | `USER#<user>`    | `CREDENTIAL`  |
//! | reading     | `READ#SEAT#<seat>`, `READ#ROOM#<room>` | `READING` |
//! | breaker     | `BREAKER#upstream` | `BREAKER`   |
//!
//! Times are numbers of epoch milliseconds so conditions compare them numerically; `ttl` is epoch
//! seconds because that is what DynamoDB TTL reads. Optional fields are *absent* when `None`,
//! never `NULL`: the condition expressions rely on `attribute_not_exists` meaning "none".
//!
//! Decoding is strict: a missing or ill-typed attribute, an id that does not parse, or an
//! intent whose index keys disagree with its `due_at` is [`StoreError::Corrupt`] naming the
//! attribute (never its value, which could be a credential).

use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;
use std::time::Duration;

use super::schema::TABLE;
use seatgate::domain::{
    Action, ActionId, ActionKind, ActionStatus, BreakerState, CacheEntry, ConsentRecord, Intent,
    IntentId, IntentKind, IntentStatus, Millis, ReadFailure, ReadKey, Reading, Reason,
    RefreshLease, RoutePauses, SeatClaim, SeatId, Suppression, TransitionRecord, UpstreamRoute,
    UserId,
};
use seatgate::ports::StoreError;

/// A DynamoDB item.
pub type Item = HashMap<String, AttributeValue>;

/// Attribute names, shared by the item codecs and the expressions.
pub mod attr {
    pub const PK: &str = "pk";
    pub const SK: &str = "sk";
    pub const TTL: &str = "ttl";
    pub const ACTION_ID: &str = "action_id";
    pub const INTENT_ID: &str = "intent_id";
    pub const USER_ID: &str = "user_id";
    pub const SEAT_ID: &str = "seat_id";
    pub const KIND: &str = "kind";
    pub const STATUS: &str = "status";
    pub const CREATED_AT: &str = "created_at";
    pub const UPDATED_AT: &str = "updated_at";
    pub const EXPIRES_AT: &str = "expires_at";
    pub const VERSION: &str = "version";
    pub const FENCING_TOKEN: &str = "fencing_token";
    pub const LEASE_UNTIL: &str = "lease_until";
    pub const DUE_SHARD: &str = "due_shard";
    pub const OPEN_SEAT: &str = "open_seat";
    pub const DUE_AT: &str = "due_at";
    pub const DEADLINE: &str = "deadline";
    pub const NEXT_ATTEMPT_AT: &str = "next_attempt_at";
    pub const ATTEMPTS: &str = "attempts";
    pub const REQUEUES: &str = "requeues";
    pub const CHARGE_ID: &str = "charge_id";
    pub const REASON: &str = "reason";
    pub const CONSENTED_AT: &str = "consented_at";
    pub const UNTIL: &str = "until";
    /// A suppression's winner: the user its intent won the seat for.
    pub const WINNER: &str = "winner";
    pub const SINCE: &str = "since";
    /// The credential, sealed ([`seatgate::adapters::sealing`]): never the credential itself.
    pub const SEALED_CREDENTIAL: &str = "sealed_credential";
    pub const READING: &str = "reading";
    pub const AS_OF: &str = "as_of";
    pub const LEASE_HOLDER: &str = "lease_holder";
    pub const LEASE_SINCE: &str = "lease_since";
    pub const GENERATION: &str = "generation";
    pub const STATE: &str = "state";
    pub const RECORD: &str = "record";
    /// A reading's failed refresh ([`seatgate::domain::ReadFailure`]).
    pub const FAIL_AT: &str = "fail_at";
    pub const FAIL_UNTIL: &str = "fail_until";
    pub const FAIL_COUNT: &str = "fail_count";
}

/// The attribute of the pauses item that holds `route`'s pause (epoch milliseconds; the stored
/// name keeps its first word, `hold_`).
pub fn pause_attr(route: UpstreamRoute) -> String {
    format!("hold_{}", route.as_str())
}

pub const SK_ACTION: &str = "ACTION";
pub const SK_INTENT: &str = "INTENT";
pub const SK_CONSENT: &str = "CONSENT";
/// The sort key prefix of an intent's transition records.
pub const SK_HISTORY_PREFIX: &str = "HISTORY#";
pub const SK_SUPPRESSION: &str = "SUPPRESSION";
/// The seat claim item's sort key: it keeps its first name, from when the claim was a "hold".
pub const SK_SEAT_CLAIM: &str = "HOLD";
pub const SK_CREDENTIAL: &str = "CREDENTIAL";
pub const SK_READING: &str = "READING";
pub const SK_BREAKER: &str = "BREAKER";
pub const SK_HOLDS: &str = "HOLDS";

/// How long a reading item outlives its last write before TTL may delete it: long past any
/// freshness, so only forgotten keys go.
pub const READING_TTL_SLACK: Duration = Duration::from_secs(24 * 3600);

/// How long an action item outlives its expiry before TTL may delete it: long enough that a late
/// confirm still reads "expired" (410) rather than "not found".
pub const ACTION_TTL_SLACK: Duration = Duration::from_secs(24 * 3600);

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn key(pk: String, sk: &str) -> Item {
    HashMap::from([(attr::PK.into(), s(pk)), (attr::SK.into(), s(sk))])
}

pub fn action_key(id: &ActionId) -> Item {
    key(format!("ACTION#{id}"), SK_ACTION)
}

pub fn intent_key(id: &IntentId) -> Item {
    key(format!("INTENT#{id}"), SK_INTENT)
}

pub fn consent_key(id: &IntentId) -> Item {
    key(format!("INTENT#{id}"), SK_CONSENT)
}

/// A transition record's key: the version zero-padded, so the sort key orders by version.
pub fn transition_key(id: &IntentId, version: u64) -> Item {
    key(format!("INTENT#{id}"), &history_sort_key(version))
}

/// The sort key of the transition record of `version`.
pub fn history_sort_key(version: u64) -> String {
    format!("{SK_HISTORY_PREFIX}{version:020}")
}

/// A transition record: its key and the record as JSON (`record`). No `ttl`: like the intent
/// and its consent, it is the record of what happened.
pub fn transition_to_item(id: &IntentId, record: &TransitionRecord) -> Item {
    let mut item = transition_key(id, record.version);
    item.insert(
        attr::RECORD.into(),
        s(serde_json::to_string(record).expect("a transition record always encodes")),
    );
    item
}

pub fn transition_from_item(item: &Item) -> Result<TransitionRecord, StoreError> {
    let r = Reader::new(item, "transition");
    serde_json::from_str(r.str(attr::RECORD)?).map_err(|_| r.corrupt(attr::RECORD))
}

pub fn suppression_key(seat: &SeatId) -> Item {
    key(format!("SEAT#{seat}"), SK_SUPPRESSION)
}

pub fn seat_claim_key(seat: &SeatId) -> Item {
    key(format!("SEAT#{seat}"), SK_SEAT_CLAIM)
}

/// A seat claim item; it has no `ttl`, because only its attempt's settlement may end it.
pub fn seat_claim_from_item(item: &Item) -> Result<SeatClaim, StoreError> {
    let r = Reader::new(item, "seat claim");
    Ok(SeatClaim {
        seat_id: r.parse(attr::SEAT_ID, SeatId::parse)?,
        intent_id: r.parse(attr::INTENT_ID, IntentId::parse)?,
        since: r.millis(attr::SINCE)?,
    })
}

pub fn credential_key(user: &UserId) -> Item {
    key(format!("USER#{user}"), SK_CREDENTIAL)
}

/// The `due_shard` value of an intent: spreads the reaper's index over [`TABLE`]`.due_shards`
/// partitions.
pub fn due_shard(id: &IntentId) -> String {
    TABLE.due_shard_value(id.shard(TABLE.due_shards))
}

/// The `open_seat` value of a REQUESTED intent: its seat, in one of [`TABLE`]`.open_shards`
/// partitions by intent id.
pub fn open_seat(i: &Intent) -> String {
    TABLE.open_seat_value(i.seat_id.as_str(), i.intent_id.shard(TABLE.open_shards))
}

/// Whether an item (or a key) is an intent record, the only kind the relay acts on.
pub fn is_intent_item(item: &Item) -> bool {
    matches!(item.get(attr::SK), Some(AttributeValue::S(sk)) if sk == SK_INTENT)
}

pub fn action_to_item(a: &Action) -> Item {
    let mut item = action_key(&a.action_id);
    item.insert(attr::ACTION_ID.into(), s(a.action_id.as_str()));
    item.insert(attr::USER_ID.into(), s(a.user_id.as_str()));
    item.insert(attr::SEAT_ID.into(), s(a.seat_id.as_str()));
    item.insert(attr::KIND.into(), s(a.kind.as_str()));
    item.insert(attr::STATUS.into(), s(a.status.as_str()));
    if let Some(id) = &a.intent_id {
        item.insert(attr::INTENT_ID.into(), s(id.as_str()));
    }
    item.insert(attr::CREATED_AT.into(), n(a.created_at.0));
    item.insert(attr::EXPIRES_AT.into(), n(a.expires_at.0));
    item.insert(
        attr::TTL.into(),
        n(a.expires_at.plus(ACTION_TTL_SLACK).as_epoch_seconds_ceil()),
    );
    item
}

pub fn action_from_item(item: &Item) -> Result<Action, StoreError> {
    let r = Reader::new(item, "action");
    Ok(Action {
        action_id: r.parse(attr::ACTION_ID, ActionId::parse)?,
        user_id: r.parse(attr::USER_ID, UserId::parse)?,
        kind: r.parse(attr::KIND, |v| ActionKind::parse(v).ok_or(()))?,
        seat_id: r.parse(attr::SEAT_ID, SeatId::parse)?,
        status: r.parse(attr::STATUS, |v| ActionStatus::parse(v).ok_or(()))?,
        intent_id: r.opt_parse(attr::INTENT_ID, IntentId::parse)?,
        created_at: r.millis(attr::CREATED_AT)?,
        expires_at: r.millis(attr::EXPIRES_AT)?,
    })
}

pub fn intent_to_item(i: &Intent) -> Item {
    let mut item = intent_key(&i.intent_id);
    item.insert(attr::INTENT_ID.into(), s(i.intent_id.as_str()));
    item.insert(attr::USER_ID.into(), s(i.user_id.as_str()));
    item.insert(attr::SEAT_ID.into(), s(i.seat_id.as_str()));
    item.insert(attr::KIND.into(), s(i.kind.as_str()));
    item.insert(attr::STATUS.into(), s(i.status.as_str()));
    item.insert(attr::VERSION.into(), n(i.version));
    item.insert(attr::FENCING_TOKEN.into(), n(i.fencing_token));
    item.insert(attr::ATTEMPTS.into(), n(i.attempts));
    item.insert(attr::REQUEUES.into(), n(i.requeues));
    item.insert(attr::CREATED_AT.into(), n(i.created_at.0));
    item.insert(attr::UPDATED_AT.into(), n(i.updated_at.0));
    let optional = [
        (attr::LEASE_UNTIL, i.lease_until.map(|t| n(t.0))),
        (attr::DUE_AT, i.due_at.map(|t| n(t.0))),
        (
            attr::DUE_SHARD,
            i.due_at.map(|_| s(due_shard(&i.intent_id))),
        ),
        (
            attr::OPEN_SEAT,
            (i.status == IntentStatus::Requested).then(|| s(open_seat(i))),
        ),
        (attr::DEADLINE, i.deadline.map(|t| n(t.0))),
        (attr::NEXT_ATTEMPT_AT, i.next_attempt_at.map(|t| n(t.0))),
        (attr::CHARGE_ID, i.charge_id.as_deref().map(s)),
        (attr::REASON, i.reason.map(|r| s(r.to_string()))),
        (attr::ACTION_ID, i.action_id.as_ref().map(|a| s(a.as_str()))),
    ];
    for (name, value) in optional {
        if let Some(v) = value {
            item.insert(name.into(), v);
        }
    }
    item
}

pub fn intent_from_item(item: &Item) -> Result<Intent, StoreError> {
    let r = Reader::new(item, "intent");
    let intent_id = r.parse(attr::INTENT_ID, IntentId::parse)?;
    let due_at = r.opt_millis(attr::DUE_AT)?;
    // The index keys must travel with due_at, or the reaper would never see this intent.
    let shard = r.opt_str(attr::DUE_SHARD)?;
    if shard != due_at.map(|_| due_shard(&intent_id)).as_deref() {
        return Err(r.corrupt(attr::DUE_SHARD));
    }
    Ok(Intent {
        user_id: r.parse(attr::USER_ID, UserId::parse)?,
        seat_id: r.parse(attr::SEAT_ID, SeatId::parse)?,
        kind: r.parse(attr::KIND, |v| IntentKind::parse(v).ok_or(()))?,
        status: r.parse(attr::STATUS, |v| IntentStatus::parse(v).ok_or(()))?,
        version: r.number(attr::VERSION)?,
        fencing_token: r.number(attr::FENCING_TOKEN)?,
        lease_until: r.opt_millis(attr::LEASE_UNTIL)?,
        due_at,
        deadline: r.opt_millis(attr::DEADLINE)?,
        next_attempt_at: r.opt_millis(attr::NEXT_ATTEMPT_AT)?,
        attempts: r.number(attr::ATTEMPTS)?,
        requeues: r.number(attr::REQUEUES)?,
        charge_id: r.opt_str(attr::CHARGE_ID)?.map(str::to_owned),
        reason: r.opt_parse(attr::REASON, |v| Reason::parse(v).ok_or(()))?,
        action_id: r.opt_parse(attr::ACTION_ID, ActionId::parse)?,
        created_at: r.millis(attr::CREATED_AT)?,
        updated_at: r.millis(attr::UPDATED_AT)?,
        intent_id,
    })
}

/// The consent audit record. No `ttl`: it is kept for good.
pub fn consent_to_item(c: &ConsentRecord) -> Item {
    let mut item = consent_key(&c.intent_id);
    item.insert(attr::INTENT_ID.into(), s(c.intent_id.as_str()));
    item.insert(attr::USER_ID.into(), s(c.user_id.as_str()));
    item.insert(attr::SEAT_ID.into(), s(c.seat_id.as_str()));
    item.insert(attr::KIND.into(), s(c.kind.as_str()));
    if let Some(a) = &c.action_id {
        item.insert(attr::ACTION_ID.into(), s(a.as_str()));
    }
    item.insert(attr::CONSENTED_AT.into(), n(c.consented_at.0));
    item
}

pub fn consent_from_item(item: &Item) -> Result<ConsentRecord, StoreError> {
    let r = Reader::new(item, "consent");
    Ok(ConsentRecord {
        intent_id: r.parse(attr::INTENT_ID, IntentId::parse)?,
        user_id: r.parse(attr::USER_ID, UserId::parse)?,
        seat_id: r.parse(attr::SEAT_ID, SeatId::parse)?,
        kind: r.parse(attr::KIND, |v| IntentKind::parse(v).ok_or(()))?,
        action_id: r.opt_parse(attr::ACTION_ID, ActionId::parse)?,
        consented_at: r.millis(attr::CONSENTED_AT)?,
    })
}

/// The item `expr::suppress` writes, whole (for the codec's round trip).
#[cfg(test)]
pub fn suppression_to_item(x: &Suppression) -> Item {
    let mut item = suppression_key(&x.seat_id);
    item.insert(attr::SEAT_ID.into(), s(x.seat_id.as_str()));
    item.insert(attr::INTENT_ID.into(), s(x.intent_id.as_str()));
    item.insert(attr::UNTIL.into(), n(x.until.0));
    if let Some(winner) = &x.winner {
        item.insert(attr::WINNER.into(), s(winner.as_str()));
    }
    // No `ttl`: the seat's latest record outlives its window, to remember whom this system last
    // won the seat for (`Intents::last_taken`); the next one replaces it (one item per seat).
    item
}

pub fn suppression_from_item(item: &Item) -> Result<Suppression, StoreError> {
    let r = Reader::new(item, "suppression");
    Ok(Suppression {
        seat_id: r.parse(attr::SEAT_ID, SeatId::parse)?,
        intent_id: r.parse(attr::INTENT_ID, IntentId::parse)?,
        until: r.millis(attr::UNTIL)?,
        winner: r.opt_parse(attr::WINNER, UserId::parse)?,
    })
}

/// The credential item, holding the sealed form only.
pub fn credential_to_item(user: &UserId, sealed: &str) -> Item {
    let mut item = credential_key(user);
    item.insert(attr::SEALED_CREDENTIAL.into(), s(sealed));
    item
}

/// The sealed credential the item holds.
pub fn credential_from_item(item: &Item) -> Result<String, StoreError> {
    let r = Reader::new(item, "credential");
    Ok(r.str(attr::SEALED_CREDENTIAL)?.to_owned())
}

pub fn reading_key(key: &ReadKey) -> Item {
    self::key(format!("READ#{}", key.as_key()), SK_READING)
}

/// The `ttl` (epoch seconds) of a reading item written at `at`.
pub fn reading_ttl(at: Millis) -> AttributeValue {
    n(at.plus(READING_TTL_SLACK).as_epoch_seconds_ceil())
}

/// The reading itself is kept as JSON (`reading`), its `as_of` and the lease as attributes the
/// conditions compare.
pub fn entry_from_item(item: &Item) -> Result<CacheEntry, StoreError> {
    let r = Reader::new(item, "reading");
    let reading = r
        .opt_str(attr::READING)?
        .map(|json| serde_json::from_str::<Reading>(json).map_err(|_| r.corrupt(attr::READING)))
        .transpose()?;
    let lease = match r.opt_str(attr::LEASE_HOLDER)? {
        None => None,
        Some(holder) => Some(RefreshLease {
            holder: holder.to_owned(),
            since: r.millis(attr::LEASE_SINCE)?,
            until: r.millis(attr::LEASE_UNTIL)?,
        }),
    };
    let failure = match r.opt_millis(attr::FAIL_UNTIL)? {
        None => None,
        Some(until) => Some(ReadFailure {
            at: r.millis(attr::FAIL_AT)?,
            until,
            count: r.number(attr::FAIL_COUNT)?,
        }),
    };
    Ok(CacheEntry {
        reading,
        lease,
        failure,
    })
}

pub fn reading_attr(reading: &Reading) -> AttributeValue {
    s(serde_json::to_string(reading).expect("a reading always encodes"))
}

pub fn breaker_key() -> Item {
    key("BREAKER#upstream".into(), SK_BREAKER)
}

pub fn breaker_to_item(state: &BreakerState) -> Item {
    let mut item = breaker_key();
    item.insert(attr::GENERATION.into(), n(state.generation));
    item.insert(
        attr::STATE.into(),
        s(serde_json::to_string(state).expect("a breaker state always encodes")),
    );
    item
}

pub fn breaker_from_item(item: &Item) -> Result<BreakerState, StoreError> {
    let r = Reader::new(item, "breaker");
    let state: BreakerState =
        serde_json::from_str(r.str(attr::STATE)?).map_err(|_| r.corrupt(attr::STATE))?;
    if state.generation != r.number::<u64>(attr::GENERATION)? {
        return Err(r.corrupt(attr::GENERATION));
    }
    Ok(state)
}

/// The one item of every route's `Retry-After` pause: an attribute per paused route (stored
/// under its first name, `HOLDS#upstream`).
pub fn pauses_key() -> Item {
    key("HOLDS#upstream".into(), SK_HOLDS)
}

pub fn pauses_from_item(item: &Item) -> Result<RoutePauses, StoreError> {
    let r = Reader::new(item, "holds");
    let mut holds = RoutePauses::default();
    for route in UpstreamRoute::ALL {
        if let Some(until) = r.opt_millis(&pause_attr(route))? {
            holds.0.insert(route, until);
        }
    }
    Ok(holds)
}

/// Typed, strict access to an item's attributes.
struct Reader<'a> {
    item: &'a Item,
    what: &'static str,
}

impl<'a> Reader<'a> {
    fn new(item: &'a Item, what: &'static str) -> Self {
        Reader { item, what }
    }

    fn corrupt(&self, name: &str) -> StoreError {
        StoreError::Corrupt(format!("{}.{}", self.what, name))
    }

    fn opt_str(&self, name: &str) -> Result<Option<&'a str>, StoreError> {
        match self.item.get(name) {
            None => Ok(None),
            Some(AttributeValue::S(v)) => Ok(Some(v.as_str())),
            Some(_) => Err(self.corrupt(name)),
        }
    }

    fn str(&self, name: &str) -> Result<&'a str, StoreError> {
        self.opt_str(name)?.ok_or_else(|| self.corrupt(name))
    }

    fn opt_parse<T, E>(
        &self,
        name: &str,
        parse: impl FnOnce(&str) -> Result<T, E>,
    ) -> Result<Option<T>, StoreError> {
        self.opt_str(name)?
            .map(|v| parse(v).map_err(|_| self.corrupt(name)))
            .transpose()
    }

    fn parse<T, E>(
        &self,
        name: &str,
        parse: impl FnOnce(&str) -> Result<T, E>,
    ) -> Result<T, StoreError> {
        self.opt_parse(name, parse)?
            .ok_or_else(|| self.corrupt(name))
    }

    fn opt_number<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, StoreError> {
        match self.item.get(name) {
            None => Ok(None),
            Some(AttributeValue::N(v)) => v.parse().map(Some).map_err(|_| self.corrupt(name)),
            Some(_) => Err(self.corrupt(name)),
        }
    }

    fn number<T: std::str::FromStr>(&self, name: &str) -> Result<T, StoreError> {
        self.opt_number(name)?.ok_or_else(|| self.corrupt(name))
    }

    fn opt_millis(&self, name: &str) -> Result<Option<Millis>, StoreError> {
        Ok(self.opt_number::<i64>(name)?.map(Millis))
    }

    fn millis(&self, name: &str) -> Result<Millis, StoreError> {
        self.number::<i64>(name).map(Millis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intent() -> Intent {
        let mut i = Intent::requested(
            IntentId::generate(),
            UserId::parse("u1").unwrap(),
            SeatId::parse("A-1").unwrap(),
            ActionId::generate(),
            Millis(1_000),
            Millis(2_000),
        );
        i.charge_id = Some("c-1".into());
        i
    }

    #[test]
    fn intents_round_trip_and_carry_their_index_keys() {
        let i = intent();
        let item = intent_to_item(&i);
        assert_eq!(intent_from_item(&item).unwrap(), i);
        assert_eq!(item[attr::DUE_SHARD], s(due_shard(&i.intent_id)));
        assert!(is_intent_item(&item));
        let mut done = i.clone();
        done.due_at = None;
        let item = intent_to_item(&done);
        assert!(!item.contains_key(attr::DUE_SHARD));
        assert_eq!(intent_from_item(&item).unwrap(), done);
    }

    #[test]
    fn decoding_is_strict_and_names_only_the_attribute() {
        let mut item = intent_to_item(&intent());
        item.insert(attr::VERSION.into(), s("one"));
        assert_eq!(
            intent_from_item(&item),
            Err(StoreError::Corrupt("intent.version".into()))
        );
        let mut item = intent_to_item(&intent());
        item.remove(attr::DUE_SHARD);
        assert_eq!(
            intent_from_item(&item),
            Err(StoreError::Corrupt("intent.due_shard".into()))
        );
        let mut item = intent_to_item(&intent());
        item.insert(attr::CHARGE_ID.into(), AttributeValue::Null(true));
        assert!(intent_from_item(&item).is_err());
        let mut item = credential_to_item(&UserId::parse("u").unwrap(), "sg1.00.00.00");
        item.insert(attr::SEALED_CREDENTIAL.into(), n(5));
        let err = credential_from_item(&item).unwrap_err();
        assert_eq!(
            err,
            StoreError::Corrupt("credential.sealed_credential".into())
        );
    }

    #[test]
    fn actions_consents_and_suppressions_round_trip() {
        let a = Action::prepare(
            UserId::parse("u1").unwrap(),
            ActionKind::ReserveSeat,
            SeatId::parse("B-2").unwrap(),
            Millis(5_000),
            Duration::from_secs(300),
        );
        let item = action_to_item(&a);
        assert_eq!(action_from_item(&item).unwrap(), a);
        assert_eq!(item[attr::TTL], n(305 + 86_400));
        assert!(!is_intent_item(&item));
        let c = ConsentRecord {
            intent_id: IntentId::generate(),
            user_id: UserId::parse("u1").unwrap(),
            seat_id: SeatId::parse("B-2").unwrap(),
            kind: IntentKind::Wait,
            action_id: None,
            consented_at: Millis(7),
        };
        let item = consent_to_item(&c);
        assert!(!item.contains_key(attr::TTL), "consent is kept for good");
        assert_eq!(consent_from_item(&item).unwrap(), c);
        let x = Suppression {
            seat_id: SeatId::parse("B-2").unwrap(),
            intent_id: IntentId::generate(),
            until: Millis(10_001),
            winner: None,
        };
        let item = suppression_to_item(&x);
        assert!(
            !item.contains_key(attr::TTL),
            "the seat's latest one is kept"
        );
        assert!(!item.contains_key(attr::WINNER), "absent, never NULL");
        assert_eq!(suppression_from_item(&item).unwrap(), x);
        let won = Suppression {
            winner: Some(UserId::parse("u1").unwrap()),
            ..x
        };
        let item = suppression_to_item(&won);
        assert_eq!(item[attr::WINNER], s("u1"));
        assert_eq!(suppression_from_item(&item).unwrap(), won);
    }
}
