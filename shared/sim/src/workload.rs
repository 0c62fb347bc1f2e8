//! The default workload: a small, busy world in which every route is used and every fault the
//! checkers must survive strikes, sized so that a seed runs in a fraction of a second.
//!
//! Why this shape: the promises break under fault *combinations* (a lost answer and a later
//! confirm, a busy answer and another instance's call), so the workload mixes everything at
//! once on few seats, where users contend, rather than scripting one story per fault:
//! - 3 instances on the local timing with a 10 s action TTL ([`ACTION_TTL`] says why), the
//!   reaper on its 500 ms schedule or, in one seed of [`SLOW_SCHEDULE_EVERY`], on a 40 s one
//!   ([`SLOW_SCHEDULE`] says why), [`USERS`] users, [`SEATS`] seats, one flight of [`CAPACITY`] seats over [`SHARDS`] shards
//!   and, with [`Mix::limited`] (on by default), a second of [`LIMITED_CAPACITY`] seats on one
//!   shard, at most [`LIMIT_PER_USER`] a user, which sells out within seconds;
//! - for [`ACTIVE`] of simulated time each user, one thing at a time, after a pause of
//!   0.2–2.5 s: confirms a seat (30%) and polls for its outcome, waits for a seat (15%; cancels
//!   the wait if it has not ended when they stop polling), reads a seat (5%), reads the room of
//!   all [`SEATS`] seats (2%), reads the flight (2%), books 1–2 seats under an
//!   `Idempotency-Key` (20%, less 8% with [`Mix::holders`] and 8% with [`Mix::waiters`], both
//!   on by default, who take those turns; a third of the bookers retry under the same key on another instance),
//!   cancels one of their bookings (10%, sometimes twice), lists their bookings (3%,
//!   `GET /me/bookings`, every page), reads the history of one of their intents as the admin
//!   does (2%, `GET /admin/intents/{id}`, every page), or gives up the seat they were told they
//!   won (11%, upstream, as `DELETE /api/reservations/current`: only a seat a SUCCEEDED intent
//!   told them of, so a release never hides a charge nobody reported). The new reads took their
//!   9% from seat reads (which the room reads partly stand in for: they go through the same
//!   cache) and from releases (a release roll does nothing unless the user was told they won,
//!   so most of them were idle turns). A user never confirms or waits for the seat they were
//!   told they hold (a client shows its user their reservation); one who was never told (they
//!   stopped polling) may. Each request lands on an instance drawn per request;
//! - the sale's opening rush: when the flight opens, [`OPENING_RUSH`] users book one seat each
//!   at the same instant, on different instances (the only bookings that are sure to race: the
//!   users' own are spread over the minute, and a booking runs within one instant); with
//!   [`Mix::limited`], the next [`LIMITED_RUSH`] users book [`LIMIT_PER_USER`] seats each of
//!   the limited sale at that instant, which sells it out and brings each to the limit, and
//!   with [`Mix::waiters`] the user after them joins its waiting list a second later
//!   ([`LINE_AT_OPENING`]); the rush's users cancel 3 and 6 s in, so the seats come back to
//!   the list: every seed has a list, an offer and users at their limit, whatever its users'
//!   draws; and the user after the waiter is refused at the sold-out sale twice, the second
//!   time from an instance's sold-out cache, and sends that key again when the flight shows
//!   seats on sale (up to [`COME_BACKS`] times, `moves::refused_comes_back`): a refusal's key
//!   is replayed where a fresh attempt could book;
//! - faults ([`FaultsSpec`], all on by default) during [`ACTIVE`], healed after it: upstream
//!   latency (5 ms + up to 80 ms), 500s (3%), 429 with `Retry-After: 1s` (3%), lost commit
//!   answers (10% of commits), late commits ([`LATE_COMMIT_RATE`] of reserves handled past
//!   their caller's 2 s timeout, their write landing up to the 1 s lease margin later, inside
//!   the attempt's lease: the caller hears a timeout while the seat is being charged), an outage from +20 s to +27 s answering 503 with
//!   `Retry-After: 2s`, a rate-limited window from +40 s to +42 s (429, `Retry-After: 1s`), and
//!   an outage from +46 s to +54 s answering 503 with no `Retry-After` (the one fault that opens
//!   the breaker: the others give a time, which pauses the route instead, and scattered 500s
//!   rarely come three in a row), store chaos (2% of writes throttled, conflicted, or
//!   applied with their answer lost), and the platform's replays (5% of relay passes lose their
//!   acknowledgement, so the stream hands those records again, each at most twice by this
//!   fault; 20% of seat sends whose deduplication id is remembered pass as new messages, as a
//!   resend past SQS's 5-minute window does): the stale and duplicate messages the services
//!   must take as no-ops; and crashes ([`CRASH_RATE`] of worker batches and reaper passes
//!   killed at a seeded instant within their first 200 ms, as a Lambda is: in-flight work
//!   dropped at whatever await it had reached, nothing deleted), and restarts (each killed
//!   run's instance then comes back in a new execution environment: a new holder id, empty
//!   instance caches, its breaker and route pauses known only from the store, as Lambda
//!   replaces an environment whose invocation it killed), and clock steps ([`CLOCK_STEPS`]:
//!   each instance's clock stepped to up to 100 ms ahead or behind, every 3 to 12 s), and
//!   subscribers that refuse or are slow to take a post ([`SUBSCRIBER_FAULTS`]), and edge
//!   crashes ([`EDGE_CRASH_RATE`] of the API calls that write, relay passes and delivery
//!   batches killed mid-flight: the client hears a 502 and retries, the stream hands its records
//!   again, the events come back), and an event queue that delivers [`EVENT_DUPLICATE_RATE`]
//!   of its events twice;
//! - then the world is given the liveness bound and [`SETTLE_MARGIN`] to get quiet, every user
//!   lists their bookings once more (the listing checker holds this last listing to the final
//!   store exactly), and the run ends.
//!
//! Ledgers (the flights and bookings) are sampled every [`LEDGER_EVERY`] for the bank checker,
//! so a transient imbalance is seen, not only the end state; a sample is skipped when nothing
//! wrote to the books since the last (it would repeat it).
//!
//! Every choice (pauses, operations, seats, instances) is drawn from the seed, per user, so the
//! workload is a function of the seed as the world is.

