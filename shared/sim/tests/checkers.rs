//! The checkers over the default workload (issue 19, first slice): a fixed set of seeds under
//! every fault comes out clean, a seed replays to the same verdict, and the bank is shown
//! catching a cancel returned twice and a booking without seats on doctored ledgers of a real
//! run. That each checker catches the planted bug meant for it is `tests/plants.rs`.

use seatgate::domain::{BookingAnswer, FlightId, IdempotencyKey};
use seatgate_sim::checkers::{self, Ledger, Record};
use seatgate_sim::workload::Mix;
use seatgate_sim::{
    Checker, FaultsSpec, Plant, WorldConfig, check_mix, check_planted, check_seed, simulate,
};
use std::time::Instant;

/// Clean seeds, each run once under every fault.
const SEEDS: [u64; 9] = [1, 2, 3, 4, 5, 6, 7, 8, 9];

/// Seeds that show a finding since fixed, each kept as a regression test with its checker.
/// Each was found again on today's workload by undoing its fix and scanning seeds 1..=200 (the
/// seeds that first found them no longer replay the same histories since the workload grew):
/// - spared, seed 88 (and 91, 117, 120, 133, 157, 174, 198 with the fix undone; first found at
///   seed 11): the write of a `Retry-After` hold was refused by the store and not retried, so
///   only the instance that heard it held the route and the others called into the window.
///   `Breaker::hold` now retries the write (a hold only moves later, so a repeat is harmless);
/// - no-rewrite, seed 94 (and 88, 135 with the fix undone; first found at seed 8): a user who
///   was never told they won a seat (they stopped polling) asked for it again after its
///   suppression window, and a second reserve for that (user, seat) reached the upstream,
///   which answered `seat_taken`: a loss reported for a seat they held. The seat's suppression
///   record now outlives its window naming its winner, and the winner's later attempt reads
///   their charge before any reserve;
/// - no-rewrite, seed 169 (first found at seed 31): another user's attempt that found the seat
///   taken replaced that record and so forgot the winner. A found-taken record now keeps the
///   last winner (`Suppression::over`);
/// - reads, seed 73 (and 20, 42, 62, 75 of seeds 1..=100, all under store faults): a fresh
///   reading whose write the store refused was lost, so the next reader (the same instance,
///   taking its own refresh lease again) asked the upstream again inside the read TTL. The
///   reading's write is now retried (`SeatReads`);
/// - no-wasted-write, seed 156 (and 88, 168 of seeds 1..=200): a wait on a seat suppressed a
///   millisecond earlier trusted a `free` reading taken before the win (another instance's
///   in-process copy), and its reserve reached a seat this system had just won. A wait now
///   tries a suppressed seat only on a reading taken after the suppression began;
/// - no-wasted-write, seed 673 (and 1348, 3695, 3702, 4097, 18875, 19923 of seeds
///   1..=20,000): a group read its seat unsuppressed while an unknown outcome held it; the
///   reaper then settled the win (writing the suppression) and the group's next intent was
///   claimed and sent a reserve into it. The attempt now reads the seat's latest suppression
///   after its claim (the read it already made for the winner's charge check) and closes
///   itself as a lost race, without a call, if one is in force.
/// - reads, seed 250: a reserve's breaker probe read its seat, but the reading was not shared,
///   so a seat read 52 ms later went to the upstream again. The probe's reading is now
///   recorded in the shared readings (`GuardedUpstream::with_readings`).
/// - reads, seed 299 (found with the `replays` fault; seed 2153 without it): the probe's
///   reading met a transaction conflict on its one write, and the same instance read the seat
///   again 62 ms later. The probe's reading write is now tried again (`GuardedUpstream::ready`).
/// - reads, seed 2859 (found with late commits in the workload): another instance, holding the
///   refresh lease over a 10 s old reading, read a seat 23 ms after the breaker's probe read it
///   (the probe's reading was held up by a throttled write). The checker's fault, not the
///   fleet's: a probe goes past the refresh lease, so it now binds only its own instance
///   (`probe_reads_bind_their_own_instance_only`).
///
/// Seeds 1..=200 of the default workload scan clean with every fix in place. A scan of seeds
/// 1..=5,000 at `e363d21` (`seatgate-bench simulate --seeds 5000`) found only spared, at seeds
/// 590, 728, 1433, 3737 and 4007: another instance's seat read 2-10 ms after a busy answer,
/// before the hearer's hold had landed in the store, where that instance could first learn of
/// it. The checker was stricter than anything the fleet can know; it now judges other
/// instances from the hold's landing (`checkers::spared`'s doc), the five seeds are clean, and
/// `spared_holds_the_hearer_at_once_and_the_fleet_once_the_hold_lands` shows it still bites.
/// - no-wasted-write, seeds 15 and 24 (and 40 more of seeds 1..=1,000, found when clock steps
///   joined the default faults): a wait trusted a free seat reading taken just before a win,
///   because the reader's clock ran ahead of the winner's and stamped it after the win (seed
///   24: 1,018 ms later, the reading still inside its TTL). A wait now orders a reading after
///   a win only when its stamp is more than `CLOCK_TOLERANCE` later.
/// - reads, seeds 12310, 16231 and 56127 (found in the 100,000-seed run with clock steps): a
///   reserve's breaker probe read its seat, the store throttled the probe's reading write, and
///   inside the retry's 10-80 ms backoff the same instance's seat-read cache, finding nothing
///   fresh, refreshed the seat from the upstream. The probe's reading is now also held in
///   memory (`GuardedUpstream::probed`) and served by that instance's cache until the store
///   has it.
/// - liveness, seed 24 and 46 more of seeds 1..=2,000 (found when the wake-up rule joined the
///   checker): a wake-up asked for at a hold's end by an instance whose clock ran ahead was
///   run by one whose clock was behind it, which found the intent parked until then not yet
///   due; it waited for the schedule. A wake-up is now asked `WAKE_AFTER` (the clock
///   tolerance) past the time it is for.
/// - liveness, seeds 30316 and 48432 (of 1..=100,000): the breaker's reopening after a failed
///   probe landed with its answer lost, so its writer asked for no wake-up and the intents
///   parked behind it waited for the schedule. A breaker or hold write that errs now asks for
///   its wake-ups anyway.
/// - unknown, seeds 30127 and 54395 (of 1..=100,000), a checker fault: two reapers read a
///   timed-out attempt's charge in one millisecond and the later arrival answered first; the
///   settlement followed that answer, but the checker closed the window at the first arrival's
///   answer. It now closes at the earliest definite answer.
const FIXED: [(u64, Checker); 19] = [
    (88, Checker::Spared),
    (94, Checker::NoRewrite),
    (169, Checker::NoRewrite),
    (73, Checker::Reads),
    (156, Checker::NoWastedWrite),
    (673, Checker::NoWastedWrite),
    (250, Checker::Reads),
    (299, Checker::Reads),
    (2859, Checker::Reads),
    (15, Checker::NoWastedWrite),
    (24, Checker::NoWastedWrite),
    (12310, Checker::Reads),
    (16231, Checker::Reads),
    (56127, Checker::Reads),
    (24, Checker::Liveness),
    (30316, Checker::Liveness),
    (48432, Checker::Liveness),
    (30127, Checker::Unknown),
    (54395, Checker::Unknown),
];

