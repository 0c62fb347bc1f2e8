//! `flash-sale --checkout`: seed 004's sale as a checkout, with a waiting list behind the
//! sell-out.
//!
//! Iteration `i` is due at `start + i / rate` (open model, as `flash-sale`) and is its own buyer:
//! it logs in, holds one seat (`POST /flights/{id}/holds`), pays (`--pay-for`, a sleep), then
//! confirms; a deterministic `--abandon-share` of the buyers (by `i`) never come back, so their
//! holds lapse after the flight's `--hold-ttl-secs`. A buyer who finds the flight sold out joins
//! its waiting list, polls the entry every 200 ms, and, once offered seats, pays and confirms the
//! offer; a waiter still unserved when the run ends leaves.
//!
//! Reported: seats sold within the sale's window (`--duration`) and in all; how long an abandoned
//! seat takes to reach the next buyer (a lapsed hold's deadline to the offer of its seat, and to
//! that buyer's confirm, pairing the n-th seat back with the n-th offer: single seats, returned
//! only by lapses once the flight sold out, served first come first served); whether the list was
//! served in order (offers made in the entries' order, nobody unserved ahead of anyone served).
//! Correctness (exit 1): no 5xx, no unexpected answer, `capacity = available + held + booked`
//! with booked equal to the confirms answered, nothing left held at the end, and the order.

use super::{Cli, Target, dev_token, percentiles, round};
use anyhow::{Context as _, ensure};
use seatgate::domain::Millis;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// A waiter's polls of its entry, apart.
const POLL_EVERY: Duration = Duration::from_millis(200);
/// Tasks in flight at most (a slot finding it full is counted as dropped).
const MAX_IN_FLIGHT: usize = 8_000;

/// How one buyer ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum End {
    /// Confirmed a hold it asked for.
    Bought,
    /// Held, then never came back: the hold lapses at `deadline`.
    Abandoned { deadline: Millis },
    /// Joined the list, was offered a seat, and confirmed it.
    BoughtFromList,
    /// Joined the list and was never served before the run ended; left.
    Unserved,
    /// An answer the scenario does not expect (the route, the status, the error code).
    Unexpected(String),
}

#[derive(Debug, Clone)]
struct Buyer {
    end: End,
    /// When its confirm was answered 201, since the start.
    sold_at: Option<Duration>,
    /// Its waiting-list entry, if it joined.
    entry_id: Option<String>,
    /// The offer's making (its deadline less the flight's offer TTL), on the server's clock.
    offered_at: Option<Millis>,
    /// When the buyer first saw its offer, since the start.
    offer_seen: Option<Duration>,
    /// Its confirm of the offer, on the server's clock (the booking's `created_at`).
    confirmed_at: Option<Millis>,
}

impl Buyer {
    fn new(end: End) -> Self {
        Buyer {
            end,
            sold_at: None,
            entry_id: None,
            offered_at: None,
            offer_seen: None,
            confirmed_at: None,
        }
    }
}

struct Sale {
    api: String,
    flight: String,
    pay_for: Duration,
    offer_ttl: Duration,
    /// Waiters give up at this instant.
    give_up_at: Instant,
    t0: Instant,
}

pub(crate) async fn run(cli: &Cli) -> anyhow::Result<bool> {
    ensure!(cli.capacity >= 1, "--capacity must be at least 1");
    ensure!(
        (0.0..=1.0).contains(&cli.abandon_share),
        "--abandon-share must be within 0..=1"
    );
    let rate = cli.rate.unwrap_or(super::flash::DEFAULT_RATE);
    ensure!(rate > 0.0, "--rate must be positive");
    let target = Target::open(cli).await?;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1_000)
        .timeout(Duration::from_secs(30))
        .build()?;
    let result = sale(cli, &target.api, &client, rate).await;
    target.close().await;
    result
}

