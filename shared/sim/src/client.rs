//! Clients: a user's requests through one instance's `ApiService`, the way the HTTP handler
//! calls it after the gateway's JWT check (the user id is the token's subject).
//!
//! They behave as real clients do where it matters for the guarantees: a confirm that failed
//! for the store is retried on the same action (never a new one), a booking is retried under
//! the same `Idempotency-Key`, and a client waits for its intent's outcome by polling, as the
//! HTTP contract tells clients to. Each retry and poll loop has a stated bound, and waits only
//! through `tokio::time`, so it runs on simulated time. A request that writes may have its API
//! function killed mid-call (edge crashes): the client hears a 502 and retries it as a store
//! failure, so what the killed call wrote meets its own retry.
//!
//! Answers are returned typed, and also reduced to short strings ([`Client::outcome`] and
//! friends) for a scenario's own record.

use crate::world::World;
use seatgate::domain::{
    ActionId, ActionKind, Booking, BookingAnswer, BookingId, EntryId, FlightId, HoldId,
    IdempotencyKey, Intent, IntentId, Inventory, Millis, RoomId, SeatId, TransitionRecord, UserId,
};
use seatgate::service::Served;
use seatgate::service::admin::AdminIntentError;
use seatgate::service::api::ReadSeatError;
use seatgate::service::api::{ConfirmError, WaitError};
use seatgate::service::checkout::HoldError;
use seatgate::service::flights::{BookError, CancelBookingError, ReadFlightError};
use seatgate::service::waitlist::{EntryView, WaitlistRequestError};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// Attempts of a request that failed for the store, before the client gives up on it.
pub const ATTEMPTS: u32 = 3;

/// What a client hears from a request whose API function was killed mid-call (the gateway's
/// 502).
pub const KILLED: &str = "502: the function was killed";

/// The pause between a client's retries, and its first pause polling an outcome.
pub const POLL: Duration = Duration::from_millis(100);

/// The longest pause between a client's polls of an outcome.
pub const POLL_MAX: Duration = Duration::from_secs(1);

/// Pages a listing client reads at most before it stops: a user's bookings (20 a page) or an
/// intent's history (50 a page) in the default workload never come near it, so a listing that
/// hits it is one that does not end (a cursor that leads back, a page that repeats).
pub const MAX_PAGES: usize = 10;

/// What a listing client read by following the cursor: every page's items in the order they
/// came, and whether it reached the last page (`false`: it stopped at [`MAX_PAGES`] or a page
/// failed [`ATTEMPTS`] times, and `error` says which).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed<T> {
    pub items: Vec<T>,
    pub pages: usize,
    pub complete: bool,
    pub error: Option<String>,
}

/// What a holder asks of their checkout hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldAsk {
    Confirm,
    Release,
    Extend,
}

/// What a request passes before the service sees it, on a deployed stack: the HTTP API's
/// throttle and an execution environment of the API function (`crate::aws::predict::Front`).
/// `admit` waits until the request is let in and returns what it holds while it runs.
#[async_trait::async_trait]
pub trait FrontDoor: Send + Sync {
    async fn admit(&self) -> Box<dyn Send>;
}

/// One user, talking to one instance.
#[derive(Clone)]
pub struct Client {
    world: World,
    user: UserId,
    instance: usize,
    /// Every booking or hold attempt goes through it, if set (none: straight to the service).
    front: Option<Arc<dyn FrontDoor>>,
}

impl Client {
    pub(crate) fn new(world: World, user: UserId, instance: usize) -> Self {
        Client {
            world,
            user,
            instance,
            front: None,
        }
    }

    /// This client with each booking or hold attempt let in by `front`.
    pub fn through(mut self, front: Arc<dyn FrontDoor>) -> Self {
        self.front = Some(front);
        self
    }

    pub fn user(&self) -> &UserId {
        &self.user
    }

    /// The same user on another instance.
    pub fn on(&self, instance: usize) -> Client {
        Client {
            instance,
            ..self.clone()
        }
    }

    /// Through the front door, if the client has one: what the request holds while it runs.
    async fn admitted(&self) -> Option<Box<dyn Send>> {
        match &self.front {
            Some(front) => Some(front.admit().await),
            None => None,
        }
    }