#[test]
fn fixed_seeds_of_the_default_workload_are_clean() {
    let started = Instant::now();
    let mut dirty = Vec::new();
    for seed in SEEDS {
        let verdict = check_seed(seed, &FaultsSpec::all());
        eprintln!("{verdict}");
        assert!(verdict.quiet, "seed {seed}: the world got quiet: {verdict}");
        assert!(
            verdict.commits > 0,
            "seed {seed}: seats were won: {verdict}"
        );
        // The default users include holders and waiters (issue 39): each seed drives both.
        assert!(
            verdict.checkout_holds > 0 && verdict.wait_entries > 0,
            "seed {seed}: holds and waiting-list entries made: {verdict}"
        );
        if !verdict.is_clean() {
            dirty.push(verdict);
        }
    }
    let took = started.elapsed();
    eprintln!(
        "{} seeds in {took:?}: {:.2} seeds/s",
        SEEDS.len(),
        SEEDS.len() as f64 / took.as_secs_f64()
    );
    assert_clean("violations on clean seeds", &dirty);
}

#[test]
fn a_seed_replays_to_the_same_verdict() {
    let (a, b) = (
        check_seed(3, &FaultsSpec::all()),
        check_seed(3, &FaultsSpec::all()),
    );
    assert_eq!(
        a, b,
        "same seed, same verdict (digests {} / {})",
        a.digest, b.digest
    );
    let c = check_seed(4, &FaultsSpec::all());
    assert_ne!(a.digest, c.digest, "another seed, another history");
    let planted = (
        check_planted(5, &FaultsSpec::all(), Plant::RetryAfterIgnored),
        check_planted(5, &FaultsSpec::all(), Plant::RetryAfterIgnored),
    );
    assert_eq!(planted.0, planted.1, "a failing seed replays too");
}

/// Findings on the default workload since its holders and waiters joined it (issue 39), each
/// judged on it:
/// - truth, seed 61042 (of 1..=100,000), a checker fault: u-13 confirmed S-4 again while an
///   earlier intent of theirs on it was parked; the later one's reserve was answered
///   `already_charged`, and the earlier one, claimed 71 ms later on an instance whose clock ran
///   ahead, was lent that answer by the clock-skew widening of its span, so its honest
///   FAILED_RACE (u-04 won the seat) read as a lie. A call in two twins' widened spans now
///   counts for the nearer.
///
/// Judged on the workload they were found on: holders and waiters without the limited sale,
/// and every fault but the subscribers' (both came after), so each replays its own history.
const FIXED_WITH_EVERY_USER: [(u64, Checker); 1] = [(61042, Checker::Truth)];
const HOLDERS_AND_WAITERS: Mix = Mix {
    holders: true,
    waiters: true,
    limited: false,
    eager: false,
    operator: false,
};

/// Findings on the default workload with every kind of user (the eager client included) and
/// every fault, each judged on it:
/// - rate-window, seed 59 (and 11 more of 1..=1,000), a store fault in both the in-memory and
///   the embedded backend: a write to a new rate window dropped the user's previous window, and
///   an instance whose clock ran behind then counted in that previous window again from 1 (32
///   bookings admitted in a window of 30). A write now keeps the previous window
///   (`RateWindow::drop_before`; the contract case `a_window_stays_spent_after_the_next_one_opens`).
const FIXED_ON_THE_FULL_DEFAULT: [(u64, Checker); 1] = [(59, Checker::RateWindow)];
const EVERY_USER: Mix = Mix {
    holders: true,
    waiters: true,
    limited: true,
    eager: true,
    operator: false,
};

/// The fixed findings stay fixed: their seeds pass the checker that caught them.
#[test]
fn the_fixed_findings_stay_fixed() {
    for (seed, checker) in FIXED {
        // Found on the bookers alone, the default workload before issue 39, under every fault
        // then known.
        let verdict = check_mix(seed, &FaultsSpec::all_before_issue_39(), &[], Mix::none());
        assert!(
            !verdict.failed().contains(&checker),
            "seed {seed}: {verdict}"
        );
    }
    for (seed, checker) in FIXED_ON_THE_FULL_DEFAULT {
        let verdict = check_mix(seed, &FaultsSpec::all(), &[], EVERY_USER);
        assert!(
            !verdict.failed().contains(&checker),
            "seed {seed}: {verdict}"
        );
    }
    for (seed, checker) in FIXED_WITH_EVERY_USER {
        let verdict = check_mix(
            seed,
            &FaultsSpec::all_before_issue_39(),
            &[],
            HOLDERS_AND_WAITERS,
        );
        assert!(
            !verdict.failed().contains(&checker),
            "seed {seed}: {verdict}"
        );
    }
}

