//! What the runner's test files share: a user's way through the HTTP API, which the benchmark
//! walks too and so lives in the testkit ([`seatgate_testkit::flow`]). Its steps answer
//! `anyhow::Result` naming the step; a test unwraps them.
//!
//! Each test file includes this with `mod common;` and uses what it needs.
#![allow(unused_imports)]

pub use seatgate_testkit::flow::*;
