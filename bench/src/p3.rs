//! P3: a scoped exec under `fs.exec_confinement: landlock` against the same
//! scoped exec with confinement off. Two workers run side by side on the
//! same engine and the samples alternate, so load hits both alike; the
//! difference of the medians is what Landlock adds.
#![forbid(unsafe_code)]

use crate::row::Row;
use crate::stats::{diff_ms, ms, summarize, Summary};
use crate::world::{boot, World};
use iii_sdk::protocol::TriggerRequest;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The two series.
pub struct P3 {
    pub off: Summary,
    pub landlock: Summary,
}

fn config(root: &str, confinement: &str) -> Value {
    json!({"fs": {"host_roots": [root], "allow_unjailed": false, "exec_confinement": confinement}})
}

async fn exec(world: &World, payload: &Value) -> Duration {
    let t = Instant::now();
    let request = TriggerRequest::new("shell::exec", payload.clone());
    let reply = world
        .caller
        .trigger(TriggerRequest {
            timeout_ms: Some(30_000),
            ..request
        })
        .await
        .expect("scoped exec failed");
    assert_eq!(reply["exit_code"], 0, "scoped exec: {reply}");
    t.elapsed()
}

/// Runs `n` samples of each, interleaved, after a warm-up of n/10.
pub async fn run(n: usize) -> P3 {
    let root = tempfile::tempdir().expect("tempdir");
    let root_path = root.path().canonicalize().expect("canonical root");
    let root_str = root_path.to_string_lossy().into_owned();
    let off = boot(config(&root_str, "off")).await;
    let landlock = boot(config(&root_str, "landlock")).await;
    let payload = json!({
        "command": "/bin/true",
        "fs_scope": {"root": root_str, "grants": [], "boundary": "workspace"},
    });
    for _ in 0..(n / 10).max(5) {
        exec(&off, &payload).await;
        exec(&landlock, &payload).await;
    }
    let (mut a, mut b) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        a.push(exec(&off, &payload).await);
        b.push(exec(&landlock, &payload).await);
    }
    P3 {
        off: summarize(&mut a),
        landlock: summarize(&mut b),
    }
}

impl P3 {
    /// The table row.
    pub fn row(&self) -> Row {
        let added = self.landlock.median.saturating_sub(self.off.median);
        Row {
            id: "P3",
            what: "scoped exec under `exec_confinement: landlock`",
            baseline: format!(
                "same scoped exec, confinement off (median {} ms)",
                ms(self.off.median)
            ),
            measured: format!(
                "added median {} ms, p99 {} ms",
                diff_ms(self.landlock.median, self.off.median),
                diff_ms(self.landlock.p99, self.off.p99)
            ),
            goal: "≤ 0.1 ms median added",
            met: added <= Duration::from_micros(100),
        }
    }
}