    /// The instance's current environment, held for one request.
    fn on_instance(&self) -> Arc<crate::world::Instance> {
        self.world.instance(self.instance)
    }

    /// One run of the API function on `caller` (an environment's id), answering a request that
    /// writes. While edge crashes strike ([`World::set_edge_crash_rate`]) it may be killed
    /// between two of its store calls, as a Lambda is (`seatgate_memory::kill`): what it wrote
    /// stays written, nothing after is, and the client hears a 502 ([`KILLED`]), which every
    /// caller here retries as it retries a store failure (the same action, the same key).
    async fn run<T>(&self, caller: usize, request: impl Future<Output = T>) -> Result<T, String> {
        let Some(calls) = self.world.draw_api_crash() else {
            return Ok(request.await);
        };
        let started = self.world.now();
        match seatgate_memory::kill::killed_after(calls, request).await {
            (answer, false) => Ok(answer),
            (_, true) => {
                self.world.record_kill(caller, started);
                self.world.record_edge_kill();
                self.world.after_kill(self.instance);
                Err(KILLED.to_owned())
            }
        }
    }

    /// Stores the user's upstream credential (`PUT /v1/credential`); panics if the store
    /// refuses it [`ATTEMPTS`] times (a scenario's set-up must not fail silently).
    pub async fn put_credential(&self, credential: &str) {
        let mut last = None;
        for _ in 0..ATTEMPTS {
            match self
                .on_instance()
                .api
                .put_credential(&self.user, credential)
                .await
            {
                Ok(()) => return,
                Err(e) => last = Some(e.to_string()),
            }
            tokio::time::sleep(POLL).await;
        }
        panic!("{}: the credential was not stored: {last:?}", self.user);
    }

    /// Prepares a reserve of `seat` and confirms it: the intent, or why not. A store failure is
    /// retried on the same action, at most [`ATTEMPTS`] times each.
    pub async fn reserve(&self, seat: &SeatId) -> Result<Intent, String> {
        let mut prepared = None;
        for _ in 0..ATTEMPTS {
            let admitted = self.admitted().await;
            let instance = self.on_instance();
            let answer = self
                .run(
                    instance.caller,
                    instance
                        .api
                        .prepare(&self.user, ActionKind::ReserveSeat, seat.clone()),
                )
                .await;
            drop(admitted);
            match answer {
                Ok(Ok(action)) => {
                    prepared = Some(action.action_id);
                    break;
                }
                // Only the store (or a kill) can fail a prepare; try again after a pause.
                _ => tokio::time::sleep(POLL).await,
            }
        }
        let action = prepared.ok_or_else(|| "prepare failed".to_owned())?;
        self.confirm(&action).await
    }

    /// Confirms a prepared action, retrying a store failure on the same action (at most
    /// [`ATTEMPTS`] times); a rate limit is waited out (it counts as an attempt).
    pub async fn confirm(&self, action: &ActionId) -> Result<Intent, String> {
        let mut last = String::new();
        for _ in 0..ATTEMPTS {
            let admitted = self.admitted().await;
            let instance = self.on_instance();
            let answer = self
                .run(instance.caller, instance.api.confirm(&self.user, action))
                .await;
            drop(admitted);
            match answer {
                Ok(Ok(confirmed)) => return Ok(confirmed.intent),
                Ok(Err(ConfirmError::RateLimited(after))) => {
                    last = "rate_limited".into();
                    tokio::time::sleep(after).await;
                }
                Ok(Err(ConfirmError::Store(e))) => {
                    last = format!("store: {e}");
                    tokio::time::sleep(POLL).await;
                }
                Ok(Err(e @ (ConfirmError::NotFound | ConfirmError::Expired))) => {
                    return Err(e.to_string());
                }
                Err(killed) => {
                    last = killed;
                    tokio::time::sleep(POLL).await;
                }
            }
        }
        Err(last)
    }