async fn sale(cli: &Cli, api: &str, client: &reqwest::Client, rate: f64) -> anyhow::Result<bool> {
    let tag = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let flight = format!("checkout-{tag}");
    let admin = dev_token(client, api, "bench-admin", true).await?;
    super::flash::create_flight(
        client,
        api,
        &admin,
        json!({
            "flight_id": flight,
            "capacity": cli.capacity,
            "shards": cli.shards,
            "hold_ttl_secs": cli.hold_ttl_secs,
            "offer_ttl_secs": cli.offer_ttl_secs,
        }),
    )
    .await?;
    let scheduled = (rate * cli.duration.as_secs_f64()).round() as usize;
    // Long enough for the last abandoned hold to lapse, its seat to be offered, paid and
    // confirmed, with a reaper pass and some slack.
    let tail = Duration::from_secs(u64::from(cli.hold_ttl_secs) + 5) + cli.pay_for * 2;
    eprintln!(
        "flash-sale --checkout: {scheduled} buyers at {rate}/s over {:?} on {flight} ({} seats, {} shards); hold {} s, offer {} s, pay {:?}, {:.0}% abandon; waiters give up {tail:?} after the window",
        cli.duration,
        cli.capacity,
        cli.shards,
        cli.hold_ttl_secs,
        cli.offer_ttl_secs,
        cli.pay_for,
        cli.abandon_share * 100.0
    );
    let t0 = Instant::now();
    let sale = Arc::new(Sale {
        api: api.to_owned(),
        flight: flight.clone(),
        pay_for: cli.pay_for,
        offer_ttl: Duration::from_secs(u64::from(cli.offer_ttl_secs)),
        give_up_at: t0 + cli.duration + tail,
        t0,
    });
    let semaphore = Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT));
    let mut tasks = Vec::with_capacity(scheduled);
    let mut dropped = 0usize;
    for i in 0..scheduled {
        let due = t0 + Duration::from_secs_f64(i as f64 / rate);
        tokio::time::sleep_until(due).await;
        let late = Instant::now().saturating_duration_since(due) > cli.lateness;
        let Ok(permit) = Arc::clone(&semaphore).try_acquire_owned() else {
            dropped += 1;
            continue;
        };
        if late {
            dropped += 1;
            continue;
        }
        let (client, sale) = (client.clone(), Arc::clone(&sale));
        let abandons = abandons(i as u64, cli.abandon_share);
        let user = format!("co-{tag}-{i}");
        tasks.push(tokio::spawn(async move {
            let buyer = buy(&client, &sale, &user, abandons).await;
            drop(permit);
            buyer
        }));
    }
    let mut buyers = Vec::with_capacity(tasks.len());
    for t in tasks {
        buyers.push(t.await?);
    }
    let inventory = super::flash::read_flight(client, api, &admin, &flight).await?;
    report(cli, &buyers, dropped, &inventory)
}

/// Whether buyer `i` abandons: a fixed share, spread evenly over the run (a golden-ratio
/// sequence, so every stretch of buyers has about the share).
fn abandons(i: u64, share: f64) -> bool {
    const PHI: f64 = 0.618_033_988_749_894_9;
    ((i as f64 + 1.0) * PHI).fract() < share
}

async fn buy(client: &reqwest::Client, sale: &Sale, user: &str, abandons: bool) -> Buyer {
    match try_buy(client, sale, user, abandons).await {
        Ok(b) => b,
        Err(e) => Buyer::new(End::Unexpected(format!("{e:#}"))),
    }
}

async fn post(
    client: &reqwest::Client,
    url: String,
    token: &str,
    body: Value,
) -> anyhow::Result<(u16, Value)> {
    let r = client
        .post(url)
        .bearer_auth(token)
        .json(&body)
        .send()
        .await?;
    let status = r.status().as_u16();
    Ok((status, r.json().await.unwrap_or(Value::Null)))
}

async fn try_buy(
    client: &reqwest::Client,
    sale: &Sale,
    user: &str,
    abandons: bool,
) -> anyhow::Result<Buyer> {
    let (api, f) = (&sale.api, &sale.flight);
    let token = dev_token(client, api, user, false).await?;
    let unexpected = |what: &str, status: u16, body: &Value| {
        Buyer::new(End::Unexpected(format!(
            "{what}: {status} {}",
            body["error"]
        )))
    };
    // A buyer who finds seats back on sale while joining tries the hold again, at most twice.
    for _ in 0..3 {
        let (status, hold) = post(
            client,
            format!("{api}/flights/{f}/holds"),
            &token,
            json!({ "headCount": 1 }),
        )
        .await?;
        if status == 201 {
            let hold_id = hold["hold_id"].as_str().context("hold_id")?;
            if abandons {
                let deadline = millis(&hold["expires_at"])?;
                return Ok(Buyer::new(End::Abandoned { deadline }));
            }
            tokio::time::sleep(sale.pay_for).await;
            let url = format!("{api}/flights/{f}/holds/{hold_id}/confirm");
            let (status, body) = post(client, url, &token, json!({})).await?;
            if status != 201 {
                return Ok(unexpected("confirm", status, &body));
            }
            return Ok(Buyer {
                sold_at: Some(sale.t0.elapsed()),
                ..Buyer::new(End::Bought)
            });
        }
        if !(status == 409 && hold["error"] == "sold_out") {
            return Ok(unexpected("hold", status, &hold));
        }
        let (status, entry) = post(
            client,
            format!("{api}/flights/{f}/waitlist"),
            &token,
            json!({ "headCount": 1 }),
        )
        .await?;
        match status {
            201 => {
                let entry_id = entry["entry_id"].as_str().context("entry_id")?.to_owned();
                return wait(client, sale, &token, entry_id).await;
            }
            409 if entry["error"] == "seats_available" => continue,
            _ => return Ok(unexpected("join", status, &entry)),
        }
    }
    Ok(Buyer::new(End::Unexpected(
        "seats came and went three times".into(),
    )))
}