mod faults;
mod mix;
mod moves;
pub mod operator;
mod record;

use faults::strike;
pub use faults::{
    CLOCK_STEPS, CRASH_RATE, EDGE_CRASH_RATE, EVENT_DUPLICATE_RATE, FaultsSpec, LATE_COMMIT_RATE,
    SUBSCRIBER_FAULTS,
};
pub use mix::Mix;
use moves::{confirm_many, eager_burst, limited_rush, wait_in_line};
use record::{Keyed, Listings, Recorded, book_keyed};

use crate::checkers::Ledger;
use crate::checkers::idempotency::KeyedAnswers;
use crate::checkers::listing::{BookingsListing, HistoryRead};
use crate::client::{Client, HoldAsk};
use crate::memory::ReplayCounts;
use crate::plant::Plant;
use crate::world::{World, WorldConfig};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use seatgate::domain::{
    BookingAnswer, BookingId, CheckoutTimes, FlightId, IdempotencyKey, IntentId, IntentStatus,
    RoomId, SeatId,
};
use seatgate::service::waitlist::WaitlistRequestError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

pub const INSTANCES: usize = 3;
pub const USERS: usize = 20;
pub const SEATS: usize = 4;
pub const CAPACITY: u32 = 20;
pub const SHARDS: u32 = 2;
/// The limited sale's flight ([`Mix::limited`]): few seats on one shard, so it sells out within
/// seconds and every seat that comes back meets its waiting list.
pub const LIMITED_CAPACITY: u32 = 4;
/// The limited sale's per-user limit: a booker or holder with two seats there is refused more.
pub const LIMIT_PER_USER: u32 = 2;
/// The eager client's flight ([`Mix::eager`]), and its bursts: each books this many single
/// seats at once (past the per-user limit of `rate_limit_requests`, 30, per 10 s window), at
/// most this many bursts a run.
pub const EAGER_CAPACITY: u32 = 200;
pub const EAGER_BURST: usize = 36;
pub const EAGER_BURSTS: u32 = 3;
/// An eager buyer's confirms of one hold, sent at once ([`Mix::eager`]).
pub const CONFIRMS_AT_ONCE: usize = 20;
/// The flight's checkout holds: 2 s, extendable to 4 s in all, so holders who pay late, extend
/// or walk away meet the reaper's lapse within the run.
pub const HOLD_TIMES: CheckoutTimes = CheckoutTimes {
    hold_ttl_secs: 2,
    hold_max_secs: 4,
    offer_ttl_secs: 2,
};
/// How long users act and faults strike.
pub const ACTIVE: Duration = Duration::from_secs(60);
/// How long the world is at least given to get quiet after the faults stop, beyond the
/// liveness bound (`checkers::liveness::bound` of the world's timing), so that an intent the
/// bound says must have ended has had its chance: a quiet world stops waiting at once, so only
/// a seed that fails liveness pays for the wait.
pub const SETTLE_MARGIN: Duration = Duration::from_secs(5);
/// The reaper's schedule in every [`SLOW_SCHEDULE_EVERY`]th seed. On AWS the schedule is a
/// minute beside a 10 s open interval, so an outage's end reaches the intents parked behind it
/// through the breaker's wake-ups, not a pass; the local timing's 500 ms schedule would cover
/// for a lost wake-up. 40 s is far past the liveness checker's wake-up bound
/// (`checkers::liveness::woken_bound`, 6.35 s here), and its ticks (+40 s, +80 s) fall neither
/// in the breaker's outage (+46 s to +54 s) nor within that bound after it: at 30 s, the tick
/// at +60 s came within 6 s of most closes and covered for lost wake-ups.
pub const SLOW_SCHEDULE: Duration = Duration::from_secs(40);
/// One seed in this many (those divisible by it) runs the reaper on [`SLOW_SCHEDULE`].
pub const SLOW_SCHEDULE_EVERY: u64 = 4;
/// The action TTL, and so the seat suppression window (`Suppression::of`): the local
/// timing's 300 s would suppress every seat from its first win to past the run's end, so after
/// the first seconds no immediate confirm would reach the upstream and seats would change hands
/// only through waits. Ten seconds keeps the suppression real (bursts on a seat just won are
/// closed locally) while freed seats are confirmed again within the run.
pub const ACTION_TTL: Duration = Duration::from_secs(10);
/// The event queue's most receives before it dead-letters an event (the memory backend's
/// default is 8, as the template's): 5 on the local timing's delivery backoff (1 s doubling)
/// is 15 s of retries, so an event its subscriber keeps refusing is dead-lettered within the
/// faults' minute, where the operator ([`Mix::operator`]) finds it; 8 would take 91 s.
pub const EVENT_MAX_RECEIVES: u32 = 5;
/// How often a ledger is sampled.
pub const LEDGER_EVERY: Duration = Duration::from_millis(500);
/// Users who book at the sale's opening, all at once: enough that two of them book on one of
/// the [`SHARDS`] shards at the same instant, whatever shards they start at.
pub const OPENING_RUSH: usize = SHARDS as usize + 1;
/// Users who book the limited sale out at the opening ([`Mix::limited`]), each
/// [`LIMIT_PER_USER`] seats: their bookings fill its [`LIMITED_CAPACITY`].
pub const LIMITED_RUSH: usize = (LIMITED_CAPACITY / LIMIT_PER_USER) as usize;
/// When the first waiter joins the sold-out limited sale's list after the opening, and how
/// long they wait in line ([`Mix::waiters`] with [`Mix::limited`]).
pub const LINE_AT_OPENING: Duration = Duration::from_secs(1);
pub(super) const FIRST_WAITER_PATIENCE: Duration = Duration::from_secs(8);
/// The limited rush's users cancel their bookings this long after the opening, one after
/// another, once the first waiter is in line.
pub(super) const RUSH_CANCELLED_AFTER: Duration = Duration::from_secs(3);
/// The refused buyer's return ([`Mix::limited`]): reads of the limited sale, one every
/// [`COME_BACK_EVERY`] from the first of the rush's cancels (3.5 s to 23 s), and at most
/// [`COME_BACKS`] replays of their key, each when a read shows seats on sale.
pub(super) const COME_BACK_POLLS: usize = 40;
pub(super) const COME_BACK_EVERY: Duration = Duration::from_millis(500);
pub(super) const COME_BACKS: usize = 4;
/// How long a user polls a confirm's outcome; a wait's length, and how long its outcome is
/// polled before the user cancels it.
const CONFIRM_POLL: Duration = Duration::from_secs(30);
const WAIT_FOR: Duration = Duration::from_secs(15);
const WAIT_POLL: Duration = Duration::from_secs(20);

