//! Fault injection, built into the backend: the store and queue failures a simulator must be
//! able to cause on demand, and a seeded mode that causes them at a given rate.
//!
//! The failures are the ones DynamoDB and SQS have, by where they strike:
//! - [`FaultKind::Refuse`]: the call fails *before* it is applied (throttling, a transaction
//!   conflict, an unreachable endpoint): nothing was written, the caller may retry;
//! - [`FaultKind::LoseAnswer`]: the call is applied, then its answer is lost (a timeout after the
//!   commit): the caller hears an error although the write happened, the case every
//!   "settle by reading, never write again" rule of seatgate exists for;
//! - [`FaultKind::Replay`]: the call is applied, its answer lost and the request sent again, as
//!   the SDK's own retry does; the caller hears the second answer (for a conditional write that
//!   committed the first time: a refusal showing its own result).
//!
//! `testkit`'s `FaultyStore` wraps a backend to the same effect; here the plan lives inside the
//! backend, next to the state, so a fault is decided and applied in the same call, and so the
//! seeded mode draws from one generator in call order: with a deterministic caller, a seed
//! names one history. The generator is SplitMix64, written out here rather than borrowed from
//! `rand`, whose generators may change their streams between versions: a seed must keep
//! meaning the same run.

use seatgate::domain::Millis;
use seatgate::ports::{
    BookRefusal, CancelBookingRefusal, ConfirmError, QueueError, StoreError, TransitionError,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A port method of the backend: what a fault is armed for, and the name the write log uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    PutAction,
    GetAction,
    Confirm,
    RegisterWait,
    GetIntent,
    Intents,
    OpenOnSeat,
    GetConsent,
    History,
    Transition,
    DueIntents,
    Suppression,
    LastTaken,
    SeatClaim,
    PutCredential,
    Credential,
    ReadingEntry,
    ReadingEntries,
    LeaseRefresh,
    RecordReading,
    RecordReadFailure,
    Breaker,
    SwapBreaker,
    UpstreamPauses,
    UpstreamPause,
    CreateFlight,
    Inventory,
    Book,
    MarkSoldOut,
    BookingsOf,
    CancelBooking,
    BeginRequest,
    FinishRequest,
    AbandonRequest,
    TakeRate,
    TakeLease,
    ReleaseLease,
    SeatSend,
    SeatReceive,
    SeatDelete,
    SeatHandBack,
    EventEnqueue,
    EventReceive,
    EventDelete,
    EventHandBack,
    QueueDepths,
    Redrive,
    FetchChanges,
    AckChanges,
    FailChange,
    CreateCheckoutHold,
    CheckoutHold,
    ResolveHold,
    HoldsOf,
    FlightHolds,
    DueHolds,
    JoinWaitlist,
    WaitEntry,
    WaitingAhead,
    LeaveWaitlist,
    WaitlistSummary,
}

impl Op {
    /// Every operation, in declaration order.
    pub const ALL: [Op; 61] = [
        Op::PutAction,
        Op::GetAction,
        Op::Confirm,
        Op::RegisterWait,
        Op::GetIntent,
        Op::Intents,
        Op::OpenOnSeat,
        Op::GetConsent,
        Op::History,
        Op::Transition,
        Op::DueIntents,
        Op::Suppression,
        Op::LastTaken,
        Op::SeatClaim,
        Op::PutCredential,
        Op::Credential,
        Op::ReadingEntry,
        Op::ReadingEntries,
        Op::LeaseRefresh,
        Op::RecordReading,
        Op::RecordReadFailure,
        Op::Breaker,
        Op::SwapBreaker,
        Op::UpstreamPauses,
        Op::UpstreamPause,
        Op::CreateFlight,
        Op::Inventory,
        Op::Book,
        Op::MarkSoldOut,
        Op::BookingsOf,
        Op::CancelBooking,
        Op::BeginRequest,
        Op::FinishRequest,
        Op::AbandonRequest,
        Op::TakeRate,
        Op::TakeLease,
        Op::ReleaseLease,
        Op::SeatSend,
        Op::SeatReceive,
        Op::SeatDelete,
        Op::SeatHandBack,
        Op::EventEnqueue,
        Op::EventReceive,
        Op::EventDelete,
        Op::EventHandBack,
        Op::QueueDepths,
        Op::Redrive,
        Op::FetchChanges,
        Op::AckChanges,
        Op::FailChange,
        Op::CreateCheckoutHold,
        Op::CheckoutHold,
        Op::ResolveHold,
        Op::HoldsOf,
        Op::FlightHolds,
        Op::DueHolds,
        Op::JoinWaitlist,
        Op::WaitEntry,
        Op::WaitingAhead,
        Op::LeaveWaitlist,
        Op::WaitlistSummary,
    ];

