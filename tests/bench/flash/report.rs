//! What a step prints: its line, its table, and the seed's table beside it.

use super::*;

/// The latency target of this rate, if one is defined: (text, met).
pub(super) fn latency_target(s: &StepResult) -> Option<(String, bool)> {
    let p95 = s.booking_all().p95;
    if s.rate == 400.0 {
        Some(("booking p95 <= 10 ms".into(), p95 <= 10.0))
    } else if s.rate == 2000.0 {
        Some((
            "booking p95 <= 20 ms, 0 dropped".into(),
            p95 <= 20.0 && s.dropped() == 0,
        ))
    } else {
        None
    }
}

pub(super) fn print_step_line(s: &StepResult) {
    let b = s.booking_all();
    println!(
        "{}/s: started {} of {} ({:.0}/s achieved), dropped {} | 201={} 409={} other4xx={} 5xx={} transport={} | stored {} available {} | booking p50/p95/p99 {:.1}/{:.1}/{:.1} ms | iteration p95 {:.1} ms | {}",
        s.rate,
        s.started,
        s.scheduled,
        s.achieved_rate(),
        s.dropped(),
        s.created(),
        s.sold_out() + s.conflict_other(),
        s.client(),
        s.server(),
        s.transport(),
        s.stored,
        s.available,
        b.p50,
        b.p95,
        b.p99,
        s.iteration().p95,
        if s.correctness().is_empty() {
            "correct"
        } else {
            "INCORRECT"
        }
    );
}

pub(super) fn print_step(cli: &Cli, s: &StepResult) {
    let mark = |ok: bool| if ok { "PASS" } else { "FAIL" };
    let capacity = s.capacity as usize;
    let mut rows: Vec<(String, String, String, String)> = Vec::new();
    let mut row = |name: &str, value: String, target: String, verdict: &str| {
        rows.push((name.into(), value, target, verdict.into()))
    };
    row(
        "iterations scheduled",
        s.scheduled.to_string(),
        String::new(),
        "",
    );
    row(
        "iterations started",
        s.started.to_string(),
        String::new(),
        "",
    );
    row(
        "dropped (late / cap full)",
        format!("{} / {}", s.dropped_late, s.dropped_full),
        String::new(),
        "",
    );
    row(
        "achieved rate (it/s)",
        format!("{:.1}", s.achieved_rate()),
        format!("= {}", s.rate),
        "",
    );
    row(
        "max scheduler lag (ms)",
        format!("{:.1}", s.max_lag_ms),
        format!("drop past {}", cli.lateness.as_millis()),
        "",
    );
    row("201 booked", s.created().to_string(), String::new(), "");
    row("409 sold_out", s.sold_out().to_string(), String::new(), "");
    row(
        "409 other",
        s.conflict_other().to_string(),
        String::new(),
        "",
    );
    row("other 4xx", s.client().to_string(), String::new(), "");
    row(
        "5xx",
        s.server().to_string(),
        "= 0".into(),
        mark(s.server() == 0),
    );
    row(
        "transport errors",
        s.transport().to_string(),
        String::new(),
        "",
    );
    row(
        "login failures",
        s.login_failed().to_string(),
        String::new(),
        "",
    );
    let sold_target = if s.demand_exceeds_capacity() {
        format!("= 201s = {capacity}")
    } else {
        "= 201s".into()
    };
    let sold_ok = s.stored == s.created()
        && s.stored_missing_201 == 0
        && s.created_not_stored == 0
        && (!s.demand_exceeds_capacity() || s.stored == capacity);
    row(
        "bookings stored",
        s.stored.to_string(),
        sold_target,
        mark(sold_ok),
    );
    row(
        "no oversell",
        format!("{} <= {capacity}", s.stored.max(s.created())),
        "<= capacity".into(),
        mark(s.stored <= capacity && s.created() <= capacity),
    );
    row(
        "available",
        s.available.to_string(),
        format!("= {}", capacity as i64 - s.stored as i64),
        mark(s.available == capacity as i64 - s.stored as i64),
    );
    let target = latency_target(s);
    for (name, p) in [
        ("booking (all answers)", s.booking_all()),
        ("booking 201", s.booking(|o| *o == Outcome::Created)),
        ("booking 409", s.booking(|o| *o == Outcome::SoldOut)),
        ("login", s.login()),
        ("login+booking", s.iteration()),
    ] {
        let first = name == "booking (all answers)";
        let (t, v) = match (&target, first) {
            (Some((t, ok)), true) => (t.clone(), mark(*ok)),
            _ => (String::new(), ""),
        };
        row(
            &format!("{name} p50/p95/p99 ms"),
            format!("{:.1}/{:.1}/{:.1}", p.p50, p.p95, p.p99),
            t,
            v,
        );
    }
    println!();
    println!(
        "flash-sale  rate={}/s  duration={:?}  capacity={}  shards={}  users={}  target={}  flight={}",
        s.rate,
        s.duration,
        s.capacity,
        s.shards,
        cli.users,
        crate::target_name(cli),
        s.flight_id
    );
    println!("{:<30} {:>18}  {:<24} verdict", "metric", "value", "target");
    println!("{}", "-".repeat(84));
    for (name, value, target, verdict) in rows {
        println!("{name:<30} {value:>18}  {target:<24} {verdict}");
    }
    println!("{}", "-".repeat(84));
    println!(
        "correctness: {}   latency target: {}",
        mark(s.correctness().is_empty()),
        target.map_or("n/a (defined at 400/s and 2000/s)".to_owned(), |(t, ok)| {
            format!("{} ({t})", mark(ok))
        })
    );
}

/// Seed 004's results beside this run's.
pub(super) fn print_seed_table(s: &StepResult) {
    let b = s.booking_all();
    println!();
    println!(
        "beside seed 004 (k6 constant-arrival-rate 400 it/s for 10 s, login + booking, 300 seats)"
    );
    println!(
        "{:<28} {:>14}  {:<44}",
        "approach", "sold of 300", "latency"
    );
    println!("{}", "-".repeat(90));
    for (name, sold, latency) in [
        ("seed: synchronized", "497 (oversold)", "-"),
        ("seed: optimistic lock", "13", "-"),
        (
            "seed: pessimistic lock",
            "300",
            "~350 ms (k6 http_req_duration)",
        ),
        ("seed: MySQL named lock", "300", "~303 ms"),
        ("seed: Redis spin lock", "300", "~1 s"),
        ("seed: Redisson", "300", "~378 ms"),
    ] {
        println!("{name:<28} {sold:>14}  {latency:<44}");
    }
    println!(
        "{:<28} {:>14}  {:<44}",
        format!("seatgate ({}/s)", s.rate),
        format!("{} of {}", s.stored, s.capacity),
        format!(
            "booking p50/p95 {:.1}/{:.1} ms; login+booking p95 {:.1} ms",
            b.p50,
            b.p95,
            s.iteration().p95
        )
    );
}
