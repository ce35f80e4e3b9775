//! Completions from the executor to observers, and the retention reaper.
//!
//! The executor pushes each completion once its record is final and keeps
//! it until we acknowledge it; a broker that starts (or restarts) receives
//! every completion no broker acknowledged, right after the hello. Each is
//! fanned out to the observers that want it and then acknowledged. A
//! completion seen twice (re-sent after a reconnect) is delivered once.
//!
//! Security meaning: only what the executor reports is delivered, and only
//! the event fields (never output) reach observers.
#![forbid(unsafe_code)]

use super::observers::Observers;
use super::response::Completion;
use crate::app::App;
use ide_proto::{JobEvent, JobRequest, Request};
use iii_sdk::Observer;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

/// Completions acknowledged in one request at most.
const ACK_BATCH: usize = 256;
/// At start, how long delivery waits for the engine to re-announce the
/// observers it held while no broker was connected.
const SETTLE_MAX: Duration = Duration::from_secs(3);
/// The observer set counts as announced once it stopped growing this long.
const SETTLE_QUIET: Duration = Duration::from_millis(200);
/// How often the settle wait looks.
const SETTLE_POLL: Duration = Duration::from_millis(20);
/// Completions are remembered (to drop a re-sent one) this much longer than
/// the executor retains them.
const SEEN_SLACK_MS: u64 = 60_000;

/// Lets the engine re-announce existing observers before the first
/// completions (those that waited for this broker) are fanned out.
async fn settle(observers: &Observers, active: impl Fn() -> Vec<Observer>) {
    let began = tokio::time::Instant::now();
    let mut last = (usize::MAX, began);
    while began.elapsed() < SETTLE_MAX {
        let held = observers.len().max(active().len());
        if held != last.0 {
            last = (held, tokio::time::Instant::now());
        } else if held > 0 && last.1.elapsed() >= SETTLE_QUIET {
            return;
        }
        tokio::time::sleep(SETTLE_POLL).await;
    }
}

/// Delivers completions until the executor's event stream ends (never, in
/// practice: it survives executor restarts).
pub async fn run(
    app: Arc<App>,
    observers: Observers,
    active: impl Fn() -> Vec<Observer>,
    mut events: UnboundedReceiver<JobEvent>,
) {
    settle(&observers, active).await;
    let mut seen: HashMap<String, u64> = HashMap::new();
    let mut batch = Vec::with_capacity(ACK_BATCH);
    while events.recv_many(&mut batch, ACK_BATCH).await > 0 {
        let retention_ms = duration_ms(app.snapshot().job_retention());
        let now = now_ms();
        seen.retain(|_, finished| {
            now.saturating_sub(*finished) <= retention_ms.saturating_add(SEEN_SLACK_MS)
        });
        let mut acks = Vec::with_capacity(batch.len());
        for JobEvent::Finished(c) in batch.drain(..) {
            if seen.insert(c.job_id.clone(), c.finished_at_ms).is_none() {
                observers.fan_out(&Arc::new(Completion::from(&c)));
            }
            acks.push(c.job_id);
        }
        let ack = Request::Job(JobRequest::Ack { job_ids: acks });
        match app.executor.call(ack).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!("the executor refused an ack: {e}"),
            Err(e) => tracing::warn!("cannot acknowledge completions: {e}"),
        }
    }
}

/// Prunes finished records past `job_retention_secs` every
/// clamp(retention / 2, 1 s, 30 s), reading the live configuration each time.
pub async fn reap(app: Arc<App>) {
    loop {
        let retention = app.snapshot().job_retention();
        let period = (retention / 2).clamp(Duration::from_secs(1), Duration::from_secs(30));
        tokio::time::sleep(period).await;
        let retention_ms = duration_ms(app.snapshot().job_retention());
        let prune = Request::Job(JobRequest::Prune { retention_ms });
        if let Ok(Err(e)) = app.executor.call(prune).await {
            tracing::warn!("the executor refused to prune jobs: {e}");
        }
    }
}

/// A duration in whole milliseconds, saturating.
pub fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, duration_ms)
}
