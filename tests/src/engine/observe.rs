//! The `observe.v1` subset: observers announced to the function's owner,
//! activated by its `observerack`, fired by its `invocationsobserved` reports
//! and owner `call`s (owner delivery) or by the engine's own routed calls of
//! the function (auto delivery), and removed with `unobserve`, `max_fires`
//! or the observing connection.
//!
//! Security meaning: an observer is only delivered to while its owner has
//! accepted it, only on reports from the connection that owns the observed
//! function, and only to its own target; a rejected observer ends in
//! `error`, so tests of the worker's observe hooks see the production
//! lifecycle (including a rejection code such as `INVALID_PATH`).

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use iii_sdk::protocol::{
    default_capture, observe_codes, Delivery, ErrorBody, ObserveDescriptor, ObserveSource,
    ObserveTarget, ObservedItem, ObserverView,
};
use iii_sdk::{
    Activation, Caller, Capture, Deliver, Doc, Filter, InvocationStatus, Message, ObserverState, On,
};
use serde_json::{json, Map, Value};
use uuid::Uuid;

use super::router::{self, Call, EngineCall};
use super::schema::violations;
use super::state::{ConnId, Pending, State};

/// The namespace every function lives in on this engine.
const NAMESPACE: &str = "default";

struct Observer {
    /// The observing worker.
    conn: ConnId,
    function_id: String,
    view: ObserverView,
    deliver: Deliver,
    metadata: Option<Value>,
    max_fires: Option<u64>,
    fires: u64,
    state: ObserverState,
    /// The revision at which the owner last heard of it; `None` while the
    /// owner does not hold it.
    announced: Option<u64>,
    /// Its `observeresult` was sent; later changes are `observerstatechanged`.
    answered: bool,
}

/// Every observer, by its client-chosen id.
#[derive(Default)]
pub(crate) struct Observers {
    map: HashMap<String, Observer>,
}

/// An `observe` frame's fields.
pub(crate) struct Request {
    pub id: String,
    pub source: ObserveSource,
    pub target: ObserveTarget,
    pub metadata: Option<Value>,
    pub max_fires: Option<u64>,
}

fn coded(code: &str, message: impl Into<String>) -> ErrorBody {
    ErrorBody::new(code, message)
}

/// Moves observer `id` to `state` and tells its observing worker.
fn transition(st: &mut State, id: &str, state: ObserverState, reason: Option<ErrorBody>) {
    let Some(obs) = st.observers.map.get_mut(id) else {
        return;
    };
    obs.state = state.clone();
    let message = if obs.answered {
        Message::ObserverStateChanged {
            id: id.to_string(),
            state,
            reason,
            fires: obs.fires,
        }
    } else {
        obs.answered = true;
        Message::ObserveResult {
            id: id.to_string(),
            state,
            error: reason,
            warnings: Vec::new(),
        }
    };
    let conn = obs.conn;
    st.send(conn, &message);
}

/// Whether a function with `descriptor` accepts an observer with `args`.
fn check_args(descriptor: &ObserveDescriptor, args: &Value) -> Result<(), ErrorBody> {
    if descriptor.allow == Some(false) {
        return Err(coded(
            observe_codes::NOT_OBSERVABLE,
            "this function refuses observers",
        ));
    }
    let no_args = args.as_object().is_some_and(Map::is_empty);
    match (&descriptor.delivery, &descriptor.args_format) {
        (Some(Delivery::Owner), Some(format)) => match violations(format, args) {
            Ok(found) if found.is_empty() => Ok(()),
            Ok(found) => Err(coded(observe_codes::INVALID_ARGS, found.join("; "))),
            Err(broken) => Err(coded(observe_codes::INVALID_ARGS, broken)),
        },
        _ if no_args => Ok(()),
        _ => Err(coded(
            observe_codes::INVALID_ARGS,
            "this function takes no observer args",
        )),
    }
}

/// Bumps `function_id`'s observer-set revision.
fn next_revision(st: &mut State, function_id: &str) -> Option<u64> {
    st.functions.get_mut(function_id).map(|f| {
        f.revision += 1;
        f.revision
    })
}

/// Tells the owner, if it holds observer `id`, that it is gone.
fn tell_owner_removed(st: &mut State, function_id: &str, id: &str, announced: Option<u64>) {
    if announced.is_none() {
        return;
    }
    let (Some(owner), Some(revision)) = (st.owner(function_id), next_revision(st, function_id))
    else {
        return;
    };
    st.send(
        owner,
        &Message::ObserverRemoved {
            function_id: function_id.to_string(),
            namespace: NAMESPACE.to_string(),
            revision,
            id: id.to_string(),
        },
    );
}

