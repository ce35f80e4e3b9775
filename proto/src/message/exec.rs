//! Running commands: the spec the broker builds, the report the executor returns.

use super::RootedPath;
use serde::{Deserialize, Serialize};

/// Everything the executor needs to run one command. The broker has already
/// applied policy; the executor re-applies its floor (env keys, cwd beneath
/// its root) before spawning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecSpec {
    /// argv[0] is resolved on the child's `PATH`.
    pub argv: Vec<String>,
    pub env: EnvSpec,
    /// Working directory; `None` runs in the executor's own cwd.
    pub cwd: Option<RootedPath>,
    /// What the command reads on stdin.
    pub stdin: Stdin,
    /// Kill the whole process tree after this long; 0 = never.
    pub timeout_ms: u64,
    /// Per-stream cap on what is kept; the rest is drained and counted.
    pub max_output_bytes: u64,
    /// Write confinement for a scoped exec; `None` runs unconfined.
    pub confine: Option<Confinement>,
}

/// How to build the child's environment from the executor's start-up
/// environment (which never holds the engine token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvSpec {
    /// Forward the whole start-up environment.
    pub inherit: bool,
    /// Forwarded keys when `inherit` is false.
    pub allow: Vec<String>,
    /// Per-call values, applied last; gated again by the executor.
    pub set: Vec<(String, String)>,
}

/// Landlock write confinement of one spawn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confinement {
    /// Absolute paths beneath which the command may write; missing ones are
    /// skipped.
    pub writable: Vec<String>,
    /// A session root whose repository's git dir (the enclosing `.git`, or
    /// a linked worktree's common dir) is writable too; the executor finds
    /// it while it builds the ruleset, so confinement costs no round trip.
    pub git_dir_of: Option<String>,
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitReport {
    /// `None` when killed by a signal or by the timeout.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub duration_ms: u64,
    pub stdout_total: u64,
    pub stderr_total: u64,
}

/// The source of a command's standard input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Stdin {
    /// `/dev/null`.
    Null,
    /// These bytes, then EOF.
    Bytes(#[serde(with = "serde_bytes")] Vec<u8>),
    /// Bytes that follow the request as [`crate::Request::Data`] frames,
    /// ended by [`crate::Request::DataEnd`] (for input too large for one
    /// frame); the executor credits each frame it consumed.
    Upload,
}
