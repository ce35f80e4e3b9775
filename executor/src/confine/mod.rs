//! Per-spawn confinement: everything between "run this argv" and `exec`
//! that limits what the command can do and how long its tree can live.
//!
//! Security meaning: prepare, then enforce. In the executor, before the
//! spawn, the Landlock ruleset of a confined command is built into an fd
//! ([`landlock`]), the command's cgroup leaf is made and its `cgroup.procs`
//! opened ([`cgroup`]), and the seccomp programs were compiled once at
//! start-up ([`seccomp`]). The child then only replays raw syscalls in a
//! fixed order ([`sequence`]). A command that asked for confinement this
//! host cannot enforce never runs ([`ErrorKind::Unconfinable`], S222); every
//! command, confined or not, runs under the seccomp baseline. The executor
//! binary loads its filters once ([`Settings::filter_self`]): the baseline
//! into itself at start-up, before any thread or request exists, and the
//! confined additions (with `no_new_privs`) into one spawner thread that
//! starts every confined command. Children inherit the filters of the
//! thread that clones them, and loading a filter costs the kernel a copy, a
//! JIT compile (with a TLB flush on every core) and a verdict cache per
//! process: per spawn it was the largest single cost of a short command.
//! When a command is
//! killed (timeout, kill, cancel, the broker gone) its whole tree dies:
//! `cgroup.kill` where the host has cgroup v2, else the subreaper sweep of
//! [`orphans`].
#![forbid(unsafe_code)]

pub mod cgroup;
pub mod git_dir;
pub mod landlock;
pub mod orphans;
pub mod probe;
mod recent;
pub mod seccomp;
pub mod sequence;

use crate::exec::image::Image;
use crate::sys;
use ide_proto::{Confinement, ErrorKind, ExecutorError};
use rustix::fd::{AsRawFd, OwnedFd, RawFd};
use rustix::io::Errno;
use rustix::process::Pid;
use rustix::thread::CapabilitySet;
use sequence::{ChildPlan, StepError};
use std::io;
use std::sync::OnceLock;

/// Operator choices from the executor's command line.
#[derive(Debug, Clone, Copy, Default)]
pub struct Settings {
    /// Drop dangerous capabilities (SYS_ADMIN, SYS_MODULE, SYS_PTRACE, …)
    /// from every command, confined or not.
    pub drop_capabilities: bool,
    /// Load the seccomp baseline into the executor itself (every thread)
    /// and the confined additions into a spawner thread, so commands
    /// inherit them instead of loading them per spawn. The binary sets it;
    /// in-process tests leave it off and each command loads its filters.
    pub filter_self: bool,
}

/// Capabilities a command loses when [`Settings::drop_capabilities`] is on:
/// the ones that reach the kernel, other processes' memory, or files past
/// their permissions.
pub const DANGEROUS_CAPABILITIES: CapabilitySet = CapabilitySet::from_bits_retain(
    CapabilitySet::SYS_ADMIN.bits()
        | CapabilitySet::SYS_MODULE.bits()
        | CapabilitySet::SYS_RAWIO.bits()
        | CapabilitySet::SYS_PTRACE.bits()
        | CapabilitySet::DAC_READ_SEARCH.bits()
        | CapabilitySet::BPF.bits()
        | CapabilitySet::PERFMON.bits()
        | CapabilitySet::SYS_BOOT.bits()
        | CapabilitySet::MAC_ADMIN.bits()
        | CapabilitySet::MAC_OVERRIDE.bits()
        | CapabilitySet::NET_ADMIN.bits()
        | CapabilitySet::SYS_TIME.bits()
        | CapabilitySet::SYSLOG.bits(),
);

/// What the host offers, found once.
#[derive(Debug)]
struct Host {
    programs: seccomp::Programs,
    /// The kernel's Landlock ABI; `<= 0` when it has none.
    landlock_abi: i32,
    cgroups: Option<cgroup::Hierarchy>,
    /// Without `CAP_SYS_ADMIN` a seccomp filter needs `no_new_privs`.
    filter_needs_no_new_privs: bool,
    /// The executor runs under the baseline, so its commands inherit it.
    inherits_baseline: bool,
    /// Starts confined commands under the confined additions.
    confined_spawner: Option<sys::Spawner>,
    settings: Settings,
}

static HOST: OnceLock<Result<Host, String>> = OnceLock::new();

