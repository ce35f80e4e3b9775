//! One error type for the `shell::*` surface and the single place where a
//! failure class becomes a wire code.
//!
//! `S2xx` and `C2xx` share digits per class (since 0.10.0), so the class is
//! kept separate from the surface prefix. Redaction lives here too: every
//! "missing", "denied" and "protected" path reads the same.
#![forbid(unsafe_code)]

use ide_proto::{ErrorKind, ExecutorError};

/// A failure class; equal digits mean the same class on both surfaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Invalid,
    NotFound,
    WrongType,
    Exists,
    NotEmpty,
    Escape,
    Internal,
    BadRegex,
    TooLarge,
    OutsideScope,
    Unconfinable,
}

impl Class {
    /// The digits after the surface letter.
    pub fn digits(self) -> u16 {
        match self {
            Class::Invalid => 210,
            Class::NotFound => 211,
            Class::WrongType => 212,
            Class::Exists => 213,
            Class::NotEmpty => 214,
            Class::Escape => 215,
            Class::Internal => 216,
            Class::BadRegex => 217,
            Class::TooLarge => 218,
            Class::OutsideScope => 220,
            Class::Unconfinable => 222,
        }
    }
}

impl From<ErrorKind> for Class {
    fn from(k: ErrorKind) -> Self {
        match k {
            ErrorKind::Invalid => Class::Invalid,
            ErrorKind::NotFound => Class::NotFound,
            ErrorKind::WrongType => Class::WrongType,
            ErrorKind::Exists => Class::Exists,
            ErrorKind::NotEmpty => Class::NotEmpty,
            ErrorKind::Escape => Class::Escape,
            ErrorKind::Internal => Class::Internal,
            ErrorKind::BadRegex => Class::BadRegex,
            ErrorKind::TooLarge => Class::TooLarge,
            ErrorKind::Unconfinable => Class::Unconfinable,
        }
    }
}

/// What a failure reports as its wire code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Code {
    /// One of ours: `S` and the class digits.
    Shell(Class),
    /// A sandbox or engine code passed through verbatim (`S001`, `S301`, …).
    Forwarded(String),
    /// No code: a plain message (the spec's denylist hit).
    Plain,
}

/// The code of a plain (un-coded) failure: the SDK's generic one.
pub const PLAIN_CODE: &str = "invocation_failed";

/// Codes a sandbox-forwarded call may surface verbatim instead of `S216`.
pub const FORWARDED_CODES: &[&str] = &[
    "S001", "S002", "S003", "S004", "S100", "S101", "S102", "S200", "S300", "S301", "S302", "S303",
    "S304", "S400",
];

/// A failed `shell::*` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellError {
    pub code: Code,
    pub message: String,
}

impl ShellError {
    /// An S-coded error.
    pub fn new(class: Class, message: impl Into<String>) -> Self {
        Self {
            code: Code::Shell(class),
            message: message.into(),
        }
    }

    /// An engine or sandbox error: known codes pass through, anything else
    /// collapses to `S216`.
    pub fn forwarded(code: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        if FORWARDED_CODES.contains(&code) {
            Self {
                code: Code::Forwarded(code.to_owned()),
                message,
            }
        } else {
            Self::internal(format!("{code}: {message}"))
        }
    }

    /// The failure class, when it is one of ours.
    pub fn class(&self) -> Option<Class> {
        match self.code {
            Code::Shell(c) => Some(c),
            _ => None,
        }
    }

