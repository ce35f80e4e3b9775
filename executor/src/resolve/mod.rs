//! Race-free path resolution beneath a root fd: the heart of the jail, and
//! the base of every filesystem operation and of an exec's `cwd`.
//!
//! Security meaning: paths are never joined onto the root as strings and
//! never canonicalised-then-opened. Every lookup starts from an `O_PATH`
//! root fd and is confined by the kernel (`openat2`, see [`kernel`]) or, where
//! that syscall is missing, by a userspace walk over held fds (see
//! [`fallback`]) that gives the same answers. Errors are classed in one
//! place ([`crate::errno`]): leaving the root is `Escape`, a magic link or a
//! loop reads as `NotFound`.
//!
//! `RESOLVE_BENEATH` refuses every absolute symlink, even one that names a
//! place inside the root (`<root>/current -> <root>/releases/v2`, common in
//! real trees). So an EXDEV from the kernel is answered again by the
//! userspace walk, which re-anchors such a target at the root fd when it lies
//! beneath the root's canonical path and reports an escape otherwise; it
//! still walks component by component with `O_NOFOLLOW`, never by joining
//! strings.
#![forbid(unsafe_code)]

mod fallback;
mod kernel;

use crate::ceiling::fd_path;
use crate::errno::path_error;
use fallback::Absolute;
use ide_proto::{ErrorKind, ExecutorError};
use rustix::fd::{BorrowedFd, OwnedFd};
use rustix::fs::OFlags;
use rustix::io::Errno;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// Set to `1` to force the userspace resolver; read once, so tests and
/// operators can exercise the path a kernel without `openat2` would take.
pub const FORCE_FALLBACK_ENV: &str = "IDE_EXECUTOR_FORCE_FALLBACK";

/// Resolutions retried after EAGAIN (a concurrent rename or mount) before the
/// request fails as internal.
const MAX_RETRIES: usize = 8;

/// Set once `openat2` proved unusable; only failure is cached, never success.
static OPENAT2_UNAVAILABLE: AtomicBool = AtomicBool::new(false);

/// Which resolver answers; see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `openat2`, falling back by itself when the kernel lacks it.
    Openat2,
    /// The userspace walk.
    Fallback,
}

/// How far a root reaches: a jail root confines, while the host's own `/`
/// is already the whole filesystem (unjailed mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Anchor {
    Jail,
    HostRoot,
}

impl Anchor {
    /// The host root is recognised by identity (device and inode of `/`), not
    /// by the string the broker sent.
    fn of(root: BorrowedFd<'_>) -> Result<Self, Errno> {
        static HOST_ROOT: OnceLock<Option<(u64, u64)>> = OnceLock::new();
        let host =
            *HOST_ROOT.get_or_init(|| rustix::fs::stat("/").ok().map(|s| (s.st_dev, s.st_ino)));
        let stat = rustix::fs::fstat(root)?;
        Ok(if host == Some((stat.st_dev, stat.st_ino)) {
            Anchor::HostRoot
        } else {
            Anchor::Jail
        })
    }
}

impl Backend {
    /// The process-wide backend, chosen from [`FORCE_FALLBACK_ENV`] on first use.
    pub fn current() -> Self {
        static CURRENT: OnceLock<Backend> = OnceLock::new();
        *CURRENT.get_or_init(|| match std::env::var(FORCE_FALLBACK_ENV).as_deref() {
            Ok("1") => Backend::Fallback,
            _ => Backend::Openat2,
        })
    }

    /// Opens `rel` beneath `root` with `flags` (O_CLOEXEC is always added).
    /// An empty `rel` is the root itself. Creation flags are refused: new
    /// objects are made with `*at` calls on [`Backend::resolve_parent`]'s fd.
    pub fn resolve(
        self,
        root: BorrowedFd<'_>,
        rel: &str,
        flags: OFlags,
    ) -> Result<OwnedFd, ExecutorError> {
        if rel.contains('\0') {
            return Err(ExecutorError::new(ErrorKind::Invalid, "path contains NUL"));
        }
        // O_TMPFILE includes the O_DIRECTORY bit, so test it whole.
        if flags.contains(OFlags::CREATE) || flags.contains(OFlags::TMPFILE) {
            return Err(ExecutorError::new(
                ErrorKind::Internal,
                "resolve opens existing objects only",
            ));
        }
        let rel = if rel.is_empty() { "." } else { rel };
        let anchor = Anchor::of(root).map_err(path_error)?;
        for _ in 0..MAX_RETRIES {
            match self.open_once(root, rel, flags, anchor) {
                Ok(fd) => return Ok(fd),
                Err(Errno::AGAIN) => continue,
                Err(e) => return Err(path_error(e)),
            }
        }
        Err(ExecutorError::new(
            ErrorKind::Internal,
            format!("the path kept changing while it was resolved ({MAX_RETRIES} attempts)"),
        ))
    }

    /// Resolves the parent directory of `rel` and returns it with the final
    /// name, which is checked to be a plain name (not empty, `.` or `..`, no
    /// `/` or NUL) so `*at` calls on the fd act on exactly one entry.
    pub fn resolve_parent(
        self,
        root: BorrowedFd<'_>,
        rel: &str,
    ) -> Result<(OwnedFd, String), ExecutorError> {
        let (parent, name) = match rel.rfind('/') {
            Some(0) => ("/", &rel[1..]),
            Some(i) => (&rel[..i], &rel[i + 1..]),
            None => ("", rel),
        };
        if matches!(name, "" | "." | "..") || name.contains('\0') {
            return Err(ExecutorError::new(
                ErrorKind::Invalid,
                "the last path component must be a name (not empty, '.' or '..')",
            ));
        }
        let dir = self.resolve(root, parent, OFlags::PATH | OFlags::DIRECTORY)?;
        Ok((dir, name.to_owned()))
    }

    fn open_once(
        self,
        root: BorrowedFd<'_>,
        rel: &str,
        flags: OFlags,
        anchor: Anchor,
    ) -> Result<OwnedFd, Errno> {
        if self == Backend::Openat2 && !OPENAT2_UNAVAILABLE.load(Ordering::Relaxed) {
            match kernel::open(root, rel, flags, anchor) {
                // Maybe an absolute symlink that stays inside: the walk decides.
                Err(Errno::XDEV) if anchor == Anchor::Jail => {}
                Err(e) if kernel::unavailable(root, e) => {
                    tracing::warn!("openat2 is unavailable ({e}); using the userspace resolver");
                    OPENAT2_UNAVAILABLE.store(true, Ordering::Relaxed);
                }
                other => return other,
            }
        }
        match anchor {
            Anchor::HostRoot => fallback::open(root, rel, flags, Absolute::HostRoot),
            Anchor::Jail => {
                // The kernel's own name for the root fd; without one, no
                // absolute target can be shown to stay inside.
                let root_path = fd_path(root).map_err(|_| Errno::XDEV)?;
                let root_path = root_path.as_os_str().as_bytes();
                fallback::open(root, rel, flags, Absolute::Jail(root_path))
            }
        }
    }
}

/// [`Backend::resolve`] with the process-wide backend.
pub fn resolve(root: BorrowedFd<'_>, rel: &str, flags: OFlags) -> Result<OwnedFd, ExecutorError> {
    Backend::current().resolve(root, rel, flags)
}

/// [`Backend::resolve_parent`] with the process-wide backend.
pub fn resolve_parent(root: BorrowedFd<'_>, rel: &str) -> Result<(OwnedFd, String), ExecutorError> {
    Backend::current().resolve_parent(root, rel)
}

#[cfg(test)]
mod tests;