/// Removes observer `id` for good, telling its owner and its worker.
fn dispose(st: &mut State, id: &str, code: &str, message: &str) {
    let Some(obs) = st.observers.map.remove(id) else {
        return;
    };
    tell_owner_removed(st, &obs.function_id, id, obs.announced);
    st.send(
        obs.conn,
        &Message::ObserverStateChanged {
            id: id.to_string(),
            state: ObserverState::Disposed,
            reason: Some(coded(code, message)),
            fires: obs.fires,
        },
    );
}

/// Offers observer `id` to its function's owner, or leaves it pending.
fn attach(st: &mut State, id: &str) {
    let Some(obs) = st.observers.map.get(id) else {
        return;
    };
    let function_id = obs.function_id.clone();
    let Some(function) = st.functions.get(&function_id) else {
        transition(st, id, ObserverState::Pending, None);
        return;
    };
    if let Err(error) = check_args(&function.observe, &obs.view.args) {
        transition(st, id, ObserverState::Error, Some(error));
        return;
    }
    let owner = function.conn;
    let view = obs.view.clone();
    let Some(revision) = next_revision(st, &function_id) else {
        return;
    };
    if let Some(obs) = st.observers.map.get_mut(id) {
        obs.announced = Some(revision);
    }
    st.send(
        owner,
        &Message::ObserverAdded {
            function_id,
            namespace: NAMESPACE.to_string(),
            revision,
            observer: view,
        },
    );
}

/// Handles `observe` from worker `from`.
pub(crate) fn observe(st: &mut State, from: ConnId, req: Request) {
    if let Some(existing) = st.observers.map.get(&req.id) {
        if existing.conn == from {
            let state = existing.state.clone();
            st.send(
                from,
                &Message::ObserveResult {
                    id: req.id,
                    state,
                    error: None,
                    warnings: Vec::new(),
                },
            );
        } else {
            st.send(
                from,
                &Message::ObserveResult {
                    id: req.id.clone(),
                    state: ObserverState::Error,
                    error: Some(coded(
                        observe_codes::OBSERVER_ID_CONFLICT,
                        format!("observer id {} is taken by another worker", req.id),
                    )),
                    warnings: Vec::new(),
                },
            );
        }
        return;
    }
    let filters = match req.source.filters.as_ref().map(Filter::parse).transpose() {
        Ok(filter) => filter.map_or_else(|| json!({}), |f| f.normalized().clone()),
        Err(error) => {
            st.send(
                from,
                &Message::ObserveResult {
                    id: req.id,
                    state: ObserverState::Error,
                    error: Some(coded(error.code.as_str(), error.message)),
                    warnings: Vec::new(),
                },
            );
            return;
        }
    };
    let view = ObserverView {
        id: req.id.clone(),
        args: req.source.args.unwrap_or_else(|| json!({})),
        filters,
        target: req.target.function_id,
        capture: req.source.capture.unwrap_or_else(default_capture),
        on: req.source.on.unwrap_or_default(),
        legacy: None,
    };
    st.observers.map.insert(
        req.id.clone(),
        Observer {
            conn: from,
            function_id: req.source.function_id,
            view,
            deliver: req.source.deliver.unwrap_or_default(),
            metadata: req.metadata,
            max_fires: req.max_fires,
            fires: 0,
            state: ObserverState::Pending,
            announced: None,
            answered: false,
        },
    );
    attach(st, &req.id);
}

/// Handles `unobserve` from worker `from`.
pub(crate) fn unobserve(st: &mut State, from: ConnId, id: &str) {
    match st.observers.map.get(id) {
        Some(obs) if obs.conn == from => dispose(st, id, observe_codes::UNOBSERVED, "unobserved"),
        Some(_) => {}
        None => st.send(
            from,
            &Message::ObserverStateChanged {
                id: id.to_string(),
                state: ObserverState::Disposed,
                reason: Some(coded(observe_codes::UNOBSERVED, "unobserved")),
                fires: 0,
            },
        ),
    }
}

