//! A seeded scenario, run twice per seed: the store's write log, the upstream's call log and
//! the subscribers' deliveries must be equal byte for byte (issue 18, part 4). Two different
//! seeds must give different logs, so the comparison can fail; and the scenario's outcomes are
//! asserted, so it is not vacuous.
//!
//! The scenario, on three instances over the local timing, with seeded upstream latency and
//! seat-read faults throughout:
//! - (a) a burst: 24 users confirm seat B-1 at once, from all instances; then a 25th registers
//!   a wait for it, the winner gives the seat up upstream, and the wait gets it;
//! - (c) a flash sale, during the burst: 40 users book one seat each of a 20-seat flight over
//!   2 shards, every fourth retrying under the same `Idempotency-Key` from another instance,
//!   every fifth that got a seat cancelling it;
//! - (b) then a lost response: the next committed reserve loses its answer; the worker hears a
//!   timeout, and the reaper settles the intent by reading the user's charge, never by sending
//!   the reserve again.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use seatgate::domain::{
    BookingAnswer, BookingStatus, FlightId, IdempotencyKey, IntentStatus, SeatId,
};
use seatgate_sim::memory::Chaos;
use seatgate_sim::{Client, Faults, Route, Run, World, WorldConfig, first_difference, simulate};
use std::time::{Duration, Instant};

/// The fixed seeds; each is run twice.
const SEEDS: [u64; 4] = [1, 7, 42, 20_260_101];

/// Seeds run twice under store and upstream chaos (outcomes not asserted beyond the bank).
const CHAOS_SEEDS: [u64; 4] = [3, 11, 99, 4_242];

const BURST: usize = 24;
const FLYERS: usize = 40;
const CAPACITY: u32 = 20;

/// What the scenario saw, for its own assertions (and compared between runs too).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    /// One line per client answer, in a fixed order (by user).
    lines: Vec<String>,
    burst_succeeded: usize,
    waiter: String,
    lost: String,
    booked_answers: usize,
    sold_out_answers: usize,
    cancelled: usize,
    /// Whether the world got quiet before the lost response, and at the end.
    quiet: Vec<bool>,
}

fn seat(s: &str) -> SeatId {
    SeatId::parse(s).unwrap()
}

fn config(seed: u64) -> WorldConfig {
    let mut config = WorldConfig::new(seed);
    config.horizon = Duration::from_secs(150);
    config
}

/// Strict: the faults the outcomes are asserted under. Chaos: store writes fail 3% of the time
/// (throttled, conflicted, answer lost), every upstream route answers 500 (20%) or 429 (10%),
/// and a fifth of committed reserves lose their answer: only determinism, the bank and
/// idempotency are asserted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Strict,
    Chaos,
}