    /// Registers a wait for `seat` until `until`.
    pub async fn wait(&self, seat: &SeatId, until: Millis) -> Result<Intent, String> {
        let mut last = String::new();
        for _ in 0..ATTEMPTS {
            let instance = self.on_instance();
            let answer = self
                .run(
                    instance.caller,
                    instance.api.register_wait(&self.user, seat.clone(), until),
                )
                .await;
            match answer {
                Ok(Ok(intent)) => return Ok(intent),
                Ok(Err(WaitError::Store(e))) => {
                    last = format!("store: {e}");
                    tokio::time::sleep(POLL).await;
                }
                Ok(Err(e)) => return Err(e.to_string()),
                Err(killed) => {
                    last = killed;
                    tokio::time::sleep(POLL).await;
                }
            }
        }
        Err(last)
    }

    /// Cancels a wait.
    pub async fn cancel_wait(&self, id: &IntentId) -> Result<Intent, String> {
        let instance = self.on_instance();
        self.run(instance.caller, instance.api.cancel_wait(&self.user, id))
            .await?
            .map_err(|e| e.to_string())
    }

    /// The intent as the user reads it now.
    pub async fn intent(&self, id: &IntentId) -> Result<Intent, String> {
        self.on_instance()
            .api
            .intent(&self.user, id)
            .await
            .map_err(|e| e.to_string())
    }