/// Handles `observerack` from worker `from`: the owner accepted or
/// rejected the observer announced at `revision`.
pub(crate) fn ack(
    st: &mut State,
    from: ConnId,
    function_id: &str,
    id: &str,
    revision: u64,
    error: Option<ErrorBody>,
) {
    let current = st
        .observers
        .map
        .get(id)
        .is_some_and(|obs| obs.function_id == function_id && obs.announced == Some(revision));
    if !current || st.owner(function_id) != Some(from) {
        tracing::debug!(%function_id, %id, revision, "test engine: stale observerack ignored");
        return;
    }
    let state = st.observers.map.get(id).map(|o| o.state.clone());
    match error {
        Some(error) => transition(st, id, ObserverState::Error, Some(error)),
        None if state == Some(ObserverState::Pending) => {
            transition(st, id, ObserverState::Active, None)
        }
        None => {}
    }
}

/// The observer set sent in `functionregistered` for a freshly registered
/// function (revision 1); observers whose args it refuses end in `error`.
pub(crate) fn function_registered(st: &mut State, function_id: &str) -> Vec<ObserverView> {
    let Some(descriptor) = st.functions.get(function_id).map(|f| f.observe.clone()) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = st
        .observers
        .map
        .iter()
        .filter(|(_, o)| o.function_id == function_id && o.state != ObserverState::Error)
        .map(|(id, _)| id.clone())
        .collect();
    ids.sort();
    let mut views = Vec::new();
    for id in ids {
        let Some(obs) = st.observers.map.get_mut(&id) else {
            continue;
        };
        match check_args(&descriptor, &obs.view.args) {
            Ok(()) => {
                obs.announced = Some(1);
                views.push(obs.view.clone());
            }
            Err(error) => transition(st, &id, ObserverState::Error, Some(error)),
        }
    }
    views
}

/// The owner of `function_id` is gone: its observers wait for the next one.
pub(crate) fn function_gone(st: &mut State, function_id: &str) {
    let ids: Vec<String> = st
        .observers
        .map
        .iter()
        .filter(|(_, o)| o.function_id == function_id)
        .map(|(id, _)| id.clone())
        .collect();
    for id in ids {
        let Some(obs) = st.observers.map.get_mut(&id) else {
            continue;
        };
        obs.announced = None;
        if obs.state == ObserverState::Active {
            let reason = coded(
                observe_codes::OWNER_UNAVAILABLE,
                format!("the owner of {function_id} is gone"),
            );
            transition(st, &id, ObserverState::Pending, Some(reason));
        }
    }
}

/// The observing worker `conn` is gone: its observers are removed.
pub(crate) fn connection_gone(st: &mut State, conn: ConnId) {
    let ids: Vec<String> = st
        .observers
        .map
        .iter()
        .filter(|(_, o)| o.conn == conn)
        .map(|(id, _)| id.clone())
        .collect();
    for id in ids {
        if let Some(obs) = st.observers.map.remove(&id) {
            tell_owner_removed(st, &obs.function_id, &id, obs.announced);
        }
    }
}

fn wants(on: &On, status: &InvocationStatus) -> bool {
    match on {
        On::Success => *status == InvocationStatus::Success,
        On::Error => *status == InvocationStatus::Error,
        On::Complete => true,
        On::Unknown(_) => false,
    }
}

/// What the target receives for `item`, per the observer's `deliver` and
/// `capture`. An emitted event carries no output: `deliver: output` then
/// gets the event itself (its input).
fn delivered(obs: &Observer, item: &ObservedItem, activation_id: &str) -> Value {
    match &obs.deliver {
        Deliver::Input => item.input.clone().unwrap_or(Value::Null),
        Deliver::Output => item
            .output
            .clone()
            .or_else(|| item.input.clone())
            .unwrap_or(Value::Null),
        Deliver::Envelope | Deliver::Unknown(_) => {
            let mut envelope = json!({
                "observer_id": obs.view.id,
                "activation_id": activation_id,
                "function_id": item.function_id,
                "invocation_id": item.invocation_id,
                "status": item.status,
                "started_at_ms": item.started_at_ms,
                "duration_ms": item.duration_ms,
            });
            let Some(map) = envelope.as_object_mut() else {
                return envelope;
            };
            if let Some(namespace) = &item.namespace {
                map.insert("namespace".into(), json!(namespace));
            }
            let captured = |c: Capture| obs.view.capture.contains(&c);
            let parts = [
                (Capture::Input, "input", item.input.clone()),
                (Capture::Output, "output", item.output.clone()),
                (Capture::Error, "error", item.error.clone()),
                (
                    Capture::Caller,
                    "caller",
                    item.caller.as_ref().map(|c| json!(c)),
                ),
                (Capture::Metadata, "metadata", item.metadata.clone()),
            ];
            for (capture, key, value) in parts {
                if let (true, Some(value)) = (captured(capture), value) {
                    map.insert(key.into(), value);
                }
            }
            envelope
        }
    }
}

