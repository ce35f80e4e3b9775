//! The seccomp filter the broker puts on itself after dropping privileges.
//!
//! Security meaning: the broker faces the network, so it is the process an
//! attacker is most likely to take over. It never needs to run a program or
//! look into another process, so it gives up `execve`/`execveat` (no shell,
//! no helper binary, no setuid trick), `ptrace` and `process_vm_readv`/
//! `process_vm_writev` (no reading or steering a process it could reach).
//! The filter is synchronised to every thread (`TSYNC`), which also sets
//! `no_new_privs` on each of them.
#![forbid(unsafe_code)]

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, SeccompRule, TargetArch};
use std::collections::BTreeMap;

/// The syscalls the broker denies itself, with `EPERM`.
pub const DENIED: &[(&str, i64)] = &[
    ("execve", libc::SYS_execve),
    ("execveat", libc::SYS_execveat),
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
];

/// Compiles the filter for the architecture we run on.
pub fn compile() -> Result<BpfProgram, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|(_, nr)| (*nr, Vec::new())).collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    BpfProgram::try_from(filter).map_err(|e| e.to_string())
}

/// Applies the filter to every thread of this process.
pub fn apply() -> Result<(), String> {
    let program = compile()?;
    seccompiler::apply_filter_all_threads(&program).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Set in the child this test re-executes, which applies the filter to
    /// itself (the test process is never confined).
    const CHILD_ENV: &str = "IDE_BROKER_FILTER_CHILD";

    #[test]
    fn a_filtered_process_cannot_execute_programs() {
        if std::env::var_os(CHILD_ENV).is_some() {
            apply().unwrap();
            let err = Command::new("/bin/true").status().unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::EPERM));
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            assert!(status.lines().any(|l| l == "NoNewPrivs:\t1"), "{status}");
            assert!(status.lines().any(|l| l == "Seccomp:\t2"), "{status}");
            println!("FILTERED-CHILD-OK");
            return;
        }
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "privilege::filter::tests::a_filtered_process_cannot_execute_programs",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("FILTERED-CHILD-OK"),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(Command::new("/bin/true").status().unwrap().success());
    }

    #[test]
    fn every_denied_call_is_in_the_program() {
        let program = compile().unwrap();
        for (name, nr) in DENIED {
            assert!(
                program.iter().any(|i| i.k == *nr as u32),
                "{name} is not compared anywhere"
            );
        }
    }
}