/// By hand: `SIM_SEEDS=200 cargo test -p seatgate-sim --test checkers many_clean_seeds --
/// --ignored` runs seeds 1..=N and prints the violations by checker, and what the replay
/// faults did. `SIM_FAULTS=replays` (any [`FaultsSpec::parse`] list) narrows the faults.
#[test]
#[ignore]
fn many_clean_seeds() {
    let n: u64 = std::env::var("SIM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let faults = std::env::var("SIM_FAULTS")
        .map(|f| FaultsSpec::parse(&f).expect("SIM_FAULTS names known faults"))
        .unwrap_or_default();
    let started = Instant::now();
    let mut by_checker = std::collections::BTreeMap::new();
    let mut failing = Vec::new();
    let mut replays = seatgate_sim::memory::ReplayCounts::default();
    for seed in 1..=n {
        let verdict = check_seed(seed, &faults);
        replays.lost_acks += verdict.replays.lost_acks;
        replays.replayed_records += verdict.replays.replayed_records;
        replays.duplicates += verdict.replays.duplicates;
        for (checker, count) in verdict.by_checker() {
            *by_checker.entry(checker).or_insert(0usize) += count;
        }
        if !verdict.is_clean() || !verdict.quiet {
            failing.push(seed);
        }
    }
    let took = started.elapsed();
    eprintln!(
        "{n} seeds (faults {faults}) in {took:?} ({:.2} seeds/s); violations by checker {by_checker:?}; failing or unquiet seeds {failing:?}; replays {replays:?}",
        n as f64 / took.as_secs_f64()
    );
}

/// The bank on a real run's ledger, then on the same ledger with a cancelled booking's seats
/// returned a second time and with a booking that took no seats: the first is clean, the
/// others are not, and no other checker is disturbed.
#[test]
fn the_bank_catches_a_cancel_returned_twice_and_a_booking_without_seats() {
    let config = WorldConfig::new(11);
    let (origin, timing) = (config.epoch, config.timing.clone());
    let run = simulate(config, |world| async move {
        let flight = FlightId::parse("FL-9").unwrap();
        world
            .instance(0)
            .api
            .flights()
            .create(flight.clone(), 6, None, 2)
            .await
            .unwrap();
        let client = world.client("bank-user", 0);
        let mut ids = Vec::new();
        for k in 0..3 {
            let key = IdempotencyKey::parse(&format!("bank-{k}")).unwrap();
            if let Ok(BookingAnswer::Booked { booking }) = client.book(&flight, 1, Some(&key)).await
            {
                ids.push(booking.booking_id);
            }
        }
        assert_eq!(ids.len(), 3, "three bookings");
        client.cancel_booking(&flight, &ids[0]).await.unwrap();
        world.settle(std::time::Duration::from_secs(5)).await;
    });
    let record = Record::of(&run, origin, &timing, Vec::new());
    assert!(
        checkers::check_all(&record).is_empty(),
        "the real run balances"
    );

    let ledger = record.ledgers.last().unwrap().clone();
    let cancelled = ledger
        .bookings
        .iter()
        .find(|b| b.cancelled_at.is_some())
        .unwrap()
        .clone();
    let mut twice: Ledger = ledger.clone();
    twice.flights[0].available[cancelled.shard as usize] += cancelled.head_count;
    let mut seatless: Ledger = ledger.clone();
    let mut extra = cancelled.clone();
    extra.status = seatgate::domain::BookingStatus::Booked;
    extra.cancelled_at = None;
    seatless.bookings.push(extra);
    for (what, doctored) in [
        ("a cancel returned twice", twice),
        ("a booking without seats", seatless),
    ] {
        let mut bent = record.clone();
        bent.ledgers.push(doctored);
        let found = checkers::check_all(&bent);
        assert_eq!(found.len(), 1, "{what}: {found:?}");
        assert_eq!(found[0].checker, Checker::Bank, "{what}: {found:?}");
        eprintln!("{what}: {}", found[0]);
    }
}

#[test]
fn faults_spec_parses_and_prints() {
    assert_eq!(FaultsSpec::parse("all").unwrap(), FaultsSpec::all());
    assert_eq!(FaultsSpec::parse("none").unwrap(), FaultsSpec::none());
    let some = FaultsSpec::parse("latency, store").unwrap();
    assert!(some.latency && some.store && !some.errors);
    assert_eq!(some.to_string(), "latency,store");
    assert_eq!(FaultsSpec::all().to_string(), "all");
    assert!(FaultsSpec::parse("earthquake").is_err());
    let replays = FaultsSpec::parse("replays").unwrap();
    assert!(replays.replays && !replays.store);
    assert_eq!(replays.to_string(), "replays");
    let steps = FaultsSpec::parse("clock-steps").unwrap();
    assert!(steps.clock_steps && !steps.crashes);
    assert_eq!(
        FaultsSpec::parse(&FaultsSpec::NAMES.join(",")).unwrap(),
        FaultsSpec::all()
    );
    let mut all_but_replays = FaultsSpec::all();
    all_but_replays.replays = false;
    assert_eq!(
        all_but_replays.to_string(),
        "latency,errors,busy,outage,lost-commits,late-commits,store,crashes,restarts,clock-steps,subscribers,edge-crashes,event-duplicates"
    );
    assert_eq!(
        FaultsSpec::all_before_issue_39().to_string(),
        "latency,errors,busy,outage,lost-commits,late-commits,store,replays,crashes,restarts,clock-steps"
    );
}

/// The replay faults alone (issue 19): seeds 1..=`REPLAY_SEEDS` under `replays` only come out
/// clean and quiet, and the faults struck (lost acknowledgements, records relayed again,
/// duplicates past deduplication), so the fault cannot silently be a no-op.
const REPLAY_SEEDS: u64 = 50;

#[test]
fn replays_alone_strike_and_leave_the_seeds_clean() {
    let faults = FaultsSpec::parse("replays").unwrap();
    let mut dirty = Vec::new();
    let mut total = seatgate_sim::memory::ReplayCounts::default();
    for seed in 1..=REPLAY_SEEDS {
        let verdict = check_seed(seed, &faults);
        total.lost_acks += verdict.replays.lost_acks;
        total.replayed_records += verdict.replays.replayed_records;
        total.duplicates += verdict.replays.duplicates;
        if !verdict.is_clean() || !verdict.quiet {
            dirty.push(verdict);
        }
    }
    eprintln!("{REPLAY_SEEDS} seeds under replays alone: {total:?}");
    assert!(
        total.lost_acks > 0 && total.replayed_records >= total.lost_acks && total.duplicates > 0,
        "the replay faults struck: {total:?}"
    );
    assert_clean("violations under replays", &dirty);
}

/// Crashes (worker batches and reaper passes killed mid-flight, as a Lambda is) strike and
/// leave every seed clean and quiet: nothing a killed run left mid-flight stays unresolved,
/// and nothing it did is done twice. With upstream latency beside them, as a run can only be
/// killed at an await that takes time (the in-memory store's calls complete at once; the
/// upstream's take their latency), which is where a kill matters: a reserve in flight.
#[test]
fn crashes_strike_and_leave_the_seeds_clean() {
    const CRASH_SEEDS: u64 = 20;
    let faults = FaultsSpec::parse("latency,crashes").unwrap();
    let mut dirty = Vec::new();
    let mut crashes = 0;
    for seed in 1..=CRASH_SEEDS {
        let verdict = check_seed(seed, &faults);
        crashes += verdict.crashes;
        if !verdict.is_clean() || !verdict.quiet {
            dirty.push(verdict);
        }
    }
    eprintln!("{CRASH_SEEDS} seeds under latency and crashes: {crashes} runs killed");
    assert!(crashes > 0, "the crashes struck");
    assert_clean("violations under crashes", &dirty);
}

/// Restarts: every killed run's instance comes back in a new execution environment (a new
/// holder id, empty caches, a new caller id in the upstream's record), and the seeds stay
/// clean and quiet: what the old environment knew only in memory (a breaker's cached state, a
/// route's hold it heard, its refresh leases by holder id) the new one learns from the store.
/// The restarts struck, and the new environments did call the upstream.
#[test]
fn restarts_give_killed_instances_new_environments_and_leave_the_seeds_clean() {
    const RESTART_SEEDS: u64 = 20;
    let faults = FaultsSpec::parse("latency,busy,crashes,restarts").unwrap();
    let mut dirty = Vec::new();
    let mut restarts = 0;
    for seed in 1..=RESTART_SEEDS {
        let verdict = check_seed(seed, &faults);
        restarts += verdict.restarts;
        if !verdict.is_clean() || !verdict.quiet {
            dirty.push(verdict);
        }
    }
    eprintln!(
        "{RESTART_SEEDS} seeds under latency, busy answers, crashes and restarts: {restarts} restarts"
    );
    assert!(restarts > 0, "the restarts struck");
    assert_clean("violations under restarts", &dirty);
    let config = seatgate_sim::workload::config(1, &[]);
    let run = simulate(config, |world| seatgate_sim::workload::run(world, faults));
    let reborn = run
        .call_record
        .iter()
        .filter(|c| {
            c.caller
                .is_some_and(|i| i >= seatgate_sim::workload::INSTANCES)
        })
        .count();
    assert!(
        run.value.restarts > 0 && reborn > 0,
        "seed 1: {} restarts, {reborn} calls from restarted environments",
        run.value.restarts
    );
}

/// The audit on doctored copies of a real run's record: a history record lost, a consent
/// record lost, a history that disagrees with its intent. The real record is clean.
#[test]
fn the_audit_catches_a_lost_history_record_a_lost_consent_and_a_disagreement() {
    let config = seatgate_sim::workload::config(3, &[]);
    let (origin, timing) = (config.epoch, config.timing.clone());
    let run = simulate(config, |world| {
        seatgate_sim::workload::run(world, FaultsSpec::all())
    });
    let record = Record::of(&run, origin, &timing, run.value.ledgers.clone());
    let audit = |r: &Record| {
        checkers::audit::check(r)
            .into_iter()
            .map(|v| v.message)
            .collect::<Vec<_>>()
    };
    assert_eq!(audit(&record), Vec::<String>::new(), "the real run");

    // The intent with the longest history, so a middle record can go.
    let (id, history) = record
        .audit
        .histories
        .iter()
        .max_by_key(|(_, h)| h.len())
        .map(|(id, h)| (id.clone(), h.clone()))
        .unwrap();
    assert!(history.len() >= 3, "a history with a middle: {history:?}");

    let mut gap = record.clone();
    gap.audit.histories.get_mut(&id).unwrap().remove(1);
    let found = audit(&gap);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("history versions"), "{found:?}");

    let mut no_consent = record.clone();
    no_consent.audit.consents.remove(&id);
    let found = audit(&no_consent);
    assert!(
        found.len() == 1 && found[0].contains("no consent record"),
        "{found:?}"
    );

    let mut disagrees = record.clone();
    let last = disagrees
        .audit
        .histories
        .get_mut(&id)
        .unwrap()
        .last_mut()
        .unwrap();
    last.fencing_token += 1;
    let found = audit(&disagrees);
    assert!(
        found.len() == 1 && found[0].contains("last history record"),
        "{found:?}"
    );
}

