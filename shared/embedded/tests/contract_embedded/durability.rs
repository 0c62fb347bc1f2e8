//! What only the embedded backend promises: everything survives a reopen, the file is WAL and
//! versioned, each write adds its outbox row in its own transaction and a failing row backs off
//! then goes dead, a dedup id comes back after its window, dead letters are listed, two handles
//! never hold one group at once, and the history survives the outbox's pruning.

use super::*;

#[tokio::test]
async fn everything_survives_a_reopen_and_in_flight_messages_return_after_visibility() {
    let dir = TempDir::new("durable");
    let clock = manual_clock();
    let t0 = clock.now();
    let owner = user();
    let action = Action::prepare(
        owner.clone(),
        ActionKind::ReserveSeat,
        seat("A"),
        t0,
        Duration::from_secs(300),
    );
    let c = confirmation(&action, t0);
    let (wait, wait_consent) = wait_for(t0);
    let group = seat("G");
    let (m1, m2) = (message(&group), message(&group));
    let claimed;
    {
        let b = EmbeddedBackend::open(&dir.db(), clock.clone(), config()).unwrap();
        b.put_credential(&owner, &Secret::new("s3cret"))
            .await
            .unwrap();
        b.put_action(&action).await.unwrap();
        b.confirm(&c).await.unwrap();
        b.register_wait(&wait, &wait_consent).await.unwrap();
        claimed = b.transition(&claim(&wait, t0)).await.unwrap();
        b.send(&m1).await.unwrap();
        b.send(&m2).await.unwrap();
        let got = b.receive(1).await.unwrap();
        assert_eq!(body(&got[0]), m1);
    }

    let b = EmbeddedBackend::open(&dir.db(), clock.clone(), config()).unwrap();
    let mut confirmed = action.clone();
    confirmed.status = ActionStatus::Confirmed;
    confirmed.intent_id = Some(c.intent.intent_id.clone());
    assert_eq!(
        b.get_action(&action.action_id).await.unwrap(),
        Some(confirmed)
    );
    assert_eq!(
        b.get_intent(&c.intent.intent_id).await.unwrap(),
        Some(c.intent.clone())
    );
    assert_eq!(
        b.get_consent(&c.intent.intent_id).await.unwrap(),
        Some(c.consent.clone())
    );
    assert_eq!(
        b.get_intent(&wait.intent_id).await.unwrap(),
        Some(claimed.clone())
    );
    assert_eq!(
        b.credential(&owner).await.unwrap(),
        Some(Secret::new("s3cret"))
    );

    let outbox = b.fetch_outbox(100).await.unwrap();
    let changes: Vec<(Option<&Intent>, Option<&Intent>)> = outbox
        .iter()
        .filter_map(|r| r.change.intent())
        .map(|c| (c.old.as_ref(), c.new.as_ref()))
        .collect();
    assert_eq!(
        changes,
        vec![
            (None, Some(&c.intent)),
            (None, Some(&wait)),
            (Some(&wait), Some(&claimed)),
        ]
    );
    assert!(outbox.windows(2).all(|w| w[0].seq < w[1].seq));

    // m1 is still in flight after the restart: its group is locked until visibility ends.
    assert_eq!(seat_depth(&b).await, (1, 1, 0));
    assert!(b.receive(10).await.unwrap().is_empty());
    clock.advance(VISIBILITY);
    let again = b.receive(10).await.unwrap();
    assert_eq!(again.iter().map(body).collect::<Vec<_>>(), vec![m1, m2]);
    assert_eq!(again[0].receive_count, 2);
    assert_eq!(again[1].receive_count, 1);
}

