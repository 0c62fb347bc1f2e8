//! The seat queue and its dead-letter queue are what `QueueDefinition::for_timing(&Timing::aws())`
//! creates, and the table is what `seatgate_aws::dynamodb::schema::TABLE` describes, protected
//! from deletion and with its stream relayed from the trim horizon.
//!
//! The resources the code also creates itself (in tests and locally), compared with the code's
//! own definitions.

use super::common::{props, resolve, resolve_int, resource};
use seatgate::config::Timing;
use seatgate_aws::dynamodb::TABLE;
use seatgate_aws::sqs::QueueDefinition;
use serde_json::{Value, json};

/// A template property as SQS's attribute string.
fn as_attribute(v: &Value) -> String {
    match resolve(v) {
        Value::String(s) => s,
        other => other.to_string(),
    }
}

#[test]
fn the_seat_queue_is_the_queue_definition() {
    let d = QueueDefinition::for_timing(&Timing::aws());
    let q = props("SeatQueue");
    const DLQ: &str = "<dead-letter arn>";
    for (name, value) in d.queue_attributes(DLQ) {
        let name = name.as_str();
        let got = &q[name];
        assert!(
            !got.is_null(),
            "SeatQueue has no {name}; create_queues sets {value}"
        );
        if name == "RedrivePolicy" {
            let mut expected: Value = serde_json::from_str(&value).unwrap();
            expected["deadLetterTargetArn"] = json!({"Fn::GetAtt": ["SeatDeadLetterQueue", "Arn"]});
            let redrive = json!({
                "deadLetterTargetArn": got["deadLetterTargetArn"],
                "maxReceiveCount": resolve_int(&got["maxReceiveCount"]),
            });
            assert_eq!(redrive, expected, "SeatQueue.RedrivePolicy");
        } else {
            assert_eq!(as_attribute(got), value, "SeatQueue.{name}");
        }
    }
    let dlq = props("SeatDeadLetterQueue");
    for (name, value) in d.dead_letter_attributes() {
        assert_eq!(
            as_attribute(&dlq[name.as_str()]),
            value,
            "SeatDeadLetterQueue.{}",
            name.as_str()
        );
    }
    // Both FIFO queues need the .fifo suffix CloudFormation adds when no name is given.
    assert!(q.get("QueueName").is_none() && dlq.get("QueueName").is_none());
}

fn sorted_by_name(v: &Value) -> Vec<Value> {
    let mut items = v.as_array().cloned().unwrap_or_default();
    items.sort_by_key(|i| i["AttributeName"].as_str().unwrap_or("").to_owned());
    items
}

#[test]
fn the_table_is_the_rust_schema() {
    let expected = TABLE.cloudformation_properties();
    let t = props("SeatgateTable");
    assert_eq!(
        sorted_by_name(&t["AttributeDefinitions"]),
        sorted_by_name(&expected["AttributeDefinitions"]),
        "AttributeDefinitions"
    );
    for key in [
        "BillingMode",
        "KeySchema",
        "GlobalSecondaryIndexes",
        "TimeToLiveSpecification",
        "StreamSpecification",
    ] {
        assert_eq!(t[key], expected[key], "SeatgateTable.{key}");
    }
}

#[test]
fn the_table_is_protected_and_its_stream_relayed_from_the_trim_horizon() {
    let table = resource("SeatgateTable");
    assert_eq!(
        table["Properties"]["DeletionProtectionEnabled"],
        json!(true)
    );
    assert_eq!(table["DeletionPolicy"], "Retain");
    // The local runner starts a fresh shard at the trim horizon too (infra/local/src/streams.rs,
    // `a_fresh_shard_starts_at_the_trim_horizon_then_after_its_checkpoint`): nothing written
    // before the mapping reads is skipped, on either side.
    let stream = &props("RelayFunction")["Events"]["TableStream"];
    assert_eq!(stream["Type"], "DynamoDB");
    assert_eq!(stream["Properties"]["StartingPosition"], "TRIM_HORIZON");
}
