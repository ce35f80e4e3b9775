//! How long an executor started by a broker outlives that broker.
//!
//! The broker starts the executor with `--fd N` and a rendezvous socket
//! (`--listen PATH --trust-uid UID`). When the inherited connection ends by
//! EOF (the broker crashed or was killed), the executor keeps running while
//! it has running jobs or unacknowledged completions (which are pruned with
//! their records, at the retention the last broker asked for), and then for
//! [`IDLE_GRACE`] more, serving the next broker on the rendezvous socket, so
//! a restarted broker adopts it with every job intact. A broker that shuts
//! down on purpose says so first (`JobRequest::Shutdown`) and the executor
//! exits with it; an executor that never held a job exits at once.
//!
//! Security meaning: the rendezvous socket is bound before the first broker
//! is served (an executor that is still tearing its old connection down
//! queues the next broker instead of looking dead), it lives in a private
//! directory and accepts only the trusted uid (see [`crate::listen`]), and
//! it is removed on exit if it is still ours. Every job is killed before the
//! process exits.
#![forbid(unsafe_code)]

use super::{Jobs, STOP_WAIT};
use crate::listen;
use crate::server::{serve_with, ConnectionEnd};
use crate::state::Executor;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::UnixStream;

/// How long an executor with nothing left to report waits for a broker.
pub const IDLE_GRACE: Duration = Duration::from_secs(60);
/// How often the idle check runs.
const TICK: Duration = Duration::from_millis(250);

/// The rendezvous socket this process bound, removed on drop if the path
/// still names it (a newer executor may have replaced it).
struct Bound {
    path: PathBuf,
    identity: (u64, u64),
}

impl Bound {
    fn new(path: &Path) -> Option<Self> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        Some(Self {
            path: path.to_owned(),
            identity: (meta.dev(), meta.ino()),
        })
    }
}

impl Drop for Bound {
    fn drop(&mut self) {
        let ours = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|m| (m.dev(), m.ino()) == self.identity);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Serves the broker that started us on `stream`, then lingers for the next
/// one on `path` as described above, with the process's job table (the one
/// every connection of [`listen::serve`] uses). Returns the connection's end.
pub async fn serve_and_linger(
    executor: Arc<Executor>,
    stream: UnixStream,
    path: &Path,
    trust_uid: u32,
) -> ConnectionEnd {
    let jobs = Jobs::process();
    let listener = match listen::bind(path, trust_uid) {
        Ok(listener) => Some(listener),
        Err(e) => {
            tracing::warn!("no rendezvous socket ({e}); jobs will not survive a broker restart");
            None
        }
    };
    let bound = listener.as_ref().and_then(|_| Bound::new(path));
    let end = serve_with(executor.clone(), jobs.clone(), stream).await;
    let listener = match listener {
        Some(l) if !jobs.stop_requested() && !jobs.table().is_empty() => l,
        _ => {
            jobs.stop_all(STOP_WAIT).await;
            return end;
        }
    };
    tracing::info!(
        "the broker went away; keeping the jobs and waiting for the next broker on {}",
        path.display()
    );
    let server = tokio::spawn(listen::serve(executor, listener, trust_uid));
    wait_until_done(&jobs).await;
    server.abort();
    jobs.stop_all(STOP_WAIT).await;
    drop(bound);
    tracing::info!("no broker needs this executor any more; exiting");
    end
}

/// Returns once a broker asked us to stop and left, or once no broker has
/// been connected, with nothing pending, for [`IDLE_GRACE`].
async fn wait_until_done(jobs: &Jobs) {
    let mut stop = jobs.stop_signal();
    let mut idle = Duration::ZERO;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(TICK) => {}
            _ = stop.changed() => {}
        }
        if jobs.brokers() > 0 {
            idle = Duration::ZERO;
            continue;
        }
        if jobs.stop_requested() {
            return;
        }
        jobs.prune_as_last_asked();
        if jobs.table().has_pending_work() {
            idle = Duration::ZERO;
        } else {
            idle += TICK;
            if idle >= IDLE_GRACE {
                return;
            }
        }
    }
}
