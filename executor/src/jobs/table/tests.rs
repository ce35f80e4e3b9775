//! The table's rules, driven directly with a fake clock.

use super::*;

const LIMITS: JobLimits = JobLimits {
    max_running: 2,
    retention_ms: 1_000,
};

fn host(id: &str, owner: Option<&str>) -> (NewJob, Arc<Notify>) {
    let kill = Arc::new(Notify::new());
    let job = NewJob {
        job_id: id.into(),
        owner: owner.map(Into::into),
        argv: vec!["sleep".into(), "1".into()],
        output: Output::new(16),
        control: Control::Host { kill: kill.clone() },
    };
    (job, kill)
}

fn remote(id: &str, conn: u64) -> NewJob {
    NewJob {
        job_id: id.into(),
        owner: None,
        argv: vec!["uname".into()],
        output: Output::new(16),
        control: Control::Remote { conn },
    }
}

fn insert(t: &mut Table, id: &str, now: u64) -> Arc<Notify> {
    let (job, kill) = host(id, None);
    t.insert(job, LIMITS, now).unwrap();
    kill
}

fn status(t: &mut Table, id: &str, now: u64) -> Option<JobRecord> {
    t.record(id, OutputWindow::default(), LIMITS.retention_ms, now)
        .ok()
        .map(|(r, _, _)| r)
}

fn queued(t: &Table) -> Vec<String> {
    t.unacked_from(0)
        .into_iter()
        .map(|(_, c)| c.job_id)
        .collect()
}

#[test]
fn an_id_is_taken_while_running_and_while_retained() {
    let mut t = Table::default();
    insert(&mut t, "a", 10);
    let (dup, _) = host("a", Some("intruder"));
    let err = t.insert(dup, LIMITS, 11).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Exists);
    assert_eq!(err.message, "job_id 'a' already exists");
    assert_eq!(
        status(&mut t, "a", 11).unwrap().owner,
        None,
        "original untouched"
    );
    t.end_host("a", HostEnd::Exited(Some(0)), 20);
    let (dup, _) = host("a", None);
    assert_eq!(
        t.insert(dup, LIMITS, 500).unwrap_err().kind,
        ErrorKind::Exists
    );
    // Once the retention has passed, the id is free again.
    let (again, _) = host("a", None);
    assert_eq!(t.insert(again, LIMITS, 1_020).unwrap(), 1_020);
}

#[test]
fn the_running_cap_counts_only_running_jobs_and_has_a_floor() {
    let mut t = Table::default();
    insert(&mut t, "a", 0);
    insert(&mut t, "b", 0);
    let (c, _) = host("c", None);
    let err = t.insert(c, LIMITS, 0).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid);
    assert_eq!(
        err.message,
        "max concurrent jobs (2) reached, currently running: 2"
    );
    assert!(status(&mut t, "c", 0).is_none(), "nothing was inserted");
    t.end_host("a", HostEnd::Exited(Some(1)), 1);
    insert(&mut t, "c", 1);
    let huge = JobLimits {
        max_running: u32::MAX,
        retention_ms: 0,
    };
    for i in 0..MAX_RUNNING {
        let (job, _) = host(&format!("n{i}"), None);
        if t.insert(job, huge, 2).is_err() {
            assert_eq!(i, MAX_RUNNING - 2, "the floor applies");
            return;
        }
    }
    panic!("the executor's floor on running jobs did not apply");
}

#[test]
fn bad_ids_owners_and_argv_are_refused() {
    let mut t = Table::default();
    for id in ["", "   ", "\t\n"] {
        let (job, _) = host(id, None);
        assert_eq!(
            t.insert(job, LIMITS, 0).unwrap_err().kind,
            ErrorKind::Invalid
        );
    }
    let (job, _) = host(&"x".repeat(MAX_ID_BYTES + 1), None);
    assert_eq!(
        t.insert(job, LIMITS, 0).unwrap_err().kind,
        ErrorKind::Invalid
    );
    let (job, _) = host("ok", Some(&"s".repeat(MAX_ID_BYTES + 1)));
    assert_eq!(
        t.insert(job, LIMITS, 0).unwrap_err().kind,
        ErrorKind::Invalid
    );
    let (mut job, _) = host("big", None);
    job.argv = vec!["x".repeat(MAX_ARGV_BYTES)];
    assert_eq!(
        t.insert(job, LIMITS, 0).unwrap_err().kind,
        ErrorKind::Invalid
    );
    let (mut job, _) = host("empty", None);
    job.argv.clear();
    assert_eq!(
        t.insert(job, LIMITS, 0).unwrap_err().kind,
        ErrorKind::Invalid
    );
    assert!(t.is_empty());
}

