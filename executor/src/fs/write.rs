//! `write`: replace a file with the uploaded body.
//!
//! Security meaning: the parent is resolved (and, with `parents`, created
//! step by step beneath the root), an existing target is inspected without
//! following it, and the body goes to a [`Temp`] that is renamed over the
//! name only after the whole upload arrived within `fs.max_write_bytes`.
//! The cap is enforced on the bytes as they arrive, not on a declared size.
//! A symlink at the target is replaced rather than written through, yet one
//! that leads out of the root is refused as an escape all the same.
#![forbid(unsafe_code)]

use super::channel::Channel;
use super::guard::Guard;
use super::mkdir::make_parents;
use super::temp::Temp;
use super::{check_mode, is_root, open_entry, Beneath};
use ide_proto::{ErrorKind, ExecutorError, FsReply, RootedPath};
use rustix::fs::{FileType, OFlags};

/// How the file is written.
pub struct Target {
    pub mode: u32,
    pub parents: bool,
    pub max_bytes: Option<u64>,
}

/// `write`: streams the upload into a temp file, then renames it into place.
pub fn write(
    at: &Beneath<'_>,
    guard: &Guard,
    path: &RootedPath,
    target: Target,
    io: &mut dyn Channel,
) -> Result<FsReply, ExecutorError> {
    let mode = check_mode(target.mode)?.as_raw_mode();
    if is_root(&path.rel) {
        return Err(ExecutorError::new(ErrorKind::WrongType, "is a directory"));
    }
    let (dir, name) = if target.parents {
        make_parents(at, guard, path)?
    } else {
        at.parent(path)?
    };
    guard.check(&dir)?;
    match open_entry(&dir, name.as_bytes()) {
        Ok(existing) => {
            guard.check(&existing)?;
            let st = rustix::fs::fstat(&existing).map_err(crate::errno::path_error)?;
            match FileType::from_raw_mode(st.st_mode) {
                FileType::Directory => {
                    return Err(ExecutorError::new(ErrorKind::WrongType, "is a directory"))
                }
                // The link is replaced, not written through; but one that
                // leads out of the root (dangling or not) is still an escape.
                FileType::Symlink => match at.open(path, OFlags::PATH) {
                    Ok(fd) => guard.check(&fd)?,
                    Err(e) if e.kind == ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                },
                _ => {}
            }
        }
        Err(e) if e.kind == ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut temp = Temp::create(&dir, &name)?;
    let mut written = 0u64;
    while let Some(frame) = io.receive()? {
        written += frame.len() as u64;
        if let Some(cap) = target.max_bytes.filter(|cap| written > *cap) {
            return Err(ExecutorError::new(
                ErrorKind::TooLarge,
                format!("content exceeds fs.max_write_bytes ({cap} bytes)"),
            ));
        }
        temp.write(&frame)?;
    }
    temp.commit(&name, mode, true)?;
    Ok(FsReply::Written { bytes: written })
}
