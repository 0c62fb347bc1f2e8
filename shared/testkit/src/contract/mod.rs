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
//!
//! One file per port (and one for the fixtures they share); every case is re-exported here, where
//! the macros name it.

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
    pub holds: Arc<dyn seatgate::ports::CheckoutHolds>,
    pub waitlist: Arc<dyn seatgate::ports::WaitingLists>,
    pub rate_limits: Arc<dyn seatgate::ports::RateLimits>,
    pub leases: Arc<dyn seatgate::ports::OperatorLeases>,
    /// `None` for a store-only backend; queue cases then fail saying so, never skip.
    pub queue: Option<QueuePorts>,
    /// The clock the backend reads (the queue's visibility, the outbox); cases advance it.
    pub clock: Arc<ManualClock>,
    pub queue_limits: QueueLimits,
    /// Holders in the concurrent-holders case (on a flight of half as many seats).
    pub holders: u32,
    /// The backend's outbox, read back; `None` until [`Harness::with_changes`], and the cases
    /// that need it then fail saying so, never skip.
    pub changes: Option<Arc<dyn ChangeLog>>,
}

/// A backend's outbox as a case reads it back: every change recorded so far (intent and hold
/// records alike; a case keeps its own by their ids), each item's records in commit order. A
/// store's outbox has no port (only the relay's edge reads it), so each backend's test file
/// implements this over its own source: the memory feed, the embedded outbox table, the
/// DynamoDB table's stream.
#[async_trait::async_trait]
pub trait ChangeLog: Send + Sync {
    async fn recorded(&self) -> Vec<seatgate::domain::Change>;
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
            holds: store.clone(),
            waitlist: store.clone(),
            rate_limits: store.clone(),
            leases: store,
            queue: None,
            clock,
            holders: 2_000,
            changes: None,
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

    /// The same harness, reading its backend's outbox through `log`.
    pub fn with_changes(mut self, log: Arc<dyn ChangeLog>) -> Self {
        self.changes = Some(log);
        self
    }

    /// The same harness with `holders` in the concurrent-holders case (an emulator that applies
    /// transactions one at a time takes fewer in the suite's time).
    pub fn with_holders(mut self, holders: u32) -> Self {
        self.holders = holders;
        self
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
            a_claim_keeps_its_seat_until_a_settlement_releases_it,
            a_claim_on_a_seat_another_intent_claimed_is_refused,
            claims_and_settlements_must_name_the_intents_seat,
            release_puts_an_attempt_back_in_line_and_frees_the_seat,
            the_open_index_holds_a_seats_requested_intents_and_nothing_else,
            a_batch_read_returns_the_stored_intents_and_leaves_unknown_ids_out,
            a_refresh_lease_goes_to_one_holder_until_a_reading_or_its_end,
            only_a_newer_reading_is_recorded_and_batches_read_what_exists,
            the_breaker_changes_only_over_the_generation_it_was_decided_on,
            a_pause_only_moves_later_and_for_its_route_alone,
            a_failed_refresh_keeps_everyone_off_the_key_until_it_ends_and_a_reading_clears_it,
            a_flight_is_created_once_with_its_capacity_split_over_its_shards,
            a_booking_takes_seats_from_its_shard_only_while_it_has_them_and_a_cancel_returns_them_once,
            the_per_user_limit_is_kept_in_the_booking_transaction,
            an_idempotency_record_is_begun_once_and_keeps_its_answer,
            idempotency_records_begin_as_the_begin_rule,
            concurrent_bookings_never_oversell,
            a_hold_takes_seats_and_its_confirm_books_them_without_a_second_decrement,
            a_release_or_a_lapse_gives_the_seats_back_once_and_clears_sold_out,
            one_live_hold_per_user_and_flight_and_holds_count_against_the_limit,
            an_extension_moves_the_deadline_and_the_due_index_with_it_up_to_the_maximum,
            a_confirm_racing_its_own_lapse_applies_exactly_once,
            thousands_of_concurrent_holders_keep_the_books_exact,
            a_flights_holds_list_by_status_in_shard_then_id_order_page_by_page,
            only_a_flight_that_cannot_sell_takes_a_waiter_and_each_user_waits_once,
            returned_seats_go_to_the_first_entries_they_fit_before_any_booking,
            a_lapsed_offer_passes_to_the_next_entry_and_never_touches_the_users_own_hold,
            an_offer_is_recorded_in_the_outbox_when_made_and_when_it_lapses,
            joins_racing_returns_never_leave_a_seat_unsold_while_someone_waits,
            a_waiting_entry_counts_against_the_limit_from_its_join,
            a_rate_window_counts_to_its_limit_and_the_next_window_starts_afresh,
            a_window_stays_spent_after_the_next_one_opens,
            concurrent_takes_of_one_window_never_pass_the_limit,
            an_operator_lease_has_one_holder_until_it_ends_or_is_released,
            rate_windows_answer_as_the_counting_rule,
            leases_answer_as_the_take_rule,
            an_intents_history_pages_by_version,
            a_users_bookings_page_by_booking_id_and_stay_put_as_more_are_made,
            a_confirm_counts_in_its_rate_window_and_a_spent_window_refuses_it_unwritten,
            a_booking_counts_in_its_rate_window_and_a_spent_window_refuses_it_unwritten,
            a_transition_decides_on_the_stored_intent_whatever_copy_it_pinned,
            a_settlement_records_its_reading_unless_a_newer_one_is_there,
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

mod actions;
mod checkout;
mod credentials;
mod fixtures;
mod flights;
mod intents;
mod limits;
mod listings;
mod open;
mod queue;
mod readings;
mod reference;
mod riders;
mod seat_claims;
mod waitlist;

pub use actions::*;
pub use checkout::*;
pub use credentials::*;
pub use flights::*;
pub use intents::*;
pub use limits::*;
pub use listings::*;
pub use open::*;
pub use queue::*;
pub use readings::*;
pub use reference::*;
pub use riders::*;
pub use seat_claims::*;
pub use waitlist::*;
