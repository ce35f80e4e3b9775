//! Resident memory of the worker under test: the broker plus its direct
//! children (the executor). User commands are the executor's children and
//! are not counted, so the figure is what `ide` itself holds.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// `VmRSS` of `pid` in KiB; 0 when the process is gone.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The direct children of `pid`, over all its threads.
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return vec![];
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// RSS of the broker `pid` and its executor, in KiB.
pub fn worker_rss_kib(pid: u32) -> u64 {
    rss_kib(pid) + children(pid).into_iter().map(rss_kib).sum::<u64>()
}

/// Polls [`worker_rss_kib`] in the background and keeps the peak, so a
/// short spike during a transfer is not missed between two reads.
pub struct PeakSampler {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<u64>,
}

impl PeakSampler {
    /// Starts sampling `pid` every 5 ms.
    pub fn start(pid: u32) -> PeakSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let mut peak = 0;
            while !flag.load(Ordering::Relaxed) {
                peak = peak.max(worker_rss_kib(pid));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            peak.max(worker_rss_kib(pid))
        });
        PeakSampler { stop, task }
    }

    /// Stops sampling; the peak in KiB.
    pub async fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap_or(0)
    }
}

/// KiB as MB with one decimal, for tables.
pub fn mb(kib: u64) -> String {
    format!("{:.1} MB", kib as f64 / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_resident_size() {
        assert!(rss_kib(std::process::id()) > 0);
    }

    #[test]
    fn a_missing_process_is_zero() {
        assert_eq!(rss_kib(u32::MAX), 0);
        assert!(children(u32::MAX).is_empty());
    }

    #[tokio::test]
    async fn a_spawned_child_is_counted() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let me = std::process::id();
        let listed = children(me).contains(&child.id());
        // The test process's own RSS moves while sibling tests run, so the
        // child's share is checked against the child alone.
        let own = rss_kib(child.id());
        let total = worker_rss_kib(me);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(listed);
        assert!(own > 0);
        assert!(total >= own);
        assert!(PeakSampler::start(me).finish().await > 0);
    }
}
