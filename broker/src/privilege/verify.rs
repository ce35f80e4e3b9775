//! Proof that a privilege drop took, read back from the kernel for every
//! thread.
//!
//! Security meaning: credentials, capabilities and `no_new_privs` are
//! per-thread in Linux, and the broker drops them while its runtime threads
//! already run. So the check does not trust the calls that made the change:
//! it reads `/proc/self/task/*/status` and requires, on every thread, the
//! target uid and gid in all four slots, no supplementary groups, empty
//! inheritable/permitted/effective/ambient capability sets, `NoNewPrivs: 1`
//! and a seccomp filter. Any thread that differs fails the boot.
#![forbid(unsafe_code)]

/// What every thread must show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expected {
    pub uid: u32,
    pub gid: u32,
}

/// Checks one thread's `status` text; the error names the first mismatch.
pub fn check_status(status: &str, expected: Expected) -> Result<(), String> {
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix(':')))
            .map(str::trim)
            .ok_or_else(|| format!("no {key} line"))
    };
    let ids = |key: &str, want: u32| -> Result<(), String> {
        let got: Vec<&str> = field(key)?.split_whitespace().collect();
        let want = want.to_string();
        if got.len() == 4 && got.iter().all(|id| *id == want) {
            Ok(())
        } else {
            Err(format!(
                "{key} is {got:?}, expected {want} in all four slots"
            ))
        }
    };
    ids("Uid", expected.uid)?;
    ids("Gid", expected.gid)?;
    if !field("Groups")?.is_empty() {
        return Err(format!("supplementary groups remain: {}", field("Groups")?));
    }
    for key in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
        let mask = field(key)?;
        if u64::from_str_radix(mask, 16) != Ok(0) {
            return Err(format!("{key} is {mask}, expected no capabilities"));
        }
    }
    if field("NoNewPrivs")? != "1" {
        return Err("no_new_privs is not set".into());
    }
    if field("Seccomp")? != "2" {
        return Err("no seccomp filter is loaded".into());
    }
    Ok(())
}

/// Checks every thread of this process.
pub fn all_threads(expected: Expected) -> Result<(), String> {
    let tasks =
        std::fs::read_dir("/proc/self/task").map_err(|e| format!("/proc/self/task: {e}"))?;
    let mut seen = 0;
    for task in tasks {
        let task = task.map_err(|e| format!("/proc/self/task: {e}"))?;
        let status = match std::fs::read_to_string(task.path().join("status")) {
            Ok(s) => s,
            // The thread exited while we looked.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("thread {:?}: {e}", task.file_name())),
        };
        check_status(&status, expected)
            .map_err(|e| format!("thread {}: {e}", task.file_name().to_string_lossy()))?;
        seen += 1;
    }
    if seen == 0 {
        return Err("no thread could be checked".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DROPPED: &str = "Name:\tide\nUid:\t65534\t65534\t65534\t65534\nGid:\t65534\t65534\t65534\t65534\nGroups:\t\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n";

    const NOBODY: Expected = Expected {
        uid: 65534,
        gid: 65534,
    };

    #[test]
    fn a_fully_dropped_thread_passes() {
        check_status(DROPPED, NOBODY).unwrap();
    }

    #[test]
    fn any_leftover_privilege_fails() {
        for (from, to, why) in [
            (
                "Uid:\t65534\t65534\t65534\t65534",
                "Uid:\t65534\t65534\t0\t65534",
                "Uid",
            ),
            (
                "Gid:\t65534\t65534\t65534\t65534",
                "Gid:\t0\t65534\t65534\t65534",
                "Gid",
            ),
            ("Groups:\t", "Groups:\t0", "groups"),
            (
                "CapEff:\t0000000000000000",
                "CapEff:\t0000000000200000",
                "CapEff",
            ),
            (
                "CapPrm:\t0000000000000000",
                "CapPrm:\t000001ffffffffff",
                "CapPrm",
            ),
            (
                "CapAmb:\t0000000000000000",
                "CapAmb:\t0000000000000001",
                "CapAmb",
            ),
            ("NoNewPrivs:\t1", "NoNewPrivs:\t0", "no_new_privs"),
            ("Seccomp:\t2", "Seccomp:\t0", "seccomp"),
        ] {
            let status = DROPPED.replace(from, to);
            let err = check_status(&status, NOBODY).unwrap_err();
            assert!(err.contains(why), "{why}: {err}");
        }
    }

    #[test]
    fn a_missing_line_fails_rather_than_passes() {
        let status = DROPPED.replace("NoNewPrivs:\t1\n", "");
        assert!(check_status(&status, NOBODY).is_err());
    }

    #[test]
    fn the_test_process_is_not_mistaken_for_a_dropped_one() {
        assert!(all_threads(NOBODY).is_err());
    }
}