/// The world the default workload runs in: [`INSTANCES`] instances on the local timing with
/// [`ACTION_TTL`] (and the reaper on [`SLOW_SCHEDULE`] in one seed of [`SLOW_SCHEDULE_EVERY`]), a horizon past [`ACTIVE`] + the longest user poll + the liveness bound +
/// [`SETTLE_MARGIN`], and `plants`.
pub fn config(seed: u64, plants: &[Plant]) -> WorldConfig {
    let mut config = WorldConfig::new(seed);
    config.instances = INSTANCES;
    config.timing.action_ttl = ACTION_TTL;
    if seed.is_multiple_of(SLOW_SCHEDULE_EVERY) {
        // The services know their schedule (the worker's settle estimates read it).
        config.timing.reaper_interval = SLOW_SCHEDULE;
        config.reaper_interval = SLOW_SCHEDULE;
    }
    config.horizon = ACTIVE
        + CONFIRM_POLL
        + crate::checkers::liveness::bound(&config.timing)
        + SETTLE_MARGIN
        + Duration::from_secs(30);
    config.plants = plants.to_vec();
    config.memory.event_max_receive_count = EVENT_MAX_RECEIVES;
    if plants.contains(&Plant::UnfencedSettle) {
        // The stale settler this plant needs (`crate::plant`'s doc says why).
        config.late_settlements = crate::plant::LATE_SETTLEMENT_RATE;
    }
    config
}

