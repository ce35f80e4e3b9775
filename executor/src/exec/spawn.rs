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

use crate::confine;
use ide_proto::{ErrorKind, ExecSpec, ExecutorError};
use rustix::fd::{AsRawFd, OwnedFd};
use rustix::process::{Pid, Signal};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::process::{ExitStatus, Stdio};
use tokio::process::{Child, Command};

/// A running command whose process group we may signal.
#[derive(Debug)]
pub struct Leader {
    /// The group leader; tokio's `id()` turns `None` once it is reaped.
    pub child: Child,
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
    /// behind: tokio reaps the killed leader in the background.
    fn drop(&mut self) {
        self.kill_group();
    }
}

/// Spawns `spec.argv` with `env` in `cwd` (the executor's own cwd when
/// `None`), stdout and stderr piped, stdin piped when the call carries bytes
/// and `/dev/null` otherwise.
///
/// Call it from an async task (a runtime worker thread), never from the
/// blocking pool: the child's death signal fires when the *thread* that forked
/// it exits, and blocking-pool threads exit when idle.
pub fn spawn(
    spec: &ExecSpec,
    env: BTreeMap<OsString, OsString>,
    cwd: Option<&OwnedFd>,
) -> Result<Leader, ExecutorError> {
    let Some((argv0, args)) = spec.argv.split_first() else {
        return Err(ExecutorError::new(ErrorKind::Invalid, "empty command"));
    };
    let mut cmd = Command::new(argv0);
    cmd.args(args)
        .env_clear()
        .envs(env)
        .stdin(if spec.stdin == ide_proto::Stdin::Null {
            Stdio::null()
        } else {
            Stdio::piped()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let confinement = confine::prepare(spec.confine.as_ref())?;
    let confined = confinement.confined();
    let (child, tree) = confinement
        .spawn(&mut cmd, cwd.map(|fd| fd.as_raw_fd()))
        .map_err(|e| {
            confine::spawn_error(&e, confined).unwrap_or_else(|| spawn_error(argv0, &e))
        })?;
    Ok(Leader { child, tree })
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
