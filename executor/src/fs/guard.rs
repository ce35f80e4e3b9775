//! The executor's own check of `fs.denylist_paths`, on the object it opened.
//!
//! Security meaning: the broker's denylist check is lexical, so a symlink, a
//! hard link or a `/proc/self/root/...` alias could name a denylisted object
//! under another spelling. Here each denylisted path is opened (following
//! links, as the host sees it) and remembered by identity (device, inode);
//! an object the request opened is refused when it is one of them, and, for
//! denylisted directories, when the kernel's own name of the object lies
//! beneath one. A refusal reads exactly like a missing path.
#![forbid(unsafe_code)]

use crate::ceiling::fd_path;
use crate::errno::path_error;
use ide_proto::ExecutorError;
use rustix::fd::AsFd;
use rustix::fs::{FileType, Mode, OFlags, Stat, CWD};
use rustix::io::Errno;
use std::path::PathBuf;

/// The denylist of one request, resolved to identities.
#[derive(Debug, Default)]
pub struct Guard {
    /// `(st_dev, st_ino)` of every denylisted object that exists.
    ids: Vec<(u64, u64)>,
    /// The kernel's names of the denylisted directories.
    dirs: Vec<PathBuf>,
}

/// The identity of a stat result.
pub fn identity(st: &Stat) -> (u64, u64) {
    (st.st_dev, st.st_ino)
}

impl Guard {
    /// Resolves `deny`; missing entries protect nothing until they exist.
    pub fn new(deny: &[String]) -> Guard {
        let mut guard = Guard::default();
        for path in deny {
            if !path.starts_with('/') || path.contains('\0') {
                continue;
            }
            let Ok(fd) = rustix::fs::openat(
                CWD,
                path.as_str(),
                OFlags::PATH | OFlags::CLOEXEC,
                Mode::empty(),
            ) else {
                continue;
            };
            let Ok(st) = rustix::fs::fstat(&fd) else {
                continue;
            };
            guard.ids.push(identity(&st));
            if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
                if let Ok(name) = fd_path(&fd) {
                    guard.dirs.push(name);
                }
            }
        }
        guard
    }

    /// True when nothing is denylisted (walks skip the per-entry check).
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// True when the object with this stat is itself denylisted.
    pub fn denies(&self, st: &Stat) -> bool {
        self.ids.contains(&identity(st))
    }

    /// Refuses an opened object that is denylisted or lies beneath a
    /// denylisted directory.
    pub fn check(&self, fd: impl AsFd) -> Result<(), ExecutorError> {
        if self.is_empty() {
            return Ok(());
        }
        let st = rustix::fs::fstat(fd.as_fd()).map_err(path_error)?;
        if self.denies(&st) {
            return Err(denied());
        }
        if !self.dirs.is_empty() {
            let name = fd_path(fd.as_fd()).map_err(|_| denied())?;
            if self.dirs.iter().any(|dir| name.starts_with(dir)) {
                return Err(denied());
            }
        }
        Ok(())
    }
}

/// The refusal: the same error as a missing path.
pub fn denied() -> ExecutorError {
    path_error(Errno::NOENT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fs::Mode;

    fn open(path: &std::path::Path) -> rustix::fd::OwnedFd {
        rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).unwrap()
    }

    #[test]
    fn denied_files_are_caught_through_hard_and_symbolic_links() {
        let tmp = tempfile::tempdir().unwrap();
        let secret = tmp.path().join("secret");
        std::fs::write(&secret, b"s").unwrap();
        std::fs::hard_link(&secret, tmp.path().join("hard")).unwrap();
        std::os::unix::fs::symlink(&secret, tmp.path().join("soft")).unwrap();
        std::fs::write(tmp.path().join("other"), b"o").unwrap();
        let guard = Guard::new(&[secret.to_str().unwrap().to_owned()]);
        for name in ["secret", "hard", "soft"] {
            assert_eq!(
                guard.check(open(&tmp.path().join(name))),
                Err(denied()),
                "{name}"
            );
        }
        assert!(guard.check(open(&tmp.path().join("other"))).is_ok());
    }

    #[test]
    fn objects_beneath_a_denied_directory_are_caught() {
        let tmp = tempfile::tempdir().unwrap();
        let private = tmp.path().join("private");
        std::fs::create_dir_all(private.join("deep")).unwrap();
        std::fs::write(private.join("deep/key"), b"k").unwrap();
        std::os::unix::fs::symlink(&private, tmp.path().join("alias")).unwrap();
        std::fs::create_dir(tmp.path().join("privateer")).unwrap();
        let guard = Guard::new(&[format!("{}/", private.display())]);
        for rel in [
            "private",
            "private/deep",
            "private/deep/key",
            "alias/deep/key",
        ] {
            assert_eq!(
                guard.check(open(&tmp.path().join(rel))),
                Err(denied()),
                "{rel}"
            );
        }
        assert!(guard.check(open(&tmp.path().join("privateer"))).is_ok());
        assert!(guard.check(open(tmp.path())).is_ok());
    }

    #[test]
    fn missing_or_malformed_entries_protect_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let guard = Guard::new(&[
            tmp.path().join("missing").to_str().unwrap().to_owned(),
            "relative".to_owned(),
            "/a\0b".to_owned(),
        ]);
        assert!(guard.is_empty());
        assert!(guard.check(open(tmp.path())).is_ok());
    }

    #[test]
    fn a_denial_reads_like_a_missing_path() {
        assert_eq!(denied(), path_error(Errno::NOENT));
    }
}