/// What the workload saw, beside the world's own records.
#[derive(Debug, Clone)]
pub struct Observed {
    /// Ledgers sampled during the run, in time order.
    pub ledgers: Vec<Ledger>,
    /// Whether the world got quiet within the liveness bound and [`SETTLE_MARGIN`].
    pub quiet: bool,
    /// Requests the users made.
    pub requests: usize,
    /// Every booking answer per (user, key), sorted by both.
    pub keyed: Vec<KeyedAnswers>,
    /// Every bookings listing the users read, in the order they finished, the final ones
    /// (after the world got quiet, one per user) last.
    pub listings: Vec<BookingsListing>,
    /// Every intent history the users read as the admin does, in the order they finished.
    pub history_reads: Vec<HistoryRead>,
    /// What the replay fault did (all zero unless [`FaultsSpec::replays`]): shows it struck.
    pub replays: ReplayCounts,
    /// Worker batches and reaper passes killed (0 unless [`FaultsSpec::crashes`]).
    pub crashes: u64,
    /// Instances restarted after a kill (0 unless [`FaultsSpec::restarts`]).
    pub restarts: usize,
    /// Instance clocks stepped to a new offset (0 unless [`FaultsSpec::clock_steps`]).
    pub clock_steps: u64,
    /// Reaper wake runs (the breaker's wake-ups that came due).
    pub wake_runs: u64,
    /// Posts the subscribers refused (0 unless [`FaultsSpec::subscribers`]).
    pub refused_posts: u64,
    /// API calls, relay passes and delivery batches killed (0 unless [`FaultsSpec::edge_crashes`]).
    pub edge_kills: u64,
    /// What the operator read and did (`None` unless [`Mix::operator`]).
    pub operator: Option<crate::checkers::operator::OperatorRecord>,
}

fn seat(i: usize) -> SeatId {
    SeatId::parse(&format!("S-{}", i + 1)).expect("a valid seat id")
}

/// The seat after `seat`, in a ring of [`SEATS`].
fn next_seat(seat: &SeatId) -> SeatId {
    (0..SEATS)
        .map(self::seat)
        .cycle()
        .skip_while(|s| s != seat)
        .nth(1)
        .expect("a ring of seats")
}

fn flight() -> FlightId {
    FlightId::parse("FL-1").expect("a valid flight id")
}

/// The limited sale's flight ([`Mix::limited`]).
fn limited_flight() -> FlightId {
    FlightId::parse("FL-2").expect("a valid flight id")
}

/// The eager client's flight ([`Mix::eager`]).
fn eager_flight() -> FlightId {
    FlightId::parse("FL-3").expect("a valid flight id")
}

