//! The host facts, as the executor binary reports them (`ide-executor
//! --probe`).
//!
//! Security meaning: the broker never probes the host itself (it may be
//! compromised, and after the drop it cannot): it runs the executor binary
//! once, with the engine token withheld, and reads one JSON object back.
#![forbid(unsafe_code)]

pub use ide_proto::probe::HostFacts;
use std::path::Path;
use std::process::{Command, Stdio};

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
