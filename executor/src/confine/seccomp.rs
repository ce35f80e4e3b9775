//! The seccomp baseline every spawned command runs under, confined or not.
//!
//! Security meaning: default allow (agents run compilers, interpreters and
//! git), with a narrow deny list of calls no agent command needs and that
//! either attack the host directly or step around the other layers:
//! terminal injection (`TIOCSTI`/`TIOCLINUX`), the mount family, kernel
//! modules, kexec, reboot and swap, `bpf`, `perf_event_open`, `userfaultfd`,
//! the kernel keyring, file handles (which open files by inode, past every
//! path check), `io_uring` (whose operations bypass syscall filters),
//! `setns`, and creating user namespaces (the usual first step of a kernel
//! exploit, and a way to regain capabilities inside one). A confined command
//! also may not set the set-uid or set-gid bit (Landlock does not cover mode
//! changes). Denied calls fail
//! with `EPERM`. `ioctl` requests are compared as 32-bit words, because the
//! kernel ignores the high half and a 64-bit compare is bypassed by setting
//! it (CVE-2019-10063). A small guard filter kills any other architecture's
//! syscall ABI (i386 through `int 0x80`), refuses x32 numbers, and makes
//! `clone3` fail with `ENOSYS` (its flags live in memory a filter cannot
//! read) so libc falls back to `clone`, whose flags are checked.
//!
//! The programs are compiled once, at start-up, and only referenced by the
//! child after the clone.
#![forbid(unsafe_code)]

use seccompiler::{
    sock_filter, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// When a listed syscall is denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Always.
    Always,
    /// When argument 1 (an `ioctl` request) equals this, as a 32-bit word.
    Request(u32),
    /// When argument `arg` (clone or unshare flags, a chmod mode) has
    /// `bit` set.
    Flag { arg: u8, bit: u32 },
}

/// One entry of the deny list.
#[derive(Debug, Clone, Copy)]
pub struct Denied {
    pub name: &'static str,
    pub nr: i64,
    pub when: When,
}

const fn always(name: &'static str, nr: i64) -> Denied {
    Denied {
        name,
        nr,
        when: When::Always,
    }
}

/// The deny list of every spawned command (documented in SECURITY.md).
pub const BASELINE: &[Denied] = &[
    Denied {
        name: "ioctl(TIOCSTI)",
        nr: libc::SYS_ioctl,
        when: When::Request(libc::TIOCSTI as u32),
    },
    Denied {
        name: "ioctl(TIOCLINUX)",
        nr: libc::SYS_ioctl,
        when: When::Request(libc::TIOCLINUX as u32),
    },
    always("mount", libc::SYS_mount),
    always("umount2", libc::SYS_umount2),
    always("pivot_root", libc::SYS_pivot_root),
    always("move_mount", libc::SYS_move_mount),
    always("open_tree", libc::SYS_open_tree),
    always("fsopen", libc::SYS_fsopen),
    always("fsconfig", libc::SYS_fsconfig),
    always("fsmount", libc::SYS_fsmount),
    always("fspick", libc::SYS_fspick),
    always("mount_setattr", libc::SYS_mount_setattr),
    always("init_module", libc::SYS_init_module),
    always("finit_module", libc::SYS_finit_module),
    always("delete_module", libc::SYS_delete_module),
    always("kexec_load", libc::SYS_kexec_load),
    always("kexec_file_load", libc::SYS_kexec_file_load),
    always("reboot", libc::SYS_reboot),
    always("swapon", libc::SYS_swapon),
    always("swapoff", libc::SYS_swapoff),
    always("bpf", libc::SYS_bpf),
    always("perf_event_open", libc::SYS_perf_event_open),
    always("userfaultfd", libc::SYS_userfaultfd),
    always("keyctl", libc::SYS_keyctl),
    always("add_key", libc::SYS_add_key),
    always("request_key", libc::SYS_request_key),
    always("open_by_handle_at", libc::SYS_open_by_handle_at),
    always("name_to_handle_at", libc::SYS_name_to_handle_at),
    always("io_uring_setup", libc::SYS_io_uring_setup),
    always("io_uring_enter", libc::SYS_io_uring_enter),
    always("io_uring_register", libc::SYS_io_uring_register),
    always("setns", libc::SYS_setns),
    Denied {
        name: "unshare(CLONE_NEWUSER)",
        nr: libc::SYS_unshare,
        when: When::Flag {
            arg: 0,
            bit: libc::CLONE_NEWUSER as u32,
        },
    },
    Denied {
        name: "clone(CLONE_NEWUSER)",
        nr: libc::SYS_clone,
        when: When::Flag {
            arg: 0,
            bit: libc::CLONE_NEWUSER as u32,
        },
    },
];

