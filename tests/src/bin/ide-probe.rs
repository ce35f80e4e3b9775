//! `ide-probe`: a test-only attacker. The behaviour suite runs it as the
//! command of a real exec (through the real broker and executor, or the
//! real executor alone) and checks both what it reports and what it left
//! behind.
//!
//! Each subcommand makes its attacks and prints one JSON object: for every
//! attempt, `"ok"` or the errno name it failed with. It never decides
//! whether an outcome is good; the suite does.
//!
//! Security meaning: this is the one crate of the project that must make raw
//! syscalls nobody else makes (init_module, io_uring_setup, a 64-bit ioctl
//! request, an x32 syscall number), so it is this binary's only module and
//! every `unsafe` block says why it is sound.

use serde_json::{json, Map, Value};
use std::ffi::CString;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((case, rest)) = args.split_first() else {
        eprintln!("usage: ide-probe <case> [args…]; see the module docs");
        std::process::exit(2);
    };
    let report = match (case.as_str(), rest) {
        ("writes", [dir, canary]) => writes(Path::new(dir), Path::new(canary)),
        ("syscalls", []) => syscalls(),
        ("ioctls", []) => ioctls(),
        ("status", []) => status(),
        ("token", pids) => token(pids),
        ("processes", [pid]) => processes(pid),
        ("without-landlock", [program, program_args @ ..]) => {
            without_landlock(program, program_args)
        }
        _ => {
            eprintln!(
                "ide-probe: unknown case {case} with {} arguments",
                rest.len()
            );
            std::process::exit(2);
        }
    };
    println!("{report}");
}

/// `"ok"`, or the errno's name.
fn outcome(rc: i64) -> Value {
    if rc >= 0 {
        json!("ok")
    } else {
        json!(errno_name(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
        ))
    }
}

fn io_outcome<T>(r: std::io::Result<T>) -> Value {
    match r {
        Ok(_) => json!("ok"),
        Err(e) => json!(errno_name(e.raw_os_error().unwrap_or(0))),
    }
}

fn errno_name(errno: i32) -> String {
    match errno {
        libc::EPERM => "EPERM".into(),
        libc::EACCES => "EACCES".into(),
        libc::ENOSYS => "ENOSYS".into(),
        libc::EXDEV => "EXDEV".into(),
        libc::EROFS => "EROFS".into(),
        libc::ENOTTY => "ENOTTY".into(),
        libc::EINVAL => "EINVAL".into(),
        libc::EFAULT => "EFAULT".into(),
        libc::EBADF => "EBADF".into(),
        libc::ENOENT => "ENOENT".into(),
        libc::EEXIST => "EEXIST".into(),
        libc::ESRCH => "ESRCH".into(),
        other => format!("errno {other}"),
    }
}

fn c(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).unwrap_or_default()
}

/// Every way of writing beneath `dir`, and to `canary` (an existing file
/// there), that Landlock must refuse outside the writable paths.
fn writes(dir: &Path, canary: &Path) -> Value {
    let at = |name: &str| c(&dir.join(name));
    let canary_c = c(canary);
    let mut r = Map::new();
    let open = |path: &CString, flags: i32| {
        // SAFETY: `path` is a valid NUL-terminated string that outlives the
        // call; a successful open's fd is closed right away.
        let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC, 0o644) };
        let result = outcome(i64::from(fd));
        if fd >= 0 {
            // SAFETY: closes the fd this closure just opened.
            unsafe { libc::close(fd) };
        }
        result
    };
    r.insert(
        "create".into(),
        open(
            &at("created"),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
        ),
    );
    r.insert(
        "open_write".into(),
        open(&canary_c, libc::O_WRONLY | libc::O_APPEND),
    );
    r.insert(
        "open_trunc".into(),
        open(&canary_c, libc::O_WRONLY | libc::O_TRUNC),
    );
    // SAFETY (all below): each call gets valid NUL-terminated paths that
    // outlive it and plain integer arguments.
    r.insert(
        "mkdir".into(),
        outcome(i64::from(unsafe { libc::mkdir(at("dir").as_ptr(), 0o755) })),
    );
    r.insert(
        "rename".into(),
        outcome(i64::from(unsafe {
            libc::rename(canary_c.as_ptr(), at("renamed").as_ptr())
        })),
    );
    r.insert(
        "link".into(),
        outcome(i64::from(unsafe {
            libc::link(canary_c.as_ptr(), at("hard").as_ptr())
        })),
    );
    r.insert(
        "symlink".into(),
        outcome(i64::from(unsafe {
            libc::symlink(canary_c.as_ptr(), at("sym").as_ptr())
        })),
    );
    r.insert(
        "mkfifo".into(),
        outcome(i64::from(unsafe {
            libc::mkfifo(at("fifo").as_ptr(), 0o644)
        })),
    );
    r.insert(
        "unlink".into(),
        outcome(i64::from(unsafe { libc::unlink(canary_c.as_ptr()) })),
    );
    r.insert(
        "truncate".into(),
        outcome(i64::from(unsafe { libc::truncate(canary_c.as_ptr(), 0) })),
    );
    r.insert(
        "chmod_setuid".into(),
        outcome(i64::from(unsafe { libc::chmod(canary_c.as_ptr(), 0o4755) })),
    );
    Value::Object(r)
}

