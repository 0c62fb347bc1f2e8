//! IAM, the recording side: an SDK interceptor (`Recorder`) that logs every request's operation
//! and body and maps them to IAM actions and resources, the emulators' SDK config, and a store
//! wired as a function wires it whose clients carry a recorder.
//!
//! The machinery only; the flows recorded and the comparison are in `iam_recorded.rs`.

use super::iam_grants::Grants;
use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use seatgate_aws::dynamodb::DynamoStore;
use seatgate_testkit::setup;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// An SDK interceptor that logs every request it sees: `(service target prefix, operation,
/// JSON body)`. Both SDKs here (DynamoDB, SQS) speak a JSON protocol whose `X-Amz-Target`
/// header names the operation (`DynamoDB_20120810.GetItem`, `AmazonSQS.SendMessage`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Recorder {
    requests: Arc<Mutex<Vec<(String, String, Value)>>>,
}

impl Intercept for Recorder {
    fn name(&self) -> &'static str {
        "seatgate-tests.Recorder"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let request = context.request();
        // Lambda speaks REST: the operation is in the path, `Invoke` being the only one used.
        if let Some(function) = request
            .uri()
            .split("/2015-03-31/functions/")
            .nth(1)
            .and_then(|rest| rest.strip_suffix("/invocations"))
        {
            self.requests.lock().unwrap().push((
                "Lambda".to_owned(),
                "Invoke".to_owned(),
                json!({ "FunctionName": function }),
            ));
            return Ok(());
        }
        let target = request
            .headers()
            .get("x-amz-target")
            .ok_or("a request without X-Amz-Target")?;
        let (service, operation) = target.split_once('.').ok_or("X-Amz-Target without '.'")?;
        let body = request
            .body()
            .bytes()
            .and_then(|b| serde_json::from_slice(b).ok())
            .unwrap_or(Value::Null);
        self.requests
            .lock()
            .unwrap()
            .push((service.to_owned(), operation.to_owned(), body));
        Ok(())
    }
}

impl Recorder {
    fn requests(&self) -> Vec<(String, String, Value)> {
        self.requests.lock().unwrap().clone()
    }

    /// DynamoDB operations only: what the store's own request counter sees.
    pub(crate) fn operation_counts(&self) -> BTreeMap<String, u64> {
        let mut counts = BTreeMap::new();
        for (service, op, _) in self.requests() {
            if service.starts_with("DynamoDB") {
                *counts.entry(op).or_default() += 1;
            }
        }
        counts
    }

    /// The KMS actions the recorded requests need, each checked to name the credentials key and
    /// to carry the user as encryption context (the key policy's condition).
    pub(crate) fn kms_actions(&self, key_id: &str) -> BTreeSet<String> {
        let mut actions = BTreeSet::new();
        for (service, op, body) in self.requests() {
            if service != "TrentService" {
                continue;
            }
            assert_eq!(body["KeyId"], key_id, "{op} names the credentials key");
            assert!(
                body["EncryptionContext"][seatgate_aws::kms::CONTEXT_USER].is_string(),
                "{op} carries the user as encryption context: {body}"
            );
            actions.insert(format!("kms:{op}"));
        }
        actions
    }