/// Seed 312 once showed the truth checker lending one intent's answers to another of the same
/// (user, seat) (linked by the intent's whole life); linked by its RESERVING spans, it is clean.
#[test]
fn the_truth_checker_links_answers_to_the_attempt_that_got_them() {
    let verdict = check_seed(312, &FaultsSpec::all());
    assert!(verdict.is_clean(), "{verdict}");
}

/// Liveness on doctored copies of a real run's record: an intent that ended past its bound,
/// and one left unfinished at an end past its bound. The real record is clean, and the bound
/// the default workload's timing gives is stated.
#[test]
fn liveness_catches_an_intent_ended_late_and_one_never_ended() {
    let config = seatgate_sim::workload::config(4, &[]);
    let (origin, timing) = (config.epoch, config.timing.clone());
    let run = simulate(config, |world| {
        seatgate_sim::workload::run(world, FaultsSpec::all())
    });
    let mut record = Record::of(&run, origin, &timing, run.value.ledgers.clone());
    record.healed_at = origin.plus(seatgate_sim::workload::ACTIVE);
    let bound = checkers::liveness::bound(&timing);
    assert_eq!(
        bound,
        std::time::Duration::from_millis(184_000),
        "the local timing's bound with seed 4's slow schedule: 60 + 30 + 30 + 8 + 1 + 40 + 10 + 5 s"
    );
    assert_eq!(
        checkers::liveness::check(&record),
        Vec::new(),
        "the real run"
    );

    let immediate = record
        .last
        .intents
        .iter()
        .position(|i| i.kind == seatgate::domain::IntentKind::Immediate)
        .unwrap();
    let late_by = |r: &Record| {
        let i = &r.last.intents[immediate];
        r.healed_at.max(i.created_at).plus(bound)
    };

    let mut ended_late = record.clone();
    let due = late_by(&ended_late);
    ended_late.last.intents[immediate].updated_at = due.plus(std::time::Duration::from_millis(1));
    let found = checkers::liveness::check(&ended_late);
    assert!(
        found.len() == 1 && found[0].message.contains("ended"),
        "{found:?}"
    );

    let mut never_ended = record.clone();
    let due = late_by(&never_ended);
    never_ended.last.intents[immediate].status = seatgate::domain::IntentStatus::Reserving;
    never_ended.last.at = due;
    assert_eq!(
        checkers::liveness::check(&never_ended),
        Vec::new(),
        "not yet due at the end: not judged"
    );
    never_ended.last.at = due.plus(std::time::Duration::from_millis(1));
    let found = checkers::liveness::check(&never_ended);
    assert!(
        found.len() == 1 && found[0].message.contains("still RESERVING"),
        "{found:?}"
    );
}

