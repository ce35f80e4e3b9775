//! The only module with `unsafe`: the few raw syscalls that safe wrappers do
//! not offer, and the `pre_exec` hook that runs in a forked child.
//!
//! Security meaning: the child hook runs between `fork` and `exec` of a
//! multi-threaded process, so it may use async-signal-safe raw syscalls only
//! (no allocation, no locks, no env access). It puts the command in its own
//! session (so the whole tree can be killed as one process group), ties its
//! life to ours, enters the jailed cwd by fd (never by string) and marks every
//! fd above stdio close-on-exec so no executor fd leaks into the command.

use rustix::fd::{BorrowedFd, FromRawFd, OwnedFd, RawFd};
use rustix::io::Errno;
use rustix::process::{Pid, Signal};
use std::io;
use std::os::unix::process::CommandExt;

/// Marks every fd from `first` upwards close-on-exec (`close_range` with
/// `CLOSE_RANGE_CLOEXEC`): marking keeps them usable here, and unlike closing
/// it cannot break std's exec-error pipe in a child.
pub fn mark_cloexec_from(first: u32) -> io::Result<()> {
    // SAFETY: close_range only changes fd flags; it touches no memory.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Takes ownership of an fd inherited from our parent (`--fd N`), after
/// checking that it is open, so a wrong number is an error and not a
/// double close of somebody else's fd later.
pub fn adopt_inherited_fd(fd: RawFd) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    // SAFETY: F_GETFD only reads the flags of `fd`; an unknown fd gives EBADF.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the fd is open and, being inherited on the command line, owned
    // by nothing else in this process; we become its only owner.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Installs the child-side spawn steps (confinement-notes §2) on `cmd`.
///
/// `cwd` must stay open until `spawn` returns (std waits for the exec), and
/// `parent` is our pid read before the fork: if `getppid` differs after the
/// death signal is armed, we already died and the child must not run.
pub fn install_child_setup(cmd: &mut std::process::Command, cwd: Option<RawFd>, parent: Pid) {
    let setup = move || -> io::Result<()> {
        rustix::process::setsid()?;
        rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
        if rustix::process::getppid() != Some(parent) {
            return Err(Errno::SRCH.into());
        }
        if let Some(fd) = cwd {
            // SAFETY: the parent keeps this fd open until spawn returns, and
            // fork copied it into this child, so it is open here.
            let fd = unsafe { BorrowedFd::borrow_raw(fd) };
            rustix::process::fchdir(fd)?;
        }
        match mark_cloexec_from(3) {
            // Kernels before 5.11 lack the flag; every fd we open is
            // O_CLOEXEC anyway, so this second line may be missing.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EINVAL)) => Ok(()),
            other => other,
        }
    };
    // SAFETY: `setup` makes raw syscalls only (rustix's linux_raw backend and
    // libc::syscall): no allocation, locking or env access after fork. The
    // io::Error values it builds are `from_raw_os_error`, which allocates
    // nothing.
    unsafe {
        cmd.pre_exec(setup);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::io::{fcntl_getfd, fcntl_setfd, FdFlags};

    #[test]
    fn marking_sets_cloexec_on_fds_that_lacked_it() {
        let file = tempfile::tempfile().unwrap();
        fcntl_setfd(&file, FdFlags::empty()).unwrap();
        assert!(!fcntl_getfd(&file).unwrap().contains(FdFlags::CLOEXEC));
        mark_cloexec_from(3).unwrap();
        assert!(fcntl_getfd(&file).unwrap().contains(FdFlags::CLOEXEC));
    }

    #[test]
    fn adopting_a_closed_or_negative_fd_fails() {
        assert!(adopt_inherited_fd(-1).is_err());
        // Far above any fd limit, so no concurrent test can have it open.
        let err = adopt_inherited_fd(1 << 30).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EBADF));
    }

    #[test]
    fn adopting_an_open_fd_takes_ownership() {
        let file = tempfile::tempfile().unwrap();
        let raw = std::os::fd::IntoRawFd::into_raw_fd(file);
        let owned = adopt_inherited_fd(raw).unwrap();
        assert_eq!(std::os::fd::AsRawFd::as_raw_fd(&owned), raw);
    }
}
