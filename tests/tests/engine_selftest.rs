//! The test engine against real `iii-sdk` 0.25 clients: routing, errors,
//! configuration, channels, disconnects and observe, end to end.

#![forbid(unsafe_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::{SinkExt, StreamExt};
use ide_tests::{call, client, TestEngine};
use iii_sdk::channel::{ChannelReader, StreamChannelRef};
use iii_sdk::helpers::create_channel;
use iii_sdk::protocol::RegisterTriggerInput;
use iii_sdk::runtime::IIIConnectionState;
use iii_sdk::{
    Deliver, Error, IIIClient, Observe, ObserveHandler, ObserveRejection, Observer,
    ObserverOptions, ObserverState, RegisterFunction, Source,
};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::Message as WsMessage;

const WAIT: Duration = Duration::from_secs(10);

/// A connected client named `name`.
async fn connected(engine: &TestEngine, name: &str) -> IIIClient {
    let c = client(&engine.url(), name);
    timeout(WAIT, c.wait_until_registered(WAIT))
        .await
        .expect("bounded")
        .expect("the engine accepts the worker");
    c
}

/// Registers `id` on `worker` with `f` and waits until the engine has it.
async fn host(engine: &TestEngine, worker: &IIIClient, id: &str, f: RegisterFunction) {
    worker.register_function(id, f);
    assert!(engine.wait_for_function(id, WAIT).await, "{id} registered");
}

/// A function that forwards every `(input, metadata)` it receives.
fn recorder() -> (
    RegisterFunction,
    mpsc::UnboundedReceiver<(Value, Option<Value>)>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let f = RegisterFunction::new(move |input: Value, metadata: Option<Value>| {
        let _ = tx.send((input, metadata));
        Ok::<_, Error>(json!({"ok": true}))
    });
    (f, rx)
}

async fn next<T>(rx: &mut mpsc::UnboundedReceiver<T>) -> T {
    timeout(WAIT, rx.recv())
        .await
        .expect("delivered in time")
        .expect("sender alive")
}

fn remote_code(result: Result<Value, Error>) -> String {
    match result {
        Err(Error::Remote { code, .. }) => code,
        other => panic!("expected a remote error, got {other:?}"),
    }
}

#[tokio::test]
async fn calls_are_relayed_with_the_caller_worker_id() {
    let engine = TestEngine::start().await;
    let worker = connected(&engine, "selftest-worker").await;
    host(
        &engine,
        &worker,
        "selftest::echo",
        RegisterFunction::new_async(|input: Value| async move {
            Ok::<_, Error>(json!({ "got": input }))
        })
        .description("echoes its input"),
    )
    .await;
    let caller = connected(&engine, "selftest-caller").await;
    let result = call(&caller, "selftest::echo", json!({"n": 7}))
        .await
        .unwrap();
    assert_eq!(result["got"]["n"], 7);
    let caller_id = result["got"]["_caller_worker_id"]
        .as_str()
        .expect("injected");
    assert!(uuid::Uuid::parse_str(caller_id).is_ok(), "{caller_id}");
    let frame = engine.function_registration("selftest::echo").unwrap();
    assert_eq!(frame["description"], "echoes its input");
    assert!(engine.functions().contains(&"selftest::echo".to_string()));
    worker.shutdown_async().await;
    caller.shutdown_async().await;
    engine.stop().await;
}

#[tokio::test]
async fn handler_errors_arrive_verbatim_and_unknown_ids_are_not_found() {
    let engine = TestEngine::start().await;
    let worker = connected(&engine, "selftest-worker").await;
    host(
        &engine,
        &worker,
        "selftest::fail",
        RegisterFunction::new(|_: Value| {
            Err::<Value, _>(Error::Remote {
                code: "S211".into(),
                message: "no such job: j-1".into(),
                stacktrace: None,
            })
        }),
    )
    .await;
    let caller = connected(&engine, "selftest-caller").await;
    match call(&caller, "selftest::fail", json!({})).await {
        Err(Error::Remote {
            code,
            message,
            stacktrace,
        }) => {
            assert_eq!(code, "S211");
            assert_eq!(message, "no such job: j-1");
            assert_eq!(stacktrace, None);
        }
        other => panic!("expected S211, got {other:?}"),
    }
    let missing = call(&caller, "selftest::nobody", json!({})).await;
    assert_eq!(remote_code(missing), "function_not_found");
    worker.shutdown_async().await;
    caller.shutdown_async().await;
    engine.stop().await;
}

