//! Filesystem requests (`Request::Fs`): the mechanisms behind `shell::fs::*`.
//!
//! Security meaning: every path is opened beneath a root that lies under an
//! operator ceiling, through [`crate::resolve`] (`openat2` with
//! `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`, or the userspace walk), and
//! every change is an `*at` call on the resolved parent fd, so the path that
//! was checked is the path that is used. Operations on an entry itself (rm,
//! mv, chmod, the target of a write) open it with `O_NOFOLLOW` and act on
//! that fd or name; recursive walks descend by `openat(dirfd, name,
//! O_DIRECTORY | O_NOFOLLOW)` and never follow a link. The denylist is
//! re-checked on what was opened ([`guard`]). Errors carry only the strings
//! the broker sent, never a resolved host path — except `CanonicalRoots`,
//! whose whole purpose is to tell the broker the canonical form of the roots
//! it configured.
#![forbid(unsafe_code)]

pub mod channel;
mod chmod;
mod entry;
mod grep;
pub mod guard;
mod ls;
mod mkdir;
mod mv;
mod read;
mod replace;
mod rm;
mod temp;
mod walk;
mod write;

use crate::ceiling::{open_anchor, open_root_canonical, Ceilings};
use crate::errno::path_error;
use crate::resolve::Backend;
use crate::state::Executor;
use channel::Channel;
use guard::Guard;
use ide_proto::{ErrorKind, ExecutorError, FsOp, FsReply, FsRequest, RootedPath};
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{Mode, OFlags, Stat};

/// Answers one filesystem request with the process-wide resolver. Blocking:
/// run it off the async workers.
pub fn handle(
    executor: &Executor,
    request: FsRequest,
    io: &mut dyn Channel,
) -> Result<FsReply, ExecutorError> {
    handle_with(&executor.ceilings, Backend::current(), request, io)
}

/// [`handle`] with an explicit resolver backend (tests run both).
pub fn handle_with(
    ceilings: &Ceilings,
    backend: Backend,
    request: FsRequest,
    io: &mut dyn Channel,
) -> Result<FsReply, ExecutorError> {
    match request {
        FsRequest::CheckDir { path } => {
            // A non-directory is `WrongType`; the broker words it per surface
            // (S210 for an exec cwd, S212 for fs operations).
            let at = Beneath { ceilings, backend };
            at.open(&path, OFlags::PATH | OFlags::DIRECTORY)?;
            Ok(FsReply::Ok)
        }
        FsRequest::CanonicalRoots { roots } => {
            let canonical = roots
                .iter()
                .map(|root| canonical_root(ceilings, root))
                .collect::<Result<_, _>>()?;
            Ok(FsReply::CanonicalRoots { roots: canonical })
        }
        FsRequest::Guarded { deny, op } => {
            let at = Beneath { ceilings, backend };
            let guard = Guard::new(&deny);
            run(&at, &guard, op, io)
        }
    }
}

fn run(
    at: &Beneath<'_>,
    guard: &Guard,
    op: FsOp,
    io: &mut dyn Channel,
) -> Result<FsReply, ExecutorError> {
    match op {
        FsOp::Ls {
            path,
            offset,
            limit,
        } => ls::list(at, guard, &path, offset, limit),
        FsOp::Stat { path } => entry::stat(at, guard, &path),
        FsOp::Mkdir {
            path,
            mode,
            parents,
        } => mkdir::mkdir(at, guard, &path, mode, parents),
        FsOp::Rm { path, recursive } => rm::rm(at, guard, &path, recursive),
        FsOp::Chmod {
            path,
            mode,
            uid,
            gid,
            recursive,
        } => chmod::chmod(
            at,
            guard,
            &path,
            chmod::Change { mode, uid, gid },
            recursive,
        ),
        FsOp::Mv {
            src,
            dst,
            overwrite,
        } => mv::mv(at, guard, &src, &dst, overwrite),
        FsOp::Read { path, max_bytes } => read::read(at, guard, &path, max_bytes, io),
        FsOp::Write {
            path,
            mode,
            parents,
            max_bytes,
        } => write::write(
            at,
            guard,
            &path,
            write::Target {
                mode,
                parents,
                max_bytes,
            },
            io,
        ),
        FsOp::Walk { path, filter } => walk::list(at, guard, &path, &filter, io),
        FsOp::Grep {
            path,
            filter,
            search,
        } => grep::grep(at, guard, &path, &filter, &search, io),
        FsOp::Sed {
            files,
            edit,
            max_file_bytes,
        } => replace::sed(at, guard, &files, &edit, max_file_bytes, io),
    }
}

