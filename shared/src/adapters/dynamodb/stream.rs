//! The table's stream as the outbox: stream records -> [`IntentChange`].
//!
//! Two sources deliver the same records in two shapes:
//! - on AWS, the Lambda service hands the relay an `aws_lambda_events` DynamoDB event whose
//!   images are `serde_dynamo::Item`s;
//! - the local runner polls the stream itself with `aws-sdk-dynamodbstreams`.
//!
//! Both are converted to the SDK's item map and decoded by the same strict codec as every other
//! read ([`super::item::intent_from_item`]). Only intent items (`sk = INTENT`) matter: the records
//! of one transaction reach the stream independently, so the relay is driven by the intent item
//! alone and actions, consents and suppressions decode to `None`. An intent record that does not
//! decode is an error, never a silent skip, so the event source mapping retries it and finally
//! sends it to the on-failure destination.

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodbstreams::types::{AttributeValue as StreamValue, Record};
use std::collections::HashMap;

use super::item::{Item, intent_from_item, is_intent_item};
use crate::domain::IntentChange;
use crate::handlers::stream::OutboxRecord;
use crate::ports::StoreError;

/// Decodes one record of a Lambda DynamoDB stream event.
pub fn change_from_lambda_record(record: &EventRecord) -> Result<Option<IntentChange>, StoreError> {
    let change = &record.change;
    change_from_images(
        json_item(&change.keys)?,
        json_item(&change.old_image)?,
        json_item(&change.new_image)?,
    )
}

/// The relay's input from a Lambda event: each record's position (its sequence number, which
/// is what a stream batch item failure reports) and its decoded change.
pub fn outbox_records(event: &Event) -> Vec<OutboxRecord> {
    event
        .records
        .iter()
        .map(|r| OutboxRecord {
            position: r
                .change
                .sequence_number
                .clone()
                .unwrap_or_else(|| r.event_id.clone()),
            change: change_from_lambda_record(r).map_err(|e| e.to_string()),
        })
        .collect()
}

/// Decodes one record read with `aws-sdk-dynamodbstreams` (`GetRecords`).
pub fn change_from_stream_record(record: &Record) -> Result<Option<IntentChange>, StoreError> {
    let Some(change) = record.dynamodb() else {
        return Err(StoreError::Corrupt("stream record without dynamodb".into()));
    };
    let convert = |m: Option<&HashMap<String, StreamValue>>| -> Result<Item, StoreError> {
        m.map(|m| {
            m.iter()
                .map(|(k, v)| Ok((k.clone(), from_stream_value(v)?)))
                .collect::<Result<Item, StoreError>>()
        })
        .transpose()
        .map(Option::unwrap_or_default)
    };
    change_from_images(
        convert(change.keys())?,
        convert(change.old_image())?,
        convert(change.new_image())?,
    )
}

/// The local runner's counterpart of [`outbox_records`].
pub fn outbox_record_from_stream(record: &Record) -> OutboxRecord {
    OutboxRecord {
        position: record
            .dynamodb()
            .and_then(|d| d.sequence_number())
            .or(record.event_id())
            .unwrap_or_default()
            .to_owned(),
        change: change_from_stream_record(record).map_err(|e| e.to_string()),
    }
}

fn change_from_images(
    keys: Item,
    old: Item,
    new: Item,
) -> Result<Option<IntentChange>, StoreError> {
    let probe = [&keys, &new, &old].into_iter().find(|i| !i.is_empty());
    if !probe.is_some_and(is_intent_item) {
        return Ok(None);
    }
    let decode = |i: Item| (!i.is_empty()).then(|| intent_from_item(&i)).transpose();
    let change = IntentChange {
        old: decode(old)?,
        new: decode(new)?,
    };
    if change.old.is_none() && change.new.is_none() {
        // The stream must be NEW_AND_OLD_IMAGES; a keys-only record cannot drive the relay.
        return Err(StoreError::Corrupt("stream record without images".into()));
    }
    Ok(Some(change))
}

/// `serde_dynamo::Item` (not a direct dependency) through its serde form, which is DynamoDB
/// JSON: `{"attr": {"S": "..."}}`.
fn json_item<T: serde::Serialize>(item: &T) -> Result<Item, StoreError> {
    let bad = || StoreError::Corrupt("stream image".into());
    let value = serde_json::to_value(item).map_err(|_| bad())?;
    match value {
        serde_json::Value::Null => Ok(Item::new()),
        serde_json::Value::Object(map) => map
            .iter()
            .map(|(k, v)| {
                Ok((
                    k.clone(),
                    from_json_value(v).ok_or_else(|| attr_corrupt(k))?,
                ))
            })
            .collect(),
        _ => Err(bad()),
    }
}

fn attr_corrupt(name: &str) -> StoreError {
    StoreError::Corrupt(format!("stream image.{name}"))
}