/// Polls the entry until it is offered seats (then pays and confirms) or the run ends (then
/// leaves; an entry offered meanwhile is taken instead).
async fn wait(
    client: &reqwest::Client,
    sale: &Sale,
    token: &str,
    entry_id: String,
) -> anyhow::Result<Buyer> {
    let (api, f) = (&sale.api, &sale.flight);
    let entry_url = format!("{api}/flights/{f}/waitlist/{entry_id}");
    let mut buyer = Buyer {
        entry_id: Some(entry_id),
        ..Buyer::new(End::Unserved)
    };
    let offer = loop {
        let entry: Value = client
            .get(&entry_url)
            .bearer_auth(token)
            .send()
            .await?
            .json()
            .await?;
        if !entry["offer"].is_null() {
            break entry["offer"].clone();
        }
        if Instant::now() >= sale.give_up_at {
            let r = client.delete(&entry_url).bearer_auth(token).send().await?;
            if r.status().is_success() {
                return Ok(buyer);
            }
            // Offered between the poll and the leave (`409 offer_made`): poll once more.
            continue;
        }
        tokio::time::sleep(POLL_EVERY).await;
    };
    buyer.offer_seen = Some(sale.t0.elapsed());
    let deadline = millis(&offer["expires_at"])?;
    buyer.offered_at = Some(deadline.minus(sale.offer_ttl));
    tokio::time::sleep(sale.pay_for).await;
    let hold_id = offer["hold_id"].as_str().context("offer hold_id")?;
    let url = format!("{api}/flights/{f}/holds/{hold_id}/confirm");
    let (status, booking) = post(client, url, token, json!({})).await?;
    if status != 201 {
        buyer.end = End::Unexpected(format!("offer confirm: {status} {}", booking["error"]));
        return Ok(buyer);
    }
    buyer.end = End::BoughtFromList;
    buyer.sold_at = Some(sale.t0.elapsed());
    buyer.confirmed_at = booking["created_at"]
        .as_str()
        .and_then(Millis::parse_rfc3339);
    Ok(buyer)
}

/// In order: along the entries' order (their UUIDv7 ids, the list's order), offers are made in
/// order and no unserved entry is ahead of a served one (every entry asks for one seat). The
/// entries served out of order.
fn served_out_of_order(entries: &mut [(&str, Option<Millis>)]) -> usize {
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let mut out_of_order = 0;
    let mut last_offer = Millis(i64::MIN);
    let mut seen_unserved = false;
    for (_, offered_at) in entries.iter() {
        match offered_at {
            Some(at) => {
                if *at < last_offer || seen_unserved {
                    out_of_order += 1;
                }
                last_offer = last_offer.max(*at);
            }
            None => seen_unserved = true,
        }
    }
    out_of_order
}

fn millis(v: &Value) -> anyhow::Result<Millis> {
    v.as_str()
        .and_then(Millis::parse_rfc3339)
        .with_context(|| format!("an RFC 3339 time, not {v}"))
}

