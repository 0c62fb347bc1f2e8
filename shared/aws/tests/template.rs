//! `template.yaml` agrees with the code, and every function's role grants exactly what that
//! function uses.
//!
//! - Timing: `Mappings.Timing.Aws` is `Timing::aws()` field by field, the `TIMING_*` variables the
//!   template passes are the ones `config.rs` reads, and `Timing::from_env` over exactly those
//!   values gives back `Timing::aws()` (checked in a child process, so no test mutates this
//!   process's environment).
//! - The seat queue is what `QueueDefinition::for_timing(&Timing::aws())` creates; the table is
//!   what `seatgate_aws::dynamodb::schema::TABLE` describes; function timeouts keep the lease
//!   invariant.
//! - IAM, by recording rather than by hand: each function's service runs its real flows against
//!   DynamoDB Local and moto through SDK clients carrying a recording interceptor, which logs
//!   every request's operation and body. Those are mapped to IAM actions and resources (a
//!   `TransactWriteItems` to the per-item actions of the items it carries; DynamoDB has no IAM
//!   action for the transaction itself) and compared with the role's statements:
//!   `granted == used ∪ allow-list`, where the allow-list is what the Lambda service and runtime
//!   do with the role on the function's behalf (event source mappings, logs).
//!
//! The recording test needs the emulators: `eval "$(scripts/emulators.sh start)"`. Without them it
//! fails saying so; it is never skipped.

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use seatgate::adapters::upstream_http::HttpUpstream;
use seatgate::config::Timing;
use seatgate::domain::{
    ActionKind, Intent, IntentId, IntentStatus, Millis, SeatId, SeatMessage, Secret, Transition,
    TransitionRequest, UserId,
};
use seatgate::handlers::stream::handle_dynamodb_event;
use seatgate::ports::{Clock, Intents, QueueConsumer, Upstream};
use seatgate::service::{ApiService, Ports, QueueRecord, Reaper, Relay, Services, Worker};
use seatgate_aws::dynamodb::stream::change_records;
use seatgate_aws::dynamodb::{DynamoStore, TABLE, create_table, delete_table};
use seatgate_aws::sqs::{QueueDefinition, SqsSeatQueue, create_queues, delete_queue};
use seatgate_testkit::ManualClock;
use seatgate_testkit::setup::{self, POSTS};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use upstream_sim::Simulator;

// ---------------------------------------------------------------------------------------------
// The template, as CloudFormation's JSON form
// ---------------------------------------------------------------------------------------------

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

fn template() -> &'static Value {
    static T: OnceLock<Value> = OnceLock::new();
    T.get_or_init(|| cfn::parse(include_str!("../../../template.yaml")))
}

fn resource(name: &str) -> &'static Value {
    let r = &template()["Resources"][name];
    assert!(r.is_object(), "template.yaml has no resource {name}");
    r
}

fn props(name: &str) -> &'static Value {
    &resource(name)["Properties"]
}

fn timing_mapping() -> &'static serde_json::Map<String, Value> {
    template()["Mappings"]["Timing"]["Aws"]
        .as_object()
        .expect("Mappings.Timing.Aws")
}

/// `{"Fn::FindInMap": [map, top, second]}` replaced by the mapping's value; other values as is.
fn resolve(v: &Value) -> Value {
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

fn resolve_int(v: &Value) -> u64 {
    let r = resolve(v);
    r.as_u64()
        .unwrap_or_else(|| panic!("{v} resolves to {r}, not a whole number"))
}

fn secs(d: Duration) -> u64 {
    assert_eq!(d.subsec_nanos(), 0, "{d:?} is not whole seconds");
    d.as_secs()
}

/// `rate(1 minute)`, `rate(5 minutes)`, `rate(30 seconds)`, `rate(2 hours)` in seconds.
fn rate_seconds(expression: &str) -> u64 {
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

// ---------------------------------------------------------------------------------------------
// Timing
// ---------------------------------------------------------------------------------------------

/// `infra/aws/TABLE.md`'s timing table states the template's numbers: each row naming mapping
/// keys (`` `A` / `B` ``) gives their values in order (`30 / 10 / 50`), and every numeric one must
/// be the mapping's (so the 45 s lease it explains cannot drift from the code).
#[test]
fn table_md_states_the_timing_mappings_numbers() {
    let m = timing_mapping();
    let table = include_str!("../../../infra/aws/TABLE.md");
    let section = table
        .split("## Timing")
        .nth(1)
        .expect("TABLE.md has a Timing section");
    let mut compared = 0;
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let names: Vec<&str> = cells[1].split(" / ").map(|n| n.trim_matches('`')).collect();
        let values: Vec<&str> = cells[2].split(" / ").collect();
        if names.len() != values.len() {
            continue;
        }
        for (name, value) in names.iter().zip(values) {
            let Ok(stated) = value.trim().parse::<u64>() else {
                continue;
            };
            let got = m.get(*name).unwrap_or_else(|| {
                panic!("TABLE.md names {name}, which Mappings.Timing.Aws lacks")
            });
            assert_eq!(
                got.as_u64(),
                Some(stated),
                "TABLE.md says {name} = {stated}; the template has {got}"
            );
            compared += 1;
        }
    }
    assert!(
        compared >= 25,
        "only {compared} numbers compared: is the table still there?"
    );
    for key in [
        "LeaseSeconds",
        "BreakerConsecutiveFailures",
        "RetryAfterMaxSeconds",
    ] {
        assert!(
            section.contains(&format!("`{key}`")),
            "TABLE.md leaves out {key}"
        );
    }
}

#[test]
fn the_timing_mapping_is_timing_aws_field_by_field() {
    let m = timing_mapping();
    let mut checked = BTreeSet::new();
    let mut check = |key: &'static str, expected: u64| {
        let got = m
            .get(key)
            .unwrap_or_else(|| panic!("Mappings.Timing.Aws.{key} is missing"));
        assert_eq!(
            got.as_u64(),
            Some(expected),
            "Mappings.Timing.Aws.{key} is {got}; the code has {expected}"
        );
        checked.insert(key);
    };
    // Destructured without `..`: a new Timing field does not compile until it is checked here.
    let Timing {
        upstream_timeout,
        worker_timeout,
        lease_margin,
        reaper_grace,
        visibility_timeout,
        action_ttl,
        requeue_after,
        max_requeues,
        wait_backoff_base,
        wait_backoff_max,
        max_wait,
        reaper_interval,
        settle_retry_max,
        max_unsettled,
        reaper_pass_budget,
        delivery_backoff_base,
        delivery_backoff_max,
        read_ttl,
        instance_cache_ttl,
        breaker_window,
        breaker_min_calls,
        breaker_failure_percent,
        breaker_consecutive_failures,
        breaker_open_interval,
        retry_after_max,
        read_failure_max,
        rate_limit_requests,
        rate_limit_window,
    } = Timing::aws();
    check("UpstreamTimeoutSeconds", secs(upstream_timeout));
    check("WorkerTimeoutSeconds", secs(worker_timeout));
    check("LeaseMarginSeconds", secs(lease_margin));
    check("LeaseSeconds", secs(Timing::aws().lease()));
    check("ReaperGraceSeconds", secs(reaper_grace));
    check("VisibilityTimeoutSeconds", secs(visibility_timeout));
    check("ActionTtlSeconds", secs(action_ttl));
    check("RequeueAfterSeconds", secs(requeue_after));
    check("MaxRequeues", u64::from(max_requeues));
    check("WaitBackoffBaseSeconds", secs(wait_backoff_base));
    check("WaitBackoffMaxSeconds", secs(wait_backoff_max));
    check("MaxWaitSeconds", secs(max_wait));
    check("ReaperIntervalSeconds", secs(reaper_interval));
    check("SettleRetryMaxSeconds", secs(settle_retry_max));
    check("MaxUnsettledSeconds", secs(max_unsettled));
    check("ReaperPassBudgetSeconds", secs(reaper_pass_budget));
    check("DeliveryBackoffBaseSeconds", secs(delivery_backoff_base));
    check("DeliveryBackoffMaxSeconds", secs(delivery_backoff_max));
    check("ReadTtlMillis", read_ttl.as_millis() as u64);
    check("InstanceCacheMillis", instance_cache_ttl.as_millis() as u64);
    check("BreakerWindowSeconds", secs(breaker_window));
    check("BreakerMinCalls", u64::from(breaker_min_calls));
    check("BreakerFailurePercent", u64::from(breaker_failure_percent));
    check("BreakerOpenSeconds", secs(breaker_open_interval));
    check(
        "BreakerConsecutiveFailures",
        u64::from(breaker_consecutive_failures),
    );
    check("RetryAfterMaxSeconds", secs(retry_after_max));
    check("ReadFailureMaxSeconds", secs(read_failure_max));
    check("RateLimitRequests", u64::from(rate_limit_requests));
    check("RateLimitWindowSeconds", secs(rate_limit_window));

    // The queue's numbers (also checked against the queue resource below).
    let q = QueueDefinition::for_timing(&Timing::aws());
    check("QueueRetentionSeconds", secs(q.message_retention));
    check("DeadLetterRetentionSeconds", secs(q.dead_letter_retention));
    check("MaxReceiveCount", u64::from(q.max_receive_count));
    // The event queue's (a standard queue for the deliver function).
    let e = seatgate_aws::events::EventQueueDefinition::default();
    check("EventVisibilityTimeoutSeconds", secs(e.visibility_timeout));
    check("EventMaxReceiveCount", u64::from(e.max_receive_count));

    // The schedule runs at the interval the code assumes.
    let schedule = m["ReaperSchedule"].as_str().expect("ReaperSchedule");
    assert_eq!(rate_seconds(schedule), secs(reaper_interval));
    checked.insert("ReaperSchedule");

    // Function timeouts: not Timing fields (the code never sees them) but bound by it; checked
    // in `function_timeouts_keep_the_lease_invariant`.
    checked.extend([
        "ApiTimeoutSeconds",
        "RelayTimeoutSeconds",
        "ReaperTimeoutSeconds",
        "DeliverTimeoutSeconds",
    ]);
    let keys: BTreeSet<&str> = m.keys().map(String::as_str).collect();
    assert_eq!(
        keys, checked,
        "every Mappings.Timing.Aws key is compared with the code"
    );
}

/// The quoted `PREFIX...` names in a source file.
fn quoted_names(source: &str, prefix: &str) -> BTreeSet<String> {
    source
        .split('"')
        .skip(1)
        .step_by(2)
        .filter(|s| {
            s.starts_with(prefix)
                && s.chars()
                    .all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit())
        })
        .map(str::to_owned)
        .collect()
}