/// Counts one activation; disposes of the observer when its fires run out.
fn fired(st: &mut State, id: &str) {
    let Some(obs) = st.observers.map.get_mut(id) else {
        return;
    };
    obs.fires += 1;
    if obs.max_fires.is_some_and(|max| obs.fires >= max) {
        dispose(st, id, observe_codes::MAX_FIRES, "max_fires reached");
    }
}

/// Sends observer `id` one activation for `item` and counts it.
fn activate(st: &mut State, id: &str, item: &ObservedItem) {
    let Some(obs) = st.observers.map.get(id) else {
        return;
    };
    let activation_id = Uuid::new_v4().to_string();
    let call = EngineCall {
        function_id: obs.view.target.clone(),
        data: delivered(obs, item, &activation_id),
        metadata: obs.metadata.clone(),
        activation: Some(Activation {
            observer_id: id.to_string(),
            activation_id: Some(activation_id),
        }),
        observe_depth: Some(item.observe_depth + 1),
    };
    if router::invoke_detached(st, call) {
        fired(st, id);
    }
}

/// Handles `invocationsobserved` from worker `from`: every matched observer
/// that is active on a function `from` owns gets one activation.
pub(crate) fn observed(st: &mut State, from: ConnId, items: Vec<ObservedItem>) {
    for item in items {
        if st.owner(&item.function_id) != Some(from) {
            tracing::debug!(function_id = %item.function_id, "test engine: report from a non-owner dropped");
            continue;
        }
        for id in &item.matched {
            let wanted = st.observers.map.get(id).is_some_and(|obs| {
                obs.state == ObserverState::Active
                    && obs.function_id == item.function_id
                    && wants(&obs.view.on, &item.status)
            });
            if wanted {
                activate(st, id, &item);
            }
        }
    }
}

