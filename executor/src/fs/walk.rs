//! Recursive walks by directory fd (grep, sed, chmod -R) and the `Walk`
//! request that lists the files a sed will edit.
//!
//! Security meaning: a walk starts at an object the resolver confined and
//! the guard accepted, then descends only with `openat(dirfd, name,
//! O_NOFOLLOW | …)`: it never follows a symlink and never builds a path
//! string to open. The directory entry's type only decides what to try;
//! what counts is the `fstat` of what was actually opened: a subdirectory
//! or file is used only if it is what the entry said and is not denylisted
//! by identity (every directory on the way down was checked the same way,
//! and the start fully, so nothing reached lies beneath a denylisted
//! directory). Files are opened for reading directly (`O_NONBLOCK |
//! O_NOCTTY`, so a FIFO swapped in cannot block and no terminal is
//! acquired); a device node swapped in during that instant is opened and
//! closed unread, which gives a command that could create one nothing it
//! could not do itself. Depth is bounded ([`MAX_DEPTH`]), which also
//! bounds the fds it holds and the length of the relative paths it
//! reports.
#![forbid(unsafe_code)]

use super::channel::Channel;
use super::guard::Guard;
use super::ls::names;
use super::read::reopen_for_reading;
use super::Beneath;
use crate::errno::path_error;
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use ide_proto::{ErrorKind, ExecutorError, FsReply, RootedPath, WalkFilter, CHUNK_LEN};
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use serde::Serialize;
use std::sync::Arc;

/// Directory levels a walk descends below its start; deeper entries are
/// skipped.
pub const MAX_DEPTH: usize = 256;

/// The include/exclude globs of a walk (wire-shapes §4.8): a glob without a
/// `/` matches the basename, one with a `/` the path relative to the walk's
/// start; `*` and `?` never cross a `/`.
pub struct Filter {
    include_name: GlobSet,
    include_path: GlobSet,
    exclude_name: GlobSet,
    exclude_path: GlobSet,
    any_include: bool,
    recursive: bool,
}

impl Filter {
    /// Compiles the globs; a bad one is an invalid request.
    pub fn new(filter: &WalkFilter) -> Result<Filter, ExecutorError> {
        let (include_name, include_path) = split("include_glob", &filter.include)?;
        let (exclude_name, exclude_path) = split("exclude_glob", &filter.exclude)?;
        Ok(Filter {
            include_name,
            include_path,
            exclude_name,
            exclude_path,
            any_include: !filter.include.is_empty(),
            recursive: filter.recursive,
        })
    }

    fn excluded(&self, rel: &str, name: &str) -> bool {
        self.exclude_name.is_match(name) || self.exclude_path.is_match(rel)
    }

    /// True when a file at `rel` (basename `name`) is part of the walk.
    pub fn wants_file(&self, rel: &str, name: &str) -> bool {
        let included = !self.any_include
            || self.include_name.is_match(name)
            || self.include_path.is_match(rel);
        included && !self.excluded(rel, name)
    }

    /// True when the directory at `rel` is pruned.
    pub fn prunes_dir(&self, rel: &str, name: &str) -> bool {
        self.excluded(rel, name)
    }
}

fn split(key: &str, globs: &[String]) -> Result<(GlobSet, GlobSet), ExecutorError> {
    let mut names = GlobSetBuilder::new();
    let mut paths = GlobSetBuilder::new();
    for glob in globs {
        let compiled = GlobBuilder::new(glob)
            .literal_separator(true)
            .build()
            .map_err(|e| ExecutorError::new(ErrorKind::Invalid, format!("{key} {glob:?}: {e}")))?;
        if glob.contains('/') {
            paths.add(compiled);
        } else {
            names.add(compiled);
        }
    }
    let build = |set: GlobSetBuilder| {
        set.build()
            .map_err(|e| ExecutorError::new(ErrorKind::Invalid, format!("{key}: {e}")))
    };
    Ok((build(names)?, build(paths)?))
}

/// One regular file a walk found.
pub struct Found<'a> {
    /// Relative to the walk's start; empty when the start is the file.
    pub rel: &'a str,
    /// Where to open it.
    pub file: FileRef,
}

/// A file a walk found, not yet opened (opening is left to whoever reads
/// it, so a parallel search opens files on its own threads).
pub enum FileRef {
    /// The walk's start, already opened and checked.
    Opened(OwnedFd),
    /// An entry the directory listing says is a regular file.
    Entry { dir: Arc<OwnedFd>, name: String },
}

impl FileRef {
    /// The file opened for reading, or `None` when it is gone, no longer a
    /// regular file, or denylisted.
    pub fn open(self, guard: &Guard) -> Option<OwnedFd> {
        match self {
            FileRef::Opened(fd) => Some(fd),
            FileRef::Entry { dir, name } => {
                let read = OFlags::NONBLOCK | OFlags::NOCTTY;
                open_checked(&dir, &name, read, FileType::RegularFile, guard)
            }
        }
    }
}

/// Calls `visit` for every regular file at or beneath `path` that `filter`
/// wants, in name order (a file operand ignores the globs). A directory
/// without `recursive` is an invalid request; other file types are the wrong
/// type.
pub fn files(
    at: &Beneath<'_>,
    guard: &Guard,
    path: &RootedPath,
    filter: &Filter,
    visit: &mut dyn FnMut(Found<'_>) -> Result<(), ExecutorError>,
) -> Result<(), ExecutorError> {
    let start = at.open(path, OFlags::PATH)?;
    guard.check(&start)?;
    let st = rustix::fs::fstat(&start).map_err(path_error)?;
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => visit(Found {
            rel: "",
            file: FileRef::Opened(reopen_for_reading(&start)?),
        }),
        FileType::Directory if filter.recursive => {
            let dir = reopen_dir(&start)?;
            descend(Arc::new(dir), "", 0, guard, filter, visit)
        }
        FileType::Directory => Err(ExecutorError::new(
            ErrorKind::Invalid,
            "is a directory (set recursive: true to walk it)",
        )),
        _ => Err(ExecutorError::new(
            ErrorKind::WrongType,
            "not a regular file or directory",
        )),
    }
}