#[test]
fn final_statuses_follow_the_exit() {
    let mut t = Table::default();
    for (id, end, want, code) in [
        ("ok", HostEnd::Exited(Some(0)), JobStatus::Finished, Some(0)),
        ("bad", HostEnd::Exited(Some(3)), JobStatus::Failed, Some(3)),
        ("sig", HostEnd::Exited(None), JobStatus::Failed, None),
        ("cap", HostEnd::TimedOut, JobStatus::Killed, None),
    ] {
        let limits = JobLimits {
            max_running: 10,
            retention_ms: 1_000,
        };
        let (job, _) = host(id, None);
        t.insert(job, limits, 5).unwrap();
        t.end_host(id, end, 9);
        let r = status(&mut t, id, 9).unwrap();
        assert_eq!(
            (r.status, r.exit_code, r.finished_at_ms),
            (want, code, Some(9)),
            "{id}"
        );
    }
    assert_eq!(queued(&t).len(), 4);
}

#[tokio::test]
async fn a_kill_is_never_downgraded_and_keeps_its_time() {
    let mut t = Table::default();
    let kill = insert(&mut t, "a", 0);
    assert_eq!(t.kill("a", 7), Some((true, false, JobStatus::Killed)));
    tokio::time::timeout(std::time::Duration::from_secs(5), kill.notified())
        .await
        .expect("the owner was woken");
    assert!(
        queued(&t).is_empty(),
        "not final until the process is reaped"
    );
    // The process then exits 0 anyway (the kill raced a natural exit).
    t.end_host("a", HostEnd::Exited(Some(0)), 50);
    let r = status(&mut t, "a", 50).unwrap();
    assert_eq!((r.status, r.finished_at_ms), (JobStatus::Killed, Some(7)));
    assert_eq!(queued(&t), ["a"]);
    assert_eq!(t.kill("a", 60), Some((false, false, JobStatus::Killed)));
    assert_eq!(t.kill("nope", 60), None);
    // A natural exit first: a late kill finds it not running.
    insert(&mut t, "b", 0);
    t.end_host("b", HostEnd::Exited(Some(0)), 3);
    assert_eq!(t.kill("b", 4), Some((false, false, JobStatus::Finished)));
}

#[test]
fn a_killed_job_is_not_pruned_before_its_process_is_reaped() {
    let mut t = Table::default();
    insert(&mut t, "a", 0);
    t.kill("a", 1);
    assert_eq!(t.prune(0, 10_000), 0);
    t.end_host("a", HostEnd::Exited(None), 10_000);
    assert_eq!(t.prune(0, 10_000), 1);
    assert!(t.is_empty());
}

#[test]
fn pruning_forgets_expired_records_and_their_unacked_completions() {
    let mut t = Table::default();
    insert(&mut t, "old", 0);
    insert(&mut t, "new", 0);
    t.end_host("old", HostEnd::Exited(Some(0)), 100);
    t.end_host("new", HostEnd::Exited(Some(0)), 900);
    assert_eq!(t.prune(1_000, 1_099), 0);
    assert_eq!(t.prune(1_000, 1_100), 1);
    assert!(status(&mut t, "old", 1_100).is_none());
    assert_eq!(queued(&t), ["new"]);
    // A status or a listing prunes first.
    assert!(status(&mut t, "new", 1_900).is_none());
    assert!(t.summaries(1_000, 1_900).is_empty());
}

#[test]
fn completions_queue_once_in_order_until_acked() {
    let mut t = Table::default();
    let limits = JobLimits {
        max_running: 10,
        retention_ms: 1_000,
    };
    for id in ["a", "b", "c"] {
        let (job, _) = host(id, None);
        t.insert(job, limits, 0).unwrap();
    }
    t.end_host("b", HostEnd::Exited(Some(0)), 1);
    t.end_host("a", HostEnd::Exited(Some(2)), 2);
    t.end_host("a", HostEnd::Exited(Some(0)), 3);
    let all = t.unacked_from(0);
    assert_eq!(
        all.iter()
            .map(|(_, c)| c.job_id.as_str())
            .collect::<Vec<_>>(),
        ["b", "a"]
    );
    let a = &all[1].1;
    assert_eq!(
        (a.status, a.exit_code, a.finished_at_ms),
        (JobStatus::Failed, Some(2), 2)
    );
    assert_eq!(a.argv, ["sleep", "1"]);
    let after_first = t.unacked_from(all[0].0 + 1);
    assert_eq!(after_first.len(), 1);
    t.ack(&["b".into(), "zzz".into()]);
    assert_eq!(queued(&t), ["a"]);
    t.end_host("c", HostEnd::Exited(Some(0)), 4);
    assert_eq!(queued(&t), ["a", "c"]);
}

