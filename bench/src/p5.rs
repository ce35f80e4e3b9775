//! P5: `shell::fs::read` of a large file through a channel to an SDK
//! client, against the minimal bench worker streaming the same file
//! through the same engine (the most the relay lets any worker do) and
//! `cat file > /dev/null` for scale. The broker + executor peak RSS is
//! sampled during the read: streaming must not buffer the file.
#![forbid(unsafe_code)]

use crate::minimal::{self, drain};
use crate::row::Row;
use crate::rss::PeakSampler;
use crate::transfer::{shell_time, Runs, Transfer};
use crate::world::boot;
use iii_sdk::channels::StreamChannelRef;
use iii_sdk::protocol::TriggerRequest;
use iii_sdk::IIIClient;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

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

/// Reads a `mib` MiB file `runs` times through each path.
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
    let mut all = Runs::new(size);
    for _ in 0..runs.max(1) {
        let sampler = PeakSampler::start(world.ide.pid());
        let (got, d_ide) = read_via(&world.caller, &url, "shell::fs::read", &path).await;
        let peak = sampler.finish().await;
        assert_eq!(got, size, "shell::fs::read streamed {got} of {size} bytes");
        let (got, d_min) = read_via(&world.caller, &url, "bench::read", &path).await;
        assert_eq!(got, size, "bench::read streamed {got} of {size} bytes");
        let d_cat = shell_time("cat \"$1\" > /dev/null", &path);
        all.record(d_ide, d_min, d_cat, peak);
    }
    all.finish()
}

/// The table row.
pub fn row(t: &Transfer) -> Row {
    t.row("P5", "`shell::fs::read` of a large file via channel", "cat")
}