/// A readable fd of the directory an `O_PATH` fd refers to.
pub fn reopen_dir(dir: &OwnedFd) -> Result<OwnedFd, ExecutorError> {
    rustix::fs::openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(path_error)
}

/// Opens the subdirectory `name` of `dir` for reading, refusing a symlink.
pub fn open_subdir(dir: &OwnedFd, name: &[u8]) -> Result<OwnedFd, ExecutorError> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(path_error)
}

/// The lstat of every entry of `dir` that still exists and is not
/// denylisted, in name order.
pub fn entries(dir: &OwnedFd, guard: &Guard) -> Result<Vec<(Vec<u8>, Stat)>, ExecutorError> {
    let mut out = Vec::new();
    for name in names(dir)? {
        if let Ok(st) = rustix::fs::statat(dir, name.as_slice(), AtFlags::SYMLINK_NOFOLLOW) {
            if !guard.denies(&st) {
                out.push((name, st));
            }
        }
    }
    Ok(out)
}

fn descend(
    dir: Arc<OwnedFd>,
    prefix: &str,
    depth: usize,
    guard: &Guard,
    filter: &Filter,
    visit: &mut dyn FnMut(Found<'_>) -> Result<(), ExecutorError>,
) -> Result<(), ExecutorError> {
    for (name, kind) in typed_names(&dir)? {
        let kind = match kind {
            FileType::Unknown => {
                match rustix::fs::statat(&*dir, name.as_slice(), AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => FileType::from_raw_mode(st.st_mode),
                    Err(_) => continue,
                }
            }
            known => known,
        };
        let name = String::from_utf8_lossy(&name).into_owned();
        let rel = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        match kind {
            FileType::Directory if depth < MAX_DEPTH && !filter.prunes_dir(&rel, &name) => {
                // Gone, swapped for a link or denylisted: skip it.
                let sub = open_checked(&dir, &name, OFlags::DIRECTORY, FileType::Directory, guard);
                if let Some(sub) = sub {
                    descend(Arc::new(sub), &rel, depth + 1, guard, filter, visit)?;
                }
            }
            FileType::RegularFile if filter.wants_file(&rel, &name) => {
                let file = FileRef::Entry {
                    dir: dir.clone(),
                    name,
                };
                visit(Found { rel: &rel, file })?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Opens `name` in `dir` for reading (never through a symlink) and keeps it
/// only when it is a `kind` and not denylisted.
fn open_checked(
    dir: &OwnedFd,
    name: &str,
    flags: OFlags,
    kind: FileType,
    guard: &Guard,
) -> Option<OwnedFd> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | flags,
        Mode::empty(),
    )
    .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    (FileType::from_raw_mode(st.st_mode) == kind && !guard.denies(&st)).then_some(fd)
}

/// The names in `dir` with the type the directory entry records
/// (`Unknown` where the filesystem does not say), sorted by bytes.
fn typed_names(dir: &OwnedFd) -> Result<Vec<(Vec<u8>, FileType)>, ExecutorError> {
    let mut out = Vec::new();
    for item in rustix::fs::Dir::read_from(dir).map_err(path_error)? {
        let item = item.map_err(path_error)?;
        let name = item.file_name().to_bytes();
        if name != b"." && name != b".." {
            out.push((name.to_vec(), item.file_type()));
        }
    }
    out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Collects items into chunks of about [`CHUNK_LEN`] bytes and streams each
/// one as a packed `Vec<T>`.
pub struct Batcher<T> {
    items: Vec<T>,
    bytes: usize,
}

impl<T: Serialize> Batcher<T> {
    /// An empty batch.
    pub fn new() -> Batcher<T> {
        Batcher {
            items: Vec::new(),
            bytes: 0,
        }
    }

    /// Adds an item of about `size` bytes, sending the batch once it is full.
    pub fn push(
        &mut self,
        item: T,
        size: usize,
        io: &mut dyn Channel,
    ) -> Result<(), ExecutorError> {
        self.items.push(item);
        self.bytes += size + 16;
        if self.bytes >= CHUNK_LEN {
            self.flush(io)?;
        }
        Ok(())
    }

    /// Sends what is left.
    pub fn flush(&mut self, io: &mut dyn Channel) -> Result<(), ExecutorError> {
        if self.items.is_empty() {
            return Ok(());
        }
        let chunk = ide_proto::pack(&self.items)
            .map_err(|e| ExecutorError::new(ErrorKind::Internal, format!("cannot encode: {e}")))?;
        self.items.clear();
        self.bytes = 0;
        io.send(chunk)
    }
}

/// `Walk`: streams the walk-relative paths of the files at or beneath `path`.
pub fn list(
    at: &Beneath<'_>,
    guard: &Guard,
    path: &RootedPath,
    filter: &WalkFilter,
    io: &mut dyn Channel,
) -> Result<FsReply, ExecutorError> {
    let filter = Filter::new(filter)?;
    let mut batch = Batcher::new();
    files(at, guard, path, &filter, &mut |found| {
        // Listed only if it can be opened and is not denylisted.
        if found.file.open(guard).is_some() {
            batch.push(found.rel.to_owned(), found.rel.len(), io)?;
        }
        Ok(())
    })?;
    batch.flush(io)?;
    Ok(FsReply::Ok)
}
