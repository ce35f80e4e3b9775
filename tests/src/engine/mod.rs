//! A protocol-faithful iii engine for tests: the worker protocol on `/`,
//! telemetry swallowed on `/otel`, channels on `/ws/channels/{id}`, the
//! built-in `configuration` worker with its trigger type, and `observe.v1`
//! (owner delivery, and auto delivery of routed calls).
//!
//! Security meaning: the `ide` worker is tested against what the real engine
//! does, not against a friendlier fake: routing, injected
//! `_caller_worker_id`, verbatim error bodies, conflicts, disconnect cleanup,
//! configuration replace-on-register and bounded channels. The engine only
//! ever listens on the loopback address.

#![forbid(unsafe_code)]

mod builtins;
mod channels;
mod config_events;
mod configuration;
mod expand;
mod observe;
mod registry;
mod router;
mod schema;
mod state;
mod triggers;
mod worker;

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use iii_sdk::protocol::ErrorBody;
use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_tungstenite::tungstenite::handshake::server::{
    Callback, ErrorResponse, Request, Response,
};
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode, Uri};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use channels::{End, Refusal};
use router::EngineCall;
use state::Shared;

/// How long `stop` waits for the engine's tasks before aborting them.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// The longest `external_set` waits for its subscribers.
const DELIVERY_WAIT: Duration = Duration::from_secs(30);

/// A running test engine on `127.0.0.1:<ephemeral port>`.
pub struct TestEngine {
    shared: Arc<Shared>,
    port: u16,
    stop: watch::Sender<bool>,
}

/// Which endpoint a socket asked for.
enum Route {
    Worker,
    Otel,
    Channel(End),
}

impl TestEngine {
    /// Binds, starts serving and returns once the engine accepts connections.
    ///
    /// Panics when the loopback listener cannot be bound: no test can run then.
    pub async fn start() -> TestEngine {
        let listener = match TcpListener::bind("127.0.0.1:0").await {
            Ok(listener) => listener,
            Err(error) => panic!("test engine: cannot bind 127.0.0.1:0: {error}"),
        };
        let port = match listener.local_addr() {
            Ok(addr) => addr.port(),
            Err(error) => panic!("test engine: no local address: {error}"),
        };
        let (stop, shutdown) = watch::channel(false);
        let (jobs, job_queue) = mpsc::unbounded_channel();
        let shared = Shared::new(shutdown, jobs);
        shared.spawn(config_events::run(shared.clone(), job_queue));
        shared.spawn(accept_loop(shared.clone(), listener));
        TestEngine { shared, port, stop }
    }

    /// The worker endpoint, e.g. `ws://127.0.0.1:40123`.
    pub fn url(&self) -> String {
        format!("ws://127.0.0.1:{}", self.port)
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Waits until function `id` is registered; false after `within`.
    pub async fn wait_for_function(&self, id: &str, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let changed = self.shared.registry_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.shared.lock().functions.contains_key(id) {
                return true;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return self.shared.lock().functions.contains_key(id);
            }
        }
    }

    /// The ids of every function registered right now, sorted.
    pub fn functions(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.shared.lock().functions.keys().cloned().collect();
        ids.sort();
        ids
    }

    /// The `registerfunction` frame of `id` as received (schemas, metadata,
    /// observe descriptor).
    pub fn function_registration(&self, id: &str) -> Option<Value> {
        self.shared
            .lock()
            .functions
            .get(id)
            .map(|f| f.frame.clone())
    }

    /// The raw stored configuration value; `None` when there is no entry.
    pub fn stored_config(&self, id: &str) -> Option<Value> {
        self.shared.lock().config.raw(id)
    }

    /// Stores `value` with no schema, as if the engine had loaded it from
    /// disk at boot: `get` returns it, `set` fails until a `register`.
    pub fn preload_config(&self, id: &str, value: Value) {
        self.shared.lock().config.preload(id, value);
    }

