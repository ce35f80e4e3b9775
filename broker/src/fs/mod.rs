//! `shell::fs::*`: structured filesystem operations on the host (through the
//! executor) or in a sandbox (through `sandbox::fs::*`).
//!
//! Security meaning: the broker decides policy — payload shape, the lexical
//! jail, the protected globs, the mode gate, size caps — and asks the
//! executor, which repeats the confinement physically (`RESOLVE_BENEATH`,
//! `*at` calls on resolved parent fds) and re-checks the denylist on what it
//! opened. Redaction is applied in [`path::fail`]: a missing, denied,
//! denylisted or protected path reads the same, and `S215` is only an
//! escape.
#![forbid(unsafe_code)]

mod change;
mod download;
mod grep;
mod listing;
mod mode;
mod path;
mod read;
mod request;
mod response;
mod sandbox;
mod search;
mod sed;
mod write;

use crate::app::App;
use crate::engine::{register, schema_for, FunctionSpec};
use crate::error::ShellError;
use crate::policy::{CallPolicy, Policy};
use crate::scope;
use crate::target::Target;
use iii_sdk::IIIClient;
use request::{parse, Targeted};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;
use tokio::runtime::Handle;

/// One of the ten operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Ls,
    Stat,
    Mkdir,
    Rm,
    Chmod,
    Mv,
    Grep,
    Sed,
    Write,
    Read,
}

impl Op {
    /// Every operation, in registration order.
    pub const ALL: [Op; 10] = [
        Op::Ls,
        Op::Stat,
        Op::Mkdir,
        Op::Rm,
        Op::Chmod,
        Op::Mv,
        Op::Grep,
        Op::Sed,
        Op::Write,
        Op::Read,
    ];

    /// The unix tool name (`shell::fs::<name>`, `sandbox::fs::<name>`).
    pub fn name(self) -> &'static str {
        match self {
            Op::Ls => "ls",
            Op::Stat => "stat",
            Op::Mkdir => "mkdir",
            Op::Rm => "rm",
            Op::Chmod => "chmod",
            Op::Mv => "mv",
            Op::Grep => "grep",
            Op::Sed => "sed",
            Op::Write => "write",
            Op::Read => "read",
        }
    }

    fn spec(self) -> FunctionSpec {
        use request as q;
        use response as r;
        let (id, description, request, response) = match self {
            Op::Ls => ("shell::fs::ls", "List a directory: entries sorted by name, paginated (page, page_size default 500, max 2000) with total and has_more.", schema_for::<q::LsRequest>(), schema_for::<r::LsResponse>()),
            Op::Stat => ("shell::fs::stat", "One path's metadata (size, mode, mtime, is_dir, is_symlink); links inside the jail are followed.", schema_for::<q::PathRequest>(), schema_for::<r::EntryOut>()),
            Op::Mkdir => ("shell::fs::mkdir", "Create a directory (mode default 0755, parents optional). Returns { created, path, already_existed }.", schema_for::<q::MkdirRequest>(), schema_for::<r::MkdirResponse>()),
            Op::Rm => ("shell::fs::rm", "Remove a file, link or directory (recursive for a non-empty one; links are never followed). Returns { removed, path, was_present }.", schema_for::<q::RmRequest>(), schema_for::<r::RmResponse>()),
            Op::Chmod => ("shell::fs::chmod", "Change a path's mode and optionally uid/gid, optionally recursive (symlinks skipped). Returns { entries_changed, path, recursive }.", schema_for::<q::ChmodRequest>(), schema_for::<r::ChmodResponse>()),
            Op::Mv => ("shell::fs::mv", "Rename or move one path within the jail (overwrite optional). Returns { moved, src, dst, overwrote }.", schema_for::<q::MvRequest>(), schema_for::<r::MvResponse>()),
            Op::Grep => ("shell::fs::grep", "Recursive regex search with include_glob/exclude_glob and ignore_case; structured, bounded matches.", schema_for::<q::GrepRequest>(), schema_for::<r::GrepResponse>()),
            Op::Sed => ("shell::fs::sed", "Regex (or literal) find-and-replace, line by line, across files or a walked directory.", schema_for::<q::SedRequest>(), schema_for::<r::SedResponse>()),
            Op::Write => ("shell::fs::write", "Write a file from inline content (host only) or a channel reference (streamed), atomically; or several with files: [...].", schema_for::<q::WriteRequest>(), schema_for::<r::WriteResponse>()),
            Op::Read => ("shell::fs::read", "Stream a file's bytes out through an SDK channel: returns { content: channel ref, size, mode, mtime }.", schema_for::<q::PathRequest>(), schema_for::<r::ReadResponse>()),
        };
        FunctionSpec {
            id,
            description,
            request,
            response,
            metadata: None,
        }
    }
}