/// The liveness checker's wake-up rule on doctored copies of real runs' records (seeds on the
/// slow schedule, whose breaker opens in the outage without a `Retry-After`): the real records
/// are clean and judge parks; a judged park whose next write is taken away is caught; a run
/// killed from its park on excuses it.
#[test]
fn the_wake_up_rule_catches_a_park_never_woken_and_excuses_a_crash() {
    let mut caught = 0;
    for seed in [4u64, 8, 12, 16] {
        let config = seatgate_sim::workload::config(seed, &[]);
        assert_eq!(
            config.reaper_interval,
            seatgate_sim::workload::SLOW_SCHEDULE
        );
        let (origin, timing) = (config.epoch, config.timing.clone());
        let run = simulate(config, |world| {
            seatgate_sim::workload::run(world, FaultsSpec::all())
        });
        let mut record = Record::of(&run, origin, &timing, run.value.ledgers.clone());
        record.healed_at = origin.plus(seatgate_sim::workload::ACTIVE);
        assert_eq!(
            checkers::liveness::check(&record),
            Vec::new(),
            "seed {seed}"
        );
        let judged = checkers::liveness::parks_judged(&record);
        eprintln!("seed {seed}: {} parks, {judged} judged", record.parks.len());
        // The first park whose next write, taken away, breaks the rule: one it judged.
        let Some(found) = (0..record.parks.len()).find_map(|p| {
            let mut doctored = record.clone();
            doctored.parks[p].next_write = None;
            let found = checkers::liveness::check(&doctored);
            (!found.is_empty()).then_some((p, doctored, found))
        }) else {
            assert_eq!(
                judged, 0,
                "seed {seed}: judged parks, none caught when doctored"
            );
            continue;
        };
        let (p, mut doctored, violations) = found;
        // One park, caught by one rule or by both (a wake-up asked for it, and the breaker's
        // close after).
        let intent = doctored.parks[p].intent_id.to_string();
        assert!(
            (1..=2).contains(&violations.len())
                && violations.iter().all(|v| {
                    v.message.contains("never written again") && v.message.contains(&intent)
                }),
            "seed {seed}: {violations:?}"
        );
        doctored.killed.push(seatgate_sim::Killed {
            instance: 0,
            started: doctored.parks[p].at,
            at: doctored.last.at,
        });
        assert_eq!(
            checkers::liveness::check(&doctored),
            Vec::new(),
            "seed {seed}: a crash in the close's window excuses it"
        );
        caught += 1;
    }
    assert!(
        caught > 0,
        "no slow-schedule seed of 4, 8, 12, 16 judged a park"
    );
}

/// The listing checker on doctored copies of a real run's record: a bookings listing taken
/// during the run that repeats a booking (rule 1), an admin history read with a gap, one with a
/// record the final trail does not hold and one that found no intent (rule 2), and a user's
/// final listing missing a booking (rule 3). The real record is clean, and has every kind of listing to doctor.
#[test]
fn the_listing_checker_catches_a_repeat_a_gap_a_changed_record_and_a_missing_booking() {
    let config = seatgate_sim::workload::config(3, &[]);
    let (origin, timing) = (config.epoch, config.timing.clone());
    let run = simulate(config, |world| {
        seatgate_sim::workload::run(world, FaultsSpec::all())
    });
    let mut record = Record::of(&run, origin, &timing, run.value.ledgers.clone());
    record.listings = run.value.listings.clone();
    record.history_reads = run.value.history_reads.clone();
    let listing = |r: &Record| {
        checkers::listing::check(r)
            .into_iter()
            .map(|v| v.message)
            .collect::<Vec<_>>()
    };
    assert_eq!(listing(&record), Vec::<String>::new(), "the real run");
    let at_end = record.listings.iter().filter(|l| l.at_end).count();
    assert_eq!(
        at_end,
        seatgate_sim::workload::USERS,
        "one final listing a user"
    );
    eprintln!(
        "seed 3: {} bookings listings ({at_end} at the end, the longest {} bookings), {} history reads (the longest {} records)",
        record.listings.len(),
        record
            .listings
            .iter()
            .map(|l| l.bookings.len())
            .max()
            .unwrap_or(0),
        record.history_reads.len(),
        record
            .history_reads
            .iter()
            .map(|h| h.records.len())
            .max()
            .unwrap_or(0),
    );

    // (a) A listing taken during the run, with a booking, repeats it.
    let during = record
        .listings
        .iter()
        .position(|l| !l.at_end && !l.bookings.is_empty())
        .expect("a listing during the run that shows a booking");
    let mut repeats = record.clone();
    let first = repeats.listings[during].bookings[0].clone();
    repeats.listings[during].bookings.insert(1, first.clone());
    let found = listing(&repeats);
    assert!(
        found.len() == 1
            && found[0].contains(&format!("user {}'s bookings listing", first.user_id))
            && found[0].contains(&format!("repeats {0} then {0}", first.booking_id)),
        "{found:?}"
    );
    eprintln!("a repeat: {}", found[0]);

    // (b) An admin history read with at least two records loses its first, or has one changed.
    let read = record
        .history_reads
        .iter()
        .position(|h| h.records.len() >= 2)
        .expect("a history read of two records or more");
    let intent = record.history_reads[read].intent.clone();
    let mut gap = record.clone();
    gap.history_reads[read].records.remove(0);
    let found = listing(&gap);
    assert!(
        found.len() == 1
            && found[0].contains(&format!("intent {intent}'s history"))
            && found[0].contains("is not versions 1..="),
        "{found:?}"
    );
    eprintln!("a gap: {}", found[0]);
    let mut changed = record.clone();
    changed.history_reads[read].records[1].fencing_token += 1;
    let found = listing(&changed);
    assert!(
        found.len() == 1
            && found[0].contains(&format!("intent {intent}'s history"))
            && found[0].contains("differs from the final history at version 2"),
        "{found:?}"
    );
    eprintln!("a changed record: {}", found[0]);
    let mut lost = record.clone();
    lost.history_reads[read].found = false;
    lost.history_reads[read].records.clear();
    let found = listing(&lost);
    assert!(
        found.len() == 1
            && found[0].contains(&format!("intent {intent}'s history"))
            && found[0].contains("no such intent"),
        "{found:?}"
    );

    // (c) A user's final listing misses their last booking.
    let last = record
        .listings
        .iter()
        .position(|l| l.at_end && !l.bookings.is_empty())
        .expect("a user with a booking at the end");
    let mut missing = record.clone();
    let dropped = missing.listings[last].bookings.pop().unwrap();
    let found = listing(&missing);
    assert!(
        found.len() == 1
            && found[0].contains(&format!(
                "user {}'s final bookings listing",
                dropped.user_id
            ))
            && found[0].contains(&format!("missing [{}]", dropped.booking_id)),
        "{found:?}"
    );
    eprintln!("a missing booking: {}", found[0]);
}

/// Bookings the pager holds: enough for three pages of 20.
const PAGER_BOOKINGS: usize = 45;

