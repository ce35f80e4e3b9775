//! Invocation routing: a worker's `invokefunction` goes to a built-in, to an
//! observer's target (owner delivery) or to the function's owner under the
//! same invocation id, and the owner's `invocationresult` comes back to the
//! caller byte for byte.
//!
//! Security meaning: the worker under test sees what the real engine sends
//! it: `_caller_worker_id` injected into every object payload a worker sends
//! (never into calls the engine makes itself), errors relayed verbatim, a
//! call whose handler vanished answered with `invocation_stopped`, and a
//! result accepted only from the connection the call was routed to.

#![forbid(unsafe_code)]

use std::sync::Arc;

use iii_sdk::protocol::ErrorBody;
use iii_sdk::{Activation, Caller, Message, TriggerAction};
use serde_json::Value;
use tokio::sync::oneshot;
use uuid::Uuid;

use super::builtins;
use super::observe;
use super::state::{ConnId, Pending, Shared, State};

/// The fields of an `invokefunction` a worker sent.
pub(crate) struct Call {
    pub invocation_id: Option<Uuid>,
    pub function_id: String,
    pub data: Value,
    pub traceparent: Option<String>,
    pub baggage: Option<String>,
    pub action: Option<TriggerAction>,
    pub metadata: Option<Value>,
    pub namespace: Option<String>,
    pub caller: Option<Box<Caller>>,
    pub observe_depth: Option<u32>,
    pub activation: Option<Activation>,
}

/// An `invocationresult` for `invocation_id`.
pub(crate) fn reply(
    invocation_id: Uuid,
    function_id: &str,
    outcome: Result<Value, ErrorBody>,
) -> Message {
    let (result, error) = match outcome {
        Ok(value) => (Some(value), None),
        Err(error) => (None, Some(error)),
    };
    Message::InvocationResult {
        invocation_id,
        function_id: function_id.to_string(),
        result,
        error,
        traceparent: None,
        baggage: None,
    }
}

/// `data` with `_caller_worker_id` added when it is an object.
fn with_caller_id(mut data: Value, worker_id: &str) -> Value {
    if let Some(map) = data.as_object_mut() {
        map.insert("_caller_worker_id".into(), Value::String(worker_id.into()));
    }
    data
}

/// The caller as the engine stamps it: the SDK's assertion plus the
/// connection's own worker id and name.
pub(crate) fn stamped_caller(
    st: &State,
    from: ConnId,
    asserted: Option<Box<Caller>>,
) -> Box<Caller> {
    let mut caller = asserted.unwrap_or_default();
    let conn = st.conns.get(&from);
    caller.worker_id = conn.map(|c| c.worker_id.clone());
    caller.worker_name = conn.and_then(|c| c.identity.as_ref().map(|(_, name)| name.clone()));
    caller
}

/// Handles one `invokefunction` from worker `from`.
pub(crate) fn from_worker(shared: &Arc<Shared>, from: ConnId, call: Call) {
    let mut st = shared.lock();
    if let Some(outcome) = builtins::handle(shared, &mut st, from, &call) {
        if let Some(id) = call.invocation_id {
            st.send(from, &reply(id, &call.function_id, outcome));
        }
        return;
    }
    if call.activation.is_some() {
        observe::owner_call(&mut st, from, call);
        return;
    }
    if let Some(TriggerAction::Enqueue { queue }) = &call.action {
        if let Some(id) = call.invocation_id {
            let error = ErrorBody::new(
                "enqueue_error",
                format!("no queue provider is registered for queue '{queue}'"),
            );
            st.send(from, &reply(id, &call.function_id, Err(error)));
        }
        return;
    }
    let Some(target) = st.owner(&call.function_id) else {
        if let Some(id) = call.invocation_id {
            let namespace = call.namespace.as_deref().unwrap_or("default");
            let error = ErrorBody::new(
                "function_not_found",
                format!(
                    "Function {} not found in namespace {namespace}.",
                    call.function_id
                ),
            );
            st.send(from, &reply(id, &call.function_id, Err(error)));
        }
        return;
    };
    let worker_id = st.worker_id(from);
    let caller = stamped_caller(&st, from, call.caller);
    if let Some(id) = call.invocation_id {
        let observed = observe::routed_call(
            &st,
            &call.function_id,
            id,
            &call.data,
            &call.metadata,
            &caller,
            call.observe_depth.unwrap_or(0),
        );
        st.pending.insert(
            id,
            Pending::Relay {
                caller: from,
                target,
                function_id: call.function_id.clone(),
                observed,
            },
        );
    }
    st.send(
        target,
        &Message::InvokeFunction {
            invocation_id: call.invocation_id,
            function_id: call.function_id,
            data: with_caller_id(call.data, &worker_id),
            traceparent: call.traceparent,
            baggage: call.baggage,
            action: None,
            metadata: call.metadata,
            namespace: None,
            caller: Some(caller),
            observe_depth: call.observe_depth,
            activation: None,
        },
    );
}

