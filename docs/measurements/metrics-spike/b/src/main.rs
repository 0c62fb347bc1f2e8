//! B: A + seatgate's hand-written `seatgate::metrics` (the `service` dimension set once at start,
//! EMF lines printed after each invocation).
include!("../../bench.rs");

use seatgate::metrics::{Metric, count, emit_emf_as, flush_emf, observe_ms};

const ROUTES: [&str; 3] = ["charge", "seat", "room"];
const OUTCOMES: [&str; 3] = ["ok", "timeout", "busy"];

fn init() {
    emit_emf_as("worker");
}

/// 6 counter series with 2 dimensions (+ service), 2 millisecond distributions.
fn record(i: u64) {
    let r = ROUTES[(i % 3) as usize];
    let o = OUTCOMES[(i % 3) as usize];
    count(Metric::UpstreamCalls, &[("route", r), ("outcome", o)], 1);
    count(Metric::UpstreamCalls, &[("route", "reserve"), ("outcome", "ok")], 2);
    count(Metric::IntentsTerminal, &[("status", "SUCCEEDED"), ("reason", "reserved")], 1);
    count(Metric::IntentsTerminal, &[("status", "FAILED"), ("reason", "seat_taken")], 1);
    count(Metric::UpstreamHeldBack, &[("route", "reserve"), ("by", "breaker")], 1);
    count(Metric::UpstreamHeldBack, &[("route", "seat"), ("by", "hold")], 1);
    for k in 0..3 {
        observe_ms(Metric::TimeToTerminal, &[("status", "SUCCEEDED")], 100 + (i * 7 + k * 13) % 900);
    }
    observe_ms(Metric::ReaperPassDuration, &[], 5 + i % 50);
}

fn flush() {
    flush_emf();
}

fn after_once(_: &Value) {}
