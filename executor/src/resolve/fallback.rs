//! The userspace resolver for kernels without `openat2` (confinement-notes §4
//! "Fallback without openat2"), with the same answers as the kernel one.
//!
//! Security meaning: the walk holds a stack of `O_PATH|O_NOFOLLOW` directory
//! fds and never asks the kernel to follow a symlink or a `..`: `..` pops the
//! stack (popping past the root is an escape), each symlink is read with
//! `readlinkat` and its target spliced into the remaining path (at most
//! [`MAX_HOPS`] links), and procfs links other than `/proc/self`-style ones
//! are refused as magic links. An absolute target restarts the walk at the
//! root fd only when its components begin with the root's own canonical path
//! (a link such as `<root>/current -> <root>/releases/v2`); any other
//! absolute target is an escape. The rest of the target is then walked
//! component by component like any other path, so a `..` in it can still
//! only pop held fds. The final
//! component is opened with `O_NOFOLLOW` relative to its parent fd, so a link
//! swapped in after the check is never followed.
#![forbid(unsafe_code)]

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{FileType, Mode, OFlags, Stat};
use rustix::io::Errno;
use std::collections::VecDeque;

/// Symlinks followed in one resolution before it fails like the kernel's
/// ELOOP.
pub(super) const MAX_HOPS: usize = 40;

/// The inode number of every procfs root directory.
const PROC_ROOT_INO: u64 = 1;

/// Where an absolute symlink target (or a `..` at the root) leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Absolute<'a> {
    /// The root is the host's `/`: absolute targets restart at it and `..`
    /// at the root stays there, exactly as the host resolves them.
    HostRoot,
    /// A jail root with this canonical path: a target beneath it restarts
    /// at the root fd, anything else (and `..` at the root) escapes.
    Jail(&'a [u8]),
}

/// Opens `rel` beneath `root`; the errors mean what the kernel's would, and
/// EAGAIN asks the caller to retry after a concurrent change.
pub(super) fn open(
    root: BorrowedFd<'_>,
    rel: &str,
    flags: OFlags,
    anchor: Absolute<'_>,
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
                if stack.pop().is_none() && anchor != Absolute::HostRoot {
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
/// path restarts from the root: at the host root always, in a jail only when
/// it lies beneath the root's canonical path (whose components are dropped);
/// otherwise it escapes.
fn splice(
    pending: &mut VecDeque<Vec<u8>>,
    stack: &mut Vec<OwnedFd>,
    path: &[u8],
    anchor: Absolute<'_>,
) -> Result<(), Errno> {
    let mut rest = path;
    if path.starts_with(b"/") {
        if let Absolute::Jail(root_path) = anchor {
            rest = beneath(path, root_path).ok_or(Errno::XDEV)?;
        }
        stack.clear();
    }
    for component in rest.split(|b| *b == b'/').rev() {
        pending.push_front(component.to_vec());
    }
    Ok(())
}

/// The part of absolute `path` after the components of absolute `root`,
/// compared component by component (empty and `.` components skipped), or
/// `None` when `path` does not start with all of them. A `..` never matches
/// a root component, so `<root>/../x` is not beneath.
pub(super) fn beneath<'p>(path: &'p [u8], root: &[u8]) -> Option<&'p [u8]> {
    let significant = |c: &&[u8]| !c.is_empty() && *c != b".";
    let mut wanted = root.split(|b| *b == b'/').filter(significant);
    let mut offset = 0;
    let mut next_wanted = wanted.next();
    while let Some(want) = next_wanted {
        let tail = &path[offset..];
        let end = tail.iter().position(|b| *b == b'/').unwrap_or(tail.len());
        let component = &tail[..end];
        offset = (offset + end + 1).min(path.len());
        if !significant(&component) {
            if end == tail.len() {
                return None;
            }
            continue;
        }
        if component != want {
            return None;
        }
        next_wanted = wanted.next();
    }
    Some(&path[offset..])
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