#[tokio::test]
async fn the_file_is_wal_and_versioned_and_a_newer_schema_is_refused() {
    let dir = TempDir::new("schema");
    let clock = manual_clock();
    let first = EmbeddedBackend::open(&dir.db(), clock.clone(), config()).unwrap();
    let second = EmbeddedBackend::open(&dir.db(), clock.clone(), config()).unwrap();
    drop((first, second));

    let raw = rusqlite::Connection::open(dir.db()).unwrap();
    let mode: String = raw
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let version: i32 = raw
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    // The due query is a range scan on the due index, not a table scan.
    let plan: Vec<String> = raw
        .prepare(
            "EXPLAIN QUERY PLAN SELECT item FROM intents WHERE due_at IS NOT NULL \
             AND due_at <= 1 ORDER BY due_at, intent_id LIMIT 10",
        )
        .unwrap()
        .query_map([], |r| r.get::<_, String>(3))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(
        plan.iter().any(|step| step.contains("intents_due")),
        "plan: {plan:?}"
    );
    // A flight's holds list from their index in its order, never sorted after a scan.
    let plan: Vec<String> = raw
        .prepare(
            "EXPLAIN QUERY PLAN SELECT item FROM checkout_holds \
             WHERE flight_id = 'F' AND status = 'LAPSED' \
             AND (json_extract(item, '$.shard'), hold_id) > (0, 'x') \
             ORDER BY json_extract(item, '$.shard'), hold_id LIMIT 10",
        )
        .unwrap()
        .query_map([], |r| r.get::<_, String>(3))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(
        plan.iter()
            .any(|step| step.contains("checkout_holds_by_flight"))
            && !plan.iter().any(|step| step.contains("TEMP B-TREE")),
        "plan: {plan:?}"
    );

    raw.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    drop(raw);
    let err = EmbeddedBackend::open(&dir.db(), clock, config()).unwrap_err();
    assert!(
        matches!(err, StoreError::Unavailable(ref m) if m.contains("newer")),
        "{err:?}"
    );
}

#[tokio::test]
async fn each_write_adds_one_outbox_row_in_its_transaction_and_refusals_none() {
    let clock = manual_clock();
    let b = EmbeddedBackend::open_in_memory(clock.clone(), config()).unwrap();
    let wake = b.outbox_notify();
    let woken = || {
        let wake = wake.clone();
        async move {
            tokio::time::timeout(Duration::from_millis(50), wake.notified())
                .await
                .is_ok()
        }
    };
    let now = clock.now();
    let action = Action::prepare(
        user(),
        ActionKind::ReserveSeat,
        seat("A"),
        now,
        Duration::from_secs(60),
    );

    b.put_action(&action).await.unwrap();
    b.put_credential(&action.user_id, &Secret::new("x"))
        .await
        .unwrap();
    assert_eq!(
        pending(&b).await,
        0,
        "actions and credentials are not intents"
    );
    assert!(!woken().await);

    let c = confirmation(&action, now);
    b.confirm(&c).await.unwrap();
    assert_eq!(pending(&b).await, 1);
    assert!(woken().await, "a commit with an outbox row wakes the relay");
    let again = confirmation(&action, now);
    assert!(matches!(
        b.confirm(&again).await,
        Err(ConfirmError::Refused(_))
    ));
    assert_eq!(pending(&b).await, 1, "a refused confirm writes no row");
    assert!(!woken().await);

    let (wait, consent) = wait_for(now);
    b.register_wait(&wait, &consent).await.unwrap();
    assert_eq!(pending(&b).await, 2);
    let clash = b.register_wait(&wait, &consent).await;
    assert!(clash.is_err());
    assert_eq!(pending(&b).await, 2, "a failed register writes no row");

    let claimed = b.transition(&claim(&c.intent, now)).await.unwrap();
    assert_eq!(pending(&b).await, 3);
    assert!(matches!(
        b.transition(&claim(&c.intent, now)).await,
        Err(TransitionError::Refused(_))
    ));
    assert!(matches!(
        b.transition(&complete(&c.intent, now, claimed.fencing_token + 1))
            .await,
        Err(TransitionError::Refused(_))
    ));
    let mut ghost = claim(&c.intent, now);
    ghost.intent_id = IntentId::generate();
    assert!(matches!(
        b.transition(&ghost).await,
        Err(TransitionError::NotFound)
    ));
    assert_eq!(pending(&b).await, 3, "refused transitions write no row");
    let done = b
        .transition(&complete(&c.intent, now, claimed.fencing_token))
        .await
        .unwrap();
    assert_eq!(pending(&b).await, 4);

    let rows = b.fetch_outbox(10).await.unwrap();
    let last = rows[3].change.intent().unwrap();
    assert_eq!(
        (last.old.as_ref(), last.new.as_ref()),
        (Some(&claimed), Some(&done))
    );
    assert_eq!(b.fetch_outbox(2).await.unwrap(), rows[..2].to_vec());
    b.ack_outbox(&rows.iter().map(|r| r.seq).collect::<Vec<_>>())
        .await
        .unwrap();
    assert!(b.fetch_outbox(10).await.unwrap().is_empty());
    assert_eq!(b.outbox_counts().await.unwrap(), (0, 4, 0));

    clock.advance(Duration::from_secs(1));
    assert_eq!(b.prune_outbox(clock.now()).await.unwrap(), 4);
    assert_eq!(b.outbox_counts().await.unwrap(), (0, 0, 0));
}

