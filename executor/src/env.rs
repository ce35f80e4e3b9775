//! The start-up environment snapshot and the child environments built from it.
//!
//! Security meaning: a child's environment is built from a copy taken once at
//! start (never from the live process environment), the engine identity keys
//! are always stripped, and the per-call values — gated by
//! [`ide_proto::env_gate`] before they get here — are applied last.
#![forbid(unsafe_code)]

use ide_proto::EnvSpec;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};

/// Keys never forwarded from the snapshot, whatever `inherit` says: the engine
/// token and the worker's own identity. A per-call `set` may still name them.
pub const ALWAYS_REMOVED: &[&str] = &["III_TOKEN", "III_WORKER_NAME", "III_NAMESPACE"];

/// Kept as `false` in a cleared environment when the operator turned
/// telemetry off, so children do not silently turn it back on.
const TELEMETRY_KEY: &str = "III_TELEMETRY_ENABLED";

/// The executor's environment as it was at start.
#[derive(Debug, Clone, Default)]
pub struct EnvSnapshot {
    vars: BTreeMap<OsString, OsString>,
}

impl EnvSnapshot {
    /// Copies the current process environment; call once, at the top of main.
    pub fn capture() -> Self {
        Self::from_vars(std::env::vars_os())
    }

    /// A snapshot of the given variables.
    pub fn from_vars(vars: impl IntoIterator<Item = (OsString, OsString)>) -> Self {
        Self {
            vars: vars.into_iter().collect(),
        }
    }

    /// The full environment of a child: the snapshot (all of it, or only the
    /// `allow` keys), minus [`ALWAYS_REMOVED`], then `set` on top.
    pub fn child_env(&self, spec: &EnvSpec) -> BTreeMap<OsString, OsString> {
        let mut env: BTreeMap<OsString, OsString> = if spec.inherit {
            self.vars.clone()
        } else {
            let mut kept: BTreeMap<_, _> = spec
                .allow
                .iter()
                .filter_map(|k| self.vars.get_key_value(OsStr::new(k)))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if let Some(v) = self.vars.get(OsStr::new(TELEMETRY_KEY)) {
                if v == "false" || v == "0" {
                    kept.insert(TELEMETRY_KEY.into(), "false".into());
                }
            }
            kept
        };
        for key in ALWAYS_REMOVED {
            env.remove(OsStr::new(key));
        }
        for (k, v) in &spec.set {
            env.insert(k.into(), v.into());
        }
        env
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(vars: &[(&str, &str)]) -> EnvSnapshot {
        EnvSnapshot::from_vars(
            vars.iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v))),
        )
    }

    fn spec(inherit: bool, allow: &[&str], set: &[(&str, &str)]) -> EnvSpec {
        EnvSpec {
            inherit,
            allow: allow.iter().map(|s| s.to_string()).collect(),
            set: set
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn get<'a>(env: &'a BTreeMap<OsString, OsString>, k: &str) -> Option<&'a str> {
        env.get(OsStr::new(k)).and_then(|v| v.to_str())
    }

    #[test]
    fn inherit_forwards_everything_but_the_engine_identity() {
        let s = snapshot(&[
            ("A", "1"),
            ("PATH", "/bin"),
            ("III_TOKEN", "secret"),
            ("III_WORKER_NAME", "ide"),
            ("III_NAMESPACE", "ns"),
        ]);
        let env = s.child_env(&spec(true, &[], &[]));
        assert_eq!(get(&env, "A"), Some("1"));
        assert_eq!(get(&env, "PATH"), Some("/bin"));
        for k in ALWAYS_REMOVED {
            assert_eq!(get(&env, k), None, "{k}");
        }
    }

    #[test]
    fn without_inherit_only_present_allowed_keys_pass() {
        let s = snapshot(&[("A", "1"), ("B", "2"), ("III_TOKEN", "secret")]);
        let env = s.child_env(&spec(false, &["A", "MISSING", "III_TOKEN"], &[]));
        assert_eq!(env.len(), 1);
        assert_eq!(get(&env, "A"), Some("1"));
    }

    #[test]
    fn set_is_applied_last_and_overrides() {
        let s = snapshot(&[("A", "1"), ("III_WORKER_NAME", "ide")]);
        let env = s.child_env(&spec(
            true,
            &[],
            &[("A", "2"), ("NEW", "x"), ("III_WORKER_NAME", "me")],
        ));
        assert_eq!(get(&env, "A"), Some("2"));
        assert_eq!(get(&env, "NEW"), Some("x"));
        assert_eq!(get(&env, "III_WORKER_NAME"), Some("me"));
    }

    #[test]
    fn telemetry_off_survives_a_cleared_environment() {
        for off in ["false", "0"] {
            let env = snapshot(&[(TELEMETRY_KEY, off)]).child_env(&spec(false, &[], &[]));
            assert_eq!(get(&env, TELEMETRY_KEY), Some("false"));
        }
        let env = snapshot(&[(TELEMETRY_KEY, "true")]).child_env(&spec(false, &[], &[]));
        assert_eq!(get(&env, TELEMETRY_KEY), None);
    }
}
