//! A spawned command's process: its pid, a pidfd to wait on, and its exit
//! status once reaped.
//!
//! Security meaning: the pid is reported (and so signalled) only until the
//! process is reaped; after that the kernel may hand the number to anyone.
//! Waiting goes through the pidfd, never `waitpid(-1)`, so no other child
//! (an adopted orphan, another command) is ever reaped by mistake, and a
//! process dropped unreaped is reaped in the background, not left a zombie.
#![forbid(unsafe_code)]

use crate::sys::{self, Spawned};
use rustix::fd::{AsFd, OwnedFd};
use rustix::process::{Pid, WaitId, WaitIdOptions, WaitIdStatus};
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use tokio::io::unix::AsyncFd;

/// A child of the executor.
#[derive(Debug)]
pub struct Process {
    pid: Pid,
    pidfd: Option<AsyncFd<OwnedFd>>,
    status: Option<ExitStatus>,
}

impl Process {
    /// Follows a freshly spawned child; call it inside the runtime. If the
    /// pidfd cannot be watched the child is killed and reaped here.
    pub fn new(spawned: Spawned) -> io::Result<Process> {
        let pid = spawned.pid;
        match sys::watch(spawned.pidfd) {
            Ok(pidfd) => Ok(Process {
                pid,
                pidfd: Some(pidfd),
                status: None,
            }),
            Err(err) => {
                // Still unreaped, so the pid is still this child's.
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                let _ = rustix::process::waitid(WaitId::Pid(pid), WaitIdOptions::EXITED);
                Err(err)
            }
        }
    }

    /// The pid, until the process is reaped.
    pub fn id(&self) -> Option<u32> {
        match self.status {
            None => Some(self.pid.as_raw_nonzero().get() as u32),
            Some(_) => None,
        }
    }

    /// Waits for the process to exit and reaps it; later calls return the
    /// same status.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let Some(pidfd) = self.pidfd.as_ref() else {
            return Err(io::Error::from_raw_os_error(libc::ECHILD));
        };
        let status = reap(pidfd).await?;
        self.status = Some(status);
        self.pidfd = None;
        Ok(status)
    }
}

impl Drop for Process {
    /// Reaps an abandoned process in the background once it exits.
    fn drop(&mut self) {
        let Some(pidfd) = self.pidfd.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    let _ = reap(&pidfd).await;
                });
            }
            Err(_) => {
                let pidfd = pidfd.into_inner();
                std::thread::spawn(move || {
                    let _ = rustix::process::waitid(
                        WaitId::PidFd(pidfd.as_fd()),
                        WaitIdOptions::EXITED,
                    );
                });
            }
        }
    }
}

async fn reap(pidfd: &AsyncFd<OwnedFd>) -> io::Result<ExitStatus> {
    loop {
        let mut ready = pidfd.readable().await?;
        let waited = rustix::process::waitid(
            WaitId::PidFd(pidfd.get_ref().as_fd()),
            WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
        )?;
        match waited {
            Some(status) => return Ok(exit_status(&status)),
            None => ready.clear_ready(),
        }
    }
}

/// The `waitpid`-style status std's `ExitStatus` wraps.
fn exit_status(status: &WaitIdStatus) -> ExitStatus {
    let raw = match (status.exit_status(), status.terminating_signal()) {
        (Some(code), _) => (code & 0xff) << 8,
        (None, Some(signal)) if status.dumped() => (signal & 0x7f) | 0x80,
        (None, Some(signal)) => signal & 0x7f,
        (None, None) => 0,
    };
    ExitStatus::from_raw(raw)
}