/// Runs one call of `op`.
pub async fn call(app: &App, op: Op, input: &Value) -> Result<Value, ShellError> {
    let policy = app.snapshot();
    let p = &policy;
    // Each operation's host handler, under the call's policy and scope.
    macro_rules! on_host {
        ($handler:path) => {
            route(app, p, op, input, |r, c| async move {
                $handler(app, &c, r).await
            })
            .await
        };
    }
    match op {
        Op::Ls => on_host!(listing::ls),
        Op::Stat => on_host!(listing::stat),
        Op::Mkdir => on_host!(change::mkdir),
        Op::Rm => on_host!(change::rm),
        Op::Chmod => on_host!(change::chmod),
        Op::Mv => on_host!(change::mv),
        Op::Grep => on_host!(grep::grep),
        Op::Sed => on_host!(sed::sed),
        Op::Write => {
            route(app, p, op, input, |r, c| async move {
                write::write(app, &c, write::plan(r)?).await
            })
            .await
        }
        Op::Read => on_host!(read::read),
    }
}

/// Parses the payload (`S210` when malformed), then runs it on the host
/// under the call's validated session scope, or forwards it to the sandbox
/// it targets (where the harness's host scope means nothing).
async fn route<R, F, Fut, T>(
    app: &App,
    policy: &Arc<Policy>,
    op: Op,
    input: &Value,
    host: F,
) -> Result<Value, ShellError>
where
    R: DeserializeOwned + Targeted,
    F: FnOnce(R, CallPolicy) -> Fut,
    Fut: Future<Output = Result<T, ShellError>>,
    T: Serialize,
{
    let req: R = parse(op.name(), input)?;
    match req.target()? {
        Target::Host => {
            let scope = match scope::parse(input)? {
                Some(s) => Some(scope::validate(app, policy, s, scope::Surface::Fs).await?),
                None => None,
            };
            json(host(req, CallPolicy::new(policy.clone(), scope)).await?)
        }
        Target::Sandbox { sandbox_id } => {
            req.check_sandbox()?;
            sandbox::forward(app, policy, op.name(), input, &sandbox_id).await
        }
    }
}

fn json(value: impl Serialize) -> Result<Value, ShellError> {
    serde_json::to_value(value).map_err(|e| ShellError::internal(e.to_string()))
}

/// Registers the ten `shell::fs::*` functions.
pub fn register_functions(iii: &IIIClient, rt: &Handle, app: &Arc<App>) {
    for op in Op::ALL {
        let app = app.clone();
        register(iii, rt, op.spec(), move |input, _meta| {
            let app = app.clone();
            async move { call(&app, op, &input).await }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_has_a_distinct_function_id_under_shell_fs() {
        let ids: std::collections::BTreeSet<_> = Op::ALL.iter().map(|op| op.spec().id).collect();
        assert_eq!(ids.len(), 10);
        for op in Op::ALL {
            assert_eq!(op.spec().id, format!("shell::fs::{}", op.name()));
        }
    }

    #[test]
    fn sandbox_writes_take_channel_references_only() {
        let check = |v: Value| {
            parse::<request::WriteRequest>("write", &v)
                .unwrap()
                .check_sandbox()
        };
        let inline = serde_json::json!({"path": "/x", "content": "text"});
        assert_eq!(check(inline).unwrap_err().code().as_deref(), Some("S210"));
        let batch = serde_json::json!({"files": [{"path": "/x", "content": {"channel_id": "c", "access_key": "k"}}, {"path": "/y", "content": "t"}]});
        assert!(check(batch).is_err());
        let streamed = serde_json::json!({"path": "/x", "content": {"channel_id": "c", "access_key": "k", "direction": "read"}});
        assert!(check(streamed).is_ok());
    }
}
