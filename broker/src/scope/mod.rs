//! The harness's `fs_scope { root, grants, boundary }`: read from a call's
//! payload (never published in a schema), then checked against the jail
//! through the executor before anything else of the call runs.
//!
//! Security meaning: the harness is trusted to stamp the scope, but its
//! directories are still caller input. The root must be an absolute,
//! existing directory inside the jail and off the denylist (its failures
//! carry the spec's codes); grants that fail any of those checks are dropped
//! without a word, so a grant can never widen the jail. What survives is in
//! canonical spelling, which is what [`crate::policy::Jail::resolve_in`]
//! compares against.
#![forbid(unsafe_code)]

mod validate;

pub use validate::{for_exec, validate, ExecScope, Surface};

use crate::error::ShellError;
use crate::policy::session::Boundary;
use serde_json::{Map, Value};

/// An `fs_scope` as sent, not yet checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeRequest {
    pub root: String,
    /// Only the string entries; others are invalid grants and dropped.
    pub grants: Vec<String>,
    pub boundary: Boundary,
}

/// Reads `fs_scope` from a payload: absent or null is no scope; a wrong
/// shape is `S210` naming the field.
pub fn parse(input: &Value) -> Result<Option<ScopeRequest>, ShellError> {
    let scope = match input.get("fs_scope") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(scope)) => scope,
        Some(_) => return Err(bad("must be an object { root, grants, boundary }")),
    };
    let root = match scope.get("root") {
        Some(Value::String(root)) => root.clone(),
        _ => return Err(bad("root must be a string (an absolute directory)")),
    };
    Ok(Some(ScopeRequest {
        root,
        grants: grants(scope)?,
        boundary: boundary(scope)?,
    }))
}

fn grants(scope: &Map<String, Value>) -> Result<Vec<String>, ShellError> {
    match scope.get("grants") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => Ok(items
            .iter()
            .filter_map(|g| g.as_str().map(str::to_owned))
            .collect()),
        Some(_) => Err(bad("grants must be an array of absolute directories")),
    }
}

fn boundary(scope: &Map<String, Value>) -> Result<Boundary, ShellError> {
    match scope.get("boundary") {
        None | Some(Value::Null) => Err(bad(
            "boundary is required: \"workspace\" or \"configured_roots\"",
        )),
        Some(value) => serde_json::from_value(value.clone())
            .map_err(|_| bad("boundary must be \"workspace\" or \"configured_roots\"")),
    }
}

fn bad(what: &str) -> ShellError {
    ShellError::invalid(format!("bad fs_scope: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn code(input: Value) -> Option<String> {
        parse(&input).unwrap_err().code()
    }

    #[test]
    fn absent_and_null_are_no_scope() {
        assert_eq!(parse(&json!({"path": "x"})).unwrap(), None);
        assert_eq!(parse(&json!({"fs_scope": null})).unwrap(), None);
    }

    #[test]
    fn a_full_scope_keeps_only_string_grants() {
        let scope = parse(&json!({"fs_scope": {
            "root": "/srv/w", "grants": ["/a", 3, null, "rel"], "boundary": "workspace"
        }}))
        .unwrap()
        .unwrap();
        assert_eq!(
            scope,
            ScopeRequest {
                root: "/srv/w".into(),
                grants: vec!["/a".into(), "rel".into()],
                boundary: Boundary::Workspace,
            }
        );
        let scope = parse(&json!({"fs_scope": {"root": "/w", "boundary": "configured_roots"}}))
            .unwrap()
            .unwrap();
        assert_eq!(scope.boundary, Boundary::ConfiguredRoots);
        assert!(scope.grants.is_empty());
    }

    #[test]
    fn a_missing_boundary_or_a_bad_shape_is_s210() {
        for bad in [
            json!({"fs_scope": {"root": "/w"}}),
            json!({"fs_scope": {"root": "/w", "boundary": null}}),
            json!({"fs_scope": {"root": "/w", "boundary": "auto"}}),
            json!({"fs_scope": {"root": "/w", "boundary": 1}}),
            json!({"fs_scope": {"boundary": "workspace"}}),
            json!({"fs_scope": {"root": 5, "boundary": "workspace"}}),
            json!({"fs_scope": {"root": "/w", "grants": "/a", "boundary": "workspace"}}),
            json!({"fs_scope": "/w"}),
        ] {
            assert_eq!(code(bad.clone()).as_deref(), Some("S210"), "{bad}");
        }
    }
}
