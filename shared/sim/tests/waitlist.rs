//! Waiting lists in the simulator: waiters join when the flight cannot sell to them, beside
//! holders, bookers, cancels and every fault, and every seat that comes back while they wait is
//! offered to the first entries it fits, in order. A store that serves the list from its back
//! is caught on the default workload, in `plants.rs`.

use seatgate::domain::{HoldStatus, WaitStatus};
use seatgate_sim::checkers::waitlist::ListWrite;
use seatgate_sim::workload::{self, Mix};
use seatgate_sim::{FaultsSpec, check_mix, simulate};
use std::collections::BTreeMap;

/// The default mix: the waiters wait on the limited sale, which sells out within seconds.
const WAITERS: Mix = Mix {
    holders: true,
    waiters: true,
    limited: true,
    eager: true,
    operator: false,
};
const SEEDS: std::ops::RangeInclusive<u64> = 1..=8;
/// Seeds for the offers' figures: a lapse that serves the list is rare (about one seed in 16
/// on the fast schedule), so the 2 s target needs more histories than the order check.
const OFFER_SEEDS: std::ops::RangeInclusive<u64> = 1..=40;

#[test]
fn the_list_is_served_in_order_on_every_seed_under_every_fault() {
    let mut dirty = Vec::new();
    for seed in SEEDS {
        let verdict = check_mix(seed, &FaultsSpec::all(), &[], WAITERS);
        eprintln!("{verdict}");
        assert!(verdict.quiet, "seed {seed}: the world got quiet: {verdict}");
        if !verdict.is_clean() {
            dirty.push(verdict.to_string());
        }
    }
    assert!(
        dirty.is_empty(),
        "violations with waiters:\n{}",
        dirty.join("\n")
    );
}

#[test]
fn waiters_are_offered_seats_and_confirm_or_let_them_lapse() {
    let mut entries: BTreeMap<WaitStatus, usize> = BTreeMap::new();
    let mut offers: BTreeMap<HoldStatus, usize> = BTreeMap::new();
    // From a hold's deadline to its seats' offer, for every lapse that served someone.
    let mut lapse_to_offer_ms: Vec<i64> = Vec::new();
    let mut announced_total = 0;
    for seed in OFFER_SEEDS {
        let config = workload::config(seed, &[]);
        let run = simulate(config, |world| {
            // With the operator, who redrives what a subscriber refused until it was
            // dead-lettered, so every announcement reaches the subscribers.
            let mix = Mix {
                operator: true,
                ..WAITERS
            };
            workload::run_mix(world, FaultsSpec::all(), mix)
        });
        // The 2 s target is the fast schedule's: in a seed on the slow one a lapse waits for
        // a pass up to 40 s apart (the hold-life checker holds it to that).
        let fast = !seed.is_multiple_of(workload::SLOW_SCHEDULE_EVERY);
        for write in list_writes_of(&run).into_iter().filter(|_| fast) {
            if let ListWrite::Return {
                at,
                lapsed_from: Some(due),
                served,
                ..
            } = write
                && !served.is_empty()
            {
                lapse_to_offer_ms.push(at.0 - due.0);
            }
        }
        for entry in &run.snapshot.wait_entries {
            *entries.entry(entry.status).or_insert(0) += 1;
        }
        let made: Vec<_> = run
            .snapshot
            .checkout_holds
            .iter()
            .filter(|h| h.offer_for.is_some())
            .collect();
        for hold in &made {
            *offers.entry(hold.status).or_insert(0) += 1;
        }
        // Every offer made was announced, and every lapsed one too, each once (deliveries are
        // at least once: distinct event ids), through the outbox, the relay and the event queue.
        let announced: std::collections::BTreeSet<&str> = run
            .deliveries
            .iter()
            .filter(|line| line.ends_with(" offer.created") || line.ends_with(" offer.expired"))
            .filter_map(|line| line.split(' ').next())
            .collect();
        let mut wanted = std::collections::BTreeSet::new();
        for hold in &made {
            wanted.insert(format!("offer:{}:created", hold.hold_id));
            if hold.status == HoldStatus::Lapsed {
                wanted.insert(format!("offer:{}:expired", hold.hold_id));
            }
        }
        let wanted: std::collections::BTreeSet<&str> = wanted.iter().map(String::as_str).collect();
        assert_eq!(announced, wanted, "seed {seed}: offers announced");
        announced_total += announced.len();
    }
    eprintln!("offer events delivered over seeds {OFFER_SEEDS:?}: {announced_total}");
    eprintln!(
        "entries by status over seeds {OFFER_SEEDS:?}: {entries:?}; offers by status: {offers:?}"
    );
    assert!(
        entries.get(&WaitStatus::Offered).copied().unwrap_or(0) > 0,
        "{entries:?}"
    );
    assert!(
        offers.get(&HoldStatus::Confirmed).copied().unwrap_or(0) > 0,
        "{offers:?}"
    );
    assert_eq!(
        offers.get(&HoldStatus::Held),
        None,
        "every offer resolved: {offers:?}"
    );
    lapse_to_offer_ms.sort_unstable();
    eprintln!("a lapsed hold's deadline to its seats' offer, ms: {lapse_to_offer_ms:?}");
    // The target: within 2 s on the local timing (the reaper's pass every 500 ms), over the
    // seeds on that schedule.
    assert!(
        lapse_to_offer_ms.last().is_some_and(|&worst| worst < 2_000),
        "{lapse_to_offer_ms:?}"
    );
}

/// The list's writes of a finished run, as the checker reads them.
fn list_writes_of<T>(run: &seatgate_sim::Run<T>) -> Vec<ListWrite> {
    seatgate_sim::checkers::waitlist::list_writes(&run.writes, &run.write_times)
}
