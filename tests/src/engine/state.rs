//! The engine's shared state: connections, the function registry and the
//! calls in flight.
//!
//! Security meaning: this is the engine's routing table. A result is only
//! relayed from the connection the call was sent to, and a connection's
//! registrations die with it, exactly as the real engine behaves, so tests
//! cannot pass on routing the production engine would refuse.

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use iii_sdk::protocol::{ErrorBody, ObserveDescriptor};
use iii_sdk::Message;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch, Notify};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use uuid::Uuid;

use super::channels::Channels;
use super::config_events::ConfigJob;
use super::configuration::ConfigStore;
use super::observe::{Observers, RoutedCall};
use super::triggers::Triggers;

/// The engine's own number for a socket, never sent on the wire.
pub(crate) type ConnId = u64;

/// One live worker socket.
pub(crate) struct Conn {
    /// Frames queued for the socket's writer; a `Close` frame ends it.
    pub tx: mpsc::UnboundedSender<WsMessage>,
    /// The UUID announced in `workerregistered`.
    pub worker_id: String,
    /// `(namespace, name)` claimed by `engine::workers::register`.
    pub identity: Option<(String, String)>,
}

/// A registered function and the connection that owns it.
pub(crate) struct Function {
    pub conn: ConnId,
    /// The `registerfunction` frame exactly as received.
    pub frame: Value,
    /// How its observers are delivered; the default (auto) when absent.
    pub observe: ObserveDescriptor,
    /// Revision of its observer set, restarted at 1 by each registration.
    pub revision: u64,
}

/// Who waits for an `invocationresult`.
pub(crate) enum Pending {
    /// A worker's call forwarded to `target`; the result goes to `caller`.
    Relay {
        caller: ConnId,
        target: ConnId,
        function_id: String,
        /// Kept when the function's observers watch its routed calls.
        observed: Option<Box<RoutedCall>>,
    },
    /// A call the engine made itself and awaits.
    Engine {
        target: ConnId,
        reply: oneshot::Sender<Result<Value, ErrorBody>>,
    },
    /// A call the engine made itself without waiting (observer activations).
    Discard { target: ConnId },
}

impl Pending {
    fn target(&self) -> ConnId {
        match self {
            Pending::Relay { target, .. }
            | Pending::Engine { target, .. }
            | Pending::Discard { target } => *target,
        }
    }
}

/// Everything behind the engine's one lock. No lock is held across an await.
#[derive(Default)]
pub(crate) struct State {
    next_conn: ConnId,
    pub conns: HashMap<ConnId, Conn>,
    pub functions: HashMap<String, Function>,
    pub pending: HashMap<Uuid, Pending>,
    pub triggers: Triggers,
    pub config: ConfigStore,
    pub config_calls: Vec<(String, Value)>,
    pub channels: Channels,
    pub observers: Observers,
}

impl State {
    /// Adds a connection and returns its number and worker id.
    pub fn connect(&mut self, tx: mpsc::UnboundedSender<WsMessage>) -> (ConnId, String) {
        self.next_conn += 1;
        let worker_id = Uuid::new_v4().to_string();
        self.conns.insert(
            self.next_conn,
            Conn {
                tx,
                worker_id: worker_id.clone(),
                identity: None,
            },
        );
        (self.next_conn, worker_id)
    }

    /// Queues `message` for `conn`; a vanished connection drops it.
    pub fn send(&self, conn: ConnId, message: &Message) {
        match serde_json::to_string(message) {
            Ok(text) => self.send_text(conn, text),
            Err(error) => tracing::warn!(%error, "test engine: unserializable frame dropped"),
        }
    }

    /// Queues an already encoded frame (a relayed result keeps its bytes).
    pub fn send_text(&self, conn: ConnId, text: String) {
        if let Some(c) = self.conns.get(&conn) {
            let _ = c.tx.send(WsMessage::Text(text.into()));
        }
    }

    /// The worker id of `conn`, or an empty string once it is gone.
    pub fn worker_id(&self, conn: ConnId) -> String {
        self.conns
            .get(&conn)
            .map(|c| c.worker_id.clone())
            .unwrap_or_default()
    }

    /// The connection that owns `function_id`.
    pub fn owner(&self, function_id: &str) -> Option<ConnId> {
        self.functions.get(function_id).map(|f| f.conn)
    }

    /// Answers every call routed to `conn` with `invocation_stopped` and
    /// forgets the calls `conn` made (their late results are dropped).
    pub fn stop_invocations(&mut self, conn: ConnId) {
        let ids: Vec<Uuid> = self
            .pending
            .iter()
            .filter(|(_, p)| {
                p.target() == conn || matches!(p, Pending::Relay { caller, .. } if *caller == conn)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            let Some(pending) = self.pending.remove(&id) else {
                continue;
            };
            let stopped = ErrorBody::new(
                "invocation_stopped",
                format!("Invocation {id} stopped: the worker handling it disconnected"),
            );
            match pending {
                Pending::Relay {
                    caller,
                    target,
                    function_id,
                    ..
                } if target == conn && caller != conn => {
                    self.send(
                        caller,
                        &Message::InvocationResult {
                            invocation_id: id,
                            function_id,
                            result: None,
                            error: Some(stopped),
                            traceparent: None,
                            baggage: None,
                        },
                    );
                }
                Pending::Engine { reply, .. } => {
                    let _ = reply.send(Err(stopped));
                }
                Pending::Relay { .. } | Pending::Discard { .. } => {}
            }
        }
    }
}

/// What every task of one engine shares.
pub(crate) struct Shared {
    state: Mutex<State>,
    /// Woken whenever the function registry changes.
    pub registry_changed: Notify,
    shutdown: watch::Receiver<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// Configuration change events, delivered in order by one task.
    pub config_jobs: mpsc::UnboundedSender<ConfigJob>,
}

impl Shared {
    /// A fresh engine state; `shutdown` turns true (or its sender drops) on stop.
    pub fn new(
        shutdown: watch::Receiver<bool>,
        config_jobs: mpsc::UnboundedSender<ConfigJob>,
    ) -> Arc<Shared> {
        Arc::new(Shared {
            state: Mutex::new(State::default()),
            registry_changed: Notify::new(),
            shutdown,
            tasks: Mutex::new(Vec::new()),
            config_jobs,
        })
    }

    /// The state lock. A panic elsewhere never poisons the engine for good.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `task` until it finishes or the engine stops.
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let mut shutdown = self.shutdown.clone();
        let handle = tokio::spawn(async move {
            tokio::select! {
                _ = task => {}
                _ = shutdown.wait_for(|stopped| *stopped) => {}
            }
        });
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        tasks.retain(|t| !t.is_finished());
        tasks.push(handle);
    }

    /// Every task still tracked, for `stop` to await.
    pub fn take_tasks(&self) -> Vec<JoinHandle<()>> {
        std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
