//! The job table: every record, the atomic check-and-insert, the rules for a
//! final status, and the queue of completions no broker acknowledged yet.
//!
//! Security meaning: this is the executor's floor for jobs. Whatever the
//! broker asks, an id is inserted at most once (a running or retained id is
//! refused without touching the original), the running count never passes
//! the broker's cap nor [`MAX_RUNNING`], the table never holds more than
//! [`MAX_RECORDS`] records, and a `killed` status is never downgraded. Every
//! method runs under one lock, so a record is published whole.
#![forbid(unsafe_code)]

use super::output::Output;
use ide_proto::{
    ErrorKind, ExecutorError, JobCompletion, JobLimits, JobRecord, JobStatus, JobSummary,
    OutputWindow, RemoteEnd, Stream,
};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use tokio::sync::Notify;

/// Running jobs allowed at once, whatever cap the broker passes.
pub const MAX_RUNNING: u32 = 1024;
/// Records kept at once; past it the oldest finished record is evicted.
pub const MAX_RECORDS: usize = 4096;
/// Longest job id or owner, in bytes.
pub const MAX_ID_BYTES: usize = 256;
/// Largest argv of a job, in bytes (it travels whole in records and events).
pub const MAX_ARGV_BYTES: usize = 256 * 1024;

/// How the executor reaches a job's process.
#[derive(Debug, Clone)]
pub enum Control {
    /// Spawned here: a kill wakes the task that owns the process group.
    Host { kill: Arc<Notify> },
    /// Run by the broker elsewhere (a sandbox), reserved by connection `conn`.
    Remote { conn: u64 },
}

/// A job about to be inserted.
#[derive(Debug)]
pub struct NewJob {
    pub job_id: String,
    pub owner: Option<String>,
    pub argv: Vec<String>,
    pub output: Arc<Output>,
    pub control: Control,
}

/// How a host job's process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostEnd {
    /// It exited (`None`: by a signal, or it could not be waited for).
    Exited(Option<i32>),
    /// The host hard cap killed it.
    TimedOut,
}

#[derive(Debug)]
struct Record {
    argv: Vec<String>,
    owner: Option<String>,
    started_at_ms: u64,
    finished_at_ms: Option<u64>,
    status: JobStatus,
    exit_code: Option<i32>,
    output: Arc<Output>,
    control: Control,
    /// Something may still change it: the host task has not finalized it,
    /// or a remote job has not reported its end. Never pruned while live.
    live: bool,
    /// Its completion was queued (once, ever).
    announced: bool,
}

impl Record {
    fn completion(&self, job_id: &str) -> JobCompletion {
        JobCompletion {
            job_id: job_id.to_owned(),
            argv: self.argv.clone(),
            status: self.status,
            exit_code: self.exit_code,
            started_at_ms: self.started_at_ms,
            finished_at_ms: self.finished_at_ms.unwrap_or(self.started_at_ms),
        }
    }

    fn expired(&self, retention_ms: u64, now_ms: u64) -> bool {
        !self.live
            && self
                .finished_at_ms
                .is_some_and(|at| now_ms.saturating_sub(at) >= retention_ms)
    }
}

/// Every job of this executor, and the completions awaiting an ack.
#[derive(Debug, Default)]
pub struct Table {
    records: HashMap<String, Record>,
    unacked: BTreeMap<u64, JobCompletion>,
    next_seq: u64,
}

fn invalid(message: impl Into<String>) -> ExecutorError {
    ExecutorError::new(ErrorKind::Invalid, message)
}

/// The error of an id the table does not hold.
pub fn no_such_job(job_id: &str) -> ExecutorError {
    ExecutorError::new(ErrorKind::NotFound, format!("no such job: {job_id}"))
}

