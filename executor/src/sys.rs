//! The only module with `unsafe`: the few raw syscalls that safe wrappers do
//! not offer, the spawn of a command ([`spawn_image`]: a `vfork`-style
//! clone whose child runs the confinement sequence and `execve`), and the
//! allocator tuning of [`bound_heap`].
//!
//! Security meaning: the child runs in the executor's address space until it
//! execs, so it may use async-signal-safe calls only (no allocation, no
//! locks, no env access) and reports failure through one shared word.
//! Before the clone every signal is blocked, so no handler of ours can run
//! in the child; the child resets every disposition to the default before
//! unblocking. It puts the command in its own
//! session (so the whole tree can be killed as one process group), ties its
//! life to ours, enters the jailed cwd by fd (never by string) and marks every
//! fd above stdio close-on-exec so no executor fd leaks into the command; it
//! then joins the command's cgroup and locks the command down with
//! `no_new_privs`, Landlock and seccomp, in the order
//! [`crate::confine::sequence`] fixes.

use crate::confine::sequence::{self, ChildCalls, ChildPlan};
use crate::confine::DANGEROUS_CAPABILITIES;
use rustix::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use rustix::io::Errno;
use rustix::process::{Pid, Signal};
use seccompiler::sock_filter;
use std::ffi::{c_char, CStr};
use std::io;
use std::sync::atomic::{AtomicI32, Ordering};

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

/// Starts writeback of `len` bytes at `offset` of `file` without waiting
/// for it (`sync_file_range(SYNC_FILE_RANGE_WRITE)`); it promises no
/// durability, which only `fsync` gives.
pub fn start_writeback(file: &impl AsFd, offset: u64, len: u64) -> io::Result<()> {
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    // SAFETY: sync_file_range takes an fd, two numbers and flags; it
    // touches no memory of ours.
    let rc = unsafe {
        libc::sync_file_range(
            file.as_fd().as_raw_fd(),
            offset,
            len,
            libc::SYNC_FILE_RANGE_WRITE,
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

/// A program image ready to run: everything the child needs, allocated and
/// laid out by the parent, so the child only reads memory and makes raw
/// syscalls. Built by [`crate::exec::image`].
pub struct ExecImage<'a> {
    /// Paths to try in order (the `PATH` search, done up front).
    pub candidates: &'a [&'a CStr],
    /// Null-terminated `argv`.
    pub argv: &'a [*const c_char],
    /// Null-terminated `["/bin/sh", <candidate>, argv[1..]…]`, for a file
    /// the kernel will not execute itself (`ENOEXEC`), as `execvp` does.
    /// Slot 1 is filled in by the child.
    pub script_argv: &'a mut [*const c_char],
    /// Null-terminated `envp`.
    pub envp: &'a [*const c_char],
    /// The fds that become the child's stdin, stdout and stderr.
    pub stdio: [RawFd; 3],
    /// The confinement sequence.
    pub plan: ChildPlan,
}

/// A spawned child: its pid and a pidfd to wait on.
pub struct Spawned {
    pub pid: Pid,
    pub pidfd: OwnedFd,
}

/// The child's view of the spawn: the image plus the word it reports a
/// failure in (shared memory: the child runs in our address space).
struct Handoff<'a, 'b> {
    image: &'a mut ExecImage<'b>,
    /// 0 after a successful `execve`; else a raw os error, possibly a
    /// [`sequence::StepError`] encoding.
    error: AtomicI32,
}

/// The child's stack size; the sequence and `execve` need a few KiB.
const CHILD_STACK: usize = 128 * 1024;

/// A stack for children of this thread, with a guard page below it.
struct ChildStack {
    base: *mut libc::c_void,
    len: usize,
}

impl ChildStack {
    fn new() -> io::Result<ChildStack> {
        let page = 4096;
        let len = CHILD_STACK + page;
        // SAFETY: an anonymous private mapping at an address of the kernel's
        // choosing; it aliases nothing.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the first page of the mapping we just made; no Rust object
        // lives there.
        if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } != 0 {
            let err = io::Error::last_os_error();
            // SAFETY: unmapping exactly the mapping made above.
            unsafe { libc::munmap(base, len) };
            return Err(err);
        }
        Ok(ChildStack { base, len })
    }

    /// The highest address: stacks grow down.
    fn top(&self) -> *mut libc::c_void {
        // SAFETY: one past the end of our own mapping.
        unsafe { self.base.cast::<u8>().add(self.len).cast() }
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and no child runs on it: a spawn
        // returns only after its child has exec'd or exited.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

thread_local! {
    static STACK: std::cell::RefCell<Option<ChildStack>> = const { std::cell::RefCell::new(None) };
}

/// Starts `image` in a new process the way `posix_spawn` does:
/// `clone(CLONE_VM | CLONE_VFORK)`, so nothing of the executor's memory is
/// copied and the calling thread sleeps until the child has called
/// `execve` (or failed). The child runs the confinement sequence first.
/// A failure in the child comes back as a raw os error; the child is then
/// already reaped.
pub fn spawn_image(image: &mut ExecImage<'_>) -> io::Result<Spawned> {
    STACK.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(ChildStack::new()?);
        }
        let Some(stack) = slot.as_ref() else {
            return Err(io::Error::from_raw_os_error(libc::ENOMEM));
        };
        spawn_on(stack, image)
    })
}