/// Handles one `invocationresult` from worker `from`; `raw` is relayed as is.
pub(crate) fn result_from_worker(
    shared: &Shared,
    from: ConnId,
    invocation_id: Uuid,
    raw: String,
    outcome: Result<Value, ErrorBody>,
) {
    let mut st = shared.lock();
    let Some(pending) = st.pending.remove(&invocation_id) else {
        tracing::debug!(%invocation_id, "test engine: result for no pending call dropped");
        return;
    };
    match pending {
        Pending::Relay { target, .. }
        | Pending::Discard { target }
        | Pending::Engine { target, .. }
            if target != from =>
        {
            tracing::warn!(%invocation_id, "test engine: result from a worker the call was not sent to");
            st.pending.insert(invocation_id, pending);
        }
        Pending::Relay {
            caller,
            function_id,
            observed,
            ..
        } => {
            st.send_text(caller, raw);
            if let Some(observed) = observed {
                observe::routed_finished(&mut st, &function_id, *observed, &outcome);
            }
        }
        Pending::Engine { reply, .. } => {
            let _ = reply.send(outcome);
        }
        Pending::Discard { .. } => {}
    }
}

/// An invocation the engine makes itself (no `_caller_worker_id`).
pub(crate) struct EngineCall {
    pub function_id: String,
    pub data: Value,
    pub metadata: Option<Value>,
    pub activation: Option<Activation>,
    pub observe_depth: Option<u32>,
}

fn engine_caller() -> Box<Caller> {
    Box::new(Caller {
        worker_name: Some("iii-engine".into()),
        ..Caller::default()
    })
}

/// Sends `call` to its function's owner; `register` decides who waits.
fn send_engine_call(
    st: &mut State,
    call: EngineCall,
    register: impl FnOnce(ConnId) -> Pending,
) -> Result<(), ErrorBody> {
    let target = st.owner(&call.function_id).ok_or_else(|| {
        ErrorBody::new(
            "function_not_found",
            format!(
                "Function {} not found in namespace default.",
                call.function_id
            ),
        )
    })?;
    let invocation_id = Uuid::new_v4();
    st.pending.insert(invocation_id, register(target));
    st.send(
        target,
        &Message::InvokeFunction {
            invocation_id: Some(invocation_id),
            function_id: call.function_id,
            data: call.data,
            traceparent: None,
            baggage: None,
            action: None,
            metadata: call.metadata,
            namespace: None,
            caller: Some(engine_caller()),
            observe_depth: call.observe_depth,
            activation: call.activation,
        },
    );
    Ok(())
}

/// Calls a function as the engine and waits for its result.
pub(crate) async fn invoke(shared: &Shared, call: EngineCall) -> Result<Value, ErrorBody> {
    let (tx, rx) = oneshot::channel();
    send_engine_call(&mut shared.lock(), call, |target| Pending::Engine {
        target,
        reply: tx,
    })?;
    rx.await.unwrap_or_else(|_| {
        Err(ErrorBody::new(
            "invocation_stopped",
            "the engine stopped before the invocation finished",
        ))
    })
}

/// Calls a function as the engine without waiting; its result is dropped.
/// False when the function is not registered (nothing was sent).
pub(crate) fn invoke_detached(st: &mut State, call: EngineCall) -> bool {
    let function_id = call.function_id.clone();
    match send_engine_call(st, call, |target| Pending::Discard { target }) {
        Ok(()) => true,
        Err(error) => {
            tracing::debug!(%function_id, code = %error.code, "test engine: detached call not sent");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn caller_id_is_added_to_objects_only() {
        assert_eq!(
            with_caller_id(json!({"a": 1}), "w"),
            json!({"a": 1, "_caller_worker_id": "w"})
        );
        assert_eq!(with_caller_id(json!([1]), "w"), json!([1]));
        assert_eq!(with_caller_id(json!("s"), "w"), json!("s"));
    }

    #[test]
    fn replies_carry_either_result_or_error() {
        let id = Uuid::new_v4();
        let ok = serde_json::to_value(reply(id, "f", Ok(json!(1)))).unwrap();
        assert_eq!(ok["result"], json!(1));
        assert!(ok.get("error").is_none());
        let err = serde_json::to_value(reply(id, "f", Err(ErrorBody::new("X", "m")))).unwrap();
        assert_eq!(err["error"], json!({"code": "X", "message": "m"}));
        assert!(err.get("result").is_none());
        assert_eq!(err["invocation_id"], json!(id.to_string()));
    }
}