/// Refuses ids, owners and argv the table will not hold.
fn check_new(job: &NewJob) -> Result<(), ExecutorError> {
    if job.job_id.trim().is_empty() {
        return Err(invalid("job_id must contain a non-whitespace character"));
    }
    if job.job_id.len() > MAX_ID_BYTES {
        return Err(invalid(format!("job_id exceeds {MAX_ID_BYTES} bytes")));
    }
    if job.owner.as_ref().is_some_and(|o| o.len() > MAX_ID_BYTES) {
        return Err(invalid(format!("session id exceeds {MAX_ID_BYTES} bytes")));
    }
    if job.argv.is_empty() {
        return Err(invalid("empty command"));
    }
    let argv_bytes: usize = job.argv.iter().map(|a| a.len() + 1).sum();
    if argv_bytes > MAX_ARGV_BYTES {
        return Err(invalid(format!(
            "the argv of a background job exceeds {MAX_ARGV_BYTES} bytes"
        )));
    }
    Ok(())
}

impl Table {
    /// Checks and inserts `job` as running, atomically. Prunes expired
    /// records first (an expired id is free again).
    pub fn insert(
        &mut self,
        job: NewJob,
        limits: JobLimits,
        now_ms: u64,
    ) -> Result<u64, ExecutorError> {
        check_new(&job)?;
        self.prune(limits.retention_ms, now_ms);
        if self.records.contains_key(&job.job_id) {
            return Err(ExecutorError::new(
                ErrorKind::Exists,
                format!("job_id '{}' already exists", job.job_id),
            ));
        }
        let cap = limits.max_running.min(MAX_RUNNING);
        let running = self.running();
        if running >= cap as usize {
            return Err(invalid(format!(
                "max concurrent jobs ({cap}) reached, currently running: {running}"
            )));
        }
        if self.records.len() >= MAX_RECORDS && !self.evict_oldest() {
            return Err(ExecutorError::new(
                ErrorKind::Internal,
                format!("the job table is full ({MAX_RECORDS} records)"),
            ));
        }
        self.records.insert(
            job.job_id,
            Record {
                argv: job.argv,
                owner: job.owner,
                started_at_ms: now_ms,
                finished_at_ms: None,
                status: JobStatus::Running,
                exit_code: None,
                output: job.output,
                control: job.control,
                live: true,
                announced: false,
            },
        );
        Ok(now_ms)
    }

    /// Forgets a job whose process could not be started (no completion).
    pub fn remove_unstarted(&mut self, job_id: &str) {
        self.records.remove(job_id);
    }

    fn running(&self) -> usize {
        self.records
            .values()
            .filter(|r| r.status == JobStatus::Running)
            .count()
    }

    /// Drops the finished record that finished first; false when every
    /// record is still live.
    fn evict_oldest(&mut self) -> bool {
        let oldest = self
            .records
            .iter()
            .filter(|(_, r)| !r.live)
            .min_by_key(|(_, r)| r.finished_at_ms)
            .map(|(id, _)| id.clone());
        match oldest {
            Some(id) => {
                self.forget(&HashSet::from([id]));
                true
            }
            None => false,
        }
    }

    fn forget(&mut self, ids: &HashSet<String>) {
        self.records.retain(|id, _| !ids.contains(id));
        self.unacked.retain(|_, c| !ids.contains(&c.job_id));
    }

    /// Forgets records finished at least `retention_ms` ago (and their
    /// unacknowledged completions). Live records are never pruned.
    pub fn prune(&mut self, retention_ms: u64, now_ms: u64) -> u64 {
        let expired: HashSet<String> = self
            .records
            .iter()
            .filter(|(_, r)| r.expired(retention_ms, now_ms))
            .map(|(id, _)| id.clone())
            .collect();
        self.forget(&expired);
        expired.len() as u64
    }

    fn announce(&mut self, job_id: &str) {
        let Some(record) = self.records.get_mut(job_id) else {
            return;
        };
        if record.announced || record.status == JobStatus::Running {
            return;
        }
        record.announced = true;
        let completion = record.completion(job_id);
        self.unacked.insert(self.next_seq, completion);
        self.next_seq += 1;
    }

