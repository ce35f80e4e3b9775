//! Entry metadata (`FsEntry`) and `stat`.
//!
//! Security meaning: `stat` reports what the path leads to only after the
//! resolver confined it and the guard accepted the object, and names it by
//! the last component of the kernel's name for that object — never any other
//! part of a host path.
#![forbid(unsafe_code)]

use super::guard::Guard;
use super::Beneath;
use crate::ceiling::fd_path;
use crate::errno::path_error;
use ide_proto::{ExecutorError, FsEntry, FsReply, RootedPath};
use rustix::fs::{FileType, OFlags, Stat};

/// The entry for `name` with lstat/stat result `st`.
pub fn entry(name: String, st: &Stat) -> FsEntry {
    let file_type = FileType::from_raw_mode(st.st_mode);
    FsEntry {
        name,
        is_dir: file_type == FileType::Directory,
        is_symlink: file_type == FileType::Symlink,
        size: u64::try_from(st.st_size).unwrap_or(0),
        mode: st.st_mode & 0o7777,
        mtime: st.st_mtime,
    }
}

/// `stat`: the metadata of what `path` leads to; `is_symlink` tells whether
/// the path itself is a symlink.
pub fn stat(at: &Beneath<'_>, guard: &Guard, path: &RootedPath) -> Result<FsReply, ExecutorError> {
    let leaf = at.leaf(path)?;
    let fd = at.open(path, OFlags::PATH)?;
    guard.check(&fd)?;
    let st = rustix::fs::fstat(&fd).map_err(path_error)?;
    let name = fd_path(&fd)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "/".to_owned());
    let mut found = entry(name, &st);
    found.is_symlink = FileType::from_raw_mode(leaf.stat.st_mode) == FileType::Symlink;
    Ok(FsReply::Entry(found))
}
