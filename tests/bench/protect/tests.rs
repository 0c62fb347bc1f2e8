//! The call log's and the breaker timeline's arithmetic, on hand-made calls.

use super::*;
use seatgate::domain::Millis;

fn call(at_ms: i64) -> Call {
    Call {
        at_ms,
        route: "GET /api/seats".into(),
    }
}

#[test]
fn spacing_counts_the_busiest_window() {
    assert_eq!(call_spacing(&[0, 999, 1000, 2500], 1000), (2, Some(1)));
    assert_eq!(call_spacing(&[], 1000), (0, None));
}

#[test]
fn ttl_bound_is_one_per_window_plus_one() {
    assert_eq!(
        per_ttl_bound(Duration::from_secs(10), Duration::from_secs(1)),
        11
    );
    assert_eq!(
        per_ttl_bound(Duration::from_millis(10_200), Duration::from_secs(1)),
        12
    );
}

#[test]
fn open_phases_count_calls_and_probes() {
    let closed = BreakerState::closed();
    let open = closed.opened(Millis(1_000), Duration::from_secs(5));
    let probing = open.probing("i-a", Millis(6_010), Duration::from_secs(3));
    let reopened = probing.opened(Millis(6_012), Duration::from_secs(5));
    let probing2 = reopened.probing("i-b", Millis(11_020), Duration::from_secs(3));
    let closed2 = probing2.closed_at(Millis(11_025));
    let seen: Vec<Seen> = [closed, open, reopened, closed2]
        .into_iter()
        .map(|state| Seen {
            seen_ms: 0.0,
            state,
        })
        .collect();
    // 1000: in the opening ms; 1050: first cache ttl; 3000: while open; 6011: probe;
    // 11025: the second probe in the closing ms, 11030 after the close.
    let calls: Vec<Call> = [999, 1000, 1050, 3000, 6011, 11025, 11030]
        .into_iter()
        .map(call)
        .collect();
    let phases = open_phases(&seen, &calls, 100, 20_000);
    assert_eq!(phases.len(), 2);
    let (a, b) = (&phases[0], &phases[1]);
    assert!(a.from_closed && !b.from_closed);
    assert_eq!((a.at_open_ms, a.first_cache_ttl, a.rest), (1, 1, 1));
    let h = a.half_open.as_ref().unwrap();
    assert_eq!((h.ended_by, h.probes), (Some("Open"), 1));
    assert_eq!((b.at_open_ms, b.first_cache_ttl, b.rest), (0, 0, 0));
    let h = b.half_open.as_ref().unwrap();
    assert_eq!(
        (h.ended_by, h.calls, h.at_end_ms, h.probes),
        (Some("Closed"), 0, 1, 1)
    );
}
