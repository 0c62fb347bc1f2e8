//! The table's stream as the outbox: stream records -> [`Change`].
//!
//! Two sources deliver the same records in two shapes:
//! - on AWS, the Lambda service hands the relay an `aws_lambda_events` DynamoDB event whose
//!   images are `serde_dynamo::Item`s;
//! - the local runner polls the stream itself with `aws-sdk-dynamodbstreams`.
//!
//! Both are converted to the SDK's item map and decoded by the same strict codec as every other
//! read ([`super::item::intent_from_item`]). Only intent items (`sk = INTENT`) and checkout holds
//! (`USER#<user>` / `HOLD#<id>`, for the offers' events) matter: the records of one transaction
//! reach the stream independently, so the relay is driven by each such item alone, and actions,
//! consents, shards, entries and suppressions decode to `None`. A record of either kind that does
//! not decode is an error, never a silent skip, so the event source mapping retries it and
//! finally sends it to the on-failure destination.

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodbstreams::types::{AttributeValue as StreamValue, Record};
use std::collections::HashMap;

use super::checkout::{hold_from_item, is_checkout_hold_item};
use super::item::{Item, intent_from_item, is_intent_item};
use seatgate::domain::{Change, ChangeRecord, HoldChange, IntentChange, UndecodableChange};
use seatgate::ports::StoreError;

/// Decodes one record of a Lambda DynamoDB stream event.
pub fn change_from_lambda_record(record: &EventRecord) -> Result<Option<Change>, StoreError> {
    let change = &record.change;
    change_from_images(
        lambda_item(&change.keys),
        lambda_item(&change.old_image),
        lambda_item(&change.new_image),
    )
}

/// The relay's input from a Lambda event: each record's position (its sequence number, which
/// is what a stream batch item failure reports) and its decoded change.
pub fn change_records(event: &Event) -> Vec<ChangeRecord> {
    event
        .records
        .iter()
        .map(|r| ChangeRecord {
            position: r
                .change
                .sequence_number
                .clone()
                .unwrap_or_else(|| r.event_id.clone()),
            change: change_from_lambda_record(r).map_err(undecodable),
        })
        .collect()
}

/// Decodes one record read with `aws-sdk-dynamodbstreams` (`GetRecords`).
pub fn change_from_stream_record(record: &Record) -> Result<Option<Change>, StoreError> {
    let Some(change) = record.dynamodb() else {
        return Err(StoreError::Corrupt("stream record without dynamodb".into()));
    };
    change_from_images(
        stream_item(change.keys())?,
        stream_item(change.old_image())?,
        stream_item(change.new_image())?,
    )
}

/// The local runner's counterpart of [`change_records`].
pub fn change_record_from_stream(record: &Record) -> ChangeRecord {
    ChangeRecord {
        position: record
            .dynamodb()
            .and_then(|d| d.sequence_number())
            .or(record.event_id())
            .unwrap_or_default()
            .to_owned(),
        change: change_from_stream_record(record).map_err(undecodable),
    }
}

fn undecodable(e: StoreError) -> UndecodableChange {
    UndecodableChange(e.to_string())
}

fn change_from_images(keys: Item, old: Item, new: Item) -> Result<Option<Change>, StoreError> {
    let Some(probe) = [&keys, &new, &old].into_iter().find(|i| !i.is_empty()) else {
        return Ok(None);
    };
    let change = if is_intent_item(probe) {
        let decode = |i: Item| (!i.is_empty()).then(|| intent_from_item(&i)).transpose();
        let change = IntentChange {
            old: decode(old)?,
            new: decode(new)?,
        };
        (change.old.is_some() || change.new.is_some()).then_some(Change::Intent(change))
    } else if is_checkout_hold_item(probe) {
        let decode = |i: Item| (!i.is_empty()).then(|| hold_from_item(&i)).transpose();
        let change = HoldChange {
            old: decode(old)?,
            new: decode(new)?,
        };
        (change.old.is_some() || change.new.is_some()).then_some(Change::Hold(change))
    } else {
        return Ok(None);
    };
    // The stream must be NEW_AND_OLD_IMAGES; a keys-only record cannot drive the relay.
    change
        .map(Some)
        .ok_or_else(|| StoreError::Corrupt("stream record without images".into()))
}

