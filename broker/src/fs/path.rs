//! Caller paths: the lexical jail, the protected globs, and how executor
//! failures are worded back to the caller.
//!
//! Security meaning: this is where the redaction invariant holds for the fs
//! surface. A missing path, a permission-denied one, a `fs.denylist_paths`
//! hit (lexical here, by identity in the executor) and a
//! `code.non_accessible_globs` match all come back as exactly
//! [`ShellError::not_found`] of the caller's own string; `S215` is only an
//! escape; and no message ever names a root, the deny list, or a path the
//! caller did not send.
#![forbid(unsafe_code)]

use crate::error::{Class, ShellError};
use crate::policy::{CallPolicy, PathKind, Policy};
use ide_proto::{ErrorKind, ExecutorError, FsOp, FsRequest, Request, RootedPath};

/// Resolves a caller's path through the jail and the call's session scope,
/// and refuses protected paths.
pub fn resolve(policy: &CallPolicy, raw: &str) -> Result<RootedPath, ShellError> {
    let rooted = policy.resolve(raw, PathKind::Any)?;
    if policy.jail().is_protected(&rooted) {
        return Err(ShellError::not_found(raw));
    }
    Ok(rooted)
}

/// The executor request for `op`, carrying the denylist it re-checks.
pub fn guarded(policy: &Policy, op: FsOp) -> Request {
    Request::Fs(FsRequest::Guarded {
        deny: policy.config().fs.denylist_paths.clone(),
        op,
    })
}

/// An executor failure on the caller's path `raw`, worded for the caller.
pub fn fail(err: ExecutorError, raw: &str) -> ShellError {
    match err.kind {
        ErrorKind::NotFound => ShellError::not_found(raw),
        ErrorKind::Escape => escape(raw),
        kind => ShellError::new(Class::from(kind), format!("{raw}: {}", err.message)),
    }
}

/// The `S215` of a path that leaves the jail (the broker's lexical wording).
pub fn escape(raw: &str) -> ShellError {
    ShellError::new(
        Class::Escape,
        format!("{raw}: path escapes the fs jail roots"),
    )
}

/// `rel` and `file` joined with one `/` (either may be empty).
pub fn join_rel(rel: &str, file: &str) -> String {
    let rel = rel.trim_end_matches('/');
    match (rel.is_empty(), file.is_empty()) {
        (_, true) => rel.to_owned(),
        (true, false) => file.to_owned(),
        (false, false) => format!("{rel}/{file}"),
    }
}

/// The absolute path of `file` (relative to `rooted`), `.` and `..`
/// collapsed, for results that report where a file is.
pub fn absolute(rooted: &RootedPath, file: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    let beneath = join_rel(&rooted.anchor, &join_rel(&rooted.rel, file));
    let joined = format!("{}/{}", rooted.root, beneath);
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            name => parts.push(name),
        }
    }
    format!("/{}", parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rooted(root: &str, rel: &str) -> RootedPath {
        RootedPath::new(root, rel)
    }

    #[test]
    fn executor_failures_name_only_the_callers_path() {
        let e = fail(ExecutorError::new(ErrorKind::NotFound, "/real/secret"), "x");
        assert_eq!(e, ShellError::not_found("x"));
        let e = fail(
            ExecutorError::new(ErrorKind::Escape, "path escapes its root"),
            "a/b",
        );
        assert_eq!(e.code().as_deref(), Some("S215"));
        assert_eq!(e.message, "a/b: path escapes the fs jail roots");
        let e = fail(
            ExecutorError::new(ErrorKind::WrongType, "is a directory"),
            "d",
        );
        assert_eq!(
            (e.code().as_deref(), e.message.as_str()),
            (Some("S212"), "d: is a directory")
        );
        let e = fail(ExecutorError::new(ErrorKind::TooLarge, "big"), "f");
        assert_eq!(e.code().as_deref(), Some("S218"));
    }

    #[test]
    fn absolute_paths_are_collapsed() {
        assert_eq!(
            absolute(&rooted("/srv/app", "src/"), "a/b.rs"),
            "/srv/app/src/a/b.rs"
        );
        assert_eq!(absolute(&rooted("/srv/app", ""), ""), "/srv/app");
        assert_eq!(absolute(&rooted("/", "x/../y"), "z"), "/y/z");
        assert_eq!(absolute(&rooted("/srv/app", "f.rs"), ""), "/srv/app/f.rs");
    }

    #[test]
    fn relative_joins_use_one_slash() {
        assert_eq!(join_rel("", "a"), "a");
        assert_eq!(join_rel("src/", "a"), "src/a");
        assert_eq!(join_rel("src", ""), "src");
    }
}
