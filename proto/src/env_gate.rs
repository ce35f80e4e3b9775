//! The per-call environment gate, shared by both processes: the broker runs it
//! as policy and the executor runs the very same function again as its floor,
//! so a compromised broker cannot smuggle a loader variable to a child.
//!
//! The gate is deny-only: any variable name may be set to any value except the
//! keys that hijack how a program is loaded or started.

/// Keys that can never be set per call (besides every `LD_*` / `DYLD_*`).
pub const DANGEROUS_KEYS: &[&str] = &[
    "PATH",
    "IFS",
    "HOME",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "LD_PROFILE",
    "LD_DEBUG",
    "LD_CONFIG",
    "LD_ORIGIN_PATH",
    "DYLD_INSERT_LIBRARIES",
    "DYLD_LIBRARY_PATH",
    "DYLD_FRAMEWORK_PATH",
    "DYLD_FALLBACK_LIBRARY_PATH",
    "DYLD_FALLBACK_FRAMEWORK_PATH",
    "GCONV_PATH",
    "GETCONF_DIR",
    "HOSTALIASES",
    "NIS_PATH",
    "MALLOC_TRACE",
    "RES_OPTIONS",
    "LOCALDOMAIN",
    "BASH_ENV",
    "ENV",
    "PYTHONSTARTUP",
    "PERL5OPT",
    "RUBYOPT",
    "NODE_OPTIONS",
];

/// Why a key was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvRefusal {
    /// Not `[A-Za-z_][A-Za-z0-9_]*`: a key such as `PATH=/x` would carry its
    /// own assignment past the `PATH` rule.
    NotAVariableName(String),
    /// An exec-hijacking key.
    Dangerous(String),
}

impl std::fmt::Display for EnvRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EnvRefusal::NotAVariableName(k) => {
                write!(f, "env key {k:?} is not a variable name ([A-Za-z_][A-Za-z0-9_]*)")
            }
            EnvRefusal::Dangerous(k) => write!(
                f,
                "env key {k:?} is never settable per call (it hijacks how programs are loaded or started)"
            ),
        }
    }
}

/// True for `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_variable_name(key: &str) -> bool {
    let mut bytes = key.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// True for the keys in [`DANGEROUS_KEYS`] and the `LD_*` / `DYLD_*` families.
pub fn is_dangerous(key: &str) -> bool {
    key.starts_with("LD_") || key.starts_with("DYLD_") || DANGEROUS_KEYS.contains(&key)
}

/// Checks one key; the first refusal rejects the whole call.
pub fn check_key(key: &str) -> Result<(), EnvRefusal> {
    if !is_variable_name(key) {
        return Err(EnvRefusal::NotAVariableName(key.to_owned()));
    }
    if is_dangerous(key) {
        return Err(EnvRefusal::Dangerous(key.to_owned()));
    }
    Ok(())
}

/// Checks every key, in order.
pub fn check<'a>(keys: impl IntoIterator<Item = &'a str>) -> Result<(), EnvRefusal> {
    keys.into_iter().try_for_each(check_key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_keys_pass() {
        for k in [
            "NODE_ENV",
            "_",
            "a1",
            "RUST_LOG",
            "LANG",
            "III_WORKER_NAME",
            "ld_preload",
        ] {
            assert_eq!(check_key(k), Ok(()), "{k}");
        }
    }

    #[test]
    fn every_listed_key_and_family_member_is_refused() {
        for k in DANGEROUS_KEYS
            .iter()
            .chain(&["LD_ANYTHING", "DYLD_X", "LD_", "DYLD_"])
        {
            assert_eq!(
                check_key(k),
                Err(EnvRefusal::Dangerous(k.to_string())),
                "{k}"
            );
        }
    }

    #[test]
    fn shapes_that_smuggle_are_refused() {
        for k in [
            "",
            "PATH=/tmp/evil",
            "1A",
            "A-B",
            "A.B",
            "A B",
            "A\0B",
            "É",
            "LD_PRELOAD\n",
        ] {
            assert_eq!(
                check_key(k),
                Err(EnvRefusal::NotAVariableName(k.to_string())),
                "{k:?}"
            );
        }
    }

    #[test]
    fn the_first_refusal_wins() {
        let err = check(["OK", "HOME", "LD_PRELOAD"]).unwrap_err();
        assert_eq!(err, EnvRefusal::Dangerous("HOME".into()));
    }
}
