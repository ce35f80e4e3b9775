//! Operator ceilings and opening the roots the broker names.
//!
//! Security meaning: the broker may be compromised, so the roots it sends are
//! only accepted when the directory actually opened lies at or beneath a
//! ceiling given on the executor's own command line. The check runs on the
//! canonical path of the opened fd (not on the string the broker sent), so a
//! symlink in the root string cannot lift it out. Unjailed operation (root
//! `/`) is therefore possible only when `/` itself is a ceiling.
#![forbid(unsafe_code)]

use crate::errno::path_error;
use crate::resolve::Backend;
use ide_proto::{ErrorKind, ExecutorError, RootedPath};
use rustix::fd::{AsFd, AsRawFd, OwnedFd};
use rustix::fs::{Mode, OFlags, CWD};
use std::io;
use std::path::{Path, PathBuf};

/// The directories every root must lie beneath, canonicalised once at start.
#[derive(Debug, Clone)]
pub struct Ceilings {
    dirs: Vec<PathBuf>,
}

impl Ceilings {
    /// Canonicalises each ceiling; a missing one or a non-directory is a
    /// start-up error, not a silently narrower jail.
    pub fn new(dirs: &[PathBuf]) -> io::Result<Self> {
        let mut canonical = Vec::with_capacity(dirs.len());
        for dir in dirs {
            let c = std::fs::canonicalize(dir)
                .map_err(|e| io::Error::new(e.kind(), format!("ceiling {}: {e}", dir.display())))?;
            if !c.is_dir() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("ceiling {} is not a directory", dir.display()),
                ));
            }
            canonical.push(c);
        }
        Ok(Self { dirs: canonical })
    }

    /// True when `canonical` is a ceiling or lies beneath one (compared by
    /// whole components, so `/srv/ab` is not beneath `/srv/a`).
    pub fn contains(&self, canonical: &Path) -> bool {
        self.dirs.iter().any(|c| canonical.starts_with(c))
    }
}

/// Opens a root the broker named as an `O_PATH` directory fd, checked against
/// the ceilings; see [`open_root_canonical`].
pub fn open_root(root: &str, ceilings: &Ceilings) -> Result<OwnedFd, ExecutorError> {
    open_root_canonical(root, ceilings).map(|(fd, _)| fd)
}

/// Opens the directory a [`RootedPath`]'s remainder is resolved beneath:
/// its root (checked against the ceilings), then, for a session-scoped
/// path, its anchor resolved beneath the root like any caller path, so
/// neither a swapped symlink in the anchor nor the remainder leaves the root.
pub fn open_anchor(
    path: &RootedPath,
    ceilings: &Ceilings,
    backend: Backend,
) -> Result<OwnedFd, ExecutorError> {
    let root = open_root(&path.root, ceilings)?;
    if path.anchor.is_empty() {
        return Ok(root);
    }
    backend.resolve(root.as_fd(), &path.anchor, OFlags::PATH | OFlags::DIRECTORY)
}

/// Opens `root` (absolute; symlinks in it are followed, since the ceiling
/// check below runs on what was actually opened) and returns the fd with its
/// canonical path.
pub fn open_root_canonical(
    root: &str,
    ceilings: &Ceilings,
) -> Result<(OwnedFd, PathBuf), ExecutorError> {
    if !root.starts_with('/') || root.contains('\0') {
        return Err(ExecutorError::new(
            ErrorKind::Invalid,
            "root must be an absolute path without NUL",
        ));
    }
    let fd = rustix::fs::openat(
        CWD,
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(path_error)?;
    let canonical = fd_path(fd.as_fd())
        .map_err(|e| ExecutorError::new(ErrorKind::Internal, format!("cannot name root: {e}")))?;
    if !ceilings.contains(&canonical) {
        return Err(ExecutorError::new(
            ErrorKind::Escape,
            "root is outside the executor's ceiling",
        ));
    }
    Ok((fd, canonical))
}

/// The kernel's name for what `fd` refers to (`/proc/self/fd/N`).
pub fn fd_path(fd: impl AsFd) -> io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ceilings(dirs: &[&Path]) -> Ceilings {
        Ceilings::new(&dirs.iter().map(|d| d.to_path_buf()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn a_root_beneath_a_ceiling_opens_with_its_canonical_path() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("jail")).unwrap();
        let c = ceilings(&[tmp.path()]);
        let root = format!("{}/jail/../jail", tmp.path().display());
        let (_, canonical) = open_root_canonical(&root, &c).unwrap();
        assert_eq!(
            canonical,
            std::fs::canonicalize(tmp.path().join("jail")).unwrap()
        );
    }

    #[test]
    fn a_symlinked_root_is_judged_by_where_it_leads() {
        let tmp = tempfile::tempdir().unwrap();
        let ceiling = tmp.path().join("ceiling");
        std::fs::create_dir(&ceiling).unwrap();
        std::fs::create_dir(tmp.path().join("outside")).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("outside"), ceiling.join("link")).unwrap();
        let c = ceilings(&[&ceiling]);
        let err = open_root(&format!("{}/link", ceiling.display()), &c).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Escape);
    }

    #[test]
    fn sibling_prefixes_are_not_beneath() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("a")).unwrap();
        std::fs::create_dir(tmp.path().join("ab")).unwrap();
        let c = ceilings(&[&tmp.path().join("a")]);
        let err = open_root(&format!("{}/ab", tmp.path().display()), &c).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Escape);
    }

    #[test]
    fn the_host_root_needs_the_slash_ceiling() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(
            open_root("/", &ceilings(&[tmp.path()])).unwrap_err().kind,
            ErrorKind::Escape
        );
        assert!(open_root("/", &ceilings(&[Path::new("/")])).is_ok());
    }

    #[test]
    fn bad_roots_get_their_class() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("file"), b"x").unwrap();
        let c = ceilings(&[Path::new("/")]);
        let base = tmp.path().display();
        assert_eq!(
            open_root(&format!("{base}/missing"), &c).unwrap_err().kind,
            ErrorKind::NotFound
        );
        assert_eq!(
            open_root(&format!("{base}/file"), &c).unwrap_err().kind,
            ErrorKind::WrongType
        );
        assert_eq!(
            open_root("relative", &c).unwrap_err().kind,
            ErrorKind::Invalid
        );
        assert_eq!(open_root("/a\0b", &c).unwrap_err().kind, ErrorKind::Invalid);
    }

    #[test]
    fn a_missing_ceiling_is_a_startup_error() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(Ceilings::new(&[tmp.path().join("missing")]).is_err());
        std::fs::write(tmp.path().join("file"), b"x").unwrap();
        assert!(Ceilings::new(&[tmp.path().join("file")]).is_err());
    }
}
