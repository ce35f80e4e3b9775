//! P2: 200 concurrent `shell::exec` calls of `/bin/true` against the
//! machine's raw spawn rate at the same concurrency (200 `tokio::process`
//! spawns from the bench process). Rounds alternate between the two so
//! both see the same machine load.
#![forbid(unsafe_code)]

use crate::row::Row;
use crate::stats::{quantile, summarize};
use crate::world::boot;
use iii_sdk::protocol::TriggerRequest;
use serde_json::json;
use std::time::{Duration, Instant};

/// Concurrent calls per round.
const CONCURRENCY: usize = 200;

/// Throughput ratios of the rounds and the errors seen.
pub struct P2 {
    pub ratio_median: f64,
    pub ratio_p99: f64,
    pub raw_per_s: f64,
    pub exec_per_s: f64,
    pub errors: usize,
}

async fn raw_round() -> Duration {
    let t = Instant::now();
    let spawns =
        (0..CONCURRENCY).map(|_| tokio::spawn(tokio::process::Command::new("/bin/true").status()));
    for s in spawns.collect::<Vec<_>>() {
        assert!(
            matches!(s.await, Ok(Ok(st)) if st.success()),
            "raw spawn of /bin/true failed"
        );
    }
    t.elapsed()
}

async fn exec_round(caller: &iii_sdk::IIIClient) -> (Duration, usize) {
    let t = Instant::now();
    let calls = (0..CONCURRENCY).map(|_| {
        let caller = caller.clone();
        tokio::spawn(async move {
            let request = TriggerRequest::new("shell::exec", json!({"command": "/bin/true"}));
            caller
                .trigger(TriggerRequest {
                    timeout_ms: Some(60_000),
                    ..request
                })
                .await
        })
    });
    let mut errors = 0;
    for c in calls.collect::<Vec<_>>() {
        match c.await {
            Ok(Ok(v)) if v["exit_code"] == 0 => {}
            _ => errors += 1,
        }
    }
    (t.elapsed(), errors)
}

/// Runs `rounds` alternating rounds (after one warm-up round of each).
pub async fn run(rounds: usize) -> P2 {
    let world = boot(json!({"fs": {"allow_unjailed": true}})).await;
    raw_round().await;
    exec_round(&world.caller).await;
    let (mut raw, mut exec, mut ratios, mut errors) = (vec![], vec![], vec![], 0);
    for _ in 0..rounds.max(1) {
        let r = raw_round().await;
        let (e, errs) = exec_round(&world.caller).await;
        errors += errs;
        raw.push(r);
        exec.push(e);
        ratios.push(r.as_secs_f64() / e.as_secs_f64());
    }
    ratios.sort_by(f64::total_cmp);
    let per_s = |v: &mut Vec<Duration>| CONCURRENCY as f64 / summarize(v).median.as_secs_f64();
    P2 {
        ratio_median: quantile(&ratios, 0.5),
        // The slow end of a throughput ratio is its low end.
        ratio_p99: quantile(&ratios, 0.01),
        raw_per_s: per_s(&mut raw),
        exec_per_s: per_s(&mut exec),
        errors,
    }
}

impl P2 {
    /// The table row.
    pub fn row(&self) -> Row {
        Row {
            id: "P2",
            what: "200 concurrent `shell::exec` of /bin/true",
            baseline: format!(
                "raw spawn rate at concurrency 200 ({:.0}/s)",
                self.raw_per_s
            ),
            measured: format!(
                "{:.0}/s; ratio median {:.0} %, p99 {:.0} %; {} errors",
                self.exec_per_s,
                self.ratio_median * 100.0,
                self.ratio_p99 * 100.0,
                self.errors
            ),
            goal: "≥ 70 % of raw, 0 errors",
            met: self.ratio_median >= 0.7 && self.errors == 0,
        }
    }
}