fn global_env() -> &'static serde_json::Map<String, Value> {
    template()["Globals"]["Function"]["Environment"]["Variables"]
        .as_object()
        .expect("Globals.Function.Environment.Variables")
}

/// The `TIMING_*` variables as the functions receive them, values resolved.
fn template_timing_env() -> BTreeMap<String, String> {
    global_env()
        .iter()
        .filter(|(k, _)| k.starts_with("TIMING_"))
        .map(|(k, v)| (k.clone(), resolve_int(v).to_string()))
        .collect()
}

#[test]
fn the_template_passes_every_variable_the_code_reads() {
    let read = quoted_names(include_str!("../../core/src/config.rs"), "TIMING_");
    assert!(
        read.len() >= 12,
        "found the TIMING_* names in config.rs: {read:?}"
    );
    let passed: BTreeSet<String> = template_timing_env().into_keys().collect();
    assert_eq!(
        passed, read,
        "TIMING_* variables in Globals.Function.Environment vs those config.rs reads"
    );
    // And every variable lambda.rs reads is set for the functions.
    let source = include_str!("../src/lambda.rs");
    let wired: BTreeSet<String> = source
        .split("var(\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .map(str::to_owned)
        .collect();
    assert!(wired.contains("TABLE_NAME"), "{wired:?}");
    for name in wired {
        let set_somewhere = global_env().contains_key(&name)
            || FUNCTIONS
                .iter()
                .any(|(f, _, _)| props(f)["Environment"]["Variables"].get(&name).is_some());
        assert!(set_somewhere, "lambda.rs reads {name}; no function gets it");
    }
}

const TIMING_CHILD: &str = "SEATGATE_TEMPLATE_TIMING_CHILD";

/// Runs `Timing::from_env` over exactly the template's variables, in a child process (setting
/// variables here would race with other tests reading the environment).
#[test]
fn timing_from_the_template_environment_is_timing_aws() {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child.args([
        "--exact",
        "timing_child_reads_the_template_environment",
        "--test-threads=1",
        "--nocapture",
    ]);
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("TIMING_")) {
        child.env_remove(k);
    }
    child.envs(template_timing_env()).env(TIMING_CHILD, "1");
    let out = child.output().expect("run the test binary again");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The child half of the test above; does nothing unless started by it.
#[test]
fn timing_child_reads_the_template_environment() {
    if std::env::var_os(TIMING_CHILD).is_none() {
        return;
    }
    assert_eq!(Timing::from_env(Timing::aws()).unwrap(), Timing::aws());
}

#[test]
fn function_timeouts_keep_the_lease_invariant() {
    let t = Timing::aws();
    let timeout = |f: &str| resolve_int(&props(f)["Timeout"]);
    let worker = timeout("WorkerFunction");
    assert_eq!(
        worker,
        secs(t.worker_timeout),
        "the worker's Timeout is the worker timeout the lease is built from"
    );
    let lease = resolve_int(&timing_mapping()["LeaseSeconds"]);
    assert!(
        lease > worker + secs(t.upstream_timeout),
        "lease {lease} s must exceed worker timeout {worker} s + upstream timeout"
    );
    assert_eq!(lease, secs(t.lease()));
    let visibility = resolve_int(&props("SeatQueue")["VisibilityTimeout"]);
    assert!(
        visibility >= 6 * worker,
        "visibility timeout {visibility} s < 6 x worker Timeout {worker} s"
    );
    // The functions that call the upstream outlive one upstream call.
    for f in ["WorkerFunction", "ReaperFunction"] {
        assert!(timeout(f) > secs(t.upstream_timeout), "{f}");
    }
    // The event queue hides a message for at least 6x the deliver function's timeout (AWS's
    // guidance for SQS event sources), as the seat queue does for the worker.
    let deliver = timeout("DeliverFunction");
    let event_visibility = resolve_int(&props("EventQueue")["VisibilityTimeout"]);
    assert!(
        event_visibility >= 6 * deliver,
        "event queue visibility {event_visibility} s < 6 x deliver Timeout {deliver} s"
    );
    assert_eq!(
        resolve_int(&props("EventQueue")["RedrivePolicy"]["maxReceiveCount"]),
        u64::from(seatgate_aws::events::EVENT_MAX_RECEIVE_COUNT)
    );
    // A reaper pass stops starting work well inside its function's timeout: the last calls it
    // started (each bounded by the upstream timeout) still end before the function is killed.
    let reaper = timeout("ReaperFunction");
    assert!(
        2 * secs(t.reaper_pass_budget) <= reaper,
        "pass budget {:?} is not well inside the reaper Timeout {reaper} s",
        t.reaper_pass_budget
    );
    assert!(t.reaper_pass_budget > t.upstream_timeout);
    // A due intent is requeued only after its lease could have been settled.
    assert!(t.requeue_after > t.lease() + t.reaper_grace);
    // The reaper's schedule is the one in the mapping.
    let schedule = &props("ReaperFunction")["Events"]["Every"]["Properties"]["ScheduleExpression"];
    assert_eq!(resolve(schedule), timing_mapping()["ReaperSchedule"]);
}

// ---------------------------------------------------------------------------------------------
// Queue and table
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Load caps
// ---------------------------------------------------------------------------------------------

/// Lambda's default regional concurrency quota, and what this stack leaves for the functions
/// that must keep running under a flood of requests (relay, reaper, deliver).
const ACCOUNT_CONCURRENCY: u64 = 1000;
const HEADROOM_FOR_THE_PIPELINE: u64 = 100;

/// A `Number` parameter's bounds and default, checked to be consistent.
struct NumberParameter {
    default: f64,
    min: f64,
    max: f64,
}

fn number_parameter(name: &str) -> NumberParameter {
    let p = &template()["Parameters"][name];
    assert_eq!(p["Type"], "Number", "Parameters.{name}");
    let field = |key: &str| {
        p[key]
            .as_f64()
            .unwrap_or_else(|| panic!("Parameters.{name}.{key} is not a number: {}", p[key]))
    };
    let (default, min, max) = (field("Default"), field("MinValue"), field("MaxValue"));
    assert!(
        min <= default && default <= max,
        "Parameters.{name}: default {default} outside {min}..={max}"
    );
    NumberParameter { default, min, max }
}

fn parameter_ref(v: &Value) -> &str {
    v.get("Ref")
        .and_then(Value::as_str)
        .filter(|name| template()["Parameters"].get(*name).is_some())
        .unwrap_or_else(|| panic!("{v} is not a Ref to a template parameter"))
}

#[test]
fn the_worker_is_capped_by_one_parameter_inside_what_aws_accepts() {
    let worker = props("WorkerFunction");
    let events = worker["Events"].as_object().expect("WorkerFunction.Events");
    // Reserved concurrency must cover the MaximumConcurrency of every SQS mapping on the
    // function; with one mapping that is its own.
    assert_eq!(
        events.len(),
        1,
        "the worker has one event source: {events:?}"
    );
    let mapping = &events["SeatQueueEvent"];
    assert_eq!(mapping["Type"], "SQS");
    assert_eq!(
        mapping["Properties"]["Queue"],
        json!({"Fn::GetAtt": ["SeatQueue", "Arn"]})
    );
    let maximum = parameter_ref(&mapping["Properties"]["ScalingConfig"]["MaximumConcurrency"]);
    let reserved = parameter_ref(&worker["ReservedConcurrentExecutions"]);
    // Reserved below the mapping's maximum throttles batches, which spends their receive counts
    // towards the dead-letter queue. CloudFormation cannot compare two parameters at deploy
    // time, so the only way to keep reserved >= maximum for every deployment is one parameter.
    assert_eq!(
        reserved, maximum,
        "ReservedConcurrentExecutions and ScalingConfig.MaximumConcurrency must be one parameter"
    );
    let cap = number_parameter(maximum);
    assert!(
        cap.min >= 2.0 && cap.max <= 1000.0,
        "MaximumConcurrency must be within 2..=1000 (AWS), not {}..={}",
        cap.min,
        cap.max
    );
    assert_eq!(cap.default.fract(), 0.0, "a whole number of batches");
    // The upstream's load: at most BatchSize seats per batch, one reserve in flight each.
    let batch = resolve_int(&mapping["Properties"]["BatchSize"]);
    assert!(
        batch <= 10,
        "a FIFO queue's mapping takes at most 10 per batch"
    );
    let reserves_in_flight = batch * cap.default as u64;
    assert!(
        reserves_in_flight <= 100,
        "the default caps reserves in flight at {reserves_in_flight}: a fragile upstream needs fewer"
    );
    // A throttle would mean the caps drifted apart; it pages.
    let alarm = props("WorkerThrottlesAlarm");
    assert_eq!(
        (&alarm["Namespace"], &alarm["MetricName"]),
        (&json!("AWS/Lambda"), &json!("Throttles"))
    );
    assert_eq!(
        alarm["Dimensions"],
        json!([{"Name": "FunctionName", "Value": {"Ref": "WorkerFunction"}}])
    );
    assert_eq!(alarm["Threshold"], json!(0));
    // At the cap the mapping stops receiving, so waiting messages spend no receive count and the
    // visibility timeout still only has to outlast a batch (6x, as AWS advises).
    let visibility = resolve_int(&props("SeatQueue")["VisibilityTimeout"]);
    assert!(visibility >= 6 * resolve_int(&worker["Timeout"]));
}

#[test]
fn the_http_api_is_throttled_within_the_accounts_concurrency() {
    let api = props("SeatgateHttpApi");
    let settings = &api["DefaultRouteSettings"];
    let rate = number_parameter(parameter_ref(&settings["ThrottlingRateLimit"]));
    let burst = number_parameter(parameter_ref(&settings["ThrottlingBurstLimit"]));
    assert!(
        rate.min > 0.0 && burst.min >= 1.0,
        "throttling to zero is an outage"
    );
    // API Gateway's default account-level quotas; a stage cannot admit more.
    assert!(rate.max <= 10_000.0 && burst.max <= 5_000.0);
    assert_eq!(
        burst.default.fract(),
        0.0,
        "ThrottlingBurstLimit is an integer"
    );
    // No route is throttled differently behind the stage's back.
    assert!(api.get("RouteSettings").is_none());
    // A token bucket admits at most burst + rate x t requests in any t seconds, and an API
    // invocation lasts at most the API function's timeout: that bounds the API's concurrency.
    // With the worker's reservation it must leave the relay, reaper and deliverer room to run,
    // or a flood of requests would stall the pipeline it feeds.
    let api_timeout = resolve_int(&props("ApiFunction")["Timeout"]) as f64;
    let api_worst = burst.default + rate.default * api_timeout;
    let worker = number_parameter(parameter_ref(
        &props("WorkerFunction")["ReservedConcurrentExecutions"],
    ));
    let used = api_worst + worker.default;
    assert!(
        used + HEADROOM_FOR_THE_PIPELINE as f64 <= ACCOUNT_CONCURRENCY as f64,
        "default throttling admits up to {api_worst} concurrent API invocations; with the \
         worker's {} that leaves under {HEADROOM_FOR_THE_PIPELINE} of {ACCOUNT_CONCURRENCY}",
        worker.default
    );
    // One user inside the per-user limit must not be able to take the whole stage, or the
    // stage's 429s would fall on everyone else. A fixed window lets a user send twice its limit
    // across a window boundary, on each limited route.
    use seatgate::domain::LimitedRoute;
    let routes = [
        LimitedRoute::Confirm,
        LimitedRoute::Wait,
        LimitedRoute::Book,
    ];
    for route in routes {
        // Exhaustive: a new limited route does not compile until it is counted here.
        match route {
            LimitedRoute::Confirm | LimitedRoute::Wait | LimitedRoute::Book => {}
        }
    }
    let t = Timing::aws();
    let per_user = f64::from(t.rate_limit_requests) * routes.len() as f64;
    assert!(
        2.0 * per_user < burst.default,
        "one user may send {} limited requests at once; the stage's burst is {}",
        2.0 * per_user,
        burst.default
    );
    assert!(
        per_user / t.rate_limit_window.as_secs_f64() < rate.default,
        "one user's sustained limited rate reaches the stage's"
    );
}

// ---------------------------------------------------------------------------------------------
// Alarms and the dashboard
// ---------------------------------------------------------------------------------------------

fn resources_of_type(kind: &str) -> Vec<(&'static str, &'static Value)> {
    template()["Resources"]
        .as_object()
        .expect("Resources")
        .iter()
        .filter(|(_, r)| r["Type"] == kind)
        .map(|(name, r)| (name.as_str(), r))
        .collect()
}

/// Each function binary's `main.rs`, whose `lambda::init(..)` names the `service` dimension its
/// metrics carry.
const FUNCTION_MAINS: [(&str, &str); 5] = [
    ("api", include_str!("../../../functions/api/src/main.rs")),
    (
        "relay",
        include_str!("../../../functions/relay/src/main.rs"),
    ),
    (
        "worker",
        include_str!("../../../functions/worker/src/main.rs"),
    ),
    (
        "reaper",
        include_str!("../../../functions/reaper/src/main.rs"),
    ),
    (
        "deliver",
        include_str!("../../../functions/deliver/src/main.rs"),
    ),
];

/// The `service` dimension's values: each function's binary, which names itself so in its
/// `main` whatever the deployed function is called.
fn services() -> BTreeSet<&'static str> {
    FUNCTIONS
        .iter()
        .map(|(f, _, _)| {
            let binary = resource(f)["Metadata"]["BuildProperties"]["Binary"]
                .as_str()
                .unwrap_or_else(|| panic!("{f}: Metadata.BuildProperties.Binary"));
            let (_, main) = FUNCTION_MAINS
                .iter()
                .find(|(b, _)| *b == binary)
                .unwrap_or_else(|| panic!("{f} builds {binary}, not a function crate here"));
            assert!(
                main.contains(&format!("lambda::init(\"{binary}\")")),
                "functions/{binary}/src/main.rs does not emit its metrics as service {binary}"
            );
            binary
        })
        .collect()
}