    /// Polls the intent until it is terminal, at most `within`: the terminal intent, or `None`
    /// if it was not terminal by then. The pause starts at [`POLL`] and doubles up to
    /// [`POLL_MAX`], as a client backs off an answer that is slow to come.
    pub async fn await_outcome(&self, id: &IntentId, within: Duration) -> Option<Intent> {
        let deadline = self.world.now().plus(within);
        let mut pause = POLL;
        // Bounded: at most within / POLL + 1 reads (every pause is at least POLL).
        loop {
            if let Ok(intent) = self.intent(id).await
                && intent.status.is_terminal()
            {
                return Some(intent);
            }
            if self.world.now() >= deadline {
                return None;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(POLL_MAX);
        }
    }

    /// A seat read through the instance's seat-read cache.
    pub async fn seat(&self, seat: &SeatId) -> Result<Served, ReadSeatError> {
        self.on_instance().api.seat(seat).await
    }

    /// Books `head_count` seats on `flight` under `key`; a request still in progress under the
    /// key, or failed for the store, is retried under the same key, at most [`ATTEMPTS`] times.
    pub async fn book(
        &self,
        flight: &FlightId,
        head_count: u32,
        key: Option<&IdempotencyKey>,
    ) -> Result<BookingAnswer, String> {
        self.seats(flight, head_count, key, false).await
    }

    /// A checkout hold of `head_count` seats on `flight`, retried as [`Client::book`] is.
    pub async fn hold(&self, flight: &FlightId, head_count: u32) -> Result<BookingAnswer, String> {
        self.seats(flight, head_count, None, true).await
    }

    /// A booking, or a checkout hold when `holding`: one retry loop for both, as the service
    /// has one path for both.
    async fn seats(
        &self,
        flight: &FlightId,
        head_count: u32,
        key: Option<&IdempotencyKey>,
        holding: bool,
    ) -> Result<BookingAnswer, String> {
        let mut last = String::new();
        for _ in 0..ATTEMPTS {
            let admitted = self.admitted().await;
            let instance = self.on_instance();
            let flights = instance.api.flights();
            let answer = if holding {
                self.run(
                    instance.caller,
                    flights.hold(&self.user, flight, head_count, key),
                )
                .await
            } else {
                self.run(
                    instance.caller,
                    flights.book(&self.user, flight, head_count, key),
                )
                .await
            };
            drop(admitted);
            match answer {
                Ok(Ok(answer)) => return Ok(answer),
                Ok(Err(e @ (BookError::InProgress | BookError::Store(_)))) => {
                    last = e.to_string();
                    tokio::time::sleep(POLL).await;
                }
                Ok(Err(BookError::RateLimited(after))) => {
                    last = "rate_limited".into();
                    tokio::time::sleep(after).await;
                }
                Ok(Err(e)) => return Err(e.to_string()),
                Err(killed) => {
                    last = killed;
                    tokio::time::sleep(POLL).await;
                }
            }
        }
        Err(last)
    }

    /// Something asked of the user's hold: its confirm, release or extension. A store failure
    /// is retried, at most [`ATTEMPTS`] times (each is once at the store, so a retry after a
    /// lost answer gets the repeat's answer).
    pub async fn on_hold(
        &self,
        flight: &FlightId,
        hold: &HoldId,
        asked: HoldAsk,
    ) -> Result<(), String> {
        let mut last = String::new();
        for _ in 0..ATTEMPTS {
            let instance = self.on_instance();
            let checkout = instance.api.checkout();
            let asking = async {
                match asked {
                    HoldAsk::Confirm => checkout
                        .confirm_hold(&self.user, flight, hold)
                        .await
                        .map(|_| ()),
                    HoldAsk::Release => checkout
                        .release_hold(&self.user, flight, hold)
                        .await
                        .map(|_| ()),
                    HoldAsk::Extend => checkout
                        .extend_hold(&self.user, flight, hold)
                        .await
                        .map(|_| ()),
                }
            };
            match self.run(instance.caller, asking).await {
                Ok(Ok(())) => return Ok(()),
                Ok(Err(HoldError::Store(e))) => {
                    last = format!("store: {e}");
                    tokio::time::sleep(POLL).await;
                }
                Ok(Err(e)) => return Err(e.to_string()),
                Err(killed) => {
                    last = killed;
                    tokio::time::sleep(POLL).await;
                }
            }
        }
        Err(last)
    }

    /// Asks the waiting list, the entry, or a leave of it (`entry` `None`: a join of `head_count`,
    /// else a read, or a leave when `leaving`). A store failure is retried, at most [`ATTEMPTS`]
    /// times; a rate limit is waited out; every other answer is returned.
    pub async fn waitlist(
        &self,
        flight: &FlightId,
        head_count: u32,
        entry: Option<(&EntryId, bool)>,
    ) -> Result<EntryView, String> {
        let mut last = String::new();
        for _ in 0..ATTEMPTS {
            let instance = self.on_instance();
            let waitlist = instance.api.waitlist();
            let answer = match entry {
                None => {
                    self.run(
                        instance.caller,
                        waitlist.join_waitlist(&self.user, flight, head_count),
                    )
                    .await
                }
                // A read: nothing for a kill to leave half done.
                Some((id, false)) => Ok(waitlist.wait_entry(&self.user, flight, id).await),
                Some((id, true)) => self
                    .run(
                        instance.caller,
                        waitlist.leave_waitlist(&self.user, flight, id),
                    )
                    .await
                    .map(|left| {
                        left.map(|entry| EntryView {
                            entry,
                            position: None,
                        })
                    }),
            };
            match answer {
                Ok(Ok(view)) => return Ok(view),
                Ok(Err(WaitlistRequestError::Store(e))) => {
                    last = format!("store: {e}");
                    tokio::time::sleep(POLL).await;
                }
                Ok(Err(WaitlistRequestError::RateLimited(after))) => {
                    last = "rate_limited".into();
                    tokio::time::sleep(after).await;
                }
                Ok(Err(e)) => return Err(e.to_string()),
                Err(killed) => {
                    last = killed;
                    tokio::time::sleep(POLL).await;
                }
            }
        }
        Err(last)
    }

    /// A room's seat map through the instance's seat-read cache; a store failure is retried,
    /// at most [`ATTEMPTS`] times (an unavailable upstream is an answer: the caller would come
    /// back after its `retry_after`, which a user turn does by its next roll).
    pub async fn room(&self, room: &RoomId) -> Result<Served, ReadSeatError> {
        let mut last = None;
        for _ in 0..ATTEMPTS {
            match self.on_instance().api.room(room).await {
                Err(ReadSeatError::Store(e)) => {
                    last = Some(ReadSeatError::Store(e));
                    tokio::time::sleep(POLL).await;
                }
                other => return other,
            }
        }
        Err(last.expect("ATTEMPTS > 0"))
    }

    /// The flight and what is left of it (`GET /flights/{id}`); a store failure is retried, at
    /// most [`ATTEMPTS`] times.
    pub async fn flight(&self, flight: &FlightId) -> Result<Inventory, String> {
        let mut last = String::new();
        for _ in 0..ATTEMPTS {
            match self.on_instance().api.flights().inventory(flight).await {
                Ok(inventory) => return Ok(inventory),
                Err(ReadFlightError::Store(e)) => {
                    last = format!("store: {e}");
                    tokio::time::sleep(POLL).await;
                }
                Err(e @ ReadFlightError::NotFound) => return Err(e.to_string()),
            }
        }
        Err(last)
    }

    /// The user's bookings (`GET /me/bookings`), every page, following `next_cursor` to the end
    /// or [`MAX_PAGES`]; each page's store failure is retried, at most [`ATTEMPTS`] times.
    pub async fn bookings(&self) -> Listed<Booking> {
        let mut listed = Listed {
            items: Vec::new(),
            pages: 0,
            complete: false,
            error: None,
        };
        let mut after: Option<BookingId> = None;
        // Bounded: at most MAX_PAGES pages, each at most ATTEMPTS tries.
        while listed.pages < MAX_PAGES {
            let mut page = None;
            for _ in 0..ATTEMPTS {
                match self
                    .on_instance()
                    .api
                    .flights()
                    .bookings_of(&self.user, after.as_ref())
                    .await
                {
                    Ok(p) => {
                        page = Some(p);
                        break;
                    }
                    Err(e) => {
                        listed.error = Some(format!("store: {e}"));
                        tokio::time::sleep(POLL).await;
                    }
                }
            }
            let Some(page) = page else {
                return listed;
            };
            listed.error = None;
            listed.pages += 1;
            listed.items.extend(page.items);
            match page.next {
                Some(next) => after = Some(next),
                None => {
                    listed.complete = true;
                    return listed;
                }
            }
        }
        listed.error = Some(format!("stopped at {MAX_PAGES} pages"));
        listed
    }

    /// An intent's history as the admin reads it (`GET /admin/intents/{id}`: the handler has
    /// checked the admin claim), every page, following the cursor to the end or [`MAX_PAGES`];
    /// each page's store failure is retried, at most [`ATTEMPTS`] times. `Err` only for an
    /// intent the store does not know.
    pub async fn intent_history(&self, id: &IntentId) -> Result<Listed<TransitionRecord>, String> {
        let mut listed = Listed {
            items: Vec::new(),
            pages: 0,
            complete: false,
            error: None,
        };
        let mut after: Option<u64> = None;
        // Bounded: at most MAX_PAGES pages, each at most ATTEMPTS tries.
        while listed.pages < MAX_PAGES {
            let mut page = None;
            for _ in 0..ATTEMPTS {
                match self.on_instance().api.admin().intent(id, after).await {
                    Ok(p) => {
                        page = Some(p);
                        break;
                    }
                    Err(AdminIntentError::NotFound) => return Err("not_found".into()),
                    Err(AdminIntentError::Store(e)) => {
                        listed.error = Some(format!("store: {e}"));
                        tokio::time::sleep(POLL).await;
                    }
                }
            }
            let Some(page) = page else {
                return Ok(listed);
            };
            listed.error = None;
            listed.pages += 1;
            listed.items.extend(page.history);
            match page.next {
                Some(next) => after = Some(next),
                None => {
                    listed.complete = true;
                    return Ok(listed);
                }
            }
        }
        listed.error = Some(format!("stopped at {MAX_PAGES} pages"));
        Ok(listed)
    }

    /// Cancels one of the user's bookings.
    pub async fn cancel_booking(
        &self,
        flight: &FlightId,
        booking: &BookingId,
    ) -> Result<(), String> {
        let instance = self.on_instance();
        let flights = instance.api.flights();
        match self
            .run(instance.caller, flights.cancel(&self.user, flight, booking))
            .await?
        {
            Ok(_) => Ok(()),
            Err(CancelBookingError::NotFound) => Err("not_found".into()),
            Err(CancelBookingError::Store(e)) => Err(format!("store: {e}")),
        }
    }

    /// An intent reduced to a short, stable string: `"<status>"`, or `"<status> <reason>"`.
    pub fn outcome(intent: &Intent) -> String {
        match &intent.reason {
            Some(reason) => format!("{} {}", intent.status.as_str(), reason_str(reason)),
            None => intent.status.as_str().to_owned(),
        }
    }
}

fn reason_str(reason: &seatgate::domain::Reason) -> String {
    serde_json::to_value(reason)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{reason:?}"))
}
