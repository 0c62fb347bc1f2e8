//! The upstream's circuit breaker, as a state every instance shares.
//!
//! An in-process breaker protects nothing on Lambda: a hundred instances would each need their
//! own failures before they stopped. So the state lives in one store item and every change is
//! one compare-and-set on its `generation`: whoever writes generation n+1 first decided, and the
//! others read what they lost to. The phases are resilience4j's: closed (calls pass), open (no
//! call at all until `until`), and half-open, here `Probing`: exactly one instance fleet-wide won
//! the write that lets it send one probe, and its answer closes or reopens the breaker for
//! everyone. A prober that dies leaves a lease that runs out, and then another may probe.
//!
//! Deciding to open (the failure rate over a window) is each instance's own count of its own
//! calls; counting every call in the store would cost a write per upstream call. Once any
//! instance opens the breaker, all of them stop within their brief in-process cache of this item.

use super::Millis;
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum BreakerPhase {
    Closed,
    /// No upstream call until `until`; then one probe.
    Open {
        until: Millis,
    },
    /// `holder` sends the one probe; past `until` (its lease) another instance may.
    Probing {
        holder: String,
        until: Millis,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakerState {
    #[serde(flatten)]
    pub phase: BreakerPhase,
    /// +1 on every change; a change applies only over the generation it was decided on.
    pub generation: u64,
    /// When this phase began.
    pub since: Millis,
}

/// What the breaker says about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Closed: call.
    Pass,
    /// Open long enough: try to become the one prober (a compare-and-set decides).
    Probe,
    /// No call before `until`.
    Shut { until: Millis },
}

impl Default for BreakerState {
    fn default() -> Self {
        BreakerState::closed()
    }
}

impl BreakerState {
    /// The state of a breaker never written: closed, generation 0.
    pub fn closed() -> Self {
        BreakerState {
            phase: BreakerPhase::Closed,
            generation: 0,
            since: Millis(0),
        }
    }

    pub fn is_closed(&self) -> bool {
        self.phase == BreakerPhase::Closed
    }

    /// What a call at `now` may do.
    pub fn gate(&self, now: Millis) -> Gate {
        match &self.phase {
            BreakerPhase::Closed => Gate::Pass,
            BreakerPhase::Open { until } | BreakerPhase::Probing { until, .. } if now < *until => {
                Gate::Shut { until: *until }
            }
            BreakerPhase::Open { .. } | BreakerPhase::Probing { .. } => Gate::Probe,
        }
    }

    /// Opened at `now` for `interval` (from closed on a failure rate, or from a failed probe).
    pub fn opened(&self, now: Millis, interval: Duration) -> BreakerState {
        self.next(
            BreakerPhase::Open {
                until: now.plus(interval),
            },
            now,
        )
    }

    /// `holder` probes from `now`, for at most `lease`.
    pub fn probing(&self, holder: &str, now: Millis, lease: Duration) -> BreakerState {
        self.next(
            BreakerPhase::Probing {
                holder: holder.to_owned(),
                until: now.plus(lease),
            },
            now,
        )
    }

    /// The probe succeeded.
    pub fn closed_at(&self, now: Millis) -> BreakerState {
        self.next(BreakerPhase::Closed, now)
    }

    /// Whether `holder` is the instance probing now.
    pub fn is_probed_by(&self, holder: &str) -> bool {
        matches!(&self.phase, BreakerPhase::Probing { holder: h, .. } if h == holder)
    }

    fn next(&self, phase: BreakerPhase, now: Millis) -> BreakerState {
        BreakerState {
            phase,
            generation: self.generation + 1,
            since: now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_passes_open_shuts_until_its_time_then_probes() {
        let closed = BreakerState::closed();
        assert_eq!(closed.gate(Millis(5)), Gate::Pass);
        let open = closed.opened(Millis(1_000), Duration::from_secs(5));
        assert_eq!(open.generation, 1);
        assert_eq!(
            open.gate(Millis(5_999)),
            Gate::Shut {
                until: Millis(6_000)
            }
        );
        assert_eq!(open.gate(Millis(6_000)), Gate::Probe);
        let probing = open.probing("a", Millis(6_000), Duration::from_secs(2));
        assert!(probing.is_probed_by("a") && !probing.is_probed_by("b"));
        assert_eq!(
            probing.gate(Millis(7_000)),
            Gate::Shut {
                until: Millis(8_000)
            }
        );
        // A prober that never answered: its lease runs out and another may probe.
        assert_eq!(probing.gate(Millis(8_000)), Gate::Probe);
        let closed_again = probing.closed_at(Millis(6_100));
        assert_eq!(
            (closed_again.generation, closed_again.since),
            (3, Millis(6_100))
        );
        assert!(closed_again.is_closed());
    }

    #[test]
    fn the_state_round_trips_as_json() {
        let s = BreakerState::closed()
            .opened(Millis(1), Duration::from_secs(1))
            .probing("i-1", Millis(2), Duration::from_secs(1));
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<BreakerState>(&json).unwrap(), s);
    }
}