    /// Flips a running job to `killed` (its `finished_at_ms` is now) and
    /// wakes its owner. `None` for an unknown id; otherwise whether it was
    /// running, whether it is remote, and its status after.
    pub fn kill(&mut self, job_id: &str, now_ms: u64) -> Option<(bool, bool, JobStatus)> {
        let record = self.records.get_mut(job_id)?;
        let remote = matches!(record.control, Control::Remote { .. });
        if record.status != JobStatus::Running {
            return Some((false, remote, record.status));
        }
        record.status = JobStatus::Killed;
        record.finished_at_ms = Some(now_ms);
        match &record.control {
            Control::Host { kill } => kill.notify_one(),
            // Nothing to signal here: the record is final now.
            Control::Remote { .. } => self.announce(job_id),
        }
        Some((true, remote, JobStatus::Killed))
    }

    /// Kills every running job whose owner is in `owners`; returns how many.
    pub fn kill_owned(&mut self, owners: &[String], now_ms: u64) -> u64 {
        let owners: HashSet<&str> = owners.iter().map(String::as_str).collect();
        let targets: Vec<String> = self
            .records
            .iter()
            .filter(|(_, r)| r.status == JobStatus::Running)
            .filter(|(_, r)| r.owner.as_deref().is_some_and(|o| owners.contains(o)))
            .map(|(id, _)| id.clone())
            .collect();
        targets
            .iter()
            .filter(|id| matches!(self.kill(id, now_ms), Some((true, _, _))))
            .count() as u64
    }

    /// Kills every running job (a shutdown); returns how many.
    pub fn kill_all(&mut self, now_ms: u64) -> u64 {
        let targets: Vec<String> = self
            .records
            .iter()
            .filter(|(_, r)| r.status == JobStatus::Running)
            .map(|(id, _)| id.clone())
            .collect();
        targets
            .iter()
            .filter(|id| matches!(self.kill(id, now_ms), Some((true, _, _))))
            .count() as u64
    }

    /// A host job's process ended: the record becomes final in this one
    /// step and its completion is queued. A `killed` status (and its time)
    /// set earlier is kept.
    pub fn end_host(&mut self, job_id: &str, end: HostEnd, now_ms: u64) {
        let Some(record) = self.records.get_mut(job_id) else {
            return;
        };
        let (exit_code, status) = match end {
            HostEnd::Exited(Some(0)) => (Some(0), JobStatus::Finished),
            HostEnd::Exited(code) => (code, JobStatus::Failed),
            HostEnd::TimedOut => (None, JobStatus::Killed),
        };
        record.exit_code = exit_code;
        if record.status == JobStatus::Running {
            record.status = status;
            record.finished_at_ms = Some(now_ms);
        }
        record.live = false;
        self.announce(job_id);
    }

    /// The output of a remote job, for its reported bytes.
    pub fn remote_output(&self, job_id: &str) -> Result<Arc<Output>, ExecutorError> {
        match self.records.get(job_id) {
            Some(r) if matches!(r.control, Control::Remote { .. }) => Ok(r.output.clone()),
            Some(_) => Err(invalid(format!("job {job_id} is not a reserved job"))),
            None => Err(no_such_job(job_id)),
        }
    }

    /// A remote job reported its end (after a kill, only the exit code is
    /// recorded).
    pub fn end_remote(
        &mut self,
        job_id: &str,
        end: RemoteEnd,
        now_ms: u64,
    ) -> Result<(), ExecutorError> {
        self.remote_output(job_id)?;
        let Some(record) = self.records.get_mut(job_id) else {
            return Err(no_such_job(job_id));
        };
        if !record.live {
            return Ok(());
        }
        let status = match (end.timed_out, end.exit_code) {
            (true, _) => JobStatus::Killed,
            (false, Some(0)) => JobStatus::Finished,
            (false, _) => JobStatus::Failed,
        };
        record.exit_code = if end.timed_out { None } else { end.exit_code };
        if record.status == JobStatus::Running {
            record.status = status;
            record.finished_at_ms = Some(now_ms);
        }
        record.live = false;
        self.announce(job_id);
        Ok(())
    }

