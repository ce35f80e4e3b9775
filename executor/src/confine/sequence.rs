//! The child-side spawn sequence: what a command's process does between
//! `clone` and `exec`, in a fixed order.
//!
//! Security meaning: the order is the guarantee. The command first leaves our
//! session and ties its life to ours, joins its own cgroup before it can fork,
//! enters the jailed cwd by fd, loses dangerous capabilities, and marks every
//! inherited fd close-on-exec. Only then is it locked down: `no_new_privs`
//! (so no setuid binary or file capability can undo what follows), Landlock,
//! and seccomp last, so the filter never has to allow the setup calls before
//! it (bubblewrap, nsjail and youki use the same order). The seccomp baseline
//! denies none of those setup calls, which is why an executor that already
//! runs under it may let its commands inherit it instead of loading it again
//! ([`crate::confine::Settings::filter_self`]). Every step runs in a child
//! that shares a multi-threaded process's memory until it execs, so each is
//! one raw, async-signal-safe syscall behind [`ChildCalls`]; a recording
//! fake checks the order in unit tests without root.
#![forbid(unsafe_code)]

use rustix::fd::RawFd;
use rustix::io::Errno;
use rustix::process::Pid;
use seccompiler::sock_filter;

/// One step of the sequence. Its number travels back to the parent inside a
/// failed spawn's error, so the parent can tell a confinement failure (S222)
/// from an ordinary spawn failure (S216).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Step {
    NewSession = 1,
    DeathSignal = 2,
    ParentAlive = 3,
    JoinCgroup = 4,
    Limits = 5,
    EnterCwd = 6,
    DropCapabilities = 7,
    CloseOnExec = 8,
    NoNewPrivs = 9,
    Landlock = 10,
    Seccomp = 11,
}

impl Step {
    const ALL: [Step; 11] = [
        Step::NewSession,
        Step::DeathSignal,
        Step::ParentAlive,
        Step::JoinCgroup,
        Step::Limits,
        Step::EnterCwd,
        Step::DropCapabilities,
        Step::CloseOnExec,
        Step::NoNewPrivs,
        Step::Landlock,
        Step::Seccomp,
    ];

    /// True for the steps that make a command confined: if one fails, the
    /// confinement could not be enforced.
    pub fn confines(self) -> bool {
        matches!(self, Step::NoNewPrivs | Step::Landlock | Step::Seccomp)
    }

    /// What the step does, for error messages.
    pub fn describe(self) -> &'static str {
        match self {
            Step::NewSession => "setsid",
            Step::DeathSignal => "PR_SET_PDEATHSIG",
            Step::ParentAlive => "the executor exited during the spawn",
            Step::JoinCgroup => "joining the command's cgroup",
            Step::Limits => "setrlimit",
            Step::EnterCwd => "fchdir into the cwd",
            Step::DropCapabilities => "dropping capabilities",
            Step::CloseOnExec => "close_range(CLOSE_RANGE_CLOEXEC)",
            Step::NoNewPrivs => "PR_SET_NO_NEW_PRIVS",
            Step::Landlock => "landlock_restrict_self",
            Step::Seccomp => "loading the seccomp filter",
        }
    }
}

/// A failed step and the errno it failed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepError {
    pub step: Step,
    pub errno: Errno,
}

/// Errnos are below 4096, so the step fits above them in the one `i32` that
/// the child reports back to the spawn when it fails.
const STEP_SHIFT: u32 = 16;

impl StepError {
    /// The raw "os error" the child reports to std.
    pub fn encode(self) -> i32 {
        ((self.step as i32) << STEP_SHIFT) | (self.errno.raw_os_error() & 0xffff)
    }

    /// The step error inside a raw os error from `spawn`, if it carries one.
    pub fn decode(raw: i32) -> Option<StepError> {
        let number = raw >> STEP_SHIFT;
        let step = Step::ALL.into_iter().find(|s| *s as i32 == number)?;
        Some(StepError {
            step,
            errno: Errno::from_raw_os_error(raw & 0xffff),
        })
    }
}

/// The spawn-time syscalls. The real implementation is
/// [`crate::sys::RawChildCalls`]; every method must be async-signal-safe.
pub trait ChildCalls {
    fn new_session(&mut self) -> Result<(), Errno>;
    fn set_death_signal(&mut self) -> Result<(), Errno>;
    fn parent(&mut self) -> Option<Pid>;
    fn join_cgroup(&mut self, procs: RawFd) -> Result<(), Errno>;
    fn limit_core_dumps(&mut self) -> Result<(), Errno>;
    fn enter_dir(&mut self, dir: RawFd) -> Result<(), Errno>;
    fn drop_dangerous_capabilities(&mut self) -> Result<(), Errno>;
    fn mark_cloexec_above_stdio(&mut self) -> Result<(), Errno>;
    fn set_no_new_privs(&mut self) -> Result<(), Errno>;
    fn restrict_landlock(&mut self, ruleset: RawFd) -> Result<(), Errno>;
    fn load_seccomp(&mut self, program: &[sock_filter]) -> Result<(), Errno>;
}

