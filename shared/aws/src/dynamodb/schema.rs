//! The table's shape, in one place.
//!
//! Everything that defines the single table (key attributes, the sparse `due` index the reaper
//! reads, the sparse `flight_holds` index the operator's listing of a flight's holds reads, the sparse `open_seat` index of each seat's REQUESTED intents the worker closes lost races from, the stream that is the outbox, the TTL attribute) is the constant [`TABLE`]. Both
//! [`create_table`] (tests, the local runner against DynamoDB Local) and the comparison with
//! `template.yaml` read from it, so the production template and what the tests ran against cannot
//! drift apart silently: [`TableSchema::cloudformation_properties`] renders the same data in the
//! template's vocabulary for that comparison.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::client::Waiters;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType,
    TimeToLiveSpecification,
};
use std::time::Duration;

use super::map_sdk_error;
use seatgate::ports::StoreError;

/// A key attribute and its DynamoDB scalar type (`S` or `N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyAttr {
    pub name: &'static str,
    pub attr_type: &'static str,
}

/// The single table's definition. Field values are the exact strings DynamoDB and
/// CloudFormation use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableSchema {
    pub partition_key: KeyAttr,
    pub sort_key: KeyAttr,
    /// The reaper's index: sparse (only non-terminal intents carry its keys), projection ALL so a
    /// due intent decodes from the index item without a second read.
    pub due_index: &'static str,
    pub due_shard: KeyAttr,
    pub due_at: KeyAttr,
    pub due_projection: &'static str,
    /// `due_shard` values are `DUE#0 ..= DUE#{due_shards - 1}`: the reaper reads that many
    /// partitions instead of one hot key.
    pub due_shards: u32,
    /// A flight's checkout holds by status (the operator's listing): sparse (only hold items
    /// carry its keys), one partition per flight and inventory shard so it takes no more writes
    /// a second than the shard's counter, projection ALL so a page decodes without second reads.
    pub flight_holds_index: &'static str,
    pub hold_flight: KeyAttr,
    pub hold_order: KeyAttr,
    pub flight_holds_projection: &'static str,
    /// Each seat's REQUESTED intents (what a lost race may close once the seat is won): sparse
    /// (only a REQUESTED intent carries `open_seat`), sorted by the intent's own key,
    /// projection ALL so a close is pinned to the index's copy without a second read.
    pub open_index: &'static str,
    pub open_seat: KeyAttr,
    pub open_projection: &'static str,
    /// `open_seat` values are `OPEN#<seat>#0 ..= OPEN#<seat>#{open_shards - 1}` (by intent id):
    /// a same-seat burst's confirms spread over that many index partitions instead of one.
    pub open_shards: u32,
    pub ttl_attribute: &'static str,
    /// The stream is the outbox; the relay needs old and new images of each intent write.
    pub stream_view_type: &'static str,
    pub billing_mode: &'static str,
}

/// The table. `template.yaml` and `infra/aws/TABLE.md` describe the same thing.
pub const TABLE: TableSchema = TableSchema {
    partition_key: KeyAttr {
        name: "pk",
        attr_type: "S",
    },
    sort_key: KeyAttr {
        name: "sk",
        attr_type: "S",
    },
    due_index: "due",
    due_shard: KeyAttr {
        name: "due_shard",
        attr_type: "S",
    },
    due_at: KeyAttr {
        name: "due_at",
        attr_type: "N",
    },
    due_projection: "ALL",
    due_shards: 16,
    flight_holds_index: "flight_holds",
    hold_flight: KeyAttr {
        name: "hold_flight",
        attr_type: "S",
    },
    hold_order: KeyAttr {
        name: "hold_order",
        attr_type: "S",
    },
    flight_holds_projection: "ALL",
    open_index: "open_seat",
    open_seat: KeyAttr {
        name: "open_seat",
        attr_type: "S",
    },
    open_projection: "ALL",
    open_shards: 4,
    ttl_attribute: "ttl",
    stream_view_type: "NEW_AND_OLD_IMAGES",
    billing_mode: "PAY_PER_REQUEST",
};

