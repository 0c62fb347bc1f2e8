//! C: A + metrique with its EMF writer: the same series as B (namespace `Seatgate`, the
//! catalogue's names and dimensions, `service` on every one), one entry per series, written
//! synchronously to stdout as each entry closes (`write_directly_to`, metrique's advice for
//! Lambda).
include!("../../bench.rs");

use metrique::ServiceMetrics;
use metrique::emf::Emf;
use metrique::unit::{Count, Millisecond};
use metrique::unit_of_work::metrics;
use metrique::writer::{AttachGlobalEntrySinkExt, Entry, EntryIoStreamExt, FormatExt, GlobalEntrySink};
use metrique_writer::value::Distribution;
use std::time::Duration;

const ROUTES: [&str; 3] = ["charge", "seat", "room"];
const OUTCOMES: [&str; 3] = ["ok", "timeout", "busy"];

#[metrics(emf::dimension_sets = [["route", "outcome"]])]
struct UpstreamCalls {
    route: &'static str,
    outcome: &'static str,
    #[metrics(name = "UpstreamCalls", unit = Count)]
    n: u64,
}

#[metrics(emf::dimension_sets = [["status", "reason"]])]
struct IntentsTerminal {
    status: &'static str,
    reason: &'static str,
    #[metrics(name = "IntentsTerminal", unit = Count)]
    n: u64,
}

#[metrics(emf::dimension_sets = [["route", "by"]])]
struct UpstreamHeldBack {
    route: &'static str,
    by: &'static str,
    #[metrics(name = "UpstreamHeldBack", unit = Count)]
    n: u64,
}

#[metrics(emf::dimension_sets = [["status"]])]
struct TimeToTerminal {
    status: &'static str,
    // Several observations per invocation: a distribution (metrique-writer's), written as
    // {"Values":[...],"Counts":[...]}. Duration is milliseconds by default.
    #[metrics(name = "TimeToTerminal", no_close)]
    ms: Distribution<Duration, 4>,
}

#[metrics]
struct ReaperPassDuration {
    #[metrics(name = "ReaperPassDuration", unit = Millisecond)]
    ms: Duration,
}

/// `service` on every entry, as a global dimension.
#[derive(Entry)]
struct Globals {
    service: &'static str,
}

static HANDLE: std::sync::OnceLock<metrique::writer::sink::AttachHandle> = std::sync::OnceLock::new();

fn init() {
    let handle = ServiceMetrics::write_directly_to(
        Emf::builder("Seatgate".to_string(), vec![vec!["service".to_string()]])
            .build()
            .output_to(std::io::stdout())
            .merge_globals(Globals { service: "worker" }),
    );
    let _ = HANDLE.set(handle);
}

fn record(i: u64) {
    let r = ROUTES[(i % 3) as usize];
    let o = OUTCOMES[(i % 3) as usize];
    let sink = || ServiceMetrics::sink();
    drop(UpstreamCalls { route: r, outcome: o, n: 1 }.append_on_drop(sink()));
    drop(UpstreamCalls { route: "reserve", outcome: "ok", n: 2 }.append_on_drop(sink()));
    drop(IntentsTerminal { status: "SUCCEEDED", reason: "reserved", n: 1 }.append_on_drop(sink()));
    drop(IntentsTerminal { status: "FAILED", reason: "seat_taken", n: 1 }.append_on_drop(sink()));
    drop(UpstreamHeldBack { route: "reserve", by: "breaker", n: 1 }.append_on_drop(sink()));
    drop(UpstreamHeldBack { route: "seat", by: "hold", n: 1 }.append_on_drop(sink()));
    let ms = (0..3)
        .map(|k| Duration::from_millis(100 + (i * 7 + k * 13) % 900))
        .collect();
    drop(TimeToTerminal { status: "SUCCEEDED", ms }.append_on_drop(sink()));
    drop(ReaperPassDuration { ms: Duration::from_millis(5 + i % 50) }.append_on_drop(sink()));
}

/// Nothing left to do: each entry was written as it dropped.
fn flush() {}

fn after_once(_: &Value) {}
