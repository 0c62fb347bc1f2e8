//! `outage`: the upstream goes down while confirms and reads arrive, and comes back; the
//! breaker's timeline laid over the simulator's call log, and each confirm's time to its end.
//!
//! This file runs the scenario phase by phase (the plan, the set-up, the outage and the
//! snapshot on their own tasks, the load, the final settle); what the run observed is turned
//! into figures, a verdict and the tables in `outage/report.rs`.

use super::*;

mod report;

/// The outage scenario; `Ok((correct, after, longest))`: the seconds from the upstream's
/// recovery to the terminal write (its `updated_at`) of the last confirm sent during the
/// outage, and the longest any confirm took from its send to its terminal write.
pub(super) async fn outage(
    cli: &Cli,
    fleet: &Fleet,
    client: &reqwest::Client,
) -> anyhow::Result<(bool, f64, f64)> {
    let rate = cli.rate.unwrap_or(25.0);
    ensure!(rate > 0.0, "--rate must be positive");
    let run = OutageRun {
        cli,
        fleet,
        client,
        rate,
        tag: tag(),
    };
    let plan = run.plan();
    let cast = run.set_up(plan.users).await?;

    let poller = BreakerPoller::start(Arc::clone(&fleet.breaker), cli.breaker_poll);
    let start = LoadStart {
        at: tokio::time::Instant::now(),
        wall_ms: wall_ms(),
    };
    let log_from = start.wall_ms as i64 - 1;
    let fault_task = run.schedule_outage(start);
    let confirmed: ConfirmLog = Arc::new(Mutex::new(Vec::new()));
    let snapshot_task = run.schedule_snapshot(fault_task, &confirmed, &cast.confirmers);
    let load = run.send_load(plan.slots, start, &cast, &confirmed).await?;
    let snapshot = snapshot_task.await??;
    let settled = run.settle(&load, &cast.confirmers, &snapshot).await?;

    // A little past the last phase change, so the closing probe's neighbours are in the log.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (seen, poll_errors) = poller.finish().await?;
    let calls = calls_since(client, &fleet.upstream, log_from).await?;
    let run_end_ms = wall_ms() as i64;
    let observed = Observed {
        start,
        load,
        snapshot,
        settled,
        seen,
        poll_errors,
        calls,
        run_end_ms,
    };
    Ok(report::report(&run, &observed))
}

/// What every phase of one outage run needs: the options, the fleet and the client, the
/// arrival rate (`--rate`, 25/s unless given) and the tag that keeps this run's users and
/// seats apart from any other's on the same store.
struct OutageRun<'a> {
    cli: &'a Cli,
    fleet: &'a Fleet,
    client: &'a reqwest::Client,
    rate: f64,
    tag: String,
}

/// The load's requests in arrival order, and how many confirming users they need.
struct Plan {
    slots: Vec<Slot>,
    users: usize,
}

/// Who sends the load: a confirming user per confirm slot, each on a seat and instance of
/// their own, and one reader for every read.
struct Cast {
    confirmers: Arc<Vec<Confirmer>>,
    reader: String,
}

/// The load's start, on the runtime's clock (the schedule's) and the wall clock (the call
/// log's and the intents' `updated_at`'s).
#[derive(Clone, Copy)]
struct LoadStart {
    at: tokio::time::Instant,
    wall_ms: f64,
}

impl LoadStart {
    /// Seconds since the load's start of a wall-clock moment: the report's `t`.
    fn rel_s(&self, ms: f64) -> f64 {
        (ms - self.wall_ms) / 1000.0
    }
}

/// The confirms answered so far, shared with the snapshot task, which sweeps those sent
/// during the outage while the load may still run.
type ConfirmLog = Arc<Mutex<Vec<ConfirmAnswer>>>;

/// The faults call's send and answer (wall-clock ms), from the task that armed the outage.
type FaultTask = tokio::task::JoinHandle<anyhow::Result<(f64, f64)>>;

/// Every answer the load got.
struct Load {
    reads: Vec<ReadAnswer>,
    confirms: Vec<ConfirmAnswer>,
}

