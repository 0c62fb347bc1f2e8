//! The upstream's own "not before": a `Retry-After` it gave, kept for every instance.
//!
//! A busy answer (429, or a 503 that says when to come back) is the upstream telling the whole
//! fleet to wait, not just the one caller that heard it. On Lambda the other instances never
//! heard it, so the time is kept in the store, one item for all routes, one attribute per
//! route, like the breaker; each instance keeps a brief copy. A pause only ever moves later: two
//! instances told different times keep the later one, and an old answer arriving late cannot
//! shorten a newer pause. That is the rule ([`RoutePauses::may_extend`]) both adapters apply,
//! the embedded one by calling it, the DynamoDB one as a condition expression.
//!
//! Pauses are per route because the upstream answers per route: a rate-limited reserve endpoint
//! says nothing about seat reads. The circuit breaker is the fleet-wide "everything" switch.

use super::Millis;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The upstream's routes, as a pause and a metric's `route` name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UpstreamRoute {
    /// `POST /api/reservations`.
    Reserve,
    /// `GET /api/charge`.
    Charge,
    /// `GET /api/seats/{id}`.
    Seat,
    /// `GET /api/rooms/{id}/seats`.
    Room,
}

impl UpstreamRoute {
    pub const ALL: [UpstreamRoute; 4] = [
        UpstreamRoute::Reserve,
        UpstreamRoute::Charge,
        UpstreamRoute::Seat,
        UpstreamRoute::Room,
    ];

    /// The route's name in metrics, the store and the ops page.
    pub fn as_str(self) -> &'static str {
        match self {
            UpstreamRoute::Reserve => "reserve",
            UpstreamRoute::Charge => "charge",
            UpstreamRoute::Seat => "seat",
            UpstreamRoute::Room => "room",
        }
    }
}

/// Until when each route is paused (a route never paused is absent). Past times are kept until
/// overwritten; [`RoutePauses::paused_until`] is what decides.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutePauses(pub BTreeMap<UpstreamRoute, Millis>);

impl RoutePauses {
    /// The stored time for `route`, past or not.
    pub fn until(&self, route: UpstreamRoute) -> Option<Millis> {
        self.0.get(&route).copied()
    }

    /// When `route` may be called again, if it may not be at `now`.
    pub fn paused_until(&self, route: UpstreamRoute, now: Millis) -> Option<Millis> {
        self.until(route).filter(|until| now < *until)
    }

    /// Whether a pause of `route` until `until` may be written over these: only if it ends
    /// later than the one stored (so a pause never shrinks).
    pub fn may_extend(&self, route: UpstreamRoute, until: Millis) -> bool {
        self.until(route).is_none_or(|stored| stored < until)
    }

    /// These pauses with `route` paused until `until`, if that extends it.
    pub fn extended(&self, route: UpstreamRoute, until: Millis) -> RoutePauses {
        let mut next = self.clone();
        if self.may_extend(route, until) {
            next.0.insert(route, until);
        }
        next
    }

    /// The routes paused at `now`, with their ends.
    pub fn active(&self, now: Millis) -> impl Iterator<Item = (UpstreamRoute, Millis)> + '_ {
        self.0
            .iter()
            .filter(move |(_, until)| now < **until)
            .map(|(r, u)| (*r, *u))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_only_moves_later_and_ends_at_its_time() {
        let pauses = RoutePauses::default().extended(UpstreamRoute::Seat, Millis(5_000));
        assert_eq!(
            pauses.paused_until(UpstreamRoute::Seat, Millis(4_999)),
            Some(Millis(5_000))
        );
        assert_eq!(
            pauses.paused_until(UpstreamRoute::Seat, Millis(5_000)),
            None
        );
        assert_eq!(pauses.paused_until(UpstreamRoute::Reserve, Millis(0)), None);
        assert!(!pauses.may_extend(UpstreamRoute::Seat, Millis(5_000)));
        assert!(!pauses.may_extend(UpstreamRoute::Seat, Millis(4_000)));
        assert!(pauses.may_extend(UpstreamRoute::Seat, Millis(5_001)));
        assert_eq!(
            pauses.extended(UpstreamRoute::Seat, Millis(4_000)),
            pauses,
            "an earlier time leaves the pause as it was"
        );
        let both = pauses.extended(UpstreamRoute::Reserve, Millis(7_000));
        assert_eq!(
            both.active(Millis(6_000)).collect::<Vec<_>>(),
            vec![(UpstreamRoute::Reserve, Millis(7_000))]
        );
    }

    #[test]
    fn holds_round_trip_as_json() {
        let pauses = RoutePauses::default()
            .extended(UpstreamRoute::Reserve, Millis(1))
            .extended(UpstreamRoute::Room, Millis(2));
        let json = serde_json::to_string(&pauses).unwrap();
        assert_eq!(json, r#"{"reserve":1,"room":2}"#);
        assert_eq!(serde_json::from_str::<RoutePauses>(&json).unwrap(), pauses);
    }
}
