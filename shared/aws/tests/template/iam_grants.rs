//! IAM, what each role grants: the role's statements as `(action, resource)` pairs (with those
//! under a template condition apart), one role and log group per function, the HTTP API's routes
//! being the handler's route table, every resource scoped, no reference cycle among resources,
//! and the allow-list of what the Lambda service and runtime do with a role on the function's
//! behalf.
//!
//! Read from the template alone (no emulator); `iam_recorded.rs` compares these grants with what
//! the code is recorded using.

use super::common::{FUNCTIONS, props, resource, template};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// A resource expression, written the way the recording names resources: `SeatQueue.Arn`,
/// `SeatgateTable.Arn/index/due`, `*`, or a parameter name for a `Ref`.
pub(crate) fn resource_name(v: &Value) -> String {
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

pub(crate) type Grants = BTreeSet<(String, String)>;

/// One role's grants: unconditional ones, and those under a template condition (by name).
#[derive(Debug, Default)]
pub(crate) struct RoleGrants {
    pub(crate) always: Grants,
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

pub(crate) fn role_grants(role: &str) -> RoleGrants {
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
/// `ROUTES` itself; `infra/local/tests/http_contract/routes.rs` checks it and the handler serve them.)
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
pub(crate) fn reaper_function_arn() -> String {
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
pub(crate) fn allow_list(role: &str, log_group: &str) -> Grants {
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
            // Declared, not recorded: the breaker's wake-ups (`SqsWakeUps`, tested on moto in
            // `queue_sqs.rs`); the recorded flows never open the breaker.
            ("sqs:SendMessage", "WakeQueue.Arn"),
        ],
        // The wake-up queue's event source mapping polls and deletes with it.
        "ReaperRole" => &[
            ("sqs:ReceiveMessage", "WakeQueue.Arn"),
            ("sqs:DeleteMessage", "WakeQueue.Arn"),
            ("sqs:GetQueueAttributes", "WakeQueue.Arn"),
            ("sqs:SendMessage", "WakeQueue.Arn"),
        ],
        "ApiRole" => &[("sqs:SendMessage", "WakeQueue.Arn")],
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