async fn scenario(world: World, mode: Mode) -> Seen {
    let seed = world.config().seed;
    // The scenario's own choices (start offsets) come from the seed too.
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5ce_a410);
    world.upstream().set_faults(Faults {
        latency: Duration::from_millis(5),
        jitter: Duration::from_millis(40),
        ..Faults::default()
    });
    let instances = world.instance_count();

    // Set-up: users and their credentials, the flight.
    let mut burst = Vec::new();
    for i in 0..BURST {
        burst.push(world.enrol(&format!("burst-{i:02}"), i % instances).await);
    }
    let waiter = world.enrol("waiter", 1).await;
    let lost = world.enrol("lost-1", 2).await;
    let flight = FlightId::parse("FL-1").unwrap();
    world
        .instance(0)
        .api
        .flights()
        .create(flight.clone(), CAPACITY, None, 2)
        .await
        .expect("the flight is created");
    // Seat reads fail now and then (5xx, 429), as a fragile upstream's do.
    let mut faults = Faults {
        latency: Duration::from_millis(5),
        jitter: Duration::from_millis(40),
        error_rate: 0.1,
        busy_rate: 0.05,
        busy_retry_after: Duration::from_secs(1),
        routes: Some(vec![Route::Seat]),
        ..Faults::default()
    };
    if mode == Mode::Chaos {
        faults.routes = None;
        faults.error_rate = 0.2;
        faults.busy_rate = 0.1;
        faults.lost_commit_rate = 0.2;
        world
            .backend()
            .set_chaos(Some(Chaos::writes(seed ^ 0xc4a05, 0.03)));
    }
    world.upstream().set_faults(faults);

    // (a) the burst and (c) the flash sale, at once.
    let b1 = seat("B-1");
    let mut tasks = Vec::new();
    for client in burst.clone() {
        let (b1, offset) = (b1.clone(), rng.random_range(0..20u64));
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(offset)).await;
            let _ = client.seat(&b1).await;
            let line = match client.reserve(&b1).await {
                Ok(intent) => match client
                    .await_outcome(&intent.intent_id, Duration::from_secs(30))
                    .await
                {
                    Some(done) => Client::outcome(&done),
                    None => "not settled".into(),
                },
                Err(e) => format!("refused {e}"),
            };
            format!("{} {line}", client.user())
        }));
    }
    let mut sale = Vec::new();
    for i in 0..FLYERS {
        let client = world.client(&format!("fl-{i:02}"), i % instances);
        let (flight, offset) = (flight.clone(), rng.random_range(0..200u64));
        sale.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(offset)).await;
            let key = IdempotencyKey::parse(&format!("key-{i:02}")).unwrap();
            let first = client.book(&flight, 1, Some(&key)).await;
            let mut line = format!("{} {}", client.user(), answer(&first));
            if i % 4 == 0 {
                // A client that never heard its answer retries under the same key, elsewhere.
                let again = client.on(i + 1).book(&flight, 1, Some(&key)).await;
                line.push_str(if again == first {
                    " retried=same"
                } else {
                    " retried=DIFFERENT"
                });
            }
            let mut cancelled = false;
            if let (Ok(BookingAnswer::Booked { booking }), true) = (&first, i % 5 == 0) {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let once = client.cancel_booking(&flight, &booking.booking_id).await;
                // Cancelling again changes nothing and is not an error.
                let again = client.cancel_booking(&flight, &booking.booking_id).await;
                line.push_str(&format!(" cancel={once:?} again={again:?}"));
                cancelled = once.is_ok() || again.is_ok();
            }
            (line, first, cancelled)
        }));
    }
    let mut lines = Vec::new();
    let mut burst_succeeded = 0;
    for task in tasks {
        let line = task.await.expect("a burst client");
        burst_succeeded += usize::from(line.ends_with(" SUCCEEDED reserved"));
        lines.push(line);
    }
    let (mut booked_answers, mut sold_out_answers, mut cancelled) = (0, 0, 0);
    for task in sale {
        let (line, first, was_cancelled) = task.await.expect("a flyer");
        match first {
            Ok(BookingAnswer::Booked { .. }) => booked_answers += 1,
            Ok(BookingAnswer::SoldOut) => sold_out_answers += 1,
            _ => {}
        }
        cancelled += usize::from(was_cancelled);
        lines.push(line);
    }

    // A wait for the taken seat: it reads taken and waits; once the holder gives the seat up
    // upstream, the wait gets it.
    let until = world.now().plus(Duration::from_secs(600));
    let waited = match waiter.wait(&b1, until).await {
        Ok(wait) => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            if let Some(holder) = world.upstream().occupant(&b1) {
                world.upstream().release(&holder);
            }
            waiter
                .await_outcome(&wait.intent_id, Duration::from_secs(40))
                .await
                .map_or("not settled".into(), |i| Client::outcome(&i))
        }
        Err(e) => format!("not registered: {e}"),
    };
    lines.push(format!("waiter {waited}"));
    let mut quiet = vec![world.settle(Duration::from_secs(20)).await];

    // (b) the lost response.
    world.upstream().lose_next_commits(1);
    let settled = match lost.reserve(&seat("L-1")).await {
        Ok(intent) => lost
            .await_outcome(&intent.intent_id, Duration::from_secs(40))
            .await
            .map_or("not settled".into(), |i| Client::outcome(&i)),
        Err(e) => format!("not confirmed: {e}"),
    };
    lines.push(format!("lost-1 {settled}"));
    quiet.push(world.settle(Duration::from_secs(20)).await);

    Seen {
        lines,
        burst_succeeded,
        waiter: waited,
        lost: settled,
        booked_answers,
        sold_out_answers,
        cancelled,
        quiet,
    }
}

