//! The response shapes of the job functions (wire-shapes §2) and the
//! completion event of `shell::on-job-finished`.
//!
//! Security meaning: a listing is built from summaries that never carry
//! argv or output (the id is the capability for the full record), and a
//! completion event never carries output.
#![forbid(unsafe_code)]

use ide_proto::{JobCompletion, JobRecord, JobStatus, JobSummary, OutputSlice};
use schemars::JsonSchema;
use serde::Serialize;

/// A job's state on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Running,
    Finished,
    Killed,
    Failed,
}

impl From<JobStatus> for Status {
    fn from(s: JobStatus) -> Self {
        match s {
            JobStatus::Running => Status::Running,
            JobStatus::Finished => Status::Finished,
            JobStatus::Killed => Status::Killed,
            JobStatus::Failed => Status::Failed,
        }
    }
}

/// `{ job_id, argv }`, returned by `shell::exec_bg` at once.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Started {
    /// The job's id (the caller's, or a generated `job-<uuid>`).
    pub job_id: String,
    /// The command and arguments as spawned.
    pub argv: Vec<String>,
}

/// One job's full record.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Record {
    pub id: String,
    pub argv: Vec<String>,
    /// Unix ms.
    pub started_at_ms: u64,
    /// Unix ms; null while running.
    pub finished_at_ms: Option<u64>,
    pub status: Status,
    /// Null while running, or when killed by a signal.
    pub exit_code: Option<i32>,
    /// Captured stdout (lossy UTF-8): the newest `max_output_bytes`, or the
    /// asked window.
    pub stdout: String,
    /// Captured stderr, like `stdout`.
    pub stderr: String,
    /// True when older stdout bytes were dropped (past `max_output_bytes`).
    pub stdout_truncated: bool,
    /// True when older stderr bytes were dropped.
    pub stderr_truncated: bool,
}

impl Record {
    /// Shapes an executor record and its window of bytes.
    pub fn new(r: &JobRecord, stdout: &[u8], stderr: &[u8]) -> Self {
        Self {
            id: r.job_id.clone(),
            argv: r.argv.clone(),
            started_at_ms: r.started_at_ms,
            finished_at_ms: r.finished_at_ms,
            status: r.status.into(),
            exit_code: r.exit_code,
            stdout: String::from_utf8_lossy(stdout).into_owned(),
            stderr: String::from_utf8_lossy(stderr).into_owned(),
            stdout_truncated: r.stdout.dropped > 0,
            stderr_truncated: r.stderr.dropped > 0,
        }
    }
}

/// `shell::status`: `{ job }`, plus the paging fields when the caller paged.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StatusResponse {
    pub job: Record,
    #[serde(flatten)]
    pub page: Option<Page>,
}

/// Where the returned windows sit in everything the job wrote.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Page {
    /// Byte offset of the first returned stdout byte.
    pub stdout_offset: u64,
    /// Offset to ask for next to continue reading stdout.
    pub stdout_next_offset: u64,
    /// Bytes the job has written to stdout so far.
    pub stdout_total_bytes: u64,
    /// Oldest stdout bytes no longer kept.
    pub stdout_dropped_bytes: u64,
    pub stderr_offset: u64,
    pub stderr_next_offset: u64,
    pub stderr_total_bytes: u64,
    pub stderr_dropped_bytes: u64,
}

impl Page {
    /// The paging fields of a windowed record.
    pub fn new(out: &OutputSlice, err: &OutputSlice) -> Self {
        Self {
            stdout_offset: out.offset,
            stdout_next_offset: out.offset + out.len,
            stdout_total_bytes: out.total,
            stdout_dropped_bytes: out.dropped,
            stderr_offset: err.offset,
            stderr_next_offset: err.offset + err.len,
            stderr_total_bytes: err.total,
            stderr_dropped_bytes: err.dropped,
        }
    }
}

/// One job in a listing: never argv, stdout or stderr.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Summary {
    pub id: String,
    pub status: Status,
    pub started_at_ms: u64,
    pub finished_at_ms: Option<u64>,
    pub exit_code: Option<i32>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
}

impl From<JobSummary> for Summary {
    fn from(s: JobSummary) -> Self {
        Self {
            id: s.job_id,
            status: s.status.into(),
            started_at_ms: s.started_at_ms,
            finished_at_ms: s.finished_at_ms,
            exit_code: s.exit_code,
            stdout_truncated: s.stdout_truncated,
            stderr_truncated: s.stderr_truncated,
        }
    }
}

/// `shell::list`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ListResponse {
    pub jobs: Vec<Summary>,
    pub count: usize,
}

/// `shell::kill`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct KillResponse {
    pub job_id: String,
    /// False when the job was no longer running.
    pub killed: bool,
    /// The status after the call.
    pub status: Status,
    /// Why nothing was killed, or what a sandbox kill does not do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `shell::kill-session-jobs`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct KillSessionJobsResponse {
    /// Running jobs that were killed.
    pub killed: u64,
}