    /// The name the write log and fault records use.
    pub fn name(self) -> &'static str {
        match self {
            Op::PutAction => "put_action",
            Op::GetAction => "get_action",
            Op::Confirm => "confirm",
            Op::RegisterWait => "register_wait",
            Op::GetIntent => "get_intent",
            Op::Intents => "intents",
            Op::OpenOnSeat => "open_on_seat",
            Op::GetConsent => "get_consent",
            Op::History => "history",
            Op::Transition => "transition",
            Op::DueIntents => "due_intents",
            Op::Suppression => "suppression",
            Op::LastTaken => "last_taken",
            Op::SeatClaim => "seat_claim",
            Op::PutCredential => "put_credential",
            Op::Credential => "credential",
            Op::ReadingEntry => "reading_entry",
            Op::ReadingEntries => "reading_entries",
            Op::LeaseRefresh => "lease_refresh",
            Op::RecordReading => "record_reading",
            Op::RecordReadFailure => "record_read_failure",
            Op::Breaker => "breaker",
            Op::SwapBreaker => "swap_breaker",
            Op::UpstreamPauses => "upstream_pauses",
            Op::UpstreamPause => "upstream_pause",
            Op::CreateFlight => "create_flight",
            Op::Inventory => "inventory",
            Op::Book => "book",
            Op::MarkSoldOut => "mark_sold_out",
            Op::BookingsOf => "bookings_of",
            Op::CancelBooking => "cancel_booking",
            Op::BeginRequest => "begin_request",
            Op::FinishRequest => "finish_request",
            Op::AbandonRequest => "abandon_request",
            Op::TakeRate => "take_rate",
            Op::TakeLease => "take_lease",
            Op::ReleaseLease => "release_lease",
            Op::SeatSend => "seat_send",
            Op::SeatReceive => "seat_receive",
            Op::SeatDelete => "seat_delete",
            Op::SeatHandBack => "seat_hand_back",
            Op::EventEnqueue => "event_enqueue",
            Op::EventReceive => "event_receive",
            Op::EventDelete => "event_delete",
            Op::EventHandBack => "event_hand_back",
            Op::QueueDepths => "queue_depths",
            Op::Redrive => "redrive",
            Op::FetchChanges => "fetch_changes",
            Op::AckChanges => "ack_changes",
            Op::FailChange => "fail_change",
            Op::CreateCheckoutHold => "create_checkout_hold",
            Op::CheckoutHold => "checkout_hold",
            Op::ResolveHold => "resolve_hold",
            Op::HoldsOf => "holds_of",
            Op::FlightHolds => "flight_holds",
            Op::DueHolds => "due_holds",
            Op::JoinWaitlist => "join_waitlist",
            Op::WaitEntry => "wait_entry",
            Op::WaitingAhead => "waiting_ahead",
            Op::LeaveWaitlist => "leave_waitlist",
            Op::WaitlistSummary => "waitlist_summary",
        }
    }

    /// Whether the operation may change state (every other one only reads). A queue receive
    /// writes: it takes messages in flight.
    pub fn is_write(self) -> bool {
        !matches!(
            self,
            Op::GetAction
                | Op::GetIntent
                | Op::Intents
                | Op::OpenOnSeat
                | Op::GetConsent
                | Op::History
                | Op::DueIntents
                | Op::Suppression
                | Op::SeatClaim
                | Op::Credential
                | Op::ReadingEntry
                | Op::ReadingEntries
                | Op::Breaker
                | Op::UpstreamPauses
                | Op::Inventory
                | Op::BookingsOf
                | Op::CheckoutHold
                | Op::HoldsOf
                | Op::FlightHolds
                | Op::DueHolds
                | Op::WaitEntry
                | Op::WaitingAhead
                | Op::WaitlistSummary
                | Op::QueueDepths
                | Op::FetchChanges
        )
    }

    /// Every operation that may change state.
    pub fn writes() -> BTreeSet<Op> {
        Op::ALL.into_iter().filter(|o| o.is_write()).collect()
    }
}

