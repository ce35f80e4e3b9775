//! Real `iii-sdk` clients for tests, configured around the SDK's traps.
//!
//! Security meaning: none for the product; these clients play the other
//! workers and callers the `ide` worker meets, through the same SDK, so
//! what they see is what production callers see.

#![forbid(unsafe_code)]

use iii_helpers::observability::OtelConfig;
use iii_sdk::protocol::TriggerRequest;
use iii_sdk::runtime::WorkerMetadata;
use iii_sdk::{register_worker, Error, IIIClient, InitOptions, WorkerIdentityMode};
use serde_json::Value;

/// The timeout of [`call`], the SDK's own default.
pub const CALL_TIMEOUT_MS: u64 = 30_000;

/// An SDK client connected to `url` under the worker name `name`.
///
/// Two clients of one process would otherwise share the default name
/// `hostname:pid` (fatally rejected by a real engine), and `III_WORKER_NAME`
/// could override it; OTel is off so no second socket retries in the
/// background. Returns at once; calls made before the connection is up wait
/// in the SDK's queue.
pub fn client(url: &str, name: &str) -> IIIClient {
    register_worker(
        url,
        InitOptions {
            metadata: Some(WorkerMetadata {
                name: name.to_string(),
                ..WorkerMetadata::default()
            }),
            otel: Some(OtelConfig {
                enabled: Some(false),
                ..OtelConfig::default()
            }),
            identity: WorkerIdentityMode::Explicit,
            ..InitOptions::default()
        },
    )
}

/// Calls function `id` with `payload` through the engine (30 s timeout) and
/// returns what the SDK returns: the result, or e.g. `Error::Remote` with
/// the handler's code.
pub async fn call(c: &IIIClient, id: &str, payload: Value) -> Result<Value, Error> {
    c.trigger(TriggerRequest {
        timeout_ms: Some(CALL_TIMEOUT_MS),
        ..TriggerRequest::new(id, payload)
    })
    .await
}
