//! Database servers the bench starts for itself: found on disk, run on 127.0.0.1 on a free
//! port in a throwaway directory, and stopped when dropped.
//!
//! Stopping lives in `Drop` so that a baseline that fails half-way (a bad query, a panic, `?`
//! out of `compare`) still ends its server: the bench never leaves a `mariadbd` or `postgres`
//! behind on a shared machine. A server that ignores SIGTERM for [`STOP_GRACE`] is killed.

use anyhow::{Context as _, bail};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a server gets to shut down cleanly before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(15);

/// Where Debian and this machine put server binaries besides `PATH`.
const EXTRA_DIRS: &[&str] = &["/usr/sbin", "/usr/local/bin", "/usr/local/sbin", "/usr/bin"];

/// The path of `name`, or an error naming the Debian package that provides it.
pub(crate) fn find_binary(name: &str, package: &str) -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::env::split_paths(&path).chain(EXTRA_DIRS.iter().map(PathBuf::from));
    for dir in dirs {
        let candidate = dir.join(name);
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    bail!(
        "`{name}` not found on PATH or in {EXTRA_DIRS:?}: install Debian's `{package}` \
         (apt-get install -y {package})"
    )
}

/// A loopback port nobody listens on right now.
pub(crate) fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr()?.port())
}

/// A fresh directory under the system temp dir, removed by [`ServerProcess`]'s drop.
pub(crate) fn temp_dir(kind: &str) -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("seatgate-{kind}-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// Runs a setup command to completion (bounded by `limit`), its output kept in `log`.
pub(crate) fn run_to_end(mut cmd: Command, log: &Path, limit: Duration) -> anyhow::Result<()> {
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .with_context(|| format!("starting {cmd:?}"))?;
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait()? {
            if status.success() {
                return Ok(());
            }
            let tail = std::fs::read_to_string(log).unwrap_or_default();
            bail!("{cmd:?} failed ({status}): {}", last_lines(&tail, 15));
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{cmd:?} took longer than {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub(crate) fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A running server and the directory it owns.
pub(crate) struct ServerProcess {
    pub(crate) name: String,
    child: Child,
    /// A file holding the server's own pid when the child is a wrapper (`runuser`), so the
    /// signal reaches the server and not only the wrapper.
    pid_file: Option<PathBuf>,
    pub(crate) dir: PathBuf,
    pub(crate) log: PathBuf,
}

impl ServerProcess {
    pub(crate) fn spawn(
        name: &str,
        mut cmd: Command,
        dir: PathBuf,
        pid_file: Option<PathBuf>,
    ) -> anyhow::Result<ServerProcess> {
        let log = dir.join(format!("{name}.log"));
        let out = std::fs::File::create(&log)?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {name}: {cmd:?}"))?;
        Ok(ServerProcess {
            name: name.to_owned(),
            child,
            pid_file,
            dir,
            log,
        })
    }

    /// An error if the server has already exited, with the end of its log.
    pub(crate) fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            let tail = std::fs::read_to_string(&self.log).unwrap_or_default();
            bail!(
                "{} exited ({status}) while starting: {}",
                self.name,
                last_lines(&tail, 15)
            );
        }
        Ok(())
    }

    fn stop(&mut self) {
        let own_pid = self
            .pid_file
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|s| s.lines().next().map(|l| l.trim().to_owned()))
            .filter(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
        let mut pids = vec![self.child.id().to_string()];
        pids.extend(own_pid.clone());
        for pid in &pids {
            let _ = Command::new("kill")
                .args(["-TERM", pid])
                .stderr(Stdio::null())
                .status();
        }
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            let wrapper_gone = matches!(self.child.try_wait(), Ok(Some(_)));
            // A wrapper may exit before the server it started has finished its shutdown.
            let server_gone = own_pid.as_ref().is_none_or(|pid| !alive(pid));
            if wrapper_gone && server_gone {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        for pid in pids.iter().rev() {
            let _ = Command::new("kill")
                .args(["-KILL", pid])
                .stderr(Stdio::null())
                .status();
        }
        let _ = self.child.wait();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn alive(pid: &str) -> bool {
    Command::new("kill")
        .args(["-0", pid])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