fn canonical_root(ceilings: &Ceilings, root: &str) -> Result<String, ExecutorError> {
    let named = |e: ExecutorError| ExecutorError::new(e.kind, format!("{root}: {}", e.message));
    let (_, canonical) = open_root_canonical(root, ceilings).map_err(named)?;
    canonical.into_os_string().into_string().map_err(|_| {
        ExecutorError::new(
            ErrorKind::Internal,
            format!("{root}: canonical path is not UTF-8"),
        )
    })
}

/// Resolution beneath the roots a request names: the one way every
/// operation reaches the filesystem.
pub struct Beneath<'a> {
    ceilings: &'a Ceilings,
    backend: Backend,
}

/// An entry itself, never followed: its parent directory, its name there,
/// an `O_PATH | O_NOFOLLOW` fd of it and its lstat.
pub struct Leaf {
    /// `None` when the path is the root itself.
    pub parent: Option<(OwnedFd, String)>,
    pub fd: OwnedFd,
    pub stat: Stat,
}

impl Beneath<'_> {
    /// Opens `path` (symlinks inside the root are followed) with `flags`.
    pub fn open(&self, path: &RootedPath, flags: OFlags) -> Result<OwnedFd, ExecutorError> {
        let anchor = self.anchor(path)?;
        self.backend.resolve(anchor.as_fd(), &path.rel, flags)
    }

    /// The directory `path.rel` is resolved beneath: the root, or the
    /// session anchor resolved beneath it.
    fn anchor(&self, path: &RootedPath) -> Result<OwnedFd, ExecutorError> {
        open_anchor(path, self.ceilings, self.backend)
    }

    /// The parent directory of `path` and the final name (trailing slashes
    /// ignored: `dir/` names the entry `dir`).
    pub fn parent(&self, path: &RootedPath) -> Result<(OwnedFd, String), ExecutorError> {
        let root = self.anchor(path)?;
        let rel = path.rel.trim_end_matches('/');
        let rel = if rel.is_empty() {
            path.rel.as_str()
        } else {
            rel
        };
        self.backend.resolve_parent(root.as_fd(), rel)
    }

    /// The entry `path` names, without following a final symlink. The root
    /// itself (an empty remainder) has no parent.
    pub fn leaf(&self, path: &RootedPath) -> Result<Leaf, ExecutorError> {
        if is_root(&path.rel) {
            let fd = self.open(path, OFlags::PATH | OFlags::DIRECTORY)?;
            let stat = rustix::fs::fstat(&fd).map_err(path_error)?;
            return Ok(Leaf {
                parent: None,
                fd,
                stat,
            });
        }
        let (dir, name) = self.parent(path)?;
        let fd = open_entry(&dir, name.as_bytes())?;
        let stat = rustix::fs::fstat(&fd).map_err(path_error)?;
        Ok(Leaf {
            parent: Some((dir, name)),
            fd,
            stat,
        })
    }
}

/// True when a remainder names the root itself (`""`, `.`, `./`).
pub fn is_root(rel: &str) -> bool {
    rel.split('/').all(|c| c.is_empty() || c == ".")
}

/// Opens `name` in `dir` as an `O_PATH` fd of the entry itself.
pub fn open_entry(dir: &OwnedFd, name: &[u8]) -> Result<OwnedFd, ExecutorError> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(path_error)
}

/// Refuses the caller's mode when it has bits beyond `0o7777`.
pub fn check_mode(mode: u32) -> Result<Mode, ExecutorError> {
    if mode & !0o7777 != 0 {
        return Err(ExecutorError::new(
            ErrorKind::Invalid,
            format!("mode {mode:o} has bits beyond 07777"),
        ));
    }
    Ok(Mode::from_raw_mode(mode))
}

#[cfg(test)]
mod tests;
