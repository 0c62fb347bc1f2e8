//! The seat queue: FIFO order per group, group locks, visibility, hand-back, deduplication,
//! dead-lettering.

#[allow(unused_imports)]
use super::fixtures::*;
#[allow(unused_imports)]
use super::*;

pub(super) fn queue(h: &Harness) -> (&dyn SeatQueue, &dyn QueueConsumer) {
    let (send, receive, _) = queue_ports(h);
    (send, receive)
}

pub(super) fn queue_ports(h: &Harness) -> (&dyn SeatQueue, &dyn QueueConsumer, &dyn HandBack) {
    let q = h.queue.as_ref().expect(
        "this contract case needs a queue: build the Harness with `with_queue` \
         (queue cases are never skipped)",
    );
    (q.send.as_ref(), q.receive.as_ref(), q.hand_back.as_ref())
}

pub(super) fn message(seat: &SeatId) -> SeatMessage {
    SeatMessage {
        intent_id: IntentId::generate(),
        seat_id: seat.clone(),
        version: 1,
        intent: None,
    }
}

pub(super) async fn send_all(h: &Harness, messages: &[SeatMessage]) {
    for m in messages {
        queue(h).0.send(m).await.expect("send");
    }
}

pub(super) fn body(d: &Delivery) -> SeatMessage {
    serde_json::from_str(&d.body).expect("a delivery's body is the SeatMessage sent")
}

pub(super) fn bodies(ds: &[Delivery]) -> Vec<SeatMessage> {
    ds.iter().map(body).collect()
}

pub(super) fn receipts(ds: &[Delivery]) -> Vec<String> {
    ds.iter().map(|d| d.receipt.clone()).collect()
}

/// Moves the queue's clock past the visibility timeout of everything in flight now.
pub(super) fn expire_visibility(h: &Harness) {
    h.clock
        .advance(h.queue_limits.visibility_timeout + Duration::from_millis(1));
}

/// One receive, for checks that something is *not* delivered now.
pub(super) async fn receive_now(h: &Harness, max: usize) -> Vec<Delivery> {
    queue(h).1.receive(max).await.expect("receive")
}