fn spawn_on(stack: &ChildStack, image: &mut ExecImage<'_>) -> io::Result<Spawned> {
    let mut handoff = Handoff {
        image,
        error: AtomicI32::new(0),
    };
    let mut pidfd: libc::c_int = -1;
    // SAFETY: sigset_t is plain data that sigfillset/pthread_sigmask fill.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: blocking every signal on this thread for the few microseconds
    // until the child execs, so no handler of ours ever runs in the child
    // (it shares our memory); the child resets dispositions and unblocks.
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD;
    // SAFETY: the child runs `child_main` on its own stack (ours, unused by
    // anyone else: this thread sleeps until the child execs or exits, which
    // CLONE_VFORK guarantees) with a pointer to `handoff`, which outlives the
    // call for the same reason. `child_main` makes async-signal-safe calls
    // only. CLONE_PIDFD stores the pidfd in `pidfd`.
    let pid = unsafe {
        libc::clone(
            child_main,
            stack.top(),
            flags,
            (&mut handoff as *mut Handoff<'_, '_>).cast(),
            &mut pidfd as *mut libc::c_int,
        )
    };
    let clone_error = io::Error::last_os_error();
    // SAFETY: restoring the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    if pid < 0 {
        return Err(clone_error);
    }
    // SAFETY: CLONE_PIDFD returned a fresh pidfd that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    let error = handoff.error.load(Ordering::Acquire);
    if error != 0 {
        // The child has exited (vfork returned without an exec): reap it.
        let _ = rustix::process::waitid(
            rustix::process::WaitId::PidFd(pidfd.as_fd()),
            rustix::process::WaitIdOptions::EXITED,
        );
        return Err(io::Error::from_raw_os_error(error));
    }
    let pid = Pid::from_raw(pid).ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))?;
    Ok(Spawned { pid, pidfd })
}

/// A thread that spawns commands under per-thread state the rest of the
/// executor must not have (a seccomp filter, `no_new_privs`): children
/// inherit the state of the thread that clones them, so state loaded once
/// here costs nothing per spawn. The thread lives as long as the process,
/// which is what the children's death signal is tied to.
pub struct Spawner {
    calls: std::sync::mpsc::Sender<SpawnCall>,
}

/// One spawn handed to the spawner thread.
struct SpawnCall {
    image: *mut ExecImage<'static>,
    reply: std::sync::mpsc::SyncSender<io::Result<Spawned>>,
}

// SAFETY: the image pointer is only dereferenced while the caller of
// `Spawner::spawn`, which owns the image, blocks waiting for the reply.
unsafe impl Send for SpawnCall {}

impl std::fmt::Debug for Spawner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Spawner")
    }
}

impl Spawner {
    /// Starts the thread and runs `setup` on it first; its error is ours.
    pub fn start(
        name: &str,
        setup: impl FnOnce() -> Result<(), Errno> + Send + 'static,
    ) -> io::Result<Spawner> {
        let (calls, incoming) = std::sync::mpsc::channel::<SpawnCall>();
        let (ready, set_up) = std::sync::mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let done = setup();
                let failed = done.is_err();
                let _ = ready.send(done);
                if failed {
                    return;
                }
                for call in incoming {
                    // SAFETY: see `SpawnCall`: the owner blocks until the
                    // reply below, so the image is alive and not shared.
                    let image = unsafe { &mut *call.image };
                    let _ = call.reply.send(spawn_image(image));
                }
            })?;
        match set_up.recv() {
            Ok(Ok(())) => Ok(Spawner { calls }),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err(io::Error::other("the spawner thread died while setting up")),
        }
    }

    /// Spawns `image` from the spawner thread, blocking until it is done.
    pub fn spawn(&self, image: &mut ExecImage<'_>) -> io::Result<Spawned> {
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        let call = SpawnCall {
            image: (image as *mut ExecImage<'_>).cast::<ExecImage<'static>>(),
            reply,
        };
        if self.calls.send(call).is_err() {
            return Err(io::Error::other("the spawner thread is gone"));
        }
        // Returns only once the thread has dropped its use of the image:
        // after its reply, or after it died (the reply sender dropped).
        answer
            .recv()
            .unwrap_or_else(|_| Err(io::Error::other("the spawner thread died")))
    }
}