const fn set_id(name: &'static str, nr: i64, arg: u8, bit: u32) -> Denied {
    Denied {
        name,
        nr,
        when: When::Flag { arg, bit },
    }
}

/// Added for a confined command: setting the set-user-ID or set-group-ID
/// bit. Landlock has no right for mode changes, so a confined root command
/// could otherwise plant a set-uid binary anywhere for other users to run.
pub const SET_ID_MODES: &[Denied] = &[
    #[cfg(target_arch = "x86_64")]
    set_id("chmod(S_ISUID)", libc::SYS_chmod, 1, libc::S_ISUID),
    #[cfg(target_arch = "x86_64")]
    set_id("chmod(S_ISGID)", libc::SYS_chmod, 1, libc::S_ISGID),
    set_id("fchmod(S_ISUID)", libc::SYS_fchmod, 1, libc::S_ISUID),
    set_id("fchmod(S_ISGID)", libc::SYS_fchmod, 1, libc::S_ISGID),
    set_id("fchmodat(S_ISUID)", libc::SYS_fchmodat, 2, libc::S_ISUID),
    set_id("fchmodat(S_ISGID)", libc::SYS_fchmodat, 2, libc::S_ISGID),
    set_id("fchmodat2(S_ISUID)", libc::SYS_fchmodat2, 2, libc::S_ISUID),
    set_id("fchmodat2(S_ISGID)", libc::SYS_fchmodat2, 2, libc::S_ISGID),
];

/// Added for a confined command as well when Landlock is older than ABI 3, which
/// cannot refuse `truncate(2)` outside the writable paths.
pub const TRUNCATE: Denied = always("truncate", libc::SYS_truncate);

/// The compiled programs. The kernel runs every filter a process has
/// stacked and the most severe verdict wins, so a confined command adds its
/// extra denials as one more small filter on top of the baseline.
#[derive(Debug, Clone)]
pub struct Programs {
    /// Architecture, x32 and `clone3` guard; loaded first.
    pub guard: BpfProgram,
    /// [`BASELINE`]: every command.
    pub baseline: BpfProgram,
    /// [`SET_ID_MODES`]: added for a confined command.
    pub set_id: BpfProgram,
    /// `set_id` plus [`TRUNCATE`], for Landlock before ABI 3.
    pub set_id_with_truncate: BpfProgram,
}

/// Compiles every program for the architecture we run on.
pub fn compile() -> Result<Programs, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let with_truncate: Vec<Denied> = SET_ID_MODES.iter().copied().chain([TRUNCATE]).collect();
    Ok(Programs {
        guard: guard(arch),
        baseline: deny_list(BASELINE, arch)?,
        set_id: deny_list(SET_ID_MODES, arch)?,
        set_id_with_truncate: deny_list(&with_truncate, arch)?,
    })
}

fn deny_list(denied: &[Denied], arch: TargetArch) -> Result<BpfProgram, String> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for d in denied {
        let condition = |arg: u8, op: SeccompCmpOp, value: u32| {
            SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, u64::from(value))
                .and_then(|c| SeccompRule::new(vec![c]))
                .map_err(|e| format!("{}: {e}", d.name))
        };
        let entry = rules.entry(d.nr).or_default();
        match d.when {
            When::Always => {}
            When::Request(request) => entry.push(condition(1, SeccompCmpOp::Eq, request)?),
            When::Flag { arg, bit } => {
                entry.push(condition(arg, SeccompCmpOp::MaskedEq(u64::from(bit)), bit)?)
            }
        }
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    BpfProgram::try_from(filter).map_err(|e| e.to_string())
}

const LD_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JGE: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
/// `offsetof(struct seccomp_data, nr)` and `arch`.
const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;
/// The syscall-number bit of the x32 ABI on x86_64.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

fn errno(e: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (e as u32 & libc::SECCOMP_RET_DATA)
}

/// `AUDIT_ARCH_*` of the native syscall ABI.
fn audit_arch(arch: TargetArch) -> u32 {
    const BITS64_LE: u32 = 0x8000_0000 | 0x4000_0000;
    match arch {
        TargetArch::x86_64 => 62 | BITS64_LE,
        TargetArch::aarch64 => 183 | BITS64_LE,
        TargetArch::riscv64 => 243 | BITS64_LE,
    }
}

