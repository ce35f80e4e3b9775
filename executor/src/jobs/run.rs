//! Starting a host job and following it to its end.
//!
//! Security meaning: the id is reserved (checked and inserted under the
//! table lock) before anything is spawned, and released only if the spawn
//! fails, so a duplicate id never runs a command nor touches the original.
//! The task that follows a job is its only signaller: it kills the group on
//! a kill request or at the hard cap while the leader is unreaped, and it
//! publishes the final record in one step after the leader is reaped and the
//! output drained (bounded by [`DRAIN_GRACE`]).
#![forbid(unsafe_code)]

use super::output::{drain, Output};
use super::table::{Control, HostEnd, NewJob};
use super::{now_ms, Jobs};
use crate::exec::{self, Launched};
use crate::state::Executor;
use ide_proto::{ExecSpec, ExecutorError, JobLimits, Stream};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// How long output is still read after a job's leader exited (a grandchild
/// holding the pipes does not wedge the job).
pub const DRAIN_GRACE: Duration = Duration::from_secs(10);

/// Reserves `job_id` and spawns `spec` under it; returns the start time.
/// Call it from an async task on a runtime worker thread (see
/// [`crate::exec::spawn::spawn`]); it does not await, so a cancelled request
/// cannot leave a reserved id without its process.
pub fn start(
    executor: &Executor,
    jobs: &Arc<Jobs>,
    job_id: String,
    owner: Option<String>,
    spec: ExecSpec,
    limits: JobLimits,
) -> Result<u64, ExecutorError> {
    let output = Output::new(spec.max_output_bytes);
    let kill = Arc::new(Notify::new());
    let job = NewJob {
        job_id: job_id.clone(),
        owner,
        argv: spec.argv.clone(),
        output: output.clone(),
        control: Control::Host { kill: kill.clone() },
    };
    let started_at_ms = jobs.table().insert(job, limits, now_ms())?;
    let timeout_ms = spec.timeout_ms;
    match exec::launch(executor, spec, None) {
        Ok(launched) => {
            tokio::spawn(follow(
                jobs.clone(),
                job_id,
                launched,
                timeout_ms,
                output,
                kill,
            ));
            Ok(started_at_ms)
        }
        Err(e) => {
            jobs.table().remove_unstarted(&job_id);
            Err(e)
        }
    }
}

/// Drives one job to its end and publishes its final record.
async fn follow(
    jobs: Arc<Jobs>,
    job_id: String,
    launched: Launched,
    timeout_ms: u64,
    output: Arc<Output>,
    kill: Arc<Notify>,
) {
    let Launched {
        mut leader,
        stdout,
        stderr,
        started,
        feeder: _feeder,
    } = launched;
    let deadline = match timeout_ms {
        0 => None,
        ms => started.checked_add(Duration::from_millis(ms)),
    };
    let pumps = async {
        tokio::join!(
            drain(stdout, &output, Stream::Stdout),
            drain(stderr, &output, Stream::Stderr),
        )
    };
    tokio::pin!(pumps);
    let mut drained = false;
    let mut timed_out = false;
    let waited = loop {
        tokio::select! {
            biased;
            _ = kill.notified() => {
                leader.kill_group();
                break leader.wait().await;
            }
            status = leader.wait() => break status,
            _ = exec::until(deadline) => {
                leader.kill_group();
                timed_out = true;
                break leader.wait().await;
            }
            _ = &mut pumps, if !drained => drained = true,
        }
    };
    if !drained {
        let _ = tokio::time::timeout(DRAIN_GRACE, &mut pumps).await;
    }
    let end = match waited {
        _ if timed_out => {
            output.note(
                Stream::Stderr,
                &format!(
                    "[ide] background job exceeded the host hard cap of {timeout_ms}ms \
                     (max_bg_timeout_ms) and its process group was killed\n"
                ),
            );
            HostEnd::TimedOut
        }
        Ok(status) => HostEnd::Exited(status.code()),
        Err(e) => {
            tracing::warn!(%job_id, "waiting for a job failed: {e}");
            HostEnd::Exited(None)
        }
    };
    jobs.update(|t| t.end_host(&job_id, end, now_ms()));
}
