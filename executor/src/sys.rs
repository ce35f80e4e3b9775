//! The only module with `unsafe`: the few raw syscalls that safe wrappers do
//! not offer, the `pre_exec` hook that runs in a forked child, and the
//! allocator tuning of [`bound_heap`].
//!
//! Security meaning: the child hook runs between `fork` and `exec` of a
//! multi-threaded process, so it may use async-signal-safe raw syscalls only
//! (no allocation, no locks, no env access). It puts the command in its own
//! session (so the whole tree can be killed as one process group), ties its
//! life to ours, enters the jailed cwd by fd (never by string) and marks every
//! fd above stdio close-on-exec so no executor fd leaks into the command; it
//! then joins the command's cgroup and locks the command down with
//! `no_new_privs`, Landlock and seccomp, in the order
//! [`crate::confine::sequence`] fixes.

use crate::confine::sequence::{self, ChildCalls, ChildPlan};
use crate::confine::DANGEROUS_CAPABILITIES;
use rustix::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use rustix::io::Errno;
use rustix::process::{Pid, Signal};
use seccompiler::sock_filter;
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

/// Sets the mode of exactly the object `fd` refers to (an `O_PATH` fd is
/// fine), never following a symlink: `fchmodat2(fd, "", mode,
/// AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW)`. ENOSYS before Linux 6.6.
pub fn chmod_fd(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    // SAFETY: fchmodat2 only reads the static empty C string and changes the
    // mode of the file `fd` refers to; it touches no memory of ours.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_fchmodat2,
            fd.as_raw_fd(),
            c"".as_ptr(),
            mode,
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
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

/// Installs the child-side spawn sequence ([`crate::confine::sequence`]) on
/// `cmd`. Every fd in `plan` must stay open until `spawn` returns (std waits
/// for the exec). A failed step comes back from `spawn` as a raw os error
/// that [`sequence::StepError::decode`] reads.
pub fn install_child_setup(cmd: &mut std::process::Command, plan: ChildPlan) {
    let setup = move || -> io::Result<()> {
        sequence::run(&mut RawChildCalls, &plan)
            .map_err(|e| io::Error::from_raw_os_error(e.encode()))
    };
    // SAFETY: `setup` makes raw syscalls only (rustix's linux_raw backend and
    // libc::syscall, see RawChildCalls): no allocation, locking or env access
    // after fork. The io::Error it builds is `from_raw_os_error`, which
    // allocates nothing.
    unsafe {
        cmd.pre_exec(setup);
    }
}

/// The real spawn-time syscalls, for a forked child: each method is one raw,
/// async-signal-safe syscall (or a fixed few) that allocates nothing.
pub struct RawChildCalls;

impl ChildCalls for RawChildCalls {
    fn new_session(&mut self) -> Result<(), Errno> {
        rustix::process::setsid().map(drop)
    }

    fn set_death_signal(&mut self) -> Result<(), Errno> {
        rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
    }

    fn parent(&mut self) -> Option<Pid> {
        rustix::process::getppid()
    }

    fn join_cgroup(&mut self, procs: RawFd) -> Result<(), Errno> {
        // SAFETY: the parent keeps the leaf's cgroup.procs open until spawn
        // returns, and fork copied it into this child, so it is open here.
        let fd = unsafe { BorrowedFd::borrow_raw(procs) };
        rustix::io::write(fd, b"0").map(drop)
    }

    fn limit_core_dumps(&mut self) -> Result<(), Errno> {
        rustix::process::setrlimit(
            rustix::process::Resource::Core,
            rustix::process::Rlimit {
                current: Some(0),
                maximum: Some(0),
            },
        )
    }

    fn enter_dir(&mut self, dir: RawFd) -> Result<(), Errno> {
        // SAFETY: as for `join_cgroup`, the cwd fd is open in this child.
        let fd = unsafe { BorrowedFd::borrow_raw(dir) };
        rustix::process::fchdir(fd)
    }

    fn drop_dangerous_capabilities(&mut self) -> Result<(), Errno> {
        for cap in DANGEROUS_CAPABILITIES.iter() {
            match rustix::thread::remove_capability_from_bounding_set(cap) {
                // EINVAL: a capability this kernel does not know. EPERM: we
                // lack CAP_SETPCAP, so the capability is not ours to give
                // and no_new_privs (always set with this step) keeps exec
                // from granting it.
                Ok(()) | Err(Errno::INVAL) | Err(Errno::PERM) => {}
                Err(e) => return Err(e),
            }
        }
        let mut sets = rustix::thread::capabilities(None)?;
        sets.effective.remove(DANGEROUS_CAPABILITIES);
        sets.permitted.remove(DANGEROUS_CAPABILITIES);
        sets.inheritable.remove(DANGEROUS_CAPABILITIES);
        rustix::thread::set_capabilities(None, sets)?;
        match rustix::thread::clear_ambient_capability_set() {
            Ok(()) | Err(Errno::INVAL) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn mark_cloexec_above_stdio(&mut self) -> Result<(), Errno> {
        match mark_cloexec_from(3) {
            Ok(()) => Ok(()),
            // Kernels before 5.11 lack the flag; every fd we open is
            // O_CLOEXEC anyway, so this second line may be missing.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EINVAL)) => Ok(()),
            Err(e) => Err(Errno::from_io_error(&e).unwrap_or(Errno::INVAL)),
        }
    }

    fn set_no_new_privs(&mut self) -> Result<(), Errno> {
        rustix::thread::set_no_new_privs(true)
    }

    fn restrict_landlock(&mut self, ruleset: RawFd) -> Result<(), Errno> {
        // SAFETY: landlock_restrict_self takes an fd and flags, no memory.
        let rc = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) };
        errno_of(rc)
    }

    fn load_seccomp(&mut self, program: &[sock_filter]) -> Result<(), Errno> {
        load_seccomp(program)
    }
}

/// Loads a seccomp filter into the calling thread (its children inherit
/// it); needs `no_new_privs` or `CAP_SYS_ADMIN`. Allocation-free.
pub fn load_seccomp(program: &[sock_filter]) -> Result<(), Errno> {
    let len = u16::try_from(program.len()).map_err(|_| Errno::INVAL)?;
    let prog = libc::sock_fprog {
        len,
        filter: program.as_ptr().cast::<libc::sock_filter>().cast_mut(),
    };
    // SAFETY: seccompiler's sock_filter is #[repr(C)] with libc's layout;
    // the kernel copies `len` instructions from `filter` and keeps no
    // pointer, and `program` outlives the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0u32,
            &prog as *const libc::sock_fprog,
        )
    };
    errno_of(rc)
}

