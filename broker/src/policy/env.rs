//! The per-call `env` gate of `shell::exec`, `shell::exec_bg` and pty open.
//!
//! Security meaning: deny-only. Any variable may be set to any value except
//! the keys that hijack how a program is loaded or started (`PATH`, `HOME`,
//! `LD_*`, `BASH_ENV`, …) and names that are not variable names (which could
//! smuggle an assignment). One bad key refuses the whole call with `S210`;
//! nothing is silently dropped. `env.allow` plays no role here. The executor
//! runs the very same gate again as its floor.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;

use ide_proto::env_gate;

use crate::error::ShellError;

/// Checks every per-call key; the first refusal (naming the key) rejects the call.
pub fn check_call_env(env: &BTreeMap<String, String>) -> Result<(), ShellError> {
    env_gate::check(env.keys().map(String::as_str))
        .map_err(|refusal| ShellError::invalid(refusal.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn ordinary_keys_with_any_value_pass() {
        assert_eq!(
            check_call_env(&env(&[
                ("NODE_ENV", "test"),
                ("X", "$(rm -rf /)"),
                ("III_NAMESPACE", "")
            ])),
            Ok(())
        );
        assert_eq!(check_call_env(&BTreeMap::new()), Ok(()));
    }

    #[test]
    fn a_hijacking_key_refuses_the_whole_call_and_is_named() {
        for key in [
            "PATH",
            "HOME",
            "LD_PRELOAD",
            "LD_ANYTHING",
            "DYLD_X",
            "BASH_ENV",
            "NODE_OPTIONS",
            "IFS",
        ] {
            let err = check_call_env(&env(&[("OK", "1"), (key, "/tmp/evil")])).unwrap_err();
            assert_eq!(err.code().as_deref(), Some("S210"), "{key}");
            assert!(err.message.contains(&format!("{key:?}")), "{}", err.message);
        }
    }

    #[test]
    fn smuggling_shapes_are_refused() {
        for key in ["PATH=/tmp/evil", "", "1A", "A-B", "A\0B", "LD_PRELOAD\n"] {
            let err = check_call_env(&env(&[(key, "x")])).unwrap_err();
            assert_eq!(err.code().as_deref(), Some("S210"), "{key:?}");
        }
    }
}