#[tokio::test]
async fn a_failing_outbox_row_backs_off_exponentially_then_goes_dead() {
    let clock = manual_clock();
    let config = EmbeddedConfig {
        outbox_max_attempts: 3,
        ..config()
    };
    let b = EmbeddedBackend::open_in_memory(clock.clone(), config).unwrap();
    let (wait, consent) = wait_for(clock.now());
    b.register_wait(&wait, &consent).await.unwrap();
    let seq = b.fetch_outbox(10).await.unwrap()[0].seq;
    let fetched = || async { b.fetch_outbox(10).await.unwrap() };

    b.fail_outbox(seq, "subscriber said 503").await.unwrap();
    // Another write meanwhile is relayed at once: a backing-off row does not hold it up.
    let (other, other_consent) = wait_for(clock.now());
    b.register_wait(&other, &other_consent).await.unwrap();
    let now_due = fetched().await;
    assert_eq!(now_due.len(), 1);
    assert_eq!(
        now_due[0].change.intent().unwrap().new.as_ref(),
        Some(&other)
    );
    b.ack_outbox(&[now_due[0].seq]).await.unwrap();

    clock.advance(Duration::from_millis(99));
    assert!(fetched().await.is_empty(), "first retry after 100 ms");
    clock.advance(Duration::from_millis(1));
    assert_eq!(fetched().await[0].seq, seq);

    b.fail_outbox(seq, "again").await.unwrap();
    clock.advance(Duration::from_millis(199));
    assert!(fetched().await.is_empty(), "second retry after 200 ms");
    clock.advance(Duration::from_millis(1));
    assert_eq!(fetched().await[0].seq, seq);

    b.fail_outbox(seq, "third time").await.unwrap();
    clock.advance(Duration::from_secs(3600));
    assert!(fetched().await.is_empty(), "dead rows are not retried");
    let dead = b.dead_outbox().await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].seq, seq);
    assert_eq!(dead[0].change.intent().unwrap().new.as_ref(), Some(&wait));
    assert_eq!(b.outbox_counts().await.unwrap(), (0, 1, 1));

    // Acks and failures of a dead or unknown row change nothing.
    b.ack_outbox(&[seq, 9_999]).await.unwrap();
    b.fail_outbox(9_999, "nobody").await.unwrap();
    assert_eq!(b.outbox_counts().await.unwrap(), (0, 1, 1));
}

#[tokio::test]
async fn a_dedup_id_is_accepted_again_once_the_window_has_passed() {
    let clock = manual_clock();
    let b = EmbeddedBackend::open_in_memory(clock.clone(), config()).unwrap();
    let wake = b.queue_notify();
    let m = message(&seat("D"));
    b.send(&m).await.unwrap();
    tokio::time::timeout(Duration::from_millis(50), wake.notified())
        .await
        .expect("a send wakes the consumers");
    let got = b.receive(10).await.unwrap();
    b.delete(&[got[0].receipt.clone()]).await.unwrap();

    clock.advance(config().dedup_window - Duration::from_millis(1));
    b.send(&m).await.unwrap();
    assert!(b.receive(10).await.unwrap().is_empty(), "inside the window");
    clock.advance(Duration::from_millis(1));
    b.send(&m).await.unwrap();
    let got = b.receive(10).await.unwrap();
    assert_eq!(got.iter().map(body).collect::<Vec<_>>(), vec![m]);
}

