//! A runner killed (SIGKILL) in the middle of a burst loses no intent.
//!
//! The upstream simulator runs in this test process, so it outlives the runner and keeps the
//! truth about seats and POSTs. The runner binary is started on a database file, killed while
//! confirms are in flight, and started again on the same file. Clients retry the confirms whose
//! answer they never got (confirm is idempotent per action). Then every intent must reach a
//! terminal state, with exactly one winner and at most one upstream write per seat.

use reqwest::{Client, StatusCode};
use seatgate_testkit::setup::{self, POSTS};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const SEATS: [&str; 3] = ["R-1", "R-2", "R-3"];
const USERS: usize = 60;

/// Starts the runner binary and waits for its `api:` line.
async fn runner(db: &Path, upstream: &str) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_seatgate-local"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--timing",
            "fast",
            "--upstream-url",
        ])
        .arg(upstream)
        .arg("--db")
        .arg(db)
        .env("SEATGATE_JWT_SECRET", "kill-restart-test-key")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("runner binary starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let api = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(url) = line.strip_prefix("api: ") {
                return url.trim().to_owned();
            }
        }
        panic!("runner exited before printing its api line");
    })
    .await
    .expect("runner prints its api line within 30 s");
    // Keep draining stdout so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, api)
}

struct User {
    token: String,
    action: String,
}

async fn json_call(req: reqwest::RequestBuilder) -> Result<(StatusCode, Value), reqwest::Error> {
    let resp = req.send().await?;
    let status = resp.status();
    Ok((status, resp.json().await.unwrap_or(Value::Null)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_runner_loses_no_intent() {
    let (sim, upstream) = setup::simulator().await;
    let dir = std::env::temp_dir().join(format!("seatgate-kill-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("seatgate.sqlite3");
    let http = Client::builder().pool_max_idle_per_host(0).build().unwrap();

    let (mut first, api) = runner(&db, &upstream).await;
    let mut users = Vec::new();
    for n in 0..USERS {
        let user_id = format!("k{n}");
        sim.register_user(&user_id, &format!("cred-{n}"));
        let (_, body) = json_call(
            http.post(format!("{api}/dev/token"))
                .json(&json!({ "sub": user_id })),
        )
        .await
        .unwrap();
        let token = body["token"].as_str().unwrap().to_owned();
        let (status, _) = json_call(
            http.put(format!("{api}/me/credential"))
                .bearer_auth(&token)
                .json(&json!({ "upstream_token": format!("cred-{n}") })),
        )
        .await
        .unwrap();
        assert_eq!(status, StatusCode::NO_CONTENT);
        let (status, body) = json_call(
            http.post(format!("{api}/actions"))
                .bearer_auth(&token)
                .json(&json!({ "kind": "reserve_seat", "seat_id": SEATS[n % SEATS.len()] })),
        )
        .await
        .unwrap();
        assert_eq!(status, StatusCode::CREATED);
        users.push(User {
            token,
            action: body["action_id"].as_str().unwrap().to_owned(),
        });
    }

    // The burst, and a SIGKILL while it is in flight.
    let confirms: Vec<_> = users
        .iter()
        .map(|u| {
            let req = http
                .post(format!("{api}/actions/{}/confirm", u.action))
                .bearer_auth(&u.token);
            tokio::spawn(json_call(req))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(15)).await;
    first.start_kill().unwrap();
    first.wait().await.unwrap();
    let mut intents: BTreeMap<usize, String> = BTreeMap::new();
    let mut unanswered = 0;
    for (i, confirm) in confirms.into_iter().enumerate() {
        match confirm.await.unwrap() {
            Ok((status, body)) if status == StatusCode::ACCEPTED => {
                intents.insert(i, body["intent_id"].as_str().unwrap().to_owned());
            }
            _ => unanswered += 1,
        }
    }
    let accepted_before_kill = intents.clone();

    // Restart on the same file; clients retry what went unanswered.
    let (second, api) = runner(&db, &upstream).await;
    for (i, u) in users.iter().enumerate() {
        let (status, body) = json_call(
            http.post(format!("{api}/actions/{}/confirm", u.action))
                .bearer_auth(&u.token),
        )
        .await
        .unwrap();
        assert!(
            status == StatusCode::OK || status == StatusCode::ACCEPTED,
            "confirm retry: {status} {body}"
        );
        let id = body["intent_id"].as_str().unwrap().to_owned();
        if let Some(before) = accepted_before_kill.get(&i) {
            assert_eq!(
                &id, before,
                "an accepted intent survived the kill unchanged"
            );
            assert_eq!(status, StatusCode::OK);
        }
        intents.insert(i, id);
    }

    // Every intent settles.
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut statuses: BTreeMap<usize, String> = BTreeMap::new();
    loop {
        statuses.clear();
        for (i, id) in &intents {
            let (status, body) = json_call(
                http.get(format!("{api}/intents/{id}"))
                    .bearer_auth(&users[*i].token),
            )
            .await
            .unwrap();
            assert_eq!(status, StatusCode::OK, "intent {id} is readable");
            statuses.insert(*i, body["status"].as_str().unwrap().to_owned());
        }
        let settled = statuses
            .values()
            .all(|s| !matches!(s.as_str(), "REQUESTED" | "RESERVING" | "WAITING_FOR_SEAT"));
        if settled || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(second);

    assert_eq!(intents.len(), USERS, "one intent per action");
    for (seat_index, seat) in SEATS.iter().enumerate() {
        let of_seat: Vec<&String> = statuses
            .iter()
            .filter(|(i, _)| *i % SEATS.len() == seat_index)
            .map(|(_, s)| s)
            .collect();
        let won = of_seat.iter().filter(|s| s.as_str() == "SUCCEEDED").count();
        assert_eq!(won, 1, "seat {seat}: exactly one winner, got {of_seat:?}");
        assert!(
            of_seat
                .iter()
                .all(|s| matches!(s.as_str(), "SUCCEEDED" | "FAILED_RACE" | "FAILED_UPSTREAM")),
            "seat {seat}: every intent terminal: {of_seat:?}"
        );
        assert!(sim.occupant(seat).is_some());
    }
    let posts = sim.stats().get(POSTS);
    assert!(
        posts <= SEATS.len() as u64,
        "at most one upstream write per seat, saw {posts} (unanswered before kill: {unanswered})"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