fn answer(a: &Result<BookingAnswer, String>) -> String {
    match a {
        Ok(BookingAnswer::Booked { booking }) => {
            format!("booked shard={} {}", booking.shard, booking.booking_id)
        }
        Ok(BookingAnswer::Held { hold }) => format!("held shard={} {}", hold.shard, hold.hold_id),
        Ok(BookingAnswer::SoldOut) => "sold_out".into(),
        Ok(BookingAnswer::LimitReached) => "limit_reached".into(),
        Ok(BookingAnswer::HoldExists) => "hold_exists".into(),
        Ok(BookingAnswer::NoSuchFlight) => "no_such_flight".into(),
        Err(e) => format!("error {e}"),
    }
}

/// The scenario's outcomes: what makes the run worth comparing.
fn check(seed: u64, run: &Run<Seen>) {
    let seen = &run.value;
    let upstream_lines = &run.calls;
    let reserves_of = |s: &str| {
        upstream_lines
            .iter()
            .filter(|l| l.contains(&format!("POST /api/reservations seat={s} ")))
            .count()
    };
    // (a) one reserve write for the whole burst, and one winner.
    assert_eq!(
        seen.burst_succeeded, 1,
        "seed {seed}: one winner: {:#?}",
        seen.lines
    );
    assert_eq!(
        reserves_of("B-1"),
        2,
        "seed {seed}: one reserve for the burst, one for the wait"
    );
    let losers = seen.lines[..BURST]
        .iter()
        .filter(|l| l.ends_with("FAILED_RACE seat_taken"))
        .count();
    assert_eq!(
        losers,
        BURST - 1,
        "seed {seed}: every other confirm lost the race: {:#?}",
        seen.lines
    );
    assert_eq!(
        seen.waiter, "SUCCEEDED reserved",
        "seed {seed}: the wait got the freed seat"
    );
    // (b) settled by reading the charge: one reserve, its answer lost, a charge read.
    assert_eq!(
        seen.lost, "SUCCEEDED charge_read",
        "seed {seed}: the reaper settled the lost answer"
    );
    assert_eq!(
        reserves_of("L-1"),
        1,
        "seed {seed}: the reserve was never sent again"
    );
    assert!(
        upstream_lines
            .iter()
            .any(|l| l.contains("GET /api/charge user=lost-1 -> 200")),
        "seed {seed}: the reaper read the charge"
    );
    assert!(
        upstream_lines
            .iter()
            .any(|l| l.contains("seat=L-1 user=lost-1 -> 201") && l.ends_with("(answer lost)")),
        "seed {seed}: the commit's answer was lost"
    );
    // (c) never oversold; the store's bookings are the answers'.
    assert_bank(seed, run);
    assert!(
        !seen.lines.iter().any(|l| l.contains("retried=DIFFERENT")),
        "seed {seed}: a retried key got the first answer"
    );
    assert_eq!(
        run.snapshot.bookings.len(),
        seen.booked_answers,
        "seed {seed}: one booking per booked answer"
    );
    assert!(
        seen.booked_answers as u32 >= CAPACITY,
        "seed {seed}: the flight sold out"
    );
    assert!(seen.sold_out_answers > 0, "seed {seed}: some were too late");
    assert!(seen.cancelled > 0, "seed {seed}: some cancelled");
    assert_eq!(
        run.snapshot
            .bookings
            .iter()
            .filter(|b| b.status == BookingStatus::Cancelled)
            .count(),
        seen.cancelled,
        "seed {seed}: each cancel once"
    );
    // Everything settled.
    assert_eq!(
        seen.quiet,
        [true, true],
        "seed {seed}: quiet after each phase"
    );
    assert!(run.snapshot.intents.iter().all(|i| i.status.is_terminal()));
    assert!(
        run.snapshot
            .intents
            .iter()
            .any(|i| i.status == IntentStatus::Succeeded)
    );
}

