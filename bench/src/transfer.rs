//! What P5 and P6 share: a large transfer timed through `ide`, through the
//! minimal bench worker and through a plain tool, run after run, summarised
//! as median throughputs, the ratio to the minimal worker and peak RSS.
#![forbid(unsafe_code)]

use crate::row::Row;
use crate::rss::mb;
use crate::stats::quantile;
use std::time::{Duration, Instant};

/// The timings of every run of one transfer of `bytes`.
pub struct Runs {
    bytes: u64,
    ide: Vec<f64>,
    minimal: Vec<f64>,
    tool: Vec<f64>,
    ratios: Vec<f64>,
    peak_kib: u64,
}

/// Median throughputs (MB/s), the ratio to the minimal worker and the peak RSS.
pub struct Transfer {
    pub ide_mbps: f64,
    pub minimal_mbps: f64,
    pub tool_mbps: f64,
    pub ratio_median: f64,
    pub ratio_p99: f64,
    pub peak_kib: u64,
    pub mib: u64,
}

impl Runs {
    /// No runs yet of a transfer of `bytes`.
    pub fn new(bytes: u64) -> Runs {
        Runs {
            bytes,
            ide: vec![],
            minimal: vec![],
            tool: vec![],
            ratios: vec![],
            peak_kib: 0,
        }
    }

    /// One run: the three durations and the worker's peak RSS during `ide`'s.
    pub fn record(&mut self, ide: Duration, minimal: Duration, tool: Duration, peak_kib: u64) {
        self.ide.push(mbps(self.bytes, ide));
        self.minimal.push(mbps(self.bytes, minimal));
        self.tool.push(mbps(self.bytes, tool));
        self.ratios
            .push(minimal.as_secs_f64() / ide.as_secs_f64().max(1e-9));
        self.peak_kib = self.peak_kib.max(peak_kib);
    }

    /// The summary.
    pub fn finish(mut self) -> Transfer {
        self.ratios.sort_by(f64::total_cmp);
        Transfer {
            ide_mbps: median(self.ide),
            minimal_mbps: median(self.minimal),
            tool_mbps: median(self.tool),
            ratio_median: quantile(&self.ratios, 0.5),
            ratio_p99: quantile(&self.ratios, 0.01),
            peak_kib: self.peak_kib,
            mib: self.bytes >> 20,
        }
    }
}

impl Transfer {
    /// The table row of benchmark `id`; `tool` names the plain tool.
    pub fn row(&self, id: &'static str, what: &'static str, tool: &str) -> Row {
        Row {
            id,
            what,
            baseline: format!(
                "minimal worker {:.0} MB/s (`{tool}` {:.0} MB/s)",
                self.minimal_mbps, self.tool_mbps
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

/// MB/s of `bytes` moved in `d`.
pub fn mbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / 1e6 / d.as_secs_f64().max(1e-9)
}

/// The median of unsorted values.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    quantile(&v, 0.5)
}

/// Wall time of `sh -c script sh path`, which must succeed.
pub fn shell_time(script: &str, path: &str) -> Duration {
    let t = Instant::now();
    let ok = std::process::Command::new("sh")
        .args(["-c", script, "sh", path])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "{script} failed");
    t.elapsed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_summarise_to_medians_and_the_ratio() {
        let mut runs = Runs::new(100 << 20);
        let s = Duration::from_secs;
        runs.record(s(2), s(1), s(1), 10);
        runs.record(s(1), s(1), s(1), 30);
        runs.record(s(4), s(2), s(1), 20);
        let t = runs.finish();
        assert_eq!(t.mib, 100);
        assert_eq!(t.peak_kib, 30);
        assert!((t.ratio_median - 0.5).abs() < 1e-9, "{}", t.ratio_median);
        assert!((t.ide_mbps - mbps(100 << 20, s(2))).abs() < 1e-9);
        assert!(!t.row("P5", "x", "cat").met);
    }
}
