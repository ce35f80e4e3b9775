//! Real jobs spawned through the shared table, followed to their end, and
//! their completions forwarded to attached connections.

use super::*;
use crate::ceiling::Ceilings;
use crate::env::EnvSnapshot;
use crate::state::Executor;
use ide_proto::{EnvSpec, ExecSpec, JobCompletion, JobLimits, JobStatus, OutputWindow, Stdin};
use std::collections::HashMap;
use std::path::PathBuf;

const LIMIT: Duration = Duration::from_secs(20);
const LIMITS: JobLimits = JobLimits {
    max_running: 64,
    retention_ms: 60_000,
};

fn executor() -> Executor {
    Executor {
        env: EnvSnapshot::capture(),
        ceilings: Ceilings::new(&[PathBuf::from("/")]).unwrap(),
    }
}

fn spec(argv: &[&str], timeout_ms: u64) -> ExecSpec {
    ExecSpec {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        env: EnvSpec {
            inherit: true,
            allow: vec![],
            set: vec![],
        },
        cwd: None,
        stdin: Stdin::Null,
        timeout_ms,
        max_output_bytes: 1024,
        confine: None,
    }
}

fn start(jobs: &Arc<Jobs>, id: &str, argv: &[&str], timeout_ms: u64) {
    run::start(
        &executor(),
        jobs,
        id.into(),
        None,
        spec(argv, timeout_ms),
        LIMITS,
    )
    .unwrap();
}

/// The next completion sent to an attached connection.
async fn completion(rx: &mut mpsc::Receiver<ToBroker>) -> JobCompletion {
    let frame = tokio::time::timeout(LIMIT, rx.recv())
        .await
        .expect("a completion in time")
        .expect("the forwarder is alive");
    assert_eq!(frame.id, EVENT_ID);
    match frame.body {
        Reply::JobEvent(JobEvent::Finished(c)) => c,
        other => panic!("expected a completion, got {other:?}"),
    }
}

