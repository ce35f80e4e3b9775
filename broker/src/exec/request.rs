//! Parsing a `shell::exec` / `shell::exec_bg` payload.
//!
//! The payload is read field by field rather than through a strict serde
//! struct: the engine adds `_caller_worker_id` to every call, some fields
//! have lenient legacy readings (a negative `timeout_ms` is "absent"), and a
//! wrong shape must get the spec's `S210` with a hint, not a serde error.

use crate::error::ShellError;
use crate::scope::{self, ScopeRequest};
use crate::target::Target;
use schemars::JsonSchema;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The request as callers see it in the published schema. `fs_scope` is
/// accepted but deliberately not published.
#[derive(JsonSchema)]
#[allow(dead_code)]
pub struct ExecRequestSchema {
    /// Program name (looked up on PATH) or path. Without `args`, the whole
    /// string is split shell-words style (quotes honoured); no shell runs.
    command: String,
    /// Arguments, passed verbatim (even `[]`); when present `command` is not split.
    args: Option<Vec<String>>,
    /// Kill the command (its whole process tree) after this many ms; clamped
    /// to `max_timeout_ms`; default `default_timeout_ms`.
    timeout_ms: Option<u64>,
    /// Host only: working directory, confined to the fs jail like `shell::fs::*` paths.
    cwd: Option<String>,
    /// Host only: per-call environment values. Deny-only: loader and startup
    /// keys (PATH, HOME, LD_*, DYLD_*, BASH_ENV, NODE_OPTIONS, …) reject the call.
    env: Option<BTreeMap<String, String>>,
    /// Host only: written to the program's stdin, then EOF. Absent: /dev/null.
    stdin: Option<String>,
    /// Where to run: the host (default) or `{kind: "sandbox", sandbox_id}`.
    target: Option<Target>,
}

/// A parsed exec request.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecRequest {
    pub argv: Vec<String>,
    pub timeout_ms: Option<u64>,
    pub cwd: Option<String>,
    pub env: BTreeMap<String, String>,
    pub stdin: Option<String>,
    pub target: Target,
    /// True when the caller supplied any host-only field (`cwd`/`env`/`stdin`),
    /// even an empty one.
    pub has_host_only_fields: bool,
    /// The harness's session scope, not yet checked; a sandbox target drops it.
    pub fs_scope: Option<ScopeRequest>,
}

/// Parses the payload of `op` (`exec` or `exec_bg`).
pub fn parse(op: &str, input: &Value) -> Result<ExecRequest, ShellError> {
    let obj = input
        .as_object()
        .ok_or_else(|| ShellError::invalid(format!("bad {op} payload: expected a JSON object")))?;
    let argv = argv(obj)?;
    let timeout_ms = obj.get("timeout_ms").and_then(Value::as_u64);
    let cwd = optional_string(obj, "cwd")?;
    let stdin = optional_string(obj, "stdin")?;
    let env = env(obj)?;
    let target = Target::parse(obj.get("target"))?;
    let has_host_only_fields = cwd.is_some() || stdin.is_some() || !env.is_empty();
    // A sandbox target drops the harness's host scope unread.
    let fs_scope = match target {
        Target::Host => scope::parse(input)?,
        Target::Sandbox { .. } => None,
    };
    Ok(ExecRequest {
        argv,
        timeout_ms,
        cwd,
        env,
        stdin,
        target,
        has_host_only_fields,
        fs_scope,
    })
}

fn argv(obj: &Map<String, Value>) -> Result<Vec<String>, ShellError> {
    let command = match obj.get("command") {
        Some(Value::String(s)) => s,
        Some(Value::Array(_)) => {
            return Err(ShellError::invalid(
                "`command` must be a string: put the program in `command` and its arguments in `args` (an array)",
            ))
        }
        Some(Value::Null) | None => return Err(ShellError::invalid("missing `command`")),
        Some(other) => {
            return Err(ShellError::invalid(format!("`command` must be a string, got {}", kind(other))))
        }
    };
    let argv = match obj.get("args") {
        None | Some(Value::Null) => shell_words::split(command)
            .map_err(|e| ShellError::invalid(format!("argv: parse command: {e}")))?,
        Some(Value::Array(items)) => {
            let mut argv = Vec::with_capacity(items.len() + 1);
            argv.push(command.clone());
            for (i, item) in items.iter().enumerate() {
                match item {
                    Value::String(s) => argv.push(s.clone()),
                    other => {
                        return Err(ShellError::invalid(format!(
                            "args[{i}] must be a string, got {}",
                            kind(other)
                        )))
                    }
                }
            }
            argv
        }
        Some(other) => {
            return Err(ShellError::invalid(format!(
                "`args` must be an array of strings, got {}",
                kind(other)
            )))
        }
    };
    if argv.first().is_none_or(|a| a.is_empty()) {
        return Err(ShellError::invalid("empty command"));
    }
    Ok(argv)
}

