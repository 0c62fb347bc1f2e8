//! What every check here reads: `template.yaml` parsed into CloudFormation's JSON form (short tags
//! such as `!GetAtt` kept, in their long form), lookups of resources, properties and the timing
//! mapping, `FindInMap` resolution, and the five functions with their roles and log groups.
//!
//! Shared by the other files of this test binary; it holds no test of its own.

use serde_json::Value;
use std::sync::OnceLock;
use std::time::Duration;

/// YAML -> `serde_json::Value`, keeping CloudFormation's short tags. yaml-rust2's own loader
/// drops unknown tags (`!GetAtt A.Arn` would become the string `"A.Arn"`), so this builds the
/// tree from the parser's events, where each node still carries its tag, and writes intrinsic
/// functions in their long form: `!Ref X` -> `{"Ref": "X"}`, `!GetAtt A.B` ->
/// `{"Fn::GetAtt": ["A", "B"]}`, `!Sub s` -> `{"Fn::Sub": s}`, `!If [..]` -> `{"Fn::If": [..]}`.
mod cfn {
    use serde_json::{Map, Value};
    use yaml_rust2::parser::{Event, EventReceiver, Parser, Tag};
    use yaml_rust2::scanner::TScalarStyle;
    use yaml_rust2::yaml::Yaml;

    enum Frame {
        Seq(Vec<Value>, Option<Tag>),
        Map(Map<String, Value>, Option<String>, Option<Tag>),
    }

    #[derive(Default)]
    struct Builder {
        stack: Vec<Frame>,
        docs: Vec<Value>,
    }

    /// A node with a CloudFormation short tag, in long form; other nodes as they are.
    fn tagged(tag: Option<Tag>, value: Value) -> Value {
        let Some(tag) = tag.filter(|t| t.handle == "!") else {
            return value;
        };
        let name = tag.suffix;
        let (key, value) = match (name.as_str(), value) {
            ("Ref", v) => ("Ref".to_owned(), v),
            ("Condition", v) => ("Condition".to_owned(), v),
            ("GetAtt", Value::String(s)) => {
                let (resource, attribute) = s.split_once('.').expect("!GetAtt Resource.Attribute");
                (
                    "Fn::GetAtt".to_owned(),
                    Value::from(vec![resource, attribute]),
                )
            }
            (other, v) => (format!("Fn::{other}"), v),
        };
        Value::Object(Map::from_iter([(key, value)]))
    }

    fn scalar(text: String, style: TScalarStyle) -> Value {
        if style != TScalarStyle::Plain {
            return Value::String(text);
        }
        match Yaml::from_str(&text) {
            Yaml::Integer(i) => Value::from(i),
            Yaml::Real(r) => Value::from(r.parse::<f64>().expect("a YAML real")),
            Yaml::Boolean(b) => Value::Bool(b),
            Yaml::Null => Value::Null,
            _ => Value::String(text),
        }
    }

    impl Builder {
        fn push(&mut self, value: Value) {
            match self.stack.last_mut() {
                None => self.docs.push(value),
                Some(Frame::Seq(items, _)) => items.push(value),
                Some(Frame::Map(map, key, _)) => match key.take() {
                    None => {
                        *key = Some(match value {
                            Value::String(s) => s,
                            other => other.to_string(),
                        })
                    }
                    Some(k) => {
                        assert!(map.insert(k.clone(), value).is_none(), "duplicate key {k}");
                    }
                },
            }
        }
    }

    impl EventReceiver for Builder {
        fn on_event(&mut self, event: Event) {
            match event {
                Event::Scalar(text, style, _, tag) => {
                    let value = scalar(text, style);
                    self.push(tagged(tag, value));
                }
                Event::SequenceStart(_, tag) => self.stack.push(Frame::Seq(Vec::new(), tag)),
                Event::MappingStart(_, tag) => {
                    self.stack.push(Frame::Map(Map::new(), None, tag));
                }
                Event::SequenceEnd | Event::MappingEnd => {
                    let value = match self.stack.pop().expect("balanced events") {
                        Frame::Seq(items, tag) => tagged(tag, Value::Array(items)),
                        Frame::Map(map, _, tag) => tagged(tag, Value::Object(map)),
                    };
                    self.push(value);
                }
                Event::Alias(_) => panic!("template.yaml uses no anchors or aliases"),
                _ => {}
            }
        }
    }

    pub fn parse(yaml: &str) -> Value {
        let mut builder = Builder::default();
        Parser::new_from_str(yaml)
            .load(&mut builder, false)
            .unwrap_or_else(|e| panic!("template.yaml does not parse: {e}"));
        assert_eq!(builder.docs.len(), 1, "one YAML document");
        builder.docs.pop().unwrap()
    }
}

pub(crate) fn template() -> &'static Value {
    static T: OnceLock<Value> = OnceLock::new();
    T.get_or_init(|| cfn::parse(include_str!("../../../../template.yaml")))
}

pub(crate) fn resource(name: &str) -> &'static Value {
    let r = &template()["Resources"][name];
    assert!(r.is_object(), "template.yaml has no resource {name}");
    r
}

pub(crate) fn props(name: &str) -> &'static Value {
    &resource(name)["Properties"]
}

pub(crate) fn timing_mapping() -> &'static serde_json::Map<String, Value> {
    template()["Mappings"]["Timing"]["Aws"]
        .as_object()
        .expect("Mappings.Timing.Aws")
}

/// `{"Fn::FindInMap": [map, top, second]}` replaced by the mapping's value; other values as is.
pub(crate) fn resolve(v: &Value) -> Value {
    match v.get("Fn::FindInMap").and_then(Value::as_array) {
        Some(path) => {
            let key = |i: usize| path[i].as_str().expect("literal FindInMap keys");
            let found = &template()["Mappings"][key(0)][key(1)][key(2)];
            assert!(!found.is_null(), "FindInMap {path:?} resolves to nothing");
            found.clone()
        }
        None => v.clone(),
    }
}

pub(crate) fn resolve_int(v: &Value) -> u64 {
    let r = resolve(v);
    r.as_u64()
        .unwrap_or_else(|| panic!("{v} resolves to {r}, not a whole number"))
}

pub(crate) fn secs(d: Duration) -> u64 {
    assert_eq!(d.subsec_nanos(), 0, "{d:?} is not whole seconds");
    d.as_secs()
}

/// `rate(1 minute)`, `rate(5 minutes)`, `rate(30 seconds)`, `rate(2 hours)` in seconds.
pub(crate) fn rate_seconds(expression: &str) -> u64 {
    let inner = expression
        .strip_prefix("rate(")
        .and_then(|s| s.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{expression} is not a rate expression"));
    let (n, unit) = inner.split_once(' ').expect("rate(<n> <unit>)");
    let n: u64 = n.parse().expect("a whole rate");
    n * match unit.trim_end_matches('s') {
        "second" => 1,
        "minute" => 60,
        "hour" => 3600,
        "day" => 86400,
        other => panic!("unknown rate unit {other}"),
    }
}

pub(crate) const FUNCTIONS: [(&str, &str, &str); 5] = [
    ("ApiFunction", "ApiRole", "ApiLogGroup"),
    ("RelayFunction", "RelayRole", "RelayLogGroup"),
    ("WorkerFunction", "WorkerRole", "WorkerLogGroup"),
    ("ReaperFunction", "ReaperRole", "ReaperLogGroup"),
    ("DeliverFunction", "DeliverRole", "DeliverLogGroup"),
];
