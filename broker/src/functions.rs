//! Every function the worker registers, in one place, so the surface the
//! engine sees is easy to audit.
#![forbid(unsafe_code)]

use crate::app::App;
use crate::config::status::ConfigStatus;
use crate::engine::{register, schema_for, FunctionSpec};
use crate::error::ShellError;
use ide_proto::JobEvent;
use iii_sdk::IIIClient;
use serde_json::json;
use std::sync::Arc;
use tokio::runtime::Handle;
use tokio::sync::mpsc::UnboundedReceiver;

/// Registers the public surface. Called only once a policy is in force.
pub fn register_all(
    iii: &IIIClient,
    rt: &Handle,
    app: &Arc<App>,
    job_events: UnboundedReceiver<JobEvent>,
) {
    crate::exec::register_functions(iii, rt, app);
    crate::fs::register_functions(iii, rt, app);
    crate::jobs::register_functions(iii, rt, app, job_events);
    register_config_status(iii, rt, app);
}

fn register_config_status(iii: &IIIClient, rt: &Handle, app: &Arc<App>) {
    let app = app.clone();
    register(
        iii,
        rt,
        FunctionSpec {
            id: "shell::config-status",
            description: "Operator only: the last configuration reload outcome (last_outcome, last_error, rejected_reloads).",
            request: json!({"type": "object"}),
            response: schema_for::<ConfigStatus>(),
            metadata: Some(json!({ "internal": true })),
        },
        move |_input, _meta| {
            let app = app.clone();
            async move {
                serde_json::to_value(app.status.snapshot()).map_err(|e| ShellError::internal(e.to_string()))
            }
        },
    );
}
