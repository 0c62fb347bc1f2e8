//! Ports: the capabilities the services need, as small traits.
//!
//! Every store method is one DynamoDB request: a conditional `PutItem`/`UpdateItem`, one
//! `TransactWriteItems`, a `GetItem` or a `Query`. That shape is the contract: an adapter may not
//! implement a write as "read, decide, write" across requests, because two workers interleaving
//! there is exactly the double-reservation this system exists to prevent. (The embedded adapter
//! may read and write inside one SQLite transaction, which is atomic in the same way.)
//!
//! Each method's doc says which errors an implementation must return; the contract suite in
//! `seatgate_testkit::contract` checks them for every adapter.
//!
//! One file per capability; every port is re-exported here, so a path is `seatgate::ports::X`
//! whichever file holds it.

mod checkout;
mod events;
mod flights;
mod intents;
mod operations;
mod queues;
mod rate_limits;
mod readings;
mod runtime;
mod store;
mod upstream;
mod waitlist;
mod wake_ups;

pub use checkout::{CheckoutHolds, CreateHoldRefusal, ResolveHoldError};
pub use events::{EventQueue, PublishError, Subscribers};
pub use flights::{Begun, BookRefusal, CancelBookingRefusal, Flights};
pub use intents::{
    Actions, ConfirmError, ConfirmRefusal, Confirmation, Credentials, Intents, TransitionError,
};
pub use operations::{
    OperatorLeases, QueueAdmin, QueueDepth, QueueDepths, ReaperPass, ReaperPassError, ReaperReport,
    Redriven,
};
pub use queues::{Delivery, HandBack, QueueConsumer, QueueError, SeatQueue};
pub use rate_limits::RateLimits;
pub use readings::{BreakerStates, MAX_BATCH_READ, Readings, within_batch_read};
pub use runtime::{Clock, Ids, Random};
pub use store::{Store, StoreError};
pub use upstream::{CallFailure, Charge, ChargeReadError, ReadError, ReserveOutcome, Upstream};
pub use waitlist::{WaitingLists, WaitlistError, WaitlistSummary};
pub use wake_ups::{MAX_WAKE_DELAY, WakeUps};
