//! The host facts, as the executor binary reports them (`ide-executor
//! --probe`).
//!
//! Security meaning: the broker never probes the host itself (it may be
//! compromised, and after the drop it cannot): it runs the executor binary
//! once, with the engine token withheld, and reads one JSON object back.
#![forbid(unsafe_code)]

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::process::{Command, Stdio};

/// What `ide-executor --probe` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
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

/// Landlock support.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LandlockFacts {
    /// `available`, `not_enabled` or `not_implemented`.
    pub status: String,
    /// Kernel ABI version; 0 without Landlock.
    pub abi: i32,
    pub errata: Option<i32>,
    /// Write-class rights a confined command is denied outside its writable paths.
    pub write_rights: Vec<String>,
    pub scopes: Vec<String>,
    /// A confinement ruleset was actually created.
    pub ruleset_created: bool,
}

/// Seccomp support.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SeccompFacts {
    pub available: bool,
    /// The baseline every command runs under was loaded by the probe.
    pub filter_loaded: bool,
    /// The baseline deny list.
    pub denied: Vec<String>,
}

/// cgroup v2 support.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CgroupFacts {
    pub v2: bool,
    /// Per-command cgroups with `cgroup.kill` work (else the subreaper sweep).
    pub kill: bool,
    pub dir: Option<String>,
}

/// Runs `<executor> --probe` and parses its answer.
pub fn probe(executor: &Path) -> Result<HostFacts, String> {
    let shown = executor.display();
    let out = Command::new(executor)
        .arg("--probe")
        .env_remove(crate::privilege::token::TOKEN_ENV)
        .env("RUST_LOG", "error")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run {shown} --probe: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{shown} --probe failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    parse(&out.stdout).map_err(|e| format!("{shown} --probe: {e}"))
}

/// Parses the probe's JSON (unknown fields are ignored, so a newer executor
/// still reads).
pub fn parse(json: &[u8]) -> Result<HostFacts, String> {
    serde_json::from_slice(json).map_err(|e| format!("unreadable answer: {e}"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A probe answer of a well-equipped host.
    pub const FULL: &str = r#"{"executor_version":"0.13.0","kernel":"6.18.44","arch":"x86_64","euid":0,
        "landlock":{"status":"available","abi":7,"errata":7,"write_rights":["write_file","truncate"],"scopes":["signal"],"ruleset_created":true},
        "seccomp":{"available":true,"filter_loaded":true,"denied":["mount"]},
        "openat2":true,"cgroup":{"v2":true,"kill":true,"dir":"/sys/fs/cgroup/unified"},
        "user_namespaces":true,"kvm":false,"from_a_newer_executor":1}"#;

    #[test]
    fn a_probe_answer_parses_and_ignores_unknown_fields() {
        let facts = parse(FULL.as_bytes()).unwrap();
        assert_eq!(facts.landlock.abi, 7);
        assert!(facts.cgroup.kill);
        assert!(parse(b"not json").unwrap_err().contains("unreadable"));
    }

    #[test]
    fn a_missing_executor_is_a_clear_error() {
        let err = probe(Path::new("/nonexistent/ide-executor")).unwrap_err();
        assert!(
            err.contains("cannot run /nonexistent/ide-executor --probe"),
            "{err}"
        );
    }
}
