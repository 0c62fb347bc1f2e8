//! One upstream write per seat, whatever is repeated: many confirms of one seat, a winner's later
//! confirm, redelivered messages and replayed outbox rows, stale or malformed messages, and the
//! lost races behind a taken seat closed together.

use super::common::{pipeline, records};
use seatgate::adapters::upstream_http::HttpUpstream;
use seatgate::domain::{Change, IntentStatus, Reason, SeatId, SeatMessage};
use seatgate::ports::{QueueConsumer, SeatQueue};
use seatgate::service::{Ports, QueueRecord, Services};
use seatgate_testkit::setup::{CHARGE_READS, POSTS};
use seatgate_testkit::{FaultyStore, StoreOp};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn many_confirms_of_one_seat_make_one_upstream_write() {
    let p = pipeline().await;
    let mut ids = Vec::new();
    for n in 0..25 {
        let u = p.enrol(n).await;
        ids.push(p.confirm(&u, "A-12").await);
    }
    p.pump().await;
    let mut statuses = Vec::new();
    for id in &ids {
        statuses.push(p.status(id).await);
    }
    let won = statuses
        .iter()
        .filter(|s| **s == IntentStatus::Succeeded)
        .count();
    let raced = statuses
        .iter()
        .filter(|s| **s == IntentStatus::FailedRace)
        .count();
    assert_eq!((won, raced), (1, 24), "{statuses:?}");
    assert_eq!(p.sim.stats().get(POSTS), 1);
    let occupant = p.sim.occupant("A-12").expect("the seat is taken upstream");
    let winner = statuses
        .iter()
        .position(|s| *s == IntentStatus::Succeeded)
        .unwrap();
    assert_eq!(occupant, format!("u{winner}"));

    // The seat is suppressed for the action TTL: a later confirm closes without a write.
    let late = p.enrol(99).await;
    let id = p.confirm(&late, "A-12").await;
    p.pump().await;
    let i = p.intent(&id).await;
    assert_eq!((i.status, i.attempts), (IntentStatus::FailedRace, 0));
    assert_eq!(p.sim.stats().get(POSTS), 1);
}

/// A user who won a seat (and perhaps never read the answer) confirms it again once its
/// suppression window is over: their charge is read, and the attempt succeeds with it, with no
/// second reserve, even after another user's attempt found the seat taken in between. Once
/// the charge is released, the next attempt writes again.
#[tokio::test]
async fn a_winners_later_confirm_reads_the_charge_instead_of_writing_again() {
    let p = pipeline().await;
    let (u1, u2) = (p.enrol(1).await, p.enrol(2).await);
    let past_window = || {
        p.clock
            .advance(p.timing.action_ttl + Duration::from_millis(1))
    };
    let first = p.confirm(&u1, "B-1").await;
    p.pump().await;
    let won = p.intent(&first).await;
    assert_eq!(won.status, IntentStatus::Succeeded);
    assert_eq!(p.sim.stats().get(POSTS), 1);

    // Another user tries after the window: the upstream says taken, and the seat's record
    // keeps its winner.
    past_window();
    let lost = p.confirm(&u2, "B-1").await;
    p.pump().await;
    assert_eq!(p.status(&lost).await, IntentStatus::FailedRace);
    assert_eq!(p.sim.stats().get(POSTS), 2);

    past_window();
    let again = p.confirm(&u1, "B-1").await;
    p.pump().await;
    let again = p.intent(&again).await;
    assert_eq!(
        (again.status, again.reason, again.charge_id.clone()),
        (
            IntentStatus::Succeeded,
            Some(Reason::ChargeRead),
            won.charge_id.clone()
        ),
        "the charge they hold, read, not written"
    );
    let stats = p.sim.stats();
    assert_eq!(
        stats.get(POSTS),
        2,
        "no second reserve for the seat they hold"
    );
    assert_eq!(stats.get(CHARGE_READS), 1);

    // Released upstream: the charge read finds none, and the reserve goes out.
    assert!(p.sim.release("u1"));
    past_window();
    let after_release = p.confirm(&u1, "B-1").await;
    p.pump().await;
    let after_release = p.intent(&after_release).await;
    assert_eq!(
        (after_release.status, after_release.reason),
        (IntentStatus::Succeeded, Some(Reason::Reserved))
    );
    let stats = p.sim.stats();
    assert_eq!((stats.get(POSTS), stats.get(CHARGE_READS)), (3, 2));
}

