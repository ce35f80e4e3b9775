//! P6: `shell::fs::write` of a large stream from an SDK client, against the
//! minimal bench worker receiving the same stream through the same engine
//! and writing it with `tokio::fs`, and `dd` for scale. The broker +
//! executor peak RSS is sampled during the write.
#![forbid(unsafe_code)]

use crate::minimal::{self, feed};
use crate::row::Row;
use crate::rss::PeakSampler;
use crate::transfer::{shell_time, Runs, Transfer};
use crate::world::boot;
use iii_sdk::protocol::TriggerRequest;
use iii_sdk::IIIClient;
use serde_json::json;
use std::time::{Duration, Instant};

async fn write_via(caller: &IIIClient, id: &str, path: &str, size: u64) -> Duration {
    let t = Instant::now();
    let channel = iii_sdk::helpers::create_channel(caller, None)
        .await
        .expect("create channel");
    tokio::spawn(feed(channel.writer, size));
    let payload = json!({"path": path, "content": channel.reader_ref});
    let request = TriggerRequest::new(id, payload);
    let reply = caller
        .trigger(TriggerRequest {
            timeout_ms: Some(600_000),
            ..request
        })
        .await
        .expect("write call failed");
    assert_eq!(reply["bytes_written"], size, "{id}: {reply}");
    t.elapsed()
}

/// Writes `mib` MiB `runs` times through each path.
pub async fn run(mib: u64, runs: usize) -> Transfer {
    let world =
        boot(json!({"fs": {"allow_unjailed": true, "max_read_bytes": 0, "max_write_bytes": 0}}))
            .await;
    let url = world.engine.url();
    let worker = ide_tests::client(&url, "bench-minimal");
    minimal::register(&worker, &url);
    assert!(
        world
            .engine
            .wait_for_function("bench::write", Duration::from_secs(30))
            .await
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("out.bin").to_string_lossy().into_owned();
    let size = mib << 20;
    let dd = format!(
        "dd if=/dev/zero of=\"$1\" bs=64K count={} status=none",
        size / (64 << 10)
    );
    let mut all = Runs::new(size);
    for _ in 0..runs.max(1) {
        let sampler = PeakSampler::start(world.ide.pid());
        let d_ide = write_via(&world.caller, "shell::fs::write", &path, size).await;
        let peak = sampler.finish().await;
        let d_min = write_via(&world.caller, "bench::write", &path, size).await;
        let d_dd = shell_time(&dd, &path);
        all.record(d_ide, d_min, d_dd, peak);
    }
    all.finish()
}

/// The table row.
pub fn row(t: &Transfer) -> Row {
    t.row("P6", "`shell::fs::write` of a large client stream", "dd")
}
