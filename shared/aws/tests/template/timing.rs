//! Timing: `Mappings.Timing.Aws` is `Timing::aws()` field by field (and `infra/aws/TABLE.md`
//! states the same numbers), the `TIMING_*` variables the template passes are the ones
//! `config.rs` reads, `Timing::from_env` over exactly those values gives back `Timing::aws()`
//! (in a child process, so no test mutates this process's environment), and the function
//! timeouts keep the lease invariant.
//!
//! One file because every check here compares the template's numbers with `Timing`.

use super::common::{
    FUNCTIONS, props, rate_seconds, resolve, resolve_int, secs, template, timing_mapping,
};
use seatgate::config::Timing;
use seatgate_aws::sqs::QueueDefinition;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// `infra/aws/TABLE.md`'s timing table states the template's numbers: each row naming mapping
/// keys (`` `A` / `B` ``) gives their values in order (`30 / 10 / 50`), and every numeric one must
/// be the mapping's (so the 45 s lease it explains cannot drift from the code).
#[test]
fn table_md_states_the_timing_mappings_numbers() {
    let m = timing_mapping();
    let table = include_str!("../../../../infra/aws/TABLE.md");
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
    let read = quoted_names(include_str!("../../../core/src/config.rs"), "TIMING_");
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
    let source = include_str!("../../src/lambda.rs");
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
        "template::timing::timing_child_reads_the_template_environment",
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