/// Everything the child needs, prepared by the parent: plain numbers and
/// references to programs compiled at start-up, so the child allocates nothing.
#[derive(Debug, Clone, Copy)]
pub struct ChildPlan {
    /// The executor's pid, read before the spawn.
    pub parent: Pid,
    /// The command's `cgroup.procs`, opened for writing.
    pub cgroup_procs: Option<RawFd>,
    /// The jailed cwd (`O_PATH|O_DIRECTORY`).
    pub cwd: Option<RawFd>,
    pub drop_capabilities: bool,
    /// Required for Landlock, and for seccomp without `CAP_SYS_ADMIN`.
    pub no_new_privs: bool,
    /// The Landlock ruleset of a confined command.
    pub landlock: Option<RawFd>,
    /// Loaded in order; an empty program is skipped (the command inherits
    /// the executor's baseline, or needs no extra filter).
    pub seccomp: [&'static [sock_filter]; 3],
}

/// Runs the sequence; the first failing step stops it.
pub fn run(calls: &mut impl ChildCalls, plan: &ChildPlan) -> Result<(), StepError> {
    let at = |step: Step| move |errno: Errno| StepError { step, errno };
    calls.new_session().map_err(at(Step::NewSession))?;
    calls.set_death_signal().map_err(at(Step::DeathSignal))?;
    if calls.parent() != Some(plan.parent) {
        return Err(at(Step::ParentAlive)(Errno::SRCH));
    }
    if let Some(procs) = plan.cgroup_procs {
        calls.join_cgroup(procs).map_err(at(Step::JoinCgroup))?;
    }
    calls.limit_core_dumps().map_err(at(Step::Limits))?;
    if let Some(dir) = plan.cwd {
        calls.enter_dir(dir).map_err(at(Step::EnterCwd))?;
    }
    if plan.drop_capabilities {
        calls
            .drop_dangerous_capabilities()
            .map_err(at(Step::DropCapabilities))?;
    }
    calls
        .mark_cloexec_above_stdio()
        .map_err(at(Step::CloseOnExec))?;
    if plan.no_new_privs {
        calls.set_no_new_privs().map_err(at(Step::NoNewPrivs))?;
    }
    if let Some(ruleset) = plan.landlock {
        calls
            .restrict_landlock(ruleset)
            .map_err(at(Step::Landlock))?;
    }
    for program in plan.seccomp.into_iter().filter(|p| !p.is_empty()) {
        calls.load_seccomp(program).map_err(at(Step::Seccomp))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records every call by name; fails the one named in `fail`.
    #[derive(Default)]
    struct Recorder {
        calls: Vec<String>,
        fail: Option<&'static str>,
        parent: Option<Pid>,
    }

    impl Recorder {
        fn note(&mut self, call: String) -> Result<(), Errno> {
            let failed = self.fail.is_some_and(|f| call.starts_with(f));
            self.calls.push(call);
            if failed {
                Err(Errno::PERM)
            } else {
                Ok(())
            }
        }
    }

    impl ChildCalls for Recorder {
        fn new_session(&mut self) -> Result<(), Errno> {
            self.note("setsid".into())
        }
        fn set_death_signal(&mut self) -> Result<(), Errno> {
            self.note("pdeathsig".into())
        }
        fn parent(&mut self) -> Option<Pid> {
            self.calls.push("getppid".into());
            self.parent
        }
        fn join_cgroup(&mut self, procs: RawFd) -> Result<(), Errno> {
            self.note(format!("cgroup.procs:{procs}"))
        }
        fn limit_core_dumps(&mut self) -> Result<(), Errno> {
            self.note("rlimit".into())
        }
        fn enter_dir(&mut self, dir: RawFd) -> Result<(), Errno> {
            self.note(format!("fchdir:{dir}"))
        }
        fn drop_dangerous_capabilities(&mut self) -> Result<(), Errno> {
            self.note("capabilities".into())
        }
        fn mark_cloexec_above_stdio(&mut self) -> Result<(), Errno> {
            self.note("close_range".into())
        }
        fn set_no_new_privs(&mut self) -> Result<(), Errno> {
            self.note("no_new_privs".into())
        }
        fn restrict_landlock(&mut self, ruleset: RawFd) -> Result<(), Errno> {
            self.note(format!("landlock:{ruleset}"))
        }
        fn load_seccomp(&mut self, program: &[sock_filter]) -> Result<(), Errno> {
            self.note(format!("seccomp:{}", program.len()))
        }
    }

    static GUARD: [sock_filter; 1] = [sock_filter {
        code: 6,
        jt: 0,
        jf: 0,
        k: 0,
    }];
    static MAIN: [sock_filter; 2] = [
        sock_filter {
            code: 6,
            jt: 0,
            jf: 0,
            k: 0,
        },
        sock_filter {
            code: 6,
            jt: 0,
            jf: 0,
            k: 0,
        },
    ];

    fn me() -> Pid {
        Pid::from_raw(4242).unwrap()
    }

    fn confined() -> ChildPlan {
        ChildPlan {
            parent: me(),
            cgroup_procs: Some(7),
            cwd: Some(8),
            drop_capabilities: true,
            no_new_privs: true,
            landlock: Some(9),
            seccomp: [&GUARD, &MAIN, &GUARD],
        }
    }

    fn recorder() -> Recorder {
        Recorder {
            parent: Some(me()),
            ..Recorder::default()
        }
    }

    #[test]
    fn a_confined_spawn_runs_every_step_in_the_documented_order() {
        let mut r = recorder();
        run(&mut r, &confined()).unwrap();
        assert_eq!(
            r.calls,
            [
                "setsid",
                "pdeathsig",
                "getppid",
                "cgroup.procs:7",
                "rlimit",
                "fchdir:8",
                "capabilities",
                "close_range",
                "no_new_privs",
                "landlock:9",
                "seccomp:1",
                "seccomp:2",
                "seccomp:1",
            ]
        );
    }

    #[test]
    fn an_unconfined_spawn_still_gets_the_seccomp_baseline_last() {
        let plan = ChildPlan {
            cgroup_procs: None,
            cwd: None,
            drop_capabilities: false,
            no_new_privs: false,
            landlock: None,
            seccomp: [&GUARD, &MAIN, &[]],
            ..confined()
        };
        let mut r = recorder();
        run(&mut r, &plan).unwrap();
        assert_eq!(
            r.calls,
            [
                "setsid",
                "pdeathsig",
                "getppid",
                "rlimit",
                "close_range",
                "seccomp:1",
                "seccomp:2"
            ]
        );
    }

    #[test]
    fn an_inherited_baseline_is_not_loaded_again() {
        let plan = ChildPlan {
            seccomp: [&[], &[], &GUARD],
            ..confined()
        };
        let mut r = recorder();
        run(&mut r, &plan).unwrap();
        assert_eq!(
            r.calls.iter().filter(|c| c.starts_with("seccomp")).count(),
            1
        );
        assert_eq!(r.calls.last().unwrap(), "seccomp:1");
        let plan = ChildPlan {
            seccomp: [&[], &[], &[]],
            ..confined()
        };
        let mut r = recorder();
        run(&mut r, &plan).unwrap();
        assert!(!r.calls.iter().any(|c| c.starts_with("seccomp")));
    }

    #[test]
    fn a_dead_parent_stops_the_child_before_anything_else_happens() {
        let mut r = Recorder {
            parent: Pid::from_raw(1),
            ..Recorder::default()
        };
        let err = run(&mut r, &confined()).unwrap_err();
        assert_eq!(err.step, Step::ParentAlive);
        assert_eq!(r.calls, ["setsid", "pdeathsig", "getppid"]);
    }

    #[test]
    fn the_first_failure_stops_the_sequence_and_names_its_step() {
        for (fail, step) in [
            ("cgroup.procs", Step::JoinCgroup),
            ("landlock", Step::Landlock),
            ("no_new_privs", Step::NoNewPrivs),
        ] {
            let mut r = Recorder {
                fail: Some(fail),
                ..recorder()
            };
            let err = run(&mut r, &confined()).unwrap_err();
            assert_eq!(err.step, step);
            assert!(
                r.calls.last().unwrap().starts_with(fail),
                "{fail}: {:?}",
                r.calls
            );
            assert!(!r.calls.iter().any(|c| c.starts_with("seccomp")));
        }
    }

    #[test]
    fn step_errors_survive_the_trip_through_a_raw_os_error() {
        for step in Step::ALL {
            for errno in [Errno::PERM, Errno::TOOBIG, Errno::NOSYS] {
                let e = StepError { step, errno };
                assert_eq!(StepError::decode(e.encode()), Some(e));
            }
        }
        assert_eq!(StepError::decode(libc::ENOENT), None);
        assert_eq!(StepError::decode(libc::EACCES), None);
        assert_eq!(StepError::decode(99 << STEP_SHIFT), None);
    }

    #[test]
    fn only_the_locking_steps_count_as_confinement() {
        let confining: Vec<Step> = Step::ALL.into_iter().filter(|s| s.confines()).collect();
        assert_eq!(confining, [Step::NoNewPrivs, Step::Landlock, Step::Seccomp]);
    }
}