/// A dimension value in one spelling for alarms and the dashboard: a literal as is, `!Ref X` and
/// `${X}` as `<X>`, `!GetAtt X.A` and `${X.A}` as `<X.A>`.
fn dimension_value(v: &Value) -> String {
    if let Some(s) = v.as_str() {
        return s.to_owned();
    }
    if let Some(r) = v.get("Ref").and_then(Value::as_str) {
        return format!("<{r}>");
    }
    if let Some(parts) = v.get("Fn::GetAtt").and_then(Value::as_array) {
        let parts: Vec<&str> = parts.iter().filter_map(Value::as_str).collect();
        return format!("<{}>", parts.join("."));
    }
    panic!("unexpected dimension value {v}");
}

/// One metric an alarm or a dashboard widget names. A dimension's value is `None` where a
/// `SEARCH` leaves it open.
#[derive(Debug, Clone)]
struct MetricUse {
    at: String,
    namespace: String,
    name: String,
    dimensions: BTreeMap<String, Option<String>>,
}

/// The AWS metrics this stack watches, as those services publish them: namespace, metric
/// names, the dimension naming the resource (and its resource type and attribute), other
/// dimensions allowed.
type AwsMetrics = (
    &'static str,
    &'static [&'static str],
    &'static str,
    &'static str,
    Option<&'static str>,
    &'static [&'static str],
);
const AWS_METRICS: &[AwsMetrics] = &[
    (
        "AWS/Lambda",
        &[
            "Errors",
            "Throttles",
            "IteratorAge",
            "Invocations",
            "Duration",
            "ConcurrentExecutions",
        ],
        "FunctionName",
        "AWS::Serverless::Function",
        None,
        &[],
    ),
    (
        "AWS/SQS",
        &[
            "ApproximateNumberOfMessagesVisible",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateAgeOfOldestMessage",
            "NumberOfMessagesSent",
            "NumberOfMessagesDeleted",
        ],
        "QueueName",
        "AWS::SQS::Queue",
        Some("QueueName"),
        &[],
    ),
    (
        "AWS/DynamoDB",
        &[
            "ThrottledRequests",
            "ConsumedReadCapacityUnits",
            "ConsumedWriteCapacityUnits",
            "SystemErrors",
        ],
        "TableName",
        "AWS::DynamoDB::Table",
        None,
        &["Operation"],
    ),
    (
        "AWS/ApiGateway",
        &["Count", "4xx", "5xx", "Latency", "IntegrationLatency"],
        "ApiId",
        "AWS::Serverless::HttpApi",
        None,
        &["Stage"],
    ),
];

/// The log lines the code writes that a metric filter may count, and the log group of the
/// function that writes each.
fn code_log_lines() -> [(&'static str, &'static str); 1] {
    [(seatgate::service::reaper::OVERDUE_MESSAGE, "ReaperLogGroup")]
}

/// Metrics made by the template's log metric filters, each tied to a line the code logs:
/// `(namespace, name) -> dimension names`.
fn log_filter_metrics() -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut made = BTreeMap::new();
    for (name, filter) in resources_of_type("AWS::Logs::MetricFilter") {
        let p = &filter["Properties"];
        let pattern = p["FilterPattern"]
            .as_str()
            .expect("a literal FilterPattern");
        let (_, group) = code_log_lines()
            .into_iter()
            .find(|(line, _)| pattern == format!("\"{line}\""))
            .unwrap_or_else(|| panic!("{name}: {pattern} matches no line the code logs"));
        assert_eq!(p["LogGroupName"], json!({"Ref": group}), "{name}");
        for t in p["MetricTransformations"]
            .as_array()
            .expect("MetricTransformations")
        {
            let metric = t["MetricName"].as_str().expect("a literal MetricName");
            assert!(
                seatgate::metrics::Metric::named(metric).is_none(),
                "{name}: {metric} is also an EMF metric; one name, one source"
            );
            let dims = t["Dimensions"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|d| d["Key"].as_str().expect("a dimension key").to_owned())
                .collect();
            made.insert(
                (
                    t["MetricNamespace"].as_str().unwrap().to_owned(),
                    metric.to_owned(),
                ),
                dims,
            );
        }
    }
    made
}

/// Panics unless `m` is a metric some code emits: a `seatgate::metrics` metric with exactly the
/// dimensions it is emitted with (CloudWatch keeps one series per dimension set, so a subset
/// names a metric with no data), a log filter's, or one from [`AWS_METRICS`] on a resource of
/// this template.
fn check_emitted(m: &MetricUse) {
    let at = &m.at;
    let names: BTreeSet<&str> = m.dimensions.keys().map(String::as_str).collect();
    if m.namespace == seatgate::metrics::NAMESPACE {
        if let Some(metric) = seatgate::metrics::Metric::named(&m.name) {
            let mut emitted: BTreeSet<&str> = metric.dimensions().iter().copied().collect();
            emitted.insert(seatgate::metrics::SERVICE_DIMENSION);
            assert_eq!(
                names, emitted,
                "{at}: {} is emitted with dimensions {emitted:?}",
                m.name
            );
            if let Some(Some(service)) = m.dimensions.get(seatgate::metrics::SERVICE_DIMENSION) {
                assert!(
                    services().contains(service.as_str()),
                    "{at}: service {service} is none of the functions {:?}",
                    services()
                );
            }
            return;
        }
        let key = (m.namespace.clone(), m.name.clone());
        let Some(dims) = log_filter_metrics().remove(&key) else {
            panic!(
                "{at}: {}/{} is neither in seatgate::metrics nor made by a log metric filter",
                m.namespace, m.name
            );
        };
        let dims: BTreeSet<&str> = dims.iter().map(String::as_str).collect();
        assert_eq!(names, dims, "{at}: {}'s dimensions", m.name);
        return;
    }
    let Some((_, metrics, dimension, kind, attribute, others)) =
        AWS_METRICS.iter().find(|(ns, ..)| *ns == m.namespace)
    else {
        panic!(
            "{at}: namespace {} is not one this stack watches",
            m.namespace
        );
    };
    assert!(
        metrics.contains(&m.name.as_str()),
        "{at}: {} does not publish {} (known: {metrics:?})",
        m.namespace,
        m.name
    );
    for name in &names {
        assert!(
            name == dimension || others.contains(name),
            "{at}: {} has no dimension {name}",
            m.namespace
        );
    }
    let value = m
        .dimensions
        .get(*dimension)
        .cloned()
        .flatten()
        .unwrap_or_else(|| panic!("{at}: {} needs its {dimension}", m.name));
    let target = value
        .strip_prefix('<')
        .and_then(|v| v.strip_suffix('>'))
        .unwrap_or_else(|| panic!("{at}: {dimension} {value} is not one of this stack's"));
    let (resource_name, attr) = match target.split_once('.') {
        Some((r, a)) => (r, Some(a)),
        None => (target, None),
    };
    assert_eq!(
        resource(resource_name)["Type"],
        *kind,
        "{at}: {dimension} names {resource_name}"
    );
    assert_eq!(attr, *attribute, "{at}: {dimension} of {resource_name}");
}

