//! `shell::status`, `shell::list`, `shell::kill` and
//! `shell::kill-session-jobs`, answered from the executor's table.
//!
//! Security meaning: the broker holds no job state; every answer comes from
//! the executor, which prunes expired records first, so a pruned id reads
//! exactly like one that never existed (`S211`).
#![forbid(unsafe_code)]

use super::delivery::duration_ms;
use super::request;
use super::response::{
    Completion, KillResponse, KillSessionJobsResponse, ListResponse, Page, Record, StatusResponse,
    Summary,
};
use crate::app::App;
use crate::error::ShellError;
use ide_proto::{JobRecord, JobReply, JobRequest, OutputWindow, Reply, Request, Stream};
use serde_json::Value;

/// What a sandbox kill cannot do.
pub const SANDBOX_KILL_REASON: &str = "sandbox jobs cannot be hard-killed: the record is marked \
    killed, but the in-VM process runs until its timeout_ms (or sandbox::stop)";

fn unexpected(op: &str, reply: &Reply) -> ShellError {
    ShellError::internal(format!("unexpected executor reply to {op}: {reply:?}"))
}

fn retention_ms(app: &App) -> u64 {
    duration_ms(app.snapshot().job_retention())
}

/// One record and the asked window of each stream.
pub async fn record(
    app: &App,
    job_id: &str,
    window: OutputWindow,
) -> Result<(JobRecord, Vec<u8>, Vec<u8>), ShellError> {
    let mut stream = app
        .executor
        .request(Request::Job(JobRequest::Status {
            job_id: job_id.to_owned(),
            window,
            retention_ms: retention_ms(app),
        }))
        .await?;
    let (mut out, mut err) = (Vec::new(), Vec::new());
    loop {
        match stream.next().await? {
            Reply::Output {
                stream: Stream::Stdout,
                data,
            } => out.extend_from_slice(&data),
            Reply::Output {
                stream: Stream::Stderr,
                data,
            } => err.extend_from_slice(&data),
            Reply::Job(JobReply::Record(record)) => return Ok((record, out, err)),
            Reply::Error(e) => return Err(ShellError::from_executor(e, None)),
            other => return Err(unexpected("status", &other)),
        }
    }
}

/// The retained completion of a job, for a late observer.
pub async fn completion(app: &App, job_id: String) -> Option<Completion> {
    let window = OutputWindow {
        max_bytes: Some(0),
        ..OutputWindow::default()
    };
    let (record, _, _) = record(app, &job_id, window).await.ok()?;
    Completion::of_record(&record)
}

/// `shell::status`.
pub async fn status(app: &App, input: &Value) -> Result<StatusResponse, ShellError> {
    let job_id = request::job_id("status", input)?;
    let paging = request::window(input)?;
    let (record, out, err) = record(app, &job_id, paging.unwrap_or_default()).await?;
    Ok(StatusResponse {
        job: Record::new(&record, &out, &err),
        page: paging.map(|_| Page::new(&record.stdout, &record.stderr)),
    })
}

/// `shell::list`.
pub async fn list(app: &App) -> Result<ListResponse, ShellError> {
    let mut stream = app
        .executor
        .request(Request::Job(JobRequest::List {
            retention_ms: retention_ms(app),
        }))
        .await?;
    let mut jobs: Vec<Summary> = Vec::new();
    loop {
        match stream.next().await? {
            Reply::Job(JobReply::Summaries(batch)) => {
                jobs.extend(batch.into_iter().map(Summary::from))
            }
            Reply::Job(JobReply::Listed { .. }) => break,
            Reply::Error(e) => return Err(ShellError::from_executor(e, None)),
            other => return Err(unexpected("list", &other)),
        }
    }
    Ok(ListResponse {
        count: jobs.len(),
        jobs,
    })
}

/// `shell::kill`.
pub async fn kill(app: &App, input: &Value) -> Result<KillResponse, ShellError> {
    let job_id = request::job_id("kill", input)?;
    let reply = app
        .executor
        .call(Request::Job(JobRequest::Kill {
            job_id: job_id.clone(),
        }))
        .await?
        .map_err(|e| ShellError::from_executor(e, None))?;
    let Reply::Job(JobReply::Kill {
        killed,
        remote,
        status,
    }) = reply
    else {
        return Err(unexpected("kill", &reply));
    };
    let reason = match (killed, remote) {
        (false, _) => Some("not running".to_owned()),
        (true, true) => Some(SANDBOX_KILL_REASON.to_owned()),
        (true, false) => None,
    };
    Ok(KillResponse {
        job_id,
        killed,
        status: status.into(),
        reason,
    })
}

/// `shell::kill-session-jobs`.
pub async fn kill_session_jobs(
    app: &App,
    input: &Value,
) -> Result<KillSessionJobsResponse, ShellError> {
    let owners = request::session_ids(input)?;
    let reply = app
        .executor
        .call(Request::Job(JobRequest::KillOwned { owners }))
        .await?
        .map_err(|e| ShellError::from_executor(e, None))?;
    match reply {
        Reply::Job(JobReply::KilledOwned { killed }) => Ok(KillSessionJobsResponse { killed }),
        other => Err(unexpected("kill-session-jobs", &other)),
    }
}
