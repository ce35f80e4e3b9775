//! Every message that crosses the broker ↔ executor socket.
//!
//! A request carries a broker-chosen id; the executor answers with zero or more
//! streamed replies ([`Reply::Output`], [`Reply::Chunk`]) and then exactly one
//! terminal reply. Events the executor raises on its own (a job finished) use
//! id [`EVENT_ID`]. Bulk uploads (file bodies) follow their request as
//! [`Request::Data`] frames on the same id, ended by [`Request::DataEnd`].

mod exec;
mod fs;
mod jobs;

pub use exec::*;
pub use fs::*;
pub use jobs::*;

use serde::{Deserialize, Serialize};

/// The id of frames that answer no request.
pub const EVENT_ID: u64 = 0;

/// Bulk streams (file reads and writes) keep at most this many chunks in
/// flight before the sender waits for [`Request::Credit`] / [`Reply::Credit`],
/// so a slow engine-side reader or writer never makes either process buffer
/// a whole file.
pub const STREAM_WINDOW: u32 = 16;

/// A frame from the broker to the executor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToExecutor {
    pub id: u64,
    pub body: Request,
}

/// A frame from the executor to the broker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToBroker {
    pub id: u64,
    pub body: Reply,
}

/// What the broker asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Request {
    /// Must be the first frame; the executor closes the connection on any
    /// other version.
    Hello { version: u32 },
    /// Abandon the request with this frame's id (its caller went away).
    Cancel,
    /// One chunk of an upload that belongs to the request with this id.
    Data {
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
    },
    /// The upload for the request with this id is complete.
    DataEnd,
    /// Flow control for a download: the broker consumed this many
    /// [`Reply::Chunk`]s of the request with this id.
    Credit { chunks: u32 },
    /// Run a command to completion: [`Reply::Output`]s, then [`Reply::Exited`].
    Exec(ExecSpec),
    /// Background jobs (see [`jobs`]).
    Job(JobRequest),
    /// A filesystem operation beneath a root (see [`fs`]).
    Fs(FsRequest),
}

/// What the executor answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Reply {
    /// Answer to [`Request::Hello`].
    Hello {
        version: u32,
        executor_version: String,
        pid: u32,
    },
    /// Streamed process output.
    Output {
        stream: Stream,
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
    },
    /// Streamed file bytes (a read).
    Chunk {
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
    },
    /// Flow control for an upload: the executor consumed this many
    /// [`Request::Data`] frames of the request with this id.
    Credit { chunks: u32 },
    /// Terminal: a command ran to its end (or was stopped).
    Exited(ExitReport),
    /// Terminal: a job operation's answer.
    Job(JobReply),
    /// Terminal: a filesystem operation's answer.
    Fs(FsReply),
    /// An unsolicited job event (id [`EVENT_ID`]).
    JobEvent(JobEvent),
    /// Terminal: the request failed.
    Error(ExecutorError),
}

/// Which output stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// A failure class the broker maps to the surface's code (`S2xx` or `C2xx`,
/// equal digits meaning the same class) in exactly one place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorKind {
    /// Malformed request (x10).
    Invalid,
    /// Missing, permission denied or denied by policy: deliberately one kind (x11).
    NotFound,
    /// Wrong file type for the operation (x12).
    WrongType,
    /// Already exists (x13).
    Exists,
    /// Directory not empty (x14).
    NotEmpty,
    /// Escapes the root (x15).
    Escape,
    /// Internal or I/O failure (x16).
    Internal,
    /// Invalid regex (x17).
    BadRegex,
    /// Size cap exceeded (x18).
    TooLarge,
    /// Confinement was required but cannot be enforced; nothing ran (x22).
    Unconfinable,
}

/// A failed request. `message` never names a path the broker did not send.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutorError {
    pub kind: ErrorKind,
    pub message: String,
}

impl ExecutorError {
    /// Shorthand for building an error of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ExecutorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ExecutorError {}

/// A path the executor resolves beneath `root` with `RESOLVE_BENEATH`.
///
/// The broker picks the root lexically (the jail root, or `/` when unjailed)
/// and sends the remainder relative to it; the executor never joins strings
/// onto the root, so a symlink or `..` that leaves it fails with
/// [`ErrorKind::Escape`].
///
/// A session-scoped call also names an `anchor`: a directory beneath `root`
/// that the executor resolves first (itself beneath `root`), and `rel` is
/// then resolved beneath the anchor. Both confinements hold physically: a
/// symlink swapped into the anchor's path cannot carry it out of the jail,
/// and one inside the anchor cannot carry `rel` out of the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootedPath {
    /// Absolute path of the root directory.
    pub root: String,
    /// The session directory beneath `root` that `rel` must stay beneath,
    /// relative to `root`; empty means the root itself.
    pub anchor: String,
    /// Relative remainder (beneath the anchor); empty means the anchor itself.
    pub rel: String,
}

impl RootedPath {
    /// A path beneath `root` with no session anchor.
    pub fn new(root: impl Into<String>, rel: impl Into<String>) -> Self {
        Self {
            root: root.into(),
            anchor: String::new(),
            rel: rel.into(),
        }
    }
}
