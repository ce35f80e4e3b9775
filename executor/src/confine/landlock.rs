//! Landlock write confinement of one command, prepared in the executor and
//! enforced in the child.
//!
//! Security meaning: the ruleset handles every write-class right this kernel
//! knows (make, remove, write, refer, truncate, device ioctl) and grants them
//! only beneath the writable paths the broker sent plus `/dev/null`,
//! `/dev/zero` and `/dev/tty`; reads stay unhandled (the spec keeps reads
//! open). On ABI 6 and later the signal and abstract-socket scopes are
//! added, so a confined command cannot signal the executor or the broker nor
//! reach an abstract socket outside its domain. Landlock also refuses ptrace
//! and `/proc/<pid>/mem` of any process outside the domain (not
//! `/proc/<pid>/environ`: no secret may live in an environment). The
//! ruleset is built here, before the spawn, into an fd the child only has to
//! pass to `landlock_restrict_self`; a kernel without Landlock means
//! [`ErrorKind::Unconfinable`] and nothing runs (fail closed).
//! Connecting to a path Unix socket (ABI 9's `ResolveUnix`) is left
//! unhandled: it is not a write, and tools such as ssh-agent need it.
#![forbid(unsafe_code)]

use ide_proto::{ErrorKind, ExecutorError};
use landlock::{
    path_beneath_rules, Access, AccessFs, BitFlags, Ruleset, RulesetAttr, RulesetCreatedAttr,
    Scope, ABI,
};
use rustix::fd::OwnedFd;

/// The newest ABI whose write-class rights we handle (see the module docs
/// for why ABI 9's `ResolveUnix` is left out).
const NEWEST_HANDLED: ABI = ABI::V8;

/// The ABI that brought the signal and abstract-socket scopes.
const SCOPES_SINCE: i32 = 6;

/// Device files every confined command may write (its own stdio redirections
/// and terminal).
pub const ALWAYS_WRITABLE: &[&str] = &["/dev/null", "/dev/zero", "/dev/tty"];

/// The write-class rights Landlock can enforce at kernel ABI `abi`.
pub fn write_rights(abi: i32) -> BitFlags<AccessFs> {
    AccessFs::from_write(ABI::from(abi).min(NEWEST_HANDLED))
}

/// Why [`prepare`] refused.
pub fn unconfinable(why: impl std::fmt::Display) -> ExecutorError {
    ExecutorError::new(
        ErrorKind::Unconfinable,
        format!(
            "write confinement (Landlock) cannot be enforced on this host: {why}; the command did not run"
        ),
    )
}

/// Builds the ruleset of a command that may write only beneath `writable`
/// (absolute paths; missing ones are skipped), on a kernel at Landlock ABI
/// `abi` (as probed; `<= 0` means no Landlock).
pub fn prepare(abi: i32, writable: &[String]) -> Result<OwnedFd, ExecutorError> {
    if abi <= 0 {
        return Err(unconfinable("the kernel has no Landlock"));
    }
    if let Some(bad) = writable
        .iter()
        .find(|p| !p.starts_with('/') || p.contains('\0'))
    {
        return Err(ExecutorError::new(
            ErrorKind::Invalid,
            format!("writable path {bad:?} is not absolute"),
        ));
    }
    let rights = write_rights(abi);
    let paths = writable
        .iter()
        .map(String::as_str)
        .chain(ALWAYS_WRITABLE.iter().copied());
    let scopes = if abi >= SCOPES_SINCE {
        Scope::from_all(ABI::V6)
    } else {
        BitFlags::empty()
    };
    let created = Ruleset::default()
        .handle_access(rights)
        .and_then(|r| {
            if scopes.is_empty() {
                Ok(r)
            } else {
                r.scope(scopes)
            }
        })
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(path_beneath_rules(paths, rights)))
        .map_err(unconfinable)?;
    Option::<OwnedFd>::from(created)
        .ok_or_else(|| unconfinable("the kernel did not create a ruleset"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_landlock_means_unconfinable() {
        for abi in [0, -1] {
            let err = prepare(abi, &["/tmp".into()]).unwrap_err();
            assert_eq!(err.kind, ErrorKind::Unconfinable);
            assert!(err.message.contains("did not run"), "{}", err.message);
        }
    }

    #[test]
    fn relative_writable_paths_are_invalid() {
        let err = prepare(1, &["tmp".into()]).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Invalid);
    }

    #[test]
    fn rights_grow_with_the_abi_and_stop_before_resolve_unix() {
        assert!(!write_rights(1).contains(AccessFs::Refer));
        assert!(write_rights(2).contains(AccessFs::Refer));
        assert!(!write_rights(2).contains(AccessFs::Truncate));
        assert!(write_rights(3).contains(AccessFs::Truncate));
        assert!(write_rights(5).contains(AccessFs::IoctlDev));
        for abi in [1, 7, 9, 99] {
            let rights = write_rights(abi);
            assert!(!rights.contains(AccessFs::ReadFile), "{abi}");
            assert!(!rights.contains(AccessFs::Execute), "{abi}");
            assert!(!rights.contains(AccessFs::ResolveUnix), "{abi}");
            assert!(rights.contains(AccessFs::WriteFile | AccessFs::MakeReg));
        }
    }
}
