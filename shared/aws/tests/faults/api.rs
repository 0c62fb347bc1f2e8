//! The API's confirm under store faults: throttling that clears within `service::with_retry`'s
//! budget is retried and succeeds, persistent throttling answers `503 {"error":"unavailable"}` with
//! nothing written, and a timeout (`Unavailable`) is not retried while the confirm stays idempotent.

use super::common::{ATTEMPTS, confirm, json_body, prepare, rig};
use seatgate::ports::StoreError;
use seatgate_testkit::StoreOp;

#[tokio::test]
async fn confirm_retries_throttling_that_clears_within_the_budget() {
    let r = rig().await;
    let api = r.api();
    let action = prepare(&api, "u1", "A-1").await;
    r.faulty.fail_next(
        StoreOp::Confirm,
        StoreError::Throttled,
        (ATTEMPTS - 1) as u32,
    );
    let response = confirm(&api, "u1", &action).await;
    assert_eq!(response.status(), 202, "{:?}", json_body(&response));
    assert_eq!(json_body(&response)["status"], "REQUESTED");
    assert_eq!(r.faulty.calls(StoreOp::Confirm), ATTEMPTS);
    assert_eq!(
        r.sent("TransactWriteItems"),
        1,
        "only the last attempt reached DynamoDB"
    );
    r.finish().await;
}

#[tokio::test]
async fn confirm_under_persistent_throttling_answers_503_and_writes_nothing() {
    let r = rig().await;
    let api = r.api();
    let action = prepare(&api, "u1", "A-1").await;
    let before = r.keys().await;
    r.faulty
        .fail_next(StoreOp::Confirm, StoreError::Throttled, 1000);

    let response = confirm(&api, "u1", &action).await;
    assert_eq!(response.status(), 503);
    let body = json_body(&response);
    assert_eq!(body["error"], "unavailable", "{body}");
    assert!(body["message"].is_string());
    assert_eq!(
        r.faulty.calls(StoreOp::Confirm),
        ATTEMPTS,
        "the whole budget, then stop"
    );
    assert_eq!(r.sent("TransactWriteItems"), 0);
    let after = r.keys().await;
    assert_eq!(after, before, "no intent, no consent, the action untouched");
    assert!(after.iter().all(|pk| !pk.starts_with("INTENT#")));

    // The client retries once the store recovers: the action was still PREPARED.
    r.faulty.heal();
    let retried = confirm(&api, "u1", &action).await;
    assert_eq!(retried.status(), 202);
    r.finish().await;
}

#[tokio::test]
async fn a_timeout_is_not_retried_and_the_confirm_stays_idempotent() {
    let r = rig().await;
    let api = r.api();
    let action = prepare(&api, "u1", "A-1").await;
    // The transaction commits, its answer is lost.
    r.faulty.fail_after_next(
        StoreOp::Confirm,
        StoreError::Unavailable("TransactWriteItems: timed out".into()),
        1,
    );
    let response = confirm(&api, "u1", &action).await;
    assert_eq!(response.status(), 503);
    assert_eq!(json_body(&response)["error"], "unavailable");
    assert_eq!(
        r.faulty.calls(StoreOp::Confirm),
        1,
        "Unavailable is never retried"
    );
    assert_eq!(r.sent("TransactWriteItems"), 1, "the write happened");
    let intents: Vec<String> = r
        .keys()
        .await
        .into_iter()
        .filter(|pk| pk.starts_with("INTENT#"))
        .collect();
    assert_eq!(
        intents.len(),
        3,
        "the intent, its consent record and its creation's transition record: {intents:?}"
    );

    // The client's retry learns the outcome: the same intent, 200, no second write.
    let retried = confirm(&api, "u1", &action).await;
    assert_eq!(retried.status(), 200);
    let id = json_body(&retried)["intent_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(intents[0], format!("INTENT#{id}"));
    assert_eq!(r.sent("TransactWriteItems"), 1);
    r.finish().await;
}
