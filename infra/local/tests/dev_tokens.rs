//! `POST /dev/token` signs any token, admin included, so it exists only where that is harmless:
//! the runner refuses to serve it on a non-loopback address (unless `--insecure-dev-tokens`),
//! and the deployed API has no such route (the api function's route table, which the template's
//! HTTP API routes are tested to equal, does not contain it).

use http::Method;
use seatgate_local::RunnerConfig;
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

#[tokio::test]
async fn the_stack_refuses_a_non_loopback_listen_address() {
    let config = RunnerConfig {
        listen: SocketAddr::from(([0, 0, 0, 0], 0)),
        ..RunnerConfig::ephemeral(None)
    };
    let Err(refused) = seatgate_local::start(config).await else {
        panic!("a stack on 0.0.0.0 must not start");
    };
    let message = format!("{refused:#}");
    assert!(
        message.contains("not a loopback address") && message.contains("--insecure-dev-tokens"),
        "{message}"
    );
}

#[test]
fn the_binary_exits_with_the_reason_on_a_non_loopback_address() {
    let dir = std::env::temp_dir().join(format!("seatgate-devtok-{}", uuid::Uuid::new_v4()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_seatgate-local"))
        .args(["--listen", "0.0.0.0:0", "--upstream-listen", "127.0.0.1:0"])
        .arg("--db")
        .arg(dir.join("db.sqlite3"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start seatgate-local");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("seatgate-local kept running on 0.0.0.0");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!status.success(), "it must exit non-zero");
    assert!(stderr.contains("--insecure-dev-tokens"), "stderr: {stderr}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_deployed_api_has_no_dev_token_route() {
    for method in [Method::POST, Method::GET] {
        assert!(
            seatgate::handlers::http::match_route(&method, "/dev/token").is_err(),
            "{method} /dev/token must not be a route of the api function"
        );
    }
}