/// The default workload's users hold fewer bookings than a page, so its listings are one page
/// each; this user holds enough for three (20 a page), some cancelled, and lists them on every
/// instance: each listing follows the cursor to the end, and the listing checker finds them
/// exactly the store's. With every page cut one short (`Plant::ShortPage`), each listing misses
/// the three bookings at its pages' ends, and the checker says so.
#[test]
fn a_listing_of_three_pages_is_followed_to_its_end() {
    let record = pager(&[]);
    for listing in &record.listings {
        assert_eq!(
            (listing.pages, listing.bookings.len(), listing.complete),
            (3, PAGER_BOOKINGS, true),
            "three pages, every booking"
        );
    }
    assert_eq!(checkers::listing::check(&record), Vec::new());

    let short = pager(&[Plant::ShortPage]);
    let found = checkers::listing::check(&short);
    assert_eq!(found.len(), short.listings.len(), "{found:#?}");
    for v in &found {
        assert!(
            v.message.contains("42 listed, 45 held; missing ["),
            "{}",
            v.message
        );
    }
    eprintln!("pages cut short: {}", found[0]);
}

/// One user, [`PAGER_BOOKINGS`] bookings (every seventh cancelled), listed at the end on every
/// instance, with `plants`.
fn pager(plants: &[Plant]) -> Record {
    const BOOKINGS: usize = PAGER_BOOKINGS;
    let mut config = WorldConfig::new(21);
    config.plants = plants.to_vec();
    let instances = config.instances;
    let (origin, timing) = (config.epoch, config.timing.clone());
    let run = simulate(config, |world| async move {
        let flight = FlightId::parse("FL-P").unwrap();
        world
            .instance(0)
            .api
            .flights()
            .create(flight.clone(), 100, None, 2)
            .await
            .unwrap();
        let client = world.enrol("pager", 0).await;
        let mut ids = Vec::new();
        // Bounded: at most 4 * BOOKINGS requests (a rate-limited one is asked again later).
        for k in 0..4 * BOOKINGS {
            if ids.len() == BOOKINGS {
                break;
            }
            let key = IdempotencyKey::parse(&format!("page-{k}")).unwrap();
            if let Ok(BookingAnswer::Booked { booking }) = client.book(&flight, 1, Some(&key)).await
            {
                ids.push(booking.booking_id);
            }
        }
        assert_eq!(ids.len(), BOOKINGS, "every booking made");
        for id in ids.iter().step_by(7) {
            client.cancel_booking(&flight, id).await.unwrap();
        }
        world.settle(std::time::Duration::from_secs(5)).await;
        let mut listings = Vec::new();
        for i in 0..instances {
            let at = world.now();
            let listed = client.on(i).bookings().await;
            listings.push(checkers::listing::BookingsListing {
                user: client.user().clone(),
                at,
                at_end: true,
                bookings: listed.items,
                pages: listed.pages,
                complete: listed.complete,
            });
        }
        listings
    });
    let mut record = Record::of(&run, origin, &timing, Vec::new());
    record.listings = run.value.clone();
    record
}

/// Spared on doctored copies of a real run's record: a call planted 1 ms into a `Retry-After`
/// is judged by who could have known. The instance that heard the answer knew at once; another
/// instance could know only once the hold landed in the store. So the planted call is a
/// violation from the hearer, none from another instance before the hold landed, and a
/// violation from another instance after it landed.
#[test]
fn spared_holds_the_hearer_at_once_and_the_fleet_once_the_hold_lands() {
    use seatgate_sim::checkers::{HoldWrite, spared};
    use seatgate_sim::upstream::Route;
    let config = seatgate_sim::workload::config(5, &[]);
    let (origin, timing) = (config.epoch, config.timing.clone());
    let run = simulate(config, |world| {
        seatgate_sim::workload::run(world, FaultsSpec::all())
    });
    let mut record = Record::of(&run, origin, &timing, run.value.ledgers.clone());
    // Judged as `check_seed` judges it: the workload steps the instances' clocks, so a hold
    // expires by the hearer's stepped reading (seed 5 has a reserve 30 ms short of its own
    // instance's hold, as written by a clock stepped since).
    record.clock_skew = seatgate_sim::workload::CLOCK_STEPS.skew();
    assert_eq!(spared::check(&record), Vec::new(), "the real run");

    // The first seat read answered 429 with a `Retry-After` by some instance.
    let told = record
        .calls
        .iter()
        .find(|c| {
            c.route == Route::Seat
                && c.caller.is_some()
                && c.outcome
                    .as_deref()
                    .is_some_and(|o| o.starts_with("429 retry-after"))
        })
        .expect("the workload's busy answers reach a seat read")
        .clone();
    let (answered, hearer) = (told.answered.unwrap(), told.caller.unwrap());
    let ms = std::time::Duration::from_millis;
    // A planted call, `after` ms past the answer, from `caller`; the hold lands 5 ms after it.
    let judge = |caller: usize, after: u64| {
        let mut bent = record.clone();
        let mut planted = told.clone();
        planted.key = "seat=S-planted".into();
        planted.caller = Some(caller);
        planted.arrived = answered.plus(ms(after));
        planted.answered = Some(planted.arrived.plus(ms(5)));
        planted.outcome = Some("200 free".into());
        let at = bent.calls.partition_point(|c| c.arrived <= planted.arrived);
        bent.calls.insert(at, planted);
        // The hearer's own hold write, landed 5 ms after the answer instead of when it did.
        bent.holds.retain(|h| {
            h.route != seatgate::domain::UpstreamRoute::Seat
                || h.at < answered
                || h.at > answered.plus(ms(5))
        });
        let hold = HoldWrite {
            at: answered.plus(ms(5)),
            route: seatgate::domain::UpstreamRoute::Seat,
            until: answered.plus(ms(1_000)),
        };
        let at = bent.holds.partition_point(|h| h.at <= hold.at);
        bent.holds.insert(at, hold);
        spared::check(&bent)
            .into_iter()
            .filter(|v| v.message.contains("seat=S-planted"))
            .collect::<Vec<_>>()
    };
    let other = (hearer + 1) % seatgate_sim::workload::INSTANCES;
    let found = judge(hearer, 1);
    assert!(
        found.len() == 1 && found[0].message.contains("which heard it"),
        "the hearer, 1 ms in: {found:?}"
    );
    assert_eq!(
        judge(other, 1),
        Vec::new(),
        "another instance, before the hold landed"
    );
    let found = judge(other, 6);
    assert!(
        found.len() == 1 && found[0].message.contains("the store holding the route"),
        "another instance, after the hold landed: {found:?}"
    );
    eprintln!("{}", found[0]);
}

