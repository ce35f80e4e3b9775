//! The server driven over an in-process socket pair, as a broker would.

use super::*;
use crate::ceiling::Ceilings;
use crate::env::EnvSnapshot;
use ide_proto::{
    read_frame, write_frame, EnvSpec, ExitReport, FsReply, JobEvent, JobLimits, JobReply,
    JobRequest, JobStatus, OutputWindow, RootedPath, Stream,
};
use std::path::PathBuf;
use tokio::io::AsyncWriteExt;
use tokio::task::JoinHandle;

const LIMIT: Duration = Duration::from_secs(20);

fn start() -> (UnixStream, JoinHandle<ConnectionEnd>) {
    start_with(Jobs::new())
}

/// A connection served with the given job table (shared by reconnects).
fn start_with(jobs: Arc<Jobs>) -> (UnixStream, JoinHandle<ConnectionEnd>) {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let executor = Arc::new(Executor {
        env: EnvSnapshot::capture(),
        ceilings: Ceilings::new(&[PathBuf::from("/")]).unwrap(),
    });
    (theirs, tokio::spawn(serve_with(executor, jobs, ours)))
}

async fn send(c: &mut UnixStream, id: u64, body: Request) {
    write_frame(c, &ToExecutor { id, body }).await.unwrap();
}

async fn recv(c: &mut UnixStream) -> Option<ToBroker> {
    tokio::time::timeout(LIMIT, read_frame(c))
        .await
        .expect("no frame in time")
        .unwrap()
}

async fn hello(c: &mut UnixStream) {
    send(
        c,
        1,
        Request::Hello {
            version: PROTOCOL_VERSION,
        },
    )
    .await;
    let reply = recv(c).await.unwrap();
    assert_eq!(reply.id, 1);
    match reply.body {
        Reply::Hello {
            version,
            executor_version,
            pid,
        } => {
            assert_eq!(version, PROTOCOL_VERSION);
            assert_eq!(executor_version, env!("CARGO_PKG_VERSION"));
            assert_eq!(pid, std::process::id());
        }
        other => panic!("expected Hello, got {other:?}"),
    }
}

async fn ended(server: JoinHandle<ConnectionEnd>) -> ConnectionEnd {
    tokio::time::timeout(LIMIT, server)
        .await
        .expect("server did not end")
        .unwrap()
}

/// The server closed on us: EOF (or a reset) with no reply first.
async fn assert_closed_without_reply(c: &mut UnixStream, server: JoinHandle<ConnectionEnd>) {
    assert!(matches!(ended(server).await, ConnectionEnd::Violation(_)));
    let next = tokio::time::timeout(LIMIT, read_frame::<_, ToBroker>(c))
        .await
        .unwrap();
    assert!(matches!(next, Ok(None) | Err(_)), "{next:?}");
}

fn exec_spec(argv: &[&str]) -> ExecSpec {
    ExecSpec {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        env: EnvSpec {
            inherit: true,
            allow: vec![],
            set: vec![],
        },
        cwd: None,
        stdin: ide_proto::Stdin::Null,
        timeout_ms: 0,
        max_output_bytes: 1 << 20,
        confine: None,
    }
}

fn exec(argv: &[&str]) -> Request {
    Request::Exec(exec_spec(argv))
}

#[tokio::test]
async fn hello_round_trips_and_a_clean_close_ends_the_connection() {
    let (mut c, server) = start();
    hello(&mut c).await;
    drop(c);
    assert_eq!(ended(server).await, ConnectionEnd::Closed);
}

#[tokio::test]
async fn a_garbage_frame_closes_the_connection() {
    let (mut c, server) = start();
    c.write_all(&[3, 0, 0, 0, 0xff, 0xff, 0xff]).await.unwrap();
    assert_closed_without_reply(&mut c, server).await;
}

#[tokio::test]
async fn a_u32_max_length_closes_the_connection() {
    let (mut c, server) = start();
    hello(&mut c).await;
    c.write_all(&u32::MAX.to_le_bytes()).await.unwrap();
    assert_closed_without_reply(&mut c, server).await;
}