/// The room of every seat, so a room read covers the seats the users contend for.
fn room() -> RoomId {
    RoomId::parse("R-1").expect("a valid room id")
}

/// Runs the default workload in `world` with `faults`.
pub async fn run(world: World, faults: FaultsSpec) -> Observed {
    run_mix(world, faults, Mix::default()).await
}

/// [`run`] with the users of `mix`.
pub async fn run_mix(world: World, faults: FaultsSpec, mix: Mix) -> Observed {
    let seed = world.config().seed;
    let instances = world.instance_count();
    let mut users = Vec::with_capacity(USERS);
    for i in 0..USERS {
        users.push(world.enrol(&format!("u-{i:02}"), i % instances).await);
    }
    open_sale(&world, mix).await;

    let started = world.now();
    strike(&world, &faults, seed);
    let heal = spawn_heal(&world);
    let ledgers = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = spawn_sampler(&world, &ledgers, &stop);

    let keyed: Keyed = Arc::new(Mutex::new(Vec::new()));
    let listings = Listings::default();
    let rush = spawn_rush(&users, mix, &keyed);
    let tasks: Vec<_> = users
        .into_iter()
        .enumerate()
        .map(|(i, client)| {
            let world = world.clone();
            let rng = StdRng::seed_from_u64(user_seed(seed, i));
            let recorded = Recorded {
                keyed: keyed.clone(),
                listings: listings.clone(),
            };
            tokio::spawn(user(world, client, i, rng, started, recorded, mix))
        })
        .collect();
    let watcher = mix.operator.then(|| {
        let mut watched = vec![flight()];
        if mix.limited {
            watched.push(limited_flight());
        }
        tokio::spawn(operator::watch(world.clone(), watched, ACTIVE))
    });
    let mut requests = rush.len();
    for task in rush {
        task.await.expect("an opening booking");
    }
    for task in tasks {
        requests += task.await.expect("a user task");
    }
    heal.await.expect("the heal task");
    let quiet = world
        .settle(crate::checkers::liveness::bound(world.timing()) + SETTLE_MARGIN)
        .await;
    // Each user's last listing, one user after another: nothing writes a booking any more, so
    // each must be exactly the user's bookings in the final store. Bounded: USERS listings.
    for i in 0..USERS {
        let client = world.client(&format!("u-{i:02}"), i % instances);
        listings.bookings(&world, &client, true).await;
    }
    let mut operator = match watcher {
        Some(watcher) => Some(watcher.await.expect("the operator")),
        None => None,
    };
    if let Some(record) = operator.as_mut()
        && quiet
    {
        let within = crate::checkers::liveness::bound(world.timing()) + SETTLE_MARGIN;
        operator::after_the_sale(&world, record, within).await;
    }
    stop.store(true, Ordering::SeqCst);
    sampler.await.expect("the sampler");
    let ledgers = std::mem::take(&mut *ledgers.lock().unwrap_or_else(PoisonError::into_inner));
    let mut keyed = std::mem::take(&mut *keyed.lock().unwrap_or_else(PoisonError::into_inner));
    keyed.sort_by(|a, b| (&a.user, a.key.as_str()).cmp(&(&b.user, b.key.as_str())));
    let (listings, history_reads) = listings.take();
    Observed {
        ledgers,
        quiet,
        requests,
        keyed,
        listings,
        history_reads,
        replays: world.backend().replay_counts(),
        crashes: world.crashes(),
        restarts: world.restarts(),
        clock_steps: world.clock_steps(),
        wake_runs: world.wake_runs(),
        refused_posts: world.refused_posts(),
        edge_kills: world.edge_kills(),
        operator,
    }
}

/// The sale's flights (the main one always; the limited and the eager client's as `mix` has
/// them) and the upstream's room of seats.
async fn open_sale(world: &World, mix: Mix) {
    world
        .instance(0)
        .api
        .flights()
        .create_with_checkout(flight(), CAPACITY, None, SHARDS, HOLD_TIMES)
        .await
        .expect("the flight is created");
    if mix.limited {
        world
            .instance(0)
            .api
            .flights()
            .create_with_checkout(
                limited_flight(),
                LIMITED_CAPACITY,
                Some(LIMIT_PER_USER),
                1,
                HOLD_TIMES,
            )
            .await
            .expect("the limited flight is created");
    }
    if mix.eager {
        world
            .instance(0)
            .api
            .flights()
            .create_with_checkout(eager_flight(), EAGER_CAPACITY, None, SHARDS, HOLD_TIMES)
            .await
            .expect("the eager client's flight is created");
    }
    let seats: Vec<SeatId> = (0..SEATS).map(seat).collect();
    world.upstream().put_room(&room(), &seats);
}

