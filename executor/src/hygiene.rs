//! Process hygiene at the top of `main` (confinement-notes §3).
//!
//! Security meaning: a non-dumpable process with no core limit cannot have
//! its memory read through `/proc/<pid>/mem`, ptrace by another uid or a core
//! file; marking every inherited fd above stdio close-on-exec means nothing
//! our parent leaked to us can reach a command we spawn.
#![forbid(unsafe_code)]

use crate::sys;
use rustix::process::{setrlimit, DumpableBehavior, Resource, Rlimit};
use std::io;

/// Applies the start-up hardening; run before any thread or fd is created.
pub fn harden_process() -> io::Result<()> {
    rustix::process::set_dumpable_behavior(DumpableBehavior::NotDumpable)?;
    setrlimit(
        Resource::Core,
        Rlimit {
            current: Some(0),
            maximum: Some(0),
        },
    )?;
    sys::mark_cloexec_from(3)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::io::{fcntl_getfd, fcntl_setfd, FdFlags};

    #[test]
    fn hardening_sticks() {
        let inherited: Vec<std::fs::File> =
            (0..100).map(|_| tempfile::tempfile().unwrap()).collect();
        for f in &inherited {
            fcntl_setfd(f, FdFlags::empty()).unwrap();
        }
        harden_process().unwrap();
        assert_eq!(
            rustix::process::dumpable_behavior().unwrap(),
            DumpableBehavior::NotDumpable
        );
        let core = rustix::process::getrlimit(Resource::Core);
        assert_eq!((core.current, core.maximum), (Some(0), Some(0)));
        for f in &inherited {
            assert!(fcntl_getfd(f).unwrap().contains(FdFlags::CLOEXEC));
        }
    }
}