/// The outage confirms' statuses at recovery + 5 s + one open interval. Times are wall-clock
/// ms.
struct Snapshot {
    /// When the faults call that started the outage was sent.
    fault_sent: f64,
    /// When the upstream came back: `fault_sent + --outage-for`.
    recovery: f64,
    taken_at: f64,
    /// How many confirms sent during the outage were swept.
    confirms: usize,
    tally: BTreeMap<String, usize>,
    lost: Vec<String>,
}

impl Snapshot {
    /// Which part of the run a request sent at `ms` (wall clock) fell in.
    fn period(&self, ms: f64) -> &'static str {
        if ms < self.fault_sent {
            "before"
        } else if ms < self.recovery {
            "outage"
        } else {
            "after"
        }
    }
}

/// How every accepted confirm ended, after the final settle.
struct Settled {
    /// How many confirms were accepted (and so swept).
    confirms: usize,
    tally: BTreeMap<String, usize>,
    lost: Vec<String>,
    not_terminal: usize,
    /// When the final sweep ended (wall-clock ms).
    settled_wall_ms: f64,
    /// From the upstream's recovery to the terminal write of the last confirm sent during the
    /// outage (s).
    after_recovery_s: f64,
    /// The longest any confirm took from its send to its terminal write (s).
    longest_s: f64,
}

/// Everything one run observed, for the report.
struct Observed {
    start: LoadStart,
    load: Load,
    snapshot: Snapshot,
    settled: Settled,
    /// The breaker states the poller saw, in order.
    seen: Vec<Seen>,
    poll_errors: usize,
    /// The simulator's call log from just before the load's start.
    calls: Vec<Call>,
    run_end_ms: i64,
}