/// The metric an alarm watches (the single-metric form, or each `MetricStat` of the `Metrics`
/// form, whose expressions may only combine those).
fn alarm_metrics(name: &str, alarm: &Value) -> Vec<MetricUse> {
    let p = &alarm["Properties"];
    let dims = |d: &Value| -> BTreeMap<String, Option<String>> {
        d.as_array()
            .into_iter()
            .flatten()
            .map(|d| {
                let key = d["Name"].as_str().expect("a literal dimension name");
                (key.to_owned(), Some(dimension_value(&d["Value"])))
            })
            .collect()
    };
    let Some(queries) = p["Metrics"].as_array() else {
        return vec![MetricUse {
            at: name.to_owned(),
            namespace: p["Namespace"].as_str().expect("Namespace").to_owned(),
            name: p["MetricName"].as_str().expect("MetricName").to_owned(),
            dimensions: dims(&p["Dimensions"]),
        }];
    };
    let ids: BTreeSet<&str> = queries.iter().filter_map(|q| q["Id"].as_str()).collect();
    let mut found = Vec::new();
    for q in queries {
        if let Some(expression) = q["Expression"].as_str() {
            check_math(name, expression, &ids);
            continue;
        }
        let m = &q["MetricStat"]["Metric"];
        found.push(MetricUse {
            at: name.to_owned(),
            namespace: m["Namespace"].as_str().expect("Namespace").to_owned(),
            name: m["MetricName"].as_str().expect("MetricName").to_owned(),
            dimensions: dims(&m["Dimensions"]),
        });
    }
    found
}

/// A metric math expression without SEARCH may only name other queries of its widget or alarm
/// (lower-case ids) and functions (upper case).
fn check_math(at: &str, expression: &str, ids: &BTreeSet<&str>) {
    for word in expression
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with(|c: char| c.is_ascii_lowercase()))
    {
        assert!(
            ids.contains(word),
            "{at}: {expression} names {word}, no query of its own"
        );
    }
}

/// The metrics each `SEARCH('{Namespace,dim,...} MetricName="X" dim="v"', ...)` in an
/// expression finds; panics on a search this check cannot read (keep them that simple).
fn searches(at: &str, expression: &str) -> Vec<MetricUse> {
    let mut found = Vec::new();
    for rest in expression.split("SEARCH(").skip(1) {
        let query = rest
            .trim_start()
            .strip_prefix('\'')
            .and_then(|q| q.split_once('\''))
            .map(|(q, _)| q)
            .unwrap_or_else(|| panic!("{at}: SEARCH without a quoted query in {expression}"));
        let (schema, terms) = query
            .trim()
            .strip_prefix('{')
            .and_then(|q| q.split_once('}'))
            .unwrap_or_else(|| panic!("{at}: SEARCH query without a {{schema}}: {query}"));
        let mut schema = schema.split(',').map(|s| s.trim().trim_matches('"'));
        let namespace = schema.next().expect("a namespace").to_owned();
        let mut dimensions: BTreeMap<String, Option<String>> =
            schema.map(|d| (d.to_owned(), None)).collect();
        let mut name = None;
        for term in terms.split_whitespace() {
            let (key, value) = term
                .split_once('=')
                .unwrap_or_else(|| panic!("{at}: SEARCH term {term} is not key=value"));
            let value = value.trim_matches('"').to_owned();
            if key == "MetricName" {
                name = Some(value);
            } else {
                let slot = dimensions
                    .get_mut(key)
                    .unwrap_or_else(|| panic!("{at}: {key} is not in the schema of {query}"));
                *slot = Some(value);
            }
        }
        found.push(MetricUse {
            at: at.to_owned(),
            namespace,
            name: name.unwrap_or_else(|| panic!("{at}: SEARCH without MetricName: {query}")),
            dimensions,
        });
    }
    found
}

/// The dashboard's body as JSON, with every `${X}` substitution written `<X>` (each checked to
/// name a resource, a resource's attribute, a parameter or a pseudo parameter).
fn dashboard_body() -> Value {
    let dashboards = resources_of_type("AWS::CloudWatch::Dashboard");
    assert_eq!(dashboards.len(), 1, "one dashboard");
    let body = &dashboards[0].1["Properties"]["DashboardBody"]["Fn::Sub"];
    let text = body
        .as_str()
        .or_else(|| body[0].as_str())
        .expect("DashboardBody is a !Sub of a JSON string");
    let mut resolved = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        resolved.push_str(&rest[..start]);
        let (name, after) = rest[start + 2..]
            .split_once('}')
            .expect("a closed ${...} in the dashboard body");
        let base = name.split('.').next().unwrap();
        assert!(
            name.starts_with("AWS::")
                || template()["Resources"].get(base).is_some()
                || template()["Parameters"].get(name).is_some(),
            "the dashboard substitutes ${{{name}}}, which the template does not define"
        );
        resolved.push_str(&format!("<{name}>"));
        rest = after;
    }
    resolved.push_str(rest);
    serde_json::from_str(&resolved)
        .unwrap_or_else(|e| panic!("the dashboard body is not JSON: {e}\n{resolved}"))
}

/// Each widget's title and the metrics it shows (the metric-math ids it defines checked too).
fn dashboard_widgets() -> Vec<(String, Vec<MetricUse>, Vec<String>)> {
    let body = dashboard_body();
    let widgets = body["widgets"].as_array().expect("widgets");
    let mut all = Vec::new();
    for (i, w) in widgets.iter().enumerate() {
        let p = &w["properties"];
        let title = p["title"].as_str().unwrap_or("(untitled)");
        let at = format!("dashboard widget {i} ({title})");
        assert_eq!(w["type"], "metric", "{at}: every widget shows metrics");
        assert_eq!(p["region"], "<AWS::Region>", "{at}: the stack's region");
        let entries = p["metrics"].as_array().expect("metrics");
        assert!(!entries.is_empty(), "{at}: no metrics");
        let ids: BTreeSet<&str> = entries.iter().filter_map(|e| e[0]["id"].as_str()).collect();
        let mut found = Vec::new();
        let mut expressions = Vec::new();
        for entry in entries {
            let parts = entry.as_array().expect("a metrics entry is an array");
            if let Some(expression) = parts[0]["expression"].as_str() {
                let s = searches(&at, expression);
                if s.is_empty() {
                    check_math(&at, expression, &ids);
                }
                expressions.push(expression.to_owned());
                found.extend(s);
                continue;
            }
            // [namespace, name, (dimension, value)*, {options}?], spelt out ("." repeats the
            // entry above in CloudWatch's shorthand, which this check does not follow).
            let strings: Vec<&str> = parts
                .iter()
                .filter(|v| !v.is_object())
                .map(|v| v.as_str().expect("metric parts are strings"))
                .collect();
            assert!(
                strings.len() >= 2 && strings.len().is_multiple_of(2) && !strings.contains(&"."),
                "{at}: {entry} is not [namespace, name, dimension, value, ...]"
            );
            found.push(MetricUse {
                at: at.clone(),
                namespace: strings[0].to_owned(),
                name: strings[1].to_owned(),
                dimensions: strings[2..]
                    .chunks(2)
                    .map(|kv| (kv[0].to_owned(), Some(kv[1].to_owned())))
                    .collect(),
            });
        }
        assert!(!found.is_empty(), "{at}: names no metric");
        all.push((title.to_owned(), found, expressions));
    }
    all
}