/// One raw syscall; arguments are plain integers or pointers to buffers
/// that outlive the call.
fn raw(nr: i64, a: [u64; 4]) -> Value {
    // SAFETY: every caller passes either integers the kernel only reads as
    // numbers, or null / pointers to zeroed buffers at least as large as
    // the kernel may write, all alive for the call.
    outcome(unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3]) })
}

/// The calls the seccomp baseline must refuse.
fn syscalls() -> Value {
    let tmp = c(&std::env::temp_dir());
    let none = c(Path::new("none"));
    let tmpfs = c(Path::new("tmpfs"));
    let empty = c(Path::new(""));
    let mut io_uring_params = [0u8; 120];
    let mut handle = [0u8; 136];
    let mut r = Map::new();
    let p = |s: &CString| s.as_ptr() as u64;
    r.insert(
        "mount".into(),
        raw(libc::SYS_mount, [p(&none), p(&tmp), p(&tmpfs), 0]),
    );
    r.insert("umount2".into(), raw(libc::SYS_umount2, [p(&tmp), 0, 0, 0]));
    r.insert(
        "init_module".into(),
        raw(libc::SYS_init_module, [0, 0, p(&empty), 0]),
    );
    r.insert(
        "finit_module".into(),
        raw(libc::SYS_finit_module, [u64::MAX, p(&empty), 0, 0]),
    );
    r.insert(
        "delete_module".into(),
        raw(libc::SYS_delete_module, [p(&none), 0, 0, 0]),
    );
    r.insert("kexec_load".into(), raw(libc::SYS_kexec_load, [0, 0, 0, 0]));
    r.insert(
        "io_uring_setup".into(),
        raw(
            libc::SYS_io_uring_setup,
            [1, io_uring_params.as_mut_ptr() as u64, 0, 0],
        ),
    );
    r.insert(
        "unshare_user".into(),
        raw(libc::SYS_unshare, [libc::CLONE_NEWUSER as u64, 0, 0, 0]),
    );
    r.insert(
        "unshare_mount".into(),
        raw(libc::SYS_unshare, [libc::CLONE_NEWNS as u64, 0, 0, 0]),
    );
    // A size of 0 makes an unfiltered clone3 fail with EINVAL instead of
    // forking this probe.
    r.insert("clone3".into(), raw(libc::SYS_clone3, [0, 0, 0, 0]));
    r.insert("bpf".into(), raw(libc::SYS_bpf, [0, 0, 0, 0]));
    r.insert(
        "perf_event_open".into(),
        raw(libc::SYS_perf_event_open, [0, 0, u64::MAX, u64::MAX]),
    );
    r.insert(
        "userfaultfd".into(),
        raw(libc::SYS_userfaultfd, [0, 0, 0, 0]),
    );
    r.insert("keyctl".into(), raw(libc::SYS_keyctl, [0, 0, 0, 0]));
    r.insert("add_key".into(), raw(libc::SYS_add_key, [0, 0, 0, 0]));
    r.insert("setns".into(), raw(libc::SYS_setns, [u64::MAX, 0, 0, 0]));
    r.insert(
        "name_to_handle_at".into(),
        raw(
            libc::SYS_name_to_handle_at,
            [
                libc::AT_FDCWD as u64,
                p(&tmp),
                handle.as_mut_ptr() as u64,
                0,
            ],
        ),
    );
    r.insert(
        "open_by_handle_at".into(),
        raw(libc::SYS_open_by_handle_at, [u64::MAX, 0, 0, 0]),
    );
    #[cfg(target_arch = "x86_64")]
    r.insert(
        "x32_getpid".into(),
        raw(0x4000_0000 | libc::SYS_getpid, [0, 0, 0, 0]),
    );
    r.insert("getpid".into(), raw(libc::SYS_getpid, [0, 0, 0, 0]));
    Value::Object(r)
}

