//! What `ide-executor --probe` prints and the broker reads: the facts of the
//! host the executor runs on, as one JSON object.
//!
//! Why here: the broker never probes the host itself (it may be
//! compromised, and after the privilege drop it cannot), so this is a
//! contract between the two binaries like the socket messages, kept in one
//! place. Readers ignore unknown fields, so a newer executor still reads.

use serde::{Deserialize, Serialize};

/// Everything the probe found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HostFacts {
    pub executor_version: String,
    /// `uname -r`.
    pub kernel: String,
    pub arch: String,
    /// The effective uid the probe (so the executor) ran as.
    pub euid: u32,
    pub landlock: LandlockFacts,
    pub seccomp: SeccompFacts,
    /// `openat2` with `RESOLVE_BENEATH` works (else the userspace resolver).
    pub openat2: bool,
    pub cgroup: CgroupFacts,
    /// An unprivileged user namespace could be created.
    pub user_namespaces: bool,
    /// `/dev/kvm` exists.
    pub kvm: bool,
}

/// Landlock support and what it can enforce.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LandlockFacts {
    /// `available`, `not_enabled` (built but off at boot) or `not_implemented`.
    pub status: String,
    /// The kernel's ABI version; 0 without Landlock.
    pub abi: i32,
    /// Bit mask of fixed errata, when the kernel reports it.
    pub errata: Option<i32>,
    /// Write-class rights a confined command is denied outside its writable paths.
    pub write_rights: Vec<String>,
    pub scopes: Vec<String>,
    /// A confinement ruleset was actually created.
    pub ruleset_created: bool,
}

/// Seccomp support and the baseline deny list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SeccompFacts {
    pub available: bool,
    /// The baseline every command runs under was loaded by the probe.
    pub filter_loaded: bool,
    /// The baseline deny list.
    pub denied: Vec<String>,
}

/// cgroup v2 support for per-command kill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CgroupFacts {
    /// A cgroup2 hierarchy is mounted.
    pub v2: bool,
    /// Per-command cgroups with `cgroup.kill` work (else the subreaper sweep).
    pub kill: bool,
    pub dir: Option<String>,
}
