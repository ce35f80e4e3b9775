//! The connection to the iii engine through the official `iii-sdk`.
//!
//! Handlers run on the SDK's single-threaded connection runtime, where any
//! blocking work would stall every frame (keepalives included). So every
//! handler registered here only hands its future to the broker's own runtime
//! and awaits the join handle.
#![forbid(unsafe_code)]

use crate::error::ShellError;
use iii_sdk::runtime::WorkerMetadata;
use iii_sdk::{IIIClient, InitOptions, RegisterFunction};
use schemars::JsonSchema;
use serde_json::Value;
use std::future::Future;
use std::time::Duration;
use tokio::runtime::Handle;

/// Where the engine listens when neither `--url` nor `III_URL` says otherwise.
pub const DEFAULT_URL: &str = iii_sdk::DEFAULT_ENGINE_URL;

/// Connects (in the background; the SDK retries every 2 s forever) as worker
/// `ide`, so the engine lists us by name rather than `host:pid`.
pub fn connect(url: &str, token: Option<&str>) -> IIIClient {
    let metadata = WorkerMetadata {
        name: "ide".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        description: Some(
            "Unix commands, background jobs and jailed filesystem operations for the iii engine"
                .into(),
        ),
        ..WorkerMetadata::default()
    };
    let headers = token.map(|t| {
        std::collections::HashMap::from([("Authorization".to_owned(), format!("Bearer {t}"))])
    });
    iii_sdk::register_worker(
        url,
        InitOptions {
            metadata: Some(metadata),
            headers,
            ..InitOptions::default()
        },
    )
}

/// The JSON schema the SDK would publish for `T` (draft-07, schemars 0.8).
pub fn schema_for<T: JsonSchema>() -> Value {
    let root = schemars::r#gen::SchemaSettings::draft07()
        .into_generator()
        .into_root_schema_for::<T>();
    serde_json::to_value(root).unwrap_or(Value::Null)
}

/// A function to register: its id, what it is for, the schemas callers see,
/// and the engine-facing flags (`internal`, …).
pub struct FunctionSpec {
    pub id: &'static str,
    pub description: &'static str,
    pub request: Value,
    pub response: Value,
    pub metadata: Option<Value>,
}

/// Registers `handler` so that it runs on `rt` (never on the SDK runtime).
/// The handler gets the raw input (parsed by the surface itself, so malformed
/// payloads get the surface's own code) and the invocation metadata.
pub fn register<F, Fut>(iii: &IIIClient, rt: &Handle, spec: FunctionSpec, handler: F)
where
    F: Fn(Value, Option<Value>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ShellError>> + Send + 'static,
{
    let rt = rt.clone();
    let id = spec.id;
    let run = move |input: Value, meta: Option<Value>| {
        let task = rt.spawn(handler(input, meta));
        async move {
            match task.await {
                Ok(result) => result.map_err(iii_sdk::Error::from),
                Err(e) => Err(ShellError::internal(format!("{id}: handler failed: {e}")).into()),
            }
        }
    };
    let mut reg = RegisterFunction::new_async(run)
        .description(spec.description)
        .request_format(spec.request)
        .response_format(spec.response);
    if let Some(meta) = spec.metadata {
        reg = reg.metadata(meta);
    }
    iii.register_function(spec.id, reg);
}

/// `host:port` of a `ws://` / `wss://` URL, for log lines that must not echo
/// the raw URL (it may carry credentials in its query).
pub fn host_port(url: &str) -> Option<(String, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let default_port = match scheme {
        "ws" | "http" => 80,
        "wss" | "https" => 443,
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None => default_port,
        };
        return Some((host.to_owned(), port));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => Some((host.to_owned(), port.parse().ok()?)),
        None if !authority.is_empty() => Some((authority.to_owned(), default_port)),
        None => None,
    }
}

/// Logs exactly one ERROR when the engine cannot be reached at boot. Runs
/// detached, so it never delays startup; the SDK keeps retrying regardless.
pub fn spawn_unreachable_probe(url: &str) {
    let Some((host, port)) = host_port(url) else {
        tracing::error!(
            "engine URL {url:?} is not a ws:// or wss:// URL; set --url or the III_URL env var"
        );
        return;
    };
    tokio::spawn(async move {
        for attempt in 0..2 {
            let connect = tokio::net::TcpStream::connect((host.as_str(), port));
            if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(2), connect).await {
                return;
            }
            if attempt == 0 {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        tracing::error!(
            "engine unreachable at {host}:{port} — is the iii engine running? Set --url or the III_URL env var (retrying every 2s)"
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_never_echoes_more_than_the_authority() {
        assert_eq!(
            host_port("ws://127.0.0.1:49134"),
            Some(("127.0.0.1".into(), 49134))
        );
        assert_eq!(
            host_port("wss://engine.example/x?token=s"),
            Some(("engine.example".into(), 443))
        );
        assert_eq!(host_port("ws://user:pw@h:1/"), Some(("h".into(), 1)));
        assert_eq!(host_port("ws://[::1]:9"), Some(("::1".into(), 9)));
        assert_eq!(host_port("ws://h"), Some(("h".into(), 80)));
        assert_eq!(host_port("localhost:49134"), None);
        assert_eq!(host_port("ws://h:notaport"), None);
    }
}