#[tokio::test]
async fn a_second_worker_cannot_take_a_registered_function() {
    let engine = TestEngine::start().await;
    let first = connected(&engine, "selftest-first").await;
    host(
        &engine,
        &first,
        "selftest::mine",
        RegisterFunction::new(|_: Value| Ok::<_, Error>(json!("first"))),
    )
    .await;
    let second = connected(&engine, "selftest-second").await;
    second.register_function(
        "selftest::mine",
        RegisterFunction::new(|_: Value| Ok::<_, Error>(json!("second"))),
    );
    // a call from the second worker travels after its registration frame
    let result = call(&second, "selftest::mine", json!({})).await.unwrap();
    assert_eq!(result, json!("first"));
    first.shutdown_async().await;
    second.shutdown_async().await;
    engine.stop().await;
}

#[tokio::test]
#[allow(deprecated)]
async fn configuration_semantics_and_change_events() {
    let engine = TestEngine::start().await;
    let worker = connected(&engine, "selftest-config").await;
    let (on_config, mut events) = recorder();
    host(&engine, &worker, "selftest::on-config", on_config).await;
    worker
        .register_trigger(
            RegisterTriggerInput::new(
                "configuration",
                "selftest::on-config",
                json!({"configuration_id": "selftest", "event_types": ["configuration:updated"]}),
            )
            .with_metadata(json!({"binding": "cfg"})),
        )
        .unwrap();
    // the worker's own call travels after its trigger frame: a barrier
    call(&worker, "configuration::list", json!({}))
        .await
        .unwrap();

    let schema = json!({"type": "object", "required": ["port"],
                        "properties": {"port": {"type": "integer"}}});
    let register = |initial: Option<Value>| {
        let mut data = json!({"id": "selftest", "name": "Selftest", "description": "d",
                              "schema": schema.clone()});
        if let Some(v) = initial {
            data["initial_value"] = v;
        }
        data
    };
    let caller = connected(&engine, "selftest-caller").await;
    let missing = call(&caller, "configuration::get", json!({"id": "selftest"})).await;
    assert_eq!(remote_code(missing), "NOT_FOUND");

    let entry = call(
        &caller,
        "configuration::register",
        register(Some(json!({"port": 1}))),
    )
    .await
    .unwrap();
    assert_eq!(entry["value"], json!({"port": 1}));
    let set = call(
        &caller,
        "configuration::set",
        json!({"id": "selftest", "value": {"port": 2}}),
    )
    .await
    .unwrap();
    assert_eq!(
        set,
        json!({"old_value": {"port": 1}, "new_value": {"port": 2}})
    );
    let (event, metadata) = next(&mut events).await;
    assert_eq!(event["type"], "configuration");
    assert_eq!(event["event_type"], "configuration:updated");
    assert_eq!(event["id"], "selftest");
    assert_eq!(event["old_value"], json!({"port": 1}));
    assert_eq!(event["new_value"], json!({"port": 2}));
    assert!(event.get("_caller_worker_id").is_none());
    assert_eq!(metadata, Some(json!({"binding": "cfg"})));

    let bad = call(
        &caller,
        "configuration::set",
        json!({"id": "selftest", "value": {"port": "x"}}),
    )
    .await;
    assert_eq!(remote_code(bad), "SCHEMA_INVALID");

    call(
        &caller,
        "configuration::register",
        register(Some(json!({"port": 3}))),
    )
    .await
    .unwrap();
    assert_eq!(
        engine.stored_config("selftest"),
        Some(json!({"port": 3})),
        "replaced"
    );
    let (event, _) = next(&mut events).await;
    assert_eq!(event["new_value"], json!({"port": 3}));
    call(&caller, "configuration::register", register(None))
        .await
        .unwrap();
    assert_eq!(
        engine.stored_config("selftest"),
        Some(json!({"port": 3})),
        "kept"
    );
    let (event, _) = next(&mut events).await;
    assert_eq!(event["old_value"], event["new_value"]);

    engine.external_set("selftest", json!({"port": 9})).await;
    let (event, _) = next(&mut events).await;
    assert_eq!(event["event_type"], "configuration:updated");
    assert_eq!(event["new_value"], json!({"port": 9}));
    let got = call(&caller, "configuration::get", json!({"id": "selftest"}))
        .await
        .unwrap();
    assert_eq!(got, json!({"id": "selftest", "value": {"port": 9}}));

    let functions: Vec<String> = engine.config_calls().into_iter().map(|(f, _)| f).collect();
    assert_eq!(
        functions,
        [
            "configuration::list",
            "configuration::get",
            "configuration::register",
            "configuration::set",
            "configuration::set",
            "configuration::register",
            "configuration::register",
            "configuration::get",
        ]
    );
    worker.shutdown_async().await;
    caller.shutdown_async().await;
    engine.stop().await;
}

