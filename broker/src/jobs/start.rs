//! `shell::exec_bg`: reserve an id and start a background job, on the host
//! (the executor spawns and owns it) or in a sandbox (the broker forwards
//! it, the executor holds its record).
//!
//! Security meaning: the same gates as `shell::exec` run first (parse, the
//! advisory denylist, the env gate, cwd confinement, host-only fields on a
//! sandbox target), and the executor reserves the id atomically before
//! anything runs, so a duplicate id or a full job table starts nothing.
#![forbid(unsafe_code)]

use super::delivery::duration_ms;
use super::request;
use super::response::Started;
use crate::app::App;
use crate::error::ShellError;
use crate::exec::{self, host, request::ExecRequest};
use crate::policy::Policy;
use crate::scope;
use crate::target::Target;
use ide_proto::{JobLimits, JobReply, JobRequest, RemoteEnd, Reply, Request, Stream, CHUNK_LEN};
use serde_json::Value;
use std::sync::Arc;

fn limits(policy: &Policy) -> JobLimits {
    JobLimits {
        max_running: u32::try_from(policy.max_concurrent_jobs()).unwrap_or(u32::MAX),
        retention_ms: duration_ms(policy.job_retention()),
    }
}

/// Runs one `shell::exec_bg` call.
pub async fn exec_bg(
    app: &Arc<App>,
    input: &Value,
    metadata: Option<&Value>,
) -> Result<Started, ShellError> {
    let policy = app.snapshot();
    let req = exec::request::parse("exec_bg", input)?;
    let job_id = request::job_id_for_start(input)?;
    let owner = request::owner(input, metadata);
    if let Some(pattern) = policy.denylist().check(&req.argv) {
        return Err(ShellError::denylisted(pattern));
    }
    let argv = req.argv.clone();
    match req.target.clone() {
        Target::Host => start_host(app, &policy, req, job_id.clone(), owner).await?,
        Target::Sandbox { sandbox_id } => {
            start_sandbox(app, &policy, req, sandbox_id, job_id.clone(), owner).await?
        }
    }
    Ok(Started { job_id, argv })
}

async fn start_host(
    app: &App,
    policy: &Policy,
    req: ExecRequest,
    job_id: String,
    owner: Option<String>,
) -> Result<(), ShellError> {
    let timeout_ms = policy.bg_timeout().map_or(0, duration_ms);
    let scope = scope::for_exec(app, policy, req.fs_scope.clone()).await?;
    let prepared = host::prepare(policy, &req, timeout_ms, scope.as_ref())?;
    let limits = limits(policy);
    let (mut stream, cwd) = host::send(app, prepared, |spec| {
        Request::Job(JobRequest::Start {
            job_id,
            owner,
            spec: Box::new(spec),
            limits,
        })
    })
    .await?;
    match stream.next().await? {
        Reply::Job(JobReply::Started { .. }) => Ok(()),
        Reply::Error(e) => Err(host::spawn_error(e, cwd.as_deref())),
        other => Err(ShellError::internal(format!(
            "unexpected executor reply to a job start: {other:?}"
        ))),
    }
}

async fn start_sandbox(
    app: &Arc<App>,
    policy: &Policy,
    req: ExecRequest,
    sandbox_id: String,
    job_id: String,
    owner: Option<String>,
) -> Result<(), ShellError> {
    exec::sandbox::check(policy, &req)?;
    let max_output_bytes = policy.max_output_bytes();
    let reserve = Request::Job(JobRequest::Reserve {
        job_id: job_id.clone(),
        owner,
        argv: req.argv.clone(),
        max_output_bytes,
        limits: limits(policy),
    });
    app.executor
        .call(reserve)
        .await?
        .map_err(|e| ShellError::from_executor(e, None))?;
    let app = app.clone();
    let policy = app.snapshot();
    tokio::spawn(async move {
        let ran = exec::sandbox::run(&app, &policy, &sandbox_id, req).await;
        let end = match ran {
            Ok(r) => {
                report(
                    &app,
                    &job_id,
                    Stream::Stdout,
                    r.stdout.as_bytes(),
                    max_output_bytes,
                )
                .await;
                report(
                    &app,
                    &job_id,
                    Stream::Stderr,
                    r.stderr.as_bytes(),
                    max_output_bytes,
                )
                .await;
                RemoteEnd {
                    exit_code: r.exit_code,
                    timed_out: r.timed_out,
                }
            }
            Err(e) => {
                let note = format!("[ide] sandbox::exec failed: {e}\n");
                report(
                    &app,
                    &job_id,
                    Stream::Stderr,
                    note.as_bytes(),
                    max_output_bytes,
                )
                .await;
                RemoteEnd {
                    exit_code: None,
                    timed_out: false,
                }
            }
        };
        let complete = Request::Job(JobRequest::Complete { job_id, end });
        match app.executor.call(complete).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!("cannot record the end of a sandbox job: {e}"),
            Err(e) => tracing::warn!("cannot record the end of a sandbox job: {e}"),
        }
    });
    Ok(())
}

/// Hands a sandbox job's output to its record: only the newest
/// `max_output_bytes` (the rest would be dropped anyway), in frame-sized
/// pieces.
async fn report(app: &App, job_id: &str, stream: Stream, bytes: &[u8], max_output_bytes: u64) {
    let keep = usize::try_from(max_output_bytes).unwrap_or(usize::MAX);
    let bytes = &bytes[bytes.len().saturating_sub(keep)..];
    for chunk in bytes.chunks(CHUNK_LEN) {
        let append = Request::Job(JobRequest::Append {
            job_id: job_id.to_owned(),
            stream,
            data: chunk.to_vec(),
        });
        if !matches!(app.executor.call(append).await, Ok(Ok(_))) {
            tracing::warn!(%job_id, "cannot record the output of a sandbox job");
            return;
        }
    }
}
