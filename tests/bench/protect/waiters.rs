//! `waiters`: many waits on one seat that frees up, and how soon the first is served.

use super::*;

pub(super) async fn waiters(
    cli: &Cli,
    fleet: &Fleet,
    client: &reqwest::Client,
) -> anyhow::Result<bool> {
    let tag = tag();
    let n = cli.waiters;
    ensure!(n >= 1, "--waiters must be at least 1");
    let timing = fleet.timing.clone();
    let seat = format!("wanted-{tag}");
    let holder = (format!("bench-{tag}-u0"), format!("cred-{tag}-u0"));
    let names: Vec<(String, String)> = (1..=n)
        .map(|i| (format!("bench-{tag}-w{i}"), format!("cred-{tag}-w{i}")))
        .collect();
    let mut everyone = vec![holder.clone()];
    everyone.extend(names.iter().cloned());
    register_upstream(client, &fleet.upstream, &everyone).await?;

    // u0 takes the seat through the system.
    let u0 = member(client, fleet.api(0), &holder.0, &holder.1).await?;
    let c = Confirmer {
        token: u0.clone(),
        seat: seat.clone(),
        api: fleet.api(0).to_owned(),
    };
    let u0_intent = prepare_and_confirm(client, &c)
        .await
        .map_err(|e| anyhow::anyhow!("u0: {e}"))?;
    let deadline = Instant::now() + cli.settle_timeout;
    loop {
        match get_intent(client, fleet.api(0), &u0, &u0_intent).await? {
            Ok(i) if status_of(&i) == "SUCCEEDED" => break,
            Ok(i) if is_terminal_status(&status_of(&i)) => {
                bail!("u0's reservation ended {}", status_of(&i))
            }
            Ok(_) => {}
            Err(why) => bail!("u0's intent: {why}"),
        }
        ensure!(
            Instant::now() < deadline,
            "u0's reservation not done in time"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("waiters: u0 holds {seat}; setting up {n} waiters");

    let fleet_ref = fleet;
    let members: Vec<(String, String)> = for_each(
        names.into_iter().enumerate().collect(),
        cli.setup_concurrency,
        |(i, (sub, cred))| async move {
            let api = fleet_ref.api(i).to_owned();
            let token = member(client, &api, &sub, &cred).await?;
            Ok((api, token))
        },
    )
    .await?;

    let before = upstream_stats(client, &fleet.upstream).await?;
    let phase_start = wall_ms();
    let until = time::OffsetDateTime::now_utc() + cli.wait_deadline;
    let until = until
        .format(&time::format_description::well_known::Rfc3339)
        .context("formatting until")?;
    let seat_ref = &seat;
    let until_ref = &until;
    let waits: Vec<(String, String, String)> =
        for_each(members, cli.setup_concurrency, |(api, token)| async move {
            let body = expect_status(
                client
                    .post(format!("{api}/waits"))
                    .bearer_auth(&token)
                    .json(&json!({ "seat_id": seat_ref, "until": until_ref }))
                    .send()
                    .await?,
                reqwest::StatusCode::ACCEPTED,
                "register wait",
            )
            .await?;
            ensure!(
                body["status"] == "WAITING_FOR_SEAT",
                "wait registered as {}",
                body["status"]
            );
            let id = body["intent_id"].as_str().context("intent id")?.to_owned();
            Ok((api, token, id))
        })
        .await?;
    let registered = wall_ms();
    eprintln!(
        "waiters: {n} waits registered in {:.1} s; holding the seat {:?} more",
        (registered - phase_start) / 1000.0,
        cli.hold_for
    );
    tokio::time::sleep(cli.hold_for).await;

    // The release, upstream, as u0 leaving.
    let mid = upstream_stats(client, &fleet.upstream).await?;
    let release = wall_ms();
    let resp = client
        .delete(format!("{}/api/reservations/current", fleet.upstream))
        .bearer_auth(&holder.1)
        .send()
        .await?;
    ensure!(
        resp.status() == reqwest::StatusCode::NO_CONTENT,
        "release: {}",
        resp.status()
    );

    // First waiter SUCCEEDED: watch the reserve count, then look for the winner.
    let posts_mid = route_count(&mid, "POST /api/reservations");
    let watch_until = Instant::now() + cli.settle_timeout;
    let mut winner: Option<(String, f64)> = None;
    let mut sweeps_tally: BTreeMap<String, usize> = BTreeMap::new();
    while winner.is_none() && Instant::now() < watch_until {
        let stats = upstream_stats(client, &fleet.upstream).await?;
        if route_count(&stats, "POST /api/reservations") > posts_mid {
            let found = for_each(waits.iter().collect(), 64, |(api, token, id)| async move {
                Ok((id.clone(), get_intent(client, api, token, id).await?))
            })
            .await?;
            sweeps_tally.clear();
            for (id, intent) in found {
                let intent = intent.map_err(|e| anyhow::anyhow!("wait {id}: {e}"))?;
                let s = status_of(&intent);
                if s == "SUCCEEDED" {
                    let at = intent["updated_at"]
                        .as_str()
                        .and_then(crate::rfc3339_ms)
                        .context("updated_at")?;
                    if winner.as_ref().is_none_or(|(_, t)| at < *t) {
                        winner = Some((id.clone(), at));
                    }
                }
                *sweeps_tally.entry(s).or_default() += 1;
            }
            if winner.is_none() {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        } else {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let first_success_ms = winner.as_ref().map(|(_, at)| at - release);
    match &first_success_ms {
        Some(ms) => eprintln!("waiters: first waiter SUCCEEDED {ms:.0} ms after the release"),
        None => eprintln!(
            "waiters: no waiter SUCCEEDED within {:?}",
            cli.settle_timeout
        ),
    }
    tokio::time::sleep(cli.observe_after).await;

    // The end: how the waits stand, then cancel what still waits.
    let end = wall_ms();
    let after = upstream_stats(client, &fleet.upstream).await?;
    let (end_tally, lost, _) = sweep(client, &waits, cli.setup_concurrency).await?;
    let calls = calls_since(client, &fleet.upstream, phase_start as i64).await?;
    let seat_reads = |from: f64, to: f64| {
        calls
            .iter()
            .filter(|c| {
                c.route == "GET /api/seats" && (c.at_ms as f64) >= from && (c.at_ms as f64) < to
            })
            .map(|c| c.at_ms)
            .collect::<Vec<_>>()
    };
    let reads_before = seat_reads(phase_start, release);
    let reads_after = seat_reads(release, end);
    let ttl = timing.read_ttl;
    let span = |a: f64, b: f64| Duration::from_secs_f64(((b - a) / 1000.0).max(0.0));
    let bound_before = per_ttl_bound(span(phase_start, release), ttl);
    let bound_after = per_ttl_bound(span(release, end), ttl);
    let (most_before, gap_before) = call_spacing(&reads_before, ttl.as_millis() as i64);
    let (most_after, gap_after) = call_spacing(&reads_after, ttl.as_millis() as i64);
    let posts = route_count(&after, "POST /api/reservations")
        .saturating_sub(route_count(&before, "POST /api/reservations"));
    let charge_reads = route_count(&after, "GET /api/charge")
        .saturating_sub(route_count(&before, "GET /api/charge"));

    let still_waiting: Vec<&(String, String, String)> = {
        let statuses = for_each(
            waits.iter().collect(),
            cli.setup_concurrency,
            |w| async move { Ok((w, get_intent(client, &w.0, &w.1, &w.2).await?)) },
        )
        .await?;
        statuses
            .into_iter()
            .filter(|(_, s)| s.as_ref().is_ok_and(|i| status_of(i) == "WAITING_FOR_SEAT"))
            .map(|(w, _)| w)
            .collect()
    };
    let cancels = for_each(
        still_waiting,
        cli.setup_concurrency,
        |(api, token, id)| async move {
            let resp = client
                .delete(format!("{api}/intents/{id}"))
                .bearer_auth(token)
                .send()
                .await?;
            let status = resp.status();
            let text = resp.text().await.unwrap_or_default();
            Ok((status, text))
        },
    )
    .await?;
    let cancelled = cancels
        .iter()
        .filter(|(s, _)| *s == reqwest::StatusCode::OK)
        .count();
    let mut cancel_refused: BTreeMap<String, usize> = BTreeMap::new();
    for (s, text) in cancels
        .iter()
        .filter(|(s, _)| *s != reqwest::StatusCode::OK)
    {
        *cancel_refused.entry(s.as_u16().to_string()).or_default() += 1;
        if cancel_refused.values().sum::<usize>() <= 3 {
            eprintln!("cancel refused: {s}: {text}");
        }
    }
    let (after_cancel, _, _) = sweep(client, &waits, cli.setup_concurrency).await?;

    let succeeded = end_tally.get("SUCCEEDED").copied().unwrap_or(0);
    let acceptable_rest = end_tally
        .iter()
        .filter(|(s, _)| matches!(s.as_str(), "WAITING_FOR_SEAT" | "WAIT_EXPIRED"))
        .map(|(_, n)| *n)
        .sum::<usize>();
    let mut why = Vec::new();
    if posts != 1 {
        why.push(format!(
            "reserve POSTs during the waiters phase {posts} != 1"
        ));
    }
    if reads_before.len() as u64 > bound_before {
        why.push(format!(
            "upstream seat reads before the release {} > {bound_before}",
            reads_before.len()
        ));
    }
    if reads_after.len() as u64 > bound_after {
        why.push(format!(
            "upstream seat reads after the release {} > {bound_after}",
            reads_after.len()
        ));
    }
    if succeeded != 1 {
        why.push(format!("SUCCEEDED {succeeded} != 1"));
    }
    if succeeded + acceptable_rest != n {
        why.push(format!(
            "waits neither the one SUCCEEDED nor waiting/expired: {}",
            tally_line(&end_tally)
        ));
    }
    if !lost.is_empty() {
        why.push(format!("{} waits unreadable", lost.len()));
    }
    if first_success_ms.is_none() {
        why.push("no waiter got the seat".into());
    }
    let latency_ok = first_success_ms.is_some_and(|ms| ms <= 5_000.0);
    for w in &why {
        eprintln!("FAIL: {w}");
    }
    let correct = why.is_empty();
    let rows = vec![
        row("waits registered", n),
        row(
            "waits registered in (s)",
            format!("{:.1}", (registered - phase_start) / 1000.0),
        ),
        row(
            "seat held after registration (s)",
            format!("{:.1}", (release - registered) / 1000.0),
        ),
        target_row(
            "release -> first waiter SUCCEEDED (ms)",
            first_success_ms.map_or("none".into(), |ms| format!("{ms:.0}")),
            "<= 5000",
            latency_ok,
        ),
        target_row(
            "reserve POSTs, whole waiters phase",
            posts,
            "= 1",
            posts == 1,
        ),
        row("charge reads, whole waiters phase", charge_reads),
        target_row(
            format!(
                "upstream seat reads before release ({:.1} s)",
                (release - phase_start) / 1000.0
            ),
            reads_before.len(),
            format!("<= {bound_before}"),
            reads_before.len() as u64 <= bound_before,
        ),
        row(
            format!("  most in any {} ms / smallest gap (ms)", ttl.as_millis()),
            format!(
                "{most_before} / {}",
                gap_before.map_or("-".into(), |g| g.to_string())
            ),
        ),
        target_row(
            format!(
                "upstream seat reads after release ({:.1} s)",
                (end - release) / 1000.0
            ),
            reads_after.len(),
            format!("<= {bound_after}"),
            reads_after.len() as u64 <= bound_after,
        ),
        row(
            format!("  most in any {} ms / smallest gap (ms)", ttl.as_millis()),
            format!(
                "{most_after} / {}",
                gap_after.map_or("-".into(), |g| g.to_string())
            ),
        ),
        target_row(
            "waits at the end",
            tally_line(&end_tally),
            "1 SUCCEEDED",
            succeeded == 1 && succeeded + acceptable_rest == n,
        ),
        row("cancelled at the end", cancelled),
        row("cancel refused", tally_line(&cancel_refused)),
        row("waits after cancelling", tally_line(&after_cancel)),
    ];
    print_rows(
        &format!(
            "waiters  instances={} waiters={} deadline {:?} backend={:?} timing={:?} (read_ttl {:?}, backoff {:?}..{:?})",
            fleet.apis.len(),
            n,
            cli.wait_deadline,
            fleet.kind,
            timing_profile(cli),
            ttl,
            timing.wait_backoff_base,
            timing.wait_backoff_max
        ),
        &rows,
    );
    println!(
        "correctness: {}   latency target (first waiter within 5 s): {}",
        mark(correct),
        mark(latency_ok)
    );
    let line = json!({
        "scenario": "waiters",
        "backend": format!("{:?}", fleet.kind).to_lowercase(),
        "timing": format!("{:?}", timing_profile(cli)).to_lowercase(),
        "instances": fleet.apis.len(),
        "waiters": n,
        "release_to_first_success_ms": first_success_ms.map(round),
        "reserve_posts": posts,
        "charge_reads": charge_reads,
        "seat_reads_before_release": reads_before.len(),
        "bound_before": bound_before,
        "seat_reads_after_release": reads_after.len(),
        "bound_after": bound_after,
        "end": end_tally,
        "cancelled": cancelled,
        "cancel_refused": cancel_refused,
        "after_cancel": after_cancel,
        "correct": correct,
        "latency_target_met": latency_ok,
        "failures": why,
    });
    println!("{line}");
    Ok(correct)
}