#[test]
fn session_kills_match_owners_only() {
    let mut t = Table::default();
    let limits = JobLimits {
        max_running: 10,
        retention_ms: 1_000,
    };
    for (id, owner) in [
        ("a", Some("s1")),
        ("b", Some("s2")),
        ("c", None),
        ("d", Some("s1")),
    ] {
        let (job, _) = host(id, owner);
        t.insert(job, limits, 0).unwrap();
    }
    t.end_host("d", HostEnd::Exited(Some(0)), 1);
    assert_eq!(t.kill_owned(&["s1".into(), "s9".into()], 2), 1);
    assert_eq!(t.kill_owned(&[], 2), 0);
    assert_eq!(t.kill_owned(&["".into()], 2), 0, "no owner never matches");
    let statuses: Vec<JobStatus> = ["a", "b", "c", "d"]
        .iter()
        .map(|id| status(&mut t, id, 2).unwrap().status)
        .collect();
    assert_eq!(
        statuses,
        [
            JobStatus::Killed,
            JobStatus::Running,
            JobStatus::Running,
            JobStatus::Finished
        ]
    );
}

#[test]
fn remote_jobs_end_by_report_by_kill_or_with_their_connection() {
    let mut t = Table::default();
    let limits = JobLimits {
        max_running: 10,
        retention_ms: 1_000,
    };
    for id in ["r1", "r2", "r3"] {
        t.insert(remote(id, 7), limits, 0).unwrap();
    }
    t.remote_output("r1").unwrap().push(Stream::Stdout, b"vm\n");
    t.end_remote(
        "r1",
        RemoteEnd {
            exit_code: Some(0),
            timed_out: false,
        },
        5,
    )
    .unwrap();
    let r = status(&mut t, "r1", 5).unwrap();
    assert_eq!(
        (r.status, r.remote, r.stdout.total),
        (JobStatus::Finished, true, 3)
    );
    // A kill only flips the record, final at once; a later end keeps it.
    assert_eq!(t.kill("r2", 6), Some((true, true, JobStatus::Killed)));
    assert_eq!(queued(&t), ["r1", "r2"]);
    t.end_remote(
        "r2",
        RemoteEnd {
            exit_code: Some(0),
            timed_out: false,
        },
        9,
    )
    .unwrap();
    let r = status(&mut t, "r2", 9).unwrap();
    assert_eq!((r.status, r.finished_at_ms), (JobStatus::Killed, Some(6)));
    assert_eq!(queued(&t), ["r1", "r2"], "no second completion");
    // Another connection's end leaves them alone; ours fails the rest.
    assert_eq!(t.connection_ended(8, 10), 0);
    assert_eq!(t.connection_ended(7, 10), 1);
    let r = status(&mut t, "r3", 10).unwrap();
    assert_eq!(r.status, JobStatus::Failed);
    assert!(r.stderr.total > 0, "the reason is noted");
    // Host jobs cannot be reported on, and unknown ids are missing.
    insert(&mut t, "h", 0);
    assert_eq!(t.remote_output("h").unwrap_err().kind, ErrorKind::Invalid);
    let end = RemoteEnd {
        exit_code: None,
        timed_out: true,
    };
    assert_eq!(
        t.end_remote("h", end, 1).unwrap_err().kind,
        ErrorKind::Invalid
    );
    assert_eq!(
        t.end_remote("nope", end, 1).unwrap_err().kind,
        ErrorKind::NotFound
    );
}

#[test]
fn a_full_table_evicts_the_oldest_finished_record() {
    let mut t = Table::default();
    let limits = JobLimits {
        max_running: MAX_RUNNING,
        retention_ms: u64::MAX,
    };
    for i in 0..MAX_RECORDS {
        let (job, _) = host(&format!("j{i}"), None);
        t.insert(job, limits, i as u64).unwrap();
        t.end_host(&format!("j{i}"), HostEnd::Exited(Some(0)), i as u64);
    }
    let (job, _) = host("next", None);
    t.insert(job, limits, 10_000).unwrap();
    let held: Vec<String> = t
        .summaries(u64::MAX, 10_000)
        .into_iter()
        .map(|s| s.job_id)
        .collect();
    assert_eq!(held.len(), MAX_RECORDS);
    assert!(!held.contains(&"j0".to_owned()), "the oldest went");
    assert!(held.contains(&"j1".to_owned()) && held.contains(&"next".to_owned()));
    assert!(!queued(&t).contains(&"j0".to_owned()));
}

#[test]
fn summaries_never_carry_argv_or_output() {
    let mut t = Table::default();
    insert(&mut t, "a", 0);
    let summaries = t.summaries(1_000, 0);
    assert_eq!(
        summaries,
        [JobSummary {
            job_id: "a".into(),
            status: JobStatus::Running,
            started_at_ms: 0,
            finished_at_ms: None,
            exit_code: None,
            stdout_truncated: false,
            stderr_truncated: false,
        }]
    );
}