/// A routed call of an auto-delivered function that has active observers,
/// kept until its result: the engine itself delivers such invocations.
pub(crate) struct RoutedCall {
    invocation_id: Uuid,
    input: Value,
    metadata: Option<Value>,
    caller: Value,
    observe_depth: u32,
    started_at_ms: u64,
    started: Instant,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// What to keep of a routed call of `function_id` for its observers; `None`
/// when nobody observes it this way (owner-delivered or no active observer).
pub(crate) fn routed_call(
    st: &State,
    function_id: &str,
    invocation_id: Uuid,
    input: &Value,
    metadata: &Option<Value>,
    caller: &Caller,
    observe_depth: u32,
) -> Option<Box<RoutedCall>> {
    let function = st.functions.get(function_id)?;
    let observed = function.observe.delivery != Some(Delivery::Owner)
        && st
            .observers
            .map
            .values()
            .any(|o| o.function_id == function_id && o.state == ObserverState::Active);
    observed.then(|| {
        Box::new(RoutedCall {
            invocation_id,
            input: input.clone(),
            metadata: metadata.clone(),
            caller: json!(caller),
            observe_depth,
            started_at_ms: now_ms(),
            started: Instant::now(),
        })
    })
}

/// A routed call of an auto-delivered function finished: each active
/// observer whose `on` and filters accept it gets an activation.
pub(crate) fn routed_finished(
    st: &mut State,
    function_id: &str,
    call: RoutedCall,
    outcome: &Result<Value, ErrorBody>,
) {
    let (status, output, error) = match outcome {
        Ok(result) => (InvocationStatus::Success, Some(result.clone()), None),
        Err(e) => (
            InvocationStatus::Error,
            None,
            Some(json!({"code": e.code, "message": e.message})),
        ),
    };
    let item = ObservedItem {
        function_id: function_id.to_string(),
        namespace: Some(NAMESPACE.to_string()),
        invocation_id: call.invocation_id.to_string(),
        matched: Vec::new(),
        status,
        input: Some(call.input),
        output,
        error,
        caller: serde_json::from_value(call.caller.clone()).ok(),
        metadata: call.metadata,
        started_at_ms: call.started_at_ms,
        duration_ms: call.started.elapsed().as_secs_f64() * 1000.0,
        observe_depth: call.observe_depth,
        traceparent: None,
        baggage: None,
    };
    let doc = Doc {
        input: item.input.as_ref(),
        output: item.output.as_ref(),
        error: item.error.as_ref(),
        caller: Some(&call.caller),
        metadata: item.metadata.as_ref(),
    };
    let mut ids: Vec<String> = st
        .observers
        .map
        .iter()
        .filter(|(_, o)| {
            o.function_id == function_id
                && o.state == ObserverState::Active
                && wants(&o.view.on, &item.status)
                && Filter::from_normalized(&o.view.filters).is_ok_and(|f| f.matches(&doc))
        })
        .map(|(id, _)| id.clone())
        .collect();
    ids.sort();
    for id in ids {
        activate(st, &id, &item);
    }
}

/// Handles an owner's `call` (an `invokefunction` with `activation`): the
/// payload goes as is to the observer's own target, whose result returns
/// to the owner.
pub(crate) fn owner_call(st: &mut State, from: ConnId, call: Call) {
    let Some(observer_id) = call.activation.as_ref().map(|a| a.observer_id.clone()) else {
        return;
    };
    let checked = match st.observers.map.get(&observer_id) {
        None => Err(coded(
            observe_codes::OBSERVER_NOT_FOUND,
            format!("no observer {observer_id}"),
        )),
        Some(obs) if st.owner(&obs.function_id) != Some(from) => Err(coded(
            observe_codes::NOT_FUNCTION_OWNER,
            format!("this worker does not own {}", obs.function_id),
        )),
        Some(obs) if obs.state != ObserverState::Active => Err(coded(
            observe_codes::OBSERVER_NOT_ACTIVE,
            format!("observer {observer_id} is not active"),
        )),
        Some(obs) => st
            .owner(&obs.view.target)
            .map(|target| (target, obs.view.target.clone(), obs.metadata.clone()))
            .ok_or_else(|| {
                coded(
                    observe_codes::TARGET_UNAVAILABLE,
                    format!("target {} is not registered", obs.view.target),
                )
            }),
    };
    let (target, target_function, metadata) = match checked {
        Ok(route) => route,
        Err(error) => {
            if let Some(invocation_id) = call.invocation_id {
                st.send(
                    from,
                    &router::reply(invocation_id, &call.function_id, Err(error)),
                );
            }
            return;
        }
    };
    if let Some(invocation_id) = call.invocation_id {
        st.pending.insert(
            invocation_id,
            Pending::Relay {
                caller: from,
                target,
                function_id: target_function.clone(),
                observed: None,
            },
        );
    }
    let caller = router::stamped_caller(st, from, call.caller);
    st.send(
        target,
        &Message::InvokeFunction {
            invocation_id: call.invocation_id,
            function_id: target_function,
            data: call.data,
            traceparent: call.traceparent,
            baggage: call.baggage,
            action: None,
            metadata,
            namespace: None,
            caller: Some(caller),
            observe_depth: Some(call.observe_depth.unwrap_or(0) + 1),
            activation: Some(Activation {
                observer_id: observer_id.clone(),
                activation_id: Some(Uuid::new_v4().to_string()),
            }),
        },
    );
    fired(st, &observer_id);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::state::Function;
    use tokio::sync::mpsc;
    use tokio_tungstenite::tungstenite::Message as WsMessage;

    struct Peer {
        conn: ConnId,
        rx: mpsc::UnboundedReceiver<WsMessage>,
    }

    impl Peer {
        fn new(st: &mut State) -> Peer {
            let (tx, rx) = mpsc::unbounded_channel();
            let (conn, _) = st.connect(tx);
            Peer { conn, rx }
        }

        fn frames(&mut self) -> Vec<Value> {
            let mut out = Vec::new();
            while let Ok(WsMessage::Text(t)) = self.rx.try_recv() {
                out.push(serde_json::from_str(t.as_str()).unwrap());
            }
            out
        }
    }

    fn host(st: &mut State, owner: &Peer, id: &str, observe: ObserveDescriptor) {
        st.functions.insert(
            id.into(),
            Function {
                conn: owner.conn,
                frame: json!({}),
                observe,
                revision: 1,
            },
        );
    }

    fn owner_descriptor() -> ObserveDescriptor {
        ObserveDescriptor {
            delivery: Some(Delivery::Owner),
            args_format: Some(json!({
                "type": "object", "properties": {"job_id": {"type": "string"}}
            })),
            ..ObserveDescriptor::default()
        }
    }

    fn request(id: &str, args: Value, extra: Value) -> Request {
        let mut source = json!({"function_id": "src::f", "args": args});
        if let (Some(s), Some(e)) = (source.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        Request {
            id: id.into(),
            source: serde_json::from_value(source).unwrap(),
            target: ObserveTarget {
                function_id: "dst::t".into(),
                namespace: None,
            },
            metadata: Some(json!({"binding": 1})),
            max_fires: None,
        }
    }

    fn item(matched: &[&str], input: Value) -> ObservedItem {
        serde_json::from_value(json!({
            "function_id": "src::f", "invocation_id": Uuid::new_v4().to_string(),
            "matched": matched, "status": "success", "input": input,
            "started_at_ms": 1, "duration_ms": 0.0
        }))
        .unwrap()
    }

    /// Owner, observing worker and target, with `dst::t` hosted by the target.
    fn setup() -> (State, Peer, Peer, Peer) {
        let mut st = State::default();
        let owner = Peer::new(&mut st);
        let observer = Peer::new(&mut st);
        let target = Peer::new(&mut st);
        host(&mut st, &owner, "src::f", owner_descriptor());
        host(&mut st, &target, "dst::t", ObserveDescriptor::default());
        (st, owner, observer, target)
    }

    fn activate_observer(
        st: &mut State,
        owner: &mut Peer,
        observer: &mut Peer,
        id: &str,
        extra: Value,
    ) {
        observe(
            st,
            observer.conn,
            request(id, json!({"job_id": "j"}), extra),
        );
        let added = owner.frames();
        assert_eq!(added.len(), 1);
        assert_eq!(added[0]["type"], "observeradded");
        let revision = added[0]["revision"].as_u64().unwrap();
        assert!(observer.frames().is_empty(), "no answer before the ack");
        ack(st, owner.conn, "src::f", id, revision, None);
        let result = observer.frames();
        assert_eq!(result[0]["type"], "observeresult");
        assert_eq!(result[0]["state"], "active");
    }

    #[test]
    fn the_owner_ack_activates_and_reports_fire_the_target() {
        let (mut st, mut owner, mut observer, mut target) = setup();
        activate_observer(&mut st, &mut owner, &mut observer, "o1", json!({}));
        observed(
            &mut st,
            owner.conn,
            vec![item(&["o1"], json!({"job_id": "j"}))],
        );
        let sent = target.frames();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0]["function_id"], "dst::t");
        assert_eq!(sent[0]["metadata"], json!({"binding": 1}));
        assert_eq!(sent[0]["activation"]["observer_id"], "o1");
        assert!(sent[0]["activation"]["activation_id"].is_string());
        let envelope = &sent[0]["data"];
        assert_eq!(envelope["observer_id"], "o1");
        assert_eq!(envelope["input"], json!({"job_id": "j"}));
        assert!(envelope.get("_caller_worker_id").is_none());
    }

