//! Rate windows and operator leases.

#[allow(unused_imports)]
use super::fixtures::*;
#[allow(unused_imports)]
use super::*;

pub(super) fn rate_limit() -> seatgate::domain::RateLimit {
    seatgate::domain::RateLimit {
        requests: 3,
        window: Duration::from_secs(10),
    }
}

/// A window takes `limit` requests and refuses the next; each user and route has its own
/// counter, and the next window starts at zero.
pub async fn a_rate_window_counts_to_its_limit_and_the_next_window_starts_afresh(h: &Harness) {
    use seatgate::domain::{LimitedRoute, RateWindow};
    let limit = rate_limit();
    let (u, other) = (new_user(), new_user());
    let now = h.now();
    let w = RateWindow::at(&u, LimitedRoute::Confirm, now, &limit);
    for i in 1..=limit.requests {
        assert!(
            h.rate_limits.take(&w, limit.requests).await.unwrap(),
            "request {i} of {} is within the limit",
            limit.requests
        );
    }
    assert!(!h.rate_limits.take(&w, limit.requests).await.unwrap());
    assert!(
        !h.rate_limits.take(&w, limit.requests).await.unwrap(),
        "a refusal writes nothing that would reopen the window"
    );
    let other_route = RateWindow::at(&u, LimitedRoute::Book, now, &limit);
    assert!(
        h.rate_limits
            .take(&other_route, limit.requests)
            .await
            .unwrap()
    );
    let other_user = RateWindow::at(&other, LimitedRoute::Confirm, now, &limit);
    assert!(
        h.rate_limits
            .take(&other_user, limit.requests)
            .await
            .unwrap()
    );
    let next = RateWindow::at(&u, LimitedRoute::Confirm, w.ends_at, &limit);
    assert_ne!(next.start, w.start);
    for _ in 0..limit.requests {
        assert!(h.rate_limits.take(&next, limit.requests).await.unwrap());
    }
    assert!(!h.rate_limits.take(&next, limit.requests).await.unwrap());
}

/// A writer whose clock runs behind still counts in the window before the newest, against
/// that window's stored count: once the next window is opened, the spent one stays spent (a
/// store that dropped it would open it again at 1 and admit a second limit in it; seed 59 of
/// the simulator's default workload did, 32 bookings in a window of 30).
pub async fn a_window_stays_spent_after_the_next_one_opens(h: &Harness) {
    use seatgate::domain::{LimitedRoute, RateWindow};
    let limit = rate_limit();
    let u = new_user();
    let w = RateWindow::at(&u, LimitedRoute::Book, h.now(), &limit);
    for _ in 0..limit.requests {
        assert!(h.rate_limits.take(&w, limit.requests).await.unwrap());
    }
    let next = RateWindow::at(&u, LimitedRoute::Book, w.ends_at, &limit);
    assert!(h.rate_limits.take(&next, limit.requests).await.unwrap());
    assert!(
        !h.rate_limits.take(&w, limit.requests).await.unwrap(),
        "the spent window, read by a clock behind, is still spent"
    );
    // Two windows on, the old one is no writer's: dropping it (a TTL) may reopen it.
    let after = RateWindow::at(&u, LimitedRoute::Book, next.ends_at, &limit);
    assert!(after.drop_before() >= w.ends_at);
    assert!(h.rate_limits.take(&after, limit.requests).await.unwrap());
}

/// Many concurrent requests of one user in one window: exactly `limit` are counted.
pub async fn concurrent_takes_of_one_window_never_pass_the_limit(h: &Harness) {
    use seatgate::domain::{LimitedRoute, RateWindow};
    let limit = seatgate::domain::RateLimit {
        requests: 7,
        window: Duration::from_secs(60),
    };
    let u = new_user();
    let w = RateWindow::at(&u, LimitedRoute::Wait, h.now(), &limit);
    let takes = (0..40).map(|_| {
        let (store, w) = (h.rate_limits.clone(), w.clone());
        tokio::spawn(async move {
            // Conflicts are the caller's to retry, as `with_retry` does in the service.
            loop {
                match store.take(&w, limit.requests).await {
                    Err(e) if e.is_retryable() => continue,
                    other => return other.unwrap(),
                }
            }
        })
    });
    let mut taken = 0;
    for t in takes {
        taken += u32::from(t.await.unwrap());
    }
    assert_eq!(taken, limit.requests);
}

