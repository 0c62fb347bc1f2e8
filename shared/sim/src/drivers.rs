//! The platform around the functions, played as tokio tasks: the stream's event source mapping
//! (relay pump), the SQS event source mappings (a worker pump per instance, one delivery pump)
//! and the EventBridge schedule with the wake-up queue (reaper loop).
//!
//! Each pump does what its AWS counterpart does with a function's answer, as `infra/local`'s
//! `mappings.rs` does for the embedded backend: the relay's records before the first failure
//! are acknowledged and that one failed (`MemoryBackend::relay_once`); a worker batch runs
//! under the worker function's timeout, every message not reported failed is deleted, and a
//! batch cut short by the timeout deletes nothing (its messages return after the visibility
//! timeout, as a killed Lambda's do).
//!
//! Waking: an idle pump does not poll on a timer. It waits on its feed in the backend
//! (`MemoryBackend::feed`: a message sent, a group unblocked, a change record appended), on
//! the feed's next due time (a visibility or a failed record's backoff running out), or on the
//! world stopping, as an SQS long poll returns when a message arrives. Woken by its feed, it
//! acts after a pickup delay drawn from its own seeded stream, up to its configured poll
//! interval ([`Pickup`]), so pumps woken by one write still interleave as polling ones would.
//! On the AWS profile a worker pump also pays that delivery latency between busy batches, as
//! an event source mapping receives and invokes for each.
//! A run then costs wake-ups in proportion to its work, not to its simulated length (a
//! quarter of a seed's time went on empty 25 ms polls before; `BENCHMARKS.md`).
//!
//! Crashes: while [`World::set_crash_rate`] is above 0, a worker batch or reaper pass may be
//! killed at a seeded instant ([`Crash`]): its future is dropped at whatever await it had
//! reached, as a killed Lambda's is, and nothing of the batch is deleted, so its messages come
//! back after their visibility timeout and the reaper finds what was left mid-flight. With
//! restarts on ([`World::set_restarts`]), the killed run's instance then gets a new execution
//! environment ([`World::restart`]), as Lambda replaces one after a killed invocation.
//! While [`World::set_edge_crash_rate`] is above 0, a relay pass (what it had not acknowledged
//! the stream hands again) or a delivery batch (nothing deleted: its events come back, those
//! already posted included) may be killed too, between two of its calls
//! (`seatgate_memory::kill`: the store answers in no simulated time, so a kill timed in
//! milliseconds would never land between its writes).
//!
//! Bounds, every one stated:
//! - every loop checks [`World::stopping`] on each turn and ends at the world's horizon, and
//!   every turn waits at least 1 ms of simulated time, so a loop turns at most horizon / 1 ms
//!   times (in practice once per piece of work, or per [`LONG_POLL`] while idle);
//! - a relay pass takes at most `relay_batch` records; a worker batch at most `worker_batch`
//!   (clamped to 10, SQS FIFO's maximum) messages and one `worker_timeout`; a delivery batch at
//!   most 10 events; a reaper pass at most `PASS_LIMIT` intents and its own budget;
//! - the subscribers' record keeps at most [`DELIVERY_LOG_CAPACITY`] events.
//!
//! Order: the drivers are spawned in a fixed order (relay, workers by instance, delivery,
//! reaper), and tokio's current-thread scheduler runs ready tasks first in, first out, so on
//! paused time every run interleaves them the same way.

use crate::aws::Dist;
use crate::world::World;
use async_trait::async_trait;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use seatgate::domain::Event;
use seatgate::handlers::schedule::PASS_LIMIT;
use seatgate::ports::{Delivery, PublishError, QueueConsumer, Subscribers};
use seatgate::service::{EventRecord, QueueRecord};
use seatgate_memory::Feed;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::task::JoinHandle;

/// The pause after a turn that found work: time moves on each turn, however busy.
const BUSY_GAP: Duration = Duration::from_millis(1);

/// The longest an idle pump waits without being woken: SQS's longest long poll
/// (`WaitTimeSeconds` 20). A pump is woken sooner by its feed or its feed's due time, so this
/// only bounds a wait nothing would end.
const LONG_POLL: Duration = Duration::from_secs(20);

/// SQS's most messages per receive (FIFO batches included).
const SQS_MAX_BATCH: usize = 10;

/// Events the subscribers' record keeps at most.
pub const DELIVERY_LOG_CAPACITY: usize = 1_000_000;