#[tokio::test]
async fn dead_letters_are_listed_and_counted() {
    let clock = manual_clock();
    let config = EmbeddedConfig {
        max_receive_count: 2,
        ..config()
    };
    let b = EmbeddedBackend::open_in_memory(clock.clone(), config.clone()).unwrap();
    let group = seat("P");
    let (poison, after) = (message(&group), message(&group));
    b.send(&poison).await.unwrap();
    b.send(&after).await.unwrap();
    assert_eq!(seat_depth(&b).await, (2, 0, 0));
    for _ in 0..2 {
        let got = b.receive(1).await.unwrap();
        assert_eq!(body(&got[0]), poison);
        assert_eq!(seat_depth(&b).await, (1, 1, 0));
        clock.advance(config.visibility_timeout);
    }
    let got = b.receive(10).await.unwrap();
    assert_eq!(got.iter().map(body).collect::<Vec<_>>(), vec![after]);
    let dead = b.dead_letters().await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(body(&dead[0]), poison);
    assert_eq!(dead[0].receive_count, 2);
    assert_eq!(dead[0].group_id, group.as_str());
    assert_eq!(seat_depth(&b).await, (0, 1, 1));
}

/// Two handles on one file are two runner processes: however their receives interleave, a
/// group is never in flight at both, and each group is processed once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_handles_on_one_file_never_hold_the_same_group_at_once() {
    const GROUPS: usize = 8;
    const PER_GROUP: usize = 6;
    let dir = TempDir::new("two-handles");
    let clock = manual_clock();
    let a = EmbeddedBackend::open(&dir.db(), clock.clone(), config()).unwrap();
    let b = EmbeddedBackend::open(&dir.db(), clock.clone(), config()).unwrap();

    let groups: Vec<SeatId> = (0..GROUPS).map(|i| seat(&format!("G{i}"))).collect();
    let mut sent: HashMap<String, Vec<SeatMessage>> = HashMap::new();
    for _ in 0..PER_GROUP {
        for (i, g) in groups.iter().enumerate() {
            let m = message(g);
            // Both handles send, as both processes' relays would.
            let via = if i % 2 == 0 { &a } else { &b };
            via.send(&m).await.unwrap();
            sent.entry(g.as_str().to_owned()).or_default().push(m);
        }
    }

    let in_flight = Arc::new(Mutex::new(HashSet::<String>::new()));
    let processed = Arc::new(Mutex::new(HashMap::<String, Vec<SeatMessage>>::new()));
    let mut consumers = Vec::new();
    for (n, handle) in [a.clone(), b.clone(), a.clone(), b.clone()]
        .into_iter()
        .enumerate()
    {
        let (in_flight, processed) = (in_flight.clone(), processed.clone());
        consumers.push(tokio::spawn(async move {
            let mut received = 0usize;
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            loop {
                let total: usize = processed.lock().unwrap().values().map(Vec::len).sum();
                if total == GROUPS * PER_GROUP || std::time::Instant::now() > deadline {
                    return received;
                }
                let batch = match handle.receive(1 + n % 3).await {
                    Ok(batch) => batch,
                    Err(QueueError::Throttled) => continue,
                    Err(e) => panic!("receive: {e}"),
                };
                if batch.is_empty() {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    continue;
                }
                received += batch.len();
                let batch_groups: HashSet<String> =
                    batch.iter().map(|d| d.group_id.clone()).collect();
                for g in &batch_groups {
                    assert!(
                        in_flight.lock().unwrap().insert(g.clone()),
                        "group {g} handed to two consumers at once"
                    );
                }
                for d in &batch {
                    processed
                        .lock()
                        .unwrap()
                        .entry(d.group_id.clone())
                        .or_default()
                        .push(body(d));
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
                // Released before the delete commits, so a consumer that sees the group free
                // in the database always finds it free here too.
                for g in &batch_groups {
                    in_flight.lock().unwrap().remove(g);
                }
                let receipts: Vec<String> = batch.iter().map(|d| d.receipt.clone()).collect();
                while let Err(e) = handle.delete(&receipts).await {
                    assert_eq!(e, QueueError::Throttled, "delete: {e}");
                }
            }
        }));
    }
    let mut per_consumer = Vec::new();
    for c in consumers {
        per_consumer.push(c.await.unwrap());
    }
    let processed = processed.lock().unwrap().clone();
    assert_eq!(processed, sent, "every group processed once, in order");
    assert_eq!(per_consumer.iter().sum::<usize>(), GROUPS * PER_GROUP);
    assert_eq!(seat_depth(&a).await, (0, 0, 0));
}