/// One DynamoDB-JSON attribute value. Binary values are not part of any seatgate item and are
/// refused rather than decoded.
fn from_json_value(v: &serde_json::Value) -> Option<AttributeValue> {
    let obj = v.as_object()?;
    if obj.len() != 1 {
        return None;
    }
    let (tag, inner) = obj.iter().next()?;
    let strings = |v: &serde_json::Value| -> Option<Vec<String>> {
        v.as_array()?
            .iter()
            .map(|s| s.as_str().map(str::to_owned))
            .collect()
    };
    Some(match tag.as_str() {
        "S" => AttributeValue::S(inner.as_str()?.to_owned()),
        "N" => AttributeValue::N(inner.as_str()?.to_owned()),
        "BOOL" => AttributeValue::Bool(inner.as_bool()?),
        "NULL" => AttributeValue::Null(inner.as_bool()?),
        "SS" => AttributeValue::Ss(strings(inner)?),
        "NS" => AttributeValue::Ns(strings(inner)?),
        "L" => AttributeValue::L(
            inner
                .as_array()?
                .iter()
                .map(from_json_value)
                .collect::<Option<_>>()?,
        ),
        "M" => AttributeValue::M(
            inner
                .as_object()?
                .iter()
                .map(|(k, v)| Some((k.clone(), from_json_value(v)?)))
                .collect::<Option<_>>()?,
        ),
        _ => return None,
    })
}

fn from_stream_value(v: &StreamValue) -> Result<AttributeValue, StoreError> {
    Ok(match v {
        StreamValue::S(s) => AttributeValue::S(s.clone()),
        StreamValue::N(n) => AttributeValue::N(n.clone()),
        StreamValue::Bool(b) => AttributeValue::Bool(*b),
        StreamValue::Null(b) => AttributeValue::Null(*b),
        StreamValue::Ss(v) => AttributeValue::Ss(v.clone()),
        StreamValue::Ns(v) => AttributeValue::Ns(v.clone()),
        StreamValue::B(b) => AttributeValue::B(b.clone()),
        StreamValue::Bs(v) => AttributeValue::Bs(v.clone()),
        StreamValue::L(v) => {
            AttributeValue::L(v.iter().map(from_stream_value).collect::<Result<_, _>>()?)
        }
        StreamValue::M(m) => AttributeValue::M(
            m.iter()
                .map(|(k, v)| Ok((k.clone(), from_stream_value(v)?)))
                .collect::<Result<_, StoreError>>()?,
        ),
        _ => return Err(StoreError::Corrupt("stream value of unknown type".into())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{IntentStatus, Millis};
    use aws_sdk_dynamodbstreams::types::{OperationType, StreamRecord};

    const FIXTURE: &str = include_str!("fixtures/stream_event.json");

    fn event() -> Event {
        serde_json::from_str(FIXTURE).unwrap()
    }

    #[test]
    fn lambda_events_decode_intents_and_skip_other_items() {
        let records = outbox_records(&event());
        assert_eq!(records.len(), 4);
        assert_eq!(records[0].position, "100000000000000000001");
        let inserted = records[0].change.clone().unwrap().unwrap();
        assert!(inserted.old.is_none());
        let new = inserted.new.unwrap();
        assert_eq!(new.status, IntentStatus::Requested);
        assert_eq!(new.due_at, Some(Millis(1_764_534_900_000)));
        assert_eq!(
            records[1].change,
            Ok(None),
            "consent records are not intents"
        );
        let settled = records[2].change.clone().unwrap().unwrap();
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
        let records = outbox_records(&ev);
        assert_eq!(
            records[0].change,
            Err("corrupt item: intent.version".to_string())
        );
        let mut ev = event();
        ev.records[0].change.new_image = Default::default();
        assert!(change_from_lambda_record(&ev.records[0]).is_err());
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
                .set_keys(Some(stream_map(&json_item(&c.keys).unwrap())))
                .sequence_number(c.sequence_number.clone().unwrap());
            let old = json_item(&c.old_image).unwrap();
            if !old.is_empty() {
                sr = sr.set_old_image(Some(stream_map(&old)));
            }
            let new = json_item(&c.new_image).unwrap();
            if !new.is_empty() {
                sr = sr.set_new_image(Some(stream_map(&new)));
            }
            let record = Record::builder()
                .event_name(OperationType::from(lambda_record.event_name.as_str()))
                .dynamodb(sr.build())
                .build();
            let from_sdk = outbox_record_from_stream(&record);
            assert_eq!(from_sdk.position, c.sequence_number.clone().unwrap());
            assert_eq!(
                from_sdk.change,
                change_from_lambda_record(&lambda_record).map_err(|e| e.to_string())
            );
        }
    }
}
