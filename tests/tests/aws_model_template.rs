//! The AWS model's "template defaults" are the template's: `simulate --aws` predicts the stack
//! `template.yaml` deploys, so each default the model takes from it (the load caps, the sale
//! routes' throttle, the table's warm throughput, the pipeline's reserved concurrency) is read
//! back from the template here and compared. A default changed on one side only fails this.
//!
//! The template is read as text, not parsed: a parameter's `Default:` is the first one after
//! its name at the parameters' indentation, and the reservations are the functions' literal
//! `ReservedConcurrentExecutions` (the worker's is a parameter, compared on its own).

use seatgate_sim::aws::AwsProfile;
use seatgate_sim::aws::profile::PIPELINE_RESERVED;

const TEMPLATE: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml"));

/// The `Default` of parameter `name`.
fn default_of(name: &str) -> u64 {
    let header = format!("  {name}:");
    let mut lines = TEMPLATE.lines().skip_while(|l| *l != header);
    assert!(
        lines.next().is_some(),
        "no parameter {name} in template.yaml"
    );
    let line = lines
        .take_while(|l| {
            l.starts_with("    ") || l.trim().is_empty() || l.trim_start().starts_with('#')
        })
        .find(|l| l.trim_start().starts_with("Default:"))
        .unwrap_or_else(|| panic!("parameter {name} has no Default"));
    let value = line
        .trim_start()
        .trim_start_matches("Default:")
        .split('#')
        .next()
        .unwrap_or_default()
        .trim();
    value
        .parse()
        .unwrap_or_else(|_| panic!("{name}'s Default is not a number: {value}"))
}

#[test]
fn the_models_template_defaults_are_the_templates() {
    let p = AwsProfile::published();
    let pairs = [
        ("WorkerConcurrency", p.worker_concurrency as u64),
        ("ApiThrottleRateLimit", u64::from(p.api_rate_per_s)),
        ("ApiThrottleBurstLimit", u64::from(p.api_burst)),
        ("SaleThrottleRateLimit", u64::from(p.sale_rate_per_s)),
        ("SaleThrottleBurstLimit", u64::from(p.sale_burst)),
        (
            "TableWarmWriteUnitsPerSecond",
            u64::from(p.table_write_units_per_s),
        ),
        (
            "TableWarmReadUnitsPerSecond",
            u64::from(p.table_read_units_per_s),
        ),
    ];
    for (name, model) in pairs {
        assert_eq!(
            default_of(name),
            model,
            "{name}: template against the model"
        );
    }
    let reserved: u64 = TEMPLATE
        .lines()
        .filter_map(|l| l.trim().strip_prefix("ReservedConcurrentExecutions:"))
        .filter_map(|v| v.trim().parse::<u64>().ok())
        .sum();
    assert_eq!(
        reserved,
        u64::from(PIPELINE_RESERVED),
        "the relay's, deliverer's and reaper's reservations against the model's"
    );
    // The worker's is the parameter compared above, not a literal.
    assert!(TEMPLATE.contains("ReservedConcurrentExecutions: !Ref WorkerConcurrency"));
}