#[tokio::test]
async fn a_preloaded_configuration_reads_but_needs_a_schema_to_set() {
    let engine = TestEngine::start().await;
    engine.preload_config("selftest", json!({"port": 5}));
    let caller = connected(&engine, "selftest-caller").await;
    let got = call(&caller, "configuration::get", json!({"id": "selftest"}))
        .await
        .unwrap();
    assert_eq!(got["value"], json!({"port": 5}));
    let set = call(
        &caller,
        "configuration::set",
        json!({"id": "selftest", "value": {"port": 6}}),
    )
    .await;
    assert_eq!(remote_code(set), "SCHEMA_UNAVAILABLE");
    caller.shutdown_async().await;
    engine.stop().await;
}

/// A payload of `n` bytes that is not one repeated byte.
fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

#[tokio::test]
async fn channels_carry_200000_bytes_both_ways_and_empty_streams_end() {
    let engine = TestEngine::start().await;
    let worker = connected(&engine, "selftest-streams").await;
    let handle = worker.clone();
    host(
        &engine,
        &worker,
        "selftest::reverse",
        RegisterFunction::new_async(move |input: Value| {
            let iii = handle.clone();
            async move {
                let content: StreamChannelRef = serde_json::from_value(input["content"].clone())?;
                let mut bytes = ChannelReader::new(iii.address(), &content)
                    .read_all()
                    .await?;
                bytes.reverse();
                let out = create_channel(&iii, None).await?;
                let size = bytes.len();
                let reader_ref = out.reader_ref.clone();
                tokio::spawn(async move {
                    let _ = out.writer.write(&bytes).await;
                    let _ = out.writer.close().await;
                });
                Ok::<_, Error>(json!({"content": reader_ref, "size": size}))
            }
        }),
    )
    .await;
    let caller = connected(&engine, "selftest-caller").await;
    let payload = pattern(200_000);
    let upload = create_channel(&caller, None).await.unwrap();
    let sent = payload.clone();
    let writer = upload.writer;
    let writing = tokio::spawn(async move {
        writer.write(&sent).await.unwrap();
        writer.close().await.unwrap();
    });
    let reply = call(
        &caller,
        "selftest::reverse",
        json!({"content": upload.reader_ref}),
    )
    .await
    .unwrap();
    timeout(WAIT, writing).await.unwrap().unwrap();
    assert_eq!(reply["size"], 200_000);
    let back: StreamChannelRef = serde_json::from_value(reply["content"].clone()).unwrap();
    let received = timeout(WAIT, ChannelReader::new(caller.address(), &back).read_all())
        .await
        .unwrap()
        .unwrap();
    let mut expected = payload;
    expected.reverse();
    assert_eq!(received.len(), expected.len());
    assert!(received == expected, "bytes arrive intact and in order");

    let empty = create_channel(&caller, Some(1)).await.unwrap();
    empty.writer.write(&[]).await.unwrap();
    empty.writer.close().await.unwrap();
    let nothing = timeout(WAIT, empty.reader.read_all())
        .await
        .unwrap()
        .unwrap();
    assert!(nothing.is_empty());
    worker.shutdown_async().await;
    caller.shutdown_async().await;
    engine.stop().await;
}