/// How a fault bends a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultKind {
    /// Fails with this error without applying anything (throttling, a conflict).
    Refuse(StoreError),
    /// Applies the call, then answers this error instead of its result (a timeout after the
    /// write committed: the caller cannot know it happened).
    LoseAnswer(StoreError),
    /// Applies the call, loses its answer and runs it again; the caller hears the second answer.
    Replay,
}

impl FaultKind {
    /// DynamoDB throttling: nothing written, retry.
    pub fn throttled() -> Self {
        FaultKind::Refuse(StoreError::Throttled)
    }

    /// A `TransactionConflict`: nothing written, retry.
    pub fn conflict() -> Self {
        FaultKind::Refuse(StoreError::TransactionConflict)
    }

    /// A timeout after the write was applied.
    pub fn answer_lost() -> Self {
        FaultKind::LoseAnswer(StoreError::Unavailable(
            "timed out (injected: the write was applied)".into(),
        ))
    }

    /// Whether the call it bends is applied.
    pub fn applies(&self) -> bool {
        !matches!(self, FaultKind::Refuse(_))
    }
}

/// One armed fault: the next `times` calls of `op` (of any operation if `None`) fail as `kind`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub op: Option<Op>,
    pub kind: FaultKind,
    pub times: u32,
}

/// The seeded mode: each call of one of `ops` (every operation if empty) fails with probability
/// `rate`, as one of `kinds` chosen uniformly. Reproducible: the same seed and the same calls in
/// the same order fail the same calls the same way.
#[derive(Debug, Clone, PartialEq)]
pub struct Chaos {
    pub seed: u64,
    /// The fraction of matching calls failed, 0.0 to 1.0.
    pub rate: f64,
    pub ops: BTreeSet<Op>,
    pub kinds: Vec<FaultKind>,
}

impl Chaos {
    /// A fraction `rate` of every write fails, throttled, conflicted or with its answer lost.
    pub fn writes(seed: u64, rate: f64) -> Self {
        Chaos {
            seed,
            rate,
            ops: Op::writes(),
            kinds: vec![
                FaultKind::throttled(),
                FaultKind::conflict(),
                FaultKind::answer_lost(),
            ],
        }
    }
}

/// A fault that struck: which call (its number among all calls to the backend, from 1), of
/// which operation, how, and when (the backend's clock: a checker excuses a delay a fault
/// explains only by its time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Injected {
    pub call: u64,
    pub op: Op,
    pub kind: FaultKind,
    pub at: Millis,
}

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast and fully specified by its seed.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), from the top 53 bits.
    pub(crate) fn next_unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The backend's fault plan: armed faults (consumed in the order armed), the seeded mode, and
/// what struck so far.
#[derive(Debug, Default)]
pub(crate) struct FaultPlan {
    armed: VecDeque<Fault>,
    chaos: Option<(Chaos, SplitMix64)>,
    calls: u64,
    calls_of: BTreeMap<Op, u64>,
    injected: Vec<Injected>,
}

impl FaultPlan {
    pub(crate) fn arm(&mut self, fault: Fault) {
        if fault.times > 0 {
            self.armed.push_back(fault);
        }
    }

    pub(crate) fn set_chaos(&mut self, chaos: Option<Chaos>) {
        self.chaos = chaos.map(|c| {
            let rng = SplitMix64::new(c.seed);
            (c, rng)
        });
    }

    /// Drops every armed fault and the seeded mode.
    pub(crate) fn heal(&mut self) {
        self.armed.clear();
        self.chaos = None;
    }

    pub(crate) fn injected(&self) -> &[Injected] {
        &self.injected
    }

    pub(crate) fn calls_of(&self, op: Op) -> u64 {
        self.calls_of.get(&op).copied().unwrap_or(0)
    }

    /// Counts the call and decides its fault: the first armed fault that matches, else the
    /// seeded mode's draw. The seeded mode draws for every call it covers, failed or not, so
    /// which calls fail depends on the seed and the call sequence only.
    pub(crate) fn take(&mut self, op: Op, at: Millis) -> Option<FaultKind> {
        self.calls += 1;
        *self.calls_of.entry(op).or_default() += 1;
        let kind = self.take_armed(op).or_else(|| self.draw(op))?;
        self.injected.push(Injected {
            call: self.calls,
            op,
            kind: kind.clone(),
            at,
        });
        Some(kind)
    }