/// Terminal injection on stdin, including requests with high bits set (the
/// kernel reads only the low 32).
fn ioctls() -> Value {
    let byte = b'x';
    let b = &byte as *const u8 as u64;
    let mut r = Map::new();
    // Requests are 32-bit words; libc's type for them varies by target.
    let sti = u64::from(libc::TIOCSTI as u32);
    r.insert("tiocsti".into(), raw(libc::SYS_ioctl, [0, sti, b, 0]));
    r.insert(
        "tiocsti_high_bits".into(),
        raw(libc::SYS_ioctl, [0, sti | (1 << 32), b, 0]),
    );
    r.insert(
        "tiocsti_all_high_bits".into(),
        raw(libc::SYS_ioctl, [0, sti | (0xffff_ffff << 32), b, 0]),
    );
    r.insert(
        "tioclinux".into(),
        raw(
            libc::SYS_ioctl,
            [0, u64::from(libc::TIOCLINUX as u32), b, 0],
        ),
    );
    r.insert(
        "tcgets".into(),
        raw(libc::SYS_ioctl, [0, u64::from(libc::TCGETS as u32), 0, 0]),
    );
    Value::Object(r)
}

/// The probe's own confinement state and open fds.
fn status() -> Value {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k))
            .map(|v| v.trim().to_owned())
    };
    let fds: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    json!({
        "uid": field("Uid:"),
        "no_new_privs": field("NoNewPrivs:"),
        "seccomp": field("Seccomp:"),
        "cap_eff": field("CapEff:"),
        "fds": fds,
    })
}

/// Looks for the token (read from stdin, so it is in no argv or env of
/// ours) everywhere this process can read: its own environment, every
/// `/proc/*/environ` and `cmdline`, and the memory of `pids`.
fn token(pids: &[String]) -> Value {
    let mut needle = String::new();
    let _ = std::io::stdin().read_to_string(&mut needle);
    let needle = needle.trim().as_bytes().to_vec();
    if needle.len() < 8 {
        return json!({"error": "the token on stdin is too short to search for"});
    }
    let contains = |hay: &[u8]| hay.windows(needle.len()).any(|w| w == needle.as_slice());
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    if std::env::vars_os().any(|(k, v)| contains(k.as_bytes()) || contains(v.as_bytes())) {
        found.push("own environment".to_owned());
    }
    if let Ok(procs) = std::fs::read_dir("/proc") {
        for p in procs.flatten() {
            let pid = p.file_name().to_string_lossy().into_owned();
            if pid == me || !pid.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            for file in ["environ", "cmdline"] {
                if std::fs::read(p.path().join(file)).is_ok_and(|b| contains(&b)) {
                    found.push(format!("/proc/{pid}/{file}"));
                }
            }
        }
    }
    let mut access = Map::new();
    for pid in pids {
        access.insert(
            format!("{pid}/environ"),
            io_outcome(std::fs::read(format!("/proc/{pid}/environ"))),
        );
        access.insert(
            format!("{pid}/mem"),
            io_outcome(std::fs::File::open(format!("/proc/{pid}/mem"))),
        );
    }
    json!({"found": found, "access": access})
}

/// What this process may do to process `pid`: signal it, attach to it.
fn processes(pid: &str) -> Value {
    let pid: i32 = pid.parse().unwrap_or(0);
    let mut r = Map::new();
    // SAFETY: signal 0 only checks permission; it delivers nothing.
    r.insert(
        "kill0".into(),
        outcome(i64::from(unsafe { libc::kill(pid, 0) })),
    );
    // SAFETY: PTRACE_ATTACH takes a pid and no memory; on success we detach
    // at once so the target is not left stopped.
    let attached = unsafe { libc::ptrace(libc::PTRACE_ATTACH, pid, 0usize, 0usize) };
    r.insert("ptrace_attach".into(), outcome(attached));
    if attached == 0 {
        // SAFETY: detaches the tracee we just attached.
        unsafe { libc::ptrace(libc::PTRACE_DETACH, pid, 0usize, 0usize) };
    }
    Value::Object(r)
}

/// Runs `program` with Landlock made unavailable by a seccomp filter (its
/// calls fail with ENOSYS, as on a kernel without it): the suite's seam for
/// "Landlock cannot be enforced here". Only returns if the exec fails.
fn without_landlock(program: &str, args: &[String]) -> Value {
    const LD_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
    let insn = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let mut filter = [
        insn(LD_ABS, 0, 0, 0),
        insn(JEQ, 3, 0, libc::SYS_landlock_create_ruleset as u32),
        insn(JEQ, 2, 0, libc::SYS_landlock_add_rule as u32),
        insn(JEQ, 1, 0, libc::SYS_landlock_restrict_self as u32),
        insn(RET, 0, 0, libc::SECCOMP_RET_ALLOW),
        insn(RET, 0, 0, enosys),
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_mut_ptr(),
    };
    // SAFETY: the kernel copies the filter from `prog`, which points at
    // `filter`, both alive for the call; it keeps no pointer.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &prog as *const libc::sock_fprog,
        )
    };
    if rc != 0 {
        return json!({"error": format!("cannot load the filter: {}", std::io::Error::last_os_error())});
    }
    let err = std::process::Command::new(program).args(args).exec();
    json!({"error": format!("cannot exec {program}: {err}")})
}