/// The event of `shell::on-job-finished`: never stdout or stderr.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Completion {
    pub job_id: String,
    /// The command and arguments as spawned.
    pub argv: Vec<String>,
    /// `finished`, `killed` or `failed`; never `running`.
    pub status: Status,
    pub exit_code: Option<i32>,
    pub started_at_ms: u64,
    pub finished_at_ms: u64,
    /// Clamped to zero if the clock moved backwards.
    pub duration_ms: u64,
}

impl From<&JobCompletion> for Completion {
    fn from(c: &JobCompletion) -> Self {
        Self {
            job_id: c.job_id.clone(),
            argv: c.argv.clone(),
            status: c.status.into(),
            exit_code: c.exit_code,
            started_at_ms: c.started_at_ms,
            finished_at_ms: c.finished_at_ms,
            duration_ms: c.finished_at_ms.saturating_sub(c.started_at_ms),
        }
    }
}

impl Completion {
    /// The completion a finished record stands for; `None` while it runs.
    pub fn of_record(r: &JobRecord) -> Option<Self> {
        let finished_at_ms = r.finished_at_ms?;
        if r.status == JobStatus::Running {
            return None;
        }
        Some(Self::from(&JobCompletion {
            job_id: r.job_id.clone(),
            argv: r.argv.clone(),
            status: r.status,
            exit_code: r.exit_code,
            started_at_ms: r.started_at_ms,
            finished_at_ms,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn slice(offset: u64, len: u64, total: u64, dropped: u64) -> OutputSlice {
        OutputSlice {
            offset,
            len,
            total,
            dropped,
        }
    }

    fn record(status: JobStatus, finished: Option<u64>) -> JobRecord {
        JobRecord {
            job_id: "j".into(),
            argv: vec!["echo".into(), "hi".into()],
            owner: Some("s".into()),
            remote: false,
            started_at_ms: 100,
            finished_at_ms: finished,
            status,
            exit_code: Some(0),
            stdout: slice(4, 3, 7, 4),
            stderr: slice(0, 0, 0, 0),
        }
    }

    #[test]
    fn without_paging_the_status_is_exactly_the_spec_shape() {
        let r = record(JobStatus::Finished, Some(150));
        let v = serde_json::to_value(StatusResponse {
            job: Record::new(&r, b"hi\n", b""),
            page: None,
        })
        .unwrap();
        assert_eq!(
            v,
            json!({"job": {
                "id": "j", "argv": ["echo", "hi"], "started_at_ms": 100, "finished_at_ms": 150,
                "status": "finished", "exit_code": 0, "stdout": "hi\n", "stderr": "",
                "stdout_truncated": true, "stderr_truncated": false
            }})
        );
    }

    #[test]
    fn paging_adds_its_fields_beside_the_record() {
        let r = record(JobStatus::Running, None);
        let v = serde_json::to_value(StatusResponse {
            job: Record::new(&r, b"abc", b""),
            page: Some(Page::new(&r.stdout, &r.stderr)),
        })
        .unwrap();
        assert_eq!(v["stdout_offset"], 4);
        assert_eq!(v["stdout_next_offset"], 7);
        assert_eq!(v["stdout_total_bytes"], 7);
        assert_eq!(v["stdout_dropped_bytes"], 4);
        assert_eq!(v["stderr_total_bytes"], 0);
        assert_eq!(v["job"]["status"], "running");
        assert!(v["job"]["finished_at_ms"].is_null());
    }

    #[test]
    fn a_summary_has_no_argv_or_output() {
        let v = serde_json::to_value(Summary::from(JobSummary {
            job_id: "j".into(),
            status: JobStatus::Killed,
            started_at_ms: 1,
            finished_at_ms: Some(2),
            exit_code: None,
            stdout_truncated: false,
            stderr_truncated: true,
        }))
        .unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "exit_code",
                "finished_at_ms",
                "id",
                "started_at_ms",
                "status",
                "stderr_truncated",
                "stdout_truncated"
            ]
        );
    }

    #[test]
    fn a_completion_never_runs_backwards_nor_carries_output() {
        let c = Completion::from(&JobCompletion {
            job_id: "j".into(),
            argv: vec!["x".into()],
            status: JobStatus::Failed,
            exit_code: Some(2),
            started_at_ms: 500,
            finished_at_ms: 400,
        });
        assert_eq!(c.duration_ms, 0);
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(
            v,
            json!({"job_id": "j", "argv": ["x"], "status": "failed", "exit_code": 2,
                   "started_at_ms": 500, "finished_at_ms": 400, "duration_ms": 0})
        );
        assert!(Completion::of_record(&record(JobStatus::Running, None)).is_none());
        let done = Completion::of_record(&record(JobStatus::Killed, Some(160))).unwrap();
        assert_eq!((done.status, done.duration_ms), (Status::Killed, 60));
    }

    #[test]
    fn kill_reasons_are_omitted_when_absent() {
        let v = serde_json::to_value(KillResponse {
            job_id: "j".into(),
            killed: true,
            status: Status::Killed,
            reason: None,
        })
        .unwrap();
        assert_eq!(
            v,
            json!({"job_id": "j", "killed": true, "status": "killed"})
        );
    }
}
