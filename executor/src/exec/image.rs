//! The program image of one command: `argv`, `envp` and the `PATH` search,
//! laid out by the parent before the spawn.
//!
//! Security meaning: the child shares the executor's memory until it execs
//! ([`crate::sys::spawn_image`]), so it must not allocate; everything it
//! reads is built here first. The `PATH` search follows `execvp`: the
//! command's own `PATH` (or `/bin:/usr/bin` without one), an empty entry
//! meaning the cwd, a name with a `/` used as given.
#![forbid(unsafe_code)]

use crate::confine::sequence::ChildPlan;
use crate::sys::ExecImage;
use rustix::fd::RawFd;
use std::collections::BTreeMap;
use std::ffi::{c_char, CStr, CString, OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;

/// `execvp`'s search path when the environment has no `PATH`.
const DEFAULT_PATH: &[u8] = b"/bin:/usr/bin";

/// The interpreter of a file the kernel will not execute itself.
const SCRIPT_SHELL: &CStr = c"/bin/sh";

/// A command's argv, environment and candidate paths as C strings.
#[derive(Debug)]
pub struct Image {
    candidates: Vec<CString>,
    argv: Vec<CString>,
    envp: Vec<CString>,
}

impl Image {
    /// Lays out `argv` (non-empty) run with `env`. A NUL byte anywhere is
    /// `InvalidInput`, as with std's `Command`.
    pub fn new(argv: &[String], env: &BTreeMap<OsString, OsString>) -> io::Result<Image> {
        let program = argv
            .first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty command"))?;
        let argv = argv
            .iter()
            .map(|a| c_string(a.as_bytes()))
            .collect::<io::Result<Vec<_>>>()?;
        let envp = env
            .iter()
            .map(|(k, v)| {
                let mut pair = Vec::with_capacity(k.len() + v.len() + 1);
                pair.extend_from_slice(k.as_bytes());
                pair.push(b'=');
                pair.extend_from_slice(v.as_bytes());
                c_string(&pair)
            })
            .collect::<io::Result<Vec<_>>>()?;
        let path = env.get(OsStr::new("PATH")).map(|p| p.as_bytes());
        let candidates = candidates(program.as_bytes(), path.unwrap_or(DEFAULT_PATH))?;
        Ok(Image {
            candidates,
            argv,
            envp,
        })
    }

    /// Calls `spawn` with the raw view the child reads; the pointers are
    /// valid for exactly that call.
    pub fn with_raw<R>(
        &self,
        stdio: [RawFd; 3],
        plan: ChildPlan,
        spawn: impl FnOnce(&mut ExecImage<'_>) -> R,
    ) -> R {
        let null = std::ptr::null::<c_char>();
        let argv: Vec<*const c_char> = self.argv.iter().map(|a| a.as_ptr()).chain([null]).collect();
        let mut script_argv: Vec<*const c_char> = [SCRIPT_SHELL.as_ptr(), null]
            .into_iter()
            .chain(self.argv.iter().skip(1).map(|a| a.as_ptr()))
            .chain([null])
            .collect();
        let envp: Vec<*const c_char> = self.envp.iter().map(|e| e.as_ptr()).chain([null]).collect();
        let candidates: Vec<&CStr> = self.candidates.iter().map(CString::as_c_str).collect();
        spawn(&mut ExecImage {
            candidates: &candidates,
            argv: &argv,
            script_argv: &mut script_argv,
            envp: &envp,
            stdio,
            plan,
        })
    }
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "nul byte found in provided data",
        )
    })
}

/// The paths `execvp` would try for `program`, in order.
fn candidates(program: &[u8], path: &[u8]) -> io::Result<Vec<CString>> {
    if program.contains(&b'/') {
        return Ok(vec![c_string(program)?]);
    }
    path.split(|b| *b == b':')
        .map(|dir| {
            if dir.is_empty() {
                return c_string(program);
            }
            let mut full = Vec::with_capacity(dir.len() + program.len() + 1);
            full.extend_from_slice(dir);
            if !dir.ends_with(b"/") {
                full.push(b'/');
            }
            full.extend_from_slice(program);
            c_string(&full)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[CString]) -> Vec<&str> {
        v.iter().map(|c| c.to_str().unwrap()).collect()
    }

    #[test]
    fn the_search_follows_path_in_order_and_an_empty_entry_is_the_cwd() {
        let c = candidates(b"ls", b"/usr/local/bin:/bin/::/usr/bin").unwrap();
        assert_eq!(
            strings(&c),
            ["/usr/local/bin/ls", "/bin/ls", "ls", "/usr/bin/ls"]
        );
    }

    #[test]
    fn a_name_with_a_slash_is_used_as_given() {
        assert_eq!(
            strings(&candidates(b"./run.sh", b"/bin").unwrap()),
            ["./run.sh"]
        );
        assert_eq!(
            strings(&candidates(b"/bin/true", b"/x").unwrap()),
            ["/bin/true"]
        );
    }

    #[test]
    fn without_path_the_default_search_path_is_used() {
        let image = Image::new(&["true".into()], &BTreeMap::new()).unwrap();
        assert_eq!(strings(&image.candidates), ["/bin/true", "/usr/bin/true"]);
    }

    #[test]
    fn nul_bytes_are_refused_wherever_they_are() {
        let env = |k: &str, v: &str| BTreeMap::from([(OsString::from(k), OsString::from(v))]);
        for (argv, env) in [
            (vec!["a\0b".to_owned()], BTreeMap::new()),
            (vec!["a".to_owned(), "x\0".to_owned()], BTreeMap::new()),
            (vec!["a".to_owned()], env("K", "v\0")),
            (vec!["a".to_owned()], env("PATH", "/bin\0:/x")),
        ] {
            let err = Image::new(&argv, &env).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{argv:?}");
        }
    }

    #[test]
    fn the_raw_view_is_null_terminated_and_the_script_argv_keeps_the_arguments() {
        let env = BTreeMap::from([(OsString::from("A"), OsString::from("1"))]);
        let image = Image::new(&["prog".into(), "x".into(), "y".into()], &env).unwrap();
        let plan = ChildPlan {
            parent: rustix::process::getpid(),
            cgroup_procs: None,
            cwd: None,
            drop_capabilities: false,
            no_new_privs: false,
            landlock: None,
            seccomp: [&[], &[], &[]],
        };
        image.with_raw([0, 1, 2], plan, |raw| {
            assert_eq!(raw.argv.len(), 4);
            assert!(raw.argv[3].is_null());
            assert_eq!(raw.envp.len(), 2);
            assert!(raw.envp[1].is_null());
            assert_eq!(raw.script_argv.len(), 5);
            assert_eq!(raw.script_argv[0], SCRIPT_SHELL.as_ptr());
            assert!(raw.script_argv[1].is_null(), "filled in by the child");
            assert_eq!(raw.script_argv[2], raw.argv[1]);
            assert!(raw.script_argv[4].is_null());
        });
    }
}