/// Starts every driver; their handles, for [`World::shutdown`].
pub(crate) fn spawn_all(world: &World) -> Vec<JoinHandle<()>> {
    let mut handles = vec![tokio::spawn(relay_pump(world.clone()))];
    for i in 0..world.instance_count() {
        handles.push(tokio::spawn(worker_pump(world.clone(), i)));
    }
    handles.push(tokio::spawn(delivery_pump(world.clone())));
    handles.push(tokio::spawn(reaper_loop(world.clone())));
    handles
}

/// The stream's event source mapping: a pass as soon as the stream has records for it (after
/// a seeded pickup delay), and again at once while passes come back full.
async fn relay_pump(world: World) {
    let (interval, max) = (world.config().relay_interval, world.config().relay_batch);
    let backend = world.backend().clone();
    let delivery = world.config().aws.as_ref().map(|p| p.stream_delivery);
    let mut pickup = Pickup::new(&world, 0x72_656c_6179, interval, delivery); // "relay"
    let mut crash = Crash::new(&world, 0x726b_696c_6c00); // "rkill"
    while !world.stopping() {
        let stop = world.stop_signal().notified();
        let fed = backend.feed(Feed::Changes).notified();
        tokio::pin!(stop, fed);
        stop.as_mut().enable();
        fed.as_mut().enable();
        let pass = backend.relay_once(world.relay(), max);
        let passed = match crash.draw_edge(&world) {
            None => pass.await,
            // Killed mid-pass: what it sent stays sent, and what it had not acknowledged the
            // stream hands again on the next pass, as it re-invokes after a killed Lambda.
            Some(calls) => match seatgate_memory::kill::killed_after(calls, pass).await {
                (passed, false) => passed,
                (_, true) => {
                    world.record_edge_kill();
                    tokio::time::sleep(BUSY_GAP).await;
                    continue;
                }
            },
        };
        match passed {
            Ok(relayed) if relayed.handled == max => tokio::time::sleep(BUSY_GAP).await,
            // A failed record waits out its backoff (its due time); a store error is retried
            // after the mapping's poll interval, as the mapping retries.
            Ok(_) => idle(&world, Feed::Changes, &mut pickup, fed, stop).await,
            Err(_) => tokio::time::sleep(interval).await,
        }
    }
}

/// One SQS event source mapping poller for instance `i`'s worker (one unit of concurrency).
async fn worker_pump(world: World, i: usize) {
    let config = world.config();
    let (poll, batch) = (
        config.worker_poll,
        config.worker_batch.clamp(1, SQS_MAX_BATCH),
    );
    let timeout = config.timing.worker_timeout;
    let backend = world.backend().clone();
    let delivery = config.aws.as_ref().map(|p| p.fifo_delivery);
    let mut pickup = Pickup::new(&world, 0x776f_726b_0000 | i as u64, poll, delivery); // "work"
    // On the AWS profile, an environment's first batch pays its cold start.
    let cold_start = config.aws.as_ref().map(|p| p.cold_start);
    let mut warm: Option<usize> = None;
    let mut crash = Crash::new(&world, 0x6b69_6c6c_0000 | i as u64); // "kill"
    let on_aws = config.aws.is_some();
    while !world.stopping() {
        let stop = world.stop_signal().notified();
        let fed = backend.feed(Feed::SeatQueue).notified();
        tokio::pin!(stop, fed);
        stop.as_mut().enable();
        fed.as_mut().enable();
        // A failed receive is an empty one: the pump waits as after an empty poll.
        let received: Vec<Delivery> = QueueConsumer::receive(&backend, batch)
            .await
            .unwrap_or_default();
        if received.is_empty() {
            idle(&world, Feed::SeatQueue, &mut pickup, fed, stop).await;
            continue;
        }
        let records: Vec<QueueRecord> = received.iter().map(queue_record).collect();
        let instance = world.instance(i);
        if let Some(init) = cold_start
            && warm != Some(instance.generation)
        {
            warm = Some(instance.generation);
            tokio::time::sleep(pickup.init(init)).await;
        }
        // The function's timeout bounds the batch, and a crash may cut it sooner; cut short,
        // nothing is deleted.
        let cut = crash.draw(&world).unwrap_or(timeout).min(timeout);
        let started = world.now();
        let batch = tokio::time::timeout(cut, instance.worker.handle_batch(&records)).await;
        if batch.is_err() && cut < timeout {
            world.record_kill(instance.caller, started);
            world.after_kill(i);
        }
        if let Ok(failed) = batch {
            let receipts = receipts_to_delete(&received, &failed);
            // A failed delete leaves the messages to return after their visibility timeout,
            // which the worker tolerates (a stale message is a no-op).
            let _ = QueueConsumer::delete(&backend, &receipts).await;
        }
        // A real mapping receives and invokes again for every batch, not only after an idle
        // wait: on the AWS profile the next batch comes a delivery latency later (SQS FIFO to
        // Lambda, p50 28 ms), however much is waiting.
        let gap = if on_aws {
            pickup.draw().max(BUSY_GAP)
        } else {
            BUSY_GAP
        };
        tokio::time::sleep(gap).await;
    }
}