/// The end of the faults: at [`ACTIVE`] every fault stops and every clock comes back to true
/// time, so what follows is the settling the liveness bound judges.
fn spawn_heal(world: &World) -> tokio::task::JoinHandle<()> {
    let world = world.clone();
    tokio::spawn(async move {
        tokio::time::sleep(ACTIVE).await;
        world.upstream().heal();
        world.backend().set_chaos(None);
        world.backend().set_replays(None);
        world.set_crash_rate(0.0);
        world.set_subscriber_faults(None);
        world.set_edge_crash_rate(0.0);
        world.backend().set_event_duplicates(None);
        for i in 0..world.instance_count() {
            world.step_clock(i, 0);
        }
    })
}

/// The ledger sampler: the books every [`LEDGER_EVERY`] while the run lasts, for the bank
/// checker to judge in every snapshot.
fn spawn_sampler(
    world: &World,
    ledgers: &Arc<Mutex<Vec<Ledger>>>,
    stop: &Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    let (world, ledgers, stop) = (world.clone(), ledgers.clone(), stop.clone());
    tokio::spawn(async move {
        // Bounded by the world's horizon as well as by `stop`. A sample whose books nobody
        // wrote since the last is that ledger again, and is not taken.
        let mut seen = None;
        while !stop.load(Ordering::SeqCst) && !world.stopping() {
            if let Some((writes, ledger)) = world.ledger_since(seen) {
                seen = Some(writes);
                ledgers
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(ledger);
            }
            tokio::time::sleep(LEDGER_EVERY).await;
        }
    })
}

/// The opening rush: the first users' keyed bookings (and the limited sale's, when on),
/// spawned together so they book in the same instant.
fn spawn_rush(users: &[Client], mix: Mix, keyed: &Keyed) -> Vec<tokio::task::JoinHandle<()>> {
    let rush: Vec<_> = users
        .iter()
        .take(OPENING_RUSH)
        .enumerate()
        .map(|(i, client)| {
            let client = client.on(i);
            let keyed = keyed.clone();
            tokio::spawn(async move {
                let key = IdempotencyKey::parse(&format!("key-{i:02}-opening"))
                    .expect("a valid idempotency key");
                let _ = book_keyed(&client, &flight(), &key, 1, &keyed).await;
            })
        })
        .collect();
    rush.into_iter()
        .chain(limited_rush(users, mix, keyed))
        .collect()
}

/// The flight a booker's or holder's turn goes to: the limited sale half the time when it is
/// on ([`Mix::limited`]; no draw otherwise, so the other mixes keep their histories).
fn sale_flight(mix: Mix, rng: &mut StdRng) -> FlightId {
    if mix.limited && rng.random_bool(0.5) {
        limited_flight()
    } else {
        flight()
    }
}

