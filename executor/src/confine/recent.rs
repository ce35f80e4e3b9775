//! The Landlock ruleset of the last confinement, kept for a moment.
//!
//! Why: a session runs command after command with the same write list, and
//! one ruleset fd can restrict any number of processes, so rebuilding it
//! (opening every writable path, one rule each, and finding the git dir)
//! for each spawn is wasted work on the exec path.
//!
//! Security meaning: a reused ruleset can only be narrower than a fresh one.
//! Rules hold the inodes the paths named when it was built: a writable
//! directory created since is missing from it (writes there fail), and one
//! replaced since keeps pointing at the old inode. Neither grants a write a
//! fresh ruleset would refuse, and the entry expires after [`TTL`].
#![forbid(unsafe_code)]

use ide_proto::{Confinement, ErrorKind, ExecutorError};
use rustix::fd::OwnedFd;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a built ruleset is reused.
pub const TTL: Duration = Duration::from_secs(1);

struct Entry {
    abi: i32,
    confine: Confinement,
    built: Instant,
    ruleset: OwnedFd,
}

/// The last ruleset built, if any.
pub struct Recent {
    entry: Mutex<Option<Entry>>,
}

/// The process-wide cache the spawn path uses.
pub static RECENT: Recent = Recent::new();

impl Recent {
    /// An empty cache.
    pub const fn new() -> Self {
        Self {
            entry: Mutex::new(None),
        }
    }

    /// A ruleset fd for `confine` at `abi`: a duplicate of the one built
    /// for the same request within [`TTL`], else a new one from `build`.
    pub fn ruleset(
        &self,
        abi: i32,
        confine: &Confinement,
        build: impl FnOnce() -> Result<OwnedFd, ExecutorError>,
    ) -> Result<OwnedFd, ExecutorError> {
        let mut entry = self.entry.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(e) = entry.as_ref() {
            if e.abi == abi && &e.confine == confine && e.built.elapsed() < TTL {
                return duplicate(&e.ruleset);
            }
        }
        let ruleset = build()?;
        *entry = Some(Entry {
            abi,
            confine: confine.clone(),
            built: Instant::now(),
            ruleset: duplicate(&ruleset)?,
        });
        Ok(ruleset)
    }
}

fn duplicate(fd: &OwnedFd) -> Result<OwnedFd, ExecutorError> {
    rustix::io::fcntl_dupfd_cloexec(fd, 0).map_err(|e| {
        ExecutorError::new(
            ErrorKind::Internal,
            format!("cannot duplicate a ruleset fd: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn request(path: &str) -> Confinement {
        Confinement {
            writable: vec![path.into()],
            git_dir_of: None,
        }
    }

    fn any_fd() -> Result<OwnedFd, ExecutorError> {
        Ok(rustix::fs::open("/", rustix::fs::OFlags::PATH, rustix::fs::Mode::empty()).unwrap())
    }

    #[test]
    fn the_same_request_reuses_and_another_one_rebuilds() {
        let builds = Cell::new(0);
        let counted = || {
            builds.set(builds.get() + 1);
            any_fd()
        };
        let recent = Recent::new();
        recent.ruleset(7, &request("/srv/a"), counted).unwrap();
        recent
            .ruleset(7, &request("/srv/a"), || panic!("rebuilt"))
            .unwrap();
        recent.ruleset(7, &request("/srv/b"), counted).unwrap();
        recent.ruleset(6, &request("/srv/b"), counted).unwrap();
        assert_eq!(builds.get(), 3);
    }

    #[test]
    fn a_failed_build_is_not_kept() {
        let recent = Recent::new();
        let failed = recent.ruleset(7, &request("/srv/fail"), || {
            Err(ExecutorError::new(ErrorKind::Unconfinable, "no"))
        });
        assert!(failed.is_err());
        let builds = Cell::new(0);
        recent
            .ruleset(7, &request("/srv/fail"), || {
                builds.set(builds.get() + 1);
                any_fd()
            })
            .unwrap();
        assert_eq!(builds.get(), 1);
    }
}
