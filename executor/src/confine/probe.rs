//! `ide-executor --probe`: what this host can enforce, as one JSON object on
//! stdout, for `ide doctor` and `shell::config-status`.
//!
//! Security meaning: the broker never probes the host itself; it runs this
//! binary. Each fact is established by doing the thing where that is cheap
//! (creating a Landlock ruleset, a cgroup leaf, a user namespace, loading the
//! seccomp baseline) rather than by reading version numbers. The probe
//! restricts its own process while doing so, so it runs single-threaded and
//! exits right after printing.
#![forbid(unsafe_code)]

use super::{cgroup, landlock, seccomp};
use crate::sys;
use ide_proto::probe::{CgroupFacts, HostFacts, LandlockFacts, SeccompFacts};
use rustix::fs::{Mode, OFlags, ResolveFlags, CWD};
use rustix::io::Errno;
use std::os::unix::fs::FileTypeExt;

/// Gathers the facts; the last step loads the seccomp baseline into this
/// process, so call it only in a process that exits afterwards.
pub fn collect() -> HostFacts {
    let uname = rustix::system::uname();
    let euid = rustix::process::geteuid().as_raw();
    let landlock = landlock_facts();
    let openat2 = openat2_works();
    let hierarchy = cgroup::Hierarchy::detect();
    let kvm = std::fs::metadata("/dev/kvm").is_ok_and(|m| m.file_type().is_char_device());
    // Inside the new namespace our ids read as the overflow id, and the
    // seccomp baseline forbids creating one: this order matters.
    let user_namespaces = sys::unshare_user_namespace().is_ok();
    let seccomp = seccomp_facts();
    HostFacts {
        executor_version: env!("CARGO_PKG_VERSION").to_owned(),
        kernel: uname.release().to_string_lossy().into_owned(),
        arch: std::env::consts::ARCH.to_owned(),
        euid,
        landlock,
        seccomp,
        openat2,
        cgroup: CgroupFacts {
            v2: cgroup::v2_mounted(),
            kill: hierarchy.is_some(),
            dir: hierarchy.map(|h| h.dir().display().to_string()),
        },
        user_namespaces,
        kvm,
    }
}

/// Prints the facts as one line of JSON.
pub fn print() -> Result<(), String> {
    let json = serde_json::to_string(&collect()).map_err(|e| e.to_string())?;
    println!("{json}");
    Ok(())
}

fn landlock_facts() -> LandlockFacts {
    let (status, abi) = match sys::landlock_abi() {
        Ok(abi) => ("available", abi),
        Err(Errno::OPNOTSUPP) => ("not_enabled", 0),
        Err(_) => ("not_implemented", 0),
    };
    let rights = if abi > 0 {
        landlock::write_rights(abi)
            .iter()
            .map(|r| snake_case(&format!("{r:?}")))
            .collect()
    } else {
        Vec::new()
    };
    let scopes = if abi >= 6 {
        vec!["abstract_unix_socket".to_owned(), "signal".to_owned()]
    } else {
        Vec::new()
    };
    LandlockFacts {
        status: status.to_owned(),
        abi,
        errata: sys::landlock_errata().ok(),
        write_rights: rights,
        scopes,
        ruleset_created: landlock::prepare(abi, &[]).is_ok(),
    }
}

fn openat2_works() -> bool {
    rustix::fs::openat2(
        CWD,
        ".",
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    )
    .is_ok()
}

fn seccomp_facts() -> SeccompFacts {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let available = status.lines().any(|l| l.starts_with("Seccomp:"));
    let loaded = seccomp::compile().is_ok_and(|p| {
        rustix::thread::set_no_new_privs(true).is_ok()
            && sys::load_seccomp(&p.guard).is_ok()
            && sys::load_seccomp(&p.baseline).is_ok()
    });
    let mode = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    SeccompFacts {
        available,
        filter_loaded: loaded && mode.lines().any(|l| l == "Seccomp:\t2"),
        denied: seccomp::BASELINE
            .iter()
            .map(|d| d.name.to_owned())
            .collect(),
    }
}

/// `WriteFile` → `write_file`.
fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn right_names_are_snake_case() {
        assert_eq!(snake_case("WriteFile"), "write_file");
        assert_eq!(snake_case("IoctlDev"), "ioctl_dev");
        assert_eq!(snake_case("Refer"), "refer");
    }

    #[test]
    fn landlock_facts_agree_with_the_kernel() {
        let facts = landlock_facts();
        match sys::landlock_abi() {
            Ok(abi) => {
                assert_eq!((facts.status.as_str(), facts.abi), ("available", abi));
                assert!(facts.ruleset_created);
                assert!(facts.write_rights.contains(&"write_file".to_owned()));
                assert!(!facts.write_rights.contains(&"read_file".to_owned()));
            }
            Err(_) => {
                assert_eq!(facts.abi, 0);
                assert!(!facts.ruleset_created);
                assert!(facts.write_rights.is_empty());
            }
        }
    }
}
