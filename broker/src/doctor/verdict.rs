//! Whether this host can run the worker as configured.
//!
//! Security meaning: a configuration that asks for confinement the host
//! cannot give would fail closed at every scoped exec (S222); a host that
//! cannot load the seccomp baseline cannot run any command. The doctor says
//! so before an agent finds out.
#![forbid(unsafe_code)]

use super::facts::HostFacts;
use crate::config::{Config, ExecConfinement};
use serde::Serialize;

/// The problems (the worker cannot run as configured) and warnings (it runs,
/// with less than the best protection) found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub problems: Vec<String>,
    pub warnings: Vec<String>,
}

impl Verdict {
    /// True when nothing stops the worker from running as configured.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Judges `facts` against `config` (a config that did not parse is itself a
/// problem) and the broker's privilege plan.
pub fn judge(
    facts: &HostFacts,
    config: Result<&Config, &str>,
    drop_plan: Result<Option<String>, String>,
) -> Verdict {
    let mut v = Verdict::default();
    if !facts.seccomp.filter_loaded {
        v.problems.push(
            "the seccomp baseline every command runs under cannot be loaded here: shell::exec would fail"
                .into(),
        );
    }
    match config {
        Err(e) => v.problems.push(format!("the configuration does not parse: {e}")),
        Ok(config) => match config.fs.exec_confinement {
            ExecConfinement::Landlock if !facts.landlock.ruleset_created => v.problems.push(format!(
                "fs.exec_confinement is landlock but Landlock is {} here: every scoped exec would fail with S222 (set fs.exec_confinement: off to run them unconfined)",
                facts.landlock.status.replace('_', " ")
            )),
            ExecConfinement::Landlock if facts.landlock.abi < 3 => v.warnings.push(
                "Landlock is older than ABI 3: truncate(2) outside the writable paths is refused by seccomp instead".into(),
            ),
            ExecConfinement::Landlock => {}
            ExecConfinement::Off => v.warnings.push(
                "fs.exec_confinement is off: scoped execs may write anywhere the executor's user can".into(),
            ),
        },
    }
    if let Err(e) = drop_plan {
        v.problems.push(format!("the broker cannot drop root: {e}"));
    }
    if facts.landlock.abi > 0 && facts.landlock.abi < 6 {
        v.warnings.push(
            "Landlock is older than ABI 6: a confined command may still signal processes and reach abstract sockets outside its domain".into(),
        );
    }
    if !facts.cgroup.kill {
        v.warnings.push(
            "no cgroup v2 with cgroup.kill: a killed command's escaped descendants are found by a subreaper sweep, which is coarser".into(),
        );
    }
    if !facts.openat2 {
        v.warnings
            .push("no openat2: paths resolve through the userspace fallback".into());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::facts::{parse, tests::FULL};

    fn facts() -> HostFacts {
        parse(FULL.as_bytes()).unwrap()
    }

    fn landlock() -> Config {
        let mut c = Config::default();
        c.fs.exec_confinement = ExecConfinement::Landlock;
        c
    }

    #[test]
    fn a_capable_host_runs_a_confined_config() {
        let v = judge(&facts(), Ok(&landlock()), Ok(Some("nobody".into())));
        assert!(v.ok(), "{v:?}");
        assert!(v.warnings.is_empty(), "{v:?}");
    }

    #[test]
    fn landlock_config_without_landlock_cannot_run() {
        let mut f = facts();
        f.landlock.status = "not_implemented".into();
        f.landlock.abi = 0;
        f.landlock.ruleset_created = false;
        let v = judge(&f, Ok(&landlock()), Ok(None));
        assert!(!v.ok());
        assert!(v.problems[0].contains("S222"), "{v:?}");
        assert!(judge(&f, Ok(&Config::default()), Ok(None)).ok());
    }

    #[test]
    fn no_seccomp_a_bad_config_or_no_broker_user_cannot_run() {
        let mut f = facts();
        f.seccomp.filter_loaded = false;
        assert!(!judge(&f, Ok(&Config::default()), Ok(None)).ok());
        assert!(!judge(&facts(), Err("bad key"), Ok(None)).ok());
        let v = judge(&facts(), Ok(&Config::default()), Err("no user x".into()));
        assert!(v.problems[0].contains("cannot drop root"), "{v:?}");
    }

    #[test]
    fn weaker_hosts_get_warnings_not_problems() {
        let mut f = facts();
        f.cgroup.kill = false;
        f.openat2 = false;
        f.landlock.abi = 2;
        let v = judge(&f, Ok(&landlock()), Ok(None));
        assert!(v.ok());
        assert_eq!(v.warnings.len(), 4, "{v:?}");
    }
}