fn output(jobs: &Jobs, id: &str) -> (String, String) {
    let (_, out, err) = jobs
        .table()
        .record(id, OutputWindow::default(), 60_000, now_ms())
        .unwrap();
    (
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

fn is_gone(pid: &str) -> bool {
    !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

async fn gone(pid: &str) -> bool {
    for _ in 0..200 {
        if is_gone(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}

/// Waits for a job's stdout to hold a line (its pid, for instance).
async fn first_line(jobs: &Jobs, id: &str) -> String {
    for _ in 0..400 {
        let (out, _) = output(jobs, id);
        if let Some((line, _)) = out.split_once('\n') {
            return line.to_owned();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("job {id} printed no line");
}

#[tokio::test]
async fn a_job_runs_to_its_end_and_its_completion_is_forwarded() {
    let jobs = Jobs::new();
    let (tx, mut rx) = mpsc::channel(16);
    let _attached = jobs.attach(tx);
    start(
        &jobs,
        "j1",
        &["sh", "-c", "echo out; echo err >&2; exit 3"],
        0,
    );
    let c = completion(&mut rx).await;
    assert_eq!(
        (c.job_id.as_str(), c.status, c.exit_code),
        ("j1", JobStatus::Failed, Some(3))
    );
    assert_eq!(c.argv, ["sh", "-c", "echo out; echo err >&2; exit 3"]);
    assert!(c.finished_at_ms >= c.started_at_ms);
    assert_eq!(output(&jobs, "j1"), ("out\n".into(), "err\n".into()));
    start(&jobs, "j2", &["true"], 0);
    let c = completion(&mut rx).await;
    assert_eq!(
        (c.job_id.as_str(), c.status, c.exit_code),
        ("j2", JobStatus::Finished, Some(0))
    );
}

#[tokio::test]
async fn a_failed_spawn_frees_the_id_and_queues_nothing() {
    let jobs = Jobs::new();
    let err = run::start(
        &executor(),
        &jobs,
        "x".into(),
        None,
        spec(&["/nonexistent/definitely-not-here"], 0),
        LIMITS,
    )
    .unwrap_err();
    assert!(err.message.contains("command not found"), "{}", err.message);
    assert!(jobs.table().is_empty());
    assert!(!jobs.table().has_pending_work());
    start(&jobs, "x", &["true"], 0);
}

#[tokio::test]
async fn a_kill_stops_the_whole_group_and_ends_killed() {
    let jobs = Jobs::new();
    let (tx, mut rx) = mpsc::channel(16);
    let _attached = jobs.attach(tx);
    start(&jobs, "k", &["sh", "-c", "sleep 100 & echo $!; wait"], 0);
    let grandchild = first_line(&jobs, "k").await;
    let killed = jobs.update(|t| t.kill("k", now_ms()));
    assert_eq!(killed, Some((true, false, JobStatus::Killed)));
    let c = completion(&mut rx).await;
    assert_eq!((c.status, c.exit_code), (JobStatus::Killed, None));
    assert!(gone(&grandchild).await, "the group survived the kill");
}

#[tokio::test]
async fn the_host_hard_cap_kills_and_explains() {
    let jobs = Jobs::new();
    let (tx, mut rx) = mpsc::channel(16);
    let _attached = jobs.attach(tx);
    let began = std::time::Instant::now();
    start(&jobs, "t", &["sleep", "100"], 200);
    let c = completion(&mut rx).await;
    assert_eq!(c.status, JobStatus::Killed);
    assert!(began.elapsed() < Duration::from_secs(15));
    let (_, err) = output(&jobs, "t");
    assert!(err.contains("hard cap of 200ms"), "{err}");
}

#[tokio::test]
async fn kills_racing_natural_exits_never_downgrade() {
    let jobs = Jobs::new();
    let (tx, mut rx) = mpsc::channel(64);
    let _attached = jobs.attach(tx);
    let mut answers = HashMap::new();
    for i in 0..20 {
        let id = format!("r{i}");
        start(&jobs, &id, &["true"], 0);
        if i % 2 == 0 {
            tokio::task::yield_now().await;
        }
        answers.insert(id.clone(), jobs.update(|t| t.kill(&id, now_ms())));
    }
    for _ in 0..20 {
        let c = completion(&mut rx).await;
        match answers[&c.job_id] {
            Some((true, _, JobStatus::Killed)) => assert_eq!(c.status, JobStatus::Killed),
            Some((false, _, _)) => assert_eq!(c.status, JobStatus::Finished),
            other => panic!("unexpected kill answer {other:?}"),
        }
    }
}

#[tokio::test]
async fn unacked_completions_are_resent_to_the_next_connection_only() {
    let jobs = Jobs::new();
    start(&jobs, "a", &["true"], 0);
    start(&jobs, "b", &["true"], 0);
    let (tx, mut rx) = mpsc::channel(16);
    let first = jobs.attach(tx);
    let mut seen = vec![
        completion(&mut rx).await.job_id,
        completion(&mut rx).await.job_id,
    ];
    seen.sort();
    assert_eq!(seen, ["a", "b"]);
    drop(first);
    jobs.table().ack(&["a".into()]);
    let (tx, mut rx) = mpsc::channel(16);
    let _second = jobs.attach(tx);
    assert_eq!(completion(&mut rx).await.job_id, "b");
    assert!(
        tokio::time::timeout(Duration::from_millis(200), rx.recv())
            .await
            .is_err(),
        "an acknowledged completion was sent again"
    );
    assert_eq!(jobs.brokers(), 1);
}

#[tokio::test]
async fn stopping_kills_every_job_and_waits_for_them() {
    let jobs = Jobs::new();
    start(&jobs, "s1", &["sh", "-c", "echo $$; exec sleep 100"], 0);
    start(&jobs, "s2", &["sleep", "100"], 0);
    let pid = first_line(&jobs, "s1").await;
    assert_eq!(jobs.stop_all(STOP_WAIT).await, 2);
    assert_eq!(jobs.table().live_host_jobs(), 0);
    assert!(is_gone(&pid) || gone(&pid).await);
    jobs.shut_down().await;
    assert!(jobs.stop_requested());
}

#[tokio::test]
async fn a_chatty_job_keeps_only_its_newest_output() {
    let jobs = Jobs::new();
    let (tx, mut rx) = mpsc::channel(16);
    let _attached = jobs.attach(tx);
    start(
        &jobs,
        "big",
        &["sh", "-c", "head -c 100000 /dev/zero; echo end"],
        0,
    );
    assert_eq!(completion(&mut rx).await.status, JobStatus::Finished);
    let (record, out, _) = jobs
        .table()
        .record("big", OutputWindow::default(), 60_000, now_ms())
        .unwrap();
    assert_eq!(out.len(), 1024);
    assert!(out.ends_with(b"end\n"));
    assert_eq!(record.stdout.total, 100_004);
    assert_eq!(record.stdout.dropped, 100_004 - 1024);
    let window = OutputWindow {
        stdout_offset: Some(100_000),
        stderr_offset: None,
        max_bytes: Some(2),
    };
    let (record, out, err) = jobs
        .table()
        .record("big", window, 60_000, now_ms())
        .unwrap();
    assert_eq!(
        (out.as_slice(), record.stdout.offset),
        (&b"en"[..], 100_000)
    );
    assert!(err.is_empty());
}

#[tokio::test]
async fn without_a_broker_records_expire_at_the_last_retention_asked() {
    let jobs = Jobs::new();
    let (tx, mut rx) = mpsc::channel(16);
    let attached = jobs.attach(tx);
    start(&jobs, "a", &["true"], 0);
    completion(&mut rx).await;
    drop(attached);
    assert_eq!(
        jobs.prune_as_last_asked(),
        0,
        "no broker said how long to keep it"
    );
    assert!(
        jobs.table().has_pending_work(),
        "the completion waits for a broker"
    );
    jobs.remember_retention(0);
    assert_eq!(jobs.prune_as_last_asked(), 1);
    assert!(!jobs.table().has_pending_work());
    assert!(jobs.table().is_empty());
}
