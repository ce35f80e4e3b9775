//! The primary resolver: one `openat2` call, with the kernel enforcing the
//! jail atomically.
//!
//! Security meaning: `RESOLVE_BENEATH` makes every `..` or absolute symlink
//! that would leave the root fail with EXDEV (an escape, never a silent
//! re-anchoring), and `RESOLVE_NO_MAGICLINKS` refuses `/proc/*/fd/*`,
//! `/proc/*/root` and their kin with ELOOP. At the host root itself the jail is
//! the whole filesystem, so `RESOLVE_IN_ROOT` is used there instead: it
//! resolves exactly as every command sees the host (absolute symlinks and a
//! `..` at `/`), still without magic links.
#![forbid(unsafe_code)]

use super::Anchor;
use rustix::fd::{BorrowedFd, OwnedFd};
use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// Opens `rel` beneath `root`. `rel` is never empty (the caller maps the root
/// itself to `.`). O_CLOEXEC is added here: rustix's `openat2` does not add it.
pub(super) fn open(
    root: BorrowedFd<'_>,
    rel: &str,
    flags: OFlags,
    anchor: Anchor,
) -> Result<OwnedFd, Errno> {
    let scope = match anchor {
        Anchor::Jail => ResolveFlags::BENEATH,
        Anchor::HostRoot => ResolveFlags::IN_ROOT,
    };
    rustix::fs::openat2(
        root,
        rel,
        flags | OFlags::CLOEXEC,
        Mode::empty(),
        scope | ResolveFlags::NO_MAGICLINKS,
    )
}

/// True when `openat2` is unusable here (missing, or refused wholesale by a
/// container's seccomp profile), told apart from an ordinary EPERM on one
/// path by a probe that cannot be denied for any other reason.
pub(super) fn unavailable(root: BorrowedFd<'_>, errno: Errno) -> bool {
    match errno {
        Errno::NOSYS => true,
        Errno::PERM => matches!(
            open(root, ".", OFlags::PATH | OFlags::DIRECTORY, Anchor::Jail),
            Err(Errno::PERM | Errno::NOSYS)
        ),
        _ => false,
    }
}
