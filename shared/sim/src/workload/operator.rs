//! The operator ([`super::Mix::operator`]): the admin reads an operator makes while a sale runs,
//! and the dead-letter round they make once it is over, recorded for the operator checker
//! ([`crate::checkers::operator`]).
//!
//! Why this shape: an operator watches the reaper through a flight's live holds, the list
//! through its length, and the queues through their depths, while the faults strike; and a
//! webhook delivery that ran out of attempts is seen nowhere but in the event queue's
//! dead-letter count, so the promise "a dead-lettered event is visible to the operator, and a
//! redrive brings it to its subscribers" is judged only if someone reads that count and presses
//! redrive. The operator's calls go through one instance's services as the admin routes call
//! them (the handler has checked the admin claim), never killed: its listings are judged
//! against the store's write log, and an admin read that failed for the store is retried.

use crate::checkers::operator::{DepthsRead, HeldListing, OperatorRecord};
use crate::client::{ATTEMPTS, MAX_PAGES, POLL};
use crate::world::World;
use seatgate::domain::{FlightHoldKey, FlightId, HoldStatus};
use seatgate::ports::Redriven;
use std::time::Duration;

/// How often the operator looks while the sale runs.
pub const LOOK_EVERY: Duration = Duration::from_secs(4);

/// Redrive calls the operator makes at most after the sale (each moves up to 300 per queue and
/// says `more` when it left some).
const REDRIVES: usize = 5;

/// Looks every [`LOOK_EVERY`] until `active` has passed: each flight's live holds (every page)
/// and each flight's waiting list, then both queues' depths. Bounded: `active / LOOK_EVERY`
/// looks, each a bounded number of pages and attempts.
pub(super) async fn watch(
    world: World,
    flights: Vec<FlightId>,
    active: Duration,
) -> OperatorRecord {
    let started = world.elapsed();
    let mut record = OperatorRecord::default();
    let mut look = 0usize;
    while world.elapsed() < started + active {
        tokio::time::sleep(LOOK_EVERY).await;
        look += 1;
        let instance = look % world.instance_count();
        for flight in &flights {
            record.listings.push(held(&world, instance, flight).await);
            let api = &world.instance(instance).api;
            // The list's length is read as an operator reads it; what it says is judged by
            // nothing yet beyond answering (the waitlist checker judges the list itself).
            for _ in 0..ATTEMPTS {
                if api.waitlist().waitlist_of(flight).await.is_ok() {
                    break;
                }
                tokio::time::sleep(POLL).await;
            }
        }
        record.looks += depths(&world, instance).await.is_some() as usize;
    }
    record
}

/// After the world got quiet: reads both queues' depths (the dead letters the run left), moves
/// them back, lets the world get quiet again within `within`, and reads the depths once more.
pub(super) async fn after_the_sale(world: &World, record: &mut OperatorRecord, within: Duration) {
    record.round = true;
    record.quiet_read = depths(world, 0).await;
    let mut moved = Redriven::default();
    let mut calls = 0;
    // Bounded: REDRIVES calls, each retried at most ATTEMPTS times.
    for _ in 0..REDRIVES {
        let mut answer = None;
        for _ in 0..ATTEMPTS {
            match world.instance(0).api.admin().redrive().await {
                Ok(r) => {
                    answer = Some(r);
                    break;
                }
                Err(_) => tokio::time::sleep(POLL).await,
            }
        }
        let Some(r) = answer else { break };
        calls += 1;
        moved.seat_messages += r.seat_messages;
        moved.webhook_deliveries += r.webhook_deliveries;
        moved.more = r.more;
        if !r.more {
            break;
        }
    }
    record.redriven = (calls > 0).then_some(moved);
    record.quiet_again = world.settle(within).await;
    record.after = depths(world, 0).await;
}

/// One listing of `flight`'s live holds through `instance`, every page, with the true times it
/// started and ended.
async fn held(world: &World, instance: usize, flight: &FlightId) -> HeldListing {
    let from = world.now();
    let mut listing = HeldListing {
        flight: flight.clone(),
        from,
        to: from,
        holds: Vec::new(),
        pages: 0,
        complete: false,
    };
    let mut after: Option<FlightHoldKey> = None;
    // Bounded: MAX_PAGES pages, each at most ATTEMPTS tries.
    while listing.pages < MAX_PAGES {
        let mut page = None;
        for _ in 0..ATTEMPTS {
            match world
                .instance(instance)
                .api
                .checkout()
                .flight_holds(flight, HoldStatus::Held, after.as_ref())
                .await
            {
                Ok(p) => {
                    page = Some(p);
                    break;
                }
                Err(_) => tokio::time::sleep(POLL).await,
            }
        }
        let Some(page) = page else { break };
        listing.pages += 1;
        listing
            .holds
            .extend(page.items.into_iter().map(|h| (h.hold_id, h.status)));
        match page.next {
            Some(next) => after = Some(next),
            None => {
                listing.complete = true;
                break;
            }
        }
    }
    listing.to = world.now();
    listing
}

/// Both queues' depths as `GET /admin/queues` answers them, with the deliveries the
/// subscribers had accepted when the answer came; `None` if every attempt failed.
async fn depths(world: &World, instance: usize) -> Option<DepthsRead> {
    for _ in 0..ATTEMPTS {
        if let Ok(depths) = world.instance(instance).api.admin().queues().await {
            return Some(DepthsRead {
                at: world.now(),
                depths,
                delivered: world.deliveries().len(),
            });
        }
        tokio::time::sleep(POLL).await;
    }
    None
}
