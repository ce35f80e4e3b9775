//! `ls`: one page of a directory, sorted by name.
//!
//! Security meaning: the directory is opened through the resolver and
//! checked by the guard; entries are lstat'ed relative to that fd
//! (`AT_SYMLINK_NOFOLLOW`), so a listing never follows a link out of the
//! root. Only the requested page is stat'ed, which bounds the work a huge
//! directory costs to reading its names once.
#![forbid(unsafe_code)]

use super::entry::entry;
use super::guard::Guard;
use super::Beneath;
use crate::errno::path_error;
use ide_proto::{ExecutorError, FsReply, RootedPath};
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, Dir, OFlags};

/// The names in `dir` (an fd opened for reading), sorted by bytes, without
/// `.` and `..`.
pub fn names(dir: &OwnedFd) -> Result<Vec<Vec<u8>>, ExecutorError> {
    let mut names = Vec::new();
    for item in Dir::read_from(dir).map_err(path_error)? {
        let item = item.map_err(path_error)?;
        let name = item.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(name.to_vec());
        }
    }
    names.sort_unstable();
    Ok(names)
}

/// Entries `offset..offset + limit` of the directory at `path`; entries that
/// vanish or cannot be stat'ed are skipped, `total` counts every name.
pub fn list(
    at: &Beneath<'_>,
    guard: &Guard,
    path: &RootedPath,
    offset: u64,
    limit: u32,
) -> Result<FsReply, ExecutorError> {
    let dir = at.open(path, OFlags::RDONLY | OFlags::DIRECTORY)?;
    guard.check(&dir)?;
    let names = names(&dir)?;
    let total = names.len() as u64;
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(names.len());
    let entries = names[start..]
        .iter()
        .take(limit as usize)
        .filter_map(|name| {
            let st = rustix::fs::statat(&dir, name.as_slice(), AtFlags::SYMLINK_NOFOLLOW).ok()?;
            Some(entry(String::from_utf8_lossy(name).into_owned(), &st))
        })
        .collect();
    Ok(FsReply::Listing { entries, total })
}
