//! Filesystem operations beneath a root.
//!
//! Every operation on a caller's path is [`FsRequest::Guarded`]: it carries
//! the operator's `fs.denylist_paths`, which the executor re-checks on the
//! object it actually opened (device and inode, plus the kernel's name of the
//! object for denylisted directories), so neither a symlink, a hard link nor a
//! `..` spelling gets past the broker's lexical check.
//!
//! Streams, all under the credit of [`crate::STREAM_WINDOW`]:
//! - [`FsOp::Read`] answers with one [`crate::Reply::Chunk`] holding a
//!   [`pack`]ed [`ReadHeader`], then raw file bytes in chunks of at most
//!   [`crate::CHUNK_LEN`], then [`FsReply::Ok`].
//! - [`FsOp::Walk`] and [`FsOp::Grep`] answer with chunks that each hold a
//!   [`pack`]ed `Vec<String>` (walk-relative file paths) or `Vec<GrepMatch>`,
//!   then [`FsReply::Ok`].
//! - [`FsOp::Write`] is followed by its body as [`crate::Request::Data`]
//!   frames and [`crate::Request::DataEnd`]; the executor writes a sibling
//!   temp file and renames it over the target only after `DataEnd`, so a
//!   cancelled or failed upload leaves nothing behind.

use super::RootedPath;
use serde::{de::DeserializeOwned, Deserialize, Serialize};

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
    /// An operation on caller paths. `deny` is `fs.denylist_paths`: an object
    /// that is one of them (by identity) or lies beneath a denylisted
    /// directory reads exactly like a missing one.
    Guarded { deny: Vec<String>, op: FsOp },
}

/// The operations behind `shell::fs::*`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum FsOp {
    /// One page of a directory sorted by name (bytes): entries
    /// `offset..offset + limit`. Answered by [`FsReply::Listing`].
    Ls {
        path: RootedPath,
        offset: u64,
        limit: u32,
    },
    /// Metadata of what the path leads to (symlinks inside the root are
    /// followed). Answered by [`FsReply::Entry`].
    Stat { path: RootedPath },
    /// Create a directory; `mode` is applied exactly (no umask) to the leaf.
    /// Answered by [`FsReply::Mkdir`].
    Mkdir {
        path: RootedPath,
        mode: u32,
        parents: bool,
    },
    /// Remove the entry itself (a symlink is unlinked, never followed).
    Rm { path: RootedPath, recursive: bool },
    /// Change mode (and owner) of the entry itself; a recursive walk never
    /// follows symlinks. Answered by [`FsReply::Chmod`].
    Chmod {
        path: RootedPath,
        mode: u32,
        uid: Option<u32>,
        gid: Option<u32>,
        recursive: bool,
    },
    /// Rename one entry. Answered by [`FsReply::Mv`].
    Mv {
        src: RootedPath,
        dst: RootedPath,
        overwrite: bool,
    },
    /// Stream a regular file out (see the module docs). `max_bytes` is
    /// `fs.max_read_bytes` (`None` = unlimited).
    Read {
        path: RootedPath,
        max_bytes: Option<u64>,
    },
    /// Replace a file with the uploaded body. `max_bytes` is
    /// `fs.max_write_bytes`. Answered by [`FsReply::Written`].
    Write {
        path: RootedPath,
        mode: u32,
        parents: bool,
        max_bytes: Option<u64>,
    },
    /// List the regular files beneath a path (the path itself when it is a
    /// file) without following symlinks.
    Walk {
        path: RootedPath,
        filter: WalkFilter,
    },
    /// Search the regular files a [`FsOp::Walk`] would list.
    Grep {
        path: RootedPath,
        filter: WalkFilter,
        search: GrepSearch,
    },
    /// Replace in each file line by line, after every file was resolved
    /// (one failure to resolve fails the request with nothing written).
    /// Answered by [`FsReply::Sed`], one outcome per file, in order.
    Sed {
        files: Vec<RootedPath>,
        edit: SedEdit,
        /// Files larger than this are skipped.
        max_file_bytes: u64,
    },
}

/// Which files a walk yields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WalkFilter {
    /// False: a directory is refused (`Invalid`).
    pub recursive: bool,
    /// Globs a file must match one of (none: every file).
    pub include: Vec<String>,
    /// Globs that drop a file, or prune a directory.
    pub exclude: Vec<String>,
}

/// What a grep looks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrepSearch {
    /// A Rust regex, compiled by the executor (`BadRegex` when it does not).
    pub pattern: String,
    pub ignore_case: bool,
    /// Longer matching lines are cut at a char boundary and end in `…`.
    pub max_line_bytes: u32,
}

/// What a sed replaces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SedEdit {
    pub pattern: String,
    /// Expands `$1` / `${name}` when `regex` is true.
    pub replacement: String,
    /// False: `pattern` and `replacement` are literal.
    pub regex: bool,
    /// Replace only the first match of each line.
    pub first_only: bool,
    pub ignore_case: bool,
}

