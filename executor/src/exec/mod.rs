//! Running one command to completion (`Request::Exec`): the mechanism behind
//! `shell::exec`.
//!
//! Security meaning: the floor ([`floor`]) runs before anything is opened;
//! the cwd is resolved beneath its root and entered by fd; the child runs in
//! its own process group, which is SIGKILLed as a whole on timeout, on cancel
//! and when the broker's connection ends, so no command outlives its caller.
//! A grandchild that keeps the output pipes open cannot hang the call: once
//! the leader exits, output is drained only until [`DRAIN_DEADLINE`].
//! Background jobs spawn through the same [`launch`] and are then followed
//! by [`crate::jobs`], which owns them beyond any one connection.
#![forbid(unsafe_code)]

pub mod floor;
pub mod image;
pub mod output;
pub mod process;
pub mod spawn;

use crate::ceiling::open_anchor;
use crate::request::{Cancel, Replies, Upload};
use crate::resolve::{resolve, Backend};
use crate::state::Executor;
use ide_proto::{ErrorKind, ExecSpec, ExecutorError, ExitReport, RootedPath, Stdin, Stream};
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::OFlags;
use spawn::Leader;
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::pipe;
use tokio::task::JoinHandle;

/// How long output is still read after the leader exited.
pub const DRAIN_DEADLINE: Duration = Duration::from_millis(500);

/// The terminal error of a cancelled request.
pub fn cancelled() -> ExecutorError {
    ExecutorError::new(ErrorKind::Internal, "cancelled")
}

/// A spawned command and its pipes, ready to be followed.
#[derive(Debug)]
pub struct Launched {
    /// The process group leader.
    pub leader: Leader,
    pub stdout: pipe::Receiver,
    pub stderr: pipe::Receiver,
    /// When the command was spawned.
    pub started: Instant,
    /// Feeds stdin; aborted when this is dropped.
    pub feeder: Option<AbortOnDrop>,
}

/// Everything up to a running child: the floor, the jailed cwd, the
/// environment, the spawn and the stdin feeder. Foreground execs and
/// background jobs both start here, so there is one way to spawn.
///
/// Call it from an async task (see [`spawn::spawn`]). `upload` carries stdin
/// for [`Stdin::Upload`], with the replies its credit goes through.
pub fn launch(
    executor: &Executor,
    spec: ExecSpec,
    upload: Option<(Upload, Replies)>,
) -> Result<Launched, ExecutorError> {
    floor::check(&spec)?;
    let cwd = spec
        .cwd
        .as_ref()
        .map(|p| open_cwd(executor, p))
        .transpose()?;
    let env = executor.env.child_env(&spec.env);
    let started = Instant::now();
    let (leader, pipes) = spawn::spawn(&spec, env, cwd.as_ref())?;
    drop(cwd);
    let feeder = match (spec.stdin, pipes.stdin) {
        (Stdin::Bytes(bytes), Some(mut pipe)) => Some(AbortOnDrop(tokio::spawn(async move {
            // EPIPE (the child stopped reading) is the child's business.
            let _ = pipe.write_all(&bytes).await;
        }))),
        (Stdin::Upload, Some(mut pipe)) => {
            let mut upload = upload;
            Some(AbortOnDrop(tokio::spawn(async move {
                let Some((upload, replies)) = upload.as_mut() else {
                    return;
                };
                while let Some(chunk) = upload.next(replies).await {
                    if pipe.write_all(&chunk).await.is_err() {
                        break;
                    }
                }
            })))
        }
        _ => None,
    };
    Ok(Launched {
        leader,
        stdout: pipes.stdout,
        stderr: pipes.stderr,
        started,
        feeder,
    })
}

/// Runs `spec`, streaming its output through `replies`, and reports how it
/// ended. On `cancel` the group is killed and reaped and the request ends
/// with [`cancelled`]. `upload` carries stdin for [`Stdin::Upload`].
pub async fn run(
    executor: &Executor,
    spec: ExecSpec,
    upload: Option<Upload>,
    cancel: &mut Cancel,
    replies: &Replies,
) -> Result<ExitReport, ExecutorError> {
    let timeout_ms = spec.timeout_ms;
    let cap = spec.max_output_bytes;
    let upload = upload.map(|u| (u, replies.clone()));
    let Launched {
        mut leader,
        stdout,
        stderr,
        started,
        feeder: _feeder,
    } = launch(executor, spec, upload)?;
    let deadline = match timeout_ms {
        0 => None,
        ms => started.checked_add(Duration::from_millis(ms)),
    };
    let (mut stdout_total, mut stderr_total) = (0u64, 0u64);
    let ended = {
        let pumps = async {
            tokio::join!(
                output::pump(stdout, Stream::Stdout, cap, replies, &mut stdout_total),
                output::pump(stderr, Stream::Stderr, cap, replies, &mut stderr_total),
            )
        };
        tokio::pin!(pumps);
        let mut drained = false;
        let ended = loop {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => {
                    stop(&mut leader).await;
                    return Err(cancelled());
                }
                status = leader.wait() => break status.map(|s| (s, false)),
                _ = until(deadline) => {
                    leader.kill_group();
                    break leader.wait().await.map(|s| (s, true));
                }
                _ = &mut pumps, if !drained => drained = true,
            }
        };
        if !drained {
            let _ = tokio::time::timeout(DRAIN_DEADLINE, &mut pumps).await;
        }
        ended
    };
    let (status, timed_out) =
        ended.map_err(|e| ExecutorError::new(ErrorKind::Internal, format!("wait failed: {e}")))?;
    Ok(ExitReport {
        exit_code: if timed_out { None } else { status.code() },
        signal: status.signal(),
        timed_out,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        stdout_total,
        stderr_total,
    })
}

/// Kills the group and reaps the leader.
async fn stop(leader: &mut Leader) {
    leader.kill_group();
    let _ = leader.wait().await;
}

/// Sleeps until `deadline`, or forever without one.
pub async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}

/// Opens the cwd as a directory fd beneath its root. A cwd that exists but is
/// not a directory is an invalid request (S210), unlike other wrong types.
fn open_cwd(executor: &Executor, cwd: &RootedPath) -> Result<OwnedFd, ExecutorError> {
    let anchor = open_anchor(cwd, &executor.ceilings, Backend::current()).map_err(prefixed)?;
    resolve(anchor.as_fd(), &cwd.rel, OFlags::PATH | OFlags::DIRECTORY).map_err(|e| {
        if e.kind == ErrorKind::WrongType {
            ExecutorError::new(ErrorKind::Invalid, "cwd is not a directory")
        } else {
            prefixed(e)
        }
    })
}

fn prefixed(e: ExecutorError) -> ExecutorError {
    ExecutorError::new(e.kind, format!("cwd: {}", e.message))
}

/// Aborts the stdin feeder when the exec ends, even if a grandchild holds the
/// pipe without reading.
#[derive(Debug)]
pub struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
pub(crate) mod tests;
