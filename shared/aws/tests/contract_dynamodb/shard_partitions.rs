//! Each shard counter under a partition key of its own and the per-user count in the buyer's
//! partition, read back from DynamoDB Local as stored; a flight in the layout before is named.

use super::{Millis, StoreError, UserId, setup, shared_table, store};

/// Each shard counter under a partition key of its own, the per-user count in the buyer's
/// partition (`infra/aws/TABLE.md`, "Shard partitions"); a flight stored in the layout before
/// is refused by name, never sold from counts that are not there.
#[tokio::test]
async fn shards_have_partitions_of_their_own_and_the_old_layout_is_named() {
    use aws_sdk_dynamodb::types::AttributeValue;
    use seatgate::domain::{Booking, BookingId, BookingStatus, Flight, FlightId};
    use seatgate::ports::Flights;
    let client = setup::dynamodb().await;
    let table = shared_table().await;
    let store = store().await;
    let id = FlightId::parse(&setup::unique("F-")).unwrap();
    let flight = Flight::new(id.clone(), 10, Some(2), 3, Millis::now()).unwrap();
    assert!(store.create_flight(&flight).await.unwrap());
    let buyer = UserId::parse(&setup::unique("buyer-")).unwrap();
    let booking = Booking {
        booking_id: BookingId::from_uuid(uuid::Uuid::now_v7()),
        flight_id: id.clone(),
        user_id: buyer.clone(),
        head_count: 2,
        shard: 1,
        status: BookingStatus::Booked,
        created_at: Millis::now(),
        cancelled_at: None,
    };
    store.book(&booking, Some(2), None, None).await.unwrap();
    let get = |pk: String, sk: String| {
        let (client, table) = (client.clone(), table.clone());
        async move {
            client
                .get_item()
                .table_name(table)
                .key("pk", AttributeValue::S(pk))
                .key("sk", AttributeValue::S(sk))
                .consistent_read(true)
                .send()
                .await
                .unwrap()
                .item
        }
    };
    let shard = get(format!("FLIGHT#{id}#SHARD#01"), "SHARD".into())
        .await
        .expect("shard 1 under its own key");
    assert_eq!(shard["available"], AttributeValue::N("1".into()));
    let count = get(format!("USER#{buyer}"), format!("COUNT#{id}"))
        .await
        .expect("the buyer's count in the buyer's partition");
    assert_eq!(count["booked"], AttributeValue::N("2".into()));
    for sk in ["SHARD#00", "SHARD#01", &format!("USER#{buyer}")] {
        assert!(
            get(format!("FLIGHT#{id}"), sk.into()).await.is_none(),
            "{sk}"
        );
    }
    let inventory = store.inventory(&id).await.unwrap().unwrap();
    assert_eq!(inventory.available, vec![4, 1, 3]);

    // A flight as the layout before stored it: its shards under its own key.
    let old = FlightId::parse(&setup::unique("F-")).unwrap();
    let old_flight = Flight::new(old.clone(), 4, None, 1, Millis::now()).unwrap();
    let put = |sk: &str, attrs: Vec<(&str, AttributeValue)>| {
        let mut request = client
            .put_item()
            .table_name(&table)
            .item("pk", AttributeValue::S(format!("FLIGHT#{old}")))
            .item("sk", AttributeValue::S(sk.into()));
        for (name, value) in attrs {
            request = request.item(name, value);
        }
        request.send()
    };
    put(
        "FLIGHT",
        vec![(
            "item",
            AttributeValue::S(serde_json::to_string(&old_flight).unwrap()),
        )],
    )
    .await
    .unwrap();
    put(
        "SHARD#00",
        vec![("available", AttributeValue::N("4".into()))],
    )
    .await
    .unwrap();
    let refused = store.inventory(&old).await.unwrap_err();
    assert!(
        matches!(&refused, StoreError::Corrupt(why) if why.contains("layout before shard partitions")),
        "{refused:?}"
    );
}
