//! Alarms and the dashboard: every metric an alarm or a dashboard widget names is one some code
//! emits (a `seatgate::metrics` metric with its exact dimensions, a log filter's metric counting a
//! line the code logs, or an AWS metric of a resource of this stack), the alarms an operator needs
//! are there at thresholds the timing allows, and the dashboard shows every metric the code emits.
//!
//! One file because alarms and widgets are read through the same metric model (`MetricUse`).

use super::common::{FUNCTIONS, resource, secs, template};
use seatgate::config::Timing;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

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
    ("api", include_str!("../../../../functions/api/src/main.rs")),
    (
        "relay",
        include_str!("../../../../functions/relay/src/main.rs"),
    ),
    (
        "worker",
        include_str!("../../../../functions/worker/src/main.rs"),
    ),
    (
        "reaper",
        include_str!("../../../../functions/reaper/src/main.rs"),
    ),
    (
        "deliver",
        include_str!("../../../../functions/deliver/src/main.rs"),
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
            "ApproximateNumberOfMessagesDelayed",
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
        "WakeDeadLetterQueue",
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
