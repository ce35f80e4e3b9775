//! The response shapes of `shell::fs::*` (wire-shapes §4).
#![forbid(unsafe_code)]

use super::mode::show;
use ide_proto::FsEntry;
use iii_sdk::helpers::ChannelDirection;
use schemars::JsonSchema;
use serde::Serialize;

/// One entry of `ls`, or the answer of `stat`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct EntryOut {
    pub name: String,
    /// From lstat in `ls` (a link to a directory is not a directory there).
    pub is_dir: bool,
    pub size: u64,
    /// Four octal digits, e.g. "0644".
    pub mode: String,
    /// Unix seconds.
    pub mtime: i64,
    pub is_symlink: bool,
}

impl From<FsEntry> for EntryOut {
    fn from(e: FsEntry) -> Self {
        EntryOut {
            name: e.name,
            is_dir: e.is_dir,
            size: e.size,
            mode: show(e.mode),
            mtime: e.mtime,
            is_symlink: e.is_symlink,
        }
    }
}

/// `ls`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct LsResponse {
    pub entries: Vec<EntryOut>,
    /// Entries in the whole directory.
    pub total: u64,
    pub page: u32,
    /// The page size applied.
    pub page_size: u32,
    pub has_more: bool,
}

/// `mkdir`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MkdirResponse {
    pub created: bool,
    pub path: String,
    pub already_existed: bool,
}

/// `rm`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RmResponse {
    pub removed: bool,
    pub path: String,
    pub was_present: bool,
}

/// `chmod`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ChmodResponse {
    pub entries_changed: u64,
    pub path: String,
    pub recursive: bool,
}

/// `mv`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MvResponse {
    pub moved: bool,
    pub src: String,
    pub dst: String,
    pub overwrote: bool,
}

/// One match of `grep`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct GrepMatchOut {
    /// Absolute path of the file.
    pub path: String,
    /// 1-based.
    pub line: u64,
    pub content: String,
}

/// `grep`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct GrepResponse {
    pub matches: Vec<GrepMatchOut>,
    /// Set when `max_matches` was reached.
    pub truncated: bool,
}

/// One file of `sed`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SedResult {
    pub path: String,
    pub replacements: u64,
    pub success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `sed`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SedResponse {
    pub results: Vec<SedResult>,
    /// Sum over the files that succeeded.
    pub total_replacements: u64,
}

/// One file of a batch `write`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WrittenFile {
    pub path: String,
    pub bytes_written: u64,
}

/// `write`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WriteResponse {
    pub bytes_written: u64,
    /// The caller's path (single form) or "" (batch form).
    pub path: String,
    /// Per file (batch form); empty for the single form.
    pub files: Vec<WrittenFile>,
}

/// The channel `read` streams into.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReadRef {
    pub channel_id: String,
    pub access_key: String,
    #[schemars(with = "String")]
    pub direction: ChannelDirection,
}

/// `read`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReadResponse {
    /// Read the bytes from this channel (Binary frames, then Close; a Text
    /// frame `{"error": …}` before Close reports a failure mid-stream).
    pub content: ReadRef,
    pub size: u64,
    pub mode: String,
    pub mtime: i64,
}
