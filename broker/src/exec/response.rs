//! The `shell::exec` response shape (wire-shapes §1).

use ide_proto::ExitReport;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What `shell::exec` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExecResponse {
    /// The exit code; null when the command was killed by a signal or the timeout.
    pub exit_code: Option<i32>,
    /// Captured stdout (lossy UTF-8), at most `max_output_bytes`.
    pub stdout: String,
    /// Captured stderr (lossy UTF-8), at most `max_output_bytes` plus a timeout note.
    pub stderr: String,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// True when the timeout killed the command.
    pub timed_out: bool,
    /// True when stdout was longer than `max_output_bytes`.
    pub stdout_truncated: bool,
    /// True when stderr was longer than `max_output_bytes`.
    pub stderr_truncated: bool,
}

impl ExecResponse {
    /// Shapes an executor report and the collected output.
    pub fn new(report: &ExitReport, cap: u64, stdout: Vec<u8>, stderr: Vec<u8>) -> Self {
        Self {
            exit_code: if report.timed_out {
                None
            } else {
                report.exit_code
            },
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
            duration_ms: report.duration_ms,
            timed_out: report.timed_out,
            stdout_truncated: report.stdout_total > cap,
            stderr_truncated: report.stderr_total > cap,
        }
    }

    /// Appends the note that tells the caller why the command stopped and
    /// what to use for long work.
    pub fn note_timeout(&mut self, effective_ms: u64, clamped_from: Option<u64>) {
        if !self.stderr.is_empty() && !self.stderr.ends_with('\n') {
            self.stderr.push('\n');
        }
        let clamp = match clamped_from {
            Some(requested) => format!(" (requested {requested} ms, clamped to max_timeout_ms)"),
            None => String::new(),
        };
        self.stderr.push_str(&format!(
            "[ide] command timed out after {effective_ms} ms{clamp} and its process group was killed; \
             for long-running work use shell::exec_bg and observe shell::on-job-finished\n"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(timed_out: bool, out: u64, err: u64) -> ExitReport {
        ExitReport {
            exit_code: Some(0),
            signal: None,
            timed_out,
            duration_ms: 5,
            stdout_total: out,
            stderr_total: err,
        }
    }

    #[test]
    fn truncation_is_derived_from_totals() {
        let r = ExecResponse::new(&report(false, 11, 10), 10, b"0123456789".to_vec(), vec![]);
        assert!(r.stdout_truncated);
        assert!(!r.stderr_truncated);
        assert_eq!(r.exit_code, Some(0));
    }

    #[test]
    fn a_timeout_nulls_the_exit_code_and_explains_itself() {
        let mut r = ExecResponse::new(&report(true, 0, 3), 10, vec![], b"abc".to_vec());
        r.note_timeout(1000, Some(5000));
        assert_eq!(r.exit_code, None);
        assert!(r
            .stderr
            .starts_with("abc\n[ide] command timed out after 1000 ms (requested 5000 ms"));
        assert!(r.stderr.contains("shell::exec_bg"));
        assert!(r.stderr.contains("shell::on-job-finished"));
    }
}
