//! `drive`: one flash-sale step as a process of its own, for `compare`.
//!
//! The generator and the target in one process share one tokio runtime: at thousands of
//! iterations a second the target's tasks delay the scheduler's wake-ups and the client's
//! reads, and the generator's ceiling is the two together. In a child process the generator has
//! its own runtime (and its own threads for the OS to schedule), so what `compare` measures past
//! a few thousand a second is the target. The child prints its whole `StepResult`, every sample
//! included, as one JSON line; the parent reads it back as if it had run the step itself.

use super::{DEFAULT_IN_FLIGHT, DEFAULT_RATE, flash_step};
use crate::Cli;
use anyhow::Context as _;
use std::time::Duration;

/// Runs the step against `--target` and prints its result as one JSON line.
pub(crate) async fn run(cli: &Cli) -> anyhow::Result<()> {
    let api = cli
        .target
        .as_deref()
        .context("drive needs --target <the API's URL>")?
        .trim_end_matches('/');
    let in_flight = cli.max_in_flight.unwrap_or(DEFAULT_IN_FLIGHT).max(1);
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(in_flight + cli.setup_concurrency)
        .timeout(Duration::from_secs(30))
        .build()?;
    let rate = cli.rate.unwrap_or(DEFAULT_RATE);
    let step = flash_step(cli, api, &client, rate, cli.capacity, in_flight).await?;
    println!("{}", serde_json::to_string(&step)?);
    Ok(())
}

/// The arguments that make a `drive` child run the step `cli` describes at `rate` on a flight
/// of `capacity` seats, against `api`.
#[cfg_attr(not(feature = "baselines"), allow(dead_code))]
pub(crate) fn args(
    cli: &Cli,
    api: &str,
    rate: f64,
    capacity: u32,
    in_flight: usize,
) -> Vec<String> {
    let ms = |d: Duration| format!("{}ms", d.as_millis());
    [
        ("--target", api.to_owned()),
        ("--rate", rate.to_string()),
        ("--duration", ms(cli.duration)),
        ("--capacity", capacity.to_string()),
        ("--users", cli.users.max(1).to_string()),
        ("--shards", cli.shards.to_string()),
        ("--max-in-flight", in_flight.to_string()),
        ("--lateness", ms(cli.lateness)),
        ("--setup-concurrency", cli.setup_concurrency.to_string()),
    ]
    .into_iter()
    .chain(cli.keys.then(|| ("--keys", String::new())))
    .fold(vec!["drive".to_owned()], |mut args, (flag, value)| {
        args.push(flag.to_owned());
        if !value.is_empty() {
            args.push(value);
        }
        args
    })
}
