//! The operator in the default workload (`Mix::operator`): its reads are made and judged, and
//! the operator checker's listing rule bites on a doctored copy of a real record (the planted
//! bug in `tests/plants.rs` shows its dead-letter rule bites).

use seatgate_sim::checkers::{self, Checker, operator};
use seatgate_sim::{FaultsSpec, simulate};

fn record_of(seed: u64) -> checkers::Record {
    let config = seatgate_sim::workload::config(seed, &[]);
    let (origin, timing) = (config.epoch, config.timing.clone());
    let run = simulate(config, |world| {
        seatgate_sim::workload::run(world, FaultsSpec::all())
    });
    seatgate_sim::run::workload_record(&run, &run.value, origin, &timing, &FaultsSpec::all())
}

#[test]
fn the_operator_lists_live_holds_sees_dead_letters_and_redrives_them() {
    let record = record_of(1);
    let op = record
        .operator
        .as_ref()
        .expect("the operator is on by default");
    assert!(
        op.looks >= 10,
        "a look every 4 s of the minute: {}",
        op.looks
    );
    assert!(
        op.listings
            .iter()
            .any(|l| l.complete && !l.holds.is_empty()),
        "some listing shows live holds"
    );
    let quiet = op.quiet_read.expect("the depths once quiet");
    assert!(
        quiet.depths.webhook_deliveries.dead > 0,
        "poisoned events were dead-lettered: {quiet:?}"
    );
    assert_eq!(
        op.redriven.map(|r| r.webhook_deliveries),
        Some(quiet.depths.webhook_deliveries.dead)
    );
    assert!(op.quiet_again);
    assert_eq!(operator::check(&record), Vec::new());
}

/// The listing rule bites: a hold live throughout a complete listing, taken out of it, is a
/// hold the operator was not shown; a hold that ended before a listing began, put in it, is
/// one shown live that was not.
#[test]
fn a_listing_that_misses_or_invents_a_live_hold_is_caught() {
    let mut record = record_of(1);
    let op = record.operator.clone().expect("the operator");
    // A hold live throughout a complete listing: written HELD before it began, not ended by
    // the time it ended.
    let live_throughout = |l: &operator::HeldListing, id: &seatgate::domain::HoldId| {
        let writes: Vec<_> = record
            .sale
            .iter()
            .filter_map(|w| {
                w.hold()
                    .filter(|h| &h.hold_id == id)
                    .map(|h| (w.at, h.status))
            })
            .collect();
        writes.first().is_some_and(|(at, _)| *at < l.from)
            && writes
                .iter()
                .all(|(at, s)| *s == seatgate::domain::HoldStatus::Held || *at > l.to)
    };
    let (i, at) = op
        .listings
        .iter()
        .enumerate()
        .filter(|(_, l)| l.complete)
        .find_map(|(i, l)| {
            let at = l.holds.iter().position(|(id, _)| live_throughout(l, id))?;
            Some((i, at))
        })
        .expect("a complete listing with a hold live throughout it");
    let mut missing = op.clone();
    let (dropped, _) = missing.listings[i].holds.remove(at);
    record.operator = Some(missing);
    let found = operator::check(&record);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].checker, Checker::Operator);
    assert!(
        found[0].message.contains(&format!("misses hold {dropped}")),
        "{}",
        found[0]
    );

    let ended = record
        .sale
        .iter()
        .filter_map(|w| w.hold().map(|h| (w.at, h)))
        .find(|(at, h)| h.status != seatgate::domain::HoldStatus::Held && *at < op.listings[i].from)
        .map(|(_, h)| h.clone())
        .expect("a hold that ended before the listing");
    let mut invented = op.clone();
    invented.listings[i]
        .holds
        .push((ended.hold_id.clone(), seatgate::domain::HoldStatus::Held));
    invented.listings[i].flight = ended.flight_id.clone();
    record.operator = Some(invented);
    let found = operator::check(&record);
    assert!(
        found
            .iter()
            .any(|v| v.message.contains(&format!("lists hold {}", ended.hold_id))),
        "{found:#?}"
    );
}
