//! README's "Quick start" reservation, run as written against a stack of the runner: the block
//! is read out of README.md (so the test cannot drift from the page), its first line's
//! addresses pointed at the test stack's ports, and run in bash from the repository root. It
//! must end SUCCEEDED, with one reserve upstream.

use seatgate_local::{RunnerConfig, start};
use std::process::Command;

const README: &str = include_str!("../../../README.md");
const MARKER: &str = "A first reservation against the running stack";

fn quick_start_block() -> String {
    let after = README
        .split_once(MARKER)
        .expect("README has the quick start reservation")
        .1;
    let block = after
        .split_once("```sh\n")
        .expect("a sh block follows")
        .1
        .split_once("```")
        .expect("the block ends")
        .0;
    block.to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quick_start_reservation_works_as_written() {
    let block = quick_start_block();
    let (first, rest) = block.split_once('\n').unwrap();
    assert_eq!(
        first, "API=http://127.0.0.1:3000 UP=http://127.0.0.1:3001",
        "the block starts by naming the runner's default addresses"
    );
    let mut config = RunnerConfig::ephemeral(None);
    config.timing = seatgate::config::Timing::fast();
    let stack = start(config).await.expect("stack starts");
    let script = format!(
        "set -euo pipefail\nAPI={} UP={}\n{rest}",
        stack.api_url, stack.upstream_url
    );
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let out = tokio::task::spawn_blocking(move || {
        Command::new("bash")
            .arg("-c")
            .arg(script)
            .current_dir(root)
            .output()
            .expect("bash runs")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let last = stdout.lines().last().unwrap_or_default();
    let intent: serde_json::Value = serde_json::from_str(last).expect("the intent as JSON");
    assert_eq!(intent["status"], "SUCCEEDED", "{stdout}\n{stderr}");
    assert_eq!(intent["seat_id"], "A-12");
    let sim = stack.upstream.clone().expect("the in-process simulator");
    assert_eq!(sim.occupant("A-12").as_deref(), Some("u1"));
    stack.shutdown().await;
}