fn report(cli: &Cli, buyers: &[Buyer], dropped: usize, inventory: &Value) -> anyhow::Result<bool> {
    let count = |p: &dyn Fn(&End) -> bool| buyers.iter().filter(|b| p(&b.end)).count();
    let bought = count(&|e| *e == End::Bought);
    let from_list = count(&|e| *e == End::BoughtFromList);
    let abandoned = count(&|e| matches!(e, End::Abandoned { .. }));
    let unserved = count(&|e| *e == End::Unserved);
    let unexpected: Vec<&String> = buyers
        .iter()
        .filter_map(|b| match &b.end {
            End::Unexpected(why) => Some(why),
            _ => None,
        })
        .collect();
    let sold = bought + from_list;
    let sold_in_window = buyers
        .iter()
        .filter(|b| b.sold_at.is_some_and(|t| t <= cli.duration))
        .count();
    let capacity = i64::from(cli.capacity);
    let available = inventory["available"].as_i64().context("available")?;
    let held = inventory["held"].as_i64().context("held")?;
    let booked = capacity - available - held;

    // The n-th seat back (deadlines in order) went to the n-th offer (in the order made).
    let mut deadlines: Vec<Millis> = buyers
        .iter()
        .filter_map(|b| match b.end {
            End::Abandoned { deadline } => Some(deadline),
            _ => None,
        })
        .collect();
    deadlines.sort();
    let mut served: Vec<&Buyer> = buyers.iter().filter(|b| b.offered_at.is_some()).collect();
    served.sort_by_key(|b| b.offered_at);
    let to_offer_ms: Vec<f64> = deadlines
        .iter()
        .zip(&served)
        .map(|(d, b)| (b.offered_at.unwrap().0 - d.0) as f64)
        .collect();
    let to_sale_ms: Vec<f64> = deadlines
        .iter()
        .zip(&served)
        .filter_map(|(d, b)| b.confirmed_at.map(|c| (c.0 - d.0) as f64))
        .collect();

    let mut entries: Vec<(&str, Option<Millis>)> = buyers
        .iter()
        .filter_map(|b| Some((b.entry_id.as_deref()?, b.offered_at)))
        .collect();
    let out_of_order = served_out_of_order(&mut entries);

    let offer_p = percentiles(&to_offer_ms);
    let sale_p = percentiles(&to_sale_ms);
    println!(
        "flash-sale --checkout ({} buyers, {dropped} dropped)",
        buyers.len()
    );
    println!("| | value |\n|---|---|");
    println!(
        "| seats sold within the sale's {:?} | {sold_in_window} of {capacity} |",
        cli.duration
    );
    println!("| seats sold in all | {sold} ({bought} holders, {from_list} from the list) |");
    println!("| abandoned holds (lapsed) | {abandoned} |");
    println!(
        "| waiters served / unserved (left at the end) | {} / {unserved} |",
        served.len()
    );
    println!(
        "| abandoned seat's deadline to the next buyer's offer, ms (n={}) | p50 {} p95 {} max {} |",
        to_offer_ms.len(),
        round(offer_p.p50),
        round(offer_p.p95),
        round(offer_p.max)
    );
    println!(
        "| ... to that buyer's confirm (pays {:?}), ms | p50 {} p95 {} max {} |",
        cli.pay_for,
        round(sale_p.p50),
        round(sale_p.p95),
        round(sale_p.max)
    );
    println!(
        "| list served in order | {} ({} entries, {out_of_order} out of order) |",
        if out_of_order == 0 { "yes" } else { "NO" },
        entries.len()
    );
    println!(
        "| the flight at the end | capacity {capacity} = available {available} + held {held} + booked {booked} |"
    );

    let mut why = Vec::new();
    if !unexpected.is_empty() {
        why.push(format!(
            "{} unexpected answers, first: {}",
            unexpected.len(),
            unexpected[0]
        ));
    }
    if booked != sold as i64 {
        why.push(format!("booked {booked} but {sold} confirms answered 201"));
    }
    if available < 0 || held != 0 {
        why.push(format!(
            "left at the end: available {available}, held {held}"
        ));
    }
    if out_of_order > 0 {
        why.push(format!("{out_of_order} entries served out of order"));
    }
    if served.len() > deadlines.len() {
        why.push(format!(
            "{} offers made but only {} seats came back",
            served.len(),
            deadlines.len()
        ));
    }
    for w in &why {
        eprintln!("flash-sale --checkout: {w}");
    }
    let line = json!({
        "scenario": "flash-sale-checkout",
        "backend": super::target_name(cli),
        "buyers": buyers.len(),
        "dropped": dropped,
        "capacity": capacity,
        "sold_in_window": sold_in_window,
        "sold": sold,
        "from_list": from_list,
        "abandoned": abandoned,
        "unserved": unserved,
        "deadline_to_offer_ms": { "n": to_offer_ms.len(), "p50": round(offer_p.p50), "p95": round(offer_p.p95), "max": round(offer_p.max) },
        "deadline_to_confirm_ms": { "n": to_sale_ms.len(), "p50": round(sale_p.p50), "p95": round(sale_p.p95), "max": round(sale_p.max) },
        "in_order": out_of_order == 0,
        "ok": why.is_empty(),
    });
    println!("{line}");
    Ok(why.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_abandon_share_is_kept_in_every_stretch_of_buyers() {
        for share in [0.0, 0.2, 0.5, 1.0] {
            let n = (0..1_000).filter(|&i| abandons(i, share)).count();
            assert!((n as f64 - 1_000.0 * share).abs() <= 1.0, "{share}: {n}");
            let stretch = (500..600).filter(|&i| abandons(i, share)).count();
            assert!(
                (stretch as f64 - 100.0 * share).abs() <= 2.0,
                "{share}: {stretch}"
            );
        }
    }

    #[test]
    fn a_list_served_out_of_order_is_counted() {
        let at = |ms| Some(Millis(ms));
        let mut in_order = [("e3", None), ("e1", at(10)), ("e2", at(10))];
        assert_eq!(served_out_of_order(&mut in_order), 0);
        // A later entry offered before an earlier one.
        let mut swapped = [("e1", at(20)), ("e2", at(10)), ("e3", None)];
        assert_eq!(served_out_of_order(&mut swapped), 1);
        // An entry served while one ahead of it was never served.
        let mut skipped = [("e1", None), ("e2", at(10))];
        assert_eq!(served_out_of_order(&mut skipped), 1);
    }
}