// The attribute-value conversions are serde_dynamo's (the crate aws_lambda_events already uses
// for its images), with its `aws-sdk-dynamodb+1` and `aws-sdk-dynamodbstreams+1` features: the
// Lambda event's image and the streams SDK's map both become the DynamoDB SDK's item map, which
// the same strict codec decodes as every other read.

/// A Lambda event image (absent images are empty) as the DynamoDB SDK's item map.
fn lambda_item(item: &serde_dynamo::Item) -> Item {
    Item::from(item.clone())
}

/// A streams SDK image as the DynamoDB SDK's item map. serde_dynamo panics on a value of a type
/// this SDK version does not know (`Unknown`, a type added to DynamoDB later), so such a value
/// is refused here first, as a corrupt record the mapping retries and finally parks.
fn stream_item(image: Option<&HashMap<String, StreamValue>>) -> Result<Item, StoreError> {
    let Some(image) = image else {
        return Ok(Item::new());
    };
    if let Some((name, _)) = image.iter().find(|(_, v)| has_unknown(v)) {
        return Err(StoreError::Corrupt(format!(
            "stream image.{name}: unknown type"
        )));
    }
    Ok(image
        .iter()
        .map(|(k, v)| {
            let value: serde_dynamo::AttributeValue = v.clone().into();
            (k.clone(), AttributeValue::from(value))
        })
        .collect())
}