/// The bank: booked + available = capacity, never below zero (the counts are unsigned: a
/// shard below zero would not decode).
fn assert_bank(seed: u64, run: &Run<Seen>) {
    let inventory = &run.snapshot.flights[0];
    let booked: u32 = run
        .snapshot
        .bookings
        .iter()
        .filter(|b| b.status == BookingStatus::Booked)
        .map(|b| b.head_count)
        .sum();
    assert_eq!(
        booked + inventory.available(),
        CAPACITY,
        "seed {seed}: booked + available = capacity"
    );
}

fn compare(seed: u64, a: &Run<Seen>, b: &Run<Seen>) {
    for (what, x, y) in [
        ("write log", &a.writes, &b.writes),
        ("upstream call log", &a.calls, &b.calls),
        ("deliveries", &a.deliveries, &b.deliveries),
        ("client answers", &a.value.lines, &b.value.lines),
    ] {
        if let Some(diff) = first_difference(what, x, y) {
            panic!("seed {seed}: two runs differ\n{diff}");
        }
    }
    assert_eq!(a.snapshot, b.snapshot, "seed {seed}: the final state");
}

fn run(seed: u64, mode: Mode) -> Run<Seen> {
    simulate(config(seed), move |world| scenario(world, mode))
}

/// Runs `seed` twice and compares the runs; the first run, for its checks.
fn twice(seed: u64, mode: Mode) -> Run<Seen> {
    let started = Instant::now();
    let (first, second) = (run(seed, mode), run(seed, mode));
    compare(seed, &first, &second);
    eprintln!(
        "{mode:?} seed {seed}: digest {}, {} writes, {} upstream calls, {} deliveries, {:?} simulated; two runs in {:?}",
        first.digest(),
        first.writes.len(),
        first.calls.len(),
        first.deliveries.len(),
        first.elapsed,
        started.elapsed()
    );
    first
}

#[test]
fn a_seed_replays_byte_for_byte() {
    for seed in SEEDS {
        let first = twice(seed, Mode::Strict);
        check(seed, &first);
    }
}

#[test]
fn a_seed_replays_byte_for_byte_under_chaos() {
    for seed in CHAOS_SEEDS {
        let first = twice(seed, Mode::Chaos);
        assert!(
            !first
                .value
                .lines
                .iter()
                .any(|l| l.contains("retried=DIFFERENT") && l.contains("booked")),
            "seed {seed}: a booking retried under its key was answered otherwise: {:#?}",
            first.value.lines
        );
        assert_bank(seed, &first);
        assert!(
            first.calls.iter().any(|l| l.contains(" -> 500")
                || l.contains(" -> 429")
                || l.contains("answer lost")),
            "seed {seed}: the chaos struck"
        );
    }
}

#[test]
fn another_seed_gives_another_history() {
    let (a, b) = (run(SEEDS[0], Mode::Strict), run(SEEDS[1], Mode::Strict));
    check(SEEDS[0], &a);
    check(SEEDS[1], &b);
    assert!(
        first_difference("write log", &a.writes, &b.writes).is_some(),
        "the write logs must differ"
    );
    assert!(
        first_difference("call log", &a.calls, &b.calls).is_some(),
        "the call logs must differ"
    );
}

/// A longer hunt for nondeterminism, by hand: `SIM_SEEDS=500 cargo test -p seatgate-sim --test
/// determinism many_seeds -- --ignored` runs seeds 0..500 twice each, in both modes, with the
/// strict checks.
#[test]
#[ignore]
fn many_seeds() {
    let n: u64 = std::env::var("SIM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    for seed in 0..n {
        check(seed, &twice(seed, Mode::Strict));
        assert_bank(seed, &twice(seed, Mode::Chaos));
    }
}
