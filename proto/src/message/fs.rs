//! Filesystem operations beneath a root.

use super::RootedPath;
use serde::{Deserialize, Serialize};

/// A filesystem operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum FsRequest {
    /// Open a directory beneath its root and report that it is one (the exec
    /// `cwd` check).
    CheckDir { path: RootedPath },
    /// Open each configured root (it must exist, be a directory and lie
    /// beneath an executor ceiling) and report its canonical absolute path, so
    /// the broker can validate `fs.host_roots` without touching the
    /// filesystem itself. Answered by [`FsReply::CanonicalRoots`], in order.
    CanonicalRoots { roots: Vec<String> },
}

/// The answer to an [`FsRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum FsReply {
    Ok,
    /// Canonical absolute paths, one per root of [`FsRequest::CanonicalRoots`].
    CanonicalRoots {
        roots: Vec<String>,
    },
}
