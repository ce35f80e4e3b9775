//! One worker socket on `/`: the `workerregistered` hello, frame decoding
//! and dispatch, and cleanup when the socket ends.
//!
//! Security meaning: every frame from a worker is untrusted input. Anything
//! that is not valid JSON or not a known message (a non-UUID invocation id
//! included) is logged and dropped, never a panic, exactly as the real engine
//! drops undecodable frames.

#![forbid(unsafe_code)]

use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use iii_sdk::Message;
use serde::Deserialize;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::WebSocketStream;
use uuid::Uuid;

use super::observe;
use super::registry;
use super::router::{self, Call};
use super::state::{ConnId, Shared};
use super::triggers::{self, Registration};

/// What the engine advertises in `workerregistered`.
const FEATURES: [&str; 1] = ["observe.v1"];

/// Serves one worker connection until it closes or the engine stops.
pub(crate) async fn serve(shared: Arc<Shared>, mut ws: WebSocketStream<TcpStream>) {
    let (tx, mut outbound) = mpsc::unbounded_channel();
    let conn = {
        let mut st = shared.lock();
        let (conn, worker_id) = st.connect(tx);
        st.send(
            conn,
            &Message::WorkerRegistered {
                worker_id,
                reattach_token: Some(Uuid::new_v4().to_string()),
                features: FEATURES.iter().map(|f| f.to_string()).collect(),
            },
        );
        conn
    };
    loop {
        tokio::select! {
            frame = ws.next() => match frame {
                Some(Ok(WsMessage::Text(text))) => handle(&shared, conn, text.as_str()),
                Some(Ok(WsMessage::Binary(bytes))) => match std::str::from_utf8(&bytes) {
                    Ok(text) => handle(&shared, conn, text),
                    Err(_) => tracing::warn!("test engine: non-UTF-8 binary frame dropped"),
                },
                Some(Ok(WsMessage::Close(_))) | Some(Err(_)) | None => break,
                Some(Ok(_)) => {}
            },
            out = outbound.recv() => match out {
                Some(frame) => {
                    let closing = matches!(frame, WsMessage::Close(_));
                    if ws.send(frame).await.is_err() || closing {
                        break;
                    }
                }
                None => break,
            },
        }
    }
    registry::connection_gone(&mut shared.lock(), conn);
    shared.registry_changed.notify_waiters();
}

/// Decodes one frame and acts on it.
fn handle(shared: &Arc<Shared>, from: ConnId, text: &str) {
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(error) => {
            tracing::warn!(%error, "test engine: malformed JSON frame dropped");
            return;
        }
    };
    let message = match Message::deserialize(&value) {
        Ok(message) => message,
        Err(error) => {
            tracing::warn!(%error, "test engine: undecodable frame dropped");
            return;
        }
    };
    dispatch(shared, from, message, value, text);
}

fn dispatch(shared: &Arc<Shared>, from: ConnId, message: Message, value: Value, text: &str) {
    match message {
        Message::InvokeFunction {
            invocation_id,
            function_id,
            data,
            traceparent,
            baggage,
            action,
            metadata,
            namespace,
            caller,
            observe_depth,
            activation,
        } => router::from_worker(
            shared,
            from,
            Call {
                invocation_id,
                function_id,
                data,
                traceparent,
                baggage,
                action,
                metadata,
                namespace,
                caller,
                observe_depth,
                activation,
            },
        ),
        Message::InvocationResult {
            invocation_id,
            result,
            error,
            ..
        } => {
            let outcome = match error {
                Some(error) => Err(error),
                None => Ok(result.unwrap_or(Value::Null)),
            };
            router::result_from_worker(shared, from, invocation_id, text.to_string(), outcome);
        }
        Message::RegisterFunction { id, observe, .. } => {
            registry::register(&mut shared.lock(), from, id, value, observe);
            shared.registry_changed.notify_waiters();
        }
        Message::UnregisterFunction { id } => {
            registry::unregister(&mut shared.lock(), from, &id);
            shared.registry_changed.notify_waiters();
        }
        Message::RegisterTrigger {
            id,
            trigger_type,
            function_id,
            config,
            metadata,
            namespace,
            trigger_namespace,
        } => triggers::register(
            &mut shared.lock(),
            from,
            Registration {
                id,
                trigger_type,
                function_id,
                config,
                metadata,
                namespace,
                trigger_namespace,
            },
        ),
        Message::UnregisterTrigger { id, .. } => {
            triggers::unregister(&mut shared.lock(), from, &id);
        }
        Message::RegisterTriggerType { id, .. } => {
            triggers::register_type(&mut shared.lock(), from, &id);
        }
        Message::UnregisterTriggerType { id, .. } => {
            triggers::unregister_type(&mut shared.lock(), from, &id);
        }
        reply @ Message::TriggerRegistrationResult { .. } => {
            if let Message::TriggerRegistrationResult { id, .. } = &reply {
                triggers::provider_result(&shared.lock(), from, id, &reply);
            }
        }
        Message::Ping => shared.lock().send(from, &Message::Pong),
        Message::Observe {
            id,
            source,
            target,
            metadata,
            max_fires,
            ..
        } => observe::observe(
            &mut shared.lock(),
            from,
            observe::Request {
                id,
                source: *source,
                target,
                metadata,
                max_fires,
            },
        ),
        Message::Unobserve { id } => observe::unobserve(&mut shared.lock(), from, &id),
        Message::ObserverAck {
            function_id,
            id,
            revision,
            error,
            ..
        } => observe::ack(&mut shared.lock(), from, &function_id, &id, revision, error),
        Message::InvocationsObserved { items } => {
            observe::observed(&mut shared.lock(), from, items)
        }
        Message::Pong | Message::Reattach { .. } | Message::LocalInvocationStats { .. } => {}
        _ => {
            tracing::debug!(frame = ?value.get("type"), "test engine: frame not meant for an engine ignored");
        }
    }
}