fn has_unknown(v: &StreamValue) -> bool {
    match v {
        StreamValue::L(l) => l.iter().any(has_unknown),
        StreamValue::M(m) => m.values().any(has_unknown),
        other => other.is_unknown(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodbstreams::types::{OperationType, StreamRecord};
    use seatgate::domain::{IntentStatus, Millis};

    const FIXTURE: &str = include_str!("fixtures/stream_event.json");

    fn event() -> Event {
        serde_json::from_str(FIXTURE).unwrap()
    }

    #[test]
    fn lambda_events_decode_intents_and_skip_other_items() {
        let records = change_records(&event());
        assert_eq!(records.len(), 4);
        assert_eq!(records[0].position, "100000000000000000001");
        let intent = |i: usize| match records[i].change.clone().unwrap().unwrap() {
            Change::Intent(c) => c,
            other => panic!("record {i} is an intent, not {other:?}"),
        };
        let inserted = intent(0);
        assert!(inserted.old.is_none());
        let new = inserted.new.unwrap();
        assert_eq!(new.status, IntentStatus::Requested);
        assert_eq!(new.due_at, Some(Millis(1_764_534_900_000)));
        assert_eq!(
            records[1].change,
            Ok(None),
            "consent records are not intents"
        );
        let settled = intent(2);
        assert_eq!(settled.old.unwrap().status, IntentStatus::Reserving);
        let done = settled.new.unwrap();
        assert_eq!(done.status, IntentStatus::Succeeded);
        assert_eq!(done.charge_id.as_deref(), Some("ch-77"));
        assert_eq!(done.due_at, None);
        assert_eq!(records[3].change, Ok(None), "a TTL delete of a suppression");
    }

    #[test]
    fn a_corrupt_intent_record_is_an_error_not_a_skip() {
        let mut ev = event();
        let image = &mut ev.records[0].change.new_image;
        image.remove("version");
        let records = change_records(&ev);
        assert_eq!(
            records[0].change,
            Err(UndecodableChange(
                "corrupt item: intent.version".to_string()
            ))
        );
        let mut ev = event();
        ev.records[0].change.new_image = Default::default();
        assert!(change_from_lambda_record(&ev.records[0]).is_err());
    }

    #[test]
    fn an_offers_hold_records_decode_as_hold_changes_and_seat_holds_are_skipped() {
        use seatgate::domain::{CheckoutTimes, EntryId, FlightId, OfferEvent, UserId, WaitEntry};
        let entry = WaitEntry::new(
            EntryId::from_uuid(uuid::Uuid::from_u128(9)),
            FlightId::parse("F-1").unwrap(),
            UserId::parse("u9").unwrap(),
            1,
            Millis(1_000),
        );
        let (_, offer) = entry.offer(0, &CheckoutTimes::default(), Millis(2_000));
        let item = super::super::checkout::hold_item(&offer, false);
        let mut ev = event();
        let record = &mut ev.records[0];
        record.change.keys = serde_dynamo::Item::from(
            item.iter()
                .filter(|(k, _)| *k == "pk" || *k == "sk")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<Item>(),
        );
        record.change.new_image = serde_dynamo::Item::from(item.clone());
        let Ok(Some(Change::Hold(change))) = change_from_lambda_record(record) else {
            panic!("an offer's hold is a hold change");
        };
        assert_eq!(change.new.as_ref(), Some(&offer));
        assert_eq!(change.old, None);
        assert_eq!(
            OfferEvent::of(&change).map(|e| e.event_type),
            Some("offer.created".to_owned())
        );
        assert!(
            item.contains_key(super::super::checkout::OFFER_FOR),
            "the relay's stream filter matches offers by it"
        );
        // A seat's upstream hold (`SEAT#<seat>` / `HOLD`) is not a checkout hold.
        let seat_hold =
            super::super::item::seat_claim_key(&seatgate::domain::SeatId::parse("A-1").unwrap());
        record.change.keys = serde_dynamo::Item::from(seat_hold.clone());
        record.change.new_image = serde_dynamo::Item::from(seat_hold);
        assert_eq!(change_from_lambda_record(record).unwrap(), None);
    }

    /// Lambda's event filtering, the part the relay's patterns use: an object pattern matches
    /// when each of its keys matches the record's value there; an array lists the accepted
    /// values of a leaf (a literal, `{"prefix": p}` or `{"exists": bool}`). What AWS documents
    /// for DynamoDB stream filters; enough to hold the template's patterns to real items.
    fn admits(pattern: &serde_json::Value, record: Option<&serde_json::Value>) -> bool {
        use serde_json::Value;
        match pattern {
            Value::Object(keys) => keys.iter().all(|(k, p)| {
                let inner = record.and_then(|r| r.get(k));
                match p {
                    Value::Array(accepted) => accepted.iter().any(|a| match a {
                        Value::Object(op) if op.contains_key("exists") => {
                            op["exists"].as_bool() == Some(inner.is_some())
                        }
                        Value::Object(op) if op.contains_key("prefix") => {
                            matches!((inner, op["prefix"].as_str()), (Some(Value::String(v)), Some(pre)) if v.starts_with(pre))
                        }
                        literal => inner == Some(literal),
                    }),
                    nested => admits(nested, inner),
                }
            }),
            _ => false,
        }
    }

    /// The relay's filters as `template.yaml` states them (the only event filter patterns in it).
    fn relay_filters() -> Vec<serde_json::Value> {
        include_str!("../../../../template.yaml")
            .lines()
            .filter_map(|l| l.trim().strip_prefix("- Pattern: '"))
            .map(|p| serde_json::from_str(p.trim_end_matches('\'')).expect("a JSON pattern"))
            .collect()
    }

    /// A stream record as Lambda's filter sees it: `dynamodb.Keys` and `dynamodb.NewImage` in
    /// DynamoDB JSON.
    fn filtered_record(item: &Item) -> serde_json::Value {
        let keys: Item = item
            .iter()
            .filter(|(k, _)| *k == "pk" || *k == "sk")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        serde_json::json!({ "dynamodb": {
            "Keys": serde_json::to_value(serde_dynamo::Item::from(keys)).unwrap(),
            "NewImage": serde_json::to_value(serde_dynamo::Item::from(item.clone())).unwrap(),
        }})
    }

    #[test]
    fn the_templates_relay_filters_admit_intents_and_offers_and_nothing_else() {
        use seatgate::domain::{
            BookingId, CheckoutHold, CheckoutTimes, EntryId, FlightId, HoldId, UserId, WaitEntry,
        };
        let filters = relay_filters();
        assert_eq!(filters.len(), 2, "{filters:?}");
        let admitted = |item: &Item| {
            let record = filtered_record(item);
            filters.iter().any(|f| admits(f, Some(&record)))
        };
        let intent = lambda_item(&event().records[0].change.new_image);
        assert!(admitted(&intent), "an intent");
        let consent = lambda_item(&event().records[1].change.new_image);
        assert!(!admitted(&consent), "a consent");
        let entry = WaitEntry::new(
            EntryId::from_uuid(uuid::Uuid::from_u128(11)),
            FlightId::parse("F-1").unwrap(),
            UserId::parse("u11").unwrap(),
            1,
            Millis(1_000),
        );
        let (_, offer) = entry.offer(0, &CheckoutTimes::default(), Millis(2_000));
        assert!(
            admitted(&super::super::checkout::hold_item(&offer, false)),
            "an offer"
        );
        let plain = CheckoutHold::new(
            HoldId::from_uuid(uuid::Uuid::from_u128(12)),
            offer.flight_id.clone(),
            offer.user_id.clone(),
            1,
            0,
            BookingId::generate(),
            &CheckoutTimes::default(),
            Millis(2_000),
        );
        assert!(
            !admitted(&super::super::checkout::hold_item(&plain, true)),
            "a hold its user asked for"
        );
        let seat_hold =
            super::super::item::seat_claim_key(&seatgate::domain::SeatId::parse("A-1").unwrap());
        assert!(!admitted(&seat_hold), "a seat's upstream hold");
        // The matcher itself refuses what it should: a planted filter on the wrong key.
        let wrong: serde_json::Value = serde_json::from_str(
            r#"{"dynamodb": {"Keys": {"sk": {"S": [{"prefix": "HOLD#"}]}}, "NewImage": {"offerFor": {"S": [{"exists": true}]}}}}"#,
        )
        .unwrap();
        let offer_record = filtered_record(&super::super::checkout::hold_item(&offer, false));
        assert!(!admits(&wrong, Some(&offer_record)));
    }

    /// The same records as the SDK's stream client returns them.
    fn to_stream_value(v: &AttributeValue) -> StreamValue {
        match v {
            AttributeValue::S(s) => StreamValue::S(s.clone()),
            AttributeValue::N(n) => StreamValue::N(n.clone()),
            other => panic!("fixture uses only S and N, got {other:?}"),
        }
    }

    fn stream_map(item: &Item) -> HashMap<String, StreamValue> {
        item.iter()
            .map(|(k, v)| (k.clone(), to_stream_value(v)))
            .collect()
    }

    #[test]
    fn sdk_stream_records_decode_like_lambda_events() {
        for lambda_record in event().records {
            let c = &lambda_record.change;
            let mut sr = StreamRecord::builder()
                .set_keys(Some(stream_map(&lambda_item(&c.keys))))
                .sequence_number(c.sequence_number.clone().unwrap());
            let old = lambda_item(&c.old_image);
            if !old.is_empty() {
                sr = sr.set_old_image(Some(stream_map(&old)));
            }
            let new = lambda_item(&c.new_image);
            if !new.is_empty() {
                sr = sr.set_new_image(Some(stream_map(&new)));
            }
            let record = Record::builder()
                .event_name(OperationType::from(lambda_record.event_name.as_str()))
                .dynamodb(sr.build())
                .build();
            let from_sdk = change_record_from_stream(&record);
            assert_eq!(from_sdk.position, c.sequence_number.clone().unwrap());
            assert_eq!(
                from_sdk.change,
                change_from_lambda_record(&lambda_record).map_err(undecodable)
            );
        }
    }
}
