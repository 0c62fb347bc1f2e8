//! Credentials at rest on AWS: written through the API's code, a credential reaches the table
//! only sealed under the KMS key, so neither the item, nor the stream records that carry its
//! images for 24 hours, holds it in plain text; the worker's code opens it again; and a sealed
//! value copied onto another user's item does not open (KMS checks the encryption context).
//!
//! Needs DynamoDB Local and moto (KMS): `eval "$(scripts/emulators.sh start)"`.

use aws_sdk_dynamodbstreams::types::ShardIteratorType;
use seatgate::domain::{Millis, UserId};
use seatgate::ports::Credentials;
use seatgate::service::{Ports, Services};
use seatgate_aws::dynamodb::DynamoStore;
use seatgate_testkit::ManualClock;
use seatgate_testkit::setup;
use std::sync::Arc;

const CREDENTIAL: &str = "plaintext-credential-4b1d7e";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_is_never_in_the_table_or_its_stream_in_plain_text() {
    let client = setup::dynamodb().await;
    let table = setup::fresh_table(&client, "seatgate-seal-").await;
    let store = Arc::new(
        DynamoStore::new(&client, &table).with_credentials_key(setup::credentials_key().await),
    );
    let upstream = setup::upstream(&seatgate::config::Timing::aws()).await;
    let api = Services::new(
        Ports::from_store(
            store.clone(),
            upstream.http,
            Arc::new(ManualClock::new(Millis::now())),
        ),
        seatgate::config::Timing::aws(),
    )
    .api();
    let (alice, bob) = (
        UserId::parse("alice").unwrap(),
        UserId::parse("bob").unwrap(),
    );
    api.put_credential(&alice, CREDENTIAL).await.unwrap();
    assert_eq!(
        store.credential(&alice).await.unwrap().unwrap().expose(),
        CREDENTIAL,
        "the worker's read opens it"
    );

    // The table, item by item, as any role with Scan would see it.
    let items = client
        .scan()
        .table_name(&table)
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    let dump = format!("{:?}", items.items());
    assert!(dump.contains("sealed_credential"), "the item was scanned");
    assert!(!dump.contains(CREDENTIAL), "plaintext in the table");
    assert!(
        !dump.contains(&hex(CREDENTIAL)),
        "hex plaintext in the table"
    );

    // The stream, from its trim horizon: what the relay's mapping (or anyone with
    // dynamodb:GetRecords) reads.
    let streams = aws_sdk_dynamodbstreams::Client::new(&setup::sdk_config().await);
    let arn = client
        .describe_table()
        .table_name(&table)
        .send()
        .await
        .unwrap()
        .table()
        .and_then(|t| t.latest_stream_arn().map(str::to_owned))
        .expect("the table has a stream");
    let shards = streams
        .describe_stream()
        .stream_arn(&arn)
        .send()
        .await
        .unwrap();
    let mut records = String::new();
    for shard in shards
        .stream_description()
        .map(|d| d.shards())
        .unwrap_or_default()
    {
        let iterator = streams
            .get_shard_iterator()
            .stream_arn(&arn)
            .shard_id(shard.shard_id().unwrap())
            .shard_iterator_type(ShardIteratorType::TrimHorizon)
            .send()
            .await
            .unwrap();
        let out = streams
            .get_records()
            .shard_iterator(iterator.shard_iterator().unwrap())
            .send()
            .await
            .unwrap();
        records.push_str(&format!("{:?}", out.records()));
    }
    assert!(
        records.contains("sealed_credential"),
        "the stream carried the item"
    );
    assert!(!records.contains(CREDENTIAL), "plaintext in the stream");

    // Bob's item given alice's sealed value (a copy by someone who can write the table):
    // KMS refuses the wrapped key for another user, and the error names no secret.
    let sealed = items
        .items()
        .iter()
        .find_map(|i| i.get("sealed_credential").cloned())
        .unwrap();
    client
        .put_item()
        .table_name(&table)
        .item(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S("USER#bob".into()),
        )
        .item(
            "sk",
            aws_sdk_dynamodb::types::AttributeValue::S("CREDENTIAL".into()),
        )
        .item("sealed_credential", sealed)
        .send()
        .await
        .unwrap();
    let err = store.credential(&bob).await.unwrap_err();
    assert!(!err.to_string().contains(CREDENTIAL), "{err}");
    let _ = seatgate_aws::dynamodb::delete_table(&client, &table).await;
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}
