//! `waiters`: many waits on one seat that frees up, and how soon the first is served.

use super::*;

/// The waiters scenario, once on `fleet`; `Ok(false)` when a correctness target failed.
pub(super) async fn waiters(
    cli: &Cli,
    fleet: &Fleet,
    client: &reqwest::Client,
) -> anyhow::Result<bool> {
    let tag = tag();
    let n = cli.waiters;
    ensure!(n >= 1, "--waiters must be at least 1");
    let run = WaitersRun {
        cli,
        fleet,
        client,
        n,
        seat: format!("wanted-{tag}"),
        holder: (format!("bench-{tag}-u0"), format!("cred-{tag}-u0")),
    };
    let names: Vec<(String, String)> = (1..=n)
        .map(|i| (format!("bench-{tag}-w{i}"), format!("cred-{tag}-w{i}")))
        .collect();
    let mut everyone = vec![run.holder.clone()];
    everyone.extend(names.iter().cloned());
    register_upstream(client, &fleet.upstream, &everyone).await?;

    run.take_seat().await?;
    eprintln!("waiters: u0 holds {}; setting up {n} waiters", run.seat);
    let members = run.members(names).await?;
    let waits = run.register_waits(members).await?;
    tokio::time::sleep(cli.hold_for).await;
    let release = run.release().await?;
    let first_success_ms = run.first_success_ms(&waits, &release).await?;
    tokio::time::sleep(cli.observe_after).await;
    let end = run.observe_end(&waits, release.at_ms).await?;
    let cancels = run.cancel_waiting(&waits).await?;
    let report = WaitersReport {
        run: &run,
        waits: &waits,
        release_ms: release.at_ms,
        first_success_ms,
        end: &end,
        cancels: &cancels,
    };
    Ok(report.print())
}

/// What every phase of one waiters run needs: the options, the fleet, the client, how many
/// wait (`--waiters`), the wanted seat and its holder u0 (user, upstream credential).
struct WaitersRun<'a> {
    cli: &'a Cli,
    fleet: &'a Fleet,
    client: &'a reqwest::Client,
    n: usize,
    seat: String,
    holder: (String, String),
}

/// The waits as registered. Times are wall-clock ms.
struct Waits {
    /// The simulator's counts before the waiters phase, for its reserve POSTs and charge reads.
    before: Value,
    /// When the waiters phase began (the call log is read from here).
    phase_start_ms: f64,
    /// When the last wait was registered.
    registered_ms: f64,
    /// Each wait as (instance, token, intent id).
    list: Vec<(String, String, String)>,
}

/// The seat freed upstream, as u0 leaving.
struct Release {
    /// The simulator's counts just before, so a new reserve POST shows a waiter trying.
    mid: Value,
    at_ms: f64,
}

/// How the waits stood at the end, and the upstream calls over the whole phase.
struct End {
    /// When the end was taken (wall-clock ms).
    at_ms: f64,
    tally: BTreeMap<String, usize>,
    lost: Vec<String>,
    reads: SeatReads,
    posts: u64,
    charge_reads: u64,
}

/// The upstream's seat reads before and after the release, against one per `read_ttl`.
struct SeatReads {
    ttl: Duration,
    before: Vec<i64>,
    after: Vec<i64>,
    bound_before: u64,
    bound_after: u64,
    most_before: usize,
    gap_before: Option<i64>,
    most_after: usize,
    gap_after: Option<i64>,
}

/// The waits still waiting at the end, cancelled so nothing outlives the run.
struct Cancels {
    cancelled: usize,
    /// Refused cancels by HTTP status.
    refused: BTreeMap<String, usize>,
    after_cancel: BTreeMap<String, usize>,
}