    #[test]
    fn reports_from_anyone_but_the_owner_fire_nothing() {
        let (mut st, mut owner, mut observer, mut target) = setup();
        activate_observer(&mut st, &mut owner, &mut observer, "o1", json!({}));
        observed(&mut st, observer.conn, vec![item(&["o1"], json!(1))]);
        assert!(target.frames().is_empty());
    }

    #[test]
    fn a_rejection_ends_in_error_and_is_never_delivered() {
        let (mut st, mut owner, mut observer, mut target) = setup();
        observe(&mut st, observer.conn, request("o1", json!({}), json!({})));
        let revision = owner.frames()[0]["revision"].as_u64().unwrap();
        ack(
            &mut st,
            owner.conn,
            "src::f",
            "o1",
            revision,
            Some(ErrorBody::new("INVALID_PATH", "no")),
        );
        let result = observer.frames();
        assert_eq!(result[0]["state"], "error");
        assert_eq!(result[0]["error"]["code"], "INVALID_PATH");
        observed(&mut st, owner.conn, vec![item(&["o1"], json!(1))]);
        assert!(target.frames().is_empty());
    }

    #[test]
    fn a_stale_or_foreign_ack_is_ignored() {
        let (mut st, mut owner, mut observer, _target) = setup();
        observe(&mut st, observer.conn, request("o1", json!({}), json!({})));
        let revision = owner.frames()[0]["revision"].as_u64().unwrap();
        ack(&mut st, owner.conn, "src::f", "o1", revision + 5, None);
        ack(&mut st, observer.conn, "src::f", "o1", revision, None);
        assert!(observer.frames().is_empty());
    }