/// The admin history lists every transition the outbox carried, in order, and outlives the
/// outbox's pruning of handled rows.
#[tokio::test]
async fn the_history_lists_every_write_the_outbox_carried_and_survives_its_pruning() {
    let clock = manual_clock();
    let b = EmbeddedBackend::open_in_memory(clock.clone(), config()).unwrap();
    let t0 = clock.now();
    let wait = Intent::waiting(
        UserId::parse("h1").unwrap(),
        SeatId::parse("H-1").unwrap(),
        t0.plus(Duration::from_secs(3600)),
        t0,
    );
    b.register_wait(&wait, &ConsentRecord::for_intent(&wait, t0))
        .await
        .unwrap();
    let claimed = b.transition(&claim(&wait, t0)).await.unwrap();
    let next = t0.plus(Duration::from_secs(1));
    let rewaited = b
        .transition(&TransitionRequest::on(
            &claimed,
            t0,
            Transition::Rewait {
                token: claimed.fencing_token,
                next_attempt_at: next,
                due_at: next,
                reason: Reason::SeatTaken,
                suppress: None,
            },
        ))
        .await
        .unwrap();
    let again = b.transition(&claim(&rewaited, next)).await.unwrap();
    // A refused write leaves no record.
    assert!(b.transition(&claim(&again, next)).await.is_err());
    let done = b
        .transition(&TransitionRequest::on(
            &again,
            next,
            Transition::Complete {
                token: again.fencing_token,
                status: Terminal::Succeeded,
                charge_id: Some("c-1".into()),
                reason: Reason::Reserved,
                suppress: None,
            },
        ))
        .await
        .unwrap();

    let carried: Vec<TransitionRecord> = b
        .fetch_outbox(100)
        .await
        .unwrap()
        .iter()
        .filter_map(|r| TransitionRecord::of_change(r.change.intent()?))
        .collect();
    let history = whole_history(&b, &wait.intent_id).await.unwrap();
    assert_eq!(history, carried);
    assert_eq!(
        history
            .iter()
            .map(|r| (r.version, r.from, r.to, r.fencing_token))
            .collect::<Vec<_>>(),
        vec![
            (1, None, IntentStatus::WaitingForSeat, 0),
            (
                2,
                Some(IntentStatus::WaitingForSeat),
                IntentStatus::Reserving,
                1
            ),
            (
                3,
                Some(IntentStatus::Reserving),
                IntentStatus::WaitingForSeat,
                1
            ),
            (
                4,
                Some(IntentStatus::WaitingForSeat),
                IntentStatus::Reserving,
                2
            ),
            (5, Some(IntentStatus::Reserving), IntentStatus::Succeeded, 2),
        ]
    );
    assert_eq!(history[4].reason, Some(Reason::Reserved));
    assert_eq!(history[4].at, done.updated_at);

    let seqs: Vec<i64> = b
        .fetch_outbox(100)
        .await
        .unwrap()
        .iter()
        .map(|r| r.seq)
        .collect();
    b.ack_outbox(&seqs).await.unwrap();
    clock.advance(Duration::from_secs(1));
    assert_eq!(b.prune_outbox(clock.now()).await.unwrap(), 5);
    assert_eq!(whole_history(&b, &wait.intent_id).await.unwrap(), carried);
    assert!(
        whole_history(&b, &IntentId::generate())
            .await
            .unwrap()
            .is_empty(),
        "an unknown intent has no history"
    );
}
