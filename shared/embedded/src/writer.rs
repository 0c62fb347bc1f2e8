//! The writer thread's side of group commit: a queued write (`Job`, type-erased as `WriteJob` for
//! the channel), and the loop that takes whatever writes are queued (up to [`MAX_GROUP`]), runs
//! each under its own savepoint in one `BEGIN IMMEDIATE` transaction, commits once, and only then
//! answers each caller.
//!
//! The callers' side (a slot in the bounded queue, the job sent, the answer awaited) is
//! `EmbeddedBackend::run` in `lib.rs`; the thread is started by `EmbeddedBackend::open`.

use super::{Cached, Ctx, EmbeddedConfig, MAX_GROUP, sql};
use rusqlite::{Connection, Transaction, TransactionBehavior};
use seatgate::ports::{Clock, StoreError};
use std::sync::{Arc, mpsc};

/// One queued write, type-erased for the writer's channel.
pub(super) trait WriteJob: Send {
    /// Runs the operation inside the group's transaction; whether it succeeded (else its
    /// savepoint is rolled back).
    fn run(&mut self, tx: &Transaction<'_>, ctx: &Ctx) -> bool;
    /// Answers the caller once the group's fate is known.
    fn finish(self: Box<Self>, committed: Result<(), StoreError>);
}

pub(super) struct Job<T, E, F> {
    pub(super) op: Option<F>,
    pub(super) result: Option<Result<T, E>>,
    pub(super) reply: tokio::sync::oneshot::Sender<Result<T, E>>,
    /// Released when the job is answered (or dropped), even if its caller has gone: the bound
    /// counts every job the writer still holds.
    pub(super) _slot: tokio::sync::OwnedSemaphorePermit,
}

impl<T, E, F> WriteJob for Job<T, E, F>
where
    F: FnOnce(&Transaction<'_>, &Ctx) -> Result<T, E> + Send,
    T: Send,
    E: From<StoreError> + Send,
{
    fn run(&mut self, tx: &Transaction<'_>, ctx: &Ctx) -> bool {
        let Some(op) = self.op.take() else {
            return false;
        };
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| op(tx, ctx)))
            .unwrap_or_else(|_| {
                Err(StoreError::Unavailable("an embedded store operation panicked".into()).into())
            });
        let ok = result.is_ok();
        self.result = Some(result);
        ok
    }

    fn finish(self: Box<Self>, committed: Result<(), StoreError>) {
        let answer = match (self.result, committed) {
            // A refusal stands whatever happened to the rest of the group.
            (Some(Err(e)), _) => Err(e),
            (Some(Ok(v)), Ok(())) => Ok(v),
            (Some(Ok(_)), Err(e)) | (None, Err(e)) => Err(e.into()),
            (None, Ok(())) => Err(StoreError::Unavailable("write not run".into()).into()),
        };
        let _ = self.reply.send(answer);
    }
}

/// The writer thread: group commits until every handle on the backend is gone.
pub(super) fn write_groups(
    mut conn: Connection,
    jobs: mpsc::Receiver<Box<dyn WriteJob>>,
    clock: Arc<dyn Clock>,
    config: EmbeddedConfig,
    commits: Arc<std::sync::atomic::AtomicU64>,
) {
    let ctx = Ctx {
        clock: clock.as_ref(),
        config: &config,
    };
    while let Ok(first) = jobs.recv() {
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match jobs.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        let committed = commit_group(&mut conn, &mut group, &ctx);
        commits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for job in group {
            job.finish(committed.clone());
        }
    }
}

fn commit_group(
    conn: &mut Connection,
    group: &mut [Box<dyn WriteJob>],
    ctx: &Ctx,
) -> Result<(), StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql)?;
    for job in group.iter_mut() {
        tx.exec("SAVEPOINT job", []).map_err(sql)?;
        if !job.run(&tx, ctx) {
            tx.exec("ROLLBACK TO job", []).map_err(sql)?;
        }
        tx.exec("RELEASE job", []).map_err(sql)?;
    }
    tx.commit().map_err(sql)
}
