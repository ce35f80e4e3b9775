//! Background jobs, owned by the executor so they outlive a broker restart.
//!
//! The executor keeps every job's process group, output and record; the
//! broker asks for them by id and never holds job state of its own, so a new
//! broker needs nothing re-learned. A completion is queued in the executor
//! until a broker acknowledges it ([`JobRequest::Ack`]) and is re-sent to
//! every broker that connects before then.
//!
//! Bulk data never rides in one frame: a record's output streams as
//! [`crate::Reply::Output`] chunks before its terminal [`JobReply::Record`],
//! and a listing streams as [`JobReply::Summaries`] batches before
//! [`JobReply::Listed`].

use super::{ExecSpec, Stream};
use serde::{Deserialize, Serialize};

/// A job operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum JobRequest {
    /// Check-and-insert `job_id` and spawn `spec` under it, atomically: an
    /// id held by any record ⇒ [`crate::ErrorKind::Exists`]; `limits`
    /// exceeded ⇒ [`crate::ErrorKind::Invalid`]; in both cases nothing ran.
    /// `spec.timeout_ms` is the host hard cap (0 = none). Answered by
    /// [`JobReply::Started`].
    Start {
        job_id: String,
        owner: Option<String>,
        spec: Box<ExecSpec>,
        limits: JobLimits,
    },
    /// Like [`JobRequest::Start`] for a job the broker runs elsewhere (a
    /// sandbox): the record is reserved with no process. Its output arrives
    /// as [`JobRequest::Append`] and its end as [`JobRequest::Complete`]; if
    /// the reserving connection ends first, the job ends `failed`.
    Reserve {
        job_id: String,
        owner: Option<String>,
        argv: Vec<String>,
        max_output_bytes: u64,
        limits: JobLimits,
    },
    /// Output of a reserved job. Answered by [`JobReply::Done`].
    Append {
        job_id: String,
        stream: Stream,
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
    },
    /// A reserved job ended. Answered by [`JobReply::Done`].
    Complete { job_id: String, end: RemoteEnd },
    /// One record, with a byte window of each stream. Answered by
    /// `Reply::Output` chunks (stdout first, then stderr) and then
    /// [`JobReply::Record`]. Records finished longer than `retention_ms`
    /// ago are pruned first, so an expired id is missing.
    Status {
        job_id: String,
        window: OutputWindow,
        retention_ms: u64,
    },
    /// Summaries of every record, after pruning like [`JobRequest::Status`].
    List { retention_ms: u64 },
    /// Kill a running job's process group. Answered by [`JobReply::Kill`].
    Kill { job_id: String },
    /// Kill every running job owned by one of `owners`. Answered by
    /// [`JobReply::KilledOwned`].
    KillOwned { owners: Vec<String> },
    /// Forget records finished at least `retention_ms` ago. Answered by
    /// [`JobReply::Pruned`].
    Prune { retention_ms: u64 },
    /// The broker delivered these completions; stop re-sending them.
    /// Answered by [`JobReply::Done`].
    Ack { job_ids: Vec<String> },
    /// The broker is shutting down on purpose: kill every job (waiting a
    /// bounded time) and, when this executor was started by a broker, exit
    /// once the connection ends. Answered by [`JobReply::Done`].
    Shutdown,
}

/// The broker's live limits, applied inside the executor's check-and-insert.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobLimits {
    /// Refuse the start when this many jobs are already running.
    pub max_running: u32,
    /// Records finished this long ago are pruned before the id check.
    pub retention_ms: u64,
}

/// Which bytes of each stream a status returns. Offsets count from the
/// first byte the job ever wrote; bytes that were dropped (older than the
/// newest `max_output_bytes`) cannot be returned, so a window starts no
/// earlier than the oldest kept byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct OutputWindow {
    pub stdout_offset: Option<u64>,
    pub stderr_offset: Option<u64>,
    /// Per stream; `None` returns everything kept from the offset on.
    pub max_bytes: Option<u64>,
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobStatus {
    Running,
    /// Exited with status 0.
    Finished,
    /// Killed by `shell::kill`, a session kill, the host hard cap or a
    /// shutdown. Never downgraded by a later exit.
    Killed,
    /// Exited non-zero, died of a signal, or could not be followed to its end.
    Failed,
}

/// How a reserved (sandbox) job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteEnd {
    pub exit_code: Option<i32>,
    /// Its own timeout stopped it (the job ends `killed`).
    pub timed_out: bool,
}

/// A job as `shell::status` reports it; the output bytes travel separately.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    pub job_id: String,
    pub argv: Vec<String>,
    pub owner: Option<String>,
    /// True for a reserved job (no process here; a kill only flips it).
    pub remote: bool,
    pub started_at_ms: u64,
    pub finished_at_ms: Option<u64>,
    pub status: JobStatus,
    pub exit_code: Option<i32>,
    pub stdout: OutputSlice,
    pub stderr: OutputSlice,
}