/// The event queue's mapping: batches of terminal-intent events to the deliverer (built on
/// instance 0, posting to the recording subscribers), the delivered ones deleted.
async fn delivery_pump(world: World) {
    let poll = world.config().delivery_poll;
    let backend = world.backend().clone();
    let events = backend.events();
    let subscribers =
        crate::plant::wrap_subscribers(Arc::new(world.recording().clone()), &world.config().plants);
    let deliverer = world
        .instance(0)
        .services
        .deliverer(subscribers, Some(Arc::new(events.clone())));
    let delivery = world.config().aws.as_ref().map(|p| p.standard_delivery);
    let mut pickup = Pickup::new(&world, 0x6576_656e_7473, poll, delivery); // "events"
    let mut crash = Crash::new(&world, 0x646b_696c_6c00); // "dkill"
    while !world.stopping() {
        let stop = world.stop_signal().notified();
        let fed = backend.feed(Feed::Events).notified();
        tokio::pin!(stop, fed);
        stop.as_mut().enable();
        fed.as_mut().enable();
        let received: Vec<Delivery> = QueueConsumer::receive(&events, SQS_MAX_BATCH)
            .await
            .unwrap_or_default();
        if received.is_empty() {
            idle(&world, Feed::Events, &mut pickup, fed, stop).await;
            continue;
        }
        let records: Vec<EventRecord> = received
            .iter()
            .map(|d| EventRecord {
                message_id: d.message_id.clone(),
                body: d.body.clone(),
                receipt: d.receipt.clone(),
                receive_count: d.receive_count,
            })
            .collect();
        let batch = deliverer.handle_batch(&records);
        let failed = match crash.draw_edge(&world) {
            None => Some(batch.await),
            Some(calls) => match seatgate_memory::kill::killed_after(calls, batch).await {
                (failed, false) => Some(failed),
                (_, true) => None,
            },
        };
        match failed {
            Some(failed) => {
                let _ =
                    QueueConsumer::delete(&events, &receipts_to_delete(&received, &failed)).await;
            }
            // Killed mid-batch: nothing deleted, so every event of it comes back after its
            // visibility timeout, those already posted included (delivery is at least once).
            None => world.record_edge_kill(),
        }
        tokio::time::sleep(BUSY_GAP).await;
    }
}

/// A mapping's delay in seeing new work: drawn per pickup from the pump's own seeded stream,
/// up to its poll interval, so that pumps woken by one write do not all act in the same
/// instant and the runs keep the spread of interleavings a polling mapping gives.
///
/// On the AWS timing profile ([`crate::WorldConfig::aws`]) the delay is the mapping's
/// published delivery latency instead (`delivery`), drawn from the same stream.
struct Pickup {
    rng: StdRng,
    most_ms: u64,
    delivery: Option<Dist>,
}

impl Pickup {
    fn new(world: &World, salt: u64, most: Duration, delivery: Option<Dist>) -> Self {
        Pickup {
            rng: StdRng::seed_from_u64(world.config().seed ^ salt.rotate_left(17)),
            most_ms: most.as_millis() as u64,
            delivery,
        }
    }

    /// An environment's init time, from the pump's stream.
    fn init(&mut self, cold_start: Dist) -> Duration {
        cold_start.draw(&mut self.rng)
    }

    fn draw(&mut self) -> Duration {
        match self.delivery {
            Some(dist) => dist.draw(&mut self.rng),
            None => Duration::from_millis(self.rng.random_range(0..=self.most_ms)),
        }
    }
}

/// Whether a run of a function is killed, and when: drawn from the driver's own seeded stream,
/// only while crashes strike ([`World::set_crash_rate`]), so a world without them draws
/// nothing and runs as before.
struct Crash {
    rng: StdRng,
}

impl Crash {
    /// The latest a crash strikes after the run starts: past it, the short runs here (a batch
    /// or a pass takes tens of milliseconds of upstream latency) are mostly done.
    const WITHIN_MS: u64 = 200;

    fn new(world: &World, salt: u64) -> Self {
        Crash {
            rng: StdRng::seed_from_u64(world.config().seed ^ salt.rotate_left(29)),
        }
    }

