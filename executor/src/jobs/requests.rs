//! Answering the broker's job requests from the process-wide table.
//!
//! Security meaning: every answer comes from the executor's own table, so a
//! broker learns only what it asks for by id (or the argv-free summaries of
//! a listing); bulk output is streamed in bounded chunks, and a job's stdin
//! upload is bounded by [`MAX_JOB_STDIN`] before anything is spawned.
#![forbid(unsafe_code)]

use super::table::{no_such_job, Control, NewJob};
use super::{now_ms, output::Output, run, Jobs};
use crate::request::{Replies, Upload};
use crate::state::Executor;
use ide_proto::{ErrorKind, ExecutorError, JobReply, JobRequest, Reply, Stdin, Stream, CHUNK_LEN};
use std::sync::Arc;

/// Largest stdin a job may be given (it is held until the job reads it).
pub const MAX_JOB_STDIN: usize = 64 * 1024 * 1024;
/// Summaries per streamed batch of a listing (well within a frame).
pub const SUMMARY_BATCH: usize = 256;

/// Answers one job request. Streamed parts go through `replies`; the
/// terminal answer is returned. `conn` is the asking connection (remote jobs
/// it reserves end with it).
pub async fn handle(
    executor: &Executor,
    jobs: &Arc<Jobs>,
    conn: u64,
    request: JobRequest,
    upload: Option<Upload>,
    replies: &Replies,
) -> Result<Reply, ExecutorError> {
    if let Some(retention_ms) = retention_of(&request) {
        jobs.remember_retention(retention_ms);
    }
    let answer = match request {
        JobRequest::Start {
            job_id,
            owner,
            mut spec,
            limits,
        } => {
            if spec.stdin == Stdin::Upload {
                let Some(upload) = upload else {
                    return Err(ExecutorError::new(
                        ErrorKind::Internal,
                        "stdin upload is missing",
                    ));
                };
                spec.stdin = Stdin::Bytes(collect(upload, replies).await?);
            }
            let started_at_ms = run::start(executor, jobs, job_id.clone(), owner, *spec, limits)?;
            JobReply::Started {
                job_id,
                started_at_ms,
            }
        }
        JobRequest::Reserve {
            job_id,
            owner,
            argv,
            max_output_bytes,
            limits,
        } => {
            let job = NewJob {
                job_id: job_id.clone(),
                owner,
                argv,
                output: Output::new(max_output_bytes),
                control: Control::Remote { conn },
            };
            let started_at_ms = jobs.table().insert(job, limits, now_ms())?;
            JobReply::Started {
                job_id,
                started_at_ms,
            }
        }
        JobRequest::Append {
            job_id,
            stream,
            data,
        } => {
            jobs.table().remote_output(&job_id)?.push(stream, &data);
            JobReply::Done
        }
        JobRequest::Complete { job_id, end } => {
            jobs.update(|t| t.end_remote(&job_id, end, now_ms()))?;
            JobReply::Done
        }
        JobRequest::Status {
            job_id,
            window,
            retention_ms,
        } => {
            let (record, out, err) =
                jobs.table()
                    .record(&job_id, window, retention_ms, now_ms())?;
            stream_bytes(replies, Stream::Stdout, &out).await;
            stream_bytes(replies, Stream::Stderr, &err).await;
            JobReply::Record(record)
        }
        JobRequest::List { retention_ms } => {
            let all = jobs.table().summaries(retention_ms, now_ms());
            for batch in all.chunks(SUMMARY_BATCH) {
                replies
                    .send(Reply::Job(JobReply::Summaries(batch.to_vec())))
                    .await;
            }
            JobReply::Listed {
                count: all.len() as u64,
            }
        }
        JobRequest::Kill { job_id } => {
            let (killed, remote, status) = jobs
                .update(|t| t.kill(&job_id, now_ms()))
                .ok_or_else(|| no_such_job(&job_id))?;
            JobReply::Kill {
                killed,
                remote,
                status,
            }
        }
        JobRequest::KillOwned { owners } => JobReply::KilledOwned {
            killed: jobs.update(|t| t.kill_owned(&owners, now_ms())),
        },
        JobRequest::Prune { retention_ms } => JobReply::Pruned {
            count: jobs.update(|t| t.prune(retention_ms, now_ms())),
        },
        JobRequest::Ack { job_ids } => {
            jobs.table().ack(&job_ids);
            JobReply::Done
        }
        JobRequest::Shutdown => {
            jobs.shut_down().await;
            JobReply::Done
        }
    };
    Ok(Reply::Job(answer))
}

/// The retention a request carries, if any.
fn retention_of(request: &JobRequest) -> Option<u64> {
    match request {
        JobRequest::Start { limits, .. } | JobRequest::Reserve { limits, .. } => {
            Some(limits.retention_ms)
        }
        JobRequest::Status { retention_ms, .. }
        | JobRequest::List { retention_ms }
        | JobRequest::Prune { retention_ms } => Some(*retention_ms),
        _ => None,
    }
}

/// Reads a whole stdin upload, crediting each frame, up to [`MAX_JOB_STDIN`].
async fn collect(mut upload: Upload, replies: &Replies) -> Result<Vec<u8>, ExecutorError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = upload.next(replies).await {
        if bytes.len() + chunk.len() > MAX_JOB_STDIN {
            return Err(ExecutorError::new(
                ErrorKind::TooLarge,
                format!("the stdin of a background job exceeds {MAX_JOB_STDIN} bytes"),
            ));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

async fn stream_bytes(replies: &Replies, stream: Stream, bytes: &[u8]) {
    for chunk in bytes.chunks(CHUNK_LEN) {
        replies
            .send(Reply::Output {
                stream,
                data: chunk.to_vec(),
            })
            .await;
    }
}
