//! Who observes `shell::on-job-finished`, and handing each of them a
//! completion exactly once per time the engine adds them.
//!
//! Security meaning: an observer receives only completion events (never
//! output), only through the SDK's `emit`, which applies its own filters;
//! the replay of a retained completion goes to the one observer that asked
//! for that job, nobody else.
#![forbid(unsafe_code)]

use super::response::Completion;
use iii_sdk::{ObserveHandler, ObserveRejection, Observer};
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::runtime::Handle;

/// How long a delivery waits for a new observer to become active.
const ACTIVATION_WAIT: Duration = Duration::from_secs(30);
/// How often that wait looks.
const ACTIVATION_POLL: Duration = Duration::from_millis(5);

/// The args of an observer.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ObserveArgs {
    /// Receive this job's completion (replayed if it already finished).
    /// Omit it to receive future completions of every job.
    pub job_id: Option<String>,
}

/// Looks up the retained completion of a job (`None` while it runs or when
/// it is unknown).
pub type Lookup =
    Arc<dyn Fn(String) -> Pin<Box<dyn Future<Output = Option<Completion>> + Send>> + Send + Sync>;

/// One observer, as long as the engine keeps it added.
pub struct Entry {
    observer: Observer,
    job_id: Option<String>,
    /// Jobs already handed to it (for an observer of one job: at most one).
    delivered: Mutex<HashSet<String>>,
}

impl Entry {
    fn wants(&self, job_id: &str) -> bool {
        self.job_id.as_deref().is_none_or(|j| j == job_id)
    }
}

/// The observer index, shared by the hooks and the delivery task.
#[derive(Clone)]
pub struct Observers {
    entries: Arc<Mutex<HashMap<String, Arc<Entry>>>>,
    rt: Handle,
    lookup: Lookup,
}

impl Observers {
    /// An empty index whose replays run on `rt` and read records through
    /// `lookup`.
    pub fn new(rt: Handle, lookup: Lookup) -> Self {
        Self {
            entries: Arc::default(),
            rt,
            lookup,
        }
    }

    fn entries(&self) -> MutexGuard<'_, HashMap<String, Arc<Entry>>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Observers held right now.
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    /// True when nobody observes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hands a live completion to every observer that wants it.
    pub fn fan_out(&self, completion: &Arc<Completion>) {
        let targets: Vec<Arc<Entry>> = self
            .entries()
            .values()
            .filter(|e| e.wants(&completion.job_id))
            .cloned()
            .collect();
        for entry in targets {
            self.offer(&entry, completion.clone());
        }
    }

    fn is_held(&self, entry: &Arc<Entry>) -> bool {
        self.entries()
            .get(entry.observer.id())
            .is_some_and(|held| Arc::ptr_eq(held, entry))
    }

    /// Waits until the engine activated `entry` (it is inactive while its
    /// hook runs); false if it was removed or never activated in time.
    async fn activated(&self, entry: &Arc<Entry>) -> bool {
        let polls = ACTIVATION_WAIT.as_millis() / ACTIVATION_POLL.as_millis();
        for _ in 0..polls {
            if entry.observer.is_active() {
                return true;
            }
            if !self.is_held(entry) {
                return false;
            }
            tokio::time::sleep(ACTIVATION_POLL).await;
        }
        false
    }

    /// Emits `completion` to `entry` unless it already had this job's,
    /// waiting for its activation when needed.
    fn offer(&self, entry: &Arc<Entry>, completion: Arc<Completion>) {
        let first = entry
            .delivered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(completion.job_id.clone());
        if !first {
            return;
        }
        if entry.observer.is_active() {
            emit(entry, &completion);
            return;
        }
        let this = self.clone();
        let entry = entry.clone();
        self.rt.spawn(async move {
            if this.activated(&entry).await {
                emit(&entry, &completion);
            }
        });
    }

    /// Replays a retained completion to a new observer of one job, once it
    /// is active.
    fn replay(&self, entry: Arc<Entry>, job_id: String) {
        let this = self.clone();
        self.rt.spawn(async move {
            if !this.activated(&entry).await {
                return;
            }
            if let Some(completion) = (this.lookup)(job_id).await {
                this.offer(&entry, Arc::new(completion));
            }
        });
    }
}

fn emit(entry: &Entry, completion: &Completion) {
    match entry.observer.emit(completion) {
        Ok(true) => {}
        Ok(false) => tracing::debug!(
            observer = entry.observer.id(),
            job_id = %completion.job_id,
            "completion not delivered (filtered out, or the observer left)"
        ),
        Err(e) => tracing::warn!(
            observer = entry.observer.id(),
            job_id = %completion.job_id,
            "completion not delivered: {e}"
        ),
    }
}

#[async_trait::async_trait]
impl ObserveHandler for Observers {
    async fn on_observer_added(&self, obs: &Observer) -> Result<(), ObserveRejection> {
        let args: ObserveArgs = obs.args()?;
        if args.job_id.as_ref().is_some_and(|j| j.trim().is_empty()) {
            return Err(ObserveRejection::new(
                iii_sdk::protocol::observe_codes::INVALID_ARGS,
                "job_id must contain a non-whitespace character",
            ));
        }
        let entry = Arc::new(Entry {
            observer: obs.clone(),
            job_id: args.job_id.clone(),
            delivered: Mutex::default(),
        });
        self.entries().insert(obs.id().to_owned(), entry.clone());
        if let Some(job_id) = args.job_id {
            self.replay(entry, job_id);
        }
        Ok(())
    }

    async fn on_observer_removed(&self, obs: &Observer) {
        self.entries().remove(obs.id());
    }
}