#[tokio::test]
async fn a_call_whose_worker_disconnects_is_stopped() {
    let engine = TestEngine::start().await;
    let worker = connected(&engine, "selftest-hanging").await;
    let (entered_tx, mut entered) = mpsc::unbounded_channel();
    host(
        &engine,
        &worker,
        "selftest::hang",
        RegisterFunction::new_async(move |_: Value| {
            let entered_tx = entered_tx.clone();
            async move {
                let _ = entered_tx.send(());
                tokio::time::sleep(Duration::from_secs(600)).await;
                Ok::<_, Error>(Value::Null)
            }
        }),
    )
    .await;
    let caller = connected(&engine, "selftest-caller").await;
    let pending = {
        let caller = caller.clone();
        tokio::spawn(async move { call(&caller, "selftest::hang", json!({})).await })
    };
    next(&mut entered).await;
    worker.shutdown_async().await;
    let result = timeout(WAIT, pending).await.expect("answered").unwrap();
    assert_eq!(remote_code(result), "invocation_stopped");
    caller.shutdown_async().await;
    engine.stop().await;
}

/// The owner's record of its observers, by their `topic` arg.
#[derive(Clone, Default)]
struct Topics(Arc<Mutex<Vec<Observer>>>);

impl Topics {
    fn matching(&self, topic: &str) -> Vec<Observer> {
        let observers = self.0.lock().unwrap_or_else(|e| e.into_inner());
        observers
            .iter()
            .filter(|o| o.args_value()["topic"] == topic)
            .cloned()
            .collect()
    }

    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

#[async_trait]
impl ObserveHandler for Topics {
    async fn on_observer_added(&self, obs: &Observer) -> Result<(), ObserveRejection> {
        if obs.args_value()["topic"] == "forbidden" {
            return Err(ObserveRejection::new("S210", "topic refused"));
        }
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(obs.clone());
        Ok(())
    }

    async fn on_observer_removed(&self, obs: &Observer) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|o| o.id() != obs.id());
    }
}

async fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn observers_are_activated_by_the_owner_and_receive_its_events() {
    let engine = TestEngine::start().await;
    let owner = connected(&engine, "selftest-owner").await;
    let topics = Topics::default();
    let emitting = topics.clone();
    host(
        &engine,
        &owner,
        "selftest::on-event",
        RegisterFunction::new(move |input: Value| {
            let event = json!({"topic": input["topic"], "n": input["n"]});
            let topic = input["topic"].as_str().unwrap_or_default();
            let mut sent = 0;
            for obs in emitting.matching(topic) {
                if obs.emit(&event)? {
                    sent += 1;
                }
            }
            Ok::<_, Error>(json!(sent))
        })
        .observe(
            Observe::owner()
                .args_format_value(json!({
                    "type": "object", "required": ["topic"],
                    "properties": {"topic": {"type": "string"}}
                }))
                .handler(topics.clone()),
        ),
    )
    .await;
    let registration = engine.function_registration("selftest::on-event").unwrap();
    assert_eq!(registration["observe"]["delivery"], "owner");

    let watcher = connected(&engine, "selftest-watcher").await;
    let (sink, mut deliveries) = recorder();
    host(&engine, &watcher, "selftest::sink", sink).await;
    let envelope_observer = watcher.observe_with(
        Source::function("selftest::on-event").args(json!({"topic": "a"})),
        "selftest::sink",
        ObserverOptions::default().metadata(json!({"binding": "env"})),
    );
    timeout(WAIT, envelope_observer.ready())
        .await
        .unwrap()
        .unwrap();
    let once = watcher.observe_with(
        Source::function("selftest::on-event")
            .args(json!({"topic": "b"}))
            .deliver(Deliver::Input),
        "selftest::sink",
        ObserverOptions::default().max_fires(1),
    );
    timeout(WAIT, once.ready()).await.unwrap().unwrap();
    let refused = watcher.observe(
        Source::function("selftest::on-event").args(json!({"topic": "forbidden"})),
        "selftest::sink",
    );
    match timeout(WAIT, refused.ready()).await.unwrap() {
        Err(Error::Remote { code, .. }) => assert_eq!(code, "S210"),
        other => panic!("expected the owner's rejection, got {other:?}"),
    }
    assert_eq!(refused.state(), ObserverState::Error);
    let malformed = watcher.observe(
        Source::function("selftest::on-event").args(json!({"topic": 5})),
        "selftest::sink",
    );
    match timeout(WAIT, malformed.ready()).await.unwrap() {
        Err(Error::Remote { code, .. }) => assert_eq!(code, "INVALID_ARGS"),
        other => panic!("expected INVALID_ARGS, got {other:?}"),
    }
    wait_until("both observers held by the owner", || topics.len() == 2).await;

    let caller = connected(&engine, "selftest-caller").await;
    let sent = call(&caller, "selftest::on-event", json!({"topic": "a", "n": 1}))
        .await
        .unwrap();
    assert_eq!(sent, json!(1));
    let (envelope, metadata) = next(&mut deliveries).await;
    assert_eq!(envelope["observer_id"], envelope_observer.id());
    assert_eq!(envelope["function_id"], "selftest::on-event");
    assert_eq!(envelope["status"], "success");
    assert_eq!(envelope["input"], json!({"topic": "a", "n": 1}));
    assert!(envelope["activation_id"].is_string());
    assert_eq!(metadata, Some(json!({"binding": "env"})));

    call(&caller, "selftest::on-event", json!({"topic": "b", "n": 2}))
        .await
        .unwrap();
    let (raw, metadata) = next(&mut deliveries).await;
    assert_eq!(raw, json!({"topic": "b", "n": 2}), "deliver: input");
    assert_eq!(metadata, None);
    wait_until("max_fires disposes", || {
        once.state() == ObserverState::Disposed
    })
    .await;
    wait_until("the owner forgets it", || topics.len() == 1).await;

    timeout(WAIT, envelope_observer.dispose())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(envelope_observer.state(), ObserverState::Disposed);
    wait_until("the owner forgets the disposed one", || topics.len() == 0).await;
    let sent = call(&caller, "selftest::on-event", json!({"topic": "a", "n": 3}))
        .await
        .unwrap();
    assert_eq!(sent, json!(0));
    for c in [owner, watcher, caller] {
        c.shutdown_async().await;
    }
    engine.stop().await;
}