fn user_seed(seed: u64, i: usize) -> u64 {
    let mut z = seed ^ (0x7573_6572_0000_0000 | i as u64); // "user"
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One user's life: one request at a time until [`ACTIVE`] has passed since `started`. Returns
/// the requests made. Bounded: each turn waits at least 200 ms, so at most ACTIVE / 200 ms
/// turns, and each request's polls are bounded ([`CONFIRM_POLL`], [`WAIT_POLL`]).
async fn user(
    world: World,
    home: Client,
    i: usize,
    rng: StdRng,
    started: seatgate::domain::Millis,
    recorded: Recorded,
    mix: Mix,
) -> usize {
    let Recorded { keyed, listings } = recorded;
    let instances = world.instance_count();
    let mut life = Life {
        world,
        home,
        i,
        rng,
        mix,
        keyed,
        listings,
        instances,
        told_won: None,
        bookings: Vec::new(),
        intents: Vec::new(),
    };
    let mut requests = 0usize;
    let mut n = 0u32;
    let eager = mix.eager && i == USERS - 1;
    let mut bursts = 0u32;
    while life.world.now().since(started) < ACTIVE {
        let pause = Duration::from_millis(life.rng.random_range(200..2_500));
        tokio::time::sleep(pause).await;
        n += 1;
        if eager && bursts < EAGER_BURSTS && (n == 1 || life.rng.random_bool(0.1)) {
            bursts += 1;
            requests += EAGER_BURST;
            let booked = eager_burst(&life.home, i, n, &life.keyed).await;
            life.bookings
                .extend(booked.into_iter().map(|b| (eager_flight(), b)));
            continue;
        }
        requests += 1;
        life.turn(n).await;
    }
    requests
}

/// What one user knows between turns, as a real client would: what they were told they won,
/// what they booked, which intents are theirs. Every draw comes from the user's own `rng`, in
/// the order the turns make them, so a seed replays the same life.
struct Life {
    world: World,
    home: Client,
    i: usize,
    rng: StdRng,
    mix: Mix,
    keyed: Keyed,
    listings: Listings,
    instances: usize,
    /// The seat a SUCCEEDED intent told this user they hold (until they release it): they do
    /// not ask for it again, as a real client, which shows its user their reservation, would
    /// not.
    told_won: Option<SeatId>,
    /// With the flight each is on, to cancel it there.
    bookings: Vec<(FlightId, BookingId)>,
    /// The intents this user was given (confirms and waits), whose history they may read; at
    /// most one a turn, so bounded as the turns are.
    intents: Vec<IntentId>,
}

impl Life {
    /// One turn: an instance, a seat and a roll drawn, then the request the roll names.
    async fn turn(&mut self, n: u32) {
        let client = self.home.on(self.rng.random_range(0..self.instances));
        let mut seat = seat(self.rng.random_range(0..SEATS));
        if self.told_won.as_ref() == Some(&seat) {
            seat = next_seat(&seat);
        }
        let roll = self.rng.random_range(0..100u32);
        match roll {
            0..30 => self.confirm_turn(&client, seat).await,
            30..45 => self.wait_turn(&client, seat).await,
            45..50 => {
                let _ = client.seat(&seat).await;
            }
            50..52 => {
                let _ = client.room(&room()).await;
            }
            52..54 => {
                let _ = client.flight(&flight()).await;
            }
            58..66 if self.mix.waiters => self.line_turn(&client).await,
            66..74 if self.mix.holders => self.hold_turn(&client).await,
            54..74 => self.book_turn(&client, n).await,
            74..84 => self.cancel_turn(&client).await,
            84..87 => self.listings.bookings(&self.world, &client, false).await,
            87..89 => {
                if !self.intents.is_empty() {
                    let intent = &self.intents[self.rng.random_range(0..self.intents.len())];
                    self.listings.history(&self.world, &client, intent).await;
                }
            }
            _ => {
                if self.told_won.take().is_some() {
                    self.world.upstream().release(self.home.user());
                }
            }
        }
    }

    /// A confirm of `seat`, followed to its outcome.
    async fn confirm_turn(&mut self, client: &Client, seat: SeatId) {
        if let Ok(intent) = client.reserve(&seat).await {
            self.intents.push(intent.intent_id.clone());
            if let Some(done) = client.await_outcome(&intent.intent_id, CONFIRM_POLL).await
                && done.status == IntentStatus::Succeeded
            {
                self.told_won = Some(seat);
            }
        }
    }

    /// A wait for `seat`, cancelled if it has not ended within the user's patience.
    async fn wait_turn(&mut self, client: &Client, seat: SeatId) {
        let until = self.world.now().plus(WAIT_FOR);
        if let Ok(wait) = client.wait(&seat, until).await {
            self.intents.push(wait.intent_id.clone());
            match client.await_outcome(&wait.intent_id, WAIT_POLL).await {
                Some(done) if done.status == IntentStatus::Succeeded => {
                    self.told_won = Some(seat);
                }
                Some(_) => {}
                None => {
                    let _ = client.cancel_wait(&wait.intent_id).await;
                }
            }
        }
    }

    /// A place on a sold-out flight's waiting list ([`Mix::waiters`]).
    async fn line_turn(&mut self, client: &Client) {
        // The limited sale sells out within seconds: its list is where waiters wait.
        let on = if self.mix.limited {
            limited_flight()
        } else {
            flight()
        };
        let head_count = self.rng.random_range(1..=2);
        let patience = Duration::from_millis(self.rng.random_range(2_000..8_000));
        let takes_offer = self.rng.random_bool(0.7);
        match wait_in_line(client, &on, head_count, patience, takes_offer).await {
            Ok(Some(booking)) => self.bookings.push((on, booking)),
            // Seats came back on the limited sale: the waiter takes them, as the refusal tells
            // it to, with a hold paid at once.
            Err(refused)
                if self.mix.limited
                    && refused == WaitlistRequestError::SeatsAvailable.to_string() =>
            {
                if let Ok(BookingAnswer::Held { hold }) = client.hold(&on, head_count).await
                    && client
                        .on_hold(&on, &hold.hold_id, HoldAsk::Confirm)
                        .await
                        .is_ok()
                {
                    self.bookings.push((on, hold.booking_id.clone()));
                }
            }
            _ => {}
        }
    }

    /// A checkout hold ([`Mix::holders`]): paid in time or late, extended, released, or walked
    /// away from.
    async fn hold_turn(&mut self, client: &Client) {
        let on = sale_flight(self.mix, &mut self.rng);
        let head_count = self.rng.random_range(1..=2);
        let Ok(BookingAnswer::Held { hold }) = client.hold(&on, head_count).await else {
            return;
        };
        // Paying takes 0.1 to 3 s, against a hold of HOLD_TTL: some pay too late.
        let pay = Duration::from_millis(self.rng.random_range(100..3_000));
        let elsewhere = client.on(self.rng.random_range(0..self.instances));
        let choice = self.rng.random_range(0..100u32);
        if choice < 60 {
            tokio::time::sleep(pay).await;
            if choice >= 45 {
                // Asks for more time first, then pays as long again.
                let _ = elsewhere.on_hold(&on, &hold.hold_id, HoldAsk::Extend).await;
                tokio::time::sleep(pay).await;
            }
            // An eager buyer's confirm goes 20 times at once (a double click, a client's
            // retries, several tabs), from every instance.
            let confirmed = if self.mix.eager && self.rng.random_bool(0.1) {
                confirm_many(&elsewhere, &on, &hold.hold_id, self.instances).await
            } else {
                elsewhere
                    .on_hold(&on, &hold.hold_id, HoldAsk::Confirm)
                    .await
                    .is_ok()
            };
            if confirmed {
                self.bookings.push((on, hold.booking_id.clone()));
            }
        } else if choice < 75 {
            tokio::time::sleep(pay).await;
            let _ = elsewhere
                .on_hold(&on, &hold.hold_id, HoldAsk::Release)
                .await;
        }
        // Otherwise the holder walks away: the reaper gives the seats back.
    }

    /// A booking under an `Idempotency-Key`, asked again elsewhere a third of the time.
    async fn book_turn(&mut self, client: &Client, n: u32) {
        let key = IdempotencyKey::parse(&format!("key-{:02}-{n}", self.i))
            .expect("a valid idempotency key");
        let on = sale_flight(self.mix, &mut self.rng);
        let head_count = self.rng.random_range(1..=2);
        let first = book_keyed(client, &on, &key, head_count, &self.keyed).await;
        if let Ok(BookingAnswer::Booked { booking }) = &first {
            self.bookings.push((on.clone(), booking.booking_id.clone()));
        }
        if self.rng.random_bool(1.0 / 3.0) {
            // A client that never heard its answer asks again, elsewhere.
            let elsewhere = client.on(self.rng.random_range(0..self.instances));
            let again = book_keyed(&elsewhere, &on, &key, head_count, &self.keyed).await;
            if let (Err(_), Ok(BookingAnswer::Booked { booking })) = (&first, &again) {
                self.bookings.push((on, booking.booking_id.clone()));
            }
        }
    }

    /// A cancel of one of the user's bookings, sent twice a third of the time.
    async fn cancel_turn(&mut self, client: &Client) {
        if !self.bookings.is_empty() {
            let at = self.rng.random_range(0..self.bookings.len());
            let (on, booking) = self.bookings.swap_remove(at);
            let _ = client.cancel_booking(&on, &booking).await;
            if self.rng.random_bool(0.3) {
                let _ = client.cancel_booking(&on, &booking).await;
            }
        }
    }
}
