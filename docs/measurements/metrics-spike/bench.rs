// Shared by the three binaries (included with `include!`): the modes, and the invocation's
// fake work. Each binary defines `init()`, `record(i)` and `flush()`.

use lambda_runtime::{Context, Error, LambdaEvent, service_fn};
use serde_json::{Value, json};
use std::time::Instant;

/// One invocation: record this invocation's metrics (`record`), then flush them (`flush`), as
/// seatgate's `seatgate_aws::lambda::invocation` does around every handler.
async fn handler(event: LambdaEvent<Value>) -> Result<Value, Error> {
    let i = event.payload.get("i").and_then(Value::as_u64).unwrap_or(0);
    record(i);
    flush();
    Ok(json!({ "ok": true, "i": i }))
}

fn event(i: u64) -> LambdaEvent<Value> {
    LambdaEvent::new(json!({ "i": i }), Context::default())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    init();
    match args.get(1).map(String::as_str) {
        // Init time: one invocation called directly, then exit (the harness times from spawn to
        // the first line on stdout).
        Some("once") => {
            let out = handler(event(1)).await?;
            after_once(&out);
            Ok(())
        }
        // Per-invocation cost: N invocations called directly, each timed.
        Some("bench") => {
            let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10_000);
            let mut ns = Vec::with_capacity(n);
            for i in 0..n as u64 {
                let ev = event(i);
                let t = Instant::now();
                let out = handler(ev).await?;
                ns.push(t.elapsed().as_nanos() as u64);
                std::hint::black_box(out);
            }
            ns.sort_unstable();
            let pct = |p: f64| ns[((n as f64 - 1.0) * p).round() as usize];
            eprintln!(
                "n={n} median_ns={} p90_ns={} p99_ns={} min_ns={}",
                pct(0.5),
                pct(0.9),
                pct(0.99),
                ns[0]
            );
            Ok(())
        }
        _ => lambda_runtime::run(service_fn(handler)).await,
    }
}
