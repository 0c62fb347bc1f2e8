//! What an instance remembers of each flight between reads: the flight (which never changes)
//! and its sold-out mark (which may), for `read_ttl`. Shared by the sale, checkout and the
//! waiting list, so one read serves all three and a sold-out answer costs no store read.

use super::cache::InstanceCache;
use super::with_retry;
use crate::config::Timing;
use crate::domain::{Flight, FlightId};
use crate::ports::{Flights, Random, StoreError};
use std::sync::Arc;

/// What an instance remembers of a flight between reads.
#[derive(Debug, Clone)]
pub(super) struct Known {
    pub(super) flight: Flight,
    pub(super) sold_out: bool,
}

/// Flights by id, read through this instance's cache (at most 10,000 flights, each for
/// `read_ttl`).
#[derive(Clone)]
pub(super) struct KnownFlights {
    flights: Arc<dyn Flights>,
    random: Arc<dyn Random>,
    cache: Arc<dyn InstanceCache<FlightId, Option<Known>, StoreError>>,
}

impl KnownFlights {
    pub(super) fn new(ports: &super::Ports, timing: &Timing) -> Self {
        KnownFlights {
            flights: ports.flights.clone(),
            random: ports.random.clone(),
            cache: ports
                .cache
                .build(10_000, timing.read_ttl, ports.clock.clone()),
        }
    }

    /// The flight and its sold-out mark, from the cache or one read; `None` if no such flight.
    pub(super) async fn get(&self, id: &FlightId) -> Result<Option<Known>, StoreError> {
        self.cache
            .try_get_with(
                id.clone(),
                Box::pin(async {
                    let inventory =
                        with_retry(&*self.random, || self.flights.inventory(id)).await?;
                    Ok::<_, StoreError>(inventory.map(|i| Known {
                        flight: i.flight,
                        sold_out: i.sold_out,
                    }))
                }),
            )
            .await
            .map_err(|e| (*e).clone())
    }

    /// Remembers `flight` as sold out, without a read.
    pub(super) async fn sold_out(&self, flight: &Flight) {
        let known = Known {
            flight: flight.clone(),
            sold_out: true,
        };
        self.cache
            .insert(flight.flight_id.clone(), Some(known))
            .await;
    }

    /// Forgets `id`: the next request reads it again (seats came back, or it was created).
    pub(super) async fn invalidate(&self, id: &FlightId) {
        self.cache.invalidate(id).await;
    }
}
