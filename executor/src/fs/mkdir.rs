//! `mkdir`, and the missing parents `mkdir` and `write` create.
//!
//! Security meaning: each directory is made with `mkdirat` on an fd the
//! resolver produced and the guard accepted, then the path so far is
//! resolved again from the root, so an existing component (a symlink that
//! stays inside included) is followed exactly like any other lookup and one
//! that leaves the root is an escape before anything is created beyond it.
#![forbid(unsafe_code)]

use super::chmod::set_mode;
use super::guard::Guard;
use super::{check_mode, is_root, Beneath};
use crate::errno::path_error;
use ide_proto::{ErrorKind, ExecutorError, FsReply, RootedPath};
use rustix::fd::OwnedFd;
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

/// Mode of the parents `parents: true` creates (before the umask), as
/// `mkdir -p` does.
const PARENT_MODE: u32 = 0o755;

/// `mkdir`: the leaf gets exactly `mode`; an existing directory is fine only
/// with `parents`.
pub fn mkdir(
    at: &Beneath<'_>,
    guard: &Guard,
    path: &RootedPath,
    mode: u32,
    parents: bool,
) -> Result<FsReply, ExecutorError> {
    let mode = check_mode(mode)?;
    if is_root(&path.rel) {
        return existing(at, guard, path, parents);
    }
    let (dir, name) = if parents {
        make_parents(at, guard, path)?
    } else {
        at.parent(path)?
    };
    guard.check(&dir)?;
    match rustix::fs::mkdirat(&dir, name.as_str(), mode) {
        Ok(()) => {
            let made = rustix::fs::openat(
                &dir,
                name.as_str(),
                OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(path_error)?;
            set_mode(&made, mode.as_raw_mode())?;
            Ok(FsReply::Mkdir {
                created: true,
                already_existed: false,
            })
        }
        Err(Errno::EXIST) => existing(at, guard, path, parents),
        Err(e) => Err(path_error(e)),
    }
}

/// The answer for a path that already exists.
fn existing(
    at: &Beneath<'_>,
    guard: &Guard,
    path: &RootedPath,
    parents: bool,
) -> Result<FsReply, ExecutorError> {
    if !parents {
        return Err(path_error(Errno::EXIST));
    }
    match at.open(path, OFlags::PATH | OFlags::DIRECTORY) {
        Ok(fd) => {
            guard.check(&fd)?;
            Ok(FsReply::Mkdir {
                created: false,
                already_existed: true,
            })
        }
        Err(e) if e.kind == ErrorKind::WrongType => Err(ExecutorError::new(
            ErrorKind::Exists,
            "already exists and is not a directory",
        )),
        Err(e) => Err(e),
    }
}

/// Creates every missing directory above the leaf of `path` and returns the
/// leaf's parent fd and name.
pub fn make_parents(
    at: &Beneath<'_>,
    guard: &Guard,
    path: &RootedPath,
) -> Result<(OwnedFd, String), ExecutorError> {
    if path.rel.starts_with('/') {
        return Err(path_error(Errno::XDEV));
    }
    let rel = path.rel.trim_end_matches('/');
    let (parent, name) = match rel.rfind('/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => ("", rel),
    };
    let mut walked = RootedPath {
        rel: String::new(),
        ..path.clone()
    };
    let mut dir = at.open(&walked, OFlags::PATH | OFlags::DIRECTORY)?;
    for component in parent.split('/') {
        match component {
            "" | "." => continue,
            ".." => {}
            name => {
                guard.check(&dir)?;
                match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(PARENT_MODE)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(path_error(e)),
                }
            }
        }
        if !walked.rel.is_empty() {
            walked.rel.push('/');
        }
        walked.rel.push_str(component);
        dir = at.open(&walked, OFlags::PATH | OFlags::DIRECTORY)?;
    }
    if matches!(name, "" | "." | "..") {
        return Err(ExecutorError::new(
            ErrorKind::Invalid,
            "the last path component must be a name (not empty, '.' or '..')",
        ));
    }
    Ok((dir, name.to_owned()))
}