    /// The connection that reserved remote jobs ended: the ones still live
    /// can no longer be followed and end `failed` (a killed one stays killed).
    pub fn connection_ended(&mut self, conn: u64, now_ms: u64) -> usize {
        let orphans: Vec<String> = self
            .records
            .iter()
            .filter(|(_, r)| {
                r.live && matches!(r.control, Control::Remote { conn: c } if c == conn)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in &orphans {
            if let Some(record) = self.records.get_mut(id) {
                record.output.note(
                    Stream::Stderr,
                    "[ide] the broker that forwarded this sandbox job went away before it ended; its outcome is unknown\n",
                );
                if record.status == JobStatus::Running {
                    record.status = JobStatus::Failed;
                    record.finished_at_ms = Some(now_ms);
                }
                record.live = false;
            }
            self.announce(id);
        }
        orphans.len()
    }

    /// One record with a window of each stream, after pruning.
    pub fn record(
        &mut self,
        job_id: &str,
        window: OutputWindow,
        retention_ms: u64,
        now_ms: u64,
    ) -> Result<(JobRecord, Vec<u8>, Vec<u8>), ExecutorError> {
        self.prune(retention_ms, now_ms);
        let r = self
            .records
            .get(job_id)
            .ok_or_else(|| no_such_job(job_id))?;
        let (stdout, out) = r
            .output
            .window(Stream::Stdout, window.stdout_offset, window.max_bytes);
        let (stderr, err) = r
            .output
            .window(Stream::Stderr, window.stderr_offset, window.max_bytes);
        let record = JobRecord {
            job_id: job_id.to_owned(),
            argv: r.argv.clone(),
            owner: r.owner.clone(),
            remote: matches!(r.control, Control::Remote { .. }),
            started_at_ms: r.started_at_ms,
            finished_at_ms: r.finished_at_ms,
            status: r.status,
            exit_code: r.exit_code,
            stdout,
            stderr,
        };
        Ok((record, out, err))
    }

    /// Every record as a summary (oldest first), after pruning.
    pub fn summaries(&mut self, retention_ms: u64, now_ms: u64) -> Vec<JobSummary> {
        self.prune(retention_ms, now_ms);
        let mut all: Vec<JobSummary> = self
            .records
            .iter()
            .map(|(id, r)| JobSummary {
                job_id: id.clone(),
                status: r.status,
                started_at_ms: r.started_at_ms,
                finished_at_ms: r.finished_at_ms,
                exit_code: r.exit_code,
                stdout_truncated: r.output.dropped(Stream::Stdout) > 0,
                stderr_truncated: r.output.dropped(Stream::Stderr) > 0,
            })
            .collect();
        all.sort_by(|a, b| (a.started_at_ms, &a.job_id).cmp(&(b.started_at_ms, &b.job_id)));
        all
    }

    /// Stops re-sending these completions.
    pub fn ack(&mut self, job_ids: &[String]) {
        let ids: HashSet<&str> = job_ids.iter().map(String::as_str).collect();
        self.unacked.retain(|_, c| !ids.contains(c.job_id.as_str()));
    }

    /// Unacknowledged completions queued at `seq` or later, in order.
    pub fn unacked_from(&self, seq: u64) -> Vec<(u64, JobCompletion)> {
        self.unacked
            .range(seq..)
            .map(|(s, c)| (*s, c.clone()))
            .collect()
    }

    /// Host jobs whose task has not finalized them yet.
    pub fn live_host_jobs(&self) -> usize {
        self.records
            .values()
            .filter(|r| r.live && matches!(r.control, Control::Host { .. }))
            .count()
    }

    /// True while a broker could still want something from this table:
    /// a running job or a completion nobody acknowledged.
    pub fn has_pending_work(&self) -> bool {
        !self.unacked.is_empty() || self.records.values().any(|r| r.live)
    }

    /// True when there is no record at all.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

#[cfg(test)]
mod tests;
