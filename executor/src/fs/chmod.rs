//! `chmod` (and chown): change an entry itself, or a whole tree.
//!
//! Security meaning: the mode is set on the `O_PATH | O_NOFOLLOW` fd the
//! guard checked (`fchmodat2` with `AT_EMPTY_PATH`), so the object changed
//! is the object checked, and a symlink — which has no mode of its own — is
//! refused instead of followed. A recursive change descends with
//! `O_NOFOLLOW` and skips symlinks and denylisted objects.
#![forbid(unsafe_code)]

use super::guard::Guard;
use super::walk::{entries, open_subdir, reopen_dir, MAX_DEPTH};
use super::{check_mode, open_entry, Beneath};
use crate::errno::path_error;
use crate::sys::chmod_fd;
use ide_proto::{ErrorKind, ExecutorError, FsReply, RootedPath};
use rustix::fd::{AsFd, AsRawFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Gid, Mode, Uid, CWD};
use rustix::io::Errno;

/// What a chmod sets.
#[derive(Debug, Clone, Copy)]
pub struct Change {
    pub mode: u32,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
}

/// Sets exactly `mode` on the object `fd` refers to. Kernels before 6.6
/// lack `fchmodat2`; there the object's own fd entry in procfs is used,
/// which still names exactly that inode.
pub fn set_mode(fd: &OwnedFd, mode: u32) -> Result<(), ExecutorError> {
    match chmod_fd(fd.as_fd(), mode) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
            let st = rustix::fs::fstat(fd).map_err(path_error)?;
            if FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
                return Err(symlink_refused());
            }
            let own = format!("/proc/self/fd/{}", fd.as_raw_fd());
            rustix::fs::chmodat(
                CWD,
                own.as_str(),
                Mode::from_raw_mode(mode),
                AtFlags::empty(),
            )
            .map_err(path_error)
        }
        Err(e) => match Errno::from_io_error(&e) {
            Some(Errno::OPNOTSUPP) => Err(symlink_refused()),
            errno => Err(path_error(errno.unwrap_or(Errno::IO))),
        },
    }
}

fn symlink_refused() -> ExecutorError {
    ExecutorError::new(
        ErrorKind::WrongType,
        "is a symlink (a link has no mode of its own; change its target instead)",
    )
}

fn apply(fd: &OwnedFd, change: Change) -> Result<(), ExecutorError> {
    if change.uid.is_some() || change.gid.is_some() {
        rustix::fs::chownat(
            fd,
            "",
            change.uid.map(Uid::from_raw),
            change.gid.map(Gid::from_raw),
            AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(path_error)?;
    }
    set_mode(fd, change.mode)
}

/// `chmod`: answers how many entries changed.
pub fn chmod(
    at: &Beneath<'_>,
    guard: &Guard,
    path: &RootedPath,
    change: Change,
    recursive: bool,
) -> Result<FsReply, ExecutorError> {
    check_mode(change.mode)?;
    let leaf = at.leaf(path)?;
    guard.check(&leaf.fd)?;
    let file_type = FileType::from_raw_mode(leaf.stat.st_mode);
    if file_type == FileType::Symlink {
        return Err(symlink_refused());
    }
    apply(&leaf.fd, change)?;
    let mut changed = 1;
    if recursive && file_type == FileType::Directory {
        let dir = reopen_dir(&leaf.fd)?;
        changed += tree(&dir, guard, change, 0)?;
    }
    Ok(FsReply::Chmod {
        entries_changed: changed,
    })
}

fn tree(dir: &OwnedFd, guard: &Guard, change: Change, depth: usize) -> Result<u64, ExecutorError> {
    let mut changed = 0;
    for (name, st) in entries(dir, guard)? {
        let file_type = FileType::from_raw_mode(st.st_mode);
        if file_type == FileType::Symlink {
            continue;
        }
        let Ok(fd) = open_entry(dir, &name) else {
            continue;
        };
        match apply(&fd, change) {
            Ok(()) => changed += 1,
            // Swapped for a link since the lstat: not ours to change.
            Err(e) if e.kind == ErrorKind::WrongType => continue,
            Err(e) => return Err(e),
        }
        if file_type == FileType::Directory && depth < MAX_DEPTH {
            if let Ok(sub) = open_subdir(dir, &name) {
                changed += tree(&sub, guard, change, depth + 1)?;
            }
        }
    }
    Ok(changed)
}