#[tokio::test]
async fn the_engine_calls_functions_itself_without_a_caller_id() {
    let engine = TestEngine::start().await;
    let worker = connected(&engine, "selftest-worker").await;
    let (f, mut inputs) = recorder();
    host(&engine, &worker, "selftest::wake", f).await;
    let result = timeout(WAIT, engine.invoke("selftest::wake", json!({"x": 1})))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result, json!({"ok": true}));
    let (input, _) = next(&mut inputs).await;
    assert_eq!(input, json!({"x": 1}));
    let missing = engine.invoke("selftest::nobody", json!({})).await;
    assert_eq!(missing.unwrap_err().code, "function_not_found");
    worker.shutdown_async().await;
    engine.stop().await;
}

type RawSocket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn raw(url: &str) -> RawSocket {
    let (ws, _) = timeout(WAIT, tokio_tungstenite::connect_async(url))
        .await
        .expect("bounded")
        .expect("connects");
    ws
}

/// The next frame that is not a WS-level ping or pong.
async fn next_frame(ws: &mut RawSocket) -> Option<WsMessage> {
    loop {
        match timeout(WAIT, ws.next()).await.expect("a frame in time") {
            Some(Ok(WsMessage::Ping(_) | WsMessage::Pong(_))) => continue,
            Some(Ok(frame)) => return Some(frame),
            Some(Err(_)) | None => return None,
        }
    }
}

async fn next_json(ws: &mut RawSocket) -> Value {
    match next_frame(ws).await {
        Some(WsMessage::Text(text)) => serde_json::from_str(text.as_str()).expect("JSON"),
        other => panic!("expected a JSON text frame, got {other:?}"),
    }
}

async fn send_json(ws: &mut RawSocket, frame: Value) {
    ws.send(WsMessage::Text(frame.to_string().into()))
        .await
        .expect("sent");
}

