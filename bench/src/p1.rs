//! P1: `shell::exec` of `/bin/true`, one call at a time, against a direct
//! spawn of `/bin/true` and a bare engine round trip to a no-op function,
//! all measured in the same run. Overhead = exec − (spawn + round trip).
#![forbid(unsafe_code)]

use crate::row::Row;
use crate::stats::{diff_ms, ms, summarize, Summary};
use crate::world::boot;
use iii_sdk::protocol::TriggerRequest;
use iii_sdk::RegisterFunction;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The three series and the derived overhead.
pub struct P1 {
    pub spawn: Summary,
    pub noop: Summary,
    pub exec: Summary,
}

async fn timed<F, Fut>(n: usize, mut f: F) -> Summary
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f().await;
        samples.push(t.elapsed());
    }
    summarize(&mut samples)
}

/// Runs P1 with `n` samples per series (after a warm-up of n/10).
pub async fn run(n: usize) -> P1 {
    let world = boot(json!({"fs": {"allow_unjailed": true}})).await;
    let noop_worker = ide_tests::client(&world.engine.url(), "bench-noop");
    noop_worker.register_function(
        "bench::noop",
        RegisterFunction::new_async(|_: Value| async { Ok::<Value, iii_sdk::Error>(Value::Null) }),
    );
    assert!(
        world
            .engine
            .wait_for_function("bench::noop", Duration::from_secs(30))
            .await
    );
    let call = |id: &'static str, payload: Value| {
        let caller = world.caller.clone();
        async move {
            caller
                .trigger(TriggerRequest {
                    timeout_ms: Some(30_000),
                    ..TriggerRequest::new(id, payload)
                })
                .await
                .expect("call failed");
        }
    };
    let warm = (n / 10).max(5);
    let _ = timed(warm, || {
        call("shell::exec", json!({"command": "/bin/true"}))
    })
    .await;
    let _ = timed(warm, || call("bench::noop", json!({}))).await;

    let spawn = timed(n, || async {
        let status = tokio::process::Command::new("/bin/true")
            .status()
            .await
            .expect("spawn /bin/true");
        assert!(status.success());
    })
    .await;
    let noop = timed(n, || call("bench::noop", json!({}))).await;
    let exec = timed(n, || call("shell::exec", json!({"command": "/bin/true"}))).await;
    P1 { spawn, noop, exec }
}

impl P1 {
    /// The median overhead the worker adds over spawn + round trip.
    pub fn overhead(&self) -> Duration {
        self.exec
            .median
            .saturating_sub(self.spawn.median + self.noop.median)
    }

    /// The table row.
    pub fn row(&self) -> Row {
        let base = self.spawn.median + self.noop.median;
        let base_p99 = self.spawn.p99 + self.noop.p99;
        Row {
            id: "P1",
            what: "`shell::exec` of /bin/true, one at a time",
            baseline: format!(
                "spawn+wait {} ms + no-op round trip {} ms (median)",
                ms(self.spawn.median),
                ms(self.noop.median)
            ),
            measured: format!(
                "overhead median {} ms, p99 {} ms",
                diff_ms(self.exec.median, base),
                diff_ms(self.exec.p99, base_p99)
            ),
            goal: "median ≤ 0.3 ms; p99 ≤ 2 ms",
            met: self.overhead() <= Duration::from_micros(300)
                && self.exec.p99.saturating_sub(base_p99) <= Duration::from_millis(2),
        }
    }

    /// Markdown rows.
    pub fn table(&self) -> String {
        let row = |name: &str, s: &Summary| {
            format!("| {name} | {} | {} | {} |\n", ms(s.median), ms(s.p99), s.n)
        };
        let mut out = String::from("| P1 series | median ms | p99 ms | n |\n|---|---|---|---|\n");
        out += &row("direct spawn+wait of /bin/true", &self.spawn);
        out += &row("engine round trip to a no-op function", &self.noop);
        out += &row("shell::exec of /bin/true", &self.exec);
        out += &format!(
            "\nP1 median overhead over (spawn + round trip): {} ms (goal ≤ 0.3 ms); p99 exec − p99 (spawn + round trip): {} ms (goal ≤ 2 ms)\n",
            diff_ms(self.exec.median, self.spawn.median + self.noop.median),
            diff_ms(self.exec.p99, self.spawn.p99 + self.noop.p99),
        );
        out
    }
}
