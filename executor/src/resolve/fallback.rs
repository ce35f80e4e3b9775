//! The userspace resolver for kernels without `openat2` (confinement-notes §4
//! "Fallback without openat2"), with the same answers as the kernel one.
//!
//! Security meaning: the walk holds a stack of `O_PATH|O_NOFOLLOW` directory
//! fds and never asks the kernel to follow a symlink or a `..`: `..` pops the
//! stack (popping past the root is an escape), each symlink is read with
//! `readlinkat` and its target spliced into the remaining path (an absolute
//! target is an escape; at most [`MAX_HOPS`] links), and procfs links other
//! than `/proc/self`-style ones are refused as magic links. The final
//! component is opened with `O_NOFOLLOW` relative to its parent fd, so a link
//! swapped in after the check is never followed.
#![forbid(unsafe_code)]

use super::Anchor;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{FileType, Mode, OFlags, Stat};
use rustix::io::Errno;
use std::collections::VecDeque;

/// Symlinks followed in one resolution before it fails like the kernel's
/// ELOOP.
pub(super) const MAX_HOPS: usize = 40;

/// The inode number of every procfs root directory.
const PROC_ROOT_INO: u64 = 1;

/// Opens `rel` beneath `root`; the errors mean what the kernel's would, and
/// EAGAIN asks the caller to retry after a concurrent change.
pub(super) fn open(
    root: BorrowedFd<'_>,
    rel: &str,
    flags: OFlags,
    anchor: Anchor,
) -> Result<OwnedFd, Errno> {
    let follow_final = !flags.contains(OFlags::NOFOLLOW);
    let mut stack: Vec<OwnedFd> = Vec::new();
    let mut pending: VecDeque<Vec<u8>> = VecDeque::new();
    let mut hops = 0;
    splice(&mut pending, &mut stack, rel.as_bytes(), anchor)?;
    while let Some(name) = pending.pop_front() {
        match name.as_slice() {
            b"" | b"." => continue,
            b".." => {
                if stack.pop().is_none() && anchor == Anchor::Jail {
                    return Err(Errno::XDEV);
                }
                continue;
            }
            _ => {}
        }
        let dir = top(root, &stack);
        let is_final = pending.is_empty();
        let fd = open_step(dir, &name)?;
        let stat = rustix::fs::fstat(&fd)?;
        let file_type = FileType::from_raw_mode(stat.st_mode);
        if file_type == FileType::Symlink && (!is_final || follow_final) {
            hops += 1;
            if hops > MAX_HOPS {
                return Err(Errno::LOOP);
            }
            refuse_magic_link(&fd, &stat, dir)?;
            let target = rustix::fs::readlinkat(&fd, "", Vec::new())?;
            splice(&mut pending, &mut stack, target.as_bytes(), anchor)?;
            continue;
        }
        if is_final {
            return open_final(dir, &name, flags, follow_final);
        }
        if file_type != FileType::Directory {
            return Err(Errno::NOTDIR);
        }
        stack.push(fd);
    }
    // The path ended in `.`, `..` or `/`: the answer is where we stand.
    rustix::fs::openat(
        top(root, &stack),
        ".",
        flags | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

fn top<'a>(root: BorrowedFd<'a>, stack: &'a [OwnedFd]) -> BorrowedFd<'a> {
    stack.last().map_or(root, |fd| fd.as_fd())
}

fn open_step(dir: BorrowedFd<'_>, name: &[u8]) -> Result<OwnedFd, Errno> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Puts `path`'s components in front of what is left to walk. An absolute
/// path escapes a jail; at the host root it restarts from the root.
fn splice(
    pending: &mut VecDeque<Vec<u8>>,
    stack: &mut Vec<OwnedFd>,
    path: &[u8],
    anchor: Anchor,
) -> Result<(), Errno> {
    if path.starts_with(b"/") {
        if anchor == Anchor::Jail {
            return Err(Errno::XDEV);
        }
        stack.clear();
    }
    for component in path.split(|b| *b == b'/').rev() {
        pending.push_front(component.to_vec());
    }
    Ok(())
}

/// Refuses procfs links except those in a procfs root (`self`,
/// `thread-self`, `mounts`, …), which name ordinary paths; the rest
/// (`<pid>/root`, `<pid>/fd/N`, `<pid>/cwd`, …) are magic links, refused with
/// ELOOP exactly as `RESOLVE_NO_MAGICLINKS` does.
fn refuse_magic_link(
    link: &OwnedFd,
    link_stat: &Stat,
    parent: BorrowedFd<'_>,
) -> Result<(), Errno> {
    if rustix::fs::fstatfs(link)?.f_type as i64 != libc::PROC_SUPER_MAGIC {
        return Ok(());
    }
    let parent_stat = rustix::fs::fstat(parent)?;
    if parent_stat.st_dev == link_stat.st_dev && parent_stat.st_ino == PROC_ROOT_INO {
        Ok(())
    } else {
        Err(Errno::LOOP)
    }
}

/// Opens the last component relative to its parent, never following a link:
/// when the caller wanted links followed and one appeared after the check,
/// the walk is retried (EAGAIN).
fn open_final(
    dir: BorrowedFd<'_>,
    name: &[u8],
    flags: OFlags,
    follow_final: bool,
) -> Result<OwnedFd, Errno> {
    let opened = rustix::fs::openat(
        dir,
        name,
        flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    );
    match opened {
        Err(Errno::LOOP) if follow_final => Err(Errno::AGAIN),
        Err(e) => Err(e),
        Ok(fd) if follow_final && flags.contains(OFlags::PATH) => {
            let stat = rustix::fs::fstat(&fd)?;
            if FileType::from_raw_mode(stat.st_mode) == FileType::Symlink {
                Err(Errno::AGAIN)
            } else {
                Ok(fd)
            }
        }
        Ok(fd) => Ok(fd),
    }
}
