//! Load caps: the worker's concurrency is one parameter inside what AWS accepts, the pipeline's
//! functions run on concurrency reserved for them, and the HTTP API's throttles (the stage's,
//! and the sale routes' own) are sized for a sale without letting one user take a bucket.
//!
//! Kept apart from the timing checks: these bound concurrency, not durations.

use super::common::{props, resolve_int, template};
use seatgate::config::Timing;
use serde_json::{Value, json};

/// Lambda's default regional concurrency quota, and the least Lambda keeps unreserved.
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
    // The upstream's load: a batch works at most SEAT_GROUPS_AT_ONCE of its seats at once (no
    // more than it carries), one reserve in flight each.
    let batch = resolve_int(&mapping["Properties"]["BatchSize"]);
    assert!(
        batch <= 10,
        "a FIFO queue's mapping takes at most 10 per batch"
    );
    let seats_at_once = batch.min(seatgate::service::worker::SEAT_GROUPS_AT_ONCE as u64);
    let reserves_in_flight = seats_at_once * cap.default as u64;
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

/// The functions the pipeline runs on, each with concurrency of its own.
const PIPELINE: [&str; 4] = [
    "WorkerFunction",
    "RelayFunction",
    "DeliverFunction",
    "ReaperFunction",
];

/// Seed 004's sale: bookings a second the sale routes must admit.
const SEED_004_BOOKINGS_PER_S: f64 = 400.0;

/// A reservation's default: a number, or a parameter's default.
fn reserved_default(function: &str) -> f64 {
    let reserved = &props(function)["ReservedConcurrentExecutions"];
    match reserved.get("Ref") {
        Some(_) => number_parameter(parameter_ref(reserved)).default,
        None => reserved
            .as_f64()
            .unwrap_or_else(|| panic!("{function} reserves no concurrency: {reserved}")),
    }
}

#[test]
fn no_flood_of_api_requests_can_take_the_pipelines_concurrency() {
    // Every function the pipeline runs on has its own reservation, so the API function (which
    // has none, and takes what is left) cannot starve it however many requests the gateway
    // lets through; a reservation may not be so large that Lambda's 100 unreserved are gone.
    assert!(
        props("ApiFunction")
            .get("ReservedConcurrentExecutions")
            .is_none()
    );
    let reserved: f64 = PIPELINE.iter().map(|f| reserved_default(f)).sum();
    assert!(
        reserved + HEADROOM_FOR_THE_PIPELINE as f64 <= ACCOUNT_CONCURRENCY as f64,
        "the pipeline reserves {reserved} of {ACCOUNT_CONCURRENCY}; Lambda keeps 100 unreserved"
    );
    // A queue's mapping must not be able to run more batches than its function may: throttled
    // batches spend receive counts towards the dead-letter queue.
    let deliver = props("DeliverFunction");
    let mapping = &deliver["Events"]["Events"]["Properties"];
    assert_eq!(
        resolve_int(&mapping["ScalingConfig"]["MaximumConcurrency"]) as f64,
        reserved_default("DeliverFunction")
    );
}

#[test]
fn the_http_api_is_throttled_per_route_group_and_sized_for_a_sale() {
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
    // The routes throttled apart are exactly the sale's, each a route the API serves, each
    // on the sale's two parameters.
    let routes = api["RouteSettings"]
        .as_object()
        .expect("RouteSettings for the sale's routes");
    let sale_routes = [
        "POST /flights/{flight_id}/bookings",
        "POST /flights/{flight_id}/holds",
    ];
    let mut keys: Vec<&str> = routes.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, sale_routes);
    let served: Vec<String> = props("ApiFunction")["Events"]
        .as_object()
        .expect("ApiFunction.Events")
        .values()
        .map(|e| {
            format!(
                "{} {}",
                e["Properties"]["Method"].as_str().unwrap_or_default(),
                e["Properties"]["Path"].as_str().unwrap_or_default()
            )
        })
        .collect();
    let mut sale = None;
    for key in sale_routes {
        assert!(
            served.iter().any(|r| r == key),
            "{key} is not a route the API serves"
        );
        let r = &routes[key];
        let pair = (
            parameter_ref(&r["ThrottlingRateLimit"]),
            parameter_ref(&r["ThrottlingBurstLimit"]),
        );
        assert!(
            sale.is_none_or(|p| p == pair),
            "one pair of parameters for the sale"
        );
        sale = Some(pair);
    }
    let (sale_rate, sale_burst) = sale.expect("two sale routes");
    let (sale_rate, sale_burst) = (number_parameter(sale_rate), number_parameter(sale_burst));
    assert!(sale_rate.max <= 10_000.0 && sale_burst.max <= 5_000.0);
    // Seed 004's sale at the defaults: its rate sustained, its opening second in the burst.
    assert!(
        sale_rate.default >= SEED_004_BOOKINGS_PER_S
            && sale_burst.default >= SEED_004_BOOKINGS_PER_S,
        "the sale routes admit {} a second, burst {}: seed 004 books {SEED_004_BOOKINGS_PER_S}",
        sale_rate.default,
        sale_burst.default
    );
    // A token bucket admits at most burst + rate x t requests in any t seconds, and an API
    // invocation lasts at most the API function's timeout: polls and reads alone (the default
    // route) cannot take every environment the API function may have. The sale routes can, in
    // a store brownout, by design: the pipeline runs on its own reservations (above), and
    // Lambda's throttles of the API function are answered 500 and retried by clients.
    let api_timeout = resolve_int(&props("ApiFunction")["Timeout"]) as f64;
    let api_worst = burst.default + rate.default * api_timeout;
    let reserved: f64 = PIPELINE.iter().map(|f| reserved_default(f)).sum();
    assert!(
        api_worst + reserved <= ACCOUNT_CONCURRENCY as f64,
        "the default route admits up to {api_worst} concurrent API invocations; the pipeline \
         reserves {reserved} of {ACCOUNT_CONCURRENCY}"
    );
    // One user inside the per-user limit must not be able to take a whole bucket, or its 429s
    // would fall on everyone else. A fixed window lets a user send twice its limit across a
    // window boundary, on each limited route.
    use seatgate::domain::LimitedRoute;
    let on_stage = [LimitedRoute::Confirm, LimitedRoute::Wait];
    let on_sale = [LimitedRoute::Book];
    for route in on_stage.iter().chain(&on_sale) {
        // Exhaustive: a new limited route does not compile until it is counted here.
        match route {
            LimitedRoute::Confirm | LimitedRoute::Wait | LimitedRoute::Book => {}
        }
    }
    let t = Timing::aws();
    for (routes, rate, burst) in [
        (&on_stage[..], rate.default, burst.default),
        (&on_sale[..], sale_rate.default, sale_burst.default),
    ] {
        let per_user = f64::from(t.rate_limit_requests) * routes.len() as f64;
        assert!(
            2.0 * per_user < burst,
            "one user may send {} limited requests at once; the bucket's burst is {burst}",
            2.0 * per_user,
        );
        assert!(
            per_user / t.rate_limit_window.as_secs_f64() < rate,
            "one user's sustained limited rate reaches the bucket's"
        );
    }
}