impl WaitersRun<'_> {
    /// u0 takes the seat through the system, so every waiter waits on a seat really held.
    async fn take_seat(&self) -> anyhow::Result<()> {
        let (cli, fleet, client) = (self.cli, self.fleet, self.client);
        let u0 = member(client, fleet.api(0), &self.holder.0, &self.holder.1).await?;
        let c = Confirmer {
            token: u0.clone(),
            seat: self.seat.clone(),
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
        Ok(())
    }

    /// The waiters' tokens with their credentials stored, spread over the instances: (instance,
    /// token) each.
    async fn members(&self, names: Vec<(String, String)>) -> anyhow::Result<Vec<(String, String)>> {
        let (fleet, client) = (self.fleet, self.client);
        for_each(
            names.into_iter().enumerate().collect(),
            self.cli.setup_concurrency,
            |(i, (sub, cred))| async move {
                let api = fleet.api(i).to_owned();
                let token = member(client, &api, &sub, &cred).await?;
                Ok((api, token))
            },
        )
        .await
    }

    /// Every waiter registers a wait on the held seat until `--wait-deadline`.
    async fn register_waits(&self, members: Vec<(String, String)>) -> anyhow::Result<Waits> {
        let (cli, client) = (self.cli, self.client);
        let before = upstream_stats(client, &self.fleet.upstream).await?;
        let phase_start_ms = wall_ms();
        let until = time::OffsetDateTime::now_utc() + cli.wait_deadline;
        let until = until
            .format(&time::format_description::well_known::Rfc3339)
            .context("formatting until")?;
        let seat_ref = &self.seat;
        let until_ref = &until;
        let list: Vec<(String, String, String)> =
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
        let registered_ms = wall_ms();
        eprintln!(
            "waiters: {} waits registered in {:.1} s; holding the seat {:?} more",
            self.n,
            (registered_ms - phase_start_ms) / 1000.0,
            cli.hold_for
        );
        Ok(Waits {
            before,
            phase_start_ms,
            registered_ms,
            list,
        })
    }

    /// The release, upstream, as u0 leaving: the system learns of it only by reading the seat.
    async fn release(&self) -> anyhow::Result<Release> {
        let (client, upstream) = (self.client, &self.fleet.upstream);
        let mid = upstream_stats(client, upstream).await?;
        let at_ms = wall_ms();
        let resp = client
            .delete(format!("{upstream}/api/reservations/current"))
            .bearer_auth(&self.holder.1)
            .send()
            .await?;
        ensure!(
            resp.status() == reqwest::StatusCode::NO_CONTENT,
            "release: {}",
            resp.status()
        );
        Ok(Release { mid, at_ms })
    }

    /// From the release to the first waiter SUCCEEDED (its `updated_at`), in ms: watches the
    /// reserve count, and sweeps the waits for the winner only once it moved, so the watching
    /// adds no load to the store until then. `None` if none won within `--settle-timeout`.
    async fn first_success_ms(
        &self,
        waits: &Waits,
        release: &Release,
    ) -> anyhow::Result<Option<f64>> {
        let (cli, client, upstream) = (self.cli, self.client, &self.fleet.upstream);
        let posts_mid = route_count(&release.mid, "POST /api/reservations");
        let watch_until = Instant::now() + cli.settle_timeout;
        let mut winner: Option<(String, f64)> = None;
        let mut sweeps_tally: BTreeMap<String, usize> = BTreeMap::new();
        while winner.is_none() && Instant::now() < watch_until {
            let stats = upstream_stats(client, upstream).await?;
            if route_count(&stats, "POST /api/reservations") > posts_mid {
                let found = for_each(
                    waits.list.iter().collect(),
                    64,
                    |(api, token, id)| async move {
                        Ok((id.clone(), get_intent(client, api, token, id).await?))
                    },
                )
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
        let first_success_ms = winner.as_ref().map(|(_, at)| at - release.at_ms);
        match &first_success_ms {
            Some(ms) => eprintln!("waiters: first waiter SUCCEEDED {ms:.0} ms after the release"),
            None => eprintln!(
                "waiters: no waiter SUCCEEDED within {:?}",
                cli.settle_timeout
            ),
        }
        Ok(first_success_ms)
    }

    /// The end: how the waits stand, and the upstream's calls over the whole phase.
    async fn observe_end(&self, waits: &Waits, release_ms: f64) -> anyhow::Result<End> {
        let (cli, client, upstream) = (self.cli, self.client, &self.fleet.upstream);
        let at_ms = wall_ms();
        let after = upstream_stats(client, upstream).await?;
        let (tally, lost, _) = sweep(client, &waits.list, cli.setup_concurrency).await?;
        let calls = calls_since(client, upstream, waits.phase_start_ms as i64).await?;
        let reads = SeatReads::new(
            &calls,
            self.fleet.timing.read_ttl,
            [waits.phase_start_ms, release_ms, at_ms],
        );
        let grew = |route: &str| {
            route_count(&after, route).saturating_sub(route_count(&waits.before, route))
        };
        Ok(End {
            at_ms,
            tally,
            lost,
            reads,
            posts: grew("POST /api/reservations"),
            charge_reads: grew("GET /api/charge"),
        })
    }

    /// Cancels what still waits, so no wait outlives the run, and sweeps once more.
    async fn cancel_waiting(&self, waits: &Waits) -> anyhow::Result<Cancels> {
        let (limit, client) = (self.cli.setup_concurrency, self.client);
        let still_waiting: Vec<&(String, String, String)> = {
            let statuses = for_each(waits.list.iter().collect(), limit, |w| async move {
                Ok((w, get_intent(client, &w.0, &w.1, &w.2).await?))
            })
            .await?;
            statuses
                .into_iter()
                .filter(|(_, s)| s.as_ref().is_ok_and(|i| status_of(i) == "WAITING_FOR_SEAT"))
                .map(|(w, _)| w)
                .collect()
        };
        let cancels = for_each(still_waiting, limit, |(api, token, id)| async move {
            let resp = client
                .delete(format!("{api}/intents/{id}"))
                .bearer_auth(token)
                .send()
                .await?;
            let status = resp.status();
            let text = resp.text().await.unwrap_or_default();
            Ok((status, text))
        })
        .await?;
        let cancelled = cancels
            .iter()
            .filter(|(s, _)| *s == reqwest::StatusCode::OK)
            .count();
        let mut refused: BTreeMap<String, usize> = BTreeMap::new();
        for (s, text) in cancels
            .iter()
            .filter(|(s, _)| *s != reqwest::StatusCode::OK)
        {
            *refused.entry(s.as_u16().to_string()).or_default() += 1;
            if refused.values().sum::<usize>() <= 3 {
                eprintln!("cancel refused: {s}: {text}");
            }
        }
        let (after_cancel, _, _) = sweep(client, &waits.list, limit).await?;
        Ok(Cancels {
            cancelled,
            refused,
            after_cancel,
        })
    }
}

impl SeatReads {
    /// The `GET /api/seats` calls of `calls` before and after the release; `[start, release,
    /// end]` are wall-clock ms.
    fn new(calls: &[Call], ttl: Duration, [start, release, end]: [f64; 3]) -> SeatReads {
        let seat_reads = |from: f64, to: f64| {
            calls
                .iter()
                .filter(|c| {
                    c.route == "GET /api/seats" && (c.at_ms as f64) >= from && (c.at_ms as f64) < to
                })
                .map(|c| c.at_ms)
                .collect::<Vec<_>>()
        };
        let before = seat_reads(start, release);
        let after = seat_reads(release, end);
        let span = |a: f64, b: f64| Duration::from_secs_f64(((b - a) / 1000.0).max(0.0));
        let bound_before = per_ttl_bound(span(start, release), ttl);
        let bound_after = per_ttl_bound(span(release, end), ttl);
        let (most_before, gap_before) = call_spacing(&before, ttl.as_millis() as i64);
        let (most_after, gap_after) = call_spacing(&after, ttl.as_millis() as i64);
        SeatReads {
            ttl,
            before,
            after,
            bound_before,
            bound_after,
            most_before,
            gap_before,
            most_after,
            gap_after,
        }
    }
}

/// Everything the waiters' verdict, table and JSON line are drawn from.
struct WaitersReport<'a> {
    run: &'a WaitersRun<'a>,
    waits: &'a Waits,
    release_ms: f64,
    first_success_ms: Option<f64>,
    end: &'a End,
    cancels: &'a Cancels,
}

impl WaitersReport<'_> {
    /// Prints the verdict, the table and the JSON line; whether the run was correct.
    fn print(&self) -> bool {
        let why = self.failures();
        let latency_ok = self.latency_ok();
        for w in &why {
            eprintln!("FAIL: {w}");
        }
        let correct = why.is_empty();
        print_rows(&self.title(), &self.rows());
        println!(
            "correctness: {}   latency target (first waiter within 5 s): {}",
            mark(correct),
            mark(latency_ok)
        );
        println!("{}", self.json(correct, why));
        correct
    }

    /// Waits that got the seat: exactly one should.
    fn succeeded(&self) -> usize {
        self.end.tally.get("SUCCEEDED").copied().unwrap_or(0)
    }

    /// Waits that lost fairly: still waiting, or expired.
    fn acceptable_rest(&self) -> usize {
        self.end
            .tally
            .iter()
            .filter(|(s, _)| matches!(s.as_str(), "WAITING_FOR_SEAT" | "WAIT_EXPIRED"))
            .map(|(_, n)| *n)
            .sum::<usize>()
    }

    /// The latency target: the first waiter served within 5 s of the release.
    fn latency_ok(&self) -> bool {
        self.first_success_ms.is_some_and(|ms| ms <= 5_000.0)
    }

    /// The correctness targets missed, each said in a line; none when the run is correct.
    fn failures(&self) -> Vec<String> {
        let (n, end, reads) = (self.run.n, self.end, &self.end.reads);
        let (posts, succeeded) = (end.posts, self.succeeded());
        let mut why = Vec::new();
        if posts != 1 {
            why.push(format!(
                "reserve POSTs during the waiters phase {posts} != 1"
            ));
        }
        if reads.before.len() as u64 > reads.bound_before {
            why.push(format!(
                "upstream seat reads before the release {} > {}",
                reads.before.len(),
                reads.bound_before
            ));
        }
        if reads.after.len() as u64 > reads.bound_after {
            why.push(format!(
                "upstream seat reads after the release {} > {}",
                reads.after.len(),
                reads.bound_after
            ));
        }
        if succeeded != 1 {
            why.push(format!("SUCCEEDED {succeeded} != 1"));
        }
        if succeeded + self.acceptable_rest() != n {
            why.push(format!(
                "waits neither the one SUCCEEDED nor waiting/expired: {}",
                tally_line(&end.tally)
            ));
        }
        if !end.lost.is_empty() {
            why.push(format!("{} waits unreadable", end.lost.len()));
        }
        if self.first_success_ms.is_none() {
            why.push("no waiter got the seat".into());
        }
        why
    }

    /// The table's heading: the run's shape and the timing it waited by.
    fn title(&self) -> String {
        let (cli, fleet) = (self.run.cli, self.run.fleet);
        let timing = &fleet.timing;
        format!(
            "waiters  instances={} waiters={} deadline {:?} backend={:?} timing={:?} (read_ttl {:?}, backoff {:?}..{:?})",
            fleet.apis.len(),
            self.run.n,
            cli.wait_deadline,
            fleet.kind,
            timing_profile(cli),
            timing.read_ttl,
            timing.wait_backoff_base,
            timing.wait_backoff_max
        )
    }

    /// The table: the registration, the first success, the upstream calls against their
    /// bounds, and how the waits ended.
    fn rows(&self) -> Vec<(String, String, String, String)> {
        let (n, end, reads, cancels) = (self.run.n, self.end, &self.end.reads, self.cancels);
        let (phase_start, registered) = (self.waits.phase_start_ms, self.waits.registered_ms);
        let release = self.release_ms;
        let succeeded = self.succeeded();
        let ttl = reads.ttl;
        vec![
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
                self.first_success_ms
                    .map_or("none".into(), |ms| format!("{ms:.0}")),
                "<= 5000",
                self.latency_ok(),
            ),
            target_row(
                "reserve POSTs, whole waiters phase",
                end.posts,
                "= 1",
                end.posts == 1,
            ),
            row("charge reads, whole waiters phase", end.charge_reads),
            target_row(
                format!(
                    "upstream seat reads before release ({:.1} s)",
                    (release - phase_start) / 1000.0
                ),
                reads.before.len(),
                format!("<= {}", reads.bound_before),
                reads.before.len() as u64 <= reads.bound_before,
            ),
            row(
                format!("  most in any {} ms / smallest gap (ms)", ttl.as_millis()),
                format!(
                    "{} / {}",
                    reads.most_before,
                    reads.gap_before.map_or("-".into(), |g| g.to_string())
                ),
            ),
            target_row(
                format!(
                    "upstream seat reads after release ({:.1} s)",
                    (end.at_ms - release) / 1000.0
                ),
                reads.after.len(),
                format!("<= {}", reads.bound_after),
                reads.after.len() as u64 <= reads.bound_after,
            ),
            row(
                format!("  most in any {} ms / smallest gap (ms)", ttl.as_millis()),
                format!(
                    "{} / {}",
                    reads.most_after,
                    reads.gap_after.map_or("-".into(), |g| g.to_string())
                ),
            ),
            target_row(
                "waits at the end",
                tally_line(&end.tally),
                "1 SUCCEEDED",
                succeeded == 1 && succeeded + self.acceptable_rest() == n,
            ),
            row("cancelled at the end", cancels.cancelled),
            row("cancel refused", tally_line(&cancels.refused)),
            row("waits after cancelling", tally_line(&cancels.after_cancel)),
        ]
    }

    /// The run's JSON line, for scripts comparing runs.
    fn json(&self, correct: bool, why: Vec<String>) -> Value {
        let (cli, fleet, end, reads) = (self.run.cli, self.run.fleet, self.end, &self.end.reads);
        json!({
            "scenario": "waiters",
            "backend": format!("{:?}", fleet.kind).to_lowercase(),
            "timing": format!("{:?}", timing_profile(cli)).to_lowercase(),
            "instances": fleet.apis.len(),
            "waiters": self.run.n,
            "release_to_first_success_ms": self.first_success_ms.map(round),
            "reserve_posts": end.posts,
            "charge_reads": end.charge_reads,
            "seat_reads_before_release": reads.before.len(),
            "bound_before": reads.bound_before,
            "seat_reads_after_release": reads.after.len(),
            "bound_after": reads.bound_after,
            "end": end.tally,
            "cancelled": self.cancels.cancelled,
            "cancel_refused": self.cancels.refused,
            "after_cancel": self.cancels.after_cancel,
            "correct": correct,
            "latency_target_met": self.latency_ok(),
            "failures": why,
        })
    }
}
