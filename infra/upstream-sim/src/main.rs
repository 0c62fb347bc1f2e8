//! `upstream-sim`: runs the simulated upstream seat system as a standalone server.
//!
//! Scripts and the local runner find it by the single `upstream: http://<addr>` line on stdout, so
//! stdout carries nothing else and logs go to stderr. It stops cleanly on Ctrl-C or SIGTERM.

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;

use anyhow::Context;
use clap::Parser;
use tokio::net::TcpListener;
use tracing_subscriber::EnvFilter;
use upstream_sim::Simulator;

#[derive(Parser)]
#[command(about = "A fragile, non-idempotent stand-in for the upstream seat system")]
struct Args {
    /// Address to listen on; port 0 picks a free port (the printed line tells which).
    #[arg(long, env = "UPSTREAM_SIM_LISTEN", default_value = "127.0.0.1:3001")]
    listen: SocketAddr,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Plain text when captured to a file by the local runner or CI.
        .with_ansi(std::io::stderr().is_terminal())
        .init();

    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let addr = listener.local_addr()?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "upstream: http://{addr}")?;
    stdout.flush()?;
    drop(stdout);

    Simulator::new()
        .run(listener, shutdown_signal())
        .await
        .context("serving")?;
    tracing::info!("stopped");
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %err, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(err) => {
                tracing::error!(error = %err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