#[tokio::test]
async fn redelivered_messages_and_replayed_outbox_rows_change_nothing() {
    let p = pipeline().await;
    let u = p.enrol(1).await;
    let id = p.confirm(&u, "D-1").await;
    let rows = p.backend.fetch_outbox(10).await.unwrap();
    assert_eq!(rows.len(), 1);
    let change: Change = rows[0].change.clone();
    assert!(change.intent().is_some());
    // The same outbox row relayed three times: one message (deduplicated by intent id + version).
    for _ in 0..3 {
        let results = p.relay.handle(std::slice::from_ref(&change)).await;
        assert!(results.iter().all(Result::is_ok));
    }
    p.backend.ack_outbox(&[rows[0].seq]).await.unwrap();
    let batch = p.backend.receive(10).await.unwrap();
    assert_eq!(batch.len(), 1, "replays were deduplicated");
    let record = QueueRecord {
        message_id: batch[0].message_id.clone(),
        group_id: batch[0].group_id.clone(),
        body: batch[0].body.clone(),
        receipt: String::new(),
    };
    assert!(
        p.worker
            .handle_batch(std::slice::from_ref(&record))
            .await
            .is_empty()
    );
    let after_first = p.intent(&id).await;
    assert_eq!(after_first.status, IntentStatus::Succeeded);
    // The same message delivered again (e.g. the delete was lost): nothing changes.
    assert!(
        p.worker
            .handle_batch(&[record.clone(), record])
            .await
            .is_empty()
    );
    assert_eq!(p.intent(&id).await, after_first);
    assert_eq!(p.sim.stats().get(POSTS), 1);
}

