//! Seat readings and the breaker: refresh leases, newer-only readings, failed refreshes, route
//! pauses and the breaker's generation.

#[allow(unused_imports)]
use super::fixtures::*;
#[allow(unused_imports)]
use super::*;

pub(super) fn lease(holder: &str, since: Millis, for_ms: i64) -> RefreshLease {
    RefreshLease {
        holder: holder.into(),
        since,
        until: Millis(since.0 + for_ms),
    }
}

pub async fn a_refresh_lease_goes_to_one_holder_until_a_reading_or_its_end(h: &Harness) {
    let key = ReadKey::Seat(new_seat());
    let t = h.now();
    let r = &h.readings;
    assert_eq!(r.entry(&key).await.unwrap(), None);
    assert!(
        r.lease_refresh(&key, &lease("a", t, 1_000), t)
            .await
            .unwrap()
    );
    let entry = r
        .entry(&key)
        .await
        .unwrap()
        .expect("the lease made an entry");
    assert_eq!(entry.lease, Some(lease("a", t, 1_000)));
    assert_eq!(entry.reading, None);
    // Another holder waits while it is live; the same holder may take it over.
    assert!(
        !r.lease_refresh(&key, &lease("b", Millis(t.0 + 10), 1_000), t)
            .await
            .unwrap()
    );
    assert!(
        r.lease_refresh(&key, &lease("a", Millis(t.0 + 10), 1_000), t)
            .await
            .unwrap()
    );
    // Past its end, another holder may take it.
    assert!(
        r.lease_refresh(&key, &lease("b", Millis(t.0 + 1_010), 1_000), t)
            .await
            .unwrap()
    );
    // A reading recorded after the lease began ends it, but a fresh reading refuses new leases.
    let reading = Reading::seat(seat_of(&key), true, Millis(t.0 + 1_020));
    assert!(r.record(&reading).await.unwrap());
    let fresh_cutoff = Millis(t.0 + 1_000);
    assert!(
        !r.lease_refresh(&key, &lease("c", Millis(t.0 + 1_030), 1_000), fresh_cutoff)
            .await
            .unwrap()
    );
    let stale_cutoff = Millis(t.0 + 1_021);
    assert!(
        r.lease_refresh(&key, &lease("c", Millis(t.0 + 1_030), 1_000), stale_cutoff)
            .await
            .unwrap()
    );
    let entry = r.entry(&key).await.unwrap().unwrap();
    assert_eq!(
        entry.reading,
        Some(reading),
        "a lease leaves the reading in place"
    );
    assert_eq!(entry.lease.map(|l| l.holder), Some("c".into()));
}

pub(super) fn seat_of(key: &ReadKey) -> SeatId {
    match key {
        ReadKey::Seat(s) => s.clone(),
        ReadKey::Room(_) => unreachable!("a seat key"),
    }
}

pub async fn only_a_newer_reading_is_recorded_and_batches_read_what_exists(h: &Harness) {
    let r = &h.readings;
    let t = h.now();
    let seat = new_seat();
    let taken = Reading::seat(seat.clone(), false, t);
    assert!(r.record(&taken).await.unwrap());
    assert!(
        !r.record(&Reading::seat(seat.clone(), true, t))
            .await
            .unwrap()
    );
    assert!(
        !r.record(&Reading::seat(seat.clone(), true, Millis(t.0 - 1)))
            .await
            .unwrap()
    );
    let key = ReadKey::Seat(seat.clone());
    assert_eq!(
        r.entry(&key).await.unwrap().unwrap().reading,
        Some(taken.clone())
    );
    let freed = Reading::seat(seat.clone(), true, Millis(t.0 + 1));
    assert!(r.record(&freed).await.unwrap());

    let room = ReadKey::Room(RoomId::parse(&unique("room")).unwrap());
    let map = Reading {
        key: room.clone(),
        value: ReadValue::Room {
            seats: vec![SeatAvailability {
                seat_id: seat.clone(),
                available: true,
            }],
        },
        as_of: t,
    };
    assert!(r.record(&map).await.unwrap());
    let missing = ReadKey::Seat(new_seat());
    let mut got = r
        .entries(&[key.clone(), missing, room.clone()])
        .await
        .unwrap();
    got.sort_by_key(|(k, _)| k.as_key());
    let mut want = vec![
        (
            key,
            CacheEntry {
                reading: Some(freed),
                lease: None,
                failure: None,
            },
        ),
        (
            room,
            CacheEntry {
                reading: Some(map),
                lease: None,
                failure: None,
            },
        ),
    ];
    want.sort_by_key(|(k, _)| k.as_key());
    assert_eq!(got, want);
    assert_eq!(r.entries(&[]).await.unwrap(), vec![]);
    let too_many: Vec<ReadKey> = (0..=MAX_BATCH_READ)
        .map(|_| ReadKey::Seat(new_seat()))
        .collect();
    assert!(matches!(
        r.entries(&too_many).await,
        Err(StoreError::Unavailable(_))
    ));
}