#[test]
fn every_alarm_and_dashboard_widget_names_a_metric_some_code_emits() {
    assert_eq!(
        services(),
        BTreeSet::from(["api", "deliver", "reaper", "relay", "worker"]),
        "the service dimension's values are the functions' binaries"
    );
    let alarms = resources_of_type("AWS::CloudWatch::Alarm");
    assert!(alarms.len() >= 10, "{} alarms", alarms.len());
    for (name, alarm) in alarms {
        let metrics = alarm_metrics(name, alarm);
        assert!(!metrics.is_empty(), "{name} watches no metric");
        metrics.iter().for_each(check_emitted);
        // Every alarm reaches the on-call topic when there is one.
        assert_eq!(
            alarm["Properties"]["AlarmActions"],
            json!({"Fn::If": ["HasAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]}),
            "{name}"
        );
    }
    for (_, metrics, _) in dashboard_widgets() {
        metrics.iter().for_each(check_emitted);
    }
    // The checks bite: a name the code does not emit, or a dimension it does not carry.
    let caught = |m: MetricUse| std::panic::catch_unwind(|| check_emitted(&m)).is_err();
    let seatgate = |name: &str, dims: &[&str]| MetricUse {
        at: "a drifted reference".into(),
        namespace: "Seatgate".into(),
        name: name.into(),
        dimensions: dims.iter().map(|d| (d.to_string(), None)).collect(),
    };
    assert!(caught(seatgate(
        "UpstreamCall",
        &["service", "route", "outcome"]
    )));
    assert!(caught(seatgate("UpstreamCalls", &["service", "route"])));
    assert!(caught(seatgate(
        "UpstreamCalls",
        &["service", "route", "outcome", "seat"]
    )));
    assert!(!caught(seatgate(
        "UpstreamCalls",
        &["service", "route", "outcome"]
    )));
}

/// An alarm on one metric of one resource, by its namespace, name and dimension value.
fn alarm_on(namespace: &str, metric: &str, dimension: (&str, &str)) -> &'static Value {
    let found: Vec<_> = resources_of_type("AWS::CloudWatch::Alarm")
        .into_iter()
        .filter(|(name, a)| {
            alarm_metrics(name, a).iter().any(|m| {
                m.namespace == namespace
                    && m.name == metric
                    && m.dimensions.get(dimension.0) == Some(&Some(dimension.1.to_owned()))
            })
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one alarm on {namespace} {metric} {dimension:?}, found {:?}",
        found.iter().map(|(n, _)| n).collect::<Vec<_>>()
    );
    &found[0].1["Properties"]
}

fn threshold(alarm: &Value) -> u64 {
    alarm["Threshold"].as_u64().expect("a whole threshold")
}

/// How long a breach must last before the alarm fires, in seconds.
fn time_to_fire(alarm: &Value) -> u64 {
    let points = alarm
        .get("DatapointsToAlarm")
        .unwrap_or(&alarm["EvaluationPeriods"]);
    points.as_u64().unwrap() * alarm["Period"].as_u64().unwrap()
}

#[test]
fn the_alarms_an_operator_needs_are_there_at_thresholds_the_timing_allows() {
    let t = Timing::aws();
    let relay = alarm_on(
        "AWS/Lambda",
        "IteratorAge",
        ("FunctionName", "<RelayFunction>"),
    );
    // A relay this far behind must page before the reaper takes unrelayed intents for lost.
    let iterator_age_secs = threshold(relay) / 1000;
    assert!(
        iterator_age_secs + time_to_fire(relay) < secs(t.requeue_after),
        "the iterator-age alarm fires after the reaper starts requeueing"
    );
    assert!(
        iterator_age_secs >= secs(t.upstream_timeout),
        "IteratorAge is in milliseconds: {}",
        threshold(relay)
    );
    let oldest = alarm_on(
        "AWS/SQS",
        "ApproximateAgeOfOldestMessage",
        ("QueueName", "<SeatQueue.QueueName>"),
    );
    // A seat's line may rightly wait out a dead worker's visibility timeout and then a reaper
    // pass before moving; it must page before the reaper starts requeueing what looks lost.
    assert!(
        threshold(oldest) >= secs(t.visibility_timeout) + secs(t.reaper_interval),
        "the oldest-message alarm pages on a line waiting out a dead worker"
    );
    assert!(threshold(oldest) + time_to_fire(oldest) < secs(t.requeue_after));
    for metric in ["Errors", "Throttles"] {
        let a = alarm_on("AWS/Lambda", metric, ("FunctionName", "<WorkerFunction>"));
        assert_eq!(threshold(a), 0, "worker {metric}");
    }
    assert_eq!(
        threshold(alarm_on(
            "AWS/Lambda",
            "Errors",
            ("FunctionName", "<ReaperFunction>")
        )),
        0
    );
    let unsettled = alarm_on("Seatgate", "UnsettledPastMax", ("service", "reaper"));
    assert_eq!(threshold(unsettled), 0);
    // Kept beside it: the filter on the reaper's log line (checked in
    // `the_unsettled_attempts_alarm_counts_the_reapers_own_log_line`).
    assert_eq!(
        resource("UnsettledAttemptsMetric")["Type"],
        "AWS::Logs::MetricFilter"
    );
    // Every dead-letter place pages on its first message.
    for queue in [
        "SeatDeadLetterQueue",
        "EventDeadLetterQueue",
        "RelayFailureQueue",
    ] {
        let a = alarm_on(
            "AWS/SQS",
            "ApproximateNumberOfMessagesVisible",
            ("QueueName", &format!("<{queue}.QueueName>")),
        );
        assert_eq!(threshold(a), 0, "{queue}");
        assert_eq!(a["ComparisonOperator"], "GreaterThanThreshold", "{queue}");
    }
    for (_, a) in resources_of_type("AWS::CloudWatch::Alarm") {
        // An idle stack has no data points; quiet is not an alarm.
        assert_eq!(a["Properties"]["TreatMissingData"], "notBreaching");
    }
}

#[test]
fn the_dashboard_shows_every_metric_the_code_emits_and_the_pipelines_health() {
    let widgets = dashboard_widgets();
    let shown: BTreeSet<(String, String)> = widgets
        .iter()
        .flat_map(|(_, metrics, _)| metrics)
        .map(|m| (m.namespace.clone(), m.name.clone()))
        .collect();
    for metric in seatgate::metrics::Metric::ALL {
        assert!(
            shown.contains(&("Seatgate".to_owned(), metric.name().to_owned())),
            "{} is emitted but on no widget",
            metric.name()
        );
    }
    // The headline: reserve POSTs divided by settled attempts, in one widget.
    let ratio = widgets
        .iter()
        .find(|(_, metrics, expressions)| {
            metrics.iter().any(|m| m.name == "ReservePosts")
                && metrics.iter().any(|m| m.name == "AttemptsSettled")
                && expressions.iter().any(|e| e.contains('/'))
        })
        .expect("a widget dividing ReservePosts by AttemptsSettled");
    assert!(ratio.0.contains("per settled attempt"), "{}", ratio.0);
    let on = |namespace: &str, name: &str, dimension: &str, value: &str| {
        widgets.iter().flat_map(|(_, m, _)| m).any(|m| {
            m.namespace == namespace
                && m.name == name
                && m.dimensions.get(dimension) == Some(&Some(value.to_owned()))
        })
    };
    for (_, queue) in resources_of_type("AWS::SQS::Queue")
        .into_iter()
        .map(|(name, _)| ((), name))
    {
        assert!(
            on(
                "AWS/SQS",
                "ApproximateNumberOfMessagesVisible",
                "QueueName",
                &format!("<{queue}.QueueName>")
            ),
            "{queue}'s depth is on no widget"
        );
    }
    assert!(on(
        "AWS/Lambda",
        "IteratorAge",
        "FunctionName",
        "<RelayFunction>"
    ));
    assert!(on(
        "AWS/SQS",
        "ApproximateAgeOfOldestMessage",
        "QueueName",
        "<SeatQueue.QueueName>"
    ));
}

// ---------------------------------------------------------------------------------------------
// IAM: what each role grants
// ---------------------------------------------------------------------------------------------

/// A resource expression, written the way the recording names resources: `SeatQueue.Arn`,
/// `SeatgateTable.Arn/index/due`, `*`, or a parameter name for a `Ref`.
fn resource_name(v: &Value) -> String {
    if let Some(s) = v.as_str() {
        return s.to_owned();
    }
    if let Some(parts) = v.get("Fn::GetAtt").and_then(Value::as_array) {
        let parts: Vec<&str> = parts.iter().filter_map(Value::as_str).collect();
        return parts.join(".");
    }
    if let Some(s) = v.get("Fn::Sub").and_then(Value::as_str) {
        return s.replace("${", "").replace('}', "");
    }
    if let Some(s) = v.get("Ref").and_then(Value::as_str) {
        return s.to_owned();
    }
    panic!("unexpected Resource expression {v}");
}

fn strings(v: &Value) -> Vec<&Value> {
    match v {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    }
}

type Grants = BTreeSet<(String, String)>;

/// One role's grants: unconditional ones, and those under a template condition (by name).
#[derive(Debug, Default)]
struct RoleGrants {
    always: Grants,
    conditional: BTreeMap<String, Grants>,
}

fn statement_grants(statement: &Value, into: &mut Grants) {
    assert_eq!(statement["Effect"], "Allow", "{statement}");
    for key in ["NotAction", "NotResource", "Principal"] {
        assert!(statement.get(key).is_none(), "{key} in {statement}");
    }
    for action in strings(&statement["Action"]) {
        let action = action.as_str().expect("literal actions");
        for r in strings(&statement["Resource"]) {
            into.insert((action.to_owned(), resource_name(r)));
        }
    }
}

fn role_grants(role: &str) -> RoleGrants {
    let p = props(role);
    assert!(
        p.get("ManagedPolicyArns").is_none(),
        "{role}: inline statements only"
    );
    let mut grants = RoleGrants::default();
    for policy in p["Policies"].as_array().expect("Policies") {
        for statement in policy["PolicyDocument"]["Statement"]
            .as_array()
            .expect("Statement list")
        {
            match statement.get("Fn::If").and_then(Value::as_array) {
                Some(branches) => {
                    let condition = branches[0].as_str().expect("condition name").to_owned();
                    assert_eq!(
                        branches[2],
                        json!({"Ref": "AWS::NoValue"}),
                        "{role}: a conditional statement grants nothing otherwise"
                    );
                    statement_grants(
                        &branches[1],
                        grants.conditional.entry(condition).or_default(),
                    );
                }
                None => statement_grants(statement, &mut grants.always),
            }
        }
    }
    grants
}

const FUNCTIONS: [(&str, &str, &str); 5] = [
    ("ApiFunction", "ApiRole", "ApiLogGroup"),
    ("RelayFunction", "RelayRole", "RelayLogGroup"),
    ("WorkerFunction", "WorkerRole", "WorkerLogGroup"),
    ("ReaperFunction", "ReaperRole", "ReaperLogGroup"),
    ("DeliverFunction", "DeliverRole", "DeliverLogGroup"),
];

#[test]
fn each_function_runs_with_its_own_role_and_log_group() {
    for (function, role, logs) in FUNCTIONS {
        let p = props(function);
        assert_eq!(
            p["Role"],
            json!({"Fn::GetAtt": [role, "Arn"]}),
            "{function}"
        );
        assert_eq!(
            p["LoggingConfig"]["LogGroup"],
            json!({"Ref": logs}),
            "{function}"
        );
        assert!(
            p.get("Policies").is_none(),
            "{function}: no SAM policies beside the role"
        );
        assert_eq!(
            resource(role)["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"],
            json!({"Service": "lambda.amazonaws.com"})
        );
    }
}

/// The alarm on attempts unsettled past their maximum age counts the very line the reaper logs.
#[test]
fn the_unsettled_attempts_alarm_counts_the_reapers_own_log_line() {
    let filter = props("UnsettledAttemptsMetric");
    assert_eq!(filter["LogGroupName"], json!({"Ref": "ReaperLogGroup"}));
    let pattern = filter["FilterPattern"].as_str().expect("a literal pattern");
    assert_eq!(
        pattern,
        format!("\"{}\"", seatgate::service::reaper::OVERDUE_MESSAGE),
        "the filter must match the reaper's log line"
    );
    let metric = &filter["MetricTransformations"][0];
    let alarm = props("UnsettledAttemptsAlarm");
    assert_eq!(alarm["Namespace"], metric["MetricNamespace"]);
    assert_eq!(alarm["MetricName"], metric["MetricName"]);
    assert_eq!(alarm["Threshold"], json!(0));
}

/// One route table in effect: the HTTP API events of every function are exactly the handler's
/// `ROUTES`, method and path, and they all reach the API function. (The runner's gateway reads
/// `ROUTES` itself; `infra/local/tests/http_contract.rs` checks it and the handler serve them.)
#[test]
fn the_http_api_routes_are_the_handler_route_table() {
    let mut declared = BTreeSet::new();
    for (name, r) in template()["Resources"].as_object().expect("Resources") {
        let Some(events) = r["Properties"]["Events"].as_object() else {
            continue;
        };
        for (event, e) in events {
            if e["Type"] != "HttpApi" {
                continue;
            }
            assert_eq!(
                name, "ApiFunction",
                "{name}.{event}: only the API function serves HTTP"
            );
            let p = &e["Properties"];
            assert_eq!(p["ApiId"], json!({"Ref": "SeatgateHttpApi"}), "{event}");
            let key = format!(
                "{} {}",
                p["Method"].as_str().expect("a literal Method"),
                p["Path"].as_str().expect("a literal Path")
            );
            assert!(declared.insert(key.clone()), "{key} is declared twice");
        }
    }
    let served: BTreeSet<String> = seatgate::handlers::http::ROUTES
        .iter()
        .map(|r| r.key())
        .collect();
    assert_eq!(
        declared, served,
        "template.yaml's routes vs handlers::http::ROUTES"
    );
}

#[test]
fn every_resource_is_scoped() {
    for (_, role, _) in FUNCTIONS {
        let grants = role_grants(role);
        let all = grants
            .always
            .iter()
            .chain(grants.conditional.values().flatten());
        for (action, resource) in all {
            assert!(!action.contains('*'), "{role}: wildcard action {action}");
            if resource.contains('*') {
                assert_eq!(
                    (action.as_str(), resource.as_str()),
                    ("dynamodb:ListStreams", "*"),
                    "{role}: only ListStreams (no resource-level permissions) may use \"*\""
                );
            }
        }
    }
}

/// The resources `v` (a resource's whole definition) refers to: `Ref`, `Fn::GetAtt`, the
/// `${Name}` / `${Name.Attr}` of `Fn::Sub`, and `DependsOn`. Pseudo parameters and template
/// parameters are left out.
fn references(v: &Value, resources: &serde_json::Map<String, Value>, into: &mut BTreeSet<String>) {
    let add = |into: &mut BTreeSet<String>, name: &str| {
        if resources.contains_key(name) {
            into.insert(name.to_owned());
        }
    };
    match v {
        Value::Object(o) => {
            for (k, inner) in o {
                match (k.as_str(), inner) {
                    ("Ref", Value::String(name)) => add(into, name),
                    ("Fn::GetAtt", Value::Array(parts)) => {
                        add(into, parts[0].as_str().unwrap_or_default())
                    }
                    ("Fn::Sub", sub) => {
                        let text = match sub {
                            Value::String(t) => t.as_str(),
                            Value::Array(parts) => parts[0].as_str().unwrap_or_default(),
                            _ => "",
                        };
                        for piece in text.split("${").skip(1) {
                            let name = piece.split('}').next().unwrap_or_default();
                            add(into, name.split('.').next().unwrap_or_default());
                        }
                    }
                    ("DependsOn", Value::String(name)) => add(into, name),
                    ("DependsOn", Value::Array(names)) => {
                        for name in names.iter().filter_map(Value::as_str) {
                            add(into, name);
                        }
                    }
                    _ => {}
                }
                references(inner, resources, into);
            }
        }
        Value::Array(items) => items.iter().for_each(|i| references(i, resources, into)),
        _ => {}
    }
}

/// CloudFormation refuses a template whose resources depend on each other in a circle (a role
/// granting on a function whose environment names a key whose policy names the role, say).
#[test]
fn no_resources_depend_on_each_other_in_a_cycle() {
    let resources = template()["Resources"].as_object().expect("Resources");
    let graph: BTreeMap<&str, BTreeSet<String>> = resources
        .iter()
        .map(|(name, def)| {
            let mut refs = BTreeSet::new();
            references(def, resources, &mut refs);
            refs.remove(name.as_str());
            (name.as_str(), refs)
        })
        .collect();
    assert!(
        graph["ApiFunction"].contains("ReaperFunction"),
        "the walk sees references: {:?}",
        graph["ApiFunction"]
    );
    // Depth-first, colouring each resource while it is on the path.
    fn visit<'a>(
        node: &'a str,
        graph: &'a BTreeMap<&str, BTreeSet<String>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) {
        if done.contains(node) {
            return;
        }
        if let Some(at) = path.iter().position(|n| *n == node) {
            panic!("dependency cycle: {} -> {node}", path[at..].join(" -> "));
        }
        path.push(node);
        for next in &graph[node] {
            visit(next, graph, path, done);
        }
        path.pop();
        done.insert(node);
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        visit(node, &graph, &mut Vec::new(), &mut done);
    }
}

/// The reaper function's ARN as the API role's `Reconcile` statement must name it (built from
/// the function's `FunctionName`, see the template), in [`resource_name`]'s form.
fn reaper_function_arn() -> String {
    let name = props("ReaperFunction")["FunctionName"]["Fn::Sub"]
        .as_str()
        .expect("ReaperFunction has a FunctionName");
    resource_name(&json!({
        "Fn::Sub": format!(
            "arn:${{AWS::Partition}}:lambda:${{AWS::Region}}:${{AWS::AccountId}}:function:{name}"
        )
    }))
}

/// Granted by the role, used by the Lambda service or runtime on the function's behalf, not by
/// the function's code (so no recording can see them).
fn allow_list(role: &str, log_group: &str) -> Grants {
    let logs = format!("{log_group}.Arn");
    // The runtime writes the function's logs to its own log group (created by the template, so
    // no logs:CreateLogGroup).
    let mut g: Grants = [
        ("logs:CreateLogStream", logs.as_str()),
        ("logs:PutLogEvents", logs.as_str()),
    ]
    .map(|(a, r)| (a.to_owned(), r.to_owned()))
    .into();
    let extra: &[(&str, &str)] = match role {
        // The stream event source mapping reads the table's stream with the function's role,
        // and sends records it gave up on to the on-failure destination.
        "RelayRole" => &[
            ("dynamodb:DescribeStream", "SeatgateTable.StreamArn"),
            ("dynamodb:GetRecords", "SeatgateTable.StreamArn"),
            ("dynamodb:GetShardIterator", "SeatgateTable.StreamArn"),
            ("dynamodb:ListStreams", "*"),
            ("sqs:SendMessage", "RelayFailureQueue.Arn"),
            // Declared, not recorded: the recorded relay run carries no terminal change.
            ("sqs:SendMessage", "EventQueue.Arn"),
        ],
        // Its SQS event source mapping polls and deletes with it; the deliverer hands back what
        // the webhook did not accept. It touches no table.
        "DeliverRole" => &[
            ("sqs:ReceiveMessage", "EventQueue.Arn"),
            ("sqs:DeleteMessage", "EventQueue.Arn"),
            ("sqs:ChangeMessageVisibility", "EventQueue.Arn"),
            ("sqs:GetQueueAttributes", "EventQueue.Arn"),
        ],
        // The SQS event source mapping polls, deletes and hands back messages with it.
        "WorkerRole" => &[
            ("sqs:ReceiveMessage", "SeatQueue.Arn"),
            ("sqs:DeleteMessage", "SeatQueue.Arn"),
            ("sqs:ChangeMessageVisibility", "SeatQueue.Arn"),
            ("sqs:GetQueueAttributes", "SeatQueue.Arn"),
        ],
        _ => &[],
    };
    g.extend(extra.iter().map(|(a, r)| (a.to_string(), r.to_string())));
    g
}

#[test]
fn the_webhook_secret_is_granted_only_with_the_parameter() {
    // Declared, not recorded: Secrets Manager has no local emulator here. The deliverer reads
    // the signing key by ARN (lambda.rs, `Wired::secret`) only when WEBHOOK_URL is set.
    let grants = role_grants("DeliverRole");
    assert_eq!(
        grants.conditional,
        BTreeMap::from([(
            "HasWebhookKey".to_owned(),
            Grants::from([(
                "secretsmanager:GetSecretValue".to_owned(),
                "WebhookSigningKeySecretArn".to_owned()
            )])
        )]),
        "DeliverRole's conditional grants"
    );
    assert_eq!(
        template()["Conditions"]["HasWebhookKey"],
        json!({"Fn::Not": [{"Fn::Equals": [{"Ref": "WebhookSigningKeySecretArn"}, ""]}]})
    );
    assert_eq!(
        props("DeliverFunction")["Environment"]["Variables"]["WEBHOOK_SIGNING_KEY_SECRET_ARN"],
        json!({"Ref": "WebhookSigningKeySecretArn"})
    );
    for role in ["ApiRole", "RelayRole", "WorkerRole", "ReaperRole"] {
        assert!(role_grants(role).conditional.is_empty(), "{role}");
    }
}

// ---------------------------------------------------------------------------------------------
// IAM: what each function uses, recorded
// ---------------------------------------------------------------------------------------------

/// An SDK interceptor that logs every request it sees: `(service target prefix, operation,
/// JSON body)`. Both SDKs here (DynamoDB, SQS) speak a JSON protocol whose `X-Amz-Target`
/// header names the operation (`DynamoDB_20120810.GetItem`, `AmazonSQS.SendMessage`).
#[derive(Debug, Clone, Default)]
struct Recorder {
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
    fn operation_counts(&self) -> BTreeMap<String, u64> {
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
    fn kms_actions(&self, key_id: &str) -> BTreeSet<String> {
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
    fn grants(&self, table: &str, names: &BTreeMap<String, String>) -> Grants {
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
async fn emulators() -> aws_config::SdkConfig {
    let sdk = setup::sdk_config().await;
    setup::dynamodb_from(&sdk).await;
    setup::sqs_from(&sdk).await;
    sdk
}

/// One function's DynamoDB view, recorded: a store wired like `seatgate_aws::lambda` (`DynamoStore::new`
/// over a client from the environment) whose client also carries a [`Recorder`].
fn recorded_store(
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

/// What every function's flows share: a clock, the simulator, an unrecorded store for setting
/// up state, and a way to build services.
struct World {
    sdk: aws_config::SdkConfig,
    table: String,
    timing: Timing,
    clock: Arc<ManualClock>,
    sim: Simulator,
    upstream: Arc<HttpUpstream>,
    setup: Arc<DynamoStore>,
    /// The KMS key standing for the template's `CredentialsKey`.
    key_id: String,
}

impl World {
    async fn new(sdk: &aws_config::SdkConfig) -> World {
        let table = setup::unique("seatgate-iam-");
        let client = aws_sdk_dynamodb::Client::new(sdk);
        create_table(&client, &table).await.expect("create_table");
        let timing = Timing::aws();
        let setup::Upstream {
            sim,
            http: upstream,
            ..
        } = setup::upstream(&timing).await;
        let key = setup::credentials_key().await;
        World {
            sdk: sdk.clone(),
            key_id: key.key_id().to_owned(),
            setup: Arc::new(DynamoStore::new(&client, &table).with_credentials_key(key)),
            table,
            timing,
            clock: Arc::new(ManualClock::new(Millis::now())),
            sim,
            upstream,
        }
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    fn services(&self, store: &Arc<DynamoStore>) -> Services {
        Services::new(
            Ports::from_store(store.clone(), self.upstream.clone(), self.clock()),
            self.timing.clone(),
        )
    }

    fn api(&self, store: &Arc<DynamoStore>) -> ApiService {
        self.services(store).api()
    }

    fn worker(&self, store: &Arc<DynamoStore>) -> Worker {
        self.services(store).worker()
    }

    fn reaper(&self, store: &Arc<DynamoStore>) -> Reaper {
        self.services(store).reaper()
    }

    /// A user the upstream knows, with the credential stored in seatgate.
    async fn enrol(&self, name: &str) -> UserId {
        let user = UserId::parse(name).unwrap();
        let credential = format!("cred-{name}");
        self.sim.register_user(name, &credential);
        self.api(&self.setup)
            .put_credential(&user, &credential)
            .await
            .unwrap();
        user
    }

    async fn confirmed(&self, user: &UserId, seat: &str) -> Intent {
        let api = self.api(&self.setup);
        let action = api
            .prepare(user, ActionKind::ReserveSeat, SeatId::parse(seat).unwrap())
            .await
            .unwrap();
        api.confirm(user, &action.action_id).await.unwrap().intent
    }

    async fn status(&self, id: &IntentId) -> Intent {
        self.setup.get_intent(id).await.unwrap().unwrap()
    }

    async fn drop_table(&self) {
        let _ = delete_table(&aws_sdk_dynamodb::Client::new(&self.sdk), &self.table).await;
    }
}

fn message(intent: &Intent) -> QueueRecord {
    QueueRecord {
        message_id: format!("m-{}", intent.intent_id),
        group_id: intent.seat_id.to_string(),
        body: serde_json::to_string(&SeatMessage::for_intent(intent)).unwrap(),
        receipt: String::new(),
    }
}

/// One function's recorded requests: the recorder, the store's own request counts, the test's
/// table and credentials key, and the names standing for template resources (see
/// [`Recorder::grants`]).
type Recorded = (
    Recorder,
    BTreeMap<String, u64>,
    String,
    String,
    BTreeMap<String, String>,
);

/// What the API function's code does to the table: every route's flow.
async fn record_api(sdk: &aws_config::SdkConfig) -> Recorded {
    let w = World::new(sdk).await;
    let (store, recorder) = recorded_store(&w.sdk, &w.table, &w.key_id);
    let api = w.api(&store);
    let u = UserId::parse("api-user").unwrap();
    api.put_credential(&u, "cred-api").await.unwrap();
    let action = api
        .prepare(&u, ActionKind::ReserveSeat, SeatId::parse("A-1").unwrap())
        .await
        .unwrap();
    let first = api.confirm(&u, &action.action_id).await.unwrap();
    assert!(first.created);
    let again = api.confirm(&u, &action.action_id).await.unwrap();
    assert!(!again.created);
    assert_eq!(again.intent.intent_id, first.intent.intent_id);
    let until = w.clock.now().plus(Duration::from_secs(3600));
    let wait = api
        .register_wait(&u, SeatId::parse("A-2").unwrap(), until)
        .await
        .unwrap();
    let read = api.intent(&u, &first.intent.intent_id).await.unwrap();
    assert_eq!(read.status, IntentStatus::Requested);
    let cancelled = api.cancel_wait(&u, &wait.intent_id).await.unwrap();
    assert_eq!(cancelled.status, IntentStatus::Cancelled);
    // Seat and room reads: the shared reading (GetItem), its refresh lease and record
    // (UpdateItem), the breaker (GetItem), and a room's seat readings (BatchGetItem).
    let seat = api.seat(&SeatId::parse("A-3").unwrap()).await.unwrap();
    assert_eq!(seat.reading.seat_available(), Some(true));
    w.sim.put_room("ROOM-1", &["A-3", "A-4"]);
    let room = api
        .room(&seatgate::domain::RoomId::parse("ROOM-1").unwrap())
        .await
        .unwrap();
    assert!(!room.stale);
    record_flights(&w, &store).await;
    let names = record_admin(&w, &store, &recorder).await;
    let counts = store.requests().by_operation;
    w.drop_table().await;
    (recorder, counts, w.table.clone(), w.key_id.clone(), names)
}

/// The admin routes' flows through the API function's wiring: a seat's state with the queues'
/// depths, a redrive of dead letters in both dead-letter queues, and a reconcile, which invokes
/// the reaper function (the Lambda `Invoke` API on loopback, running the reaper's real pass on
/// an unrecorded store: those requests are the reaper's, not the API's). Returns the queue URLs
/// and the function name, mapped to the template resources they stand for.
async fn record_admin(
    w: &World,
    store: &Arc<DynamoStore>,
    recorder: &Recorder,
) -> BTreeMap<String, String> {
    use seatgate_aws::events::{EventQueueDefinition, create_event_queues};
    use seatgate_aws::queue_admin::{QueuePair, SqsQueueAdmin};
    use seatgate_aws::reaper_pass::LambdaReaper;
    use seatgate_testkit::lambda::{FakeLambda, Handler};

    let plain = aws_sdk_sqs::Client::new(&w.sdk);
    let (seat_url, seat_dlq) = create_queues(
        &plain,
        &setup::unique("seatgate-iam-"),
        &QueueDefinition::for_timing(&w.timing),
    )
    .await
    .expect("create_queues");
    let (events_url, events_dlq) = create_event_queues(
        &plain,
        &setup::unique("seatgate-iam-events-"),
        &EventQueueDefinition::default(),
    )
    .await
    .expect("create_event_queues");
    for (url, group) in [(&seat_dlq, Some("A-1")), (&events_dlq, None)] {
        plain
            .send_message()
            .queue_url(url)
            .message_body("{}")
            .set_message_group_id(group.map(str::to_owned))
            .set_message_deduplication_id(group.map(|_| "d-1".to_owned()))
            .send()
            .await
            .unwrap();
    }

    let reaper = Arc::new(w.reaper(&w.setup));
    let handler: Handler = Arc::new(move |_payload| {
        let reaper = reaper.clone();
        Box::pin(async move {
            let report = seatgate::handlers::schedule::handle(&reaper)
                .await
                .map_err(|e| e.to_string())?;
            Ok(serde_json::to_value(report).unwrap())
        })
    });
    let function = "seatgate-iam-reaper";
    let lambda = FakeLambda::start(vec![(function, handler)]).await;
    let sqs = aws_sdk_sqs::config::Builder::from(&w.sdk)
        .interceptor(recorder.clone())
        .build();
    let queues = SqsQueueAdmin::new(
        aws_sdk_sqs::Client::from_conf(sqs),
        QueuePair {
            queue_url: seat_url.clone(),
            dead_letter_url: seat_dlq.clone(),
        },
        QueuePair {
            queue_url: events_url.clone(),
            dead_letter_url: events_dlq.clone(),
        },
    );
    let invoker = aws_sdk_lambda::Client::from_conf(
        lambda.config(&w.sdk).interceptor(recorder.clone()).build(),
    );
    let ports = Ports::from_store(store.clone(), w.upstream.clone(), w.clock())
        .with_queue_admin(Arc::new(queues))
        .with_reaper_pass(Arc::new(LambdaReaper::new(invoker, function)));
    let admin = Services::new(ports, w.timing.clone()).api();
    let admin = admin.admin();

    let seat = admin.seat(&SeatId::parse("A-1").unwrap()).await.unwrap();
    assert_eq!(seat.queue.map(|q| q.dead), Some(1));
    let moved = admin.redrive().await.unwrap();
    assert_eq!((moved.seat_messages, moved.webhook_deliveries), (1, 1));
    let report = admin.reconcile().await.unwrap();
    assert_eq!(report.left, 0, "{report:?}");
    assert_eq!(lambda.invocations().len(), 1);

    for url in [&seat_url, &seat_dlq, &events_url, &events_dlq] {
        let _ = delete_queue(&plain, url).await;
    }
    BTreeMap::from([
        (seat_url, "SeatQueue.Arn".to_owned()),
        (seat_dlq, "SeatDeadLetterQueue.Arn".to_owned()),
        (events_url, "EventQueue.Arn".to_owned()),
        (events_dlq, "EventDeadLetterQueue.Arn".to_owned()),
        (function.to_owned(), reaper_function_arn()),
    ])
}

/// The flash sale's flows through the API function's code: a flight created, booked under an
/// idempotency key (its record begun and answered in the booking's transaction), sold out and
/// marked so (condition checks on the shards), a refusal answered under a key, the user's
/// bookings listed, a cancel, and a booking whose store failure releases its key.
async fn record_flights(w: &World, store: &Arc<DynamoStore>) {
    use seatgate::domain::{BookingAnswer, FlightId, IdempotencyKey};
    let flights = w.services(store).flights().clone();
    let u = UserId::parse("flyer").unwrap();
    let id = FlightId::parse(&setup::unique("F-")).unwrap();
    flights.create(id.clone(), 2, Some(2), 1).await.unwrap();
    let key = |k: &str| IdempotencyKey::parse(k).unwrap();
    let BookingAnswer::Booked { booking } =
        flights.book(&u, &id, 2, Some(&key("k1"))).await.unwrap()
    else {
        panic!("booked");
    };
    let other = UserId::parse("late").unwrap();
    assert_eq!(
        flights
            .book(&other, &id, 1, Some(&key("k2")))
            .await
            .unwrap(),
        BookingAnswer::SoldOut
    );
    assert_eq!(flights.bookings_of(&u, None).await.unwrap().items.len(), 1);
    assert_eq!(flights.inventory(&id).await.unwrap().available(), 0);
    flights.cancel(&u, &id, &booking.booking_id).await.unwrap();

    let faulty = Arc::new(seatgate_testkit::FaultyStore::new((**store).clone()));
    faulty.fail_next(
        seatgate_testkit::StoreOp::Book,
        seatgate::ports::StoreError::TransactionConflict,
        10,
    );
    let failing = Services::new(
        Ports::from_store(faulty, w.upstream.clone(), w.clock()),
        w.timing.clone(),
    );
    assert!(
        failing
            .flights()
            .book(&u, &id, 1, Some(&key("k3")))
            .await
            .is_err()
    );
}

/// The worker's code on one batch: a winner that writes a suppression, a raced intent of the
/// same seat, and an intent of a seat suppressed earlier.
async fn record_worker(sdk: &aws_config::SdkConfig) -> Recorded {
    let w = World::new(sdk).await;
    let (winner_user, raced_user, earlier_user, late_user) = (
        w.enrol("w1").await,
        w.enrol("w2").await,
        w.enrol("w3").await,
        w.enrol("w4").await,
    );
    // Seat S-2 was taken a moment ago (an unrecorded worker run): it is suppressed now.
    let earlier = w.confirmed(&earlier_user, "S-2").await;
    assert!(
        w.worker(&w.setup)
            .handle_batch(&[message(&earlier)])
            .await
            .is_empty()
    );
    assert_eq!(
        w.status(&earlier.intent_id).await.status,
        IntentStatus::Succeeded
    );

    let winner = w.confirmed(&winner_user, "S-1").await;
    let raced = w.confirmed(&raced_user, "S-1").await;
    let suppressed = w.confirmed(&late_user, "S-2").await;
    let (store, recorder) = recorded_store(&w.sdk, &w.table, &w.key_id);
    let failed = w
        .worker(&store)
        .handle_batch(&[message(&winner), message(&raced), message(&suppressed)])
        .await;
    assert!(failed.is_empty(), "{failed:?}");
    let winner = w.status(&winner.intent_id).await;
    assert_eq!(winner.status, IntentStatus::Succeeded);
    assert_eq!(
        w.status(&raced.intent_id).await.status,
        IntentStatus::FailedRace
    );
    assert_eq!(
        w.status(&suppressed.intent_id).await.status,
        IntentStatus::FailedRace
    );
    assert_eq!(w.sim.stats().get(POSTS), 2, "one per seat");
    let counts = store.requests().by_operation;
    w.drop_table().await;
    (
        recorder,
        counts,
        w.table.clone(),
        w.key_id.clone(),
        BTreeMap::new(),
    )
}

/// The reaper's code on one pass: an expired lease settled by a charge read, a due wait woken,
/// a REQUESTED intent whose message was lost requeued.
async fn record_reaper(sdk: &aws_config::SdkConfig) -> Recorded {
    let w = World::new(sdk).await;
    let (leased_user, waiting_user, lost_user) = (
        w.enrol("r1").await,
        w.enrol("r2").await,
        w.enrol("r3").await,
    );
    // A worker claimed this one, its reserve landed upstream, then the worker died.
    let leased = w.confirmed(&leased_user, "L-1").await;
    let now = w.clock.now();
    let lease_until = now.plus(w.timing.lease());
    w.setup
        .transition(&TransitionRequest {
            intent_id: leased.intent_id.clone(),
            seat_id: Some(leased.seat_id.clone()),
            now,
            transition: Transition::Claim {
                lease_until,
                due_at: lease_until.plus(w.timing.reaper_grace),
            },
        })
        .await
        .unwrap();
    let reserved = w
        .upstream
        .reserve(&Secret::new("cred-r1"), &leased.seat_id)
        .await;
    assert!(matches!(
        reserved,
        seatgate::ports::ReserveOutcome::Reserved(_)
    ));
    let wait = w
        .api(&w.setup)
        .register_wait(
            &waiting_user,
            SeatId::parse("W-1").unwrap(),
            now.plus(Duration::from_secs(7200)),
        )
        .await
        .unwrap();
    let lost = w.confirmed(&lost_user, "Q-1").await;
    w.clock
        .advance(w.timing.requeue_after + Duration::from_secs(1));

    let (store, recorder) = recorded_store(&w.sdk, &w.table, &w.key_id);
    let report = w.reaper(&store).run_once(500).await.unwrap();
    assert_eq!(
        (report.settled_succeeded, report.woken, report.requeued),
        (1, 1, 1),
        "{report:?}"
    );
    assert_eq!(
        w.status(&leased.intent_id).await.status,
        IntentStatus::Succeeded
    );
    assert_eq!(w.status(&wait.intent_id).await.version, wait.version + 1);
    assert_eq!(w.status(&lost.intent_id).await.requeues, 1);
    assert_eq!(w.sim.stats().get(POSTS), 1, "never re-sent");
    let counts = store.requests().by_operation;
    w.drop_table().await;
    (
        recorder,
        counts,
        w.table.clone(),
        w.key_id.clone(),
        BTreeMap::new(),
    )
}

/// The relay's code on a stream event (the fixture the function is invoked with locally): sends
/// to the seat queue on moto.
async fn record_relay(sdk: &aws_config::SdkConfig) -> (Recorder, String) {
    let plain = aws_sdk_sqs::Client::new(sdk);
    let (queue_url, dlq_url) = create_queues(
        &plain,
        &setup::unique("seatgate-iam-"),
        &QueueDefinition::for_timing(&Timing::aws()),
    )
    .await
    .expect("create_queues");
    let recorder = Recorder::default();
    let config = aws_sdk_sqs::config::Builder::from(sdk)
        .interceptor(recorder.clone())
        .build();
    let queue = SqsSeatQueue::new(aws_sdk_sqs::Client::from_conf(config), &queue_url);
    let relay = Relay::new(
        Arc::new(queue),
        Arc::new(NoEvents),
        Arc::new(ManualClock::new(Millis::now())),
    );
    let event: aws_lambda_events::event::dynamodb::Event = serde_json::from_str(include_str!(
        "../../../tests/events/relay-dynamodb-stream.json"
    ))
    .unwrap();
    let response = handle_dynamodb_event(&relay, change_records(&event)).await;
    assert!(response.batch_item_failures.is_empty());
    let received = SqsSeatQueue::new(plain.clone(), &queue_url)
        .with_wait(Duration::ZERO)
        .receive(10)
        .await
        .unwrap();
    assert_eq!(
        received.len(),
        1,
        "the REQUESTED insert is enqueued, nothing else"
    );
    assert_eq!(received[0].group_id, "A-12");
    let _ = delete_queue(&plain, &queue_url).await;
    let _ = delete_queue(&plain, &dlq_url).await;
    (recorder, queue_url)
}

/// The actions `CredentialsKey`'s policy grants `role`, after checking that no other principal
/// than the account (administration only) and the function roles is named, and that every
/// cryptographic grant is conditioned on the user's encryption context.
fn key_policy_grants(role: &str) -> BTreeSet<String> {
    let statements = props("CredentialsKey")["KeyPolicy"]["Statement"]
        .as_array()
        .expect("a key policy");
    let mut granted = BTreeSet::new();
    for st in statements {
        assert_eq!(st["Effect"], "Allow");
        let actions: Vec<&str> = match &st["Action"] {
            Value::String(a) => vec![a.as_str()],
            Value::Array(a) => a.iter().map(|v| v.as_str().expect("an action")).collect(),
            other => panic!("Action {other}"),
        };
        let principal = &st["Principal"]["AWS"];
        let roles: Vec<&str> = match principal {
            Value::Array(p) => p.iter().collect::<Vec<_>>(),
            p => vec![p],
        }
        .into_iter()
        .filter_map(|p| p["Fn::GetAtt"][0].as_str())
        .collect();
        if roles.is_empty() {
            // The account's statement: administration, and nothing that touches data.
            assert!(
                principal["Fn::Sub"]
                    .as_str()
                    .is_some_and(|s| s.ends_with(":root"))
            );
            for action in &actions {
                let crypto = ["Decrypt", "Encrypt", "GenerateDataKey", "ReEncrypt", "*"]
                    .iter()
                    .any(|c| action.trim_start_matches("kms:").starts_with(c));
                assert!(!crypto, "the account must not be granted {action}");
            }
            continue;
        }
        assert_eq!(
            st["Condition"]["Null"]["kms:EncryptionContext:seatgate:user_id"], "false",
            "{st}"
        );
        if roles.contains(&role) {
            granted.extend(actions.iter().map(|a| a.to_string()));
        }
    }
    granted
}

fn show(g: &Grants) -> String {
    if g.is_empty() {
        return "  (none)".to_owned();
    }
    g.iter()
        .map(|(a, r)| format!("  {a} on {r}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_role_grants_exactly_what_its_function_uses() {
    let sdk = emulators().await;
    let mut used: BTreeMap<&str, Grants> = BTreeMap::new();
    let mut kms_used: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (role, (recorder, counts, table, key_id, names)) in [
        ("ApiRole", record_api(&sdk).await),
        ("WorkerRole", record_worker(&sdk).await),
        ("ReaperRole", record_reaper(&sdk).await),
    ] {
        // The recorder saw exactly what the adapter's own request counter saw.
        assert_eq!(recorder.operation_counts(), counts, "{role}");
        used.insert(role, recorder.grants(&table, &names));
        kms_used.insert(role, recorder.kms_actions(&key_id));
    }
    // The credentials key's policy grants each role exactly the KMS actions its code sends.
    for (_, role, _) in FUNCTIONS {
        let used = kms_used.remove(role).unwrap_or_default();
        assert_eq!(
            key_policy_grants(role),
            used,
            "{role}: CredentialsKey's policy differs from what the code sends to KMS"
        );
    }
    let (recorder, queue_url) = record_relay(&sdk).await;
    used.insert(
        "RelayRole",
        recorder.grants(
            "<no table>",
            &BTreeMap::from([(queue_url, "SeatQueue.Arn".to_owned())]),
        ),
    );
    // The deliverer's requests are all its mapping's and its hand-backs (declared above).
    used.insert("DeliverRole", Grants::new());

    let mut report = Vec::new();
    for (_, role, logs) in FUNCTIONS {
        let granted = role_grants(role).always;
        let used_here = &used[role];
        let expected: Grants = used_here.union(&allow_list(role, logs)).cloned().collect();
        eprintln!("{role} recorded:\n{}", show(used_here));
        if granted != expected {
            report.push(format!(
                "{role}:\n granted but unused:\n{}\n used but not granted:\n{}",
                show(&granted.difference(&expected).cloned().collect()),
                show(&expected.difference(&granted).cloned().collect()),
            ));
        }
    }
    assert!(
        report.is_empty(),
        "roles in template.yaml differ from what the code uses:\n{}",
        report.join("\n")
    );
}

/// An event queue that drops what it is given: the recorded relay here only relays REQUESTED
/// intents, and the event queue's grants are declared, not recorded (no SQS recorder on it).
struct NoEvents;

#[async_trait::async_trait]
impl seatgate::ports::EventQueue for NoEvents {
    async fn enqueue(
        &self,
        _: &seatgate::domain::IntentEvent,
    ) -> Result<(), seatgate::ports::QueueError> {
        Ok(())
    }
}