/// A failing seed prints the stretch of history its first violation cites: every call the
/// message names is in the window, with the store writes of the same span.
#[test]
fn a_failing_seed_prints_the_window_of_history_its_violation_cites() {
    // Seed 1 of the bookers alone catches the plant at once.
    let verdict = check_mix(
        1,
        &FaultsSpec::all_before_issue_39(),
        &[Plant::RetryAfterIgnored],
        Mix::none(),
    );
    let first = verdict
        .violations
        .first()
        .expect("the plant is caught at seed 1");
    let window = verdict
        .window
        .as_ref()
        .expect("a spared violation cites its calls");
    let cited: Vec<&str> = first
        .message
        .match_indices("call #")
        .map(|(at, _)| {
            let rest = &first.message[at + "call #".len()..];
            &rest[..rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len())]
        })
        .collect();
    assert!(cited.len() >= 2, "{}", first.message);
    for n in cited {
        assert!(
            window
                .calls
                .iter()
                .any(|l| l.starts_with(&format!("#{n} "))),
            "call #{n} is in the window: {window}"
        );
    }
    assert!(!window.writes.is_empty(), "{window}");
    assert!(window.from_ms <= window.until_ms);
    assert!(verdict.to_string().contains("window +"), "{verdict}");
    eprintln!("{verdict}");
}

/// Reads on seed 1616, where a worker batch was killed after its seat read and before the
/// reading was shared, and the same instance (alive in the sim, with its refresh lease) read
/// the seat again 401 ms later: excused only by that kill. Without the kill, or with it moved
/// to another instance, the re-read is a violation. (If the workload changes so that seed 1616
/// no longer shows this, pick another seed from a `simulate` scan with the allowance removed.)
/// Its faults and its reaper schedule are the ones the workload had when the seed was found: a
/// fault kind added since draws nothing while off, so this history stays the one described;
/// its users are the bookers alone, as then.
#[test]
fn reads_excuse_a_read_only_when_its_callers_run_was_killed_after_it() {
    use seatgate_sim::checkers::reads;
    let mut config = seatgate_sim::workload::config(1616, &[]);
    // Found before seeds divisible by 4 ran the reaper on the slow schedule: its old one.
    config.timing.reaper_interval = seatgate::config::Timing::local().reaper_interval;
    config.reaper_interval = config.timing.reaper_interval;
    let (origin, timing) = (config.epoch, config.timing.clone());
    let faults =
        FaultsSpec::parse("latency,errors,busy,outage,lost-commits,store,replays,crashes").unwrap();
    let run = simulate(config, |world| {
        seatgate_sim::workload::run_mix(world, faults, Mix::none())
    });
    let record = Record::of(&run, origin, &timing, run.value.ledgers.clone());
    assert_eq!(reads::check(&record), Vec::new(), "with the kill on record");
    assert!(!record.killed.is_empty(), "seed 1616 kills a run");
    let mut unkilled = record.clone();
    unkilled.killed.clear();
    let found = reads::check(&unkilled);
    assert!(
        found.iter().any(|v| v.message.contains("read again")),
        "without the kill: {found:?}"
    );
    let mut elsewhere = record.clone();
    for k in &mut elsewhere.killed {
        k.instance = (k.instance + 1) % seatgate_sim::workload::INSTANCES;
    }
    let found = reads::check(&elsewhere);
    assert!(!found.is_empty(), "the kill on another instance: {found:?}");
    eprintln!("{}", found[0]);
}

/// Reads: a breaker probe's seat read binds only its own instance. Seed 2859's history (first
/// found there: the probe read S-1 and, 23 ms later, another instance holding the seat's refresh
/// lease over a stale reading read it too; that exact pair moved when the worker began closing
/// a won seat's losers together) has probe reads; one is found as the read that another
/// instance may repeat right after it, and the same repeat from the probe's own instance is a
/// violation. A plain read binds every instance, so the search cannot mistake one for a probe.
#[test]
fn probe_reads_bind_their_own_instance_only() {
    use seatgate_sim::checkers::reads;
    let instances = seatgate_sim::workload::INSTANCES;
    let faults = "latency,errors,busy,outage,lost-commits,late-commits,store,replays,crashes";
    // Bounded: the first seed from 2859 on whose history has a probe read.
    for seed in 2859..2859 + 200 {
        let config = seatgate_sim::workload::config(seed, &[]);
        let (origin, timing) = (config.epoch, config.timing.clone());
        let spec = FaultsSpec::parse(faults).unwrap();
        let run = simulate(config, |world| seatgate_sim::workload::run(world, spec));
        let record = Record::of(&run, origin, &timing, run.value.ledgers.clone());
        assert_eq!(reads::check(&record), Vec::new(), "seed {seed}");
        // `record` with a repeat of call `a` by `caller`, 1 ms after `a` was answered.
        let repeated_by = |a: usize, caller: Option<usize>| {
            let mut r = record.clone();
            let mut again = r.calls[a].clone();
            again.arrived = again
                .answered
                .expect("answered")
                .plus(std::time::Duration::from_millis(1));
            again.caller = caller;
            r.calls.push(again);
            r.calls.sort_by_key(|c| c.arrived);
            reads::check(&r)
                .iter()
                .any(|v| v.message.contains("read again"))
        };
        let seat_read = |a: usize| {
            let read = &record.calls[a];
            read.route == seatgate_sim::Route::Seat
                && read.caller.is_some()
                && read.answered.is_some()
        };
        let other = |a: usize| record.calls[a].caller.map(|c| (c + 1) % instances);
        let probe = (0..record.calls.len()).find(|&a| {
            seat_read(a) && repeated_by(a, record.calls[a].caller) && !repeated_by(a, other(a))
        });
        let Some(_probe) = probe else { continue };
        // A plain read, by contrast, binds every instance.
        assert!(
            (0..record.calls.len()).any(|a| seat_read(a) && repeated_by(a, other(a))),
            "seed {seed}: a plain read's repeat by another instance is a violation"
        );
        return;
    }
    panic!("no probe read in 200 seeds from 2859");
}

