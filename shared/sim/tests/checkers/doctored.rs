//! Each checker on a doctored record: a real history with one promise broken by hand, caught.

use super::*;

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
    use seatgate_sim::checkers::{PauseWrite, spared};
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
        bent.pauses.retain(|h| {
            h.route != seatgate::domain::UpstreamRoute::Seat
                || h.at < answered
                || h.at > answered.plus(ms(5))
        });
        let hold = PauseWrite {
            at: answered.plus(ms(5)),
            route: seatgate::domain::UpstreamRoute::Seat,
            until: answered.plus(ms(1_000)),
        };
        let at = bent.pauses.partition_point(|h| h.at <= hold.at);
        bent.pauses.insert(at, hold);
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
        found.len() == 1 && found[0].message.contains("the store pausing the route"),
        "another instance, after the hold landed: {found:?}"
    );
    eprintln!("{}", found[0]);
}

/// Reads on the first seed from 1 whose history has a worker batch killed after its seat read
/// and before the reading was shared, and the same instance (alive in the sim, with its refresh
/// lease) reading the seat again: that re-read is excused only by that kill. Without the kill,
/// or with it moved to another instance, it is a violation. The seed is searched for (it was
/// 1616, then 26, then 1557: every change to the workload moves such histories).
/// Its faults and its reaper schedule are the ones the workload had when the shape was first
/// found: a fault kind added since draws nothing while off; its users are the bookers alone.
/// (The shape is rare: one seed in about 1,500.)
#[test]
fn reads_excuse_a_read_only_when_its_callers_run_was_killed_after_it() {
    use seatgate_sim::checkers::reads;
    // The seed last found first, so the usual run costs one history; then a bounded search.
    // If the workload moved this shape past the bound, widen it in a release run
    // (`cargo test --release -p seatgate-sim --test checkers -- reads_excuse --nocapture`
    // prints the seed found) and put that seed first.
    const FOUND_LAST: u64 = 1557;
    const SEEDS: std::ops::RangeInclusive<u64> = 1..=200;
    let run_seed = |seed: u64| {
        let mut config = seatgate_sim::workload::config(seed, &[]);
        // Found before seeds divisible by 4 ran the reaper on the slow schedule: its old one.
        config.timing.reaper_interval = seatgate::config::Timing::local().reaper_interval;
        config.reaper_interval = config.timing.reaper_interval;
        let (origin, timing) = (config.epoch, config.timing.clone());
        let faults =
            FaultsSpec::parse("latency,errors,busy,outage,lost-commits,store,replays,crashes")
                .unwrap();
        let run = simulate(config, |world| {
            seatgate_sim::workload::run_mix(world, faults, Mix::none())
        });
        Record::of(&run, origin, &timing, run.value.ledgers.clone())
    };
    let read_again = |record: &Record| {
        let mut unkilled = record.clone();
        unkilled.killed.clear();
        reads::check(&unkilled)
            .iter()
            .any(|v| v.message.contains("read again"))
    };
    // The shape: a kill on record, and without it a seat read again.
    let (seed, record) = std::iter::once(FOUND_LAST)
        .chain(SEEDS)
        .map(|seed| (seed, run_seed(seed)))
        .find(|(_, record)| !record.killed.is_empty() && read_again(record))
        .unwrap_or_else(|| panic!("no seed in {SEEDS:?} reads a seat again after a kill"));
    eprintln!("seed {seed}");
    assert_eq!(
        reads::check(&record),
        Vec::new(),
        "seed {seed}, with the kill on record"
    );
    let mut elsewhere = record.clone();
    for k in &mut elsewhere.killed {
        k.instance = (k.instance + 1) % seatgate_sim::workload::INSTANCES;
    }
    let found = reads::check(&elsewhere);
    assert!(
        !found.is_empty(),
        "seed {seed}, the kill on another instance: {found:?}"
    );
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

/// Unknown on a doctored copy of a real record: the first seed from 1 where a user A's reserve
/// on a seat timed out, a reaper read A's charge once (no charge), and the settlement freed the
/// seat before another user B's reserve on it arrived, so the real run is clean. The copy adds a
/// second read of that charge, sent with the first and answered 1 ms after B's reserve arrived
/// (two reapers reading at once, as seed 30127 really had until bookings counted their rate
/// window in their own transaction; no seed of 1..=60,000 has it since). The window closes at
/// the earliest definite answer, so the copy is clean too; with the earlier answer lost to its
/// caller, the only answer left is after B's arrival and B's reserve is caught. The seed is
/// searched for within a bound (it was 6: every change to the workload moves such histories);
/// the history is the bookers' alone.
#[test]
fn unknown_closes_the_window_at_the_earliest_charge_answer() {
    use seatgate_sim::checkers::unknown;
    use seatgate_sim::upstream::Route;
    const SEEDS: std::ops::RangeInclusive<u64> = 1..=200;
    let run_seed = |seed: u64| {
        let config = seatgate_sim::workload::config(seed, &[]);
        let (origin, timing) = (config.epoch, config.timing.clone());
        let run = simulate(config, |world| {
            seatgate_sim::workload::run_mix(world, FaultsSpec::all_before_issue_39(), Mix::none())
        });
        seatgate_sim::run::workload_record(
            &run,
            &run.value,
            origin,
            &timing,
            &FaultsSpec::all_before_issue_39(),
        )
    };
    let (seed, mut record, read, winner) = SEEDS
        .into_iter()
        .find_map(|seed| {
            let record = run_seed(seed);
            let (read, winner) = timed_out_then_freed(&record)?;
            Some((seed, record, read, winner))
        })
        .unwrap_or_else(|| panic!("no seed in {SEEDS:?} frees a timed-out reserve's seat"));
    let winner_user = record.calls[winner]
        .key
        .split_once(" user=")
        .map(|(_, u)| u.to_owned())
        .expect("a reserve's key names its user");
    eprintln!(
        "seed {seed}: {:?} then {:?}",
        record.calls[read], record.calls[winner]
    );
    assert_eq!(
        unknown::check(&record),
        Vec::new(),
        "seed {seed}, the real run"
    );

    let arrived = record.calls[winner].arrived;
    let mut late = record.calls[read].clone();
    late.answered = Some(seatgate::domain::Millis(arrived.0 + 1));
    record.calls.insert(read, late);
    assert_eq!(
        unknown::check(&record),
        Vec::new(),
        "seed {seed}, a later answer beside an earlier one"
    );
    record.calls[read + 1].abandoned = true;
    let found = unknown::check(&record);
    assert_eq!(found.len(), 1, "seed {seed}: {found:#?}");
    assert!(
        found[0].message.contains(&format!("user={winner_user}")),
        "seed {seed}: {}",
        found[0]
    );
    eprintln!("with the first answer lost: {}", found[0]);

    /// The shape: a reserve that timed out, the one read of its user's charge after it (no
    /// charge, answered by the next reserve's arrival), and another user's reserve on the seat.
    /// The read's and the next reserve's places in the record.
    fn timed_out_then_freed(record: &Record) -> Option<(usize, usize)> {
        let calls = &record.calls;
        let reserve = |i: usize| calls[i].route == Route::Reserve;
        calls.iter().enumerate().find_map(|(t, call)| {
            if !reserve(t)
                || !call
                    .outcome
                    .as_deref()
                    .is_some_and(|o| o.starts_with("timeout"))
            {
                return None;
            }
            let (seat, user) = call.key.split_once(" user=")?;
            let winner = (t + 1..calls.len())
                .find(|&i| reserve(i) && calls[i].key.starts_with(&format!("{seat} user=")))?;
            if calls[winner].key == call.key {
                return None;
            }
            let charge = format!("user={user}");
            let reads: Vec<usize> = (t..winner)
                .filter(|&i| calls[i].route == Route::Charge && calls[i].key == charge)
                .filter(|&i| calls[i].outcome.as_deref() == Some("404 no_charge"))
                .collect();
            match reads[..] {
                [read]
                    if calls[read]
                        .answered
                        .is_some_and(|a| a <= calls[winner].arrived) =>
                {
                    Some((read, winner))
                }
                _ => None,
            }
        })
    }
}