    fn take_armed(&mut self, op: Op) -> Option<FaultKind> {
        let i = self
            .armed
            .iter()
            .position(|f| f.op.is_none_or(|o| o == op))?;
        let fault = &mut self.armed[i];
        let kind = fault.kind.clone();
        fault.times -= 1;
        if fault.times == 0 {
            self.armed.remove(i);
        }
        Some(kind)
    }

    fn draw(&mut self, op: Op) -> Option<FaultKind> {
        let (chaos, rng) = self.chaos.as_mut()?;
        if !(chaos.ops.is_empty() || chaos.ops.contains(&op)) || chaos.kinds.is_empty() {
            return None;
        }
        if rng.next_unit() >= chaos.rate {
            return None;
        }
        let i = (rng.next_u64() % chaos.kinds.len() as u64) as usize;
        Some(chaos.kinds[i].clone())
    }
}

/// The errors a port method can answer with, each able to carry an injected store failure.
/// (A blanket impl over `From<StoreError>` would not cover `QueueError`, which has no such
/// conversion; this trait is the one place that says how each error type carries a fault.)
pub(crate) trait Injectable {
    fn injected(error: StoreError) -> Self;
}

impl Injectable for StoreError {
    fn injected(error: StoreError) -> Self {
        error
    }
}

impl Injectable for ConfirmError {
    fn injected(error: StoreError) -> Self {
        ConfirmError::Store(error)
    }
}

impl Injectable for TransitionError {
    fn injected(error: StoreError) -> Self {
        TransitionError::Store(error)
    }
}

impl Injectable for BookRefusal {
    fn injected(error: StoreError) -> Self {
        BookRefusal::Store(error)
    }
}

impl Injectable for seatgate::ports::CreateHoldRefusal {
    fn injected(error: StoreError) -> Self {
        seatgate::ports::CreateHoldRefusal::Store(error)
    }
}

impl Injectable for seatgate::ports::ResolveHoldError {
    fn injected(error: StoreError) -> Self {
        seatgate::ports::ResolveHoldError::Store(error)
    }
}

impl Injectable for seatgate::ports::WaitlistError {
    fn injected(e: StoreError) -> Self {
        Self::Store(e)
    }
}

impl Injectable for CancelBookingRefusal {
    fn injected(error: StoreError) -> Self {
        CancelBookingRefusal::Store(error)
    }
}

impl Injectable for QueueError {
    /// SQS has no transaction conflicts: a retryable store failure is its throttling.
    fn injected(error: StoreError) -> Self {
        match error {
            StoreError::Throttled | StoreError::TransactionConflict => QueueError::Throttled,
            StoreError::Unavailable(m) | StoreError::Corrupt(m) => QueueError::Unavailable(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_its_reference_values() {
        // The reference implementation's first outputs for seed 0 (Vigna's splitmix64.c).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(r.next_u64(), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn armed_faults_are_consumed_in_order_and_only_by_their_op() {
        let mut plan = FaultPlan::default();
        plan.arm(Fault {
            op: Some(Op::Book),
            kind: FaultKind::throttled(),
            times: 2,
        });
        plan.arm(Fault {
            op: None,
            kind: FaultKind::conflict(),
            times: 1,
        });
        assert_eq!(
            plan.take(Op::GetIntent, Millis(0)),
            Some(FaultKind::conflict())
        );
        assert_eq!(plan.take(Op::GetIntent, Millis(0)), None);
        assert_eq!(plan.take(Op::Book, Millis(0)), Some(FaultKind::throttled()));
        assert_eq!(plan.take(Op::Book, Millis(0)), Some(FaultKind::throttled()));
        assert_eq!(plan.take(Op::Book, Millis(0)), None);
        assert_eq!(plan.calls_of(Op::Book), 3);
        assert_eq!(
            plan.injected().iter().map(|i| i.call).collect::<Vec<_>>(),
            vec![1, 3, 4]
        );
    }

    #[test]
    fn the_seeded_mode_fails_about_its_rate_of_the_chosen_ops_only() {
        let mut plan = FaultPlan::default();
        plan.set_chaos(Some(Chaos::writes(7, 0.25)));
        let failed = (0..4_000)
            .filter(|_| plan.take(Op::Book, Millis(0)).is_some())
            .count();
        assert!((800..1_200).contains(&failed), "{failed} of 4000 at 25%");
        assert!((0..1_000).all(|_| plan.take(Op::GetIntent, Millis(0)).is_none()));
    }
}
