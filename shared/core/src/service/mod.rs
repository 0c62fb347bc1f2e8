//! The use cases, written once against the ports and run unchanged by the Lambda functions and
//! the local runner: the API (prepare, confirm, wait, read, cancel), the relay (outbox -> queue
//! and subscribers), the worker (one upstream write per seat) and the reaper (expired leases,
//! due waits, lost messages).

pub mod admin;
pub mod api;
pub mod breaker;
pub mod cache;
pub mod checkout;
pub mod delivery;
pub mod flights;
mod known_flights;
pub mod rate_limit;
pub mod reads;
pub mod reaper;
pub mod relay;
pub mod waitlist;
pub mod worker;

pub use admin::AdminService;
pub use api::ApiService;
pub use breaker::{Breaker, GuardedUpstream, Permit};
pub use checkout::CheckoutService;
pub use delivery::{Deliverer, EventRecord};
pub use flights::FlightService;
pub use rate_limit::{AdmitError, RateLimiter};
pub use reads::{SeatReadError, SeatReads, Served};
pub use reaper::{Reaper, ReaperReport};
pub use relay::{Relay, RelayError};
pub use waitlist::WaitlistService;
pub use worker::{QueueRecord, Worker};

use crate::adapters::entropy::{OsRandom, UuidV7};
use crate::backoff::Backoff;
use crate::config::Timing;
use crate::ports::{
    Actions, BreakerStates, Clock, Credentials, EventQueue, Flights, HandBack, Ids, Intents,
    OperatorLeases, QueueAdmin, Random, RateLimits, Readings, ReaperPass, SeatQueue, StoreError,
    Subscribers, Upstream, WakeUps,
};
pub use cache::CacheKind;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// The ports one deployment's services share. Cheap to clone (every field is an `Arc`).
#[derive(Clone)]
pub struct Ports {
    pub actions: Arc<dyn Actions>,
    pub intents: Arc<dyn Intents>,
    pub credentials: Arc<dyn Credentials>,
    pub flights: Arc<dyn Flights>,
    pub holds: Arc<dyn crate::ports::CheckoutHolds>,
    pub waitlist: Arc<dyn crate::ports::WaitingLists>,
    /// The shared half of the seat-read cache.
    pub readings: Arc<dyn Readings>,
    /// The circuit breaker's shared state.
    pub breaker: Arc<dyn BreakerStates>,
    /// The per-user rate limit's counters.
    pub rate_limits: Arc<dyn RateLimits>,
    /// Leases that keep an operator action from running twice at once.
    pub leases: Arc<dyn OperatorLeases>,
    /// The upstream itself; the services reach it only through the breaker.
    pub upstream: Arc<dyn Upstream>,
    pub clock: Arc<dyn Clock>,
    /// Randomness (shard starts, jitter): the OS in production, a seed in a simulation.
    pub random: Arc<dyn Random>,
    /// New ids (actions, intents, bookings, tokens, holder names): UUIDv7 in production.
    pub ids: Arc<dyn Ids>,
    /// The in-process caches' implementation: moka in production.
    pub cache: CacheKind,
    /// Where the worker hands back messages it must not process yet; without it they return
    /// after the queue's visibility timeout.
    pub hand_back: Option<Arc<dyn HandBack>>,
    /// The queues' depths and dead-letter redrive, for the admin routes; without it they
    /// answer that the queues are not reachable from here.
    pub queue_admin: Option<Arc<dyn QueueAdmin>>,
    /// Where an on-demand reaper pass runs; without it, in this process.
    pub reaper_pass: Option<Arc<dyn ReaperPass>>,
    /// Where the breaker asks for a reaper run at its next probe, a pause's end, or when a
    /// probe found the upstream back; without it, parked intents wait for the schedule.
    pub wake_ups: Option<Arc<dyn WakeUps>>,
}

