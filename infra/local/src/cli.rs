//! The `seatgate-local` command line: flags (each with an environment fallback) into a
//! [`RunnerConfig`], and what the binary prints on start.
//!
//! Secrets are never flags, because command lines are visible to every user of the machine: the
//! webhook key comes only from `SEATGATE_WEBHOOK_KEY`, the token key from `SEATGATE_JWT_SECRET`
//! or the key file next to the database.

use crate::aws::{AwsOptions, DEFAULT_QUEUE, DEFAULT_TABLE};
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
    /// Timing::aws(): the deployed numbers (template.yaml), e.g. a 30 s worker timeout.
    Aws,
}

impl TimingProfile {
    pub fn timing(self) -> Timing {
        match self {
            TimingProfile::Local => Timing::local(),
            TimingProfile::Fast => Timing::fast(),
            TimingProfile::Aws => Timing::aws(),
        }
    }
}

/// Runs the seatgate stack locally: HTTP API (with a JWT authorizer), relay, workers, reaper and
/// an upstream simulator, on a SQLite file or (--backend aws) on DynamoDB + Streams and SQS FIFO.
///
/// The AWS backend is configured like any AWS SDK: AWS_REGION, credentials (AWS_ACCESS_KEY_ID,
/// AWS_PROFILE, ...) and endpoints (AWS_ENDPOINT_URL, or AWS_ENDPOINT_URL_DYNAMODB,
/// AWS_ENDPOINT_URL_DYNAMODB_STREAMS, AWS_ENDPOINT_URL_SQS for emulators).
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
    /// The SQLite file (its directory is created); `:memory:` for a throwaway database. With
    /// --backend aws only its directory is used, for the token key file.
    #[arg(
        long,
        env = "SEATGATE_DB",
        default_value = ".seatgate/seatgate.sqlite3"
    )]
    pub db: PathBuf,
    #[arg(long, env = "SEATGATE_BACKEND", value_enum, default_value = "embedded")]
    pub backend: BackendKind,
    /// --backend aws: the DynamoDB table.
    #[arg(long, env = "SEATGATE_TABLE", default_value = DEFAULT_TABLE)]
    pub table: String,
    /// --backend aws: the seat queue's base name (the FIFO queue is <name>.fifo, its dead-letter
    /// queue <name>-dlq.fifo), or the queue's URL.
    #[arg(long, env = "SEATGATE_QUEUE", default_value = DEFAULT_QUEUE)]
    pub queue: String,
    /// --backend aws: create the table and queues if missing, from the definitions
    /// template.yaml is checked against. Use --create false against a deployed stack.
    #[arg(long, env = "SEATGATE_CREATE", default_value_t = true, action = clap::ArgAction::Set)]
    pub create: bool,
    /// Concurrent queue consumers (the worker function's concurrency); one seat's messages are
    /// still handled in order.
    #[arg(long, env = "SEATGATE_WORKERS", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=256))]
    pub workers: u16,
    /// Timing profile; default `local` on the embedded backend, `aws` on the AWS backend:
    /// DynamoDB Local runs one transaction at a time, so under a burst a worker's requests queue
    /// behind the confirms for seconds and `local`'s 5 s worker timeout can cut an invocation
    /// off after its claim (the reaper then settles that intent, a visibility timeout later the
    /// rest of its batch moves on).
    #[arg(long, env = "SEATGATE_TIMING", value_enum)]
    pub timing: Option<TimingProfile>,
    /// Post terminal intent events here, signed with the key in SEATGATE_WEBHOOK_KEY.
    #[arg(long, env = "SEATGATE_WEBHOOK_URL")]
    pub webhook_url: Option<String>,
    /// Which parts to run; several processes may share one database.
    #[arg(long, env = "SEATGATE_ROLE", value_enum, default_value = "all")]
    pub role: Role,
    /// Register users u1..uN with the upstream, credential cred-uN.
    #[arg(long, env = "SEATGATE_DEMO_USERS", default_value_t = 0)]
    pub demo_users: usize,
    /// Serve POST /dev/token (which signs any token, admin included) even on a non-loopback
    /// --listen address, or with --backend aws against endpoints that are not on loopback.
    /// Without it the runner refuses to start in those cases.
    #[arg(long, env = "SEATGATE_INSECURE_DEV_TOKENS")]
    pub insecure_dev_tokens: bool,
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
            aws: AwsOptions {
                table: self.table,
                queue: self.queue,
                create: self.create,
            },
            workers: usize::from(self.workers),
            timing: self
                .timing
                .unwrap_or(match self.backend {
                    BackendKind::Embedded => TimingProfile::Local,
                    BackendKind::Aws => TimingProfile::Aws,
                })
                .timing(),
            webhook,
            role: self.role,
            demo_users: self.demo_users,
            jwt_secret: None,
            insecure_dev_tokens: self.insecure_dev_tokens,
            wake_ups: true,
        })
    }
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
        assert_eq!(cfg.backend, BackendKind::Embedded);
        assert_eq!(cfg.aws, AwsOptions::default());
    }

    #[test]
    fn aws_backend_flags_parse() {
        let cfg = Cli::parse_from([
            "seatgate-local",
            "--backend",
            "aws",
            "--table",
            "t1",
            "--queue",
            "q1",
            "--create",
            "false",
            "--timing",
            "aws",
        ])
        .into_config()
        .unwrap();
        assert_eq!(cfg.backend, BackendKind::Aws);
        assert_eq!(
            cfg.aws,
            AwsOptions {
                table: "t1".into(),
                queue: "q1".into(),
                create: false
            }
        );
        assert_eq!(cfg.timing, Timing::aws());
        let cfg = Cli::parse_from(["seatgate-local", "--backend", "aws"])
            .into_config()
            .unwrap();
        assert_eq!(
            cfg.timing,
            Timing::aws(),
            "the aws backend's default timing"
        );
        let cfg = Cli::parse_from(["seatgate-local", "--backend", "aws", "--timing", "local"])
            .into_config()
            .unwrap();
        assert_eq!(cfg.timing, Timing::local());
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