#[tokio::test]
async fn a_stale_or_malformed_message_is_handled_without_an_upstream_call() {
    let p = pipeline().await;
    let u = p.enrol(1).await;
    let id = p.confirm(&u, "K-1").await;
    p.pump().await;
    let done = p.intent(&id).await;
    // A message for an older version of a finished intent.
    let stale = SeatMessage {
        intent_id: id.clone(),
        seat_id: SeatId::parse("K-1").unwrap(),
        version: 1,
        intent: None,
    };
    p.backend.send(&stale).await.unwrap();
    let records = vec![
        QueueRecord {
            message_id: "m-bad".into(),
            group_id: "K-2".into(),
            body: "{not json".into(),
            receipt: String::new(),
        },
        QueueRecord {
            // Valid JSON whose seat id is not one: refused when decoded, like any poison.
            message_id: "m-bad-seat".into(),
            group_id: "K-3".into(),
            body: format!(r#"{{"intent_id":"{id}","seat_id":"K 3","version":2}}"#),
            receipt: String::new(),
        },
        QueueRecord {
            message_id: "m-stale".into(),
            group_id: "K-1".into(),
            body: serde_json::to_string(&stale).unwrap(),
            receipt: String::new(),
        },
    ];
    let failed = p.worker.handle_batch(&records).await;
    assert_eq!(
        failed,
        vec!["m-bad".to_string(), "m-bad-seat".to_string()],
        "a poison message fails (and will dead-letter)"
    );
    assert_eq!(p.intent(&id).await, done);
    assert_eq!(p.sim.stats().get(POSTS), 1);
}

/// The lost races behind a taken seat are closed together, and a close that fails hands back
/// only its own message: the others are final whatever order they were written in, so none is
/// handed back or sent upstream, and the failed one is closed when it comes back.
#[tokio::test]
async fn lost_races_close_together_and_a_failed_close_hands_back_only_its_message() {
    let p = pipeline().await;
    let winner = p.enrol(1).await;
    let first = p.confirm(&winner, "LR-1").await;
    p.pump().await;
    assert_eq!(p.status(&first).await, IntentStatus::Succeeded);
    let mut losers = Vec::new();
    for n in 2..=8 {
        let u = p.enrol(n).await;
        losers.push(p.confirm(&u, "LR-1").await);
    }
    p.relay_outbox().await;
    let batch = p.backend.receive(10).await.unwrap();
    assert_eq!(batch.len(), losers.len(), "one group, one batch");
    let records = records(&batch);

    let faulty = Arc::new(FaultyStore::new(p.backend.clone()));
    faulty.fail_next(
        StoreOp::Transition,
        seatgate::ports::StoreError::Unavailable("injected".into()),
        1,
    );
    let upstream = HttpUpstream::new(&p.sim_url, p.timing.upstream_timeout).unwrap();
    let worker = Services::new(
        Ports::from_store(faulty.clone(), Arc::new(upstream), p.clock.clone()),
        p.timing.clone(),
    )
    .worker();
    let failed = worker.handle_batch(&records).await;
    assert_eq!(faulty.injected(), 1);
    assert_eq!(
        failed.len(),
        1,
        "only the failed close is handed back: {failed:?}"
    );
    let mut open = Vec::new();
    for id in &losers {
        match p.status(id).await {
            IntentStatus::FailedRace => {}
            IntentStatus::Requested => open.push(id.clone()),
            other => panic!("{id}: {other:?}"),
        }
    }
    assert_eq!(open.len(), 1, "the failed close's intent is still open");
    let handed_back = batch
        .iter()
        .find(|d| d.message_id == failed[0])
        .expect("a message of the batch");
    assert!(
        handed_back.body.contains(open[0].as_str()),
        "the handed-back message is the open intent's"
    );

    // Processed messages are deleted; the failed one returns after its visibility timeout.
    let done: Vec<String> = batch
        .iter()
        .filter(|d| !failed.contains(&d.message_id))
        .map(|d| d.receipt.clone())
        .collect();
    p.backend.delete(&done).await.unwrap();
    p.clock
        .advance(p.timing.visibility_timeout + Duration::from_millis(1));
    p.pump().await;
    for id in &losers {
        assert_eq!(p.status(id).await, IntentStatus::FailedRace);
    }
    assert_eq!(p.sim.stats().get(POSTS), 1, "one reserve for the seat");
}

/// The batch that wins a seat closes every other open intent on it at once, however far back in
/// line their messages are (a same-seat burst learns it lost within round trips of the win, not
/// after a hundred batches); those messages then cost one batch read and their delete, no write.
#[tokio::test]
async fn a_won_seat_closes_its_losers_beyond_the_batch_and_their_messages_write_nothing() {
    let p = pipeline().await;
    let mut ids = Vec::new();
    for n in 0..25 {
        let u = p.enrol(n).await;
        ids.push(p.confirm(&u, "FO-1").await);
    }
    p.relay_outbox().await;
    // The line's first message alone: the other 24 are still queued behind it.
    let first = p.backend.receive(1).await.unwrap();
    assert_eq!(first.len(), 1);
    assert!(p.worker.handle_batch(&records(&first)).await.is_empty());
    p.backend.delete(&[first[0].receipt.clone()]).await.unwrap();
    let mut statuses = Vec::new();
    for id in &ids {
        statuses.push(p.status(id).await);
    }
    let won = statuses
        .iter()
        .filter(|s| **s == IntentStatus::Succeeded)
        .count();
    let raced = statuses
        .iter()
        .filter(|s| **s == IntentStatus::FailedRace)
        .count();
    assert_eq!(
        (won, raced),
        (1, 24),
        "every loser closed by the win, before its own message: {statuses:?}"
    );
    assert_eq!(p.sim.stats().get(POSTS), 1);

    // Their messages: one batch read a batch, and not one transition.
    let faulty = Arc::new(FaultyStore::new(p.backend.clone()));
    let upstream = HttpUpstream::new(&p.sim_url, p.timing.upstream_timeout).unwrap();
    let worker = Services::new(
        Ports::from_store(faulty.clone(), Arc::new(upstream), p.clock.clone()),
        p.timing.clone(),
    )
    .worker();
    let mut batches = 0;
    loop {
        let batch = p.backend.receive(10).await.unwrap();
        if batch.is_empty() {
            break;
        }
        batches += 1;
        assert!(batches <= 3, "24 messages are three batches");
        assert!(worker.handle_batch(&records(&batch)).await.is_empty());
        let receipts: Vec<String> = batch.iter().map(|d| d.receipt.clone()).collect();
        p.backend.delete(&receipts).await.unwrap();
    }
    assert_eq!(batches, 3);
    assert_eq!(
        faulty.calls(StoreOp::Transition),
        0,
        "no write for a closed loser"
    );
    assert_eq!(faulty.calls(StoreOp::Intents), 3, "one batch read a batch");
    assert_eq!(p.sim.stats().get(POSTS), 1);
}