impl Ports {
    /// Every store port from one value that implements them all (the DynamoDB store, the
    /// embedded backend, a fault-injecting wrapper of either).
    pub fn from_store<S>(store: Arc<S>, upstream: Arc<dyn Upstream>, clock: Arc<dyn Clock>) -> Self
    where
        S: crate::ports::Store + 'static,
    {
        Ports {
            actions: store.clone(),
            intents: store.clone(),
            credentials: store.clone(),
            flights: store.clone(),
            holds: store.clone(),
            waitlist: store.clone(),
            readings: store.clone(),
            breaker: store.clone(),
            rate_limits: store.clone(),
            leases: store,
            upstream,
            clock,
            random: Arc::new(OsRandom),
            ids: Arc::new(UuidV7),
            cache: CacheKind::Moka,
            hand_back: None,
            queue_admin: None,
            reaper_pass: None,
            wake_ups: None,
        }
    }

    /// The same ports, with everything a run could otherwise take from outside itself made
    /// deterministic: seeded randomness and ids, and the ordered cache on the injected clock.
    pub fn with_determinism(mut self, random: Arc<dyn Random>, ids: Arc<dyn Ids>) -> Self {
        self.random = random;
        self.ids = ids;
        self.cache = CacheKind::Ordered;
        self
    }

    /// The same ports, with the seat queue's hand-back.
    pub fn with_hand_back(mut self, hand_back: Arc<dyn HandBack>) -> Self {
        self.hand_back = Some(hand_back);
        self
    }

    /// The same ports, with the queues' admin (depths, redrive).
    pub fn with_queue_admin(mut self, queues: Arc<dyn QueueAdmin>) -> Self {
        self.queue_admin = Some(queues);
        self
    }

    /// The same ports, with the breaker's wake-ups of the reaper.
    pub fn with_wake_ups(mut self, wake_ups: Arc<dyn WakeUps>) -> Self {
        self.wake_ups = Some(wake_ups);
        self
    }

    /// The same ports, with on-demand reaper passes run elsewhere (the reaper function).
    pub fn with_reaper_pass(mut self, pass: Arc<dyn ReaperPass>) -> Self {
        self.reaper_pass = Some(pass);
        self
    }
}

/// The use cases wired once: the Lambda wiring, the local runner and the tests all build their
/// services here, so a new port or timing value is threaded through in one place. The breaker
/// and the seat-read cache are built here too, once per instance, and every service built from
/// one `Services` shares them.
#[derive(Clone)]
pub struct Services {
    ports: Ports,
    timing: Timing,
    limiter: RateLimiter,
    upstream: Arc<GuardedUpstream>,
    reads: Arc<SeatReads>,
    flights: Arc<FlightService>,
    checkout: Arc<CheckoutService>,
    waitlist: Arc<WaitlistService>,
}

impl Services {
    pub fn new(ports: Ports, timing: Timing) -> Self {
        // One name per instance for its leases (probe, refresh), from the injected ids.
        let holder = format!("i-{}", ports.ids.next_uuid().simple());
        let breaker = Arc::new(
            Breaker::new(
                ports.breaker.clone(),
                ports.clock.clone(),
                ports.random.clone(),
                holder.clone(),
                &timing,
            )
            .with_wake_ups(ports.wake_ups.clone()),
        );
        let upstream = Arc::new(
            GuardedUpstream::new(ports.upstream.clone(), breaker, ports.clock.clone())
                .with_readings(ports.readings.clone()),
        );
        let reads = Arc::new(SeatReads::new(&ports, upstream.clone(), holder, &timing));
        let limiter = RateLimiter::new(
            ports.rate_limits.clone(),
            ports.clock.clone(),
            ports.random.clone(),
            crate::domain::RateLimit::of(&timing),
        );
        // One cache of flights per instance, shared by the sale, checkout and the waiting list.
        let known = known_flights::KnownFlights::new(&ports, &timing);
        let flights = Arc::new(FlightService::new(&ports, limiter.clone(), known.clone()));
        let checkout = Arc::new(CheckoutService::new(&ports, known.clone()));
        let waitlist = Arc::new(WaitlistService::new(&ports, limiter.clone(), known));
        Services {
            ports,
            timing,
            upstream,
            reads,
            flights,
            checkout,
            waitlist,
            limiter,
        }
    }

