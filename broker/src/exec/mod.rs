//! `shell::exec`: run a command in the foreground and return its output.
//!
//! Order of checks: parse (`S210`), the advisory denylist (a plain message),
//! then the target's own gates, then the executor. Nothing runs unless every
//! check passed.
#![forbid(unsafe_code)]

pub mod confine;
pub mod host;
pub mod request;
pub mod response;
pub mod sandbox;

use crate::app::App;
use crate::engine::{register, schema_for, FunctionSpec};
use crate::error::ShellError;
use crate::target::Target;
use iii_sdk::IIIClient;
use request::ExecRequestSchema;
use response::ExecResponse;
use serde_json::Value;
use std::sync::Arc;
use tokio::runtime::Handle;

/// Runs one `shell::exec` call.
pub async fn exec(app: &App, input: &Value) -> Result<ExecResponse, ShellError> {
    let policy = app.snapshot();
    let req = request::parse("exec", input)?;
    if let Some(pattern) = policy.denylist().check(&req.argv) {
        return Err(ShellError::denylisted(pattern));
    }
    match req.target.clone() {
        Target::Host => host::run(app, &policy, req).await,
        Target::Sandbox { sandbox_id } => sandbox::run(app, &policy, &sandbox_id, req).await,
    }
}

/// Registers `shell::exec`.
pub fn register_functions(iii: &IIIClient, rt: &Handle, app: &Arc<App>) {
    let app = app.clone();
    register(
        iii,
        rt,
        FunctionSpec {
            id: "shell::exec",
            description:
                "Run a command in the foreground; returns stdout, stderr, exit code and timing. \
                          Blocks until exit or timeout. Host-only cwd/env/stdin.",
            request: schema_for::<ExecRequestSchema>(),
            response: schema_for::<ExecResponse>(),
            metadata: None,
        },
        move |input, _meta| {
            let app = app.clone();
            async move {
                let response = exec(&app, &input).await?;
                serde_json::to_value(response).map_err(|e| ShellError::internal(e.to_string()))
            }
        },
    );
}
