//! `mv`: rename one entry, copying a regular file across filesystems.
//!
//! Security meaning: source and destination are each a name on a resolved
//! parent fd, and the rename is one `renameat2` between them
//! (`RENAME_NOREPLACE` unless overwriting), so a symlink moves as a link and
//! nothing is followed. The guard checks the source and any existing
//! destination. A cross-device move copies exactly the source inode (opened
//! without following) into a [`Temp`] beside the destination, renames it in,
//! and only then unlinks the source.
#![forbid(unsafe_code)]

use super::guard::Guard;
use super::read::{reopen_for_reading, require_regular};
use super::temp::{io_error, Temp};
use super::{is_root, open_entry, Beneath};
use crate::errno::path_error;
use ide_proto::{ErrorKind, ExecutorError, FsReply, RootedPath, MV_DESTINATION};
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, RenameFlags, Stat};
use rustix::io::Errno;
use std::fs::File;

/// `mv`: answers whether an existing destination was replaced.
pub fn mv(
    at: &Beneath<'_>,
    guard: &Guard,
    src: &RootedPath,
    dst: &RootedPath,
    overwrite: bool,
) -> Result<FsReply, ExecutorError> {
    if is_root(&src.rel) || is_root(&dst.rel) {
        return Err(ExecutorError::new(
            ErrorKind::Invalid,
            "refusing to move a root",
        ));
    }
    let source = at.leaf(src)?;
    guard.check(&source.fd)?;
    let Some((src_dir, src_name)) = source.parent.as_ref() else {
        return Err(ExecutorError::new(
            ErrorKind::Invalid,
            "refusing to move a root",
        ));
    };
    let (dst_dir, dst_name) = at.parent(dst).map_err(on_destination)?;
    guard.check(&dst_dir).map_err(on_destination)?;
    let existed = match open_entry(&dst_dir, dst_name.as_bytes()) {
        Ok(fd) => {
            guard.check(&fd).map_err(on_destination)?;
            true
        }
        Err(e) if e.kind == ErrorKind::NotFound => false,
        Err(e) => return Err(on_destination(e)),
    };
    if existed && !overwrite {
        return Err(on_destination(path_error(Errno::EXIST)));
    }
    let flags = if overwrite {
        RenameFlags::empty()
    } else {
        RenameFlags::NOREPLACE
    };
    match rustix::fs::renameat_with(
        src_dir,
        src_name.as_str(),
        &dst_dir,
        dst_name.as_str(),
        flags,
    ) {
        Ok(()) => {}
        Err(Errno::XDEV) => {
            copy_across(&source.fd, &source.stat, &dst_dir, &dst_name, overwrite)?;
            rustix::fs::unlinkat(src_dir, src_name.as_str(), AtFlags::empty())
                .map_err(path_error)?;
        }
        Err(e) => return Err(path_error(e)),
    }
    Ok(FsReply::Mv { overwrote: existed })
}

/// Marks a failure as the destination's, so the broker words it with the
/// caller's destination string.
fn on_destination(e: ExecutorError) -> ExecutorError {
    ExecutorError::new(e.kind, format!("{MV_DESTINATION}{}", e.message))
}

/// Copies the regular file `src` to `name` in `dir` through a temp file.
fn copy_across(
    src: &OwnedFd,
    stat: &Stat,
    dir: &OwnedFd,
    name: &str,
    overwrite: bool,
) -> Result<(), ExecutorError> {
    require_regular(stat).map_err(|_| {
        ExecutorError::new(
            ErrorKind::Internal,
            "only regular files can be moved across filesystems",
        )
    })?;
    let mut from = File::from(reopen_for_reading(src)?);
    let mut temp = Temp::create(dir, name)?;
    std::io::copy(&mut from, temp.file()).map_err(io_error)?;
    temp.commit(name, stat.st_mode & 0o7777, overwrite)
}