    /// `S210`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(Class::Invalid, message)
    }

    /// `S216`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(Class::Internal, message)
    }

    /// The one redacted `S211` body: a missing, unreadable, denylisted or
    /// protected path all produce exactly these bytes.
    pub fn not_found(caller_path: &str) -> Self {
        Self::new(
            Class::NotFound,
            format!("{caller_path}: not found or not accessible (verify with shell::fs::ls)"),
        )
    }

    /// A path refused for where it lies (`S215` outside the jail, `S220`
    /// outside the session), ending in the machine hint a harness turns into
    /// an access request: ` filesystem_access_request={"v":1,…}`.
    pub fn outside(class: Class, caller_path: &str, reason: &str, requested_root: &str) -> Self {
        let code = format!("S{}", class.digits());
        let quote = |s: &str| serde_json::Value::from(s).to_string();
        Self::new(
            class,
            format!(
                "{caller_path}: {reason} filesystem_access_request={{\"v\":1,\"requested_root\":{},\"attempted_path\":{},\"error_code\":{}}}",
                quote(requested_root),
                quote(caller_path),
                quote(&code),
            ),
        )
    }

    /// The spec's denylist rejection: a plain message, no S-code.
    pub fn denylisted(pattern: &str) -> Self {
        Self {
            code: Code::Plain,
            message: format!("command matches denylist: {pattern}"),
        }
    }

    /// The wire code, e.g. `S211`.
    pub fn code(&self) -> Option<String> {
        match &self.code {
            Code::Shell(c) => Some(format!("S{}", c.digits())),
            Code::Forwarded(code) => Some(code.clone()),
            Code::Plain => None,
        }
    }

    /// Maps an executor failure onto this surface. A not-found from the
    /// executor is re-worded with the caller's own string, so no resolved path
    /// ever reaches the caller.
    pub fn from_executor(err: ExecutorError, caller_path: Option<&str>) -> Self {
        match (err.kind, caller_path) {
            (ErrorKind::NotFound, Some(p)) => Self::not_found(p),
            (kind, _) => Self::new(kind.into(), err.message),
        }
    }
}

impl std::fmt::Display for ShellError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.code() {
            Some(code) => write!(f, "{code}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl From<ShellError> for iii_sdk::Error {
    fn from(e: ShellError) -> Self {
        match e.code() {
            Some(code) => iii_sdk::Error::Remote {
                code,
                message: e.message,
                stacktrace: None,
            },
            // What the SDK itself reports for a plain handler error, minus
            // its "handler error:" prefix, so the spec's text arrives as is.
            None => iii_sdk::Error::Remote {
                code: PLAIN_CODE.to_owned(),
                message: e.message,
                stacktrace: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outside_path_ends_in_a_parseable_access_request() {
        let e = ShellError::outside(Class::OutsideScope, "a\"b", "outside", "/srv/x");
        assert_eq!(e.code().as_deref(), Some("S220"));
        let (text, hint) = e.message.split_once(" filesystem_access_request=").unwrap();
        assert_eq!(text, "a\"b: outside");
        let hint: serde_json::Value = serde_json::from_str(hint).unwrap();
        assert_eq!(
            hint,
            serde_json::json!({"v": 1, "requested_root": "/srv/x", "attempted_path": "a\"b", "error_code": "S220"})
        );
        assert!(e.message.ends_with(r#""error_code":"S220"}"#));
    }

    #[test]
    fn codes_are_the_spec_table() {
        let all = [
            (Class::Invalid, "S210"),
            (Class::NotFound, "S211"),
            (Class::WrongType, "S212"),
            (Class::Exists, "S213"),
            (Class::NotEmpty, "S214"),
            (Class::Escape, "S215"),
            (Class::Internal, "S216"),
            (Class::BadRegex, "S217"),
            (Class::TooLarge, "S218"),
            (Class::OutsideScope, "S220"),
            (Class::Unconfinable, "S222"),
        ];
        for (class, code) in all {
            assert_eq!(ShellError::new(class, "x").code().as_deref(), Some(code));
        }
    }

    #[test]
    fn the_code_travels_at_the_top_level() {
        let e: iii_sdk::Error = ShellError::new(Class::NotFound, "no such job: j").into();
        match e {
            iii_sdk::Error::Remote {
                code,
                message,
                stacktrace,
            } => {
                assert_eq!(code, "S211");
                assert_eq!(message, "no such job: j");
                assert!(stacktrace.is_none());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_denylist_hit_is_a_plain_message() {
        let e: iii_sdk::Error = ShellError::denylisted("rm\\s+-rf\\s+/").into();
        assert!(matches!(e, iii_sdk::Error::Remote { code, message, .. }
            if code == "invocation_failed" && message == "command matches denylist: rm\\s+-rf\\s+/"));
    }

    #[test]
    fn only_known_engine_codes_pass_through() {
        assert_eq!(
            ShellError::forwarded("S301", "not connected")
                .code()
                .as_deref(),
            Some("S301")
        );
        let e = ShellError::forwarded("weird", "boom");
        assert_eq!(e.code().as_deref(), Some("S216"));
        assert!(e.message.contains("weird"));
    }

    #[test]
    fn executor_not_found_is_reworded_with_the_callers_path() {
        let err = ExecutorError::new(ErrorKind::NotFound, "/real/resolved/secret");
        let e = ShellError::from_executor(err, Some("rel/x"));
        assert_eq!(e, ShellError::not_found("rel/x"));
        assert!(!e.message.contains("secret"));
    }
}