/// The routes' pauses are one item per store, like the breaker's: the case starts from whatever is
/// stored and only moves its routes later. Each write is checked against the domain's rule
/// ([`RoutePauses::may_extend`]) on what was stored just before: the differential case.
pub async fn a_pause_only_moves_later_and_for_its_route_alone(h: &Harness) {
    let b = &h.breaker;
    let before = b.pauses().await.unwrap();
    let base = |route: UpstreamRoute| {
        before
            .until(route)
            .unwrap_or(Millis(0))
            .max(h.now())
            .plus(Duration::from_secs(3_600))
    };
    let t = base(UpstreamRoute::Room);
    for until in [t, t, Millis(t.0 - 1), Millis(t.0 + 1), Millis(t.0 + 1)] {
        let stored = b.pauses().await.unwrap();
        let want = stored.may_extend(UpstreamRoute::Room, until);
        assert_eq!(
            b.pause(UpstreamRoute::Room, until).await.unwrap(),
            want,
            "pause(room, {until:?}) over {stored:?}"
        );
        let after = b.pauses().await.unwrap();
        assert_eq!(after.until(UpstreamRoute::Room), {
            let s = stored.until(UpstreamRoute::Room);
            if want { Some(until) } else { s }
        });
    }
    assert_eq!(
        b.pauses().await.unwrap().until(UpstreamRoute::Room),
        Some(Millis(t.0 + 1))
    );
    assert_eq!(
        b.pauses().await.unwrap().until(UpstreamRoute::Reserve),
        before.until(UpstreamRoute::Reserve),
        "another route is left alone"
    );
    // Instances told different times at once: the latest stands, whatever the order.
    let t = base(UpstreamRoute::Charge);
    let writes = (0..8).map(|i| b.pause(UpstreamRoute::Charge, Millis(t.0 + i * 7 % 8)));
    let taken = futures::future::join_all(writes).await;
    assert!(taken.iter().any(|r| *r.as_ref().unwrap()));
    assert_eq!(
        b.pauses().await.unwrap().until(UpstreamRoute::Charge),
        Some(Millis(t.0 + 7))
    );
}

/// A failed refresh ([`ReadFailure`]) on a key: each write is checked against the domain's
/// rules ([`CacheEntry::may_record_failure`], [`CacheEntry::may_lease`]) on the entry stored
/// just before it.
pub async fn a_failed_refresh_keeps_everyone_off_the_key_until_it_ends_and_a_reading_clears_it(
    h: &Harness,
) {
    let r = &h.readings;
    let t = h.now();
    let seat = new_seat();
    let key = ReadKey::Seat(seat.clone());
    let failure = |at: i64, until: i64, count: u32| ReadFailure {
        at: Millis(t.0 + at),
        until: Millis(t.0 + until),
        count,
    };
    // On no entry at all: it makes one, without a reading.
    assert!(r.record_failure(&key, &failure(0, 1_000, 1)).await.unwrap());
    let entry = r.entry(&key).await.unwrap().unwrap();
    assert_eq!(entry.failure, Some(failure(0, 1_000, 1)));
    assert_eq!(entry.reading, None);
    // Reading as of t+100, then failures tried over it, each as the rule says.
    let reading = Reading::seat(seat.clone(), true, Millis(t.0 + 100));
    assert!(r.record(&reading).await.unwrap());
    assert_eq!(
        r.entry(&key).await.unwrap().unwrap().failure,
        None,
        "a reading clears it"
    );
    for (f, want) in [
        (failure(100, 2_000, 1), false), // sent no later than the stored reading
        (failure(200, 2_000, 1), true),
        (failure(300, 1_500, 2), false), // ends sooner than the stored one
        (failure(300, 2_000, 2), false), // ends no later
        (failure(400, 4_000, 2), true),
    ] {
        let before = r.entry(&key).await.unwrap();
        assert_eq!(
            CacheEntry::may_record_failure(before.as_ref(), &f),
            want,
            "the case's own expectation of the rule"
        );
        assert_eq!(r.record_failure(&key, &f).await.unwrap(), want, "{f:?}");
        let after = r.entry(&key).await.unwrap().unwrap();
        let expected = if want {
            Some(f.clone())
        } else {
            before.unwrap().failure
        };
        assert_eq!(after.failure, expected);
        assert_eq!(after.reading, Some(reading.clone()), "the reading stays");
    }
    // Nobody leases the key before the failure ends, stale reading or not; then anyone may.
    let stale_before = Millis(t.0 + 10_000);
    for (holder, since, want) in [("a", 3_999, false), ("b", 4_000, true)] {
        let l = lease(holder, Millis(t.0 + since), 1_000);
        let before = r.entry(&key).await.unwrap();
        assert_eq!(
            CacheEntry::may_lease(before.as_ref(), &l, stale_before),
            want
        );
        assert_eq!(
            r.lease_refresh(&key, &l, stale_before).await.unwrap(),
            want,
            "{holder}"
        );
    }
    // A reading recorded later clears the failure and keeps the lease.
    let later = Reading::seat(seat, false, Millis(t.0 + 4_100));
    assert!(r.record(&later).await.unwrap());
    let entry = r.entry(&key).await.unwrap().unwrap();
    assert_eq!(entry.failure, None);
    assert_eq!(entry.reading, Some(later));
    assert_eq!(entry.lease.map(|l| l.holder), Some("b".into()));
}

pub async fn the_breaker_changes_only_over_the_generation_it_was_decided_on(h: &Harness) {
    // One breaker item per store, which other cases never touch: start from whatever it is.
    let b = &h.breaker;
    let now = h.now();
    let seen = b.breaker().await.unwrap();
    let opened = seen.opened(now, Duration::from_secs(5));
    assert!(b.swap_breaker(&opened).await.unwrap());
    assert_eq!(b.breaker().await.unwrap(), opened);
    // Two instances decided on the same generation: only the first write counts.
    let other = seen.opened(now, Duration::from_secs(9));
    assert!(!b.swap_breaker(&other).await.unwrap());
    let a = opened.probing("a", now, Duration::from_secs(1));
    let c = opened.probing("c", now, Duration::from_secs(1));
    assert!(b.swap_breaker(&a).await.unwrap());
    assert!(!b.swap_breaker(&c).await.unwrap());
    assert_eq!(b.breaker().await.unwrap(), a);
    let closed = a.closed_at(now);
    assert!(b.swap_breaker(&closed).await.unwrap());
    assert!(b.breaker().await.unwrap().is_closed());
}
