//! Checking a [`ScopeRequest`] against the jail through the executor.
//!
//! Each directory is canonicalised by the executor (which opens it and names
//! what it opened) and the canonical spelling is then put through the same
//! lexical jail, denylist and protected-glob checks as any caller path, so a
//! scope root that is a symlink out of the jail or onto a denylisted
//! directory is refused like the path it really is. Later calls resolve
//! beneath the jail root physically, so a directory swapped after this check
//! still cannot lead out of the jail.
#![forbid(unsafe_code)]

use super::ScopeRequest;
use crate::app::App;
use crate::config::ExecConfinement;
use crate::error::{Class, ShellError};
use crate::exec::confine::WriteScope;
use crate::policy::session::SessionScope;
use crate::policy::Policy;
use ide_proto::{ErrorKind, FsReply, FsRequest, Reply, Request};

/// Which surface a scope arrives on: the codes of a bad root differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// `shell::fs::*`: a missing or non-directory root is `S212`.
    Fs,
    /// `shell::exec*`: a missing root is the redacted `S211`, a
    /// non-directory `S210`.
    Exec,
}

/// A session scope checked for an exec, with what a write-confined spawn
/// may write when the policy confines execs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecScope {
    pub session: SessionScope,
    pub write: Option<WriteScope>,
}

/// Checks `req` against `policy`: the root must pass (spec codes), grants
/// that do not pass are dropped.
pub async fn validate(
    app: &App,
    policy: &Policy,
    req: ScopeRequest,
    surface: Surface,
) -> Result<SessionScope, ShellError> {
    let root = canonical_dir(app, policy, &req.root, surface).await?;
    let mut grants: Vec<String> = Vec::new();
    for grant in &req.grants {
        if let Ok(dir) = canonical_dir(app, policy, grant, surface).await {
            if dir != root && !grants.contains(&dir) {
                grants.push(dir);
            }
        }
    }
    Ok(SessionScope {
        boundary: req.boundary,
        root,
        grants,
    })
}

/// [`validate`] for a host exec, with the write scope when
/// `fs.exec_confinement` is `landlock`.
pub async fn for_exec(
    app: &App,
    policy: &Policy,
    req: Option<ScopeRequest>,
) -> Result<Option<ExecScope>, ShellError> {
    let Some(req) = req else {
        return Ok(None);
    };
    let session = validate(app, policy, req, Surface::Exec).await?;
    let write = (policy.exec_confinement() == ExecConfinement::Landlock).then(|| WriteScope {
        root: session.root.clone(),
        grants: session.grants.clone(),
    });
    Ok(Some(ExecScope { session, write }))
}

/// The canonical spelling of a scope directory that passes the jail.
async fn canonical_dir(
    app: &App,
    policy: &Policy,
    raw: &str,
    surface: Surface,
) -> Result<String, ShellError> {
    if !raw.starts_with('/') || raw.contains('\0') {
        return Err(ShellError::invalid(format!(
            "bad fs_scope: {raw:?} is not an absolute directory"
        )));
    }
    checked(policy, raw)?;
    let request = Request::Fs(FsRequest::CanonicalRoots {
        roots: vec![raw.to_owned()],
    });
    let canonical = match app.executor.call(request).await? {
        Ok(Reply::Fs(FsReply::CanonicalRoots { mut roots })) if roots.len() == 1 => {
            roots.swap_remove(0)
        }
        Ok(other) => {
            return Err(ShellError::internal(format!(
                "unexpected executor reply to a scope check: {other:?}"
            )))
        }
        Err(e) => return Err(refused(e.kind, raw, surface)),
    };
    checked(policy, &canonical).map_err(|e| match e.class() {
        Some(Class::NotFound) => ShellError::not_found(raw),
        _ => e,
    })?;
    Ok(canonical)
}

/// The lexical jail, denylist and protected globs on a scope directory.
fn checked(policy: &Policy, path: &str) -> Result<(), ShellError> {
    let rooted = policy.jail().resolve(path)?;
    if policy.jail().is_protected(&rooted) {
        return Err(ShellError::not_found(path));
    }
    Ok(())
}

/// The error for a scope root the executor could not open as a directory.
fn refused(kind: ErrorKind, raw: &str, surface: Surface) -> ShellError {
    match (kind, surface) {
        (ErrorKind::NotFound | ErrorKind::WrongType, Surface::Fs) => ShellError::new(
            Class::WrongType,
            format!("fs_scope root {raw}: not an existing directory"),
        ),
        (ErrorKind::NotFound, Surface::Exec) => ShellError::not_found(raw),
        (ErrorKind::WrongType, Surface::Exec) => {
            ShellError::invalid(format!("fs_scope root {raw}: not a directory"))
        }
        (ErrorKind::Escape, _) => ShellError::new(
            Class::Escape,
            format!("fs_scope root {raw}: escapes the fs jail roots"),
        ),
        (kind, _) => ShellError::new(Class::from(kind), format!("fs_scope root {raw}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_root_gets_the_code_of_its_surface() {
        let code = |k, s| refused(k, "/w", s).code().unwrap();
        assert_eq!(code(ErrorKind::NotFound, Surface::Fs), "S212");
        assert_eq!(code(ErrorKind::WrongType, Surface::Fs), "S212");
        assert_eq!(code(ErrorKind::NotFound, Surface::Exec), "S211");
        assert_eq!(
            refused(ErrorKind::NotFound, "/w", Surface::Exec),
            ShellError::not_found("/w")
        );
        assert_eq!(code(ErrorKind::WrongType, Surface::Exec), "S210");
        assert_eq!(code(ErrorKind::Escape, Surface::Exec), "S215");
    }
}