/// Watches `fd` for readiness in the current tokio runtime (a pidfd turns
/// readable when its process exits).
pub fn watch(fd: OwnedFd) -> io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    // SAFETY: an OwnedFd is a valid open fd, and the AsyncFd owns it from
    // here on, so it stays open and the same file until deregistered.
    let watched = unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
    };
    watched.map_err(|e| e.into_parts().1)
}

/// The child: signals back to default, stdio in place, the confinement
/// sequence, then `execve` of each candidate. Never returns on success.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `Handoff`, alive and untouched by the
    // parent until this child execs or exits.
    let handoff = unsafe { &mut *arg.cast::<Handoff<'_, '_>>() };
    let error = match child_steps(handoff.image) {
        Ok(never) => match never {},
        Err(e) => e,
    };
    handoff.error.store(error.max(1), Ordering::Release);
    // SAFETY: _exit ends this child at once, running nothing of the
    // parent's (no atexit handlers, no stdio flushing).
    unsafe { libc::_exit(127) }
}

/// The child's work; `Err` carries the raw os error to report.
fn child_steps(image: &mut ExecImage<'_>) -> Result<std::convert::Infallible, i32> {
    reset_signals();
    for (target, fd) in image.stdio.into_iter().enumerate() {
        let target = target as libc::c_int;
        let rc = if fd == target {
            // SAFETY: clears close-on-exec of an fd the parent keeps open
            // until we exec; no memory is touched.
            unsafe { libc::fcntl(fd, libc::F_SETFD, 0) }
        } else {
            // SAFETY: dup2 of an fd the parent keeps open until we exec.
            unsafe { libc::dup2(fd, target) }
        };
        if rc < 0 {
            return Err(last_errno());
        }
    }
    sequence::run(&mut RawChildCalls, &image.plan).map_err(|e| e.encode())?;
    let mut denied = false;
    let mut last = libc::ENOENT;
    for path in image.candidates {
        // SAFETY: every pointer is a NUL-terminated string or array the
        // parent keeps alive until we exec.
        unsafe { libc::execve(path.as_ptr(), image.argv.as_ptr(), image.envp.as_ptr()) };
        last = last_errno();
        if last == libc::ENOEXEC {
            image.script_argv[1] = path.as_ptr();
            // SAFETY: as above; slot 1 now points at the candidate.
            unsafe {
                libc::execve(
                    image.script_argv[0],
                    image.script_argv.as_ptr(),
                    image.envp.as_ptr(),
                )
            };
            return Err(last_errno());
        }
        match last {
            libc::EACCES => denied = true,
            libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {}
            _ => return Err(last),
        }
    }
    Err(if denied { libc::EACCES } else { last })
}

/// Every signal back to its default action and none blocked: a command
/// starts as if from a fresh login, and no handler of ours can run in it.
fn reset_signals() {
    // The kernel's `struct sigaction` is at most four words on every Linux
    // target; all zero is SIG_DFL with no flags and an empty mask. The raw
    // call also resets the two signals glibc keeps for itself.
    let default = [0u64; 4];
    let none = 0u64;
    for signal in 1..=64 {
        if signal == libc::SIGKILL || signal == libc::SIGSTOP {
            continue;
        }
        // SAFETY: rt_sigaction reads the zeroed words and writes nothing
        // (no old-action pointer); 8 is the kernel's sigset size.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                signal,
                default.as_ptr(),
                std::ptr::null_mut::<u64>(),
                8usize,
            )
        };
    }
    // SAFETY: as above, with an empty mask and no old-mask pointer.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &none as *const u64,
            std::ptr::null_mut::<u64>(),
            8usize,
        )
    };
}

/// The real spawn-time syscalls, for a spawned child: each method is one raw,
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
        // returns, and the child got a copy of its fd table at the clone.
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
    load_seccomp_with(program, 0)
}

/// Loads a seccomp filter into every thread of this process
/// (`SECCOMP_FILTER_FLAG_TSYNC`), so no thread is left without it.
pub fn load_seccomp_all_threads(program: &[sock_filter]) -> Result<(), Errno> {
    load_seccomp_with(program, libc::SECCOMP_FILTER_FLAG_TSYNC as u32)
}

fn load_seccomp_with(program: &[sock_filter], flags: u32) -> Result<(), Errno> {
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
            flags,
            &prog as *const libc::sock_fprog,
        )
    };
    // With TSYNC a positive value names a thread that could not be synced.
    match rc {
        0 => Ok(()),
        r if r > 0 => Err(Errno::PERM),
        _ => Err(Errno::from_raw_os_error(last_errno())),
    }
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