/// The kernel's Landlock ABI version (`landlock_create_ruleset` with
/// `LANDLOCK_CREATE_RULESET_VERSION`); EOPNOTSUPP when disabled at boot,
/// ENOSYS when not built in.
pub fn landlock_abi() -> Result<i32, Errno> {
    landlock_query(LANDLOCK_CREATE_RULESET_VERSION)
}

/// The kernel's mask of fixed Landlock errata (6.15+).
pub fn landlock_errata() -> Result<i32, Errno> {
    landlock_query(LANDLOCK_CREATE_RULESET_ERRATA)
}

const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1 << 0;
const LANDLOCK_CREATE_RULESET_ERRATA: u32 = 1 << 1;

fn landlock_query(flag: u32) -> Result<i32, Errno> {
    // SAFETY: with a null attribute pointer and size 0 the kernel only
    // reports the version or errata; it reads and writes no memory.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            flag,
        )
    };
    if rc < 0 {
        Err(Errno::from_raw_os_error(last_errno()))
    } else {
        i32::try_from(rc).map_err(|_| Errno::RANGE)
    }
}

/// Moves the calling process into a new user namespace (the probe checks
/// that it can). Fails in a multi-threaded process.
pub fn unshare_user_namespace() -> io::Result<()> {
    // SAFETY: unshare takes flags only and touches no memory of ours.
    let rc = unsafe { libc::unshare(libc::CLONE_NEWUSER) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn errno_of(rc: libc::c_long) -> Result<(), Errno> {
    if rc == 0 {
        Ok(())
    } else {
        Err(Errno::from_raw_os_error(last_errno()))
    }
}

/// `errno`, read without allocating.
fn last_errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EINVAL)
}

/// Blocks at least this large are mmapped and unmapped on free.
const MMAP_THRESHOLD: libc::c_int = 256 * 1024;
/// Free memory kept at the top of a heap before it is returned: enough
/// that a stream of 64 KiB frames does not fault in fresh pages per frame.
const TRIM_THRESHOLD: libc::c_int = 4 * 1024 * 1024;

/// Fixes glibc's mmap threshold (it otherwise rises after each large free,
/// and later multi-megabyte output buffers stay resident in per-thread
/// heaps), so resident size follows what the executor holds. Call once,
/// before other threads start.
pub fn bound_heap() {
    // SAFETY: mallopt only sets allocator parameters; it is called before
    // any other thread exists and takes no pointers.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fd::AsFd;
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
    fn chmod_fd_changes_the_object_and_never_a_link_target() {
        use rustix::fs::{Mode, OFlags};
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        std::fs::write(&file, b"").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::os::unix::fs::symlink(&file, tmp.path().join("l")).unwrap();
        let fd = rustix::fs::open(&file, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).unwrap();
        chmod_fd(fd.as_fd(), 0o600).unwrap();
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o600);
        let link = rustix::fs::open(
            tmp.path().join("l"),
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .unwrap();
        assert!(chmod_fd(link.as_fd(), 0o777).is_err());
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o600);
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