#[tokio::test]
async fn a_first_frame_other_than_hello_closes_the_connection() {
    let (mut c, server) = start();
    send(&mut c, 1, exec(&["true"])).await;
    assert_closed_without_reply(&mut c, server).await;
}

#[tokio::test]
async fn a_wrong_version_closes_the_connection() {
    let (mut c, server) = start();
    send(
        &mut c,
        1,
        Request::Hello {
            version: PROTOCOL_VERSION + 1,
        },
    )
    .await;
    assert_closed_without_reply(&mut c, server).await;
}

#[tokio::test]
async fn the_event_id_cannot_name_a_request() {
    let (mut c, server) = start();
    hello(&mut c).await;
    send(&mut c, EVENT_ID, exec(&["true"])).await;
    assert_closed_without_reply(&mut c, server).await;
}

#[tokio::test]
async fn an_exec_streams_output_then_exits() {
    let (mut c, server) = start();
    hello(&mut c).await;
    send(&mut c, 7, exec(&["sh", "-c", "echo hi; exit 4"])).await;
    let out = recv(&mut c).await.unwrap();
    assert_eq!(
        out,
        ToBroker {
            id: 7,
            body: Reply::Output {
                stream: Stream::Stdout,
                data: b"hi\n".to_vec()
            }
        }
    );
    let exit = recv(&mut c).await.unwrap();
    assert_eq!(exit.id, 7);
    assert!(
        matches!(
            exit.body,
            Reply::Exited(ExitReport {
                exit_code: Some(4),
                stdout_total: 3,
                ..
            })
        ),
        "{exit:?}"
    );
    drop(c);
    assert_eq!(ended(server).await, ConnectionEnd::Closed);
}

const LIMITS: JobLimits = JobLimits {
    max_running: 8,
    retention_ms: 60_000,
};

fn start_job(job_id: &str, argv: &[&str]) -> Request {
    Request::Job(JobRequest::Start {
        job_id: job_id.into(),
        owner: None,
        spec: Box::new(exec_spec(argv)),
        limits: LIMITS,
    })
}

/// The next frame, skipping completion events (returned separately).
async fn recv_reply(c: &mut UnixStream, events: &mut Vec<JobEvent>) -> ToBroker {
    loop {
        let frame = recv(c).await.expect("a frame");
        match (frame.id, frame.body) {
            (EVENT_ID, Reply::JobEvent(e)) => events.push(e),
            (id, body) => return ToBroker { id, body },
        }
    }
}

async fn next_event(c: &mut UnixStream) -> JobEvent {
    loop {
        let frame = recv(c).await.expect("a frame");
        if let (EVENT_ID, Reply::JobEvent(e)) = (frame.id, frame.body) {
            return e;
        }
    }
}

#[tokio::test]
async fn data_for_unknown_ids_is_ignored_and_a_duplicate_job_is_refused() {
    let (mut c, _server) = start();
    hello(&mut c).await;
    send(&mut c, 3, Request::Data { data: vec![1, 2] }).await;
    send(&mut c, 3, Request::DataEnd).await;
    send(&mut c, 3, Request::Cancel).await;
    send(&mut c, 4, start_job("j", &["sleep", "100"])).await;
    let mut events = Vec::new();
    let reply = recv_reply(&mut c, &mut events).await;
    assert_eq!(reply.id, 4);
    assert!(
        matches!(reply.body, Reply::Job(JobReply::Started { ref job_id, .. }) if job_id == "j")
    );
    send(
        &mut c,
        5,
        start_job("j", &["touch", "/nonexistent-dir/never"]),
    )
    .await;
    let reply = recv_reply(&mut c, &mut events).await;
    assert!(
        matches!(&reply.body, Reply::Error(e) if e.kind == ErrorKind::Exists),
        "{reply:?}"
    );
    send(
        &mut c,
        6,
        Request::Job(JobRequest::Kill { job_id: "j".into() }),
    )
    .await;
    let reply = recv_reply(&mut c, &mut events).await;
    assert_eq!(
        reply.body,
        Reply::Job(JobReply::Kill {
            killed: true,
            remote: false,
            status: JobStatus::Killed
        })
    );
    let JobEvent::Finished(done) = next_event(&mut c).await;
    assert_eq!(
        (done.job_id.as_str(), done.status),
        ("j", JobStatus::Killed)
    );
}

