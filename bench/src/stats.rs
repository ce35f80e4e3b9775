//! Median and p99 of a set of samples: every figure the benchmarks report is
//! one of these, or a difference or ratio of them measured in the same run.
#![forbid(unsafe_code)]

use std::time::Duration;

/// Summary of one measured series.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub median: Duration,
    pub p99: Duration,
    pub n: usize,
}

/// Summarises samples (sorted in place).
pub fn summarize(samples: &mut [Duration]) -> Summary {
    samples.sort_unstable();
    let at = |q: f64| {
        if samples.is_empty() {
            return Duration::ZERO;
        }
        let i = ((samples.len() - 1) as f64 * q).round() as usize;
        samples[i.min(samples.len() - 1)]
    };
    Summary {
        median: at(0.5),
        p99: at(0.99),
        n: samples.len(),
    }
}

/// The `q` quantile of already sorted ratios (nearest rank); 0 when empty.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    let i = ((sorted.len().saturating_sub(1)) as f64 * q).round() as usize;
    sorted.get(i).copied().unwrap_or(0.0)
}

/// Milliseconds with three decimals, for tables.
pub fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

/// Signed difference a − b in milliseconds.
pub fn diff_ms(a: Duration, b: Duration) -> String {
    format!("{:+.3}", (a.as_secs_f64() - b.as_secs_f64()) * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_p99_of_a_known_series() {
        let mut v: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
        let s = summarize(&mut v);
        assert_eq!(s.median, Duration::from_millis(51));
        assert_eq!(s.p99, Duration::from_millis(99));
        assert_eq!(s.n, 100);
    }

    #[test]
    fn quantiles_of_sorted_ratios() {
        let v: Vec<f64> = (0..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.01), 1.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }

    #[test]
    fn an_empty_series_is_zero() {
        assert_eq!(summarize(&mut []).median, Duration::ZERO);
    }
}