/// One holder at a time: a second taker is refused while the lease runs, takes it once it has
/// ended or was released, and a release by a holder that lost the lease leaves the new one.
/// Ten takers at once: exactly one wins.
pub async fn an_operator_lease_has_one_holder_until_it_ends_or_is_released(h: &Harness) {
    let name = format!("lease-{}", uuid::Uuid::new_v4());
    let now = h.now();
    let until = now.plus(Duration::from_secs(60));
    assert!(h.leases.take_lease(&name, "a", now, until).await.unwrap());
    assert!(
        !h.leases.take_lease(&name, "b", now, until).await.unwrap(),
        "held by a"
    );
    assert!(
        !h.leases
            .take_lease(&name, "a", now.plus(Duration::from_secs(59)), until)
            .await
            .unwrap(),
        "a lease is not taken twice, even by its holder"
    );
    h.leases.release_lease(&name, "b").await.unwrap();
    assert!(
        !h.leases.take_lease(&name, "b", now, until).await.unwrap(),
        "a release by another holder leaves the lease"
    );
    h.leases.release_lease(&name, "a").await.unwrap();
    assert!(h.leases.take_lease(&name, "b", now, until).await.unwrap());

    // b's lease ends; c takes it over, and b's late release leaves c's.
    let later = until;
    let c_until = later.plus(Duration::from_secs(60));
    assert!(
        h.leases
            .take_lease(&name, "c", later, c_until)
            .await
            .unwrap()
    );
    h.leases.release_lease(&name, "b").await.unwrap();
    assert!(
        !h.leases
            .take_lease(&name, "d", later, c_until)
            .await
            .unwrap()
    );

    let other = format!("lease-{}", uuid::Uuid::new_v4());
    let takes = (0..10).map(|i| {
        let leases = h.leases.clone();
        let other = other.clone();
        async move {
            leases
                .take_lease(&other, &format!("t{i}"), now, until)
                .await
                .unwrap()
        }
    });
    let won = futures::future::join_all(takes).await;
    assert_eq!(won.iter().filter(|w| **w).count(), 1, "{won:?}");
}

/// The differential case for [`RateWindow::admits`](seatgate::domain::RateWindow::admits):
/// takes of one window past its limit answer, one by one, as the rule does on the count the
/// window has reached (which the case tracks from the rule's own answers).
pub async fn rate_windows_answer_as_the_counting_rule(h: &Harness) {
    use seatgate::domain::{LimitedRoute, RateWindow};
    for limit in [1, 3] {
        let rule = seatgate::domain::RateLimit {
            requests: limit,
            window: Duration::from_secs(10),
        };
        let w = RateWindow::at(&new_user(), LimitedRoute::Book, h.now(), &rule);
        let mut counted: Option<u32> = None;
        for take in 1..=limit + 2 {
            let expected = RateWindow::admits(counted, limit);
            let got = h.rate_limits.take(&w, limit).await.unwrap();
            assert_eq!(
                got, expected,
                "limit {limit}, take {take}, counted {counted:?}"
            );
            if expected {
                counted = Some(counted.unwrap_or(0) + 1);
            }
        }
    }
}

/// The differential case for [`may_take_lease`](seatgate::domain::may_take_lease): a lease
/// missing, held by another until later, ending exactly now, ended, and still held by the
/// taker, each taken through the port, answers as the rule does on the lease as it was.
pub async fn leases_answer_as_the_take_rule(h: &Harness) {
    use seatgate::domain::may_take_lease;
    let now = h.now();
    let later = now.plus(Duration::from_secs(30));
    // (held by whom, held until): None is no lease stored.
    let cases: [(Option<&str>, Millis); 5] = [
        (None, now),
        (Some("other"), later),
        (Some("other"), now),
        (Some("other"), Millis(now.0 - 1)),
        (Some("me"), later),
    ];
    for (held_by, held_until) in cases {
        let name = unique("lease");
        if let Some(holder) = held_by {
            // Taken when it was free, ending at `held_until`.
            let taken = h
                .leases
                .take_lease(&name, holder, Millis(held_until.0 - 60_000), held_until)
                .await
                .unwrap();
            assert!(taken, "set-up: a fresh lease is taken");
        }
        let expected = may_take_lease(held_by.map(|_| held_until), now);
        let got = h.leases.take_lease(&name, "me", now, later).await.unwrap();
        assert_eq!(
            got, expected,
            "held by {held_by:?} until {held_until:?} at {now:?}"
        );
    }
}