#[tokio::test]
async fn a_job_outlives_its_connection_and_its_completion_waits_for_the_next() {
    let jobs = Jobs::new();
    let (mut c, server) = start_with(jobs.clone());
    hello(&mut c).await;
    send(
        &mut c,
        2,
        start_job("bg", &["sh", "-c", "sleep 0.3; echo done; echo oops >&2"]),
    )
    .await;
    let mut events = Vec::new();
    assert!(matches!(
        recv_reply(&mut c, &mut events).await.body,
        Reply::Job(JobReply::Started { .. })
    ));
    drop(c);
    assert_eq!(ended(server).await, ConnectionEnd::Closed);
    // The job finishes while no broker is connected.
    for _ in 0..400 {
        if !jobs.table().has_pending_work() || jobs.table().live_host_jobs() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let (mut c, _server) = start_with(jobs.clone());
    hello(&mut c).await;
    let JobEvent::Finished(done) = next_event(&mut c).await;
    assert_eq!(
        (done.job_id.as_str(), done.status),
        ("bg", JobStatus::Finished)
    );
    let window = OutputWindow::default();
    send(
        &mut c,
        3,
        Request::Job(JobRequest::Status {
            job_id: "bg".into(),
            window,
            retention_ms: 60_000,
        }),
    )
    .await;
    let out = recv_reply(&mut c, &mut events).await;
    assert_eq!(
        out.body,
        Reply::Output {
            stream: Stream::Stdout,
            data: b"done\n".to_vec()
        }
    );
    let err = recv_reply(&mut c, &mut events).await;
    assert_eq!(
        err.body,
        Reply::Output {
            stream: Stream::Stderr,
            data: b"oops\n".to_vec()
        }
    );
    match recv_reply(&mut c, &mut events).await.body {
        Reply::Job(JobReply::Record(r)) => {
            assert_eq!(
                (r.status, r.exit_code, r.stdout.total),
                (JobStatus::Finished, Some(0), 5)
            );
        }
        other => panic!("expected the record, got {other:?}"),
    }
    send(
        &mut c,
        4,
        Request::Job(JobRequest::Ack {
            job_ids: vec!["bg".into()],
        }),
    )
    .await;
    assert_eq!(
        recv_reply(&mut c, &mut events).await.body,
        Reply::Job(JobReply::Done)
    );
    send(
        &mut c,
        5,
        Request::Job(JobRequest::List {
            retention_ms: 60_000,
        }),
    )
    .await;
    match recv_reply(&mut c, &mut events).await.body {
        Reply::Job(JobReply::Summaries(batch)) => assert_eq!(batch[0].job_id, "bg"),
        other => panic!("expected summaries, got {other:?}"),
    }
    assert_eq!(
        recv_reply(&mut c, &mut events).await.body,
        Reply::Job(JobReply::Listed { count: 1 })
    );
    assert!(
        events.is_empty(),
        "the completion was sent twice: {events:?}"
    );
    assert!(!jobs.table().has_pending_work());
}

#[tokio::test]
async fn a_large_stdin_is_uploaded_before_the_job_starts() {
    let (mut c, _server) = start();
    hello(&mut c).await;
    let mut spec = exec_spec(&["wc", "-c"]);
    spec.stdin = ide_proto::Stdin::Upload;
    send(
        &mut c,
        2,
        Request::Job(JobRequest::Start {
            job_id: "up".into(),
            owner: None,
            spec: Box::new(spec),
            limits: LIMITS,
        }),
    )
    .await;
    for _ in 0..3 {
        send(
            &mut c,
            2,
            Request::Data {
                data: vec![b'x'; 1000],
            },
        )
        .await;
    }
    send(&mut c, 2, Request::DataEnd).await;
    let mut events = Vec::new();
    loop {
        match recv_reply(&mut c, &mut events).await.body {
            Reply::Credit { .. } => continue,
            Reply::Job(JobReply::Started { .. }) => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    let JobEvent::Finished(done) = next_event(&mut c).await;
    assert_eq!(done.status, JobStatus::Finished);
    send(
        &mut c,
        3,
        Request::Job(JobRequest::Status {
            job_id: "up".into(),
            window: OutputWindow::default(),
            retention_ms: 60_000,
        }),
    )
    .await;
    match recv_reply(&mut c, &mut events).await.body {
        Reply::Output { data, .. } => assert_eq!(String::from_utf8(data).unwrap().trim(), "3000"),
        other => panic!("expected output, got {other:?}"),
    }
}

#[tokio::test]
async fn a_reserved_job_ends_failed_when_its_connection_ends() {
    let jobs = Jobs::new();
    let (mut c, server) = start_with(jobs.clone());
    hello(&mut c).await;
    let reserve = JobRequest::Reserve {
        job_id: "vm".into(),
        owner: None,
        argv: vec!["uname".into()],
        max_output_bytes: 100,
        limits: LIMITS,
    };
    send(&mut c, 2, Request::Job(reserve)).await;
    let mut events = Vec::new();
    assert!(matches!(
        recv_reply(&mut c, &mut events).await.body,
        Reply::Job(JobReply::Started { .. })
    ));
    drop(c);
    assert_eq!(ended(server).await, ConnectionEnd::Closed);
    let (mut c, _server) = start_with(jobs);
    hello(&mut c).await;
    let JobEvent::Finished(done) = next_event(&mut c).await;
    assert_eq!(
        (done.job_id.as_str(), done.status),
        ("vm", JobStatus::Failed)
    );
}

#[tokio::test]
async fn fs_requests_are_answered() {
    let (mut c, _server) = start();
    hello(&mut c).await;
    let tmp = tempfile::tempdir().unwrap();
    let path = RootedPath::new(tmp.path().to_str().unwrap(), "");
    send(&mut c, 5, Request::Fs(FsRequest::CheckDir { path })).await;
    assert_eq!(
        recv(&mut c).await.unwrap(),
        ToBroker {
            id: 5,
            body: Reply::Fs(FsReply::Ok)
        }
    );
}

/// Starts `sleep 100` under `sh` and returns the shell's pid, read from its
/// first output frame.
async fn start_sleeper(c: &mut UnixStream, id: u64) -> String {
    send(c, id, exec(&["sh", "-c", "echo $$; sleep 100"])).await;
    match recv(c).await.unwrap().body {
        Reply::Output { data, .. } => String::from_utf8(data).unwrap().trim().to_owned(),
        other => panic!("expected output, got {other:?}"),
    }
}

async fn is_gone(pid: &str) -> bool {
    for _ in 0..100 {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test]
async fn a_cancel_kills_the_command_and_ends_the_request() {
    let (mut c, _server) = start();
    hello(&mut c).await;
    let pid = start_sleeper(&mut c, 9).await;
    send(&mut c, 9, Request::Cancel).await;
    let reply = recv(&mut c).await.unwrap();
    assert_eq!(
        reply,
        ToBroker {
            id: 9,
            body: Reply::Error(exec::cancelled())
        }
    );
    assert!(is_gone(&pid).await, "pid {pid} survived the cancel");
}

#[tokio::test]
async fn a_dropped_connection_kills_its_commands() {
    let (mut c, server) = start();
    hello(&mut c).await;
    let pid = start_sleeper(&mut c, 11).await;
    drop(c);
    assert_eq!(ended(server).await, ConnectionEnd::Closed);
    assert!(is_gone(&pid).await, "pid {pid} outlived its connection");
}