    /// The IAM actions and resources the recorded requests need. `table` names the test's
    /// table, which stands for the template's `SeatgateTable`; `names` maps the test's queue
    /// URLs and function names to the template resources they stand for (`SeatQueue.Arn`...).
    pub(crate) fn grants(&self, table: &str, names: &BTreeMap<String, String>) -> Grants {
        let mut g = Grants::new();
        let table_resource = |body: &Value| -> String {
            let name = body["TableName"].as_str().unwrap_or("<no TableName>");
            if name != table {
                return format!("<unknown table {name}>");
            }
            match body["IndexName"].as_str() {
                Some(index) => format!("SeatgateTable.Arn/index/{index}"),
                None => "SeatgateTable.Arn".to_owned(),
            }
        };
        for (service, op, body) in self.requests() {
            match (service.as_str(), op.as_str()) {
                ("DynamoDB_20120810", "TransactWriteItems") => {
                    // No IAM action for the transaction: each item needs its own.
                    for item in body["TransactItems"].as_array().into_iter().flatten() {
                        let (kind, inner) = item
                            .as_object()
                            .and_then(|o| o.iter().next())
                            .expect("a transaction item");
                        let action = match kind.as_str() {
                            "Put" => "PutItem",
                            "Update" => "UpdateItem",
                            "Delete" => "DeleteItem",
                            "ConditionCheck" => "ConditionCheckItem",
                            other => panic!("unknown transaction item {other}"),
                        };
                        g.insert((format!("dynamodb:{action}"), table_resource(inner)));
                    }
                }
                ("DynamoDB_20120810", op @ ("BatchGetItem" | "BatchWriteItem")) => {
                    // Keyed by table name: each table named needs the action.
                    for name in body["RequestItems"]
                        .as_object()
                        .into_iter()
                        .flatten()
                        .map(|(k, _)| k)
                    {
                        g.insert((
                            format!("dynamodb:{op}"),
                            table_resource(&serde_json::json!({ "TableName": name })),
                        ));
                    }
                }
                ("DynamoDB_20120810", "TransactGetItems") => {
                    for item in body["TransactItems"].as_array().into_iter().flatten() {
                        g.insert(("dynamodb:GetItem".into(), table_resource(&item["Get"])));
                    }
                }
                ("DynamoDB_20120810", op) => {
                    g.insert((format!("dynamodb:{op}"), table_resource(&body)));
                }
                ("AmazonSQS", op) => {
                    let url = body["QueueUrl"].as_str().unwrap_or("<no QueueUrl>");
                    let resource = names
                        .get(url)
                        .cloned()
                        .unwrap_or_else(|| format!("<unknown queue {url}>"));
                    let action = op.trim_end_matches("Batch");
                    g.insert((format!("sqs:{action}"), resource));
                }
                ("Lambda", "Invoke") => {
                    let name = body["FunctionName"].as_str().unwrap_or_default();
                    let resource = names
                        .get(name)
                        .cloned()
                        .unwrap_or_else(|| format!("<unknown function {name}>"));
                    g.insert(("lambda:InvokeFunction".to_owned(), resource));
                }
                // Granted by the key's policy, not the role: see `kms_actions`.
                ("TrentService", _) => {}
                (other, op) => panic!("unexpected service {other} ({op})"),
            }
        }
        g
    }
}

/// The SDK config, after checking that both emulators answer. The probes go through clients
/// of their own, without a [`Recorder`], so no recorded flow counts them.
pub(crate) async fn emulators() -> aws_config::SdkConfig {
    let sdk = setup::sdk_config().await;
    setup::dynamodb_from(&sdk).await;
    setup::sqs_from(&sdk).await;
    sdk
}

/// One function's DynamoDB view, recorded: a store wired like `seatgate_aws::lambda` (`DynamoStore::new`
/// over a client from the environment) whose client also carries a [`Recorder`].
pub(crate) fn recorded_store(
    sdk: &aws_config::SdkConfig,
    table: &str,
    key_id: &str,
) -> (Arc<DynamoStore>, Recorder) {
    let recorder = Recorder::default();
    let config = aws_sdk_dynamodb::config::Builder::from(sdk)
        .interceptor(recorder.clone())
        .build();
    let kms = aws_sdk_kms::config::Builder::from(sdk)
        .interceptor(recorder.clone())
        .build();
    let store =
        DynamoStore::new(&aws_sdk_dynamodb::Client::from_conf(config), table).with_credentials_key(
            seatgate_aws::kms::KmsKey::new(aws_sdk_kms::Client::from_conf(kms), key_id),
        );
    (Arc::new(store), recorder)
}
