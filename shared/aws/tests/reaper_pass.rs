//! `LambdaReaper`, the API's way to run a reaper pass on AWS, against the Lambda `Invoke` API on
//! loopback (`seatgate_testkit::lambda`). The happy path with the reaper's real pass is in
//! `template.rs` (recorded for IAM); here, what the API gets when the invoke goes wrong: an
//! error it can answer `503 reaper_unavailable` with, never the function's own error text.

use seatgate::ports::{ReaperPass, ReaperPassError};
use seatgate::service::ReaperReport;
use seatgate_aws::reaper_pass::{LambdaReaper, PAYLOAD};
use seatgate_testkit::lambda::{FakeLambda, Handler};
use serde_json::{Value, json};
use std::sync::Arc;

fn answering(answer: Result<Value, String>) -> Handler {
    Arc::new(move |_| {
        let answer = answer.clone();
        Box::pin(async move { answer })
    })
}

async fn sdk() -> aws_config::SdkConfig {
    // Dummy credentials and a region are all the SDK needs to sign for the fake service.
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_lambda::config::Credentials::for_tests())
        .load()
        .await
}

#[tokio::test]
async fn a_report_comes_back_and_the_payload_says_who_asked() {
    let report = ReaperReport {
        examined: 3,
        settled_succeeded: 1,
        requeued: 2,
        ..ReaperReport::default()
    };
    let lambda = FakeLambda::start(vec![(
        "reaper",
        answering(Ok(serde_json::to_value(&report).unwrap())),
    )])
    .await;
    let pass = LambdaReaper::new(lambda.client(&sdk().await), "reaper");
    assert_eq!(pass.run_pass().await.unwrap(), report);
    let invocations = lambda.invocations();
    assert_eq!(invocations.len(), 1);
    assert_eq!(invocations[0].0, "reaper");
    assert_eq!(
        invocations[0].1,
        serde_json::from_str::<Value>(PAYLOAD).unwrap()
    );
}

#[tokio::test]
async fn a_failed_pass_is_unavailable_without_the_functions_error_text() {
    let lambda = FakeLambda::start(vec![(
        "reaper",
        answering(Err("store unavailable: secret-table-name".into())),
    )])
    .await;
    let pass = LambdaReaper::new(lambda.client(&sdk().await), "reaper");
    match pass.run_pass().await {
        Err(ReaperPassError::Unavailable(m)) => {
            assert!(m.contains("Unhandled"), "{m}");
            assert!(!m.contains("secret-table-name"), "{m}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_unknown_function_or_an_answer_that_is_not_a_report_is_unavailable() {
    let lambda = FakeLambda::start(vec![("reaper", answering(Ok(json!({"hello": 1}))))]).await;
    let client = lambda.client(&sdk().await);
    match LambdaReaper::new(client.clone(), "no-such-function")
        .run_pass()
        .await
    {
        Err(ReaperPassError::Unavailable(m)) => {
            assert!(m.contains("ResourceNotFoundException"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    match LambdaReaper::new(client, "reaper").run_pass().await {
        Err(ReaperPassError::Unavailable(m)) => assert!(m.contains("not a report"), "{m}"),
        other => panic!("{other:?}"),
    }
}