fn optional_string(obj: &Map<String, Value>, key: &str) -> Result<Option<String>, ShellError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(ShellError::invalid(format!(
            "`{key}` must be a string, got {}",
            kind(other)
        ))),
    }
}

fn env(obj: &Map<String, Value>) -> Result<BTreeMap<String, String>, ShellError> {
    match obj.get("env") {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                other => Err(ShellError::invalid(format!(
                    "env value for {k:?} must be a string, got {}",
                    kind(other)
                ))),
            })
            .collect(),
        Some(other) => Err(ShellError::invalid(format!(
            "`env` must be an object of strings, got {}",
            kind(other)
        ))),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(v: Value) -> Result<ExecRequest, ShellError> {
        parse("exec", &v)
    }

    #[test]
    fn command_is_split_only_without_args() {
        assert_eq!(
            p(json!({"command": "echo 'a b' c"})).unwrap().argv,
            ["echo", "a b", "c"]
        );
        assert_eq!(
            p(json!({"command": "echo 'a b' c", "args": []}))
                .unwrap()
                .argv,
            ["echo 'a b' c"]
        );
        assert_eq!(
            p(json!({"command": "ls", "args": ["-l", "a b"]}))
                .unwrap()
                .argv,
            ["ls", "-l", "a b"]
        );
        assert_eq!(
            p(json!({"command": "ls", "args": null})).unwrap().argv,
            ["ls"]
        );
    }

    #[test]
    fn bad_shapes_are_s210_with_a_hint() {
        let e = p(json!({"command": ["ls", "-l"]})).unwrap_err();
        assert_eq!(e.code().as_deref(), Some("S210"));
        assert!(e.message.contains("`args`"), "{}", e.message);
        let e = p(json!({"command": "ls", "args": ["a", 1]})).unwrap_err();
        assert!(e.message.contains("args[1]"), "{}", e.message);
        for bad in [
            json!({}),
            json!({"command": ""}),
            json!({"command": "   "}),
            json!({"command": "echo 'unterminated"}),
            json!({"command": 5}),
            json!({"command": "ls", "env": {"A": 1}}),
            json!({"command": "ls", "cwd": 3}),
            json!("ls"),
        ] {
            assert_eq!(
                p(bad.clone()).unwrap_err().code().as_deref(),
                Some("S210"),
                "{bad}"
            );
        }
    }

    #[test]
    fn odd_timeouts_read_as_absent() {
        assert_eq!(
            p(json!({"command": "ls", "timeout_ms": 5}))
                .unwrap()
                .timeout_ms,
            Some(5)
        );
        for t in [json!(-1), json!(1.5), json!("5"), json!(null)] {
            assert_eq!(
                p(json!({"command": "ls", "timeout_ms": t}))
                    .unwrap()
                    .timeout_ms,
                None
            );
        }
    }

    #[test]
    fn unknown_fields_are_tolerated() {
        let r = p(json!({"command": "ls", "_caller_worker_id": "w", "fs_scope": null})).unwrap();
        assert_eq!(r.argv, ["ls"]);
        assert!(!r.has_host_only_fields);
        assert_eq!(r.fs_scope, None);
    }

    #[test]
    fn a_scope_is_read_but_is_not_a_host_only_field() {
        let r = p(json!({"command": "ls", "fs_scope": {"root": "/w", "boundary": "workspace"}}))
            .unwrap();
        assert!(!r.has_host_only_fields);
        assert_eq!(r.fs_scope.map(|s| s.root).as_deref(), Some("/w"));
        let bad = p(json!({"command": "ls", "fs_scope": {"root": "/w"}})).unwrap_err();
        assert_eq!(bad.code().as_deref(), Some("S210"));
        let sandbox =
            json!({"kind": "sandbox", "sandbox_id": "7f0c1b0e-2a40-4c53-9f0e-1d2b3c4d5e6f"});
        let r = p(json!({"command": "ls", "target": sandbox, "fs_scope": {"root": "/w"}})).unwrap();
        assert_eq!(r.fs_scope, None);
    }

    #[test]
    fn host_only_fields_are_noticed_even_when_empty() {
        assert!(
            p(json!({"command": "ls", "stdin": ""}))
                .unwrap()
                .has_host_only_fields
        );
        assert!(
            p(json!({"command": "ls", "cwd": "/tmp"}))
                .unwrap()
                .has_host_only_fields
        );
        assert!(
            !p(json!({"command": "ls", "env": {}}))
                .unwrap()
                .has_host_only_fields
        );
    }
}