    /// The upstream behind this instance's breaker.
    pub fn upstream(&self) -> &Arc<GuardedUpstream> {
        &self.upstream
    }

    /// The sale: flights, bookings, cancels and making checkout holds (one per instance, with
    /// its sold-out cache).
    pub fn flights(&self) -> &Arc<FlightService> {
        &self.flights
    }

    /// Checkout holds once made: read, confirm, release, extend, lapse.
    pub fn checkout(&self) -> &Arc<CheckoutService> {
        &self.checkout
    }

    /// The flights' waiting lists.
    pub fn waitlist(&self) -> &Arc<WaitlistService> {
        &self.waitlist
    }

    /// This instance's seat-read cache.
    pub fn reads(&self) -> &Arc<SeatReads> {
        &self.reads
    }

    pub fn ports(&self) -> &Ports {
        &self.ports
    }

    pub fn timing(&self) -> &Timing {
        &self.timing
    }

    pub fn api(&self) -> ApiService {
        ApiService::new(self, Arc::new(AdminService::new(self)))
    }

    pub fn worker(&self) -> Worker {
        Worker::new(self, &self.timing)
    }

    pub fn reaper(&self) -> Reaper {
        Reaper::new(self, &self.timing)
    }

    /// The relay also needs the seat queue it feeds and the event queue of terminal events,
    /// which only the relay's deployment has.
    pub fn relay(&self, queue: Arc<dyn SeatQueue>, events: Arc<dyn EventQueue>) -> Relay {
        Relay::new(queue, events, self.ports.clock.clone())
    }

    /// The delivery consumer: the subscribers it posts to, and the event queue's hand-back for
    /// retrying after a backoff.
    pub fn deliverer(
        &self,
        subscribers: Arc<dyn Subscribers>,
        hand_back: Option<Arc<dyn HandBack>>,
    ) -> Deliverer {
        Deliverer::new(subscribers, hand_back, &self.timing)
    }
}

/// Retries a store call that failed with a retryable error (throttling, transaction conflict).
///
/// Safe for conditional writes: both errors mean the write did not happen, and a repeated
/// conditional write cannot apply twice. Other errors are returned at once: a timeout may hide a
/// write that did happen, and the caller's state machine (leases, the reaper) deals with that.
///
/// The backoff's jitter is drawn from `random`, the services' injected source.
pub(crate) async fn with_retry<T, E, F, Fut>(random: &dyn Random, mut call: F) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: AsStoreError,
{
    const ATTEMPTS: u32 = 4;
    const BACKOFF: Backoff = Backoff::new(Duration::from_millis(10), Duration::from_millis(80));
    let mut attempt = 1;
    loop {
        match call().await {
            Err(e)
                if attempt < ATTEMPTS && e.store_error().is_some_and(StoreError::is_retryable) =>
            {
                tokio::time::sleep(BACKOFF.delay_with_jitter(attempt, |max| random.up_to(max)))
                    .await;
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// Errors that may wrap a [`StoreError`], so [`with_retry`] can tell whether to try again.
pub(crate) trait AsStoreError {
    fn store_error(&self) -> Option<&StoreError>;
}

impl AsStoreError for StoreError {
    fn store_error(&self) -> Option<&StoreError> {
        Some(self)
    }
}

impl AsStoreError for crate::ports::TransitionError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            crate::ports::TransitionError::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl AsStoreError for crate::ports::CreateHoldRefusal {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            crate::ports::CreateHoldRefusal::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl AsStoreError for crate::ports::BookRefusal {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            crate::ports::BookRefusal::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl AsStoreError for crate::ports::ConfirmError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            crate::ports::ConfirmError::Store(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    /// The runner spawns these on a multi-threaded runtime: their futures must be `Send`.
    #[allow(dead_code)]
    fn service_futures_are_send(
        relay: &super::Relay,
        reaper: &super::Reaper,
        worker: &super::Worker,
        changes: &[crate::domain::Change],
        records: &[super::QueueRecord],
    ) {
        fn send<T: Send>(_: T) {}
        send(relay.handle(changes));
        send(reaper.run_once(1));
        send(worker.handle_batch(records));
    }
}
