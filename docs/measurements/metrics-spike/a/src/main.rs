//! A: a lambda_runtime function with no metrics at all.
include!("../../bench.rs");

fn init() {}
fn record(i: u64) {
    std::hint::black_box(i);
}
fn flush() {}
/// No EMF line to wait for: print the response so the harness has a first line.
fn after_once(out: &Value) {
    println!("{out}");
}