#[tokio::test]
async fn garbage_frames_are_dropped_and_pings_answered() {
    let engine = TestEngine::start().await;
    let mut ws = raw(&engine.url()).await;
    let hello = next_json(&mut ws).await;
    assert_eq!(hello["type"], "workerregistered");
    assert!(uuid::Uuid::parse_str(hello["worker_id"].as_str().unwrap()).is_ok());
    assert_eq!(hello["features"], json!(["observe.v1"]));

    for junk in [
        "not json",
        "[1,2,3]",
        r#"{"type":"fromthefuture","x":1}"#,
        r#"{"type":"invokefunction","invocation_id":"not-a-uuid","function_id":"x","data":{}}"#,
        r#"{"type":"invocationresult","invocation_id":"00000000-0000-4000-8000-000000000000","function_id":"x"}"#,
        r#"{"type":"registerfunction"}"#,
    ] {
        ws.send(WsMessage::Text(junk.into())).await.unwrap();
    }
    ws.send(WsMessage::Binary(vec![0xff, 0xfe, 0x00].into()))
        .await
        .unwrap();
    send_json(&mut ws, json!({"type": "ping"})).await;
    assert_eq!(next_json(&mut ws).await, json!({"type": "pong"}));

    ws.send(WsMessage::Ping(b"are you there".to_vec().into()))
        .await
        .unwrap();
    let pong = loop {
        match timeout(WAIT, ws.next()).await.unwrap() {
            Some(Ok(WsMessage::Pong(payload))) => break payload,
            Some(Ok(_)) => continue,
            other => panic!("expected a pong, got {other:?}"),
        }
    };
    assert_eq!(&pong[..], b"are you there");

    let id = uuid::Uuid::new_v4().to_string();
    send_json(
        &mut ws,
        json!({"type": "invokefunction", "invocation_id": id, "function_id": "x::y", "data": {}}),
    )
    .await;
    let reply = next_json(&mut ws).await;
    assert_eq!(reply["invocation_id"], json!(id));
    assert_eq!(reply["error"]["code"], "function_not_found");
    assert_eq!(
        reply["error"]["message"],
        "Function x::y not found in namespace default."
    );
    assert!(engine.functions().is_empty());
    engine.stop().await;
}

#[tokio::test]
async fn otel_is_swallowed_and_unknown_paths_are_refused() {
    let engine = TestEngine::start().await;
    let mut otel = raw(&format!("{}/otel", engine.url())).await;
    otel.send(WsMessage::Binary(vec![1, 2, 3].into()))
        .await
        .unwrap();
    otel.send(WsMessage::Text("{}".into())).await.unwrap();
    let url = format!("{}/elsewhere", engine.url());
    match tokio_tungstenite::connect_async(url.as_str()).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 404)
        }
        other => panic!("expected a 404, got {other:?}"),
    }
    engine.stop().await;
}

/// Creates a channel through a raw worker socket; returns (id, key).
async fn raw_channel(ws: &mut RawSocket, buffer_size: Value) -> (String, String) {
    let invocation = uuid::Uuid::new_v4().to_string();
    send_json(
        ws,
        json!({"type": "invokefunction", "invocation_id": invocation,
               "function_id": "engine::channels::create", "data": {"buffer_size": buffer_size}}),
    )
    .await;
    let reply = loop {
        let frame = next_json(ws).await;
        if frame["type"] == "invocationresult" {
            break frame;
        }
    };
    let reader = &reply["result"]["reader"];
    assert_eq!(reader["direction"], "read");
    assert_eq!(reply["result"]["writer"]["direction"], "write");
    (
        reader["channel_id"].as_str().unwrap().to_string(),
        reader["access_key"].as_str().unwrap().to_string(),
    )
}