/// The guard seccompiler cannot express: it checks only the audit arch.
fn guard(arch: TargetArch) -> BpfProgram {
    let mut program = vec![
        stmt(LD_ABS, ARCH_OFFSET),
        jump(JEQ, audit_arch(arch), 1, 0),
        stmt(RET, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(LD_ABS, NR_OFFSET),
    ];
    if arch == TargetArch::x86_64 {
        program.extend([
            jump(JGE, X32_SYSCALL_BIT, 0, 1),
            stmt(RET, errno(libc::EPERM)),
        ]);
    }
    program.extend([
        jump(JEQ, libc::SYS_clone3 as u32, 0, 1),
        stmt(RET, errno(libc::ENOSYS)),
        stmt(RET, libc::SECCOMP_RET_ALLOW),
    ]);
    program
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A classic-BPF interpreter for the instructions these programs use, so
    /// the deny table is checked call by call without loading anything.
    fn eval(program: &[sock_filter], arch: u32, nr: i64, args: [u64; 6]) -> u32 {
        let mut data = Vec::with_capacity(64);
        data.extend_from_slice(&(nr as u32).to_le_bytes());
        data.extend_from_slice(&arch.to_le_bytes());
        data.extend_from_slice(&0u64.to_le_bytes());
        for a in args {
            data.extend_from_slice(&a.to_le_bytes());
        }
        let (mut a, mut pc) = (0u32, 0usize);
        for _ in 0..program.len() {
            let i = &program[pc];
            pc += 1;
            match i.code {
                LD_ABS => {
                    let at = i.k as usize;
                    a = u32::from_le_bytes(data[at..at + 4].try_into().unwrap());
                }
                0x54 => a &= i.k,
                0x05 => pc += i.k as usize,
                JEQ | 0x25 | JGE | 0x45 => {
                    let taken = match i.code {
                        JEQ => a == i.k,
                        0x25 => a > i.k,
                        JGE => a >= i.k,
                        _ => a & i.k != 0,
                    };
                    pc += usize::from(if taken { i.jt } else { i.jf });
                }
                RET => return i.k,
                other => panic!("unexpected BPF opcode {other:#x}"),
            }
        }
        panic!("the program ran off its end");
    }

    /// Stacked filters, as the kernel combines them (the most severe wins).
    fn stacked(programs: &[&BpfProgram], arch: u32, nr: i64, args: [u64; 6]) -> u32 {
        let rank = |r: u32| match r & libc::SECCOMP_RET_ACTION_FULL {
            libc::SECCOMP_RET_KILL_PROCESS => 0,
            libc::SECCOMP_RET_ERRNO => 1,
            _ => 2,
        };
        programs
            .iter()
            .map(|p| eval(p, arch, nr, args))
            .min_by_key(|r| rank(*r))
            .unwrap()
    }

    /// What every command runs under.
    fn verdict(p: &Programs, arch: u32, nr: i64, args: [u64; 6]) -> u32 {
        stacked(&[&p.guard, &p.baseline], arch, nr, args)
    }

    /// What a confined command runs under.
    fn confined(p: &Programs, extra: &BpfProgram, nr: i64, args: [u64; 6]) -> u32 {
        stacked(&[&p.guard, &p.baseline, extra], native(), nr, args)
    }

    fn native() -> u32 {
        audit_arch(TargetArch::try_from(std::env::consts::ARCH).unwrap())
    }

    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;

    fn args(first: u64, second: u64) -> [u64; 6] {
        [first, second, 0, 0, 0, 0]
    }

    #[test]
    fn every_entry_of_the_deny_table_is_denied_with_eperm() {
        let p = compile().unwrap();
        for d in BASELINE {
            let a = match d.when {
                When::Always => args(0, 0),
                When::Request(r) => args(0, u64::from(r)),
                When::Flag { arg: 0, bit } => args(u64::from(bit) | 0x11, 0),
                When::Flag { .. } => unreachable!("the baseline checks flags in argument 0"),
            };
            assert_eq!(
                verdict(&p, native(), d.nr, a),
                errno(libc::EPERM),
                "{}",
                d.name
            );
        }
    }

    #[test]
    fn nearby_calls_still_work() {
        let p = compile().unwrap();
        for (name, nr, a) in [
            ("read", libc::SYS_read, args(0, 0)),
            ("openat", libc::SYS_openat, args(0, 0)),
            ("execve", libc::SYS_execve, args(0, 0)),
            ("ptrace", libc::SYS_ptrace, args(0, 0)),
            ("truncate", libc::SYS_truncate, args(0, 0)),
            (
                "ioctl(TCGETS)",
                libc::SYS_ioctl,
                args(0, u64::from(libc::TCGETS as u32)),
            ),
            (
                "ioctl(TIOCGWINSZ)",
                libc::SYS_ioctl,
                args(0, u64::from(libc::TIOCGWINSZ as u32)),
            ),
            (
                "clone(thread)",
                libc::SYS_clone,
                args((libc::CLONE_VM | libc::CLONE_THREAD) as u64, 0),
            ),
            (
                "unshare(CLONE_NEWNS)",
                libc::SYS_unshare,
                args(libc::CLONE_NEWNS as u64, 0),
            ),
        ] {
            assert_eq!(verdict(&p, native(), nr, a), ALLOW, "{name}");
        }
    }

    #[test]
    fn ioctl_requests_are_compared_as_32_bit_words() {
        let p = compile().unwrap();
        // Requests are 32-bit words; libc's type for them varies by target.
        for request in [libc::TIOCSTI as u32, libc::TIOCLINUX as u32].map(u64::from) {
            for high in [0u64, 1 << 32, 0xffff_ffff << 32] {
                assert_eq!(
                    verdict(&p, native(), libc::SYS_ioctl, args(0, request | high)),
                    errno(libc::EPERM),
                    "{request:#x} | {high:#x}"
                );
            }
        }
    }

    #[test]
    fn clone3_is_unavailable_so_libc_falls_back_to_clone() {
        let p = compile().unwrap();
        assert_eq!(
            verdict(&p, native(), libc::SYS_clone3, args(0, 0)),
            errno(libc::ENOSYS)
        );
    }

    #[test]
    fn a_foreign_architecture_is_killed() {
        let p = compile().unwrap();
        const AUDIT_ARCH_I386: u32 = 3 | 0x4000_0000;
        assert_eq!(
            verdict(&p, AUDIT_ARCH_I386, 21, args(0, 0)),
            libc::SECCOMP_RET_KILL_PROCESS
        );
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn x32_numbers_are_denied() {
        let p = compile().unwrap();
        let x32 = i64::from(X32_SYSCALL_BIT);
        for nr in [x32, x32 | libc::SYS_read, x32 | libc::SYS_mount] {
            assert_eq!(
                verdict(&p, native(), nr, args(0, 0)),
                errno(libc::EPERM),
                "{nr:#x}"
            );
        }
    }

    #[test]
    fn the_truncate_variant_adds_only_truncate() {
        let p = compile().unwrap();
        let run = |nr| confined(&p, &p.set_id_with_truncate, nr, args(0, 0));
        assert_eq!(run(libc::SYS_truncate), errno(libc::EPERM));
        assert_eq!(run(libc::SYS_mount), errno(libc::EPERM));
        assert_eq!(run(libc::SYS_ftruncate), ALLOW);
        assert_eq!(run(libc::SYS_write), ALLOW);
        assert_eq!(
            confined(&p, &p.set_id, libc::SYS_truncate, args(0, 0)),
            ALLOW
        );
    }

    #[test]
    fn a_confined_command_cannot_set_the_set_id_bits_but_may_chmod() {
        let p = compile().unwrap();
        let mode_at = |nr: i64, arg: usize, mode: u32| {
            let mut a = [0u64; 6];
            a[arg] = u64::from(mode);
            (confined(&p, &p.set_id, nr, a), verdict(&p, native(), nr, a))
        };
        for (nr, arg) in [
            (libc::SYS_fchmod, 1),
            (libc::SYS_fchmodat, 2),
            (libc::SYS_fchmodat2, 2),
        ] {
            for mode in [0o4755, 0o2755, 0o6777, 0o104755] {
                assert_eq!(
                    mode_at(nr, arg, mode),
                    (errno(libc::EPERM), ALLOW),
                    "{nr} {mode:o}"
                );
            }
            for mode in [0o755, 0o1777, 0o644] {
                assert_eq!(mode_at(nr, arg, mode), (ALLOW, ALLOW), "{nr} {mode:o}");
            }
        }
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            mode_at(libc::SYS_chmod, 1, 0o4755),
            (errno(libc::EPERM), ALLOW)
        );
    }
}
