//! Octal modes from callers.
//!
//! Security meaning: setuid, setgid and sticky bits are a privilege
//! escalation primitive when the worker runs as root, so they are refused
//! (`S210`) unless the operator set `fs.allow_special_bits`.
#![forbid(unsafe_code)]

use crate::error::ShellError;
use crate::policy::Policy;

/// The special bits (`mode & 0o7000`).
const SPECIAL_BITS: u32 = 0o7000;

/// Parses `raw` (octal digits, at most `7777`), or `default` when absent.
pub fn parse(policy: &Policy, raw: Option<&str>, default: u32) -> Result<u32, ShellError> {
    let mode = match raw {
        None => default,
        Some(text) => {
            let digits = text.strip_prefix("0o").unwrap_or(text);
            if digits.is_empty() || !digits.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
                return Err(bad(text));
            }
            match u32::from_str_radix(digits, 8) {
                Ok(mode) if mode <= 0o7777 => mode,
                _ => return Err(bad(text)),
            }
        }
    };
    if mode & SPECIAL_BITS != 0 && !policy.allow_special_bits() {
        return Err(ShellError::invalid(format!(
            "mode {mode:04o} sets setuid/setgid/sticky bits, which fs.allow_special_bits does not allow"
        )));
    }
    Ok(mode)
}

fn bad(text: &str) -> ShellError {
    ShellError::invalid(format!(
        "mode {text:?} is not an octal mode (e.g. \"0644\", at most \"7777\")"
    ))
}

/// The wire form of a mode: four octal digits.
pub fn show(mode: u32) -> String {
    format!("{:04o}", mode & 0o7777)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse as parse_config;
    use serde_json::json;

    fn policy(allow: bool) -> Policy {
        let config =
            parse_config(&json!({"fs": {"allow_unjailed": true, "allow_special_bits": allow}}))
                .unwrap();
        Policy::build(config, vec![]).unwrap()
    }

    #[test]
    fn octal_modes_parse_and_junk_is_s210() {
        let p = policy(false);
        assert_eq!(parse(&p, Some("0644"), 0), Ok(0o644));
        assert_eq!(parse(&p, Some("755"), 0), Ok(0o755));
        assert_eq!(parse(&p, Some("0o700"), 0), Ok(0o700));
        assert_eq!(parse(&p, None, 0o644), Ok(0o644));
        for bad in ["", "8", "0x1ff", "-1", "77777", "rw-r--r--", " 644"] {
            let err = parse(&p, Some(bad), 0).unwrap_err();
            assert_eq!(err.code().as_deref(), Some("S210"), "{bad}");
        }
    }

    #[test]
    fn special_bits_need_the_opt_in() {
        for special in ["4755", "2755", "1777"] {
            let err = parse(&policy(false), Some(special), 0).unwrap_err();
            assert_eq!(err.code().as_deref(), Some("S210"), "{special}");
            assert!(err.message.contains("fs.allow_special_bits"));
            assert!(parse(&policy(true), Some(special), 0).is_ok());
        }
    }

    #[test]
    fn modes_show_as_four_digits() {
        assert_eq!(show(0o644), "0644");
        assert_eq!(show(0o4755), "4755");
        assert_eq!(show(0o100644), "0644");
    }
}