/// Where the returned window of one stream sits in everything it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputSlice {
    /// Offset of the first returned byte.
    pub offset: u64,
    /// Returned bytes (streamed before the record).
    pub len: u64,
    /// Bytes the stream has written so far.
    pub total: u64,
    /// Oldest bytes no longer kept (`total` minus what is kept).
    pub dropped: u64,
}

/// A job as `shell::list` reports it: never argv or output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSummary {
    pub job_id: String,
    pub status: JobStatus,
    pub started_at_ms: u64,
    pub finished_at_ms: Option<u64>,
    pub exit_code: Option<i32>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
}

/// The answer to a [`JobRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum JobReply {
    Started {
        job_id: String,
        started_at_ms: u64,
    },
    /// Terminal answer of [`JobRequest::Status`].
    Record(JobRecord),
    /// Streamed (not terminal): one batch of a listing.
    Summaries(Vec<JobSummary>),
    /// Terminal answer of [`JobRequest::List`]: how many summaries were sent.
    Listed {
        count: u64,
    },
    /// Terminal answer of [`JobRequest::Kill`]: `killed` is false when the
    /// job was no longer running; `status` is the record's status after.
    Kill {
        killed: bool,
        remote: bool,
        status: JobStatus,
    },
    KilledOwned {
        killed: u64,
    },
    Pruned {
        count: u64,
    },
    Done,
}

/// A finished job, as observers of `shell::on-job-finished` see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobCompletion {
    pub job_id: String,
    pub argv: Vec<String>,
    /// Never [`JobStatus::Running`].
    pub status: JobStatus,
    pub exit_code: Option<i32>,
    pub started_at_ms: u64,
    pub finished_at_ms: u64,
}

/// Something that happened to a job without being asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobEvent {
    /// Sent once the record is final; re-sent to each new connection until
    /// acknowledged.
    Finished(JobCompletion),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{decode, encode};
    use crate::{EnvSpec, Stdin, ToBroker, ToExecutor};

    fn roundtrip_request(body: JobRequest) {
        let frame = ToExecutor {
            id: 3,
            body: crate::Request::Job(body),
        };
        let bytes = encode(&frame).unwrap();
        assert_eq!(decode::<ToExecutor>(&bytes[4..]).unwrap(), frame);
    }

    #[test]
    fn every_request_round_trips() {
        let limits = JobLimits {
            max_running: 16,
            retention_ms: 3_600_000,
        };
        let spec = ExecSpec {
            argv: vec!["true".into()],
            env: EnvSpec {
                inherit: true,
                allow: vec![],
                set: vec![],
            },
            cwd: None,
            stdin: Stdin::Null,
            timeout_ms: 0,
            max_output_bytes: 1,
            confine: None,
        };
        for body in [
            JobRequest::Start {
                job_id: "j".into(),
                owner: Some("s".into()),
                spec: Box::new(spec),
                limits,
            },
            JobRequest::Reserve {
                job_id: "j".into(),
                owner: None,
                argv: vec!["uname".into()],
                max_output_bytes: 1,
                limits,
            },
            JobRequest::Append {
                job_id: "j".into(),
                stream: Stream::Stderr,
                data: vec![1, 2],
            },
            JobRequest::Complete {
                job_id: "j".into(),
                end: RemoteEnd {
                    exit_code: Some(-1),
                    timed_out: true,
                },
            },
            JobRequest::Status {
                job_id: "j".into(),
                window: OutputWindow {
                    stdout_offset: Some(u64::MAX),
                    stderr_offset: None,
                    max_bytes: Some(0),
                },
                retention_ms: 0,
            },
            JobRequest::List { retention_ms: 1 },
            JobRequest::Kill { job_id: "j".into() },
            JobRequest::KillOwned {
                owners: vec!["a".into()],
            },
            JobRequest::Prune { retention_ms: 2 },
            JobRequest::Ack {
                job_ids: vec!["j".into()],
            },
            JobRequest::Shutdown,
        ] {
            roundtrip_request(body);
        }
    }

    #[test]
    fn a_full_batch_of_summaries_with_the_longest_ids_fits_in_a_frame() {
        let summary = JobSummary {
            job_id: "x".repeat(256),
            status: JobStatus::Failed,
            started_at_ms: u64::MAX,
            finished_at_ms: Some(u64::MAX),
            exit_code: Some(i32::MIN),
            stdout_truncated: true,
            stderr_truncated: true,
        };
        let frame = ToBroker {
            id: u64::MAX,
            body: crate::Reply::Job(JobReply::Summaries(vec![summary; 256])),
        };
        assert!(encode(&frame).is_ok());
    }
}