    /// An operator's edit: stores `value` unvalidated, fires
    /// `configuration:updated` and returns once every subscriber was called
    /// (at most 30 s).
    pub async fn external_set(&self, id: &str, value: Value) {
        let (done, delivered) = oneshot::channel();
        {
            let mut st = self.shared.lock();
            let change = st.config.external_set(id, value);
            config_events::announce(&self.shared, &st, &change, Some(done));
        }
        let _ = tokio::time::timeout(DELIVERY_WAIT, delivered).await;
    }

    /// Every `configuration::*` call received, in order: the function id and
    /// the `data` as the worker sent it.
    pub fn config_calls(&self) -> Vec<(String, Value)> {
        self.shared.lock().config_calls.clone()
    }

    /// Calls `function_id` as the engine itself does for trigger fan-out:
    /// no `_caller_worker_id`, no metadata. Returns the handler's result or
    /// its error body.
    pub async fn invoke(&self, function_id: &str, data: Value) -> Result<Value, ErrorBody> {
        router::invoke(
            &self.shared,
            EngineCall {
                function_id: function_id.to_string(),
                data,
                metadata: None,
                activation: None,
                observe_depth: None,
            },
        )
        .await
    }

    /// Closes the listener and every socket, as an engine that vanished;
    /// returns once the engine's tasks have ended.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for task in self.shared.take_tasks() {
            let abort = task.abort_handle();
            if tokio::time::timeout(STOP_GRACE, task).await.is_err() {
                abort.abort();
            }
        }
    }
}

impl Drop for TestEngine {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        for task in self.shared.take_tasks() {
            task.abort();
        }
    }
}

async fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let conn_shared = shared.clone();
                shared.spawn(connection(conn_shared, stream));
            }
            Err(error) => {
                tracing::warn!(%error, "test engine: accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

fn refusal((status, body): Refusal) -> ErrorResponse {
    let mut response = ErrorResponse::new(Some(body.to_string()));
    *response.status_mut() = status;
    response
}

/// Decides what a handshake for `uri` gets.
fn classify(shared: &Shared, uri: &Uri) -> Result<Route, Refusal> {
    match uri.path() {
        "/" => Ok(Route::Worker),
        "/otel" => Ok(Route::Otel),
        path => {
            let id = path
                .strip_prefix("/ws/channels/")
                .filter(|id| !id.is_empty() && !id.contains('/'))
                .ok_or((StatusCode::NOT_FOUND, "Not found"))?;
            let end = shared.lock().channels.open(id, uri.query().unwrap_or(""))?;
            Ok(Route::Channel(end))
        }
    }
}

/// The handshake callback: routes the request and records the route.
struct Handshake<'a> {
    shared: &'a Shared,
    route: &'a mut Option<Route>,
}

impl Callback for Handshake<'_> {
    fn on_request(
        self,
        request: &Request,
        mut response: Response,
    ) -> Result<Response, ErrorResponse> {
        let chosen = classify(self.shared, request.uri()).map_err(refusal)?;
        *self.route = Some(chosen);
        response.headers_mut().insert(
            "x-iii-capabilities",
            HeaderValue::from_static("tcp-nodelay"),
        );
        Ok(response)
    }
}

/// Upgrades one TCP connection and serves the endpoint it asked for.
async fn connection(shared: Arc<Shared>, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut route = None;
    let handshake = Handshake {
        shared: &shared,
        route: &mut route,
    };
    let ws = match tokio_tungstenite::accept_hdr_async(stream, handshake).await {
        Ok(ws) => ws,
        Err(error) => {
            tracing::debug!(%error, "test engine: handshake refused or failed");
            return;
        }
    };
    match route {
        Some(Route::Worker) => worker::serve(shared, ws).await,
        Some(Route::Channel(end)) => channels::serve(ws, end).await,
        Some(Route::Otel) => {
            let mut ws = ws;
            while let Some(Ok(frame)) = ws.next().await {
                if matches!(frame, WsMessage::Close(_)) {
                    break;
                }
            }
        }
        None => {}
    }
}