impl OutageRun<'_> {
    /// Lays out the open model's schedule: confirms spread evenly at `--confirm-share`, the
    /// rest reads, a `--cold-read-share` of them on seats never read before (no cached answer
    /// to fall back on during the outage) and the others over `--read-seats` warm ones.
    fn plan(&self) -> Plan {
        let cli = self.cli;
        let tag = &self.tag;
        let total = (self.rate * cli.load_for.as_secs_f64()).round() as usize;
        let share = cli.confirm_share.clamp(0.0, 1.0);
        let cold_share = cli.cold_read_share.clamp(0.0, 1.0);
        let spread =
            |i: usize, share: f64| ((i + 1) as f64 * share).floor() > (i as f64 * share).floor();
        let mut slots = Vec::with_capacity(total);
        let (mut users, mut reads) = (0, 0);
        for i in 0..total {
            if spread(i, share) {
                slots.push(Slot::Confirm { user: users });
                users += 1;
            } else {
                let cold = spread(reads, cold_share);
                let seat = if cold {
                    format!("cold-{tag}-{reads}")
                } else {
                    format!("warm-{tag}-{}", reads % cli.read_seats.max(1))
                };
                slots.push(Slot::Read { seat, cold });
                reads += 1;
            }
        }
        eprintln!(
            "outage: {total} requests at {}/s over {:?} ({users} confirms, {reads} reads), upstream down from {:?} for {:?}",
            self.rate, cli.load_for, cli.outage_at, cli.outage_for
        );
        Plan { slots, users }
    }

    /// Set-up: users with credentials, each on its own seat, and warm readings, so the load
    /// measures the outage rather than first reads.
    async fn set_up(&self, users: usize) -> anyhow::Result<Cast> {
        let (cli, fleet, client, tag) = (self.cli, self.fleet, self.client, &self.tag);
        let names: Vec<(String, String)> = (0..users)
            .map(|c| (format!("bench-{tag}-c{c}"), format!("cred-{tag}-c{c}")))
            .collect();
        register_upstream(client, &fleet.upstream, &names).await?;
        let confirmers: Vec<Confirmer> = for_each(
            names.into_iter().enumerate().collect(),
            cli.setup_concurrency,
            |(c, (sub, cred))| async move {
                let api = fleet.api(c).to_owned();
                let token = member(client, &api, &sub, &cred).await?;
                Ok(Confirmer {
                    token,
                    seat: format!("conf-{tag}-{c}"),
                    api,
                })
            },
        )
        .await?;
        let confirmers = Arc::new(confirmers);
        let reader = dev_token(client, fleet.api(0), "outage-reader", false).await?;
        for s in 0..cli.read_seats.max(1) {
            let url = format!("{}/seats/warm-{tag}-{s}", fleet.api(s));
            let (status, _, _, detail) = read_seat(client, &url, &reader).await;
            ensure!(status == 200, "warm read: {detail:?}");
        }
        Ok(Cast { confirmers, reader })
    }

    /// The outage, on schedule: arms the upstream's faults `--outage-at` after the load's
    /// start, on a task of its own so the load keeps its pace.
    fn schedule_outage(&self, start: LoadStart) -> FaultTask {
        let client = self.client.clone();
        let upstream = self.fleet.upstream.clone();
        let (at, outage_for) = (self.cli.outage_at, self.cli.outage_for);
        let retry_after = self.cli.outage_retry_after;
        let t0 = start.at;
        tokio::spawn(async move {
            tokio::time::sleep_until(t0 + at).await;
            let sent = wall_ms();
            set_faults(
                &client,
                &upstream,
                json!({
                    "outage_for_ms": outage_for.as_millis() as u64,
                    "outage_retry_after_secs": retry_after,
                }),
            )
            .await?;
            Ok::<_, anyhow::Error>((sent, wall_ms()))
        })
    }

    /// The snapshot at recovery + 5 s + one open interval, on a task of its own: by then every
    /// confirm sent during the outage must be terminal or still REQUESTED, whatever the load
    /// is still doing.
    fn schedule_snapshot(
        &self,
        fault_task: FaultTask,
        confirmed: &ConfirmLog,
        confirmers: &Arc<Vec<Confirmer>>,
    ) -> tokio::task::JoinHandle<anyhow::Result<Snapshot>> {
        let client = self.client.clone();
        let confirmed = Arc::clone(confirmed);
        let confirmers = Arc::clone(confirmers);
        let outage_for = self.cli.outage_for.as_secs_f64() * 1000.0;
        let extra = 5_000.0 + self.fleet.timing.breaker_open_interval.as_secs_f64() * 1000.0;
        let limit = self.cli.setup_concurrency;
        tokio::spawn(async move {
            let (fault_sent, _) = fault_task.await??;
            let recovery = fault_sent + outage_for;
            let at = recovery + extra;
            let wait = (at - wall_ms()).max(0.0);
            tokio::time::sleep(Duration::from_secs_f64(wait / 1000.0)).await;
            let during: Vec<(String, String, String)> = confirmed
                .lock()
                .expect("confirm log")
                .iter()
                .filter(|c| c.sent_ms >= fault_sent && c.sent_ms < recovery)
                .filter_map(|c| {
                    c.intent_id.as_ref().map(|id| {
                        let who = &confirmers[c.user];
                        (who.api.clone(), who.token.clone(), id.clone())
                    })
                })
                .collect();
            let taken_at = wall_ms();
            let (tally, lost, _) = sweep(&client, &during, limit).await?;
            Ok::<_, anyhow::Error>(Snapshot {
                fault_sent,
                recovery,
                taken_at,
                confirms: during.len(),
                tally,
                lost,
            })
        })
    }

    /// The load: open model, each request on its own task at its scheduled time (at most
    /// `--max-in-flight` waiting for an answer), so a slow answer delays no later arrival.
    async fn send_load(
        &self,
        slots: Vec<Slot>,
        start: LoadStart,
        cast: &Cast,
        confirmed: &ConfirmLog,
    ) -> anyhow::Result<Load> {
        let semaphore = Arc::new(tokio::sync::Semaphore::new(
            self.cli.max_in_flight.unwrap_or(128).max(1),
        ));
        let mut read_tasks = Vec::new();
        let mut confirm_tasks = Vec::new();
        let mut late_ms: f64 = 0.0;
        for (i, slot) in slots.into_iter().enumerate() {
            let due = start.at + Duration::from_secs_f64(i as f64 / self.rate);
            tokio::time::sleep_until(due).await;
            late_ms = late_ms.max(
                tokio::time::Instant::now()
                    .duration_since(due)
                    .as_secs_f64()
                    * 1000.0,
            );
            let client = self.client.clone();
            let semaphore = Arc::clone(&semaphore);
            match slot {
                Slot::Read { seat, cold } => {
                    let url = format!("{}/seats/{seat}", self.fleet.api(i));
                    let token = cast.reader.clone();
                    read_tasks.push(tokio::spawn(async move {
                        let _permit = semaphore.acquire_owned().await.expect("semaphore");
                        let sent_ms = wall_ms();
                        let started = Instant::now();
                        let (status, stale, retry_after, detail) =
                            read_seat(&client, &url, &token).await;
                        ReadAnswer {
                            sent_ms,
                            status,
                            stale,
                            retry_after,
                            latency_ms: started.elapsed().as_secs_f64() * 1000.0,
                            detail,
                            cold,
                        }
                    }));
                }
                Slot::Confirm { user } => {
                    let confirmers = Arc::clone(&cast.confirmers);
                    let confirmed = Arc::clone(confirmed);
                    confirm_tasks.push(tokio::spawn(async move {
                        let _permit = semaphore.acquire_owned().await.expect("semaphore");
                        let sent_ms = wall_ms();
                        let started = Instant::now();
                        let outcome = prepare_and_confirm(&client, &confirmers[user]).await;
                        let answer = ConfirmAnswer {
                            user,
                            sent_ms,
                            latency_ms: started.elapsed().as_secs_f64() * 1000.0,
                            intent_id: outcome.as_ref().ok().cloned(),
                            error: outcome.err(),
                        };
                        confirmed.lock().expect("confirm log").push(answer.clone());
                        answer
                    }));
                }
            }
        }
        let mut reads = Vec::with_capacity(read_tasks.len());
        for t in read_tasks {
            reads.push(t.await?);
        }
        let mut confirms = Vec::with_capacity(confirm_tasks.len());
        for t in confirm_tasks {
            confirms.push(t.await?);
        }
        let load_end = wall_ms();
        eprintln!(
            "outage: load done in {:.1} s (latest start {:.0} ms behind schedule); waiting for the snapshot",
            (load_end - start.wall_ms) / 1000.0,
            late_ms
        );
        Ok(Load { reads, confirms })
    }

    /// Final settle: until every confirmed intent is terminal, bounded by `--settle-timeout`;
    /// then each one's own terminal write, for the time the outage's confirms took to end.
    async fn settle(
        &self,
        load: &Load,
        confirmers: &[Confirmer],
        snapshot: &Snapshot,
    ) -> anyhow::Result<Settled> {
        let (cli, client) = (self.cli, self.client);
        let accepted: Vec<&ConfirmAnswer> = load
            .confirms
            .iter()
            .filter(|c| c.intent_id.is_some())
            .collect();
        let all: Vec<(String, String, String)> = accepted
            .iter()
            .filter_map(|c| {
                c.intent_id.as_ref().map(|id| {
                    let who = &confirmers[c.user];
                    (who.api.clone(), who.token.clone(), id.clone())
                })
            })
            .collect();
        let settle_from = Instant::now();
        let (mut final_tally, mut final_lost, mut open) =
            sweep(client, &all, cli.setup_concurrency).await?;
        while !open.is_empty() && settle_from.elapsed() < cli.settle_timeout {
            tokio::time::sleep(Duration::from_secs(1)).await;
            (final_tally, final_lost, open) = sweep(client, &all, cli.setup_concurrency).await?;
        }
        let settled_wall_ms = wall_ms();
        // From each confirm's own terminal write (not when the sweep, which starts after the
        // load, saw it): the last of those sent during the outage, after the upstream came
        // back; and the longest any confirm took.
        let (fault_sent, recovery) = (snapshot.fault_sent, snapshot.recovery);
        let ended = terminal_writes_ms(client, &all, cli.setup_concurrency).await?;
        let after_recovery_s = accepted
            .iter()
            .zip(&ended)
            .filter(|(c, _)| c.sent_ms >= fault_sent && c.sent_ms < recovery)
            .filter_map(|(_, e)| *e)
            .reduce(f64::max)
            .map_or(f64::NAN, |last| (last - recovery) / 1000.0);
        let longest_s = accepted
            .iter()
            .zip(&ended)
            .filter_map(|(c, e)| e.map(|e| (e - c.sent_ms) / 1000.0))
            .reduce(f64::max)
            .unwrap_or(f64::NAN);
        Ok(Settled {
            confirms: all.len(),
            tally: final_tally,
            lost: final_lost,
            not_terminal: open.len(),
            settled_wall_ms,
            after_recovery_s,
            longest_s,
        })
    }
}
