//! The executor's own floor on an exec request, applied whatever the broker
//! already checked.
//!
//! Security meaning: a compromised broker cannot smuggle a loader variable
//! (`LD_PRELOAD`, `PATH=/x` …) past this point, cannot make the spawn truncate
//! argv at a NUL and cannot exhaust memory with argv/env. (A command that
//! asks for confinement this host cannot enforce is refused by
//! [`crate::confine::prepare`], before anything is spawned.)
#![forbid(unsafe_code)]

use ide_proto::{env_gate, ErrorKind, ExecSpec, ExecutorError};

/// Cap on argv plus per-call env bytes (the kernel's own limit is larger;
/// nothing legitimate comes close).
pub const MAX_ARGV_ENV_BYTES: usize = 1024 * 1024;

/// Checks `spec` before anything is opened or spawned.
pub fn check(spec: &ExecSpec) -> Result<(), ExecutorError> {
    let invalid = |m: String| ExecutorError::new(ErrorKind::Invalid, m);
    if spec.argv.is_empty() {
        return Err(invalid("empty command".into()));
    }
    let strings = spec
        .argv
        .iter()
        .chain(&spec.env.allow)
        .chain(spec.env.set.iter().flat_map(|(k, v)| [k, v]));
    let mut total = 0usize;
    for s in strings {
        if s.contains('\0') {
            return Err(invalid("argv and env must not contain NUL".into()));
        }
        total = total.saturating_add(s.len() + 1);
    }
    if total > MAX_ARGV_ENV_BYTES {
        return Err(invalid(format!(
            "argv and env exceed {MAX_ARGV_ENV_BYTES} bytes"
        )));
    }
    env_gate::check(spec.env.set.iter().map(|(k, _)| k.as_str()))
        .map_err(|refusal| invalid(refusal.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ide_proto::EnvSpec;

    fn spec(argv: &[&str], set: &[(&str, &str)]) -> ExecSpec {
        ExecSpec {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            env: EnvSpec {
                inherit: true,
                allow: vec![],
                set: set
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            },
            cwd: None,
            stdin: ide_proto::Stdin::Null,
            timeout_ms: 0,
            max_output_bytes: 0,
            confine: None,
        }
    }

    fn kind(s: &ExecSpec) -> Option<ErrorKind> {
        check(s).err().map(|e| e.kind)
    }

    #[test]
    fn an_ordinary_command_passes() {
        assert_eq!(kind(&spec(&["echo", "hi"], &[("NODE_ENV", "test")])), None);
    }

    #[test]
    fn empty_argv_is_invalid() {
        assert_eq!(kind(&spec(&[], &[])), Some(ErrorKind::Invalid));
    }

    #[test]
    fn nul_anywhere_is_invalid() {
        assert_eq!(kind(&spec(&["a\0b"], &[])), Some(ErrorKind::Invalid));
        assert_eq!(
            kind(&spec(&["a"], &[("K", "v\0")])),
            Some(ErrorKind::Invalid)
        );
        let mut s = spec(&["a"], &[]);
        s.env.allow.push("A\0".into());
        assert_eq!(kind(&s), Some(ErrorKind::Invalid));
    }

    #[test]
    fn oversized_argv_is_invalid() {
        let big = "x".repeat(MAX_ARGV_ENV_BYTES);
        assert_eq!(kind(&spec(&["echo", &big], &[])), Some(ErrorKind::Invalid));
    }

    #[test]
    fn the_env_gate_is_the_floor() {
        for (k, v) in [
            ("LD_PRELOAD", "/x.so"),
            ("PATH=/x", "y"),
            ("BASH_ENV", "/x"),
            ("HOME", "/"),
        ] {
            let err = check(&spec(&["true"], &[(k, v)])).unwrap_err();
            assert_eq!(err.kind, ErrorKind::Invalid, "{k}");
            assert!(err.message.contains(&format!("{k:?}")), "{}", err.message);
        }
    }
}
