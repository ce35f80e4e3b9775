//! Functions the engine answers itself: `engine::workers::register`,
//! `engine::channels::create` and `configuration::*`.
//!
//! Security meaning: a second live worker claiming an existing
//! `(namespace, name)` is fatally rejected and closed, as on the real
//! engine, so a test that would collide in production fails here too.

#![forbid(unsafe_code)]

use std::sync::Arc;

use iii_sdk::protocol::{ErrorBody, WORKER_NAMESPACE_CONFLICT};
use iii_sdk::Message;
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::config_events;
use super::router::Call;
use super::state::{ConnId, Shared, State};

/// Answers `call` when it names a built-in; `None` for every other id.
pub(crate) fn handle(
    shared: &Arc<Shared>,
    st: &mut State,
    from: ConnId,
    call: &Call,
) -> Option<Result<Value, ErrorBody>> {
    match call.function_id.as_str() {
        "engine::workers::register" => Some(register_worker(st, from, &call.data)),
        "engine::channels::create" => Some(Ok(st.channels.create(&call.data))),
        id => {
            let function = id.strip_prefix("configuration::")?;
            st.config_calls.push((id.to_string(), call.data.clone()));
            let outcome = st.config.call(function, &call.data)?;
            Some(outcome.map(|(result, change)| {
                if let Some(change) = change {
                    config_events::announce(shared, st, &change, None);
                }
                result
            }))
        }
    }
}

/// Claims the worker's `(namespace, name)`; a live holder wins and the
/// newcomer is rejected and closed.
fn register_worker(st: &mut State, from: ConnId, data: &Value) -> Result<Value, ErrorBody> {
    let text = |key: &str| data.get(key).and_then(Value::as_str).map(str::to_string);
    let namespace = text("namespace").unwrap_or_else(|| "default".to_string());
    let Some(name) = text("name") else {
        return Ok(Value::Null);
    };
    let identity = (namespace.clone(), name.clone());
    let holder = st
        .conns
        .iter()
        .find(|(id, c)| **id != from && c.identity.as_ref() == Some(&identity))
        .map(|(_, c)| c.worker_id.clone());
    if let Some(owner_worker_id) = holder {
        st.send(
            from,
            &Message::RegistrationRejected {
                code: WORKER_NAMESPACE_CONFLICT.to_string(),
                namespace,
                worker_name: Some(name),
                function_id: None,
                owner_worker_id,
            },
        );
        if let Some(conn) = st.conns.get(&from) {
            let _ = conn.tx.send(WsMessage::Close(None));
        }
        return Ok(Value::Null);
    }
    if let Some(conn) = st.conns.get_mut(&from) {
        conn.identity = Some(identity);
    }
    Ok(Value::Null)
}
