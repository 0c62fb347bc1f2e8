//! The reservation domain: what an action, an intent, a lease and an outbox event are, and the
//! rules that decide how an intent may move. Nothing here knows about AWS, SQLite or HTTP; the
//! adapters translate these types to their storage shapes.

pub mod action;
pub mod breaker;
pub mod checkout;
pub mod event;
pub mod flight;
pub mod history;
pub mod ids;
pub mod intent;
pub mod lease;
pub mod page;
pub mod rate_limit;
pub mod reading;
pub mod route_pause;
pub mod secret;
pub mod time;
pub mod waitlist;

pub use action::{Action, ActionKind, ActionStatus, ConfirmDenied, ConfirmRefusal, ConsentRecord};
pub use breaker::{BreakerPhase, BreakerState, Gate};
pub use checkout::{
    CheckoutHold, CheckoutTimes, FlightHoldKey, HoldAction, HoldId, HoldRefusal, HoldStatus,
    MAX_CHECKOUT_SECS,
};
pub use event::{
    Change, ChangeRecord, Event, HoldChange, IntentChange, IntentEvent, OfferEvent, SeatMessage,
    UndecodableChange,
};
pub use flight::{
    Booking, BookingAnswer, BookingId, BookingRefusal, BookingStatus, CancelRefusal, Flight,
    FlightError, FlightId, IdempotencyKey, IdempotencyRecord, Inventory, MAX_HEAD_COUNT,
    RequestState, SEATS_PER_DEFAULT_SHARD, Taken,
};
pub use history::TransitionRecord;
pub use ids::{ActionId, IdError, IntentId, RoomId, SeatId, UserId};
pub use intent::{
    BackTo, Intent, IntentKind, IntentStatus, Outcome, Reason, SeatClaim, SeatClaimEffect,
    Suppression, Terminal, Transition, TransitionRequest,
};
pub use lease::may_take_lease;
pub use page::{Page, PageSize};
pub use rate_limit::{Admission, LimitedRoute, RateLimit, RateWindow};
pub use reading::{
    CacheEntry, ReadFailure, ReadKey, ReadValue, Reading, RefreshLease, SeatAvailability,
};
pub use route_pause::{RoutePauses, UpstreamRoute};
pub use secret::Secret;
pub use time::{CLOCK_TOLERANCE, Millis};
pub use waitlist::{EntryId, Offer, WaitEntry, WaitRefusal, WaitStatus};
