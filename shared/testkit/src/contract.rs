//! The contract suite: what every implementation of the store and queue ports must do, written
//! once and run against each backend.
//!
//! It lives in the testkit crate (not under one crate's `tests/`) so every adapter's test file can run it with one
//! line: [`store_contract!`](crate::store_contract) and [`queue_contract!`](crate::queue_contract)
//! expand to one `#[tokio::test]` per case, each building a fresh [`Harness`] from the factory
//! expression given. The port docs in [`seatgate::ports`] are the specification; each case checks
//! the values returned and the exact error variants those docs demand, and every transition is
//! compared with [`Intent::apply`], the reference semantics, so two backends cannot drift apart.
//!
//! Cases use fresh random ids for everything, so store cases may share one table (and run in
//! parallel against it). Time is explicit in store operations; the queue's notion of time comes
//! from the harness's [`ManualClock`], which queue cases advance to expire visibility. A backend
//! on real time (an SQS emulator) still passes: positive queue checks poll for up to
//! [`QueueLimits::patience`] of real time.

use crate::ManualClock;
use seatgate::domain::{
    Action, ActionId, ActionKind, ActionStatus, BackTo, CacheEntry, ConsentRecord, Intent,
    IntentId, IntentKind, IntentStatus, Millis, ReadKey, ReadValue, Reading, Reason, RefreshLease,
    RoomId, SeatAvailability, SeatId, SeatMessage, Secret, Suppression, Terminal, Transition,
    TransitionRequest, UserId,
};
use seatgate::domain::{
    Booking, BookingAnswer, BookingId, BookingStatus, Flight, FlightId, IdempotencyKey,
    IdempotencyRecord, Inventory, RequestState,
};
use seatgate::domain::{ReadFailure, UpstreamRoute};
use seatgate::ports::{
    Actions, Begun, BookRefusal, BreakerStates, CancelBookingRefusal, Clock, ConfirmError,
    ConfirmRefusal, Confirmation, Credentials, Delivery, Flights, HandBack, Intents,
    MAX_BATCH_READ, QueueConsumer, Readings, SeatQueue, StoreError, TransitionError,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the queue cases need to know about the queue under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLimits {
    /// The queue's visibility timeout; cases advance the clock past it.
    pub visibility_timeout: Duration,
    /// The redrive policy's max receive count (at least 3 for the redelivery case).
    pub max_receive_count: u32,
    /// Real time a case waits for a message it expects before failing. Only a backend on real
    /// time needs more than a moment.
    pub patience: Duration,
}

/// A queue under test: the three ports one queue implements.
pub struct QueuePorts {
    pub send: Arc<dyn SeatQueue>,
    pub receive: Arc<dyn QueueConsumer>,
    pub hand_back: Arc<dyn HandBack>,
}

/// The ports under test. Build one per case: queue cases assume the queue holds only their own
/// messages, so the factory must hand each call a fresh queue (store tables may be shared).
pub struct Harness {
    pub actions: Arc<dyn Actions>,
    pub intents: Arc<dyn Intents>,
    pub credentials: Arc<dyn Credentials>,
    pub readings: Arc<dyn Readings>,
    pub breaker: Arc<dyn BreakerStates>,
    pub flights: Arc<dyn Flights>,
    pub rate_limits: Arc<dyn seatgate::ports::RateLimits>,
    pub leases: Arc<dyn seatgate::ports::OperatorLeases>,
    /// `None` for a store-only backend; queue cases then fail saying so, never skip.
    pub queue: Option<QueuePorts>,
    /// The clock the backend reads (the queue's visibility, the outbox); cases advance it.
    pub clock: Arc<ManualClock>,
    pub queue_limits: QueueLimits,
}

impl Harness {
    /// A harness over one value that implements every store port, without a queue.
    pub fn from_store<S>(store: S, clock: Arc<ManualClock>) -> Self
    where
        S: seatgate::ports::Store + 'static,
    {
        let store = Arc::new(store);
        Harness {
            actions: store.clone(),
            intents: store.clone(),
            credentials: store.clone(),
            readings: store.clone(),
            breaker: store.clone(),
            flights: store.clone(),
            rate_limits: store.clone(),
            leases: store,
            queue: None,
            clock,
            queue_limits: QueueLimits {
                visibility_timeout: Duration::from_secs(30),
                max_receive_count: 5,
                patience: Duration::from_secs(1),
            },
        }
    }

    /// Adds a queue that both sends and receives.
    pub fn with_queue<Q>(mut self, queue: Q, limits: QueueLimits) -> Self
    where
        Q: SeatQueue + QueueConsumer + HandBack + 'static,
    {
        let queue = Arc::new(queue);
        self.queue = Some(QueuePorts {
            send: queue.clone(),
            receive: queue.clone(),
            hand_back: queue,
        });
        self.queue_limits = limits;
        self
    }

    fn now(&self) -> Millis {
        self.clock.now()
    }
}

/// Expands to one `#[tokio::test]` per store case (actions, intents, credentials). The argument
/// is an expression evaluating to a `Future<Output = Harness>`, evaluated afresh for each test;
/// items of the invoking module are in scope.
#[macro_export]
macro_rules! store_contract {
    ($factory:expr) => {
        $crate::__contract_tests!(store_contract, $factory;
            put_and_get_action,
            put_action_over_existing_id_fails,
            confirm_writes_intent_and_consent,
            confirm_twice_is_already_confirmed,
            confirm_by_another_user_is_not_found,
            confirm_expired_is_expired,
            confirm_unknown_action_is_not_found,
            confirms_answer_as_the_confirm_rule,
            cancels_answer_as_the_cancel_rule,
            bookings_answer_as_the_booking_rule,
            register_wait_then_read_it_back,
            claim_bumps_token_and_version,
            second_claim_is_refused,
            complete_needs_the_current_token,
            complete_with_suppression_suppresses_until_it_ends,
            rewait_backs_off_and_fences_the_old_token,
            close_checks_owner_and_deadline,
            bump_needs_the_exact_version,
            transition_of_unknown_intent_is_not_found,
            due_intents_in_due_order_without_terminal_ones,
            credentials_put_replace_get,
            transitions_match_reference_semantics,
            claim_holds_the_seat_until_a_settlement_releases_it,
            claim_on_a_seat_held_by_another_intent_is_seat_held,
            claims_and_settlements_must_name_the_intents_seat,
            release_puts_an_attempt_back_in_line_and_frees_the_seat,
            a_refresh_lease_goes_to_one_holder_until_a_reading_or_its_end,
            only_a_newer_reading_is_recorded_and_batches_read_what_exists,
            the_breaker_changes_only_over_the_generation_it_was_decided_on,
            a_hold_only_moves_later_and_for_its_route_alone,
            a_failed_refresh_keeps_everyone_off_the_key_until_it_ends_and_a_reading_clears_it,
            a_flight_is_created_once_with_its_capacity_split_over_its_shards,
            a_booking_takes_seats_from_its_shard_only_while_it_has_them_and_a_cancel_returns_them_once,
            the_per_user_limit_is_kept_in_the_booking_transaction,
            an_idempotency_record_is_begun_once_and_keeps_its_answer,
            concurrent_bookings_never_oversell,
            a_rate_window_counts_to_its_limit_and_the_next_window_starts_afresh,
            concurrent_takes_of_one_window_never_pass_the_limit,
            an_operator_lease_has_one_holder_until_it_ends_or_is_released,
        );
    };
}

/// Expands to one `#[tokio::test]` per queue case; the harness must have a queue.
#[macro_export]
macro_rules! queue_contract {
    ($factory:expr) => {
        $crate::__contract_tests!(queue_contract, $factory;
            fifo_order_within_a_group,
            group_is_locked_while_a_message_is_in_flight,
            delete_then_next,
            visibility_expiry_redelivers,
            dedup_id_within_window_is_dropped,
            max_receive_count_dead_letters_and_unblocks_group,
            batch_holds_several_messages_of_a_group_in_order,
            hand_back_returns_a_message_after_the_delay,
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __contract_tests {
    ($module:ident, $factory:expr; $($case:ident),+ $(,)?) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[::tokio::test]
                async fn $case() {
                    let harness: $crate::contract::Harness = $factory.await;
                    $crate::contract::$case(&harness).await;
                }
            )+
        }
    };
}

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

fn new_seat() -> SeatId {
    SeatId::parse(&unique("seat")).expect("a valid seat id")
}

fn new_user() -> UserId {
    UserId::parse(&unique("user")).expect("a valid user id")
}

const ACTION_TTL: Duration = Duration::from_secs(300);

fn prepared(h: &Harness, user: &UserId, seat: &SeatId) -> Action {
    Action::prepare(
        user.clone(),
        ActionKind::ReserveSeat,
        seat.clone(),
        h.now(),
        ACTION_TTL,
    )
}

fn confirmation_of(action: &Action, user: &UserId, now: Millis) -> Confirmation {
    Confirmation::of(
        action,
        IntentId::generate(),
        user,
        now,
        now.plus(Duration::from_secs(60)),
    )
}

fn wait_consent(intent: &Intent) -> ConsentRecord {
    ConsentRecord {
        intent_id: intent.intent_id.clone(),
        user_id: intent.user_id.clone(),
        seat_id: intent.seat_id.clone(),
        kind: IntentKind::Wait,
        action_id: None,
        consented_at: intent.created_at,
    }
}

/// A stored REQUESTED intent, made the way the API makes one.
async fn requested_intent(h: &Harness) -> Intent {
    requested_on(h, &new_seat()).await
}

/// A stored REQUESTED intent for `seat`.
async fn requested_on(h: &Harness, seat: &SeatId) -> Intent {
    let user = new_user();
    let action = prepared(h, &user, seat);
    h.actions.put_action(&action).await.expect("put_action");
    let c = confirmation_of(&action, &user, h.now());
    h.actions.confirm(&c).await.expect("confirm");
    c.intent
}

/// A stored WAITING_FOR_SEAT intent, due at `now`, with the given deadline.
async fn waiting_intent(h: &Harness, deadline: Millis) -> Intent {
    let intent = Intent::waiting(new_user(), new_seat(), deadline, h.now());
    h.intents
        .register_wait(&intent, &wait_consent(&intent))
        .await
        .expect("register_wait");
    intent
}

fn request(intent: &Intent, now: Millis, transition: Transition) -> TransitionRequest {
    TransitionRequest::on(intent, now, transition)
}

fn claim(now: Millis) -> Transition {
    Transition::Claim {
        lease_until: now.plus(Duration::from_secs(10)),
        due_at: now.plus(Duration::from_secs(12)),
    }
}

fn complete(token: u64, suppress: Option<Suppression>) -> Transition {
    Transition::Complete {
        token,
        status: Terminal::Succeeded,
        charge_id: Some("charge-1".into()),
        reason: Reason::Reserved,
        suppress,
    }
}

/// Applies `req` through the port and checks it against the reference semantics on `current`
/// (the state the caller knows is stored). Returns the new state.
async fn applied(h: &Harness, current: &Intent, req: &TransitionRequest) -> Intent {
    let expected = current
        .apply(req)
        .unwrap_or_else(|| panic!("test bug: {:?} does not apply", req.transition));
    let got =
        h.intents.transition(req).await.unwrap_or_else(|e| {
            panic!("{:?} on {:?} failed: {e:?}", req.transition, current.status)
        });
    assert_eq!(
        got, expected,
        "transition result differs from Intent::apply"
    );
    assert_eq!(
        h.intents.get_intent(&current.intent_id).await.unwrap(),
        Some(expected.clone()),
        "stored intent differs from the returned one"
    );
    expected
}

/// Checks `req` is refused with exactly `current` as the state seen, and nothing changed.
async fn refused(h: &Harness, current: &Intent, req: &TransitionRequest) {
    assert!(
        current.apply(req).is_none(),
        "test bug: {:?} would apply",
        req.transition
    );
    match h.intents.transition(req).await {
        Err(TransitionError::Refused(seen)) => assert_eq!(*seen, *current, "refusal's state"),
        other => panic!(
            "{:?} on {:?}: expected Refused(current), got {other:?}",
            req.transition, current.status
        ),
    }
    assert_eq!(
        h.intents.get_intent(&current.intent_id).await.unwrap(),
        Some(current.clone()),
        "a refused transition changed the intent"
    );
}

fn confirm_refusal(result: Result<(), ConfirmError>) -> ConfirmRefusal {
    match result {
        Err(ConfirmError::Refused(r)) => r,
        other => panic!("expected a confirm refusal, got {other:?}"),
    }
}

/// Nothing of a refused confirmation was written.
async fn nothing_confirmed(h: &Harness, c: &Confirmation, action_before: &Action) {
    assert_eq!(
        h.actions.get_action(&c.action_id).await.unwrap().as_ref(),
        Some(action_before),
        "a refused confirm changed the action"
    );
    assert_eq!(
        h.intents.get_intent(&c.intent.intent_id).await.unwrap(),
        None,
        "a refused confirm wrote the intent"
    );
    assert_eq!(
        h.intents.get_consent(&c.intent.intent_id).await.unwrap(),
        None,
        "a refused confirm wrote the consent"
    );
}

// ---------------------------------------------------------------------------------------------
// Seat holds
// ---------------------------------------------------------------------------------------------

pub async fn claim_holds_the_seat_until_a_settlement_releases_it(h: &Harness) {
    let now = h.now();
    let seat = new_seat();
    let intent = requested_on(h, &seat).await;
    assert_eq!(h.intents.hold(&seat).await.unwrap(), None);
    let claimed = applied(h, &intent, &request(&intent, now, claim(now))).await;
    let hold = h
        .intents
        .hold(&seat)
        .await
        .unwrap()
        .expect("a claim holds its seat");
    assert_eq!(
        (hold.seat_id.clone(), hold.intent_id.clone(), hold.since),
        (seat.clone(), intent.intent_id.clone(), now)
    );
    // A lease running out does not release it: only a settlement does.
    let later = now.plus(Duration::from_secs(3600));
    assert_eq!(h.intents.hold(&seat).await.unwrap(), Some(hold));
    applied(
        h,
        &claimed,
        &request(&claimed, later, complete(claimed.fencing_token, None)),
    )
    .await;
    assert_eq!(
        h.intents.hold(&seat).await.unwrap(),
        None,
        "settled: released"
    );
}

pub async fn claim_on_a_seat_held_by_another_intent_is_seat_held(h: &Harness) {
    let now = h.now();
    let seat = new_seat();
    let first = requested_on(h, &seat).await;
    let second = requested_on(h, &seat).await;
    let claimed = applied(h, &first, &request(&first, now, claim(now))).await;
    match h
        .intents
        .transition(&request(&second, now, claim(now)))
        .await
    {
        Err(TransitionError::SeatHeld(hold)) => {
            assert_eq!(
                (hold.seat_id, hold.intent_id),
                (seat.clone(), first.intent_id.clone())
            )
        }
        other => panic!("expected SeatHeld, got {other:?}"),
    }
    assert_eq!(
        h.intents.get_intent(&second.intent_id).await.unwrap(),
        Some(second.clone()),
        "a claim refused for the hold wrote nothing"
    );
    // An intent that is not claimable anyway hears about itself first, not about the seat.
    let settled = applied(
        h,
        &claimed,
        &request(&claimed, now, complete(claimed.fencing_token, None)),
    )
    .await;
    refused(h, &settled, &request(&first, now, claim(now))).await;
    // Released: the next in line gets it.
    applied(h, &second, &request(&second, now, claim(now))).await;
    let hold = h
        .intents
        .hold(&seat)
        .await
        .unwrap()
        .expect("held by the second");
    assert_eq!(hold.intent_id, second.intent_id);
}

pub async fn claims_and_settlements_must_name_the_intents_seat(h: &Harness) {
    let now = h.now();
    let intent = requested_intent(h).await;
    let unnamed = TransitionRequest::new(intent.intent_id.clone(), now, claim(now));
    refused(h, &intent, &unnamed).await;
    let elsewhere =
        TransitionRequest::on_seat(intent.intent_id.clone(), new_seat(), now, claim(now));
    refused(h, &intent, &elsewhere).await;
    assert_eq!(h.intents.hold(&intent.seat_id).await.unwrap(), None);
    let claimed = applied(h, &intent, &request(&intent, now, claim(now))).await;
    let settle = TransitionRequest::new(
        intent.intent_id.clone(),
        now,
        complete(claimed.fencing_token, None),
    );
    refused(h, &claimed, &settle).await;
    assert!(
        h.intents.hold(&intent.seat_id).await.unwrap().is_some(),
        "still held"
    );
}

pub async fn release_puts_an_attempt_back_in_line_and_frees_the_seat(h: &Harness) {
    let now = h.now();
    let seat = new_seat();
    let intent = requested_on(h, &seat).await;
    let claimed = applied(h, &intent, &request(&intent, now, claim(now))).await;
    let retry_at = now.plus(Duration::from_secs(5));
    let release = Transition::Release {
        token: claimed.fencing_token,
        back_to: BackTo::Requested,
        next_attempt_at: retry_at,
        due_at: retry_at,
    };
    let back = applied(h, &claimed, &request(&claimed, now, release)).await;
    assert_eq!(back.status, IntentStatus::Requested);
    assert_eq!(
        (back.next_attempt_at, back.due_at),
        (Some(retry_at), Some(retry_at))
    );
    assert_eq!(back.reason, Some(Reason::UpstreamBusy));
    assert_eq!(h.intents.hold(&seat).await.unwrap(), None, "released");
    // Not claimable before its retry time; claimable from then on, by its new token.
    let early = retry_at.minus(Duration::from_millis(1));
    refused(h, &back, &request(&back, early, claim(early))).await;
    let again = applied(h, &back, &request(&back, retry_at, claim(retry_at))).await;
    assert_eq!(again.fencing_token, claimed.fencing_token + 1);
}

// ---------------------------------------------------------------------------------------------
// Actions
// ---------------------------------------------------------------------------------------------

pub async fn put_and_get_action(h: &Harness) {
    let action = prepared(h, &new_user(), &new_seat());
    assert_eq!(h.actions.get_action(&action.action_id).await.unwrap(), None);
    h.actions.put_action(&action).await.unwrap();
    assert_eq!(
        h.actions.get_action(&action.action_id).await.unwrap(),
        Some(action.clone())
    );
    assert_eq!(
        h.actions.get_action(&ActionId::generate()).await.unwrap(),
        None
    );
}

pub async fn put_action_over_existing_id_fails(h: &Harness) {
    let first = prepared(h, &new_user(), &new_seat());
    h.actions.put_action(&first).await.unwrap();
    let mut second = prepared(h, &new_user(), &new_seat());
    second.action_id = first.action_id.clone();
    let result = h.actions.put_action(&second).await;
    assert!(
        matches!(result, Err(StoreError::Unavailable(_))),
        "put over an existing action id: expected Unavailable, got {result:?}"
    );
    assert_eq!(
        h.actions.get_action(&first.action_id).await.unwrap(),
        Some(first),
        "the first action was overwritten"
    );
}

pub async fn confirm_writes_intent_and_consent(h: &Harness) {
    let user = new_user();
    let action = prepared(h, &user, &new_seat());
    h.actions.put_action(&action).await.unwrap();
    let c = confirmation_of(&action, &user, h.now().plus(Duration::from_secs(1)));
    h.actions.confirm(&c).await.unwrap();

    let intent = h
        .intents
        .get_intent(&c.intent.intent_id)
        .await
        .unwrap()
        .expect("the confirmed intent");
    assert_eq!(intent, c.intent);
    assert_eq!(intent.status, IntentStatus::Requested);
    assert_eq!(intent.version, 1);
    assert_eq!(intent.fencing_token, 0);
    assert_eq!(
        h.intents.get_consent(&c.intent.intent_id).await.unwrap(),
        Some(c.consent.clone())
    );
    let mut expected = action.clone();
    expected.status = ActionStatus::Confirmed;
    expected.intent_id = Some(c.intent.intent_id.clone());
    assert_eq!(
        h.actions.get_action(&action.action_id).await.unwrap(),
        Some(expected)
    );
}

pub async fn confirm_twice_is_already_confirmed(h: &Harness) {
    let user = new_user();
    let action = prepared(h, &user, &new_seat());
    h.actions.put_action(&action).await.unwrap();
    let first = confirmation_of(&action, &user, h.now());
    h.actions.confirm(&first).await.unwrap();
    let after_first = h.actions.get_action(&action.action_id).await.unwrap();

    let again = confirmation_of(&action, &user, h.now().plus(Duration::from_secs(1)));
    assert_eq!(
        confirm_refusal(h.actions.confirm(&again).await),
        ConfirmRefusal::AlreadyConfirmed(first.intent.intent_id.clone())
    );
    assert_eq!(
        h.intents.get_intent(&again.intent.intent_id).await.unwrap(),
        None
    );
    assert_eq!(
        h.intents
            .get_consent(&again.intent.intent_id)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        h.actions.get_action(&action.action_id).await.unwrap(),
        after_first
    );

    // Still "already confirmed" once the action has expired: the caller learns its intent.
    let late = confirmation_of(
        &action,
        &user,
        action.expires_at.plus(Duration::from_secs(1)),
    );
    assert_eq!(
        confirm_refusal(h.actions.confirm(&late).await),
        ConfirmRefusal::AlreadyConfirmed(first.intent.intent_id.clone())
    );
}

pub async fn confirm_by_another_user_is_not_found(h: &Harness) {
    let owner = new_user();
    let action = prepared(h, &owner, &new_seat());
    h.actions.put_action(&action).await.unwrap();

    let intruder = new_user();
    let c = confirmation_of(&action, &intruder, h.now());
    assert_eq!(
        confirm_refusal(h.actions.confirm(&c).await),
        ConfirmRefusal::NotFound
    );
    nothing_confirmed(h, &c, &action).await;

    // Once the owner confirmed, another user still sees nothing, not "already confirmed".
    h.actions
        .confirm(&confirmation_of(&action, &owner, h.now()))
        .await
        .unwrap();
    let c = confirmation_of(&action, &intruder, h.now());
    assert_eq!(
        confirm_refusal(h.actions.confirm(&c).await),
        ConfirmRefusal::NotFound
    );
}

pub async fn confirm_expired_is_expired(h: &Harness) {
    let user = new_user();
    let action = prepared(h, &user, &new_seat());
    h.actions.put_action(&action).await.unwrap();

    // Expired at exactly `expires_at` (`Action::is_expired`).
    let c = confirmation_of(&action, &user, action.expires_at);
    assert_eq!(
        confirm_refusal(h.actions.confirm(&c).await),
        ConfirmRefusal::Expired
    );
    nothing_confirmed(h, &c, &action).await;

    // The owner check comes first.
    let c = confirmation_of(&action, &new_user(), action.expires_at);
    assert_eq!(
        confirm_refusal(h.actions.confirm(&c).await),
        ConfirmRefusal::NotFound
    );

    // A millisecond earlier it was still confirmable.
    let c = confirmation_of(
        &action,
        &user,
        action.expires_at.minus(Duration::from_millis(1)),
    );
    h.actions.confirm(&c).await.unwrap();
}

pub async fn confirm_unknown_action_is_not_found(h: &Harness) {
    let user = new_user();
    let never_stored = prepared(h, &user, &new_seat());
    let c = confirmation_of(&never_stored, &user, h.now());
    assert_eq!(
        confirm_refusal(h.actions.confirm(&c).await),
        ConfirmRefusal::NotFound
    );
    assert_eq!(
        h.intents.get_intent(&c.intent.intent_id).await.unwrap(),
        None
    );
    assert_eq!(
        h.intents.get_consent(&c.intent.intent_id).await.unwrap(),
        None
    );
    assert_eq!(h.actions.get_action(&c.action_id).await.unwrap(), None);
}

// ---------------------------------------------------------------------------------------------
// Intents
// ---------------------------------------------------------------------------------------------

pub async fn register_wait_then_read_it_back(h: &Harness) {
    let deadline = h.now().plus(Duration::from_secs(3600));
    let intent = Intent::waiting(new_user(), new_seat(), deadline, h.now());
    let consent = wait_consent(&intent);
    h.intents.register_wait(&intent, &consent).await.unwrap();

    let stored = h.intents.get_intent(&intent.intent_id).await.unwrap();
    assert_eq!(stored, Some(intent.clone()));
    assert_eq!(intent.status, IntentStatus::WaitingForSeat);
    assert_eq!(
        h.intents.get_consent(&intent.intent_id).await.unwrap(),
        Some(consent.clone())
    );
    let unknown = IntentId::generate();
    assert_eq!(h.intents.get_intent(&unknown).await.unwrap(), None);
    assert_eq!(h.intents.get_consent(&unknown).await.unwrap(), None);

    // Ids are generated: registering over an existing intent is a bug, never an overwrite.
    let mut clash = Intent::waiting(new_user(), new_seat(), deadline, h.now());
    clash.intent_id = intent.intent_id.clone();
    assert!(
        h.intents
            .register_wait(&clash, &wait_consent(&clash))
            .await
            .is_err(),
        "register_wait over an existing intent id succeeded"
    );
    assert_eq!(
        h.intents.get_intent(&intent.intent_id).await.unwrap(),
        Some(intent.clone())
    );
    assert_eq!(
        h.intents.get_consent(&intent.intent_id).await.unwrap(),
        Some(consent)
    );
}

pub async fn claim_bumps_token_and_version(h: &Harness) {
    let intent = requested_intent(h).await;
    let now = h.now().plus(Duration::from_secs(1));
    let claimed = applied(h, &intent, &request(&intent, now, claim(now))).await;
    assert_eq!(claimed.status, IntentStatus::Reserving);
    assert_eq!(claimed.fencing_token, intent.fencing_token + 1);
    assert_eq!(claimed.version, intent.version + 1);
    assert_eq!(claimed.attempts, 1);
    assert_eq!(claimed.lease_until, Some(now.plus(Duration::from_secs(10))));
    assert_eq!(claimed.due_at, Some(now.plus(Duration::from_secs(12))));
    assert_eq!(claimed.updated_at, now);

    // A due wait is claimable too.
    let wait = waiting_intent(h, h.now().plus(Duration::from_secs(60))).await;
    let claimed = applied(h, &wait, &request(&wait, now, claim(now))).await;
    assert_eq!(
        (claimed.status, claimed.fencing_token, claimed.version),
        (IntentStatus::Reserving, 1, 2)
    );
}

pub async fn second_claim_is_refused(h: &Harness) {
    let intent = requested_intent(h).await;
    let now = h.now();
    let claimed = applied(h, &intent, &request(&intent, now, claim(now))).await;
    let later = now.plus(Duration::from_secs(1));
    refused(h, &claimed, &request(&intent, later, claim(later))).await;
}

pub async fn complete_needs_the_current_token(h: &Harness) {
    let intent = requested_intent(h).await;
    let now = h.now();
    let claimed = applied(h, &intent, &request(&intent, now, claim(now))).await;
    let token = claimed.fencing_token;

    refused(
        h,
        &claimed,
        &request(&intent, now, complete(token - 1, None)),
    )
    .await;
    refused(
        h,
        &claimed,
        &request(&intent, now, complete(token + 1, None)),
    )
    .await;
    let done = applied(h, &claimed, &request(&intent, now, complete(token, None))).await;
    assert_eq!(done.status, IntentStatus::Succeeded);
    assert_eq!(done.charge_id.as_deref(), Some("charge-1"));
    assert_eq!(done.due_at, None);
    assert_eq!(done.lease_until, None);
    // Terminal: even the right token settles it only once.
    refused(h, &done, &request(&intent, now, complete(token, None))).await;
}

pub async fn complete_with_suppression_suppresses_until_it_ends(h: &Harness) {
    let intent = requested_intent(h).await;
    let seat = intent.seat_id.clone();
    let now = h.now();
    let claimed = applied(h, &intent, &request(&intent, now, claim(now))).await;
    let suppression = Suppression {
        seat_id: seat.clone(),
        intent_id: intent.intent_id.clone(),
        until: now.plus(Duration::from_secs(60)),
    };

    // A refused write writes no suppression either.
    let stale = complete(claimed.fencing_token + 1, Some(suppression.clone()));
    refused(h, &claimed, &request(&intent, now, stale)).await;
    assert_eq!(h.intents.suppression(&seat, now).await.unwrap(), None);

    let with = complete(claimed.fencing_token, Some(suppression.clone()));
    applied(h, &claimed, &request(&intent, now, with)).await;
    assert_eq!(
        h.intents.suppression(&seat, now).await.unwrap(),
        Some(suppression.clone())
    );
    let last_ms = suppression.until.minus(Duration::from_millis(1));
    assert_eq!(
        h.intents.suppression(&seat, last_ms).await.unwrap(),
        Some(suppression.clone())
    );
    assert_eq!(
        h.intents
            .suppression(&seat, suppression.until)
            .await
            .unwrap(),
        None,
        "a suppression is in force only while until > now"
    );
    assert_eq!(h.intents.suppression(&new_seat(), now).await.unwrap(), None);
}

pub async fn rewait_backs_off_and_fences_the_old_token(h: &Harness) {
    let t0 = h.now();
    let wait = waiting_intent(h, t0.plus(Duration::from_secs(600))).await;
    let first = applied(h, &wait, &request(&wait, t0, claim(t0))).await;

    let retry_at = t0.plus(Duration::from_secs(5));
    let suppression = Suppression {
        seat_id: wait.seat_id.clone(),
        intent_id: wait.intent_id.clone(),
        until: t0.plus(Duration::from_secs(30)),
    };
    let rewait = Transition::Rewait {
        token: first.fencing_token,
        next_attempt_at: retry_at,
        due_at: retry_at,
        reason: Reason::SeatTaken,
        suppress: Some(suppression.clone()),
    };
    let waiting = applied(h, &first, &request(&wait, t0, rewait.clone())).await;
    assert_eq!(waiting.status, IntentStatus::WaitingForSeat);
    assert_eq!(waiting.next_attempt_at, Some(retry_at));
    assert_eq!(waiting.due_at, Some(retry_at));
    assert_eq!(waiting.lease_until, None);
    assert_eq!(waiting.reason, Some(Reason::SeatTaken));
    assert_eq!(
        h.intents.suppression(&wait.seat_id, t0).await.unwrap(),
        Some(suppression)
    );
    // The same rewait again is refused: the intent is no longer RESERVING.
    refused(h, &waiting, &request(&wait, t0, rewait)).await;

    // Not claimable before its next attempt, claimable at it.
    let early = t0.plus(Duration::from_secs(1));
    refused(h, &waiting, &request(&wait, early, claim(early))).await;
    let second = applied(h, &waiting, &request(&wait, retry_at, claim(retry_at))).await;
    assert_eq!(second.fencing_token, first.fencing_token + 1);
    assert_eq!(second.attempts, 2);

    // The first attempt's worker is fenced off.
    refused(
        h,
        &second,
        &request(&wait, retry_at, complete(first.fencing_token, None)),
    )
    .await;
    applied(
        h,
        &second,
        &request(&wait, retry_at, complete(second.fencing_token, None)),
    )
    .await;
}

pub async fn close_checks_owner_and_deadline(h: &Harness) {
    let t0 = h.now();
    let deadline = t0.plus(Duration::from_secs(60));
    let close =
        |owner: Option<UserId>, deadline_passed: bool, status: Terminal| Transition::Close {
            from: vec![IntentStatus::WaitingForSeat],
            owner,
            deadline_passed,
            status,
            reason: Reason::Cancelled,
        };

    // Expiry: only once the deadline has passed, whoever asks.
    let wait = waiting_intent(h, deadline).await;
    let owner = wait.user_id.clone();
    let cancel_by = |who: &UserId| close(Some(who.clone()), false, Terminal::Cancelled);
    refused(h, &wait, &request(&wait, t0, cancel_by(&new_user()))).await;
    let expire = close(None, true, Terminal::WaitExpired);
    let before = deadline.minus(Duration::from_millis(1));
    refused(h, &wait, &request(&wait, before, expire.clone())).await;
    let expired = applied(h, &wait, &request(&wait, deadline, expire.clone())).await;
    assert_eq!(expired.status, IntentStatus::WaitExpired);
    assert_eq!(expired.due_at, None);
    refused(h, &expired, &request(&wait, deadline, cancel_by(&owner))).await;

    // Cancel: only by its owner, only from the listed states.
    let wait = waiting_intent(h, deadline).await;
    let owner = wait.user_id.clone();
    let cancelled = applied(h, &wait, &request(&wait, t0, cancel_by(&owner))).await;
    assert_eq!(cancelled.status, IntentStatus::Cancelled);
    assert_eq!(cancelled.reason, Some(Reason::Cancelled));
    refused(h, &cancelled, &request(&wait, t0, cancel_by(&owner))).await;

    // A local FAILED_RACE of a REQUESTED intent, with no owner condition; a RESERVING one is not
    // in `from`.
    let intent = requested_intent(h).await;
    let race = Transition::Close {
        from: vec![IntentStatus::Requested],
        owner: None,
        deadline_passed: false,
        status: Terminal::FailedRace,
        reason: Reason::SeatTaken,
    };
    let other = requested_intent(h).await;
    let claimed = applied(h, &other, &request(&other, t0, claim(t0))).await;
    refused(h, &claimed, &request(&other, t0, race.clone())).await;
    let raced = applied(h, &intent, &request(&intent, t0, race)).await;
    assert_eq!(raced.status, IntentStatus::FailedRace);
    assert_eq!(raced.due_at, None);
}

pub async fn bump_needs_the_exact_version(h: &Harness) {
    let intent = requested_intent(h).await;
    let now = h.now().plus(Duration::from_secs(5));
    let due = now.plus(Duration::from_secs(60));
    let bump = |from, version| Transition::Bump {
        from,
        version,
        next_attempt_at: None,
        due_at: due,
        requeue: true,
    };
    refused(
        h,
        &intent,
        &request(&intent, now, bump(IntentStatus::Requested, 2)),
    )
    .await;
    refused(
        h,
        &intent,
        &request(&intent, now, bump(IntentStatus::Requested, 0)),
    )
    .await;
    refused(
        h,
        &intent,
        &request(&intent, now, bump(IntentStatus::WaitingForSeat, 1)),
    )
    .await;
    let bumped = applied(
        h,
        &intent,
        &request(&intent, now, bump(IntentStatus::Requested, 1)),
    )
    .await;
    assert_eq!(bumped.status, IntentStatus::Requested);
    assert_eq!(bumped.version, 2);
    assert_eq!(bumped.requeues, 1);
    assert_eq!(bumped.due_at, Some(due));
    // The same bump again is stale.
    refused(
        h,
        &bumped,
        &request(&intent, now, bump(IntentStatus::Requested, 1)),
    )
    .await;

    // A due wait moved forward: next attempt set, requeue count untouched.
    let wait = waiting_intent(h, h.now().plus(Duration::from_secs(600))).await;
    let next = now.plus(Duration::from_secs(7));
    let moved = applied(
        h,
        &wait,
        &request(
            &wait,
            now,
            Transition::Bump {
                from: IntentStatus::WaitingForSeat,
                version: wait.version,
                next_attempt_at: Some(next),
                due_at: next,
                requeue: false,
            },
        ),
    )
    .await;
    assert_eq!(
        (moved.version, moved.next_attempt_at, moved.requeues),
        (2, Some(next), 0)
    );
}

pub async fn transition_of_unknown_intent_is_not_found(h: &Harness) {
    let now = h.now();
    let ghost = TransitionRequest::on_seat(IntentId::generate(), new_seat(), now, claim(now));
    for transition in [
        claim(now),
        complete(1, None),
        Transition::Close {
            from: vec![IntentStatus::WaitingForSeat],
            owner: None,
            deadline_passed: false,
            status: Terminal::Cancelled,
            reason: Reason::Cancelled,
        },
        Transition::Bump {
            from: IntentStatus::Requested,
            version: 1,
            next_attempt_at: None,
            due_at: now,
            requeue: false,
        },
    ] {
        let req = TransitionRequest {
            transition,
            ..ghost.clone()
        };
        let result = h.intents.transition(&req).await;
        assert!(
            matches!(result, Err(TransitionError::NotFound)),
            "{:?} on an unknown intent: expected NotFound, got {result:?}",
            req.transition
        );
        assert_eq!(h.intents.get_intent(&req.intent_id).await.unwrap(), None);
    }
}

pub async fn due_intents_in_due_order_without_terminal_ones(h: &Harness) {
    // A time range of this case's own, long before any other case's "now", so intents other
    // cases leave in a shared table cannot interleave with these.
    let base = Millis(315_532_800_000 + (rand::random_range(0..100_000i64) * 100_000));
    let at = |ms: i64| Millis(base.0 + ms);
    let store = |due: i64| {
        let mut intent = Intent::waiting(new_user(), new_seat(), at(1_000_000), base);
        intent.due_at = Some(at(due));
        async move {
            h.intents
                .register_wait(&intent, &wait_consent(&intent))
                .await
                .unwrap();
            intent
        }
    };
    let w300 = store(300).await;
    let w100 = store(100).await;
    let w200 = store(200).await;
    let future = store(900).await;
    let closed = store(150).await;
    let close = Transition::Close {
        from: vec![IntentStatus::WaitingForSeat],
        owner: None,
        deadline_passed: false,
        status: Terminal::Cancelled,
        reason: Reason::Cancelled,
    };
    applied(h, &closed, &request(&closed, at(1), close)).await;
    // Non-terminal RESERVING intents are due too (at their lease's end).
    let reserving = store(0).await;
    let claim = Transition::Claim {
        lease_until: at(240),
        due_at: at(250),
    };
    applied(h, &reserving, &request(&reserving, at(1), claim)).await;

    let now = at(500);
    let all = h.intents.due_intents(now, 1_000).await.unwrap();
    for pair in all.windows(2) {
        assert!(pair[0].due_at <= pair[1].due_at, "due_intents out of order");
    }
    for intent in &all {
        assert!(
            !intent.status.is_terminal(),
            "due_intents returned a terminal intent"
        );
        assert!(
            intent.due_at.is_some_and(|d| d <= now),
            "not due yet: {intent:?}"
        );
    }
    let mine: Vec<&IntentId> = [&w100, &w200, &reserving, &w300, &future, &closed]
        .iter()
        .map(|i| &i.intent_id)
        .collect();
    let seen: Vec<&IntentId> = all
        .iter()
        .map(|i| &i.intent_id)
        .filter(|id| mine.contains(id))
        .collect();
    assert_eq!(
        seen,
        vec![
            &w100.intent_id,
            &w200.intent_id,
            &reserving.intent_id,
            &w300.intent_id
        ],
        "due intents of this case, in due order, without the future and the terminal one"
    );

    let two = h.intents.due_intents(now, 2).await.unwrap();
    assert_eq!(two.as_slice(), &all[..2.min(all.len())], "limit 2");
    assert_eq!(h.intents.due_intents(now, 0).await.unwrap(), vec![]);
    let early = h.intents.due_intents(at(150), 1_000).await.unwrap();
    assert!(early.iter().any(|i| i.intent_id == w100.intent_id));
    assert!(!early.iter().any(|i| i.intent_id == w200.intent_id));
}

// ---------------------------------------------------------------------------------------------
// Credentials
// ---------------------------------------------------------------------------------------------

pub async fn credentials_put_replace_get(h: &Harness) {
    let user = new_user();
    let other = new_user();
    assert_eq!(h.credentials.credential(&user).await.unwrap(), None);
    h.credentials
        .put_credential(&user, &Secret::new("first-token"))
        .await
        .unwrap();
    assert_eq!(
        h.credentials.credential(&user).await.unwrap(),
        Some(Secret::new("first-token"))
    );
    h.credentials
        .put_credential(&user, &Secret::new("second-token"))
        .await
        .unwrap();
    assert_eq!(
        h.credentials.credential(&user).await.unwrap(),
        Some(Secret::new("second-token"))
    );
    assert_eq!(h.credentials.credential(&other).await.unwrap(), None);
}

// ---------------------------------------------------------------------------------------------
// Seat readings and the breaker
// ---------------------------------------------------------------------------------------------

fn lease(holder: &str, since: Millis, for_ms: i64) -> RefreshLease {
    RefreshLease {
        holder: holder.into(),
        since,
        until: Millis(since.0 + for_ms),
    }
}

pub async fn a_refresh_lease_goes_to_one_holder_until_a_reading_or_its_end(h: &Harness) {
    let key = ReadKey::Seat(new_seat());
    let t = h.now();
    let r = &h.readings;
    assert_eq!(r.entry(&key).await.unwrap(), None);
    assert!(
        r.lease_refresh(&key, &lease("a", t, 1_000), t)
            .await
            .unwrap()
    );
    let entry = r
        .entry(&key)
        .await
        .unwrap()
        .expect("the lease made an entry");
    assert_eq!(entry.lease, Some(lease("a", t, 1_000)));
    assert_eq!(entry.reading, None);
    // Another holder waits while it is live; the same holder may take it over.
    assert!(
        !r.lease_refresh(&key, &lease("b", Millis(t.0 + 10), 1_000), t)
            .await
            .unwrap()
    );
    assert!(
        r.lease_refresh(&key, &lease("a", Millis(t.0 + 10), 1_000), t)
            .await
            .unwrap()
    );
    // Past its end, another holder may take it.
    assert!(
        r.lease_refresh(&key, &lease("b", Millis(t.0 + 1_010), 1_000), t)
            .await
            .unwrap()
    );
    // A reading recorded after the lease began ends it, but a fresh reading refuses new leases.
    let reading = Reading::seat(seat_of(&key), true, Millis(t.0 + 1_020));
    assert!(r.record(&reading).await.unwrap());
    let fresh_cutoff = Millis(t.0 + 1_000);
    assert!(
        !r.lease_refresh(&key, &lease("c", Millis(t.0 + 1_030), 1_000), fresh_cutoff)
            .await
            .unwrap()
    );
    let stale_cutoff = Millis(t.0 + 1_021);
    assert!(
        r.lease_refresh(&key, &lease("c", Millis(t.0 + 1_030), 1_000), stale_cutoff)
            .await
            .unwrap()
    );
    let entry = r.entry(&key).await.unwrap().unwrap();
    assert_eq!(
        entry.reading,
        Some(reading),
        "a lease leaves the reading in place"
    );
    assert_eq!(entry.lease.map(|l| l.holder), Some("c".into()));
}

fn seat_of(key: &ReadKey) -> SeatId {
    match key {
        ReadKey::Seat(s) => s.clone(),
        ReadKey::Room(_) => unreachable!("a seat key"),
    }
}

pub async fn only_a_newer_reading_is_recorded_and_batches_read_what_exists(h: &Harness) {
    let r = &h.readings;
    let t = h.now();
    let seat = new_seat();
    let taken = Reading::seat(seat.clone(), false, t);
    assert!(r.record(&taken).await.unwrap());
    assert!(
        !r.record(&Reading::seat(seat.clone(), true, t))
            .await
            .unwrap()
    );
    assert!(
        !r.record(&Reading::seat(seat.clone(), true, Millis(t.0 - 1)))
            .await
            .unwrap()
    );
    let key = ReadKey::Seat(seat.clone());
    assert_eq!(
        r.entry(&key).await.unwrap().unwrap().reading,
        Some(taken.clone())
    );
    let freed = Reading::seat(seat.clone(), true, Millis(t.0 + 1));
    assert!(r.record(&freed).await.unwrap());

    let room = ReadKey::Room(RoomId::parse(&unique("room")).unwrap());
    let map = Reading {
        key: room.clone(),
        value: ReadValue::Room {
            seats: vec![SeatAvailability {
                seat_id: seat.clone(),
                available: true,
            }],
        },
        as_of: t,
    };
    assert!(r.record(&map).await.unwrap());
    let missing = ReadKey::Seat(new_seat());
    let mut got = r
        .entries(&[key.clone(), missing, room.clone()])
        .await
        .unwrap();
    got.sort_by_key(|(k, _)| k.as_key());
    let mut want = vec![
        (
            key,
            CacheEntry {
                reading: Some(freed),
                lease: None,
                failure: None,
            },
        ),
        (
            room,
            CacheEntry {
                reading: Some(map),
                lease: None,
                failure: None,
            },
        ),
    ];
    want.sort_by_key(|(k, _)| k.as_key());
    assert_eq!(got, want);
    assert_eq!(r.entries(&[]).await.unwrap(), vec![]);
    let too_many: Vec<ReadKey> = (0..=MAX_BATCH_READ)
        .map(|_| ReadKey::Seat(new_seat()))
        .collect();
    assert!(matches!(
        r.entries(&too_many).await,
        Err(StoreError::Unavailable(_))
    ));
}

/// The holds item is one per store, like the breaker's: the case starts from whatever is
/// stored and only moves its routes later. Each write is checked against the domain's rule
/// ([`RouteHolds::may_extend`]) on what was stored just before: the differential case.
pub async fn a_hold_only_moves_later_and_for_its_route_alone(h: &Harness) {
    let b = &h.breaker;
    let before = b.holds().await.unwrap();
    let base = |route: UpstreamRoute| {
        before
            .until(route)
            .unwrap_or(Millis(0))
            .max(h.now())
            .plus(Duration::from_secs(3_600))
    };
    let t = base(UpstreamRoute::Room);
    for until in [t, t, Millis(t.0 - 1), Millis(t.0 + 1), Millis(t.0 + 1)] {
        let stored = b.holds().await.unwrap();
        let want = stored.may_extend(UpstreamRoute::Room, until);
        assert_eq!(
            b.hold(UpstreamRoute::Room, until).await.unwrap(),
            want,
            "hold(room, {until:?}) over {stored:?}"
        );
        let after = b.holds().await.unwrap();
        assert_eq!(after.until(UpstreamRoute::Room), {
            let s = stored.until(UpstreamRoute::Room);
            if want { Some(until) } else { s }
        });
    }
    assert_eq!(
        b.holds().await.unwrap().until(UpstreamRoute::Room),
        Some(Millis(t.0 + 1))
    );
    assert_eq!(
        b.holds().await.unwrap().until(UpstreamRoute::Reserve),
        before.until(UpstreamRoute::Reserve),
        "another route is left alone"
    );
    // Instances told different times at once: the latest stands, whatever the order.
    let t = base(UpstreamRoute::Charge);
    let writes = (0..8).map(|i| b.hold(UpstreamRoute::Charge, Millis(t.0 + i * 7 % 8)));
    let taken = futures::future::join_all(writes).await;
    assert!(taken.iter().any(|r| *r.as_ref().unwrap()));
    assert_eq!(
        b.holds().await.unwrap().until(UpstreamRoute::Charge),
        Some(Millis(t.0 + 7))
    );
}

/// A failed refresh ([`ReadFailure`]) on a key: each write is checked against the domain's
/// rules ([`CacheEntry::may_record_failure`], [`CacheEntry::may_lease`]) on the entry stored
/// just before it.
pub async fn a_failed_refresh_keeps_everyone_off_the_key_until_it_ends_and_a_reading_clears_it(
    h: &Harness,
) {
    let r = &h.readings;
    let t = h.now();
    let seat = new_seat();
    let key = ReadKey::Seat(seat.clone());
    let failure = |at: i64, until: i64, count: u32| ReadFailure {
        at: Millis(t.0 + at),
        until: Millis(t.0 + until),
        count,
    };
    // On no entry at all: it makes one, without a reading.
    assert!(r.record_failure(&key, &failure(0, 1_000, 1)).await.unwrap());
    let entry = r.entry(&key).await.unwrap().unwrap();
    assert_eq!(entry.failure, Some(failure(0, 1_000, 1)));
    assert_eq!(entry.reading, None);
    // Reading as of t+100, then failures tried over it, each as the rule says.
    let reading = Reading::seat(seat.clone(), true, Millis(t.0 + 100));
    assert!(r.record(&reading).await.unwrap());
    assert_eq!(
        r.entry(&key).await.unwrap().unwrap().failure,
        None,
        "a reading clears it"
    );
    for (f, want) in [
        (failure(100, 2_000, 1), false), // sent no later than the stored reading
        (failure(200, 2_000, 1), true),
        (failure(300, 1_500, 2), false), // ends sooner than the stored one
        (failure(300, 2_000, 2), false), // ends no later
        (failure(400, 4_000, 2), true),
    ] {
        let before = r.entry(&key).await.unwrap();
        assert_eq!(
            CacheEntry::may_record_failure(before.as_ref(), &f),
            want,
            "the case's own expectation of the rule"
        );
        assert_eq!(r.record_failure(&key, &f).await.unwrap(), want, "{f:?}");
        let after = r.entry(&key).await.unwrap().unwrap();
        let expected = if want {
            Some(f.clone())
        } else {
            before.unwrap().failure
        };
        assert_eq!(after.failure, expected);
        assert_eq!(after.reading, Some(reading.clone()), "the reading stays");
    }
    // Nobody leases the key before the failure ends, stale reading or not; then anyone may.
    let stale_before = Millis(t.0 + 10_000);
    for (holder, since, want) in [("a", 3_999, false), ("b", 4_000, true)] {
        let l = lease(holder, Millis(t.0 + since), 1_000);
        let before = r.entry(&key).await.unwrap();
        assert_eq!(
            CacheEntry::may_lease(before.as_ref(), &l, stale_before),
            want
        );
        assert_eq!(
            r.lease_refresh(&key, &l, stale_before).await.unwrap(),
            want,
            "{holder}"
        );
    }
    // A reading recorded later clears the failure and keeps the lease.
    let later = Reading::seat(seat, false, Millis(t.0 + 4_100));
    assert!(r.record(&later).await.unwrap());
    let entry = r.entry(&key).await.unwrap().unwrap();
    assert_eq!(entry.failure, None);
    assert_eq!(entry.reading, Some(later));
    assert_eq!(entry.lease.map(|l| l.holder), Some("b".into()));
}

pub async fn the_breaker_changes_only_over_the_generation_it_was_decided_on(h: &Harness) {
    // One breaker item per store, which other cases never touch: start from whatever it is.
    let b = &h.breaker;
    let now = h.now();
    let seen = b.breaker().await.unwrap();
    let opened = seen.opened(now, Duration::from_secs(5));
    assert!(b.swap_breaker(&opened).await.unwrap());
    assert_eq!(b.breaker().await.unwrap(), opened);
    // Two instances decided on the same generation: only the first write counts.
    let other = seen.opened(now, Duration::from_secs(9));
    assert!(!b.swap_breaker(&other).await.unwrap());
    let a = opened.probing("a", now, Duration::from_secs(1));
    let c = opened.probing("c", now, Duration::from_secs(1));
    assert!(b.swap_breaker(&a).await.unwrap());
    assert!(!b.swap_breaker(&c).await.unwrap());
    assert_eq!(b.breaker().await.unwrap(), a);
    let closed = a.closed_at(now);
    assert!(b.swap_breaker(&closed).await.unwrap());
    assert!(b.breaker().await.unwrap().is_closed());
}

// ---------------------------------------------------------------------------------------------
// Flights
// ---------------------------------------------------------------------------------------------

fn new_flight(capacity: u32, max_per_user: Option<u32>, shards: u32, now: Millis) -> Flight {
    let id = FlightId::parse(&unique("F")).unwrap();
    Flight::new(id, capacity, max_per_user, shards, now).unwrap()
}

fn booking_of(flight: &Flight, user: &UserId, head_count: u32, shard: u32, now: Millis) -> Booking {
    Booking {
        booking_id: BookingId::generate(),
        flight_id: flight.flight_id.clone(),
        user_id: user.clone(),
        head_count,
        shard,
        status: BookingStatus::Booked,
        created_at: now,
        cancelled_at: None,
    }
}

pub async fn a_flight_is_created_once_with_its_capacity_split_over_its_shards(h: &Harness) {
    let f = &h.flights;
    let flight = new_flight(301, None, 4, h.now());
    assert!(f.create_flight(&flight).await.unwrap());
    let mut again = flight.clone();
    again.capacity = 5;
    assert!(
        !f.create_flight(&again).await.unwrap(),
        "an existing id is not overwritten"
    );
    let inv = f.inventory(&flight.flight_id).await.unwrap().unwrap();
    assert_eq!(inv.flight, flight);
    assert_eq!(inv.available, vec![76, 75, 75, 75]);
    assert!(!inv.sold_out);
    let unknown = FlightId::parse(&unique("F")).unwrap();
    assert_eq!(f.inventory(&unknown).await.unwrap(), None);
}

pub async fn a_booking_takes_seats_from_its_shard_only_while_it_has_them_and_a_cancel_returns_them_once(
    h: &Harness,
) {
    let f = &h.flights;
    let now = h.now();
    let flight = new_flight(5, None, 1, now);
    f.create_flight(&flight).await.unwrap();
    let (alice, bob) = (new_user(), new_user());
    let first = booking_of(&flight, &alice, 3, 0, now);
    f.book(&first, None, None).await.unwrap();
    let too_many = booking_of(&flight, &bob, 3, 0, now);
    assert_eq!(
        f.book(&too_many, None, None).await,
        Err(BookRefusal::ShardShort { available: 2 })
    );
    assert!(
        !f.mark_sold_out(&flight.flight_id, 1).await.unwrap(),
        "2 seats left"
    );
    let second = booking_of(&flight, &bob, 2, 0, now);
    f.book(&second, None, None).await.unwrap();
    let inv = f.inventory(&flight.flight_id).await.unwrap().unwrap();
    assert_eq!(inv.available(), 0);
    assert!(f.mark_sold_out(&flight.flight_id, 1).await.unwrap());
    assert!(
        f.inventory(&flight.flight_id)
            .await
            .unwrap()
            .unwrap()
            .sold_out
    );
    assert_eq!(f.bookings_of(&alice).await.unwrap(), vec![first.clone()]);
    assert_eq!(f.bookings_of(&bob).await.unwrap(), vec![second.clone()]);

    // Only the owner, on the booking's own flight, may cancel; seats come back once.
    let other_flight = FlightId::parse(&unique("F")).unwrap();
    assert_eq!(
        f.cancel_booking(&bob, &flight.flight_id, &first.booking_id, now)
            .await,
        Err(CancelBookingRefusal::NotFound)
    );
    assert_eq!(
        f.cancel_booking(&alice, &other_flight, &first.booking_id, now)
            .await,
        Err(CancelBookingRefusal::NotFound)
    );
    let later = Millis(now.0 + 5);
    let cancelled = f
        .cancel_booking(&alice, &flight.flight_id, &first.booking_id, later)
        .await
        .unwrap();
    assert_eq!(
        (cancelled.status, cancelled.cancelled_at),
        (BookingStatus::Cancelled, Some(later))
    );
    assert_eq!(
        f.cancel_booking(&alice, &flight.flight_id, &first.booking_id, later)
            .await,
        Err(CancelBookingRefusal::AlreadyCancelled(Box::new(
            cancelled.clone()
        )))
    );
    let inv = f.inventory(&flight.flight_id).await.unwrap().unwrap();
    assert_eq!(
        (inv.available(), inv.sold_out),
        (3, false),
        "returned once, mark cleared"
    );
    assert_eq!(f.bookings_of(&alice).await.unwrap(), vec![cancelled]);
}

/// The differential case for [`Action::confirm`]: every kind of stored action (missing, the
/// user's or another's, prepared or confirmed, live or expired) confirmed through the port
/// answers exactly as the rule answers on the action as it was, and writes what the rule says.
pub async fn confirms_answer_as_the_confirm_rule(h: &Harness) {
    let ttl = Duration::from_secs(10);
    let mut cases = vec![(None, false, false)];
    for mine in [true, false] {
        for confirmed in [false, true] {
            for expired in [false, true] {
                cases.push((Some(mine), confirmed, expired));
            }
        }
    }
    for (owner, confirmed, expired) in cases {
        let label = format!("mine {owner:?}, confirmed {confirmed}, expired {expired}");
        let me = new_user();
        let made_at = h.now();
        let action_id = match owner {
            None => ActionId::generate(),
            Some(mine) => {
                let owner = if mine { me.clone() } else { new_user() };
                let action = Action::prepare(
                    owner.clone(),
                    ActionKind::ReserveSeat,
                    new_seat(),
                    made_at,
                    ttl,
                );
                h.actions.put_action(&action).await.expect("put_action");
                if confirmed {
                    let c = confirmation_of(&action, &owner, made_at);
                    h.actions.confirm(&c).await.expect("the first confirm");
                }
                action.action_id
            }
        };
        let at = made_at.plus(if expired { ttl * 2 } else { ttl / 2 });
        let before = h.actions.get_action(&action_id).await.unwrap();
        let probe = Action {
            action_id: action_id.clone(),
            user_id: me.clone(),
            kind: ActionKind::ReserveSeat,
            seat_id: new_seat(),
            status: ActionStatus::Prepared,
            intent_id: None,
            created_at: made_at,
            expires_at: made_at.plus(ttl),
        };
        let c = confirmation_of(before.as_ref().unwrap_or(&probe), &me, at);
        let expected = Action::confirm(before.as_ref(), &me, &c.intent.intent_id, at)
            .map_err(ConfirmError::from);
        let got = h.actions.confirm(&c).await;
        match expected {
            Ok(action) => {
                assert_eq!(got, Ok(()), "{label}: the rule confirms");
                assert_eq!(
                    h.actions.get_action(&action_id).await.unwrap(),
                    Some(action),
                    "{label}: the stored action is the rule's"
                );
                assert_eq!(
                    h.intents.get_intent(&c.intent.intent_id).await.unwrap(),
                    Some(c.intent.clone()),
                    "{label}"
                );
            }
            Err(refusal) => {
                assert_eq!(got, Err(refusal), "{label}: the rule's refusal");
                if let Some(before) = &before {
                    nothing_confirmed(h, &c, before).await;
                }
            }
        }
    }
}

/// The differential case for [`Booking::cancel`]: a missing booking, another user's, one on
/// another flight, a live one and a cancelled one, cancelled through the port, answer as the
/// rule does on the booking as it was; the seats go back only when the rule cancels.
pub async fn cancels_answer_as_the_cancel_rule(h: &Harness) {
    #[derive(Debug, Clone, Copy)]
    enum Case {
        Missing,
        Theirs,
        OtherFlight,
        Live,
        Cancelled,
    }
    let f = &h.flights;
    for case in [
        Case::Missing,
        Case::Theirs,
        Case::OtherFlight,
        Case::Live,
        Case::Cancelled,
    ] {
        let now = h.now();
        let flight = new_flight(4, Some(4), 1, now);
        f.create_flight(&flight).await.unwrap();
        let (me, them) = (new_user(), new_user());
        let owner = if matches!(case, Case::Theirs) {
            &them
        } else {
            &me
        };
        let booking = booking_of(&flight, owner, 2, 0, now);
        if !matches!(case, Case::Missing) {
            f.book(&booking, flight.max_per_user, None).await.unwrap();
        }
        if matches!(case, Case::Cancelled) {
            f.cancel_booking(&me, &flight.flight_id, &booking.booking_id, now)
                .await
                .unwrap();
        }
        let on = match case {
            Case::OtherFlight => FlightId::parse(&unique("F")).unwrap(),
            _ => flight.flight_id.clone(),
        };
        let before = f
            .bookings_of(owner)
            .await
            .unwrap()
            .into_iter()
            .find(|b| b.booking_id == booking.booking_id);
        let stock = |inv: Option<Inventory>| inv.map(|i| i.available()).unwrap_or(0);
        let stock_before = stock(f.inventory(&flight.flight_id).await.unwrap());
        let later = Millis(now.0 + 7);
        let expected =
            Booking::cancel(before.as_ref(), &me, &on, later).map_err(CancelBookingRefusal::from);
        let got = f.cancel_booking(&me, &on, &booking.booking_id, later).await;
        assert_eq!(got, expected, "{case:?}: the rule's answer");
        let returned = if expected.is_ok() { 2 } else { 0 };
        assert_eq!(
            stock(f.inventory(&flight.flight_id).await.unwrap()),
            stock_before + returned,
            "{case:?}: seats go back only on the rule's cancel"
        );
    }
}

/// The differential case for [`Flight::book`]: a grid of stock, seats the user already holds,
/// head counts and limits (including a request over the limit on a short shard, where the
/// rule's order decides which refusal wins), each booked through the port, answers as the rule
/// does and leaves the stock the rule says.
pub async fn bookings_answer_as_the_booking_rule(h: &Harness) {
    let f = &h.flights;
    for available in [0, 1, 3] {
        for held in [0, 2] {
            for head_count in [1, 2, 3] {
                for max in [None, Some(2), Some(4)] {
                    let label = format!(
                        "available {available}, held {held}, asking {head_count}, max {max:?}"
                    );
                    let now = h.now();
                    // One seat more than the grid needs, taken by someone else, so a flight
                    // with nothing available is still a valid flight.
                    let flight = new_flight(available + held + 1, max, 1, now);
                    f.create_flight(&flight).await.unwrap();
                    f.book(&booking_of(&flight, &new_user(), 1, 0, now), None, None)
                        .await
                        .unwrap();
                    let me = new_user();
                    if held > 0 {
                        f.book(&booking_of(&flight, &me, held, 0, now), Some(held), None)
                            .await
                            .unwrap();
                    }
                    let probe = booking_of(&flight, &me, head_count, 0, now);
                    let counted = if max.is_some() { held } else { 0 };
                    let expected = Flight::book(available, counted, head_count, max)
                        .map_err(BookRefusal::from);
                    let got = f.book(&probe, max, None).await;
                    let left = f
                        .inventory(&flight.flight_id)
                        .await
                        .unwrap()
                        .expect("the flight")
                        .available();
                    let mine = f.bookings_of(&me).await.unwrap();
                    match expected {
                        Ok(taken) => {
                            assert_eq!(got, Ok(()), "{label}: the rule books");
                            assert_eq!(left, taken.available, "{label}: stock left");
                            assert!(mine.contains(&probe), "{label}: the booking is stored");
                        }
                        Err(refusal) => {
                            assert_eq!(got, Err(refusal), "{label}: the rule's refusal");
                            assert_eq!(left, available, "{label}: a refusal takes nothing");
                            assert!(!mine.contains(&probe), "{label}: nor leaves a record");
                        }
                    }
                }
            }
        }
    }
}

pub async fn the_per_user_limit_is_kept_in_the_booking_transaction(h: &Harness) {
    let f = &h.flights;
    let now = h.now();
    let flight = new_flight(10, Some(2), 1, now);
    f.create_flight(&flight).await.unwrap();
    let alice = new_user();
    let first = booking_of(&flight, &alice, 2, 0, now);
    f.book(&first, Some(2), None).await.unwrap();
    assert_eq!(
        f.book(&booking_of(&flight, &alice, 1, 0, now), Some(2), None)
            .await,
        Err(BookRefusal::LimitReached)
    );
    let inv = f.inventory(&flight.flight_id).await.unwrap().unwrap();
    assert_eq!(inv.available(), 8, "a refused booking took no seats");
    assert_eq!(
        f.bookings_of(&alice).await.unwrap().len(),
        1,
        "nor left a record"
    );
    // Another user is not limited by alice; alice may book again after a cancel.
    f.book(&booking_of(&flight, &new_user(), 2, 0, now), Some(2), None)
        .await
        .unwrap();
    f.cancel_booking(&alice, &flight.flight_id, &first.booking_id, now)
        .await
        .unwrap();
    f.book(&booking_of(&flight, &alice, 1, 0, now), Some(2), None)
        .await
        .unwrap();
    assert_eq!(
        f.inventory(&flight.flight_id)
            .await
            .unwrap()
            .unwrap()
            .available(),
        7
    );
}

pub async fn an_idempotency_record_is_begun_once_and_keeps_its_answer(h: &Harness) {
    let f = &h.flights;
    let now = h.now();
    let flight = new_flight(3, None, 1, now);
    f.create_flight(&flight).await.unwrap();
    let user = new_user();
    let key = IdempotencyKey::parse(&unique("k-")).unwrap();
    let record = |token: &str, created: Millis| IdempotencyRecord {
        user_id: user.clone(),
        key: key.clone(),
        fingerprint: IdempotencyRecord::fingerprint(&flight.flight_id, 1),
        state: RequestState::InProgress {
            token: token.into(),
            expires_at: Millis(created.0 + 1_000),
        },
        created_at: created,
    };
    let first = record("t1", now);
    assert_eq!(f.begin_request(&first).await.unwrap(), Begun::Started);
    assert_eq!(
        f.begin_request(&record("t2", Millis(now.0 + 10)))
            .await
            .unwrap(),
        Begun::Existing(first.clone()),
        "in progress: the second request sees the first's record"
    );
    // A booking under a token that does not hold the record writes nothing.
    let stale = booking_of(&flight, &user, 1, 0, now);
    assert_eq!(
        f.book(&stale, None, Some((&key, "t2"))).await,
        Err(BookRefusal::RequestTakenOver)
    );
    assert_eq!(
        f.inventory(&flight.flight_id)
            .await
            .unwrap()
            .unwrap()
            .available(),
        3
    );
    let booking = booking_of(&flight, &user, 1, 0, now);
    f.book(&booking, None, Some((&key, "t1"))).await.unwrap();
    let answered = IdempotencyRecord {
        state: RequestState::Done {
            answer: BookingAnswer::Booked {
                booking: booking.clone(),
            },
        },
        ..first.clone()
    };
    assert_eq!(
        f.begin_request(&record("t3", Millis(now.0 + 5_000)))
            .await
            .unwrap(),
        Begun::Existing(answered.clone()),
        "answered: kept past the in-progress expiry"
    );
    assert!(
        !f.finish_request(&user, &key, "t1", &BookingAnswer::SoldOut)
            .await
            .unwrap()
    );

    // Another key: finished with an answer, abandoned, and taken over once expired.
    let key2 = IdempotencyKey::parse(&unique("k-")).unwrap();
    let r = |token: &str, created: Millis| IdempotencyRecord {
        key: key2.clone(),
        ..record(token, created)
    };
    assert_eq!(f.begin_request(&r("a", now)).await.unwrap(), Begun::Started);
    f.abandon_request(&user, &key2, "not-a").await.unwrap();
    assert!(matches!(
        f.begin_request(&r("b", now)).await.unwrap(),
        Begun::Existing(_)
    ));
    f.abandon_request(&user, &key2, "a").await.unwrap();
    assert_eq!(f.begin_request(&r("b", now)).await.unwrap(), Begun::Started);
    assert_eq!(
        f.begin_request(&r("c", Millis(now.0 + 1_000)))
            .await
            .unwrap(),
        Begun::Started,
        "abandoned in progress past its expiry: taken over"
    );
    assert!(
        !f.finish_request(&user, &key2, "b", &BookingAnswer::SoldOut)
            .await
            .unwrap()
    );
    assert!(
        f.finish_request(&user, &key2, "c", &BookingAnswer::SoldOut)
            .await
            .unwrap()
    );
    let Begun::Existing(done) = f
        .begin_request(&r("d", Millis(now.0 + 9_000)))
        .await
        .unwrap()
    else {
        panic!("answered");
    };
    assert_eq!(
        done.state,
        RequestState::Done {
            answer: BookingAnswer::SoldOut
        }
    );
}

pub async fn concurrent_bookings_never_oversell(h: &Harness) {
    // Thousands of bookers at once, each wanting 1 to 3 seats: about four times the supply.
    const BOOKERS: u32 = 2_000;
    const CAPACITY: u32 = 1_000;
    const SHARDS: u32 = 4;
    let now = h.now();
    let flight = new_flight(CAPACITY, None, SHARDS, now);
    h.flights.create_flight(&flight).await.unwrap();
    let tasks: Vec<_> = (0..BOOKERS)
        .map(|i| {
            let (flights, flight) = (h.flights.clone(), flight.clone());
            tokio::spawn(async move {
                let user = new_user();
                let k = 1 + i % 3;
                for s in 0..SHARDS {
                    let b = booking_of(&flight, &user, k, (i + s) % SHARDS, now);
                    loop {
                        match flights.book(&b, None, None).await {
                            Ok(()) => return Some((user, k)),
                            Err(BookRefusal::ShardShort { .. }) => break,
                            Err(BookRefusal::Store(e)) if e.is_retryable() => continue,
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
                None
            })
        })
        .collect();
    let mut sold = 0;
    let mut booked = Vec::new();
    for t in tasks {
        if let Some((user, k)) = t.await.unwrap() {
            sold += k;
            booked.push((user, k));
        }
    }
    let inv = h
        .flights
        .inventory(&flight.flight_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        sold + inv.available(),
        CAPACITY,
        "every seat sold once or still there"
    );
    assert!(sold <= CAPACITY);
    assert!(
        inv.available() < 3 * SHARDS,
        "demand outran supply: at most a few seats per shard left"
    );
    // Every winner holds exactly the one booking it was told of: no seat sold without a record.
    for (user, k) in &booked {
        let bookings = h.flights.bookings_of(user).await.unwrap();
        assert_eq!(bookings.iter().map(|b| b.head_count).sum::<u32>(), *k);
    }
}

// ---------------------------------------------------------------------------------------------
// Reference semantics, property style
// ---------------------------------------------------------------------------------------------

/// xorshift64*: deterministic, so a failing sequence replays exactly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize].clone()
    }

    /// `value` nudged by -1, 0 or +1 (a stale, the current or a future token or version).
    fn near(&mut self, value: u64) -> u64 {
        match self.below(4) {
            0 => value.saturating_sub(1),
            1 => value + 1,
            _ => value,
        }
    }
}

pub async fn transitions_match_reference_semantics(h: &Harness) {
    const SEED: u64 = 0x5ea7_9a7e_2024_0001;
    const STEPS: usize = 240;
    let mut rng = Rng(SEED);
    let mut now = h.now();
    let mut model: Vec<Intent> = Vec::new();
    for i in 0..4 {
        model.push(if i % 2 == 0 {
            requested_intent(h).await
        } else {
            waiting_intent(h, now.plus(Duration::from_secs(30))).await
        });
    }
    // What the store must answer for each seat's suppression, as far as this case wrote them.
    let mut suppressions: HashMap<SeatId, Suppression> = HashMap::new();
    let (mut applied_n, mut refused_n) = (0, 0);

    for step in 0..STEPS {
        let slot = rng.below(model.len() as u64) as usize;
        now = now.plus(Duration::from_millis(rng.below(3_000)));
        let current = model[slot].clone();
        let suppress = rng.chance(40).then(|| Suppression {
            seat_id: current.seat_id.clone(),
            intent_id: current.intent_id.clone(),
            until: now.plus(Duration::from_millis(rng.below(10_000))),
        });
        let later = |rng: &mut Rng| now.plus(Duration::from_millis(rng.below(5_000)));
        let transition = match rng.below(6) {
            5 => Transition::Release {
                token: rng.near(current.fencing_token),
                back_to: rng.pick(&[BackTo::Requested, BackTo::WaitingForSeat]),
                next_attempt_at: later(&mut rng),
                due_at: later(&mut rng),
            },
            0 => Transition::Claim {
                lease_until: later(&mut rng),
                due_at: later(&mut rng),
            },
            1 => Transition::Complete {
                token: rng.near(current.fencing_token),
                status: rng.pick(&[
                    Terminal::Succeeded,
                    Terminal::FailedRace,
                    Terminal::FailedAuth,
                    Terminal::FailedUpstream,
                ]),
                charge_id: rng.chance(50).then(|| format!("charge-{step}")),
                reason: rng.pick(&[
                    Reason::Reserved,
                    Reason::ChargeRead,
                    Reason::NoCharge,
                    Reason::UpstreamRefused(400 + (step % 100) as u16),
                ]),
                suppress,
            },
            2 => Transition::Rewait {
                token: rng.near(current.fencing_token),
                next_attempt_at: later(&mut rng),
                due_at: later(&mut rng),
                reason: Reason::SeatTaken,
                suppress,
            },
            3 => {
                let statuses = [
                    IntentStatus::Requested,
                    IntentStatus::WaitingForSeat,
                    IntentStatus::Reserving,
                ];
                let from = statuses.into_iter().filter(|_| rng.chance(50)).collect();
                let owner = match rng.below(3) {
                    0 => None,
                    1 => Some(current.user_id.clone()),
                    _ => Some(new_user()),
                };
                Transition::Close {
                    from,
                    owner,
                    deadline_passed: rng.chance(30),
                    status: rng.pick(&[
                        Terminal::Cancelled,
                        Terminal::WaitExpired,
                        Terminal::FailedRace,
                    ]),
                    reason: rng.pick(&[Reason::Cancelled, Reason::Deadline, Reason::SeatTaken]),
                }
            }
            _ => Transition::Bump {
                from: rng.pick(&[
                    current.status,
                    IntentStatus::Requested,
                    IntentStatus::WaitingForSeat,
                ]),
                version: rng.near(current.version),
                next_attempt_at: rng.chance(50).then(|| later(&mut rng)),
                due_at: later(&mut rng),
                requeue: rng.chance(50),
            },
        };
        let req = request(&current, now, transition);
        let context = || format!("step {step} (seed {SEED:#x}): {req:?} on {current:?}");
        match (current.apply(&req), h.intents.transition(&req).await) {
            (Some(expected), Ok(got)) => {
                assert_eq!(got, expected, "{}", context());
                if let Some(s) = req.suppression() {
                    suppressions.insert(s.seat_id.clone(), s.clone());
                }
                model[slot] = expected;
                applied_n += 1;
            }
            (None, Err(TransitionError::Refused(seen))) => {
                assert_eq!(*seen, current, "refusal's state, {}", context());
                refused_n += 1;
            }
            (expected, got) => panic!(
                "reference says {:?}, store says {got:?}: {}",
                expected.map(|i| i.status),
                context()
            ),
        }
        assert_eq!(
            h.intents
                .get_intent(&current.intent_id)
                .await
                .unwrap()
                .as_ref(),
            Some(&model[slot]),
            "stored state, {}",
            context()
        );
        let expected_suppression = suppressions
            .get(&current.seat_id)
            .filter(|s| s.until > now)
            .cloned();
        assert_eq!(
            h.intents.suppression(&current.seat_id, now).await.unwrap(),
            expected_suppression,
            "suppression, {}",
            context()
        );
        // Keep the sequence interesting: a settled intent makes room for a fresh one.
        if model[slot].status.is_terminal() {
            model[slot] = if rng.chance(50) {
                requested_intent(h).await
            } else {
                waiting_intent(h, now.plus(Duration::from_millis(rng.below(20_000)))).await
            };
        }
    }
    assert!(
        applied_n >= STEPS / 5 && refused_n >= STEPS / 5,
        "the sequence should exercise both outcomes ({applied_n} applied, {refused_n} refused)"
    );
}

// ---------------------------------------------------------------------------------------------
// Queue
// ---------------------------------------------------------------------------------------------

fn queue(h: &Harness) -> (&dyn SeatQueue, &dyn QueueConsumer) {
    let (send, receive, _) = queue_ports(h);
    (send, receive)
}

fn queue_ports(h: &Harness) -> (&dyn SeatQueue, &dyn QueueConsumer, &dyn HandBack) {
    let q = h.queue.as_ref().expect(
        "this contract case needs a queue: build the Harness with `with_queue` \
         (queue cases are never skipped)",
    );
    (q.send.as_ref(), q.receive.as_ref(), q.hand_back.as_ref())
}

fn message(seat: &SeatId) -> SeatMessage {
    SeatMessage {
        intent_id: IntentId::generate(),
        seat_id: seat.clone(),
        version: 1,
    }
}

async fn send_all(h: &Harness, messages: &[SeatMessage]) {
    for m in messages {
        queue(h).0.send(m).await.expect("send");
    }
}

fn body(d: &Delivery) -> SeatMessage {
    serde_json::from_str(&d.body).expect("a delivery's body is the SeatMessage sent")
}

fn bodies(ds: &[Delivery]) -> Vec<SeatMessage> {
    ds.iter().map(body).collect()
}

fn receipts(ds: &[Delivery]) -> Vec<String> {
    ds.iter().map(|d| d.receipt.clone()).collect()
}

/// Moves the queue's clock past the visibility timeout of everything in flight now.
fn expire_visibility(h: &Harness) {
    h.clock
        .advance(h.queue_limits.visibility_timeout + Duration::from_millis(1));
}

/// One receive, for checks that something is *not* delivered now.
async fn receive_now(h: &Harness, max: usize) -> Vec<Delivery> {
    queue(h).1.receive(max).await.expect("receive")
}

/// Receives (accumulating across polls) until `enough` holds, for up to the harness's patience.
async fn receive_until(
    h: &Harness,
    max: usize,
    what: &str,
    enough: impl Fn(&[Delivery]) -> bool,
) -> Vec<Delivery> {
    let started = Instant::now();
    let mut got = Vec::new();
    loop {
        got.extend(receive_now(h, max).await);
        if enough(&got) {
            return got;
        }
        if started.elapsed() > h.queue_limits.patience {
            panic!(
                "waited {:?} for {what}; received {:?}",
                h.queue_limits.patience,
                bodies(&got)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn delete(h: &Harness, receipts: &[String]) {
    queue(h).1.delete(receipts).await.expect("delete");
}

pub async fn fifo_order_within_a_group(h: &Harness) {
    let seat = new_seat();
    let sent: Vec<SeatMessage> = (0..5).map(|_| message(&seat)).collect();
    send_all(h, &sent).await;
    let got = receive_until(h, 10, "five messages", |d| d.len() >= 5).await;
    assert_eq!(bodies(&got), sent, "one group's messages, in send order");
    for d in &got {
        assert_eq!(d.group_id, seat.as_str());
        assert_eq!(d.receive_count, 1);
    }
    let mut ids: Vec<&str> = got.iter().map(|d| d.message_id.as_str()).collect();
    ids.dedup();
    assert_eq!(ids.len(), 5, "distinct message ids");
    delete(h, &receipts(&got)).await;
    assert!(receive_now(h, 10).await.is_empty());

    // One at a time, each after deleting the previous.
    let seat = new_seat();
    let sent: Vec<SeatMessage> = (0..3).map(|_| message(&seat)).collect();
    send_all(h, &sent).await;
    for expected in &sent {
        let got = receive_until(h, 1, "the next message", |d| !d.is_empty()).await;
        assert_eq!(bodies(&got), vec![expected.clone()]);
        delete(h, &receipts(&got)).await;
    }
    assert!(receive_now(h, 1).await.is_empty());
}

pub async fn group_is_locked_while_a_message_is_in_flight(h: &Harness) {
    let (g, k) = (new_seat(), new_seat());
    let (g1, g2, k1, k2) = (message(&g), message(&g), message(&k), message(&k));
    send_all(h, &[g1.clone(), k1.clone(), g2.clone(), k2.clone()]).await;

    let first = receive_until(h, 1, "one message", |d| !d.is_empty()).await;
    assert_eq!(first.len(), 1, "receive(1) returned {}", first.len());
    let taken = body(&first[0]);
    let (next, other) = if taken == g1 {
        (g2, vec![k1, k2])
    } else {
        assert_eq!(taken, k1, "the first message must be the head of a group");
        (k2, vec![g1, g2])
    };

    // The other group flows; the taken group gives nothing more.
    let rest = receive_until(h, 10, "the other group", |d| d.len() >= 2).await;
    assert_eq!(
        bodies(&rest),
        other,
        "only the unlocked group, in order (got {:?})",
        bodies(&rest)
    );
    assert!(
        receive_now(h, 10).await.is_empty(),
        "both groups are locked"
    );

    delete(h, &receipts(&first)).await;
    let got = receive_until(h, 10, "the unlocked group's next", |d| !d.is_empty()).await;
    assert_eq!(bodies(&got), vec![next]);
}

pub async fn delete_then_next(h: &Harness) {
    let seat = new_seat();
    let (a, b) = (message(&seat), message(&seat));
    send_all(h, &[a.clone(), b.clone()]).await;
    let got = receive_until(h, 1, "the first message", |d| !d.is_empty()).await;
    assert_eq!(bodies(&got), vec![a]);
    assert!(receive_now(h, 1).await.is_empty(), "the group is locked");
    delete(h, &receipts(&got)).await;
    let got = receive_until(h, 1, "the second message", |d| !d.is_empty()).await;
    assert_eq!(bodies(&got), vec![b]);
    assert_eq!(got[0].receive_count, 1);
    delete(h, &receipts(&got)).await;
    assert!(receive_now(h, 10).await.is_empty());
    // Deleting nothing is fine.
    delete(h, &[]).await;
}

pub async fn visibility_expiry_redelivers(h: &Harness) {
    assert!(
        h.queue_limits.max_receive_count >= 3,
        "this case receives a message three times"
    );
    let seat = new_seat();
    let (a, b) = (message(&seat), message(&seat));
    send_all(h, &[a.clone(), b.clone()]).await;
    let first = receive_until(h, 1, "the message", |d| !d.is_empty()).await;
    assert_eq!((body(&first[0]), first[0].receive_count), (a.clone(), 1));
    assert!(receive_now(h, 10).await.is_empty(), "in flight");

    expire_visibility(h);
    let second = receive_until(h, 1, "the redelivery", |d| !d.is_empty()).await;
    assert_eq!(body(&second[0]), a, "the same message, not the next one");
    assert_eq!(second[0].message_id, first[0].message_id);
    assert_eq!(second[0].receive_count, 2);
    assert_ne!(second[0].receipt, first[0].receipt, "a fresh receipt");

    // The first receipt is stale now: deleting with it does nothing.
    delete(h, &receipts(&first)).await;
    expire_visibility(h);
    let third = receive_until(h, 1, "a third delivery", |d| !d.is_empty()).await;
    assert_eq!((body(&third[0]), third[0].receive_count), (a, 3));

    delete(h, &receipts(&third)).await;
    let next = receive_until(h, 1, "the next message", |d| !d.is_empty()).await;
    assert_eq!((body(&next[0]), next[0].receive_count), (b, 1));
}

pub async fn hand_back_returns_a_message_after_the_delay(h: &Harness) {
    let seat = new_seat();
    let a = message(&seat);
    send_all(h, std::slice::from_ref(&a)).await;
    let first = receive_until(h, 1, "the message", |d| !d.is_empty()).await;
    let delay = Duration::from_secs(1);
    assert!(
        delay < h.queue_limits.visibility_timeout,
        "the case needs a shorter delay"
    );
    let (_, _, hand_back) = queue_ports(h);
    hand_back
        .hand_back(&receipts(&first), delay)
        .await
        .expect("hand_back");
    assert!(receive_now(h, 10).await.is_empty(), "not before the delay");
    // A receipt that names nothing in flight any more is not an error.
    hand_back
        .hand_back(&["no-such-receipt".to_owned()], delay)
        .await
        .expect("a stale receipt is ignored");
    h.clock.advance(delay + Duration::from_millis(1));
    let again = receive_until(h, 1, "the handed-back message", |d| !d.is_empty()).await;
    assert_eq!(body(&again[0]), a);
    assert_eq!(again[0].receive_count, 2, "a hand-back counts as a receive");
    delete(h, &receipts(&again)).await;
}

pub async fn dedup_id_within_window_is_dropped(h: &Harness) {
    let seat = new_seat();
    let m = message(&seat);
    send_all(h, &[m.clone(), m.clone()]).await;
    let got = receive_until(h, 10, "the message", |d| !d.is_empty()).await;
    assert_eq!(bodies(&got), vec![m.clone()]);
    delete(h, &receipts(&got)).await;
    assert!(
        receive_now(h, 10).await.is_empty(),
        "the duplicate send was delivered"
    );

    // Still dropped after the first was deleted; a new version is a new message.
    send_all(h, std::slice::from_ref(&m)).await;
    let next = SeatMessage {
        version: m.version + 1,
        ..m.clone()
    };
    send_all(h, std::slice::from_ref(&next)).await;
    let got = receive_until(h, 10, "the new version", |d| !d.is_empty()).await;
    assert_eq!(bodies(&got), vec![next]);
}

pub async fn max_receive_count_dead_letters_and_unblocks_group(h: &Harness) {
    let max = h.queue_limits.max_receive_count;
    let seat = new_seat();
    let (poison, after) = (message(&seat), message(&seat));
    send_all(h, &[poison.clone(), after.clone()]).await;
    for n in 1..=max {
        let got = receive_until(h, 1, "the poison message", |d| !d.is_empty()).await;
        assert_eq!(
            (body(&got[0]), got[0].receive_count),
            (poison.clone(), n),
            "receive {n} of {max}"
        );
        expire_visibility(h);
    }
    let got = receive_until(h, 10, "the message after the dead letter", |d| {
        !d.is_empty()
    })
    .await;
    assert_eq!(
        bodies(&got),
        vec![after],
        "past max receives the message is dead-lettered and no longer blocks its group"
    );
    delete(h, &receipts(&got)).await;
    expire_visibility(h);
    assert!(
        receive_now(h, 10).await.is_empty(),
        "a dead letter came back"
    );
}

pub async fn batch_holds_several_messages_of_a_group_in_order(h: &Harness) {
    let (g, k) = (new_seat(), new_seat());
    let gs: Vec<SeatMessage> = (0..3).map(|_| message(&g)).collect();
    let ks: Vec<SeatMessage> = (0..2).map(|_| message(&k)).collect();
    send_all(h, &gs[..2]).await;
    send_all(h, &ks).await;
    send_all(h, &gs[2..]).await;

    let batch = receive_now(h, 4).await;
    assert_eq!(batch.len(), 4, "one receive(4) with 5 messages ready");
    let of = |seat: &SeatId| -> Vec<SeatMessage> {
        bodies(&batch)
            .into_iter()
            .filter(|m| m.seat_id == *seat)
            .collect()
    };
    let (got_g, got_k) = (of(&g), of(&k));
    assert_eq!(got_g.as_slice(), &gs[..got_g.len()], "group order");
    assert_eq!(got_k.as_slice(), &ks[..got_k.len()], "group order");
    assert!(
        got_g.len() >= 2 || got_k.len() >= 2,
        "several messages of one group in a batch"
    );
    assert!(
        receive_now(h, 10).await.is_empty(),
        "the last message's group is locked by its in-flight messages"
    );
    delete(h, &receipts(&batch)).await;
    let last = receive_until(h, 10, "the remaining message", |d| !d.is_empty()).await;
    let expected = if got_g.len() < 3 {
        gs[2].clone()
    } else {
        ks[1].clone()
    };
    assert_eq!(bodies(&last), vec![expected]);
}

// ---------------------------------------------------------------------------------------------
// Rate limits
// ---------------------------------------------------------------------------------------------

fn rate_limit() -> seatgate::domain::RateLimit {
    seatgate::domain::RateLimit {
        requests: 3,
        window: Duration::from_secs(10),
    }
}

/// A window takes `limit` requests and refuses the next; each user and route has its own
/// counter, and the next window starts at zero.
pub async fn a_rate_window_counts_to_its_limit_and_the_next_window_starts_afresh(h: &Harness) {
    use seatgate::domain::{LimitedRoute, RateWindow};
    let limit = rate_limit();
    let (u, other) = (new_user(), new_user());
    let now = h.now();
    let w = RateWindow::at(&u, LimitedRoute::Confirm, now, &limit);
    for i in 1..=limit.requests {
        assert!(
            h.rate_limits.take(&w, limit.requests).await.unwrap(),
            "request {i} of {} is within the limit",
            limit.requests
        );
    }
    assert!(!h.rate_limits.take(&w, limit.requests).await.unwrap());
    assert!(
        !h.rate_limits.take(&w, limit.requests).await.unwrap(),
        "a refusal writes nothing that would reopen the window"
    );
    let other_route = RateWindow::at(&u, LimitedRoute::Book, now, &limit);
    assert!(
        h.rate_limits
            .take(&other_route, limit.requests)
            .await
            .unwrap()
    );
    let other_user = RateWindow::at(&other, LimitedRoute::Confirm, now, &limit);
    assert!(
        h.rate_limits
            .take(&other_user, limit.requests)
            .await
            .unwrap()
    );
    let next = RateWindow::at(&u, LimitedRoute::Confirm, w.ends_at, &limit);
    assert_ne!(next.start, w.start);
    for _ in 0..limit.requests {
        assert!(h.rate_limits.take(&next, limit.requests).await.unwrap());
    }
    assert!(!h.rate_limits.take(&next, limit.requests).await.unwrap());
}

/// Many concurrent requests of one user in one window: exactly `limit` are counted.
pub async fn concurrent_takes_of_one_window_never_pass_the_limit(h: &Harness) {
    use seatgate::domain::{LimitedRoute, RateWindow};
    let limit = seatgate::domain::RateLimit {
        requests: 7,
        window: Duration::from_secs(60),
    };
    let u = new_user();
    let w = RateWindow::at(&u, LimitedRoute::Wait, h.now(), &limit);
    let takes = (0..40).map(|_| {
        let (store, w) = (h.rate_limits.clone(), w.clone());
        tokio::spawn(async move {
            // Conflicts are the caller's to retry, as `with_retry` does in the service.
            loop {
                match store.take(&w, limit.requests).await {
                    Err(e) if e.is_retryable() => continue,
                    other => return other.unwrap(),
                }
            }
        })
    });
    let mut taken = 0;
    for t in takes {
        taken += u32::from(t.await.unwrap());
    }
    assert_eq!(taken, limit.requests);
}

/// One holder at a time: a second taker is refused while the lease runs, takes it once it has
/// ended or was released, and a release by a holder that lost the lease leaves the new one.
/// Ten takers at once: exactly one wins.
pub async fn an_operator_lease_has_one_holder_until_it_ends_or_is_released(h: &Harness) {
    let name = format!("lease-{}", uuid::Uuid::new_v4());
    let now = h.now();
    let until = now.plus(Duration::from_secs(60));
    assert!(h.leases.take_lease(&name, "a", now, until).await.unwrap());
    assert!(
        !h.leases.take_lease(&name, "b", now, until).await.unwrap(),
        "held by a"
    );
    assert!(
        !h.leases
            .take_lease(&name, "a", now.plus(Duration::from_secs(59)), until)
            .await
            .unwrap(),
        "a lease is not taken twice, even by its holder"
    );
    h.leases.release_lease(&name, "b").await.unwrap();
    assert!(
        !h.leases.take_lease(&name, "b", now, until).await.unwrap(),
        "a release by another holder leaves the lease"
    );
    h.leases.release_lease(&name, "a").await.unwrap();
    assert!(h.leases.take_lease(&name, "b", now, until).await.unwrap());

    // b's lease ends; c takes it over, and b's late release leaves c's.
    let later = until;
    let c_until = later.plus(Duration::from_secs(60));
    assert!(
        h.leases
            .take_lease(&name, "c", later, c_until)
            .await
            .unwrap()
    );
    h.leases.release_lease(&name, "b").await.unwrap();
    assert!(
        !h.leases
            .take_lease(&name, "d", later, c_until)
            .await
            .unwrap()
    );

    let other = format!("lease-{}", uuid::Uuid::new_v4());
    let takes = (0..10).map(|i| {
        let leases = h.leases.clone();
        let other = other.clone();
        async move {
            leases
                .take_lease(&other, &format!("t{i}"), now, until)
                .await
                .unwrap()
        }
    });
    let won = futures::future::join_all(takes).await;
    assert_eq!(won.iter().filter(|w| **w).count(), 1, "{won:?}");
}