impl Host {
    fn detect(settings: Settings) -> Result<Host, String> {
        let programs = seccomp::compile().map_err(|e| format!("seccomp baseline: {e}"))?;
        let cgroups = cgroup::Hierarchy::detect();
        if cgroups.is_none() {
            orphans::adopt_orphans().map_err(|e| format!("PR_SET_CHILD_SUBREAPER: {e}"))?;
        }
        let has_sys_admin = rustix::thread::capabilities(None)
            .map(|c| c.effective.contains(CapabilitySet::SYS_ADMIN))
            .unwrap_or(false);
        let filter_needs_no_new_privs = !has_sys_admin;
        let inherits_baseline = settings.filter_self
            && match filter_self(&programs, filter_needs_no_new_privs) {
                Ok(()) => true,
                Err(e) => {
                    tracing::warn!(
                        "cannot load the seccomp baseline into the executor ({e}); \
                         every command loads it itself"
                    );
                    false
                }
            };
        let landlock_abi = sys::landlock_abi().unwrap_or(0);
        let confined_spawner = if inherits_baseline {
            let extra = confined_extra(&programs, landlock_abi).clone();
            match sys::Spawner::start("ide-confined-spawner", move || {
                rustix::thread::set_no_new_privs(true)?;
                sys::load_seccomp(&extra)
            }) {
                Ok(spawner) => Some(spawner),
                Err(e) => {
                    tracing::warn!(
                        "cannot start the confined spawner ({e}); \
                         every confined command loads its filter itself"
                    );
                    None
                }
            }
        } else {
            None
        };
        Ok(Host {
            programs,
            landlock_abi,
            cgroups,
            filter_needs_no_new_privs,
            inherits_baseline,
            confined_spawner,
            settings,
        })
    }

    /// The spawner a command starts from, when not the calling thread.
    fn spawner(&self, confined: bool) -> Option<&sys::Spawner> {
        self.confined_spawner.as_ref().filter(|_| confined)
    }

    /// The filters a command loads, in order (see [`ChildPlan::seccomp`]).
    fn filters(&'static self, confined: bool) -> [&'static [seccompiler::sock_filter]; 3] {
        let extra: &[_] = if confined && self.spawner(confined).is_none() {
            confined_extra(&self.programs, self.landlock_abi)
        } else {
            &[]
        };
        if self.inherits_baseline {
            [&[], &[], extra]
        } else {
            [&self.programs.guard, &self.programs.baseline, extra]
        }
    }
}

/// What a confined command adds to the baseline on this host.
fn confined_extra(programs: &seccomp::Programs, landlock_abi: i32) -> &seccompiler::BpfProgram {
    if landlock_abi < 3 {
        &programs.set_id_with_truncate
    } else {
        &programs.set_id
    }
}

/// Loads the guard and the baseline into every thread of this process
/// (none of the executor's own calls is on the deny list). Without
/// `CAP_SYS_ADMIN` the kernel wants `no_new_privs` first; every command
/// would get it anyway for the same reason.
fn filter_self(programs: &seccomp::Programs, needs_no_new_privs: bool) -> Result<(), Errno> {
    if needs_no_new_privs {
        rustix::thread::set_no_new_privs(true)?;
    }
    sys::load_seccomp_all_threads(&programs.guard)?;
    sys::load_seccomp_all_threads(&programs.baseline)
}

/// Probes the host and compiles the seccomp programs; call once at start-up
/// (later calls keep the first settings). Without it the first spawn does
/// it with default settings.
pub fn init(settings: Settings) -> Result<(), String> {
    let host = HOST.get_or_init(|| Host::detect(settings));
    match host {
        Ok(h) => {
            match &h.cgroups {
                Some(c) => tracing::info!(
                    "commands run in per-command cgroups beneath {}",
                    c.dir().display()
                ),
                None => tracing::info!(
                    "no cgroup v2 with cgroup.kill here: sweeping process trees as a subreaper"
                ),
            }
            Ok(())
        }
        Err(e) => Err(e.clone()),
    }
}

fn host() -> Result<&'static Host, ExecutorError> {
    HOST.get_or_init(|| Host::detect(Settings::default()))
        .as_ref()
        .map_err(|e| ExecutorError::new(ErrorKind::Internal, format!("cannot confine: {e}")))
}

/// A command's confinement, prepared and not yet enforced.
#[derive(Debug)]
pub struct Prepared {
    host: &'static Host,
    ruleset: Option<OwnedFd>,
    leaf: Option<cgroup::Done>,
}

