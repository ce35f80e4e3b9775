//! `rm`: unlink an entry, or a whole tree with `recursive`.
//!
//! Security meaning: the entry is unlinked by name on its resolved parent
//! fd, so a symlink is removed itself and never followed. A recursive
//! removal descends only through directories it opened with `O_NOFOLLOW`,
//! so a link to a directory outside is removed as a link and its target is
//! left alone; denylisted objects inside are left in place (and their
//! directory then reports not empty).
#![forbid(unsafe_code)]

use super::guard::Guard;
use super::walk::{entries, open_subdir, MAX_DEPTH};
use super::{is_root, Beneath};
use crate::errno::path_error;
use ide_proto::{ErrorKind, ExecutorError, FsReply, RootedPath};
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, FileType};

/// `rm`.
pub fn rm(
    at: &Beneath<'_>,
    guard: &Guard,
    path: &RootedPath,
    recursive: bool,
) -> Result<FsReply, ExecutorError> {
    if is_root(&path.rel) {
        return Err(ExecutorError::new(
            ErrorKind::Invalid,
            "refusing to remove a root",
        ));
    }
    let leaf = at.leaf(path)?;
    guard.check(&leaf.fd)?;
    let Some((dir, name)) = leaf.parent else {
        return Err(ExecutorError::new(
            ErrorKind::Invalid,
            "refusing to remove a root",
        ));
    };
    if FileType::from_raw_mode(leaf.stat.st_mode) == FileType::Directory {
        if recursive {
            let inner = open_subdir(&dir, name.as_bytes())?;
            clear(&inner, guard, 0)?;
        }
        rustix::fs::unlinkat(&dir, name.as_str(), AtFlags::REMOVEDIR).map_err(path_error)?;
    } else {
        rustix::fs::unlinkat(&dir, name.as_str(), AtFlags::empty()).map_err(path_error)?;
    }
    Ok(FsReply::Ok)
}

/// Removes everything inside `dir` except denylisted objects.
fn clear(dir: &OwnedFd, guard: &Guard, depth: usize) -> Result<(), ExecutorError> {
    if depth > MAX_DEPTH {
        return Err(ExecutorError::new(
            ErrorKind::Internal,
            format!("directory tree deeper than {MAX_DEPTH} levels"),
        ));
    }
    for (name, st) in entries(dir, guard)? {
        if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
            // A directory swapped for a link since the lstat is unlinked as
            // a link below.
            if let Ok(inner) = open_subdir(dir, &name) {
                clear(&inner, guard, depth + 1)?;
                match rustix::fs::unlinkat(dir, name.as_slice(), AtFlags::REMOVEDIR) {
                    Ok(()) => continue,
                    Err(e) => return Err(path_error(e)),
                }
            }
        }
        match rustix::fs::unlinkat(dir, name.as_slice(), AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => {}
            Err(e) => return Err(path_error(e)),
        }
    }
    Ok(())
}
