//! Boot reconcile with the `configuration` worker, and hot reload.
//!
//! Fail closed: no public function is registered until the stored value is
//! fetched, parsed and turned into a policy. The seed (`--config`, else a
//! carried-over `shell` value, else the built-in default) is sent as
//! `initial_value` only when nothing is stored — the engine's `register`
//! replaces the stored value when it gets one, so sending it on every boot
//! would clobber an operator's `configuration::set`.
#![forbid(unsafe_code)]

use super::schema::config_schema;
use super::seed::builtin_seed;
use crate::app::App;
use crate::engine::{register, FunctionSpec};
use crate::error::ShellError;
use crate::executor::Executor;
use crate::policy::Policy;
use ide_proto::{FsReply, FsRequest, Reply, Request};
use iii_sdk::protocol::{RegisterTriggerInput, TriggerRequest};
use iii_sdk::IIIClient;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Handle;

/// The configuration entry this worker owns (`III_CONFIG_NAME` overrides).
pub const CONFIG_ID: &str = "ide";
/// The entry of the worker's former name, carried over once.
pub const LEGACY_CONFIG_ID: &str = "shell";
/// The internal function the `configuration` trigger calls.
pub const ON_CONFIG_FUNCTION: &str = "shell::on-config-change";

/// The entry id in use.
pub fn config_id() -> String {
    std::env::var("III_CONFIG_NAME")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| CONFIG_ID.to_owned())
}

/// What `configuration::get` said about an entry.
#[derive(Debug)]
enum Stored {
    Value(Value),
    NotFound,
}

/// One `configuration::*` call with the retry budget of wire-shapes §9.1:
/// 5 s per attempt, 3 attempts, 250 / 500 ms apart. Definite answers (any
/// error code from the configuration worker) are not retried.
async fn config_call(
    iii: &IIIClient,
    function: &str,
    payload: Value,
) -> Result<Value, iii_sdk::Error> {
    let mut last = iii_sdk::Error::Timeout;
    for (attempt, pause) in [0u64, 250, 500].into_iter().enumerate() {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
        let call = TriggerRequest {
            timeout_ms: Some(5_000),
            ..TriggerRequest::new(function, payload.clone())
        };
        match iii.trigger(call).await {
            Ok(v) => return Ok(v),
            Err(e @ iii_sdk::Error::Remote { .. }) => return Err(e),
            Err(e) => last = e,
        }
    }
    Err(last)
}

async fn get_stored(iii: &IIIClient, id: &str) -> Result<Stored, String> {
    match config_call(iii, "configuration::get", json!({ "id": id })).await {
        Ok(answer) => Ok(Stored::Value(
            answer.get("value").cloned().unwrap_or(Value::Null),
        )),
        Err(iii_sdk::Error::Remote { code, .. }) if code == "NOT_FOUND" => Ok(Stored::NotFound),
        Err(iii_sdk::Error::Remote { code, message, .. }) if code == "SCHEMA_INVALID" => {
            // Give the operator our own diagnosis (migration hints) when we have one.
            let raw =
                config_call(iii, "configuration::get", json!({ "id": id, "raw": true })).await;
            match raw
                .ok()
                .and_then(|a| a.get("value").cloned())
                .map(|v| super::parse(&v))
            {
                Some(Err(e)) => Err(format!("stored configuration '{id}' is invalid: {e}")),
                _ => Err(format!("stored configuration '{id}' is invalid: {message}")),
            }
        }
        Err(e) => Err(format!("configuration::get '{id}' failed: {e}")),
    }
}

/// The stored `shell` value, when there is one that parses.
async fn legacy_value(iii: &IIIClient) -> Option<Value> {
    match get_stored(iii, LEGACY_CONFIG_ID).await {
        Ok(Stored::Value(v)) => match super::parse(&v) {
            Ok(_) => Some(v),
            Err(e) => {
                tracing::warn!(
                    "not carrying over the stored '{LEGACY_CONFIG_ID}' configuration: {e}"
                );
                None
            }
        },
        _ => None,
    }
}

async fn register_entry(iii: &IIIClient, id: &str, initial: Option<Value>) -> Result<(), String> {
    let mut payload = json!({
        "id": id,
        "name": "IDE",
        "description": "Policy of the ide worker: exec limits, env forwarding, command denylist, fs jail, sandbox, code surface.",
        "schema": config_schema(),
        "metadata": { "ui_form": "ide" },
    });
    if let Some(value) = initial {
        payload["initial_value"] = value;
    }
    config_call(iii, "configuration::register", payload)
        .await
        .map(drop)
        .map_err(|e| format!("configuration::register '{id}' failed: {e}"))
}