/// Each instance reads time through its own clock: an intent confirmed through an instance
/// whose clock was stepped carries that instance's reading, one confirmed through another
/// carries true time, and a step back to 0 restores it. (What the clock-steps fault does to
/// the services, nothing else in the world sees: the store and the upstream keep true time.)
#[test]
fn a_stepped_clock_is_its_instances_own() {
    let run = simulate(WorldConfig::new(5), |world| async move {
        let ahead = world.enrol("u-ahead", 1).await;
        let honest = world.enrol("u-honest", 0).await;
        world.step_clock(1, 80);
        let seat = seatgate::domain::SeatId::parse("S-1").unwrap();
        let true_now = world.now();
        let stepped = ahead.reserve(&seat).await.expect("an intent");
        let plain = honest.reserve(&seat).await.expect("an intent");
        world.step_clock(1, 0);
        let healed = ahead.reserve(&seat).await.expect("an intent");
        (
            true_now,
            stepped.created_at,
            plain.created_at,
            healed.created_at,
            world.clock_steps(),
        )
    });
    let (true_now, stepped, plain, healed, steps) = run.value;
    assert_eq!(
        stepped.0 - true_now.0,
        80,
        "the stepped instance reads 80 ms ahead"
    );
    assert_eq!(plain, true_now, "another instance reads true time");
    assert_eq!(healed, true_now, "stepped back, it reads true time again");
    assert_eq!(steps, 2);
}

/// Clock steps strike (every instance's clock stepped up to 100 ms either way, every 3-12 s)
/// and the seeds stay clean and quiet with the checkers' stated allowance of
/// `Record::clock_skew`, which stays inside the `CLOCK_TOLERANCE` the design assumes.
#[test]
fn clock_steps_strike_and_the_seeds_stay_clean_within_the_stated_skew() {
    const STEP_SEEDS: u64 = 20;
    assert!(
        seatgate_sim::workload::CLOCK_STEPS.skew() < seatgate::domain::CLOCK_TOLERANCE,
        "the simulator steps clocks within what the design tolerates"
    );
    let faults = FaultsSpec::parse("latency,busy,outage,clock-steps").unwrap();
    let mut dirty = Vec::new();
    let mut steps = 0;
    for seed in 1..=STEP_SEEDS {
        let verdict = check_seed(seed, &faults);
        steps += verdict.clock_steps;
        if !verdict.is_clean() || !verdict.quiet {
            dirty.push(verdict);
        }
    }
    eprintln!(
        "{STEP_SEEDS} seeds under latency, busy answers, outages and clock steps: {steps} steps"
    );
    assert!(
        steps >= STEP_SEEDS * 3,
        "the clocks were stepped ({steps} steps)"
    );
    assert_clean("violations under clock steps", &dirty);
}

/// The skew allowance is not idle: seed 1 under every fault, judged with none, breaks the
/// promises that compare one instance's time with another's (its intents' lives against true
/// commit times, a read TTL, a `Retry-After`), and only those; judged with the stated skew it
/// is clean.
#[test]
fn without_the_skew_allowance_stepped_clocks_break_only_the_promises_that_compare_clocks() {
    let config = seatgate_sim::workload::config(1, &[]);
    let (origin, timing) = (config.epoch, config.timing.clone());
    let run = simulate(config, |world| {
        seatgate_sim::workload::run(world, FaultsSpec::all())
    });
    let mut record =
        seatgate_sim::run::workload_record(&run, &run.value, origin, &timing, &FaultsSpec::all());
    assert!(run.value.clock_steps > 0, "the clocks were stepped");
    assert_eq!(
        record.clock_skew,
        seatgate_sim::workload::CLOCK_STEPS.skew()
    );
    record.clock_skew = std::time::Duration::ZERO;
    let strict = checkers::check_all(&record);
    let clock_bound = [
        Checker::Truth,
        Checker::Reads,
        Checker::Spared,
        Checker::NoWastedWrite,
        Checker::Probe,
        Checker::Liveness,
        // A hold's deadline is its creator's reading, its confirm or lapse its writer's.
        Checker::HoldLife,
    ];
    assert!(!strict.is_empty(), "with no allowance, stepped clocks show");
    for v in &strict {
        assert!(
            clock_bound.contains(&v.checker),
            "only clock-comparing promises may break: {v:?}"
        );
    }
    record.clock_skew = seatgate_sim::workload::CLOCK_STEPS.skew();
    let allowed = checkers::check_all(&record);
    assert!(allowed.is_empty(), "within the skew: {allowed:?}");
}

/// Unknown on a doctored copy of seed 30127's record. There, two reapers read u-03's charge in
/// the same millisecond after its reserve on S-3 timed out; the second read answered first, the
/// settlement followed it and freed the seat, and u-13's reserve arrived in that millisecond.
/// The window closes at the earliest definite answer, so the real run is clean; with that read
/// lost to its caller, the only answer left is 1 ms later and the reserve is caught. (The
/// seed's history is the bookers' alone, the default workload when it was found.)
#[test]
fn unknown_closes_the_window_at_the_earliest_charge_answer() {
    use seatgate_sim::checkers::unknown;
    use seatgate_sim::upstream::Route;
    let config = seatgate_sim::workload::config(30127, &[]);
    let (origin, timing) = (config.epoch, config.timing.clone());
    let run = simulate(config, |world| {
        seatgate_sim::workload::run_mix(world, FaultsSpec::all_before_issue_39(), Mix::none())
    });
    let mut record = seatgate_sim::run::workload_record(
        &run,
        &run.value,
        origin,
        &timing,
        &FaultsSpec::all_before_issue_39(),
    );
    assert_eq!(unknown::check(&record), Vec::new(), "the real run");

    let reserve = |user: &str| {
        record
            .calls
            .iter()
            .rposition(|c| c.route == Route::Reserve && c.key == format!("seat=S-3 user={user}"))
            .expect("the reserve")
    };
    let (timed_out, winner) = (reserve("u-03"), reserve("u-13"));
    assert!(
        record.calls[timed_out]
            .outcome
            .as_deref()
            .is_some_and(|o| o.starts_with("timeout")),
        "{:?}",
        record.calls[timed_out]
    );
    let arrived = record.calls[winner].arrived;
    let reads: Vec<usize> = (timed_out..winner)
        .filter(|&i| record.calls[i].route == Route::Charge && record.calls[i].key == "user=u-03")
        .filter(|&i| record.calls[i].outcome.as_deref() == Some("404 no_charge"))
        .collect();
    let answers: Vec<_> = reads.iter().map(|&i| record.calls[i].answered).collect();
    assert_eq!(answers.len(), 2, "two reads of u-03's charge: {answers:?}");
    assert!(
        answers[1].is_some_and(|a| a <= arrived) && answers[0].is_some_and(|a| a > arrived),
        "the later arrival answered first, by the reserve's arrival: {answers:?}"
    );
    record.calls[reads[1]].abandoned = true;
    let found = unknown::check(&record);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].message.contains("user=u-13"), "{}", found[0]);
    eprintln!("with the first answer lost: {}", found[0]);
}

/// Fails with every dirty verdict printed, under `what`.
fn assert_clean(what: &str, dirty: &[seatgate_sim::Verdict]) {
    assert!(
        dirty.is_empty(),
        "{what}:\n{}",
        dirty
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );
}
