//! A credential written through the API never appears in plain text anywhere the runner
//! leaves traces: its log lines (at debug level) and metric lines, the webhook events it posts,
//! and the SQLite file with its WAL and shared memory. The credential is still what reaches
//! the upstream: the reserve succeeds only if the worker opened it.

use axum::body::Bytes;
use reqwest::{Client, StatusCode};
use seatgate_testkit::setup;
use serde_json::Value;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

mod common;
use common::{confirm_seat, dev_token, put_credential};

const CREDENTIAL: &str = "plaintext-credential-9e2c51";

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

fn files_of(db: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    for suffix in ["", "-wal", "-shm"] {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        if let Ok(b) = std::fs::read(Path::new(&name)) {
            bytes.extend(b);
        }
    }
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_never_appears_in_logs_events_or_the_database_file() {
    let (sim, upstream) = setup::simulator().await;
    sim.register_user("u1", CREDENTIAL);

    // A webhook subscriber that keeps every body it is sent.
    let events: Arc<Mutex<Vec<String>>> = Arc::default();
    let kept = events.clone();
    let hook = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: Bytes| {
            let kept = kept.clone();
            async move {
                kept.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&body).into_owned());
                StatusCode::NO_CONTENT
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook_url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, hook).await });

    let dir = std::env::temp_dir().join(format!("seatgate-exposure-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("seatgate.sqlite3");
    let mut child = Command::new(env!("CARGO_BIN_EXE_seatgate-local"))
        .args(["--listen", "127.0.0.1:0", "--timing", "fast"])
        .args(["--upstream-url", &upstream, "--webhook-url", &hook_url])
        .arg("--db")
        .arg(&db)
        .env("SEATGATE_JWT_SECRET", "exposure-test-key")
        .env("SEATGATE_WEBHOOK_KEY", "exposure-webhook-key")
        .env("RUST_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("runner binary starts");
    let output: Arc<Mutex<Vec<String>>> = Arc::default();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let logged = output.clone();
    tokio::spawn(async move {
        let mut lines = stderr.lines();
        while let Ok(Some(line)) = lines.next_line().await {
            logged.lock().unwrap().push(line);
        }
    });
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let api = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = stdout.next_line().await.unwrap() {
            if let Some(url) = line.strip_prefix("api: ") {
                return url.trim().to_owned();
            }
        }
        panic!("runner exited before printing its api line");
    })
    .await
    .expect("the api line within 60 s");
    let printed = output.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = stdout.next_line().await {
            printed.lock().unwrap().push(line);
        }
    });

    let http = Client::new();
    let token = dev_token(&http, &api, "u1", false).await.unwrap();
    put_credential(&http, &api, &token, CREDENTIAL)
        .await
        .unwrap();
    let intent = confirm_seat(&http, &api, &token, "EXP-1").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let read: Value = http
            .get(format!("{api}/intents/{intent}"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if read["status"] == "SUCCEEDED" && !events.lock().unwrap().is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not SUCCEEDED with an event: {read}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = http.get(format!("{api}/__metrics")).send().await;
    child.kill().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;

    let lines = output.lock().unwrap().join("\n");
    assert!(
        lines.lines().count() > 10,
        "the runner logged at debug:\n{lines}"
    );
    assert!(
        !lines.contains(CREDENTIAL),
        "a log line holds the credential"
    );
    let posted = events.lock().unwrap().join("\n");
    assert!(
        posted.contains(&intent),
        "the event is the intent's: {posted}"
    );
    assert!(
        !posted.contains(CREDENTIAL),
        "an event holds the credential"
    );
    let bytes = files_of(&db);
    assert!(bytes.len() > 4096);
    assert!(
        !contains(&bytes, CREDENTIAL),
        "the database holds the credential"
    );
    let _ = std::fs::remove_dir_all(dir);
}
