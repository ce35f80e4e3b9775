//! Background jobs, owned by the executor so they outlive a broker restart.

use super::ExecSpec;
use serde::{Deserialize, Serialize};

/// A job operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum JobRequest {
    /// Start `spec` under `job_id` (already reserved by the broker).
    Start {
        job_id: String,
        owner: Option<String>,
        spec: ExecSpec,
    },
}

/// The answer to a [`JobRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum JobReply {
    Started { job_id: String, started_at_ms: u64 },
}

/// Something that happened to a job without being asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum JobEvent {
    Finished { job_id: String },
}
