//! Delivery of configuration change events to `configuration` triggers.
//!
//! Security meaning: events reach subscribers the way the real engine sends
//! them (a fresh invocation id, the trigger's metadata as the sidecar, no
//! `_caller_worker_id`, each subscriber awaited in turn, results dropped),
//! and in the order the changes happened, so hot-reload tests see the
//! production sequence.

#![forbid(unsafe_code)]

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::configuration::Change;
use super::router::{self, EngineCall};
use super::state::{Shared, State};
use super::triggers::{config_subscribers, Subscriber};

/// One event and the subscribers it matched when it happened.
pub(crate) struct ConfigJob {
    event: Value,
    subscribers: Vec<Subscriber>,
    /// Told once every subscriber was called.
    done: Option<oneshot::Sender<()>>,
}

/// Queues `change` for its current subscribers.
pub(crate) fn announce(
    shared: &Shared,
    st: &State,
    change: &Change,
    done: Option<oneshot::Sender<()>>,
) {
    let job = ConfigJob {
        event: change.event(),
        subscribers: config_subscribers(st, change.event_type, &change.id),
        done,
    };
    if shared.config_jobs.send(job).is_err() {
        tracing::debug!("test engine: configuration event dropped after stop");
    }
}

/// Delivers queued events one after the other until the engine stops.
pub(crate) async fn run(shared: Arc<Shared>, mut jobs: mpsc::UnboundedReceiver<ConfigJob>) {
    while let Some(job) = jobs.recv().await {
        for subscriber in job.subscribers {
            if let Some(condition) = subscriber.condition_function_id {
                let verdict = router::invoke(
                    &shared,
                    EngineCall {
                        function_id: condition,
                        data: job.event.clone(),
                        metadata: subscriber.metadata.clone(),
                        activation: None,
                        observe_depth: None,
                    },
                )
                .await;
                if !matches!(verdict, Ok(ref v) if v.as_bool() != Some(false)) {
                    continue;
                }
            }
            let delivered = router::invoke(
                &shared,
                EngineCall {
                    function_id: subscriber.function_id.clone(),
                    data: job.event.clone(),
                    metadata: subscriber.metadata,
                    activation: None,
                    observe_depth: None,
                },
            )
            .await;
            if let Err(error) = delivered {
                tracing::debug!(function_id = %subscriber.function_id, code = %error.code,
                    "test engine: configuration event not handled");
            }
        }
        if let Some(done) = job.done {
            let _ = done.send(());
        }
    }
}
