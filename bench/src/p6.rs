//! P6: `shell::fs::write` of a large stream from an SDK client, against the
//! minimal bench worker receiving the same stream through the same engine
//! and writing it with `tokio::fs`, and `dd` for scale. The broker +
//! executor peak RSS is sampled during the write.
#![forbid(unsafe_code)]

use crate::minimal::{self, feed};
use crate::p5::{mbps, median, shell_time};
use crate::row::Row;
use crate::rss::{mb, PeakSampler};
use crate::stats::quantile;
use crate::world::boot;
use iii_sdk::protocol::TriggerRequest;
use iii_sdk::IIIClient;
use serde_json::json;
use std::time::{Duration, Instant};

/// Throughputs (MB/s, medians), the ratio and the peak RSS.
pub struct P6 {
    pub ide_mbps: f64,
    pub minimal_mbps: f64,
    pub dd_mbps: f64,
    pub ratio_median: f64,
    pub ratio_p99: f64,
    pub peak_kib: u64,
    pub mib: u64,
}

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
pub async fn run(mib: u64, runs: usize) -> P6 {
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
    let (mut ide, mut min, mut dds, mut ratios, mut peak) = (vec![], vec![], vec![], vec![], 0);
    for _ in 0..runs.max(1) {
        let sampler = PeakSampler::start(world.ide.pid());
        let d_ide = write_via(&world.caller, "shell::fs::write", &path, size).await;
        peak = peak.max(sampler.finish().await);
        let d_min = write_via(&world.caller, "bench::write", &path, size).await;
        let d_dd = shell_time(&dd, &path);
        ide.push(mbps(size, d_ide));
        min.push(mbps(size, d_min));
        dds.push(mbps(size, d_dd));
        ratios.push(d_min.as_secs_f64() / d_ide.as_secs_f64());
    }
    ratios.sort_by(f64::total_cmp);
    P6 {
        ide_mbps: median(ide),
        minimal_mbps: median(min),
        dd_mbps: median(dds),
        ratio_median: quantile(&ratios, 0.5),
        ratio_p99: quantile(&ratios, 0.01),
        peak_kib: peak,
        mib,
    }
}

impl P6 {
    /// The table row.
    pub fn row(&self) -> Row {
        Row {
            id: "P6",
            what: "`shell::fs::write` of a large client stream",
            baseline: format!(
                "minimal worker {:.0} MB/s (`dd` {:.0} MB/s)",
                self.minimal_mbps, self.dd_mbps
            ),
            measured: format!(
                "{} MiB at {:.0} MB/s = {:.2}× median, {:.2}× p99; peak RSS {}",
                self.mib,
                self.ide_mbps,
                self.ratio_median,
                self.ratio_p99,
                mb(self.peak_kib)
            ),
            goal: "≥ 0.8× minimal; RSS ≤ 64 MB",
            met: self.ratio_median >= 0.8 && self.peak_kib <= 64 * 1024,
        }
    }
}