    /// `Some(after)`: kill this run `after` its start (a run done by then is not killed).
    fn draw(&mut self, world: &World) -> Option<Duration> {
        self.draw_at(world.crash_rate(), Self::WITHIN_MS)
    }

    fn draw_at(&mut self, rate: f64, within_ms: u64) -> Option<Duration> {
        if rate <= 0.0 || !self.rng.random_bool(rate) {
            return None;
        }
        Some(Duration::from_millis(self.rng.random_range(0..=within_ms)))
    }

    /// For a run at the edges ([`World::set_edge_crash_rate`]): `Some(n)`, killed after its
    /// first `n` calls (`seatgate_memory::kill`).
    fn draw_edge(&mut self, world: &World) -> Option<u32> {
        let rate = world.edge_crash_rate();
        if rate <= 0.0 || !self.rng.random_bool(rate) {
            return None;
        }
        Some(
            self.rng
                .random_range(0..=crate::world::EDGE_KILL_WITHIN_CALLS),
        )
    }
}

/// An idle pump's wait: until `feed` gives it work (then its pickup delay), time alone does
/// (the feed's next due time), the world stops, or [`LONG_POLL`] passes, whichever is first;
/// never past the world's horizon. Every wait is at least [`BUSY_GAP`], so a pump turns at
/// most horizon / 1 ms times.
async fn idle(
    world: &World,
    feed: Feed,
    pickup: &mut Pickup,
    fed: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
    stop: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
) {
    let now = world.now();
    let horizon_left = world.config().horizon.saturating_sub(world.elapsed());
    let due = world
        .backend()
        .next_due(feed)
        .map_or(LONG_POLL, |at| at.since(now));
    let wait = due.min(LONG_POLL).min(horizon_left).max(BUSY_GAP);
    tokio::select! {
        biased;
        () = stop => {}
        () = fed => tokio::time::sleep(pickup.draw().max(BUSY_GAP)).await,
        () = tokio::time::sleep(wait) => {}
    }
}

/// The schedule: a reaper run every `reaper_interval`, on the instances in turn (each
/// invocation lands on some execution environment; turning makes each instance's breaker and
/// caches take part). Between ticks, each wake-up that comes due on the fleet's wake-up queue
/// ([`World::wakes`]) gives a wake run ([`seatgate::service::Reaper::wake`]) on the next
/// instance in turn, after the queue's delivery latency (SQS standard to Lambda on the AWS
/// profile); the ticks keep their period. Bound: a turn per tick and per wake-up asked, each
/// waiting at least [`BUSY_GAP`].
async fn reaper_loop(world: World) {
    let interval = world.config().reaper_interval.max(BUSY_GAP);
    let delivery = world.config().aws.as_ref().map(|p| p.standard_delivery);
    let mut pickup = Pickup::new(
        &world,
        0x7761_6b65_0000,
        world.config().worker_poll,
        delivery,
    ); // "wake"
    let mut pass = 0usize;
    let mut crash = Crash::new(&world, 0x7265_6170_0000); // "reap"
    let mut next_tick = world.now().plus(interval);

    while !world.stopping() {
        let stop = world.stop_signal().notified();
        let asked = world.wakes().changed().notified();
        tokio::pin!(stop, asked);
        stop.as_mut().enable();
        asked.as_mut().enable();
        if world.stopping() {
            break;
        }
        let until = world.wakes().next().map_or(next_tick, |w| w.min(next_tick));
        let wait = until.since(world.now()).max(BUSY_GAP);
        tokio::select! {
            biased;
            () = stop => break,
            // A wake-up asked for meanwhile may come before `until`: look again.
            () = asked => {
                tokio::time::sleep(BUSY_GAP).await;
                continue;
            }
            () = tokio::time::sleep(wait) => {}
        }
        if world.stopping() {
            break;
        }
        let now = world.now();
        let woken = if now >= next_tick {
            while next_tick <= now {
                next_tick = next_tick.plus(interval);
            }
            false
        } else if world.wakes().take_due(now) {
            tokio::time::sleep(pickup.draw().max(BUSY_GAP)).await;
            world.record_wake_run();
            true
        } else {
            continue;
        };
        let instance = world.instance(pass);
        let run = async {
            if woken {
                instance.reaper.wake(PASS_LIMIT).await
            } else {
                instance.reaper.run(PASS_LIMIT).await
            }
        };
        // A crash kills the run where it is; the next one (on another instance) takes over.
        match crash.draw(&world) {
            Some(cut) => {
                let started = world.now();
                if tokio::time::timeout(cut, run).await.is_err() {
                    world.record_kill(instance.caller, started);
                    world.after_kill(instance.index);
                }
            }
            None => {
                let _ = run.await;
            }
        }
        pass = pass.wrapping_add(1);
    }
}