/// Finds the authoritative configuration value, registering the entry (and
/// seeding it when nothing is stored).
pub async fn reconcile(
    iii: &IIIClient,
    id: &str,
    seed_file: Option<Value>,
) -> Result<Value, String> {
    match get_stored(iii, id).await? {
        Stored::Value(_) => register_entry(iii, id, None).await?,
        Stored::NotFound => {
            let initial = match legacy_value(iii).await {
                Some(v) => {
                    tracing::info!(
                        "carrying the stored '{LEGACY_CONFIG_ID}' configuration over to '{id}'"
                    );
                    v
                }
                None => seed_file.unwrap_or_else(builtin_seed),
            };
            super::parse(&initial)
                .map_err(|e| format!("the seed configuration is invalid: {e}"))?;
            register_entry(iii, id, Some(initial)).await?;
        }
    }
    match get_stored(iii, id).await? {
        Stored::Value(v) => Ok(v),
        Stored::NotFound => Err(format!(
            "configuration '{id}' vanished right after registration"
        )),
    }
}

/// Turns a configuration value into a policy: parse, let the executor open
/// and canonicalise every jail root (the broker never touches the jail), then
/// validate.
pub async fn build_policy(executor: &Executor, value: &Value) -> Result<Policy, String> {
    let config = super::parse(value).map_err(|e| e.to_string())?;
    let roots = config.fs.host_roots.clone();
    let canonical = if roots.is_empty() {
        Vec::new()
    } else {
        match executor
            .call(Request::Fs(FsRequest::CanonicalRoots { roots }))
            .await
        {
            Ok(Ok(Reply::Fs(FsReply::CanonicalRoots { roots }))) => roots,
            Ok(Ok(other)) => return Err(format!("unexpected executor reply: {other:?}")),
            Ok(Err(e)) => return Err(format!("fs.host_roots: {}", e.message)),
            Err(e) => return Err(format!("cannot check fs.host_roots: {}", e.message)),
        }
    };
    Policy::build(config, canonical).map_err(|e| e.to_string())
}

/// Applies a pushed value, or keeps the last good policy and records why.
pub async fn reload(app: &App, value: &Value) {
    let _serial = app.status.reload_lock.lock().await;
    match build_policy(&app.executor, value).await {
        Ok(next) => {
            if app.snapshot().widens_jail(&next) {
                tracing::warn!("privilege change: the reloaded configuration widens the fs jail");
            }
            app.policy.store(Arc::new(next));
            app.status.applied();
            tracing::info!("configuration reloaded");
        }
        Err(e) => {
            tracing::error!(
                "configuration reload rejected; keeping the last good configuration: {e}"
            );
            app.status.rejected(e);
        }
    }
}

/// Subscribes to changes of our entry, then re-fetches once so a change made
/// between boot reconcile and subscription is not missed.
pub async fn subscribe(
    iii: &IIIClient,
    rt: &Handle,
    app: &Arc<App>,
    id: &str,
) -> Result<(), String> {
    let handler_app = app.clone();
    let our_id = id.to_owned();
    register(
        iii,
        rt,
        FunctionSpec {
            id: ON_CONFIG_FUNCTION,
            description:
                "Internal: applies configuration changes pushed by the configuration worker.",
            request: json!({"type": "object"}),
            response: json!({}),
            metadata: Some(json!({ "internal": true })),
        },
        move |event, _meta| {
            let app = handler_app.clone();
            let our_id = our_id.clone();
            async move {
                if event.get("id").and_then(Value::as_str) == Some(our_id.as_str()) {
                    let value = event.get("new_value").cloned().unwrap_or(Value::Null);
                    reload(&app, &value).await;
                }
                Ok::<Value, ShellError>(Value::Null)
            }
        },
    );
    #[allow(deprecated)]
    iii.register_trigger(RegisterTriggerInput {
        trigger_type: "configuration".into(),
        function_id: ON_CONFIG_FUNCTION.into(),
        config: json!({ "configuration_id": id, "event_types": ["configuration:updated"] }),
        metadata: None,
        namespace: None,
        trigger_namespace: None,
    })
    .map_err(|e| format!("cannot subscribe to configuration changes: {e}"))?;
    match get_stored(iii, id).await? {
        Stored::Value(v) => {
            if super::parse(&v).ok().as_ref() != Some(app.snapshot().config()) {
                reload(app, &v).await;
            }
            Ok(())
        }
        Stored::NotFound => Err(format!("configuration '{id}' vanished during boot")),
    }
}
