//! P8: 16 background jobs each writing 1 GB to stdout. The executor must
//! keep only a bounded tail of each job's output, so broker + executor
//! memory stays flat however much the jobs write; every job must finish.
#![forbid(unsafe_code)]

use crate::row::Row;
use crate::rss::{mb, PeakSampler};
use crate::world::{boot, World};
use iii_sdk::protocol::TriggerRequest;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Jobs started at once (the default `max_concurrent_jobs`).
const JOBS: usize = 16;
/// How long all jobs together may take before the run gives up.
const DEADLINE: Duration = Duration::from_secs(300);

/// Peak RSS and how the jobs ended.
pub struct P8 {
    pub peak_kib: u64,
    pub finished: usize,
    pub elapsed: Duration,
}

async fn call(world: &World, id: &str, payload: Value) -> Result<Value, iii_sdk::Error> {
    let request = TriggerRequest::new(id, payload);
    world
        .caller
        .trigger(TriggerRequest {
            timeout_ms: Some(30_000),
            ..request
        })
        .await
}

/// Starts the jobs, polls their status (a 4 KiB output window) every 200 ms,
/// samples RSS meanwhile.
pub async fn run() -> P8 {
    let world = boot(json!({"fs": {"allow_unjailed": true}})).await;
    let jobs_up = world
        .engine
        .wait_for_function("shell::exec_bg", Duration::from_secs(60))
        .await;
    assert!(
        jobs_up,
        "shell::exec_bg was not registered:\n{}",
        world.ide.logs()
    );
    let sampler = PeakSampler::start(world.ide.pid());
    let t = Instant::now();
    let mut ids = Vec::with_capacity(JOBS);
    for _ in 0..JOBS {
        let started = call(
            &world,
            "shell::exec_bg",
            json!({"command": "head", "args": ["-c", "1G", "/dev/zero"]}),
        )
        .await
        .expect("exec_bg failed");
        ids.extend(started["job_id"].as_str().map(str::to_owned));
    }
    let mut finished = 0;
    let mut pending = ids;
    while !pending.is_empty() && t.elapsed() < DEADLINE {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut still = Vec::with_capacity(pending.len());
        for id in pending {
            // Polled the way an agent watches a long job: a 4 KiB window.
            let window = json!({"job_id": id, "max_bytes": 4096});
            let status = call(&world, "shell::status", window)
                .await
                .map(|r| r["job"]["status"].as_str().unwrap_or_default().to_owned());
            match status.as_deref() {
                Ok("running") => still.push(id),
                Ok("finished") => finished += 1,
                other => eprintln!("P8: job {id} ended as {other:?}"),
            }
        }
        pending = still;
    }
    let elapsed = t.elapsed();
    P8 {
        peak_kib: sampler.finish().await,
        finished,
        elapsed,
    }
}

impl P8 {
    /// The table row.
    pub fn row(&self) -> Row {
        Row {
            id: "P8",
            what: "16 background jobs × 1 GB stdout",
            baseline: "—".into(),
            measured: format!(
                "peak {}; {}/{JOBS} finished in {:.1} s",
                mb(self.peak_kib),
                self.finished,
                self.elapsed.as_secs_f64()
            ),
            goal: "RSS ≤ 64 MB; every job completes",
            met: self.peak_kib <= 64 * 1024 && self.finished == JOBS,
        }
    }
}
