//! P5: `shell::fs::read` of a large file through a channel to an SDK
//! client, against the minimal bench worker streaming the same file
//! through the same engine (the most the relay lets any worker do) and
//! `cat file > /dev/null` for scale. The broker + executor peak RSS is
//! sampled during the read: streaming must not buffer the file.
#![forbid(unsafe_code)]

use crate::minimal::{self, drain};
use crate::row::Row;
use crate::rss::{mb, PeakSampler};
use crate::stats::quantile;
use crate::world::boot;
use iii_sdk::channels::StreamChannelRef;
use iii_sdk::protocol::TriggerRequest;
use iii_sdk::IIIClient;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

/// Throughputs (MB/s, medians), the ratio and the peak RSS.
pub struct P5 {
    pub ide_mbps: f64,
    pub minimal_mbps: f64,
    pub cat_mbps: f64,
    pub ratio_median: f64,
    pub ratio_p99: f64,
    pub peak_kib: u64,
    pub mib: u64,
}

/// MB/s of `bytes` moved in `d`.
pub fn mbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / 1e6 / d.as_secs_f64().max(1e-9)
}

/// The median of unsorted values.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    quantile(&v, 0.5)
}

fn make_file(path: &Path, mib: u64) {
    use std::io::Write;
    let block: Vec<u8> = (0..1 << 20)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create bench file"));
    for _ in 0..mib {
        f.write_all(&block).expect("write bench file");
    }
    f.flush().expect("flush bench file");
}

async fn read_via(caller: &IIIClient, url: &str, id: &str, path: &str) -> (u64, Duration) {
    let t = Instant::now();
    let request = TriggerRequest::new(id, json!({ "path": path }));
    let reply: Value = caller
        .trigger(TriggerRequest {
            timeout_ms: Some(600_000),
            ..request
        })
        .await
        .expect("read call failed");
    let reference: StreamChannelRef =
        serde_json::from_value(reply["content"].clone()).expect("a channel reference");
    let bytes = drain(url, &reference).await;
    (bytes, t.elapsed())
}

/// Times `sh -c script` with `path` as `$1`.
pub fn shell_time(script: &str, path: &str) -> Duration {
    let t = Instant::now();
    let ok = std::process::Command::new("sh")
        .args(["-c", script, "sh", path])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "{script} failed");
    t.elapsed()
}

/// Reads a `mib` MiB file `runs` times through each path.
pub async fn run(mib: u64, runs: usize) -> P5 {
    let world =
        boot(json!({"fs": {"allow_unjailed": true, "max_read_bytes": 0, "max_write_bytes": 0}}))
            .await;
    let url = world.engine.url();
    let worker = ide_tests::client(&url, "bench-minimal");
    minimal::register(&worker, &url);
    assert!(
        world
            .engine
            .wait_for_function("bench::read", Duration::from_secs(30))
            .await
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("big.bin");
    let (p, m) = (file.clone(), mib);
    tokio::task::spawn_blocking(move || make_file(&p, m))
        .await
        .expect("make file");
    let path = file.to_string_lossy().into_owned();
    let size = mib << 20;
    let (mut ide, mut min, mut cat, mut ratios, mut peak) = (vec![], vec![], vec![], vec![], 0);
    for _ in 0..runs.max(1) {
        let sampler = PeakSampler::start(world.ide.pid());
        let (got, d_ide) = read_via(&world.caller, &url, "shell::fs::read", &path).await;
        peak = peak.max(sampler.finish().await);
        assert_eq!(got, size, "shell::fs::read streamed {got} of {size} bytes");
        let (got, d_min) = read_via(&world.caller, &url, "bench::read", &path).await;
        assert_eq!(got, size, "bench::read streamed {got} of {size} bytes");
        let d_cat = shell_time("cat \"$1\" > /dev/null", &path);
        ide.push(mbps(size, d_ide));
        min.push(mbps(size, d_min));
        cat.push(mbps(size, d_cat));
        ratios.push(d_min.as_secs_f64() / d_ide.as_secs_f64());
    }
    ratios.sort_by(f64::total_cmp);
    P5 {
        ide_mbps: median(ide),
        minimal_mbps: median(min),
        cat_mbps: median(cat),
        ratio_median: quantile(&ratios, 0.5),
        ratio_p99: quantile(&ratios, 0.01),
        peak_kib: peak,
        mib,
    }
}

impl P5 {
    /// The table row.
    pub fn row(&self) -> Row {
        Row {
            id: "P5",
            what: "`shell::fs::read` of a large file via channel",
            baseline: format!(
                "minimal worker {:.0} MB/s (`cat` {:.0} MB/s)",
                self.minimal_mbps, self.cat_mbps
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