/// The answer to an [`FsRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum FsReply {
    Ok,
    /// Canonical absolute paths, one per root of [`FsRequest::CanonicalRoots`].
    CanonicalRoots {
        roots: Vec<String>,
    },
    /// One page of [`FsOp::Ls`]; `total` counts every entry of the directory.
    Listing {
        entries: Vec<FsEntry>,
        total: u64,
    },
    Entry(FsEntry),
    Mkdir {
        created: bool,
        already_existed: bool,
    },
    Chmod {
        entries_changed: u64,
    },
    Mv {
        overwrote: bool,
    },
    Written {
        bytes: u64,
    },
    Sed {
        outcomes: Vec<SedOutcome>,
    },
}

/// One directory entry or stat result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsEntry {
    /// The entry's name (lossy UTF-8).
    pub name: String,
    pub is_dir: bool,
    pub is_symlink: bool,
    pub size: u64,
    /// `st_mode & 0o7777`.
    pub mode: u32,
    /// Unix seconds.
    pub mtime: i64,
}

/// What a read stream starts with: the opened file's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadHeader {
    /// Bytes that follow (the size when the file was opened).
    pub size: u64,
    pub mode: u32,
    pub mtime: i64,
}

/// One matching line of a grep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrepMatch {
    /// The file, relative to the searched path (empty when it is the file).
    pub file: String,
    /// 1-based.
    pub line: u64,
    /// The line without its terminator, lossy UTF-8, possibly cut.
    pub content: String,
}

/// What happened to one file of a sed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SedOutcome {
    pub replacements: u64,
    /// Why the file was skipped; `None` on success.
    pub error: Option<String>,
}

/// How an [`FsOp::Mv`] failure that belongs to the destination begins, so
/// the broker can word it with the caller's destination string.
pub const MV_DESTINATION: &str = "destination: ";

/// Marks the failure of the `index`-th operand of a multi-path request
/// ([`FsOp::Sed`]), so the broker can word it with that operand's string.
pub fn operand_error(index: usize, err: crate::ExecutorError) -> crate::ExecutorError {
    crate::ExecutorError::new(err.kind, format!("operand {index}: {}", err.message))
}

/// Splits an error made by [`operand_error`] back into index and error.
pub fn operand_of(err: &crate::ExecutorError) -> Option<(usize, crate::ExecutorError)> {
    let rest = err.message.strip_prefix("operand ")?;
    let (index, message) = rest.split_once(": ")?;
    Some((
        index.parse().ok()?,
        crate::ExecutorError::new(err.kind, message),
    ))
}

/// Encodes one structured chunk of a stream (see the module docs).
pub fn pack<T: Serialize>(value: &T) -> Result<Vec<u8>, postcard::Error> {
    postcard::to_stdvec(value)
}

/// Decodes a chunk made by [`pack`], refusing trailing bytes.
pub fn unpack<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, postcard::Error> {
    let (value, rest) = postcard::take_from_bytes(bytes)?;
    if rest.is_empty() {
        Ok(value)
    } else {
        Err(postcard::Error::DeserializeBadEncoding)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_chunks_round_trip_and_refuse_trailing_bytes() {
        let matches = vec![GrepMatch {
            file: "a/b".into(),
            line: 3,
            content: "x…".into(),
        }];
        let bytes = pack(&matches).unwrap();
        assert_eq!(unpack::<Vec<GrepMatch>>(&bytes).unwrap(), matches);
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(unpack::<Vec<GrepMatch>>(&longer).is_err());
        assert!(unpack::<ReadHeader>(&bytes[..1]).is_err());
    }

    #[test]
    fn operand_errors_round_trip() {
        let err = crate::ExecutorError::new(crate::ErrorKind::Escape, "path escapes: x");
        let marked = operand_error(3, err.clone());
        assert_eq!(operand_of(&marked), Some((3, err.clone())));
        assert_eq!(operand_of(&err), None);
    }

    #[test]
    fn a_guarded_request_survives_a_frame() {
        let req = crate::Request::Fs(FsRequest::Guarded {
            deny: vec!["/etc/shadow".into()],
            op: FsOp::Chmod {
                path: RootedPath {
                    root: "/srv".into(),
                    anchor: "work".into(),
                    rel: "a".into(),
                },
                mode: 0o644,
                uid: None,
                gid: Some(0),
                recursive: true,
            },
        });
        let frame = crate::frame::encode(&crate::ToExecutor { id: 7, body: req }).unwrap();
        let back: crate::ToExecutor = crate::frame::decode(&frame[4..]).unwrap();
        assert_eq!(back.id, 7);
        assert!(matches!(
            back.body,
            crate::Request::Fs(FsRequest::Guarded { .. })
        ));
    }
}