impl TableSchema {
    /// The `due_shard` value for shard `n`.
    pub fn due_shard_value(&self, n: u32) -> String {
        format!("DUE#{n}")
    }

    /// The `due_shard` value of a held checkout hold in shard `n`: the same index, partitions of
    /// their own, so the intents' due queries never read a hold.
    pub fn hold_due_shard_value(&self, n: u32) -> String {
        format!("HOLD#{n}")
    }

    /// The `open_seat` value of a REQUESTED intent on `seat` in shard `n`.
    pub fn open_seat_value(&self, seat: &str, n: u32) -> String {
        format!("OPEN#{seat}#{n}")
    }

    /// A checkout hold's `hold_flight`: its flight and the shard its seats came from.
    pub fn hold_flight_value(&self, flight: &str, shard: u32) -> String {
        format!("FLIGHT#{flight}#{shard}")
    }

    /// A checkout hold's `hold_order`: its status, then its id, so one status of one shard is
    /// one key range in id order.
    pub fn hold_order_value(&self, status: &str, hold_id: &str) -> String {
        format!("{status}#{hold_id}")
    }

    /// Every attribute that appears in a key schema (table or index), as CloudFormation's
    /// `AttributeDefinitions` must list them.
    pub fn key_attributes(&self) -> [KeyAttr; 7] {
        [
            self.partition_key,
            self.sort_key,
            self.due_shard,
            self.due_at,
            self.hold_flight,
            self.hold_order,
            self.open_seat,
        ]
    }

    /// The `AWS::DynamoDB::Table` properties this schema implies, in CloudFormation's JSON shape,
    /// for comparing with `template.yaml` (which may add more, e.g. point-in-time recovery).
    pub fn cloudformation_properties(&self) -> serde_json::Value {
        let attr =
            |a: KeyAttr| serde_json::json!({"AttributeName": a.name, "AttributeType": a.attr_type});
        let key = |a: KeyAttr, t: &str| serde_json::json!({"AttributeName": a.name, "KeyType": t});
        serde_json::json!({
            "BillingMode": self.billing_mode,
            "AttributeDefinitions": self.key_attributes().map(attr).to_vec(),
            "KeySchema": [key(self.partition_key, "HASH"), key(self.sort_key, "RANGE")],
            "GlobalSecondaryIndexes": [{
                "IndexName": self.due_index,
                "KeySchema": [key(self.due_shard, "HASH"), key(self.due_at, "RANGE")],
                "Projection": {"ProjectionType": self.due_projection},
            }, {
                "IndexName": self.flight_holds_index,
                "KeySchema": [key(self.hold_flight, "HASH"), key(self.hold_order, "RANGE")],
                "Projection": {"ProjectionType": self.flight_holds_projection},
            }, {
                "IndexName": self.open_index,
                "KeySchema": [key(self.open_seat, "HASH"), key(self.partition_key, "RANGE")],
                "Projection": {"ProjectionType": self.open_projection},
            }],
            "TimeToLiveSpecification": {"AttributeName": self.ttl_attribute, "Enabled": true},
            "StreamSpecification": {"StreamViewType": self.stream_view_type},
        })
    }
}

fn scalar(t: &str) -> ScalarAttributeType {
    ScalarAttributeType::from(t)
}

fn key_element(a: KeyAttr, key_type: KeyType) -> Result<KeySchemaElement, StoreError> {
    KeySchemaElement::builder()
        .attribute_name(a.name)
        .key_type(key_type)
        .build()
        .map_err(build_error)
}

fn build_error(e: aws_sdk_dynamodb::error::BuildError) -> StoreError {
    StoreError::Unavailable(format!("building a table request: {e}"))
}