#[tokio::test]
async fn channel_ends_are_checked_owned_once_and_closed_after_draining() {
    let engine = TestEngine::start().await;
    let mut worker = raw(&engine.url()).await;
    let (id, key) = raw_channel(&mut worker, json!(2)).await;
    let end = |query: &str| format!("{}/ws/channels/{id}?{query}", engine.url());
    for (query, status) in [
        ("key=wrong&dir=read".to_string(), 404),
        (format!("key={key}"), 400),
        (format!("key={key}&dir=both"), 400),
        ("dir=read".to_string(), 400),
    ] {
        match tokio_tungstenite::connect_async(end(&query).as_str()).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                assert_eq!(response.status(), status, "{query}")
            }
            other => panic!("{query}: expected HTTP {status}, got {other:?}"),
        }
    }

    let mut writer = raw(&end(&format!("key={key}&dir=write"))).await;
    writer.send(WsMessage::Text("first".into())).await.unwrap();
    writer
        .send(WsMessage::Binary(vec![1, 2, 3].into()))
        .await
        .unwrap();
    writer.send(WsMessage::Text("last".into())).await.unwrap();
    let mut second_writer = raw(&end(&format!("key={key}&dir=write"))).await;
    assert!(matches!(
        next_frame(&mut second_writer).await,
        Some(WsMessage::Close(_)) | None
    ));

    let mut reader = raw(&end(&format!("key={key}&dir=read"))).await;
    let mut second_reader = raw(&end(&format!("key={key}&dir=read"))).await;
    assert!(matches!(
        next_frame(&mut second_reader).await,
        Some(WsMessage::Close(_)) | None
    ));
    assert_eq!(
        next_frame(&mut reader).await,
        Some(WsMessage::Text("first".into()))
    );
    assert_eq!(
        next_frame(&mut reader).await,
        Some(WsMessage::Binary(vec![1, 2, 3].into()))
    );
    assert_eq!(
        next_frame(&mut reader).await,
        Some(WsMessage::Text("last".into()))
    );
    writer.close(None).await.unwrap();
    assert!(matches!(
        next_frame(&mut reader).await,
        Some(WsMessage::Close(_))
    ));
    engine.stop().await;
}

#[tokio::test]
async fn a_duplicate_worker_name_is_fatally_rejected() {
    let engine = TestEngine::start().await;
    let first = connected(&engine, "selftest-same-name").await;
    let second = client(&engine.url(), "selftest-same-name");
    wait_until("the duplicate is rejected", || {
        second.fatal_error().is_some()
    })
    .await;
    match second.fatal_error() {
        Some(Error::RegistrationRejected { code, .. }) => {
            assert_eq!(code, "WORKER_NAMESPACE_CONFLICT")
        }
        other => panic!("expected a fatal rejection, got {other:?}"),
    }
    assert!(first.fatal_error().is_none());
    first.shutdown_async().await;
    second.shutdown_async().await;
    engine.stop().await;
}

#[tokio::test]
async fn stop_makes_the_engine_vanish_for_its_workers() {
    let engine = TestEngine::start().await;
    let port = engine.port();
    let worker = connected(&engine, "selftest-left-behind").await;
    assert_eq!(worker.get_connection_state(), IIIConnectionState::Connected);
    timeout(WAIT, engine.stop()).await.expect("stops in time");
    wait_until("the worker notices", || {
        worker.get_connection_state() != IIIConnectionState::Connected
    })
    .await;
    assert!(tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err());
    worker.shutdown_async().await;
}

#[tokio::test]
async fn routed_calls_of_a_plain_function_reach_its_observers() {
    let engine = TestEngine::start().await;
    let owner = connected(&engine, "selftest-payments").await;
    host(
        &engine,
        &owner,
        "selftest::charge",
        RegisterFunction::new(|input: Value| Ok::<_, Error>(json!({"charged": input["amount"]}))),
    )
    .await;
    let watcher = connected(&engine, "selftest-alerts").await;
    let (sink, mut alerts) = recorder();
    host(&engine, &watcher, "selftest::alert", sink).await;
    let big = watcher.observe(
        Source::function("selftest::charge").filters(json!({"input.amount": {"$gte": 500}})),
        "selftest::alert",
    );
    timeout(WAIT, big.ready()).await.unwrap().unwrap();
    let caller = connected(&engine, "selftest-checkout").await;
    for amount in [100, 900] {
        call(&caller, "selftest::charge", json!({"amount": amount}))
            .await
            .unwrap();
    }
    let (envelope, _) = next(&mut alerts).await;
    assert_eq!(envelope["observer_id"], big.id());
    assert_eq!(
        envelope["input"],
        json!({"amount": 900}),
        "no _caller_worker_id"
    );
    assert_eq!(envelope["output"], json!({"charged": 900}));
    assert_eq!(envelope["caller"]["worker_name"], "selftest-checkout");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        alerts.try_recv().is_err(),
        "the small charge is filtered out"
    );
    for c in [owner, watcher, caller] {
        c.shutdown_async().await;
    }
    engine.stop().await;
}
