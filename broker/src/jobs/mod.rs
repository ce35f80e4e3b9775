//! Background jobs: `shell::exec_bg`, `shell::status`, `shell::list`,
//! `shell::kill`, `shell::kill-session-jobs` and the observable
//! `shell::on-job-finished`.
//!
//! The executor owns every job (process group, output, record), so these
//! handlers keep no job state of their own and a restarted broker needs
//! nothing re-learned: it adopts the executor, answers from its table, and
//! receives the completions that happened while it was away.
//!
//! Security meaning: the same policy gates as `shell::exec` apply to every
//! start; `kill-session-jobs` is internal (the harness's, not agents'); the
//! session a job is stamped with grants nothing but being killed with it;
//! and observers only ever receive the completion event, never output.
#![forbid(unsafe_code)]

pub mod delivery;
pub mod observers;
pub mod query;
pub mod request;
pub mod response;
pub mod start;

use crate::app::App;
use crate::engine::{register, schema_for, FunctionSpec};
use crate::error::ShellError;
use crate::exec::request::ExecRequestSchema;
use ide_proto::JobEvent;
use iii_sdk::{IIIClient, Observe, RegisterFunction};
use observers::{Lookup, ObserveArgs, Observers};
use response::{
    Completion, KillResponse, KillSessionJobsResponse, ListResponse, Started, StatusResponse,
};
use serde::Serialize;
use serde_json::{json, Value};
use std::future::Future;
use std::sync::Arc;
use tokio::runtime::Handle;
use tokio::sync::mpsc::UnboundedReceiver;

/// The observable completion function.
pub const ON_JOB_FINISHED: &str = "shell::on-job-finished";

fn to_value<T: Serialize>(v: T) -> Result<Value, ShellError> {
    serde_json::to_value(v).map_err(|e| ShellError::internal(e.to_string()))
}

/// Registers one handler that gets the app, the payload and the metadata.
fn handler<Fut, T>(
    iii: &IIIClient,
    rt: &Handle,
    app: &Arc<App>,
    spec: FunctionSpec,
    f: fn(Arc<App>, Value, Option<Value>) -> Fut,
) where
    Fut: Future<Output = Result<T, ShellError>> + Send + 'static,
    T: Serialize,
{
    let app = app.clone();
    register(iii, rt, spec, move |input, meta| {
        let done = f(app.clone(), input, meta);
        async move { to_value(done.await?) }
    });
}

/// Registers the job functions and starts completion delivery and the
/// retention reaper. `events` carries what the executor reports unasked.
pub fn register_functions(
    iii: &IIIClient,
    rt: &Handle,
    app: &Arc<App>,
    events: UnboundedReceiver<JobEvent>,
) {
    handler(
        iii,
        rt,
        app,
        FunctionSpec {
            id: "shell::exec_bg",
            description: "Start a command as a background job; returns { job_id, argv } at once. \
                Optional caller-chosen job_id (observe shell::on-job-finished first). Same \
                host-only cwd/env/stdin and denylist as shell::exec.",
            request: exec_bg_schema(),
            response: schema_for::<Started>(),
            metadata: None,
        },
        |app, input, meta| async move { start::exec_bg(&app, &input, meta.as_ref()).await },
    );
    handler(
        iii,
        rt,
        app,
        FunctionSpec {
            id: "shell::status",
            description: "One background job's full record: state, exit code, captured \
                stdout/stderr and timing. Optional stdout_offset/stderr_offset/max_bytes page \
                through long output. Unknown or pruned id: S211.",
            request: schema_for::<request::StatusRequest>(),
            response: schema_for::<StatusResponse>(),
            metadata: None,
        },
        |app, input, _| async move { query::status(&app, &input).await },
    );
    handler(
        iii,
        rt,
        app,
        FunctionSpec {
            id: "shell::list",
            description:
                "Every background job as a lightweight summary (no argv, stdout or stderr).",
            request: schema_for::<request::ListRequest>(),
            response: schema_for::<ListResponse>(),
            metadata: None,
        },
        |app, _, _| async move { query::list(&app).await },
    );
    handler(
        iii,
        rt,
        app,
        FunctionSpec {
            id: "shell::kill",
            description: "Terminate a running background job (its whole process group). \
                Sandbox jobs are only marked killed.",
            request: schema_for::<request::KillRequest>(),
            response: schema_for::<KillResponse>(),
            metadata: None,
        },
        |app, input, _| async move { query::kill(&app, &input).await },
    );
    handler(
        iii,
        rt,
        app,
        FunctionSpec {
            id: "shell::kill-session-jobs",
            description: "Harness-internal: kill every running background job owned by the \
                given sessions; returns { killed }.",
            request: schema_for::<request::KillSessionJobsRequest>(),
            response: schema_for::<KillSessionJobsResponse>(),
            metadata: Some(json!({ "internal": true })),
        },
        |app, input, _| async move { query::kill_session_jobs(&app, &input).await },
    );

    let lookup_app = app.clone();
    let lookup: Lookup = Arc::new(move |job_id| {
        let app = lookup_app.clone();
        Box::pin(async move { query::completion(&app, job_id).await })
    });
    let observers = Observers::new(rt.clone(), lookup);
    let function = iii.register_function(
        ON_JOB_FINISHED,
        RegisterFunction::new_async(|event: Value, _meta: Option<Value>| async move {
            Ok::<Value, iii_sdk::Error>(event)
        })
        .description(
            "Observable: a background job finished, was killed, or failed. Args { job_id? }; \
             an observer of one job added after it finished gets the retained completion.",
        )
        .request_format(schema_for::<Completion>())
        .response_format(schema_for::<Completion>())
        .observe(
            Observe::owner()
                .args_format::<ObserveArgs>()
                .handler(observers.clone()),
        ),
    );
    rt.spawn(delivery::run(
        app.clone(),
        observers,
        move || function.observers(),
        events,
    ));
    rt.spawn(delivery::reap(app.clone()));
}

/// The `shell::exec` request schema plus `job_id`.
fn exec_bg_schema() -> Value {
    let mut schema = schema_for::<ExecRequestSchema>();
    if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        props.insert(
            "job_id".into(),
            json!({
                "description": "Caller-chosen job id (at least one non-whitespace character); \
                    omitted or null: job-<uuid>. Rejected if a running or retained job has it.",
                "type": ["string", "null"]
            }),
        );
    }
    schema
}