fn queue_record(d: &Delivery) -> QueueRecord {
    QueueRecord {
        message_id: d.message_id.clone(),
        group_id: d.group_id.clone(),
        body: d.body.clone(),
        receipt: d.receipt.clone(),
    }
}

/// Receipts to delete after a batch that reported `failed` message ids; an id naming no
/// message of the batch fails the whole batch, as the SQS event source mapping does.
fn receipts_to_delete(batch: &[Delivery], failed: &[String]) -> Vec<String> {
    let failed: BTreeSet<&str> = failed.iter().map(String::as_str).collect();
    if !failed
        .iter()
        .all(|id| batch.iter().any(|d| d.message_id == *id))
    {
        return Vec::new();
    }
    batch
        .iter()
        .filter(|d| !failed.contains(d.message_id.as_str()))
        .map(|d| d.receipt.clone())
        .collect()
}

/// How the subscribers misbehave while the faults strike ([`World::set_subscriber_faults`]): a
/// share of posts answered with an error (a webhook's 5xx), and a share held up first (a slow
/// receiver), each drawn from their own seeded stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SubscriberFaults {
    pub seed: u64,
    pub fail_rate: f64,
    pub slow_rate: f64,
    /// The longest a slow post is held up.
    pub slow_max: Duration,
    /// The share of events the subscribers refuse every time while the faults last (a
    /// receiver whose bug rejects some payloads until it is fixed): drawn once per event id,
    /// so such an event runs out of receives and is dead-lettered, for an operator to see and
    /// redrive once the receiver is fixed.
    pub poison_rate: f64,
}

/// Subscriber faults while they strike: their draws, and which event ids were drawn poisoned.
struct Striking {
    faults: SubscriberFaults,
    rng: StdRng,
    /// Bounded by the events made in one run (each id drawn once).
    poisoned: BTreeMap<String, bool>,
}

/// Subscribers that record every event they accept: the record of what reached them. With
/// faults set they refuse or delay some posts first ([`SubscriberFaults`]); a refused event is
/// not recorded (it did not reach them).
#[derive(Clone, Default)]
pub(crate) struct Recording {
    lines: Arc<Mutex<Vec<String>>>,
    faults: Arc<Mutex<Option<Striking>>>,
    refused: Arc<std::sync::atomic::AtomicU64>,
}

impl Recording {
    pub(crate) fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set_faults(&self, faults: Option<SubscriberFaults>) {
        *self.faults.lock().unwrap_or_else(PoisonError::into_inner) = faults.map(|f| Striking {
            faults: f,
            rng: StdRng::seed_from_u64(f.seed),
            poisoned: BTreeMap::new(),
        });
    }

    /// Posts refused so far.
    pub(crate) fn refused(&self) -> u64 {
        self.refused.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The fate of a post of `event_id`: held up for how long, and whether it is refused.
    fn draw(&self, event_id: &str) -> (Option<Duration>, bool) {
        let mut faults = self.faults.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(Striking {
            faults: f,
            rng,
            poisoned,
        }) = faults.as_mut()
        else {
            return (None, false);
        };
        let slow = rng
            .random_bool(f.slow_rate)
            .then(|| Duration::from_millis(rng.random_range(0..=f.slow_max.as_millis() as u64)));
        let refused = rng.random_bool(f.fail_rate);
        // No draw without poison, so the histories made before it existed stay as they were.
        let poison = f.poison_rate > 0.0
            && *poisoned
                .entry(event_id.to_owned())
                .or_insert_with(|| rng.random_bool(f.poison_rate));
        (slow, refused || poison)
    }
}

#[async_trait]
impl Subscribers for Recording {
    async fn publish(&self, event: &Event) -> Result<(), PublishError> {
        // A post is a call of a delivery batch's budget: a batch killed before it never posts.
        if !seatgate_memory::kill::spend() {
            return Err(PublishError("the function was killed".into()));
        }
        let (slow, refuse) = self.draw(event.event_id());
        if let Some(delay) = slow {
            tokio::time::sleep(delay).await;
        }
        if refuse {
            self.refused
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            return Err(PublishError("the subscriber answered 503".into()));
        }
        let mut lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.len() < DELIVERY_LOG_CAPACITY {
            lines.push(format!("{} {}", event.event_id(), event.event_type()));
        }
        Ok(())
    }
}
