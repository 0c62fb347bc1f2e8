//! Load caps: the worker's concurrency is one parameter inside what AWS accepts, and the HTTP
//! API's throttling leaves the pipeline room within the account's Lambda concurrency (and no
//! single user can take the whole stage).
//!
//! Kept apart from the timing checks: these bound concurrency, not durations.

use super::common::{props, resolve_int, template};
use seatgate::config::Timing;
use serde_json::{Value, json};

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