/// Prepares the confinement of one command. `Unconfinable` (nothing may
/// run) when `confine` asks for Landlock this host cannot enforce.
pub fn prepare(confine: Option<&Confinement>) -> Result<Prepared, ExecutorError> {
    let host = host()?;
    let ruleset = confine
        .map(|c| {
            recent::RECENT.ruleset(host.landlock_abi, c, || {
                landlock::prepare(host.landlock_abi, &writable(c))
            })
        })
        .transpose()?;
    let leaf = match &host.cgroups {
        Some(h) => Some(cgroup::Done::from(h.create_leaf().map_err(|e| {
            ExecutorError::new(
                ErrorKind::Internal,
                format!("cannot create the command's cgroup: {e}"),
            )
        })?)),
        None => None,
    };
    Ok(Prepared {
        host,
        ruleset,
        leaf,
    })
}

/// The confinement's writable paths plus the git dir of its session root.
fn writable(confine: &Confinement) -> Vec<String> {
    let git_dir = confine
        .git_dir_of
        .as_deref()
        .and_then(|root| git_dir::git_dir(root).ok().flatten());
    confine.writable.iter().cloned().chain(git_dir).collect()
}

impl Prepared {
    /// True when the command runs under Landlock.
    pub fn confined(&self) -> bool {
        self.ruleset.is_some()
    }

    /// Spawns `image` with `stdio` through the child sequence; `cwd` is a
    /// directory fd that stays open until this returns. The ruleset fd is
    /// closed here once the child has it.
    pub fn spawn(
        self,
        image: &Image,
        stdio: [RawFd; 3],
        cwd: Option<RawFd>,
    ) -> io::Result<(sys::Spawned, Guard)> {
        let host = self.host;
        let confined = self.confined();
        let plan = ChildPlan {
            parent: rustix::process::getpid(),
            cgroup_procs: self
                .leaf
                .as_ref()
                .and_then(cgroup::Done::leaf)
                .map(cgroup::Leaf::procs_fd),
            cwd,
            drop_capabilities: host.settings.drop_capabilities,
            no_new_privs: confined
                || host.settings.drop_capabilities
                || host.filter_needs_no_new_privs,
            landlock: self.ruleset.as_ref().map(AsRawFd::as_raw_fd),
            seccomp: host.filters(confined),
        };
        let spawner = host.spawner(confined);
        let spawn = || {
            image.with_raw(stdio, plan, |raw| match spawner {
                Some(spawner) => spawner.spawn(raw),
                None => sys::spawn_image(raw),
            })
        };
        let child = if self.leaf.is_none() {
            let mut spawned = orphans::lock();
            let child = spawn()?;
            orphans::register(&mut spawned, child.pid.as_raw_nonzero().get());
            child
        } else {
            spawn()?
        };
        let guard = Guard {
            leaf: self.leaf,
            pid: Some(child.pid.as_raw_nonzero().get()),
        };
        Ok((child, guard))
    }
}

/// Kills a command's whole tree; held as long as the command's leader.
#[derive(Debug)]
pub struct Guard {
    leaf: Option<cgroup::Done>,
    pid: Option<i32>,
}

impl Guard {
    /// SIGKILLs everything the command started. Call it only while `leader`
    /// is unreaped (the fallback walks the tree from it).
    pub fn kill_tree(&self, leader: Pid) {
        match self.leaf.as_ref().and_then(cgroup::Done::leaf) {
            Some(leaf) => {
                if let Err(e) = leaf.kill() {
                    tracing::warn!("cgroup.kill of {} failed: {e}", leaf.dir().display());
                }
            }
            None => orphans::kill_tree(leader),
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let (None, Some(pid)) = (&self.leaf, self.pid) {
            orphans::forget(pid);
        }
    }
}

/// The error of a spawn whose child sequence failed, if that is what
/// happened: a confinement step of a confined command is `Unconfinable`
/// (S222), any other step `Internal` (S216).
pub fn spawn_error(err: &io::Error, confined: bool) -> Option<ExecutorError> {
    let StepError { step, errno } = StepError::decode(err.raw_os_error()?)?;
    let kind = if confined && step.confines() {
        ErrorKind::Unconfinable
    } else {
        ErrorKind::Internal
    };
    let mut message = format!("{} failed: {errno}", step.describe());
    if step == sequence::Step::Landlock && errno == rustix::io::Errno::TOOBIG {
        message.push_str(" (the command would be nested in more than 16 Landlock domains)");
    }
    if kind == ErrorKind::Unconfinable {
        message.push_str("; the command did not run");
    }
    Some(ExecutorError::new(kind, message))
}

#[cfg(test)]
pub(crate) mod tests;
