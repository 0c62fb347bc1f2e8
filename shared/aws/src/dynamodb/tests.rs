//! How real DynamoDB error responses reach the ports, without an emulator.
//!
//! DynamoDB Local never throttles and never reports a transaction conflict, so these tests stand
//! up a canned HTTP endpoint that answers with DynamoDB's own JSON error bodies. The SDK then
//! parses them exactly as it would parse AWS's answer, and the adapter maps the result: this
//! checks the whole path (wire format -> SDK error -> `StoreError`), not just a `match`.

use super::*;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials as SdkCredentials, Region};
use seatgate::domain::{ActionId, ConsentRecord, IntentId, Millis, UserId};
use seatgate::domain::{
    ActionKind, ActionStatus, IntentKind, SeatId, Transition, TransitionRequest,
};
use seatgate::ports::{Actions, ConfirmError, Intents, TransitionError};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Serves canned `(status, body)` responses in order (the last one repeats) and records the
/// operation of every request it received.
async fn canned(responses: Vec<(u16, String)>) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        let next = Arc::new(Mutex::new(0usize));
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            let (responses, log, next) = (responses.clone(), log.clone(), next.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    // Headers, then Content-Length bytes of body.
                    let head_end = loop {
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                        let mut chunk = [0u8; 4096];
                        match conn.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
                    let header = |name: &str| {
                        head.lines()
                            .find(|l| l.to_ascii_lowercase().starts_with(name))
                            .map(|l| l[name.len()..].trim().to_owned())
                    };
                    let len: usize = header("content-length:")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    while buf.len() < head_end + len {
                        let mut chunk = [0u8; 4096];
                        match conn.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let target = header("x-amz-target:").unwrap_or_default();
                    log.lock()
                        .unwrap()
                        .push(target.rsplit('.').next().unwrap_or_default().to_owned());
                    buf.drain(..head_end + len);
                    let (status, body) = {
                        let mut i = next.lock().unwrap();
                        let r = responses[(*i).min(responses.len() - 1)].clone();
                        *i += 1;
                        r
                    };
                    let reply = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/x-amz-json-1.0\r\n\
                         x-amzn-requestid: canned\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if conn.write_all(reply.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (format!("http://{addr}"), seen)
}

fn store(endpoint: &str, attempts: u32) -> DynamoStore {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(SdkCredentials::new("test", "test", None, None, "test"))
        .endpoint_url(endpoint)
        .retry_config(
            RetryConfig::standard()
                .with_max_attempts(attempts)
                .with_initial_backoff(Duration::from_millis(1)),
        )
        .build();
    DynamoStore::new(&Client::from_conf(config), "t")
}

fn error(kind: &str, extra: &str) -> (u16, String) {
    (
        400,
        format!(
            r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{kind}","message":"secret-looking detail"{extra}}}"#
        ),
    )
}

/// A transition sent as one `UpdateItem` (a claim, which takes the seat's claim, is a
/// transaction).
fn lost_race() -> TransitionRequest {
    TransitionRequest::new(IntentId::generate(), Millis(1_000), Transition::lost_race())
}

fn claim() -> TransitionRequest {
    TransitionRequest {
        seen: None,
        reading: None,
        intent_id: IntentId::generate(),
        seat_id: Some(SeatId::parse("A-1").unwrap()),
        now: Millis(1_000),
        transition: Transition::Claim {
            lease_until: Millis(2_000),
            due_at: Millis(3_000),
        },
    }
}

fn confirmation() -> Confirmation {
    let user = UserId::parse("u1").unwrap();
    let seat = SeatId::parse("A-1").unwrap();
    let action_id = ActionId::generate();
    let intent = Intent::requested(
        IntentId::generate(),
        user.clone(),
        seat.clone(),
        action_id.clone(),
        Millis(1_000),
        Millis(9_000),
    );
    Confirmation {
        admission: None,
        consent: ConsentRecord {
            intent_id: intent.intent_id.clone(),
            user_id: user.clone(),
            seat_id: seat,
            kind: IntentKind::Immediate,
            action_id: Some(action_id.clone()),
            consented_at: Millis(1_000),
        },
        action_id,
        user_id: user,
        now: Millis(1_000),
        intent,
    }
}

#[tokio::test]
async fn throttling_is_retried_by_the_sdk_then_reported_as_throttled() {
    for kind in [
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "ThrottlingException",
    ] {
        let (endpoint, seen) = canned(vec![error(kind, "")]).await;
        let s = store(&endpoint, 3);
        let err = s.transition(&lost_race()).await.unwrap_err();
        assert_eq!(err, TransitionError::Store(StoreError::Throttled), "{kind}");
        assert_eq!(
            seen.lock().unwrap().len(),
            3,
            "{kind}: standard mode tries 3 times"
        );
        // A transition's first request is the read that pins its intent's version.
        assert_eq!(
            s.requests().get("GetItem"),
            3,
            "the counter sees every attempt"
        );
    }
}

#[tokio::test]
async fn a_throttled_attempt_followed_by_success_is_invisible_to_the_caller() {
    let action = Action::prepare(
        UserId::parse("u").unwrap(),
        ActionKind::ReserveSeat,
        SeatId::parse("A-1").unwrap(),
        Millis(1),
        Duration::from_secs(60),
    );
    let (endpoint, seen) = canned(vec![
        error("ProvisionedThroughputExceededException", ""),
        (200, "{}".into()),
    ])
    .await;
    let s = store(&endpoint, 3);
    s.put_action(&action).await.unwrap();
    assert_eq!(*seen.lock().unwrap(), ["PutItem", "PutItem"]);
    assert_eq!(s.write_requests(), 2);
}

#[tokio::test]
async fn conflicts_map_to_transaction_conflict() {
    let (endpoint, _) = canned(vec![error("TransactionConflictException", "")]).await;
    let err = store(&endpoint, 1).transition(&claim()).await.unwrap_err();
    assert_eq!(err, TransitionError::Store(StoreError::TransactionConflict));

    let reasons = r#","CancellationReasons":[{"Code":"TransactionConflict","Message":"Transaction is ongoing for the item"},{"Code":"None"},{"Code":"None"}]"#;
    let (endpoint, seen) = canned(vec![error("TransactionCanceledException", reasons)]).await;
    let err = store(&endpoint, 3)
        .confirm(&confirmation())
        .await
        .unwrap_err();
    assert_eq!(err, ConfirmError::Store(StoreError::TransactionConflict));
    assert_eq!(
        seen.lock().unwrap().len(),
        1,
        "the SDK does not retry a cancelled transaction; the services do"
    );
}

#[tokio::test]
async fn throttling_inside_a_transaction_is_throttled() {
    let reasons = r#","CancellationReasons":[{"Code":"None"},{"Code":"ThrottlingError"}]"#;
    let (endpoint, _) = canned(vec![error("TransactionCanceledException", reasons)]).await;
    let c = confirmation();
    let err = store(&endpoint, 1)
        .register_wait(&c.intent, &c.consent)
        .await
        .unwrap_err();
    assert_eq!(err, StoreError::Throttled);
}

#[tokio::test]
async fn a_refused_confirm_is_explained_from_the_old_item_on_the_wire() {
    let c = confirmation();
    let earlier = IntentId::generate();
    let mut action = Action::prepare(
        c.user_id.clone(),
        ActionKind::ReserveSeat,
        SeatId::parse("A-1").unwrap(),
        Millis(0),
        Duration::from_secs(60),
    );
    action.action_id = c.action_id.clone();
    action.status = ActionStatus::Confirmed;
    action.intent_id = Some(earlier.clone());
    let old: serde_json::Map<String, serde_json::Value> = item::action_to_item(&action)
        .into_iter()
        .map(|(k, v)| {
            let v = match v {
                AttributeValue::S(s) => serde_json::json!({ "S": s }),
                AttributeValue::N(n) => serde_json::json!({ "N": n }),
                other => panic!("unexpected {other:?}"),
            };
            (k, v)
        })
        .collect();
    let reasons = format!(
        r#","CancellationReasons":[{{"Code":"ConditionalCheckFailed","Item":{}}},{{"Code":"None"}},{{"Code":"None"}}]"#,
        serde_json::Value::Object(old)
    );
    let (endpoint, _) = canned(vec![error("TransactionCanceledException", &reasons)]).await;
    let err = store(&endpoint, 1).confirm(&c).await.unwrap_err();
    assert_eq!(
        err,
        ConfirmError::Refused(ConfirmRefusal::AlreadyConfirmed(earlier))
    );

    let reasons = r#","CancellationReasons":[{"Code":"ConditionalCheckFailed"},{"Code":"None"},{"Code":"None"}]"#;
    let (endpoint, _) = canned(vec![error("TransactionCanceledException", reasons)]).await;
    let err = store(&endpoint, 1).confirm(&c).await.unwrap_err();
    assert_eq!(err, ConfirmError::Refused(ConfirmRefusal::NotFound));
}

#[tokio::test]
async fn a_transition_of_an_intent_that_is_not_there_is_not_found() {
    // The read that pins the version finds no item: nothing is written.
    let (endpoint, seen) = canned(vec![(200, "{}".to_owned())]).await;
    let s = store(&endpoint, 1);
    let err = s.transition(&lost_race()).await.unwrap_err();
    assert_eq!(err, TransitionError::NotFound);
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert_eq!(s.requests().get("TransactWriteItems"), 0);
}

#[tokio::test]
async fn other_errors_are_unavailable_and_carry_only_the_code() {
    let (endpoint, _) = canned(vec![error("ResourceNotFoundException", "")]).await;
    let err = store(&endpoint, 1)
        .get_intent(&IntentId::generate())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        StoreError::Unavailable("GetItem: ResourceNotFoundException".into())
    );
    assert!(!err.to_string().contains("secret"));

    // Nothing listens on port 9 of localhost.
    let err = store("http://127.0.0.1:9", 1)
        .get_intent(&IntentId::generate())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        StoreError::Unavailable("GetItem: could not reach DynamoDB".into())
    );
}

fn action_item(user: &str, status: ActionStatus, expires_at: i64) -> Item {
    let mut a = Action::prepare(
        UserId::parse(user).unwrap(),
        ActionKind::ReserveSeat,
        SeatId::parse("A-1").unwrap(),
        Millis(0),
        Duration::from_millis(expires_at as u64),
    );
    a.status = status;
    if status == ActionStatus::Confirmed {
        a.intent_id = Some(IntentId::generate());
    }
    item::action_to_item(&a)
}

#[test]
fn confirm_refusals_follow_owner_then_confirmed_then_expiry() {
    let c = confirmation(); // user u1, now 1_000
    let refusal = |i: &Item| confirm_refusal(Some(i), &c);
    assert_eq!(confirm_refusal(None, &c), Ok(ConfirmRefusal::NotFound));
    let other = action_item("someone-else", ActionStatus::Prepared, 500);
    assert_eq!(refusal(&other), Ok(ConfirmRefusal::NotFound));
    let expired = action_item("u1", ActionStatus::Prepared, 1_000);
    assert_eq!(refusal(&expired), Ok(ConfirmRefusal::Expired));
    let confirmed = action_item("u1", ActionStatus::Confirmed, 500);
    assert!(matches!(
        refusal(&confirmed),
        Ok(ConfirmRefusal::AlreadyConfirmed(_))
    ));
    let fine = action_item("u1", ActionStatus::Prepared, 5_000);
    assert!(matches!(refusal(&fine), Err(StoreError::Unavailable(_))));
}

#[test]
fn cancellation_codes_classify() {
    let reason = |code: &str| CancellationReason::builder().code(code).build();
    assert_eq!(
        retryable_cancellation(&[reason("None"), reason("TransactionConflict")]),
        Some(StoreError::TransactionConflict)
    );
    assert_eq!(
        retryable_cancellation(&[
            reason("TransactionConflict"),
            reason("ProvisionedThroughputExceeded")
        ]),
        Some(StoreError::Throttled)
    );
    assert_eq!(
        retryable_cancellation(&[reason("ConditionalCheckFailed")]),
        None
    );
}