    #[test]
    fn args_failing_the_args_format_are_invalid_args() {
        let (mut st, mut owner, mut observer, _target) = setup();
        observe(
            &mut st,
            observer.conn,
            request("o1", json!({"job_id": 5}), json!({})),
        );
        assert!(owner.frames().is_empty());
        let result = observer.frames();
        assert_eq!(result[0]["state"], "error");
        assert_eq!(result[0]["error"]["code"], "INVALID_ARGS");
    }

    #[test]
    fn bad_filters_are_refused_and_good_ones_sent_normalized() {
        let (mut st, mut owner, mut observer, _target) = setup();
        observe(
            &mut st,
            observer.conn,
            request("bad", json!({}), json!({"filters": {"input.x": 1}})),
        );
        assert_eq!(observer.frames()[0]["error"]["code"], "INVALID_FILTER");
        observe(
            &mut st,
            observer.conn,
            request("ok", json!({}), json!({"filters": {"input.x": {"$eq": 1}}})),
        );
        let added = owner.frames();
        let expected = Filter::parse(&json!({"input.x": {"$eq": 1}})).unwrap();
        assert_eq!(&added[0]["observer"]["filters"], expected.normalized());
    }

    #[test]
    fn an_observer_of_an_absent_function_waits_and_is_listed_on_registration() {
        let mut st = State::default();
        let mut owner = Peer::new(&mut st);
        let mut observer = Peer::new(&mut st);
        observe(&mut st, observer.conn, request("o1", json!({}), json!({})));
        assert_eq!(observer.frames()[0]["state"], "pending");
        host(&mut st, &owner, "src::f", ObserveDescriptor::default());
        let views = function_registered(&mut st, "src::f");
        assert_eq!(views.len(), 1);
        assert_eq!(views[0].id, "o1");
        ack(&mut st, owner.conn, "src::f", "o1", 1, None);
        let changed = observer.frames();
        assert_eq!(changed[0]["type"], "observerstatechanged");
        assert_eq!(changed[0]["state"], "active");
        assert!(owner.frames().is_empty());
    }

    #[test]
    fn the_owner_leaving_suspends_to_pending() {
        let (mut st, mut owner, mut observer, _target) = setup();
        activate_observer(&mut st, &mut owner, &mut observer, "o1", json!({}));
        st.functions.remove("src::f");
        function_gone(&mut st, "src::f");
        let changed = observer.frames();
        assert_eq!(changed[0]["state"], "pending");
        assert_eq!(changed[0]["reason"]["code"], "OWNER_UNAVAILABLE");
    }

