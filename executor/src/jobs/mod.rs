//! Background jobs: owned by the executor, not by a broker connection, so
//! they keep running, and their output keeps being captured, while the
//! broker restarts.
//!
//! Security meaning: jobs are spawned through the one spawn path
//! ([`crate::exec::launch`]: floor, jailed cwd, own process group, death
//! signal tied to a runtime worker thread of this process, never to a
//! short-lived thread nor to the broker). A job's group is signalled only by
//! the task that owns its leader and only while the leader is unreaped, so a
//! kill can never hit a reused pid. The table ([`table`]) is the floor on
//! ids, counts and final statuses whatever the broker asks, and every job is
//! killed when the executor stops.
#![forbid(unsafe_code)]

pub mod linger;
pub mod output;
pub mod requests;
pub mod run;
pub mod table;
pub mod tail;

use ide_proto::{JobEvent, Reply, ToBroker, EVENT_ID};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use table::Table;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// How long a shutdown waits for killed jobs to be reaped.
pub const STOP_WAIT: Duration = Duration::from_secs(3);

/// The jobs of one executor and the brokers attached to it.
#[derive(Debug)]
pub struct Jobs {
    table: Mutex<Table>,
    /// Bumped whenever a record becomes final (a completion may be queued).
    changes: watch::Sender<u64>,
    /// Set by a broker that shuts down on purpose.
    stop: watch::Sender<bool>,
    brokers: AtomicUsize,
    next_conn: AtomicU64,
    /// The retention the last broker asked for (`u64::MAX` until one did),
    /// applied while no broker is connected.
    retention_ms: AtomicU64,
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Jobs {
    /// An empty table (tests, and the one of [`Jobs::process`]).
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            table: Mutex::new(Table::default()),
            changes: watch::channel(0).0,
            stop: watch::channel(false).0,
            brokers: AtomicUsize::new(0),
            next_conn: AtomicU64::new(1),
            retention_ms: AtomicU64::new(u64::MAX),
        })
    }

    /// The table of this process, which every broker connection shares
    /// (an adopted executor serves the next broker from it).
    pub fn process() -> Arc<Self> {
        static PROCESS: OnceLock<Arc<Jobs>> = OnceLock::new();
        PROCESS.get_or_init(Jobs::new).clone()
    }

    /// The table, locked. Never held across an await.
    pub fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the locked table and then wakes every completion
    /// forwarder (a record may have become final).
    pub fn update<T>(&self, f: impl FnOnce(&mut Table) -> T) -> T {
        let out = f(&mut self.table());
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
        out
    }

    /// Brokers connected right now.
    pub fn brokers(&self) -> usize {
        self.brokers.load(Ordering::Acquire)
    }

    /// Remembers the retention a broker asked for.
    pub fn remember_retention(&self, retention_ms: u64) {
        self.retention_ms.store(retention_ms, Ordering::Relaxed);
    }

    /// Prunes with the last retention a broker asked for (nothing before
    /// one did), so an executor no broker comes back to still forgets
    /// expired records and their unacknowledged completions.
    pub fn prune_as_last_asked(&self) -> u64 {
        let retention_ms = self.retention_ms.load(Ordering::Relaxed);
        self.update(|t| t.prune(retention_ms, now_ms()))
    }

    /// Whether a broker asked this executor to stop.
    pub fn stop_requested(&self) -> bool {
        *self.stop.borrow()
    }

    /// Fires when a broker asks this executor to stop.
    pub fn stop_signal(&self) -> watch::Receiver<bool> {
        self.stop.subscribe()
    }

    /// Kills every job and waits (at most `wait`) until the killed host jobs
    /// are reaped and final.
    pub async fn stop_all(&self, wait: Duration) -> u64 {
        let mut changes = self.changes.subscribe();
        let killed = self.update(|t| t.kill_all(now_ms()));
        let reaped = async {
            while self.table().live_host_jobs() > 0 {
                if changes.changed().await.is_err() {
                    return;
                }
            }
        };
        if tokio::time::timeout(wait, reaped).await.is_err() {
            tracing::warn!("killed jobs were not reaped within {wait:?}");
        }
        killed
    }

    /// Kills every job, then marks the executor as asked to stop.
    pub async fn shut_down(&self) {
        let killed = self.stop_all(STOP_WAIT).await;
        tracing::info!(killed, "the broker is shutting down: every job was stopped");
        self.stop.send_replace(true);
    }

    /// Attaches a broker connection whose frames go through `tx`: every
    /// completion not yet acknowledged is sent to it now (after the hello,
    /// which must already be queued) and every later one as it happens.
    pub fn attach(self: &Arc<Self>, tx: mpsc::Sender<ToBroker>) -> Attachment {
        let conn = self.next_conn.fetch_add(1, Ordering::Relaxed);
        self.brokers.fetch_add(1, Ordering::AcqRel);
        let forwarder = tokio::spawn(forward(self.clone(), tx));
        Attachment {
            jobs: self.clone(),
            conn,
            forwarder,
        }
    }
}

/// A broker connection's hold on the jobs. Dropping it (the connection
/// ended) stops its forwarder and ends the remote jobs it reserved.
#[derive(Debug)]
pub struct Attachment {
    jobs: Arc<Jobs>,
    conn: u64,
    forwarder: JoinHandle<()>,
}

impl Attachment {
    /// This connection's number, which remote jobs it reserves carry.
    pub fn conn(&self) -> u64 {
        self.conn
    }
}

impl Drop for Attachment {
    fn drop(&mut self) {
        self.forwarder.abort();
        let conn = self.conn;
        let ended = self.jobs.update(|t| t.connection_ended(conn, now_ms()));
        if ended > 0 {
            tracing::warn!(ended, "sandbox jobs lost their broker and ended failed");
        }
        self.jobs.brokers.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Sends each unacknowledged completion to one connection, in order, once.
async fn forward(jobs: Arc<Jobs>, tx: mpsc::Sender<ToBroker>) {
    let mut changes = jobs.changes.subscribe();
    let mut next = 0u64;
    loop {
        let queued = jobs.table().unacked_from(next);
        for (seq, completion) in queued {
            let frame = ToBroker {
                id: EVENT_ID,
                body: Reply::JobEvent(JobEvent::Finished(completion)),
            };
            if tx.send(frame).await.is_err() {
                return;
            }
            next = seq + 1;
        }
        if changes.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests;