/// Creates the table as [`TABLE`] describes it, waits until it is active and turns TTL on.
///
/// Used by the tests (a uniquely named table per run) and by the local runner against DynamoDB
/// Local. In AWS the table comes from `template.yaml`; this function is never called there.
pub async fn create_table(client: &Client, name: &str) -> Result<(), StoreError> {
    let t = TABLE;
    let mut definitions = Vec::new();
    for a in t.key_attributes() {
        definitions.push(
            AttributeDefinition::builder()
                .attribute_name(a.name)
                .attribute_type(scalar(a.attr_type))
                .build()
                .map_err(build_error)?,
        );
    }
    let due = GlobalSecondaryIndex::builder()
        .index_name(t.due_index)
        .key_schema(key_element(t.due_shard, KeyType::Hash)?)
        .key_schema(key_element(t.due_at, KeyType::Range)?)
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::from(t.due_projection))
                .build(),
        )
        .build()
        .map_err(build_error)?;
    let flight_holds = GlobalSecondaryIndex::builder()
        .index_name(t.flight_holds_index)
        .key_schema(key_element(t.hold_flight, KeyType::Hash)?)
        .key_schema(key_element(t.hold_order, KeyType::Range)?)
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::from(t.flight_holds_projection))
                .build(),
        )
        .build()
        .map_err(build_error)?;
    let open = GlobalSecondaryIndex::builder()
        .index_name(t.open_index)
        .key_schema(key_element(t.open_seat, KeyType::Hash)?)
        .key_schema(key_element(t.partition_key, KeyType::Range)?)
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::from(t.open_projection))
                .build(),
        )
        .build()
        .map_err(build_error)?;
    client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::from(t.billing_mode))
        .set_attribute_definitions(Some(definitions))
        .key_schema(key_element(t.partition_key, KeyType::Hash)?)
        .key_schema(key_element(t.sort_key, KeyType::Range)?)
        .global_secondary_indexes(due)
        .global_secondary_indexes(flight_holds)
        .global_secondary_indexes(open)
        .stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::from(t.stream_view_type))
                .build()
                .map_err(build_error)?,
        )
        .send()
        .await
        .map_err(|e| map_sdk_error("CreateTable", e))?;
    // On AWS a new table is CREATING for a while and UpdateTimeToLive needs it ACTIVE.
    client
        .wait_until_table_exists()
        .table_name(name)
        .wait(Duration::from_secs(120))
        .await
        .map_err(|e| StoreError::Unavailable(format!("waiting for table {name}: {e}")))?;
    client
        .update_time_to_live()
        .table_name(name)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .attribute_name(t.ttl_attribute)
                .enabled(true)
                .build()
                .map_err(build_error)?,
        )
        .send()
        .await
        .map_err(|e| map_sdk_error("UpdateTimeToLive", e))?;
    Ok(())
}

/// Deletes a table (tests clean up after themselves).
pub async fn delete_table(client: &Client, name: &str) -> Result<(), StoreError> {
    client
        .delete_table()
        .table_name(name)
        .send()
        .await
        .map_err(|e| map_sdk_error("DeleteTable", e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cloudformation_rendering_names_every_key_attribute_once() {
        let p = TABLE.cloudformation_properties();
        let defs = p["AttributeDefinitions"].as_array().unwrap();
        assert_eq!(defs.len(), 7);
        assert_eq!(p["GlobalSecondaryIndexes"][0]["IndexName"], "due");
        assert_eq!(p["GlobalSecondaryIndexes"][1]["IndexName"], "flight_holds");
        assert_eq!(p["GlobalSecondaryIndexes"][2]["IndexName"], "open_seat");
        assert_eq!(TABLE.open_seat_value("A-1", 2), "OPEN#A-1#2");
        assert_eq!(
            p["StreamSpecification"]["StreamViewType"],
            "NEW_AND_OLD_IMAGES"
        );
        assert_eq!(TABLE.due_shard_value(3), "DUE#3");
    }
}
