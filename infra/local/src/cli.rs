//! The `seatgate-local` command line: flags (each with an environment fallback) into a
//! [`RunnerConfig`], and what the binary prints on start.
//!
//! Secrets are never flags, because command lines are visible to every user of the machine: the
//! webhook key comes only from `SEATGATE_WEBHOOK_KEY`, the token key from `SEATGATE_JWT_SECRET`
//! or the key file next to the database.

use crate::{BackendKind, Role, RunnerConfig, Stack, WebhookTarget};
use anyhow::bail;
use clap::Parser;
use seatgate::config::Timing;
use seatgate::domain::Secret;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Environment variable holding the webhook signing key.
pub const WEBHOOK_KEY_ENV: &str = "SEATGATE_WEBHOOK_KEY";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TimingProfile {
    /// Timing::local(): recovery in seconds.
    Local,
    /// Timing::fast(): everything in a few hundred milliseconds (tests).
    Fast,
}

impl TimingProfile {
    pub fn timing(self) -> Timing {
        match self {
            TimingProfile::Local => Timing::local(),
            TimingProfile::Fast => Timing::fast(),
        }
    }
}

/// Runs the seatgate stack locally: HTTP API (with a JWT authorizer), relay, workers, reaper and
/// an upstream simulator, on a SQLite file.
#[derive(Debug, Parser)]
#[command(name = "seatgate-local", version)]
pub struct Cli {
    /// Address of the HTTP API.
    #[arg(long, env = "SEATGATE_LISTEN", default_value = "127.0.0.1:3000")]
    pub listen: SocketAddr,
    /// Address of the upstream simulator started when no --upstream-url is given.
    #[arg(
        long,
        env = "SEATGATE_UPSTREAM_LISTEN",
        default_value = "127.0.0.1:3001"
    )]
    pub upstream_listen: SocketAddr,
    /// Use this running upstream instead of starting a simulator. With several processes on one
    /// database, let one start the simulator and point the others at it.
    #[arg(long, env = "SEATGATE_UPSTREAM_URL")]
    pub upstream_url: Option<String>,
    /// The SQLite file (its directory is created); `:memory:` for a throwaway database.
    #[arg(
        long,
        env = "SEATGATE_DB",
        default_value = ".seatgate/seatgate.sqlite3"
    )]
    pub db: PathBuf,
    #[arg(long, env = "SEATGATE_BACKEND", value_enum, default_value = "embedded")]
    pub backend: BackendKind,
    /// Concurrent queue consumers (the worker function's concurrency); one seat's messages are
    /// still handled in order.
    #[arg(long, env = "SEATGATE_WORKERS", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=256))]
    pub workers: u16,
    #[arg(long, env = "SEATGATE_TIMING", value_enum, default_value = "local")]
    pub timing: TimingProfile,
    /// Post terminal intent events here, signed with the key in SEATGATE_WEBHOOK_KEY.
    #[arg(long, env = "SEATGATE_WEBHOOK_URL")]
    pub webhook_url: Option<String>,
    /// Which parts to run; several processes may share one database.
    #[arg(long, env = "SEATGATE_ROLE", value_enum, default_value = "all")]
    pub role: Role,
    /// Register users u1..uN with the upstream, credential cred-uN.
    #[arg(long, env = "SEATGATE_DEMO_USERS", default_value_t = 0)]
    pub demo_users: usize,
}

impl Cli {
    pub fn into_config(self) -> anyhow::Result<RunnerConfig> {
        let webhook = match self.webhook_url {
            None => None,
            Some(url) => match std::env::var(WEBHOOK_KEY_ENV) {
                Ok(key) if !key.is_empty() => Some(WebhookTarget {
                    url,
                    key: Secret::new(key),
                }),
                _ => bail!("--webhook-url needs the signing key in {WEBHOOK_KEY_ENV}"),
            },
        };
        let db = (self.db.as_os_str() != ":memory:").then_some(self.db);
        Ok(RunnerConfig {
            listen: self.listen,
            upstream_listen: self.upstream_listen,
            upstream_url: self.upstream_url,
            db,
            backend: self.backend,
            workers: usize::from(self.workers),
            timing: self.timing.timing(),
            webhook,
            role: self.role,
            demo_users: self.demo_users,
            jwt_secret: None,
        })
    }
}

/// Logs go to stderr so stdout carries only the lines scripts read.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .compact()
        .with_target(false)
        .try_init();
}

/// The start banner: `api: <url>` and `upstream: <url>` first (scripts look for them), then an
/// example request.
pub fn announce(stack: &Stack, out: &mut impl Write) -> std::io::Result<()> {
    let api = if stack.api_url.is_empty() {
        "none (--role workers)"
    } else {
        &stack.api_url
    };
    writeln!(out, "api: {api}")?;
    writeln!(out, "upstream: {}", stack.upstream_url)?;
    if !stack.api_url.is_empty() {
        writeln!(
            out,
            "try: curl -s -X POST {}/dev/token -H 'content-type: application/json' -d '{{\"sub\":\"u1\"}}'",
            stack.api_url
        )?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_documented_ones() {
        let cfg = Cli::parse_from(["seatgate-local"]).into_config().unwrap();
        assert_eq!(cfg.listen.to_string(), "127.0.0.1:3000");
        assert_eq!(cfg.upstream_listen.to_string(), "127.0.0.1:3001");
        assert_eq!(cfg.workers, 1);
        assert_eq!(cfg.role, Role::All);
        assert_eq!(cfg.timing, Timing::local());
        assert!(cfg.db.is_some());
    }

    #[test]
    fn memory_database_and_fast_timing_parse() {
        let cfg = Cli::parse_from([
            "seatgate-local",
            "--db",
            ":memory:",
            "--timing",
            "fast",
            "--workers",
            "4",
            "--role",
            "workers",
        ])
        .into_config()
        .unwrap();
        assert!(cfg.db.is_none());
        assert_eq!(cfg.timing, Timing::fast());
        assert_eq!(cfg.workers, 4);
        assert_eq!(cfg.role, Role::Workers);
        assert!(Cli::try_parse_from(["seatgate-local", "--workers", "0"]).is_err());
    }
}