/// Receives (accumulating across polls) until `enough` holds, for up to the harness's patience.
pub(super) async fn receive_until(
    h: &Harness,
    max: usize,
    what: &str,
    enough: impl Fn(&[Delivery]) -> bool,
) -> Vec<Delivery> {
    let started = Instant::now();
    let mut got = Vec::new();
    loop {
        got.extend(receive_now(h, max).await);
        if enough(&got) {
            return got;
        }
        if started.elapsed() > h.queue_limits.patience {
            panic!(
                "waited {:?} for {what}; received {:?}",
                h.queue_limits.patience,
                bodies(&got)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(super) async fn delete(h: &Harness, receipts: &[String]) {
    queue(h).1.delete(receipts).await.expect("delete");
}

pub async fn fifo_order_within_a_group(h: &Harness) {
    let seat = new_seat();
    let sent: Vec<SeatMessage> = (0..5).map(|_| message(&seat)).collect();
    send_all(h, &sent).await;
    let got = receive_until(h, 10, "five messages", |d| d.len() >= 5).await;
    assert_eq!(bodies(&got), sent, "one group's messages, in send order");
    for d in &got {
        assert_eq!(d.group_id, seat.as_str());
        assert_eq!(d.receive_count, 1);
    }
    let mut ids: Vec<&str> = got.iter().map(|d| d.message_id.as_str()).collect();
    ids.dedup();
    assert_eq!(ids.len(), 5, "distinct message ids");
    delete(h, &receipts(&got)).await;
    assert!(receive_now(h, 10).await.is_empty());

    // One at a time, each after deleting the previous.
    let seat = new_seat();
    let sent: Vec<SeatMessage> = (0..3).map(|_| message(&seat)).collect();
    send_all(h, &sent).await;
    for expected in &sent {
        let got = receive_until(h, 1, "the next message", |d| !d.is_empty()).await;
        assert_eq!(bodies(&got), vec![expected.clone()]);
        delete(h, &receipts(&got)).await;
    }
    assert!(receive_now(h, 1).await.is_empty());
}

pub async fn group_is_locked_while_a_message_is_in_flight(h: &Harness) {
    let (g, k) = (new_seat(), new_seat());
    let (g1, g2, k1, k2) = (message(&g), message(&g), message(&k), message(&k));
    send_all(h, &[g1.clone(), k1.clone(), g2.clone(), k2.clone()]).await;

    let first = receive_until(h, 1, "one message", |d| !d.is_empty()).await;
    assert_eq!(first.len(), 1, "receive(1) returned {}", first.len());
    let taken = body(&first[0]);
    let (next, other) = if taken == g1 {
        (g2, vec![k1, k2])
    } else {
        assert_eq!(taken, k1, "the first message must be the head of a group");
        (k2, vec![g1, g2])
    };

    // The other group flows; the taken group gives nothing more.
    let rest = receive_until(h, 10, "the other group", |d| d.len() >= 2).await;
    assert_eq!(
        bodies(&rest),
        other,
        "only the unlocked group, in order (got {:?})",
        bodies(&rest)
    );
    assert!(
        receive_now(h, 10).await.is_empty(),
        "both groups are locked"
    );

    delete(h, &receipts(&first)).await;
    let got = receive_until(h, 10, "the unlocked group's next", |d| !d.is_empty()).await;
    assert_eq!(bodies(&got), vec![next]);
}

pub async fn delete_then_next(h: &Harness) {
    let seat = new_seat();
    let (a, b) = (message(&seat), message(&seat));
    send_all(h, &[a.clone(), b.clone()]).await;
    let got = receive_until(h, 1, "the first message", |d| !d.is_empty()).await;
    assert_eq!(bodies(&got), vec![a]);
    assert!(receive_now(h, 1).await.is_empty(), "the group is locked");
    delete(h, &receipts(&got)).await;
    let got = receive_until(h, 1, "the second message", |d| !d.is_empty()).await;
    assert_eq!(bodies(&got), vec![b]);
    assert_eq!(got[0].receive_count, 1);
    delete(h, &receipts(&got)).await;
    assert!(receive_now(h, 10).await.is_empty());
    // Deleting nothing is fine.
    delete(h, &[]).await;
}

pub async fn visibility_expiry_redelivers(h: &Harness) {
    assert!(
        h.queue_limits.max_receive_count >= 3,
        "this case receives a message three times"
    );
    let seat = new_seat();
    let (a, b) = (message(&seat), message(&seat));
    send_all(h, &[a.clone(), b.clone()]).await;
    let first = receive_until(h, 1, "the message", |d| !d.is_empty()).await;
    assert_eq!((body(&first[0]), first[0].receive_count), (a.clone(), 1));
    assert!(receive_now(h, 10).await.is_empty(), "in flight");

    expire_visibility(h);
    let second = receive_until(h, 1, "the redelivery", |d| !d.is_empty()).await;
    assert_eq!(body(&second[0]), a, "the same message, not the next one");
    assert_eq!(second[0].message_id, first[0].message_id);
    assert_eq!(second[0].receive_count, 2);
    assert_ne!(second[0].receipt, first[0].receipt, "a fresh receipt");

    // The first receipt is stale now: deleting with it does nothing.
    delete(h, &receipts(&first)).await;
    expire_visibility(h);
    let third = receive_until(h, 1, "a third delivery", |d| !d.is_empty()).await;
    assert_eq!((body(&third[0]), third[0].receive_count), (a, 3));

    delete(h, &receipts(&third)).await;
    let next = receive_until(h, 1, "the next message", |d| !d.is_empty()).await;
    assert_eq!((body(&next[0]), next[0].receive_count), (b, 1));
}

pub async fn hand_back_returns_a_message_after_the_delay(h: &Harness) {
    let seat = new_seat();
    let a = message(&seat);
    send_all(h, std::slice::from_ref(&a)).await;
    let first = receive_until(h, 1, "the message", |d| !d.is_empty()).await;
    let delay = Duration::from_secs(1);
    assert!(
        delay < h.queue_limits.visibility_timeout,
        "the case needs a shorter delay"
    );
    let (_, _, hand_back) = queue_ports(h);
    hand_back
        .hand_back(&receipts(&first), delay)
        .await
        .expect("hand_back");
    assert!(receive_now(h, 10).await.is_empty(), "not before the delay");
    // A receipt that names nothing in flight any more is not an error.
    hand_back
        .hand_back(&["no-such-receipt".to_owned()], delay)
        .await
        .expect("a stale receipt is ignored");
    h.clock.advance(delay + Duration::from_millis(1));
    let again = receive_until(h, 1, "the handed-back message", |d| !d.is_empty()).await;
    assert_eq!(body(&again[0]), a);
    assert_eq!(again[0].receive_count, 2, "a hand-back counts as a receive");
    delete(h, &receipts(&again)).await;
}

pub async fn dedup_id_within_window_is_dropped(h: &Harness) {
    let seat = new_seat();
    let m = message(&seat);
    send_all(h, &[m.clone(), m.clone()]).await;
    let got = receive_until(h, 10, "the message", |d| !d.is_empty()).await;
    assert_eq!(bodies(&got), vec![m.clone()]);
    delete(h, &receipts(&got)).await;
    assert!(
        receive_now(h, 10).await.is_empty(),
        "the duplicate send was delivered"
    );

    // Still dropped after the first was deleted; a new version is a new message.
    send_all(h, std::slice::from_ref(&m)).await;
    let next = SeatMessage {
        version: m.version + 1,
        ..m.clone()
    };
    send_all(h, std::slice::from_ref(&next)).await;
    let got = receive_until(h, 10, "the new version", |d| !d.is_empty()).await;
    assert_eq!(bodies(&got), vec![next]);
}

pub async fn max_receive_count_dead_letters_and_unblocks_group(h: &Harness) {
    let max = h.queue_limits.max_receive_count;
    let seat = new_seat();
    let (poison, after) = (message(&seat), message(&seat));
    send_all(h, &[poison.clone(), after.clone()]).await;
    for n in 1..=max {
        let got = receive_until(h, 1, "the poison message", |d| !d.is_empty()).await;
        assert_eq!(
            (body(&got[0]), got[0].receive_count),
            (poison.clone(), n),
            "receive {n} of {max}"
        );
        expire_visibility(h);
    }
    let got = receive_until(h, 10, "the message after the dead letter", |d| {
        !d.is_empty()
    })
    .await;
    assert_eq!(
        bodies(&got),
        vec![after],
        "past max receives the message is dead-lettered and no longer blocks its group"
    );
    delete(h, &receipts(&got)).await;
    expire_visibility(h);
    assert!(
        receive_now(h, 10).await.is_empty(),
        "a dead letter came back"
    );
}

pub async fn batch_holds_several_messages_of_a_group_in_order(h: &Harness) {
    let (g, k) = (new_seat(), new_seat());
    let gs: Vec<SeatMessage> = (0..3).map(|_| message(&g)).collect();
    let ks: Vec<SeatMessage> = (0..2).map(|_| message(&k)).collect();
    send_all(h, &gs[..2]).await;
    send_all(h, &ks).await;
    send_all(h, &gs[2..]).await;

    let batch = receive_now(h, 4).await;
    assert_eq!(batch.len(), 4, "one receive(4) with 5 messages ready");
    let of = |seat: &SeatId| -> Vec<SeatMessage> {
        bodies(&batch)
            .into_iter()
            .filter(|m| m.seat_id == *seat)
            .collect()
    };
    let (got_g, got_k) = (of(&g), of(&k));
    assert_eq!(got_g.as_slice(), &gs[..got_g.len()], "group order");
    assert_eq!(got_k.as_slice(), &ks[..got_k.len()], "group order");
    assert!(
        got_g.len() >= 2 || got_k.len() >= 2,
        "several messages of one group in a batch"
    );
    assert!(
        receive_now(h, 10).await.is_empty(),
        "the last message's group is locked by its in-flight messages"
    );
    delete(h, &receipts(&batch)).await;
    let last = receive_until(h, 10, "the remaining message", |d| !d.is_empty()).await;
    let expected = if got_g.len() < 3 {
        gs[2].clone()
    } else {
        ks[1].clone()
    };
    assert_eq!(bodies(&last), vec![expected]);
}