    #[test]
    fn max_fires_disposes_and_tells_the_owner() {
        let (mut st, mut owner, mut observer, mut target) = setup();
        let mut req = request("o1", json!({}), json!({"deliver": "input"}));
        req.max_fires = Some(1);
        observe(&mut st, observer.conn, req);
        let revision = owner.frames()[0]["revision"].as_u64().unwrap();
        ack(&mut st, owner.conn, "src::f", "o1", revision, None);
        observer.frames();
        observed(
            &mut st,
            owner.conn,
            vec![
                item(&["o1"], json!({"n": 1})),
                item(&["o1"], json!({"n": 2})),
            ],
        );
        let sent = target.frames();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0]["data"], json!({"n": 1}));
        let removed = owner.frames();
        assert_eq!(removed[0]["type"], "observerremoved");
        assert!(removed[0]["revision"].as_u64().unwrap() > revision);
        let disposed = observer.frames();
        assert_eq!(disposed[0]["state"], "disposed");
        assert_eq!(disposed[0]["reason"]["code"], "MAX_FIRES");
        assert_eq!(disposed[0]["fires"], 1);
    }

    #[test]
    fn unobserve_and_disconnect_remove_the_observer_from_the_owner() {
        let (mut st, mut owner, mut observer, _target) = setup();
        activate_observer(&mut st, &mut owner, &mut observer, "o1", json!({}));
        unobserve(&mut st, owner.conn, "o1");
        assert!(
            owner.frames().is_empty(),
            "only its own worker may unobserve"
        );
        unobserve(&mut st, observer.conn, "o1");
        assert_eq!(owner.frames()[0]["type"], "observerremoved");
        assert_eq!(observer.frames()[0]["state"], "disposed");
        activate_observer(&mut st, &mut owner, &mut observer, "o2", json!({}));
        connection_gone(&mut st, observer.conn);
        assert_eq!(owner.frames()[0]["id"], "o2");
    }

    #[test]
    fn an_observer_id_belongs_to_one_worker() {
        let (mut st, mut owner, mut observer, mut target) = setup();
        activate_observer(&mut st, &mut owner, &mut observer, "o1", json!({}));
        observe(&mut st, target.conn, request("o1", json!({}), json!({})));
        assert_eq!(target.frames()[0]["error"]["code"], "OBSERVER_ID_CONFLICT");
    }

    #[test]
    fn routed_calls_of_an_auto_function_fire_its_matching_observers() {
        let mut st = State::default();
        let mut owner = Peer::new(&mut st);
        let observer = Peer::new(&mut st);
        let mut target = Peer::new(&mut st);
        host(&mut st, &owner, "src::f", ObserveDescriptor::default());
        host(&mut st, &target, "dst::t", ObserveDescriptor::default());
        let filters = json!({"filters": {"input.amount": {"$gte": 500}}});
        observe(&mut st, observer.conn, request("big", json!({}), filters));
        let revision = owner.frames()[0]["revision"].as_u64().unwrap();
        let caller = Caller {
            worker_name: Some("checkout".into()),
            ..Caller::default()
        };
        let routed = |st: &State, amount: i64| {
            routed_call(
                st,
                "src::f",
                Uuid::new_v4(),
                &json!({"amount": amount}),
                &None,
                &caller,
                0,
            )
        };
        assert!(routed(&st, 900).is_none(), "not active yet: nothing kept");
        ack(&mut st, owner.conn, "src::f", "big", revision, None);
        for amount in [100, 900] {
            let call = routed(&st, amount).expect("kept while observed");
            routed_finished(&mut st, "src::f", *call, &Ok(json!({"charged": amount})));
        }
        let call = routed(&st, 950).unwrap();
        routed_finished(
            &mut st,
            "src::f",
            *call,
            &Err(ErrorBody::new("DECLINED", "no")),
        );
        let sent = target.frames();
        assert_eq!(sent.len(), 1, "only the successful matching call: {sent:?}");
        let envelope = &sent[0]["data"];
        assert_eq!(envelope["input"], json!({"amount": 900}));
        assert_eq!(envelope["output"], json!({"charged": 900}));
        assert_eq!(envelope["caller"]["worker_name"], "checkout");
        assert_eq!(envelope["status"], "success");
    }

    #[test]
    fn owner_delivered_functions_are_not_fired_by_routed_calls() {
        let (mut st, mut owner, mut observer, _target) = setup();
        activate_observer(&mut st, &mut owner, &mut observer, "o1", json!({}));
        let kept = routed_call(
            &st,
            "src::f",
            Uuid::new_v4(),
            &json!({}),
            &None,
            &Caller::default(),
            0,
        );
        assert!(kept.is_none());
    }

    #[test]
    fn owner_calls_go_to_the_target_only_while_active() {
        let (mut st, mut owner, mut observer, mut target) = setup();
        let call = |id: Uuid| Call {
            invocation_id: Some(id),
            function_id: "dst::t".into(),
            data: json!({"status": 1}),
            traceparent: None,
            baggage: None,
            action: None,
            metadata: None,
            namespace: None,
            caller: None,
            observe_depth: None,
            activation: Some(Activation {
                observer_id: "o1".into(),
                activation_id: None,
            }),
        };
        let early = Uuid::new_v4();
        owner_call(&mut st, owner.conn, call(early));
        assert_eq!(owner.frames()[0]["error"]["code"], "OBSERVER_NOT_FOUND");
        activate_observer(&mut st, &mut owner, &mut observer, "o1", json!({}));
        owner_call(&mut st, observer.conn, call(Uuid::new_v4()));
        assert_eq!(observer.frames()[0]["error"]["code"], "NOT_FUNCTION_OWNER");
        let id = Uuid::new_v4();
        owner_call(&mut st, owner.conn, call(id));
        let sent = target.frames();
        assert_eq!(sent[0]["data"], json!({"status": 1}));
        assert_eq!(sent[0]["invocation_id"], json!(id.to_string()));
        assert_eq!(sent[0]["metadata"], json!({"binding": 1}));
        assert!(matches!(st.pending.get(&id), Some(Pending::Relay { .. })));
    }
}
