//! Building and spawning one command, and holding its process group.
//!
//! Security meaning: the child starts in its own session (its pid is its
//! process group), with only the environment we built, stdio we created and
//! the jailed cwd entered by fd, under the confinement [`crate::confine`]
//! prepared. The group is signalled only while its leader is still unreaped:
//! until then the kernel cannot hand the pgid to anyone else, so a kill can
//! never hit an unrelated process; the same kill ends the command's whole
//! tree (its cgroup, or the subreaper sweep), escaped descendants included.
#![forbid(unsafe_code)]

use super::image::Image;
use super::process::Process;
use crate::confine;
use ide_proto::{ErrorKind, ExecSpec, ExecutorError};
use rustix::fd::{AsRawFd, OwnedFd};
use rustix::fs::{Mode, OFlags};
use rustix::pipe::PipeFlags;
use rustix::process::{Pid, Signal};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::process::ExitStatus;
use std::sync::OnceLock;
use tokio::net::unix::pipe;

/// A running command whose process group we may signal.
#[derive(Debug)]
pub struct Leader {
    /// The group leader; its `id()` turns `None` once it is reaped.
    pub child: Process,
    /// Kills the command's whole tree.
    tree: confine::Guard,
}

impl Leader {
    /// SIGKILLs the whole group, but only while the leader is unreaped.
    pub fn kill_group(&self) {
        if let Some(pid) = self.child.id().and_then(|p| Pid::from_raw(p as i32)) {
            self.tree.kill_tree(pid);
            // ESRCH (the group is already gone) is the only expected error.
            let _ = rustix::process::kill_process_group(pid, Signal::KILL);
        }
    }

    /// Reaps the leader; afterwards the group is never signalled again.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.child.wait().await
    }
}

impl Drop for Leader {
    /// A request abandoned mid-run (its task dropped) still leaves nothing
    /// behind: the killed leader is reaped in the background.
    fn drop(&mut self) {
        self.kill_group();
    }
}

/// Our ends of a command's stdio.
#[derive(Debug)]
pub struct Pipes {
    /// Present when the command reads piped stdin.
    pub stdin: Option<pipe::Sender>,
    pub stdout: pipe::Receiver,
    pub stderr: pipe::Receiver,
}

/// Spawns `spec.argv` with `env` in `cwd` (the executor's own cwd when
/// `None`), stdout and stderr piped, stdin piped when the call carries bytes
/// and `/dev/null` otherwise.
///
/// Call it from an async task (a runtime worker thread), never from the
/// blocking pool: the child's death signal fires when the *thread* that
/// spawned it exits, and blocking-pool threads exit when idle.
pub fn spawn(
    spec: &ExecSpec,
    env: BTreeMap<OsString, OsString>,
    cwd: Option<&OwnedFd>,
) -> Result<(Leader, Pipes), ExecutorError> {
    let Some(argv0) = spec.argv.first() else {
        return Err(ExecutorError::new(ErrorKind::Invalid, "empty command"));
    };
    let image = Image::new(&spec.argv, &env).map_err(|e| spawn_error(argv0, &e))?;
    let io_error = |e: io::Error| spawn_error(argv0, &e);
    let (stdin_child, stdin_ours) = if spec.stdin == ide_proto::Stdin::Null {
        (None, None)
    } else {
        let (read, write) = pipe_pair().map_err(io_error)?;
        (Some(read), Some(write))
    };
    let null = dev_null().map_err(io_error)?;
    let stdin_fd = stdin_child.as_ref().map_or(null, AsRawFd::as_raw_fd);
    let (stdout_ours, stdout_child) = pipe_pair().map_err(io_error)?;
    let (stderr_ours, stderr_child) = pipe_pair().map_err(io_error)?;
    let confinement = confine::prepare(spec.confine.as_ref())?;
    let confined = confinement.confined();
    let stdio = [stdin_fd, stdout_child.as_raw_fd(), stderr_child.as_raw_fd()];
    let (spawned, tree) = confinement
        .spawn(&image, stdio, cwd.map(AsRawFd::as_raw_fd))
        .map_err(|e| {
            confine::spawn_error(&e, confined).unwrap_or_else(|| spawn_error(argv0, &e))
        })?;
    drop((stdin_child, stdout_child, stderr_child));
    let leader = Leader {
        child: Process::new(spawned).map_err(io_error)?,
        tree,
    };
    let pipes = Pipes {
        stdin: stdin_ours.map(sender).transpose().map_err(io_error)?,
        stdout: receiver(stdout_ours).map_err(io_error)?,
        stderr: receiver(stderr_ours).map_err(io_error)?,
    };
    Ok((leader, pipes))
}

/// `(read, write)`, both close-on-exec.
fn pipe_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::pipe::pipe_with(PipeFlags::CLOEXEC)?)
}

/// One `/dev/null` opened for reading, shared as every command's stdin.
fn dev_null() -> io::Result<std::os::fd::RawFd> {
    static NULL: OnceLock<OwnedFd> = OnceLock::new();
    if let Some(fd) = NULL.get() {
        return Ok(fd.as_raw_fd());
    }
    let fd = rustix::fs::open(
        "/dev/null",
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )?;
    Ok(NULL.get_or_init(|| fd).as_raw_fd())
}

fn receiver(fd: OwnedFd) -> io::Result<pipe::Receiver> {
    rustix::fs::fcntl_setfl(&fd, OFlags::NONBLOCK)?;
    pipe::Receiver::from_owned_fd_unchecked(fd)
}

fn sender(fd: OwnedFd) -> io::Result<pipe::Sender> {
    rustix::fs::fcntl_setfl(&fd, OFlags::NONBLOCK)?;
    pipe::Sender::from_owned_fd_unchecked(fd)
}

/// The spec's wording for a failed spawn (S216).
fn spawn_error(argv0: &str, err: &io::Error) -> ExecutorError {
    let message = if err.kind() == io::ErrorKind::NotFound {
        format!("{argv0}: command not found (not installed or not on PATH)")
    } else {
        format!("{argv0}: spawn failed: {err}")
    };
    ExecutorError::new(ErrorKind::Internal, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_names_the_program_and_path() {
        let e = spawn_error("nope", &io::Error::from(io::ErrorKind::NotFound));
        assert_eq!(e.kind, ErrorKind::Internal);
        assert_eq!(
            e.message,
            "nope: command not found (not installed or not on PATH)"
        );
    }

    #[test]
    fn other_failures_carry_the_os_error() {
        let e = spawn_error("x", &io::Error::from_raw_os_error(libc::EACCES));
        assert!(e.message.starts_with("x: spawn failed: "), "{}", e.message);
    }
}
