//! `seatgate-local`: the whole stack on this machine (see the library docs). Prints `api:` and
//! `upstream:` lines, runs until Ctrl-C or SIGTERM, then stops in order.

use clap::Parser;
use seatgate_local::cli::{Cli, announce};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    seatgate::telemetry::init();
    let config = Cli::parse().into_config()?;
    let stack = seatgate_local::start(config).await?;
    announce(&stack, &mut std::io::stdout().lock())?;
    seatgate_local::shutdown_signal().await;
    stack.shutdown().await;
    Ok(())
}
