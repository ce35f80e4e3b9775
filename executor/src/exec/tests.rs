//! Running real commands through the real spawn path.

use super::*;
use crate::ceiling::Ceilings;
use crate::env::EnvSnapshot;
use ide_proto::{EnvSpec, Reply, ToBroker};
use std::ffi::OsString;
use std::path::PathBuf;
use tokio::sync::mpsc;

const LIMIT: Duration = Duration::from_secs(20);

fn executor_with_env(vars: Vec<(OsString, OsString)>) -> Executor {
    Executor {
        env: EnvSnapshot::from_vars(vars),
        ceilings: Ceilings::new(&[PathBuf::from("/")]).unwrap(),
    }
}

fn executor() -> Executor {
    executor_with_env(std::env::vars_os().collect())
}

/// An unconfined spec for `argv`: inherited environment, stdin `/dev/null`.
pub(crate) fn spec(argv: &[&str]) -> ExecSpec {
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

fn sh(script: &str) -> ExecSpec {
    spec(&["sh", "-c", script])
}

struct Ran {
    result: Result<ExitReport, ExecutorError>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    elapsed: Duration,
}

impl Ran {
    fn report(&self) -> &ExitReport {
        self.result.as_ref().unwrap()
    }
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

/// Collects Output frames concurrently, as the writer would.
async fn collect(mut rx: mpsc::Receiver<ToBroker>) -> (Vec<u8>, Vec<u8>) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    while let Some(msg) = rx.recv().await {
        match msg.body {
            Reply::Output {
                stream: Stream::Stdout,
                data,
            } => out.extend(data),
            Reply::Output {
                stream: Stream::Stderr,
                data,
            } => err.extend(data),
            other => panic!("unexpected {other:?}"),
        }
    }
    (out, err)
}

async fn run_with(executor: &Executor, spec: ExecSpec, mut cancel: Cancel) -> Ran {
    let (tx, rx) = mpsc::channel(64);
    let collector = tokio::spawn(collect(rx));
    let started = Instant::now();
    let replies = Replies::new(1, tx);
    let result = tokio::time::timeout(LIMIT, run(executor, spec, None, &mut cancel, &replies))
        .await
        .expect("exec did not finish in time");
    let elapsed = started.elapsed();
    drop(replies);
    let (stdout, stderr) = collector.await.unwrap();
    Ran {
        result,
        stdout,
        stderr,
        elapsed,
    }
}

async fn run_spec(spec: ExecSpec) -> Ran {
    let (_handle, cancel) = Cancel::pair();
    run_with(&executor(), spec, cancel).await
}

/// Waits (bounded) until `pid` is gone or a zombie.
async fn is_gone(pid: &str) -> bool {
    for _ in 0..100 {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            Ok(stat)
                if stat
                    .rsplit(')')
                    .next()
                    .is_some_and(|s| s.trim_start().starts_with('Z')) =>
            {
                return true
            }
            Ok(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    false
}

fn kill(pid: &str) {
    if let Some(pid) = pid
        .trim()
        .parse()
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}

#[tokio::test]
async fn stdout_stderr_and_exit_code_come_back() {
    let ran = run_spec(sh("echo out; echo err >&2; exit 3")).await;
    let report = ran.report();
    assert_eq!(ran.stdout(), "out\n");
    assert_eq!(ran.stderr, b"err\n");
    assert_eq!(report.exit_code, Some(3));
    assert_eq!(report.signal, None);
    assert!(!report.timed_out);
    assert_eq!((report.stdout_total, report.stderr_total), (4, 4));
}

#[tokio::test]
async fn stdin_is_fed_then_closed() {
    let mut s = spec(&["cat"]);
    s.stdin = ide_proto::Stdin::Bytes(b"fed\nbytes".to_vec());
    let ran = run_spec(s).await;
    assert_eq!(ran.stdout(), "fed\nbytes");
    assert_eq!(ran.report().exit_code, Some(0));
}

#[tokio::test]
async fn a_large_stdin_does_not_deadlock_an_echoing_child() {
    let mut s = spec(&["cat"]);
    let input = vec![b'z'; 3 << 20];
    s.stdin = ide_proto::Stdin::Bytes(input.clone());
    s.max_output_bytes = 4 << 20;
    let ran = run_spec(s).await;
    assert_eq!(ran.stdout, input);
}

#[tokio::test]
async fn absent_stdin_reads_eof_at_once() {
    let mut s = spec(&["cat"]);
    s.timeout_ms = 10_000;
    let ran = run_spec(s).await;
    assert_eq!(ran.report().exit_code, Some(0));
    assert!(!ran.report().timed_out);
    assert!(ran.stdout.is_empty());
}

#[tokio::test]
async fn the_environment_is_built_from_the_snapshot() {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    let vars = vec![
        ("PATH".into(), path),
        ("KEPT".into(), "k".into()),
        ("DROPPED".into(), "d".into()),
        ("III_TOKEN".into(), "secret".into()),
    ];
    let ex = executor_with_env(vars);
    let (_h, cancel) = Cancel::pair();
    let mut s = spec(&["env"]);
    s.env.set = vec![
        ("KEPT".into(), "override".into()),
        ("NEW".into(), "n".into()),
    ];
    let inherited = run_with(&ex, s.clone(), cancel).await.stdout();
    assert!(inherited.contains("KEPT=override\n"), "{inherited}");
    assert!(inherited.contains("DROPPED=d\n"));
    assert!(inherited.contains("NEW=n\n"));
    assert!(!inherited.contains("III_TOKEN"));

    s.env.inherit = false;
    s.env.allow = vec!["PATH".into(), "III_TOKEN".into()];
    s.env.set.clear();
    let (_h, cancel) = Cancel::pair();
    let allowed = run_with(&ex, s, cancel).await.stdout();
    assert!(allowed.starts_with("PATH="), "{allowed}");
    assert_eq!(allowed.lines().count(), 1, "{allowed}");
}

#[tokio::test]
async fn the_floor_refuses_loader_keys_and_nothing_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("ran");
    for key in ["LD_PRELOAD", "PATH=/x", "PATH"] {
        let mut s = spec(&["touch", marker.to_str().unwrap()]);
        s.env.set = vec![(key.into(), "/x".into())];
        let err = run_spec(s).await.result.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Invalid, "{key}");
    }
    assert!(!marker.exists());
}

#[tokio::test]
async fn a_confined_exec_writes_only_beneath_its_writable_paths() {
    if !crate::confine::tests::landlock_or_skip() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (inside, outside) = (tmp.path().join("inside"), tmp.path().join("outside"));
    std::fs::create_dir(&inside).unwrap();
    let script = format!(
        "touch {0}/made; touch {1}/made; echo $?",
        inside.display(),
        tmp.path().display()
    );
    let mut s = sh(&script);
    s.confine = Some(ide_proto::Confinement {
        writable: vec![inside.to_str().unwrap().into()],
        git_dir_of: None,
    });
    let ran = run_spec(s).await;
    assert_eq!(
        ran.stdout().trim(),
        "1",
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    assert!(inside.join("made").exists());
    assert!(!tmp.path().join("made").exists());
    assert!(!outside.exists());
}

fn cwd_spec(root: &std::path::Path, rel: &str) -> ExecSpec {
    let mut s = spec(&["pwd", "-P"]);
    s.cwd = Some(RootedPath::new(root.to_str().unwrap(), rel));
    s
}

#[tokio::test]
async fn the_cwd_is_entered_by_fd_beneath_its_root() {
    let tmp = tempfile::tempdir().unwrap();
    let jail = tmp.path().join("jail");
    std::fs::create_dir_all(jail.join("sub/deeper")).unwrap();
    std::fs::write(jail.join("file"), b"").unwrap();
    std::os::unix::fs::symlink("sub/deeper", jail.join("inside")).unwrap();
    std::os::unix::fs::symlink("file", jail.join("to_file")).unwrap();
    std::os::unix::fs::symlink(tmp.path(), jail.join("out")).unwrap();
    let canonical = std::fs::canonicalize(jail.join("sub/deeper")).unwrap();

    for rel in ["sub/deeper", "inside"] {
        let ran = run_spec(cwd_spec(&jail, rel)).await;
        assert_eq!(
            ran.stdout().trim_end(),
            canonical.to_str().unwrap(),
            "{rel}"
        );
    }
    let kind = |r: &Ran| r.result.as_ref().unwrap_err().kind;
    let ran = run_spec(cwd_spec(&jail, "to_file")).await;
    assert_eq!(kind(&ran), ErrorKind::Invalid);
    assert_eq!(
        ran.result.as_ref().unwrap_err().message,
        "cwd is not a directory"
    );
    assert_eq!(
        kind(&run_spec(cwd_spec(&jail, "file")).await),
        ErrorKind::Invalid
    );
    assert_eq!(
        kind(&run_spec(cwd_spec(&jail, "missing")).await),
        ErrorKind::NotFound
    );
    assert_eq!(
        kind(&run_spec(cwd_spec(&jail, "out")).await),
        ErrorKind::Escape
    );
    assert_eq!(
        kind(&run_spec(cwd_spec(&jail, "../")).await),
        ErrorKind::Escape
    );
}

#[tokio::test]
async fn a_cwd_root_outside_the_ceiling_is_an_escape() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("ceiling")).unwrap();
    let ex = Executor {
        env: EnvSnapshot::capture(),
        ceilings: Ceilings::new(&[tmp.path().join("ceiling")]).unwrap(),
    };
    let (_h, cancel) = Cancel::pair();
    let ran = run_with(&ex, cwd_spec(tmp.path(), ""), cancel).await;
    assert_eq!(ran.result.unwrap_err().kind, ErrorKind::Escape);
}

#[tokio::test]
async fn a_timeout_kills_the_whole_group() {
    let mut s = sh("sleep 100 & echo $!; sleep 100");
    s.timeout_ms = 300;
    let ran = run_spec(s).await;
    let report = ran.report();
    assert!(report.timed_out);
    assert_eq!(report.exit_code, None);
    assert_eq!(report.signal, Some(libc::SIGKILL));
    assert!(ran.elapsed < Duration::from_secs(5), "{:?}", ran.elapsed);
    let background = ran.stdout();
    assert!(!background.trim().is_empty());
    assert!(
        is_gone(background.trim()).await,
        "background sleep {background} survived"
    );
}

#[tokio::test]
async fn output_past_the_cap_is_drained_and_counted() {
    let mut s = sh("head -c 5242880 /dev/zero; head -c 3000000 /dev/zero >&2; exit 0");
    s.max_output_bytes = 1_000_000;
    let ran = run_spec(s).await;
    let report = ran.report();
    assert_eq!(report.exit_code, Some(0));
    assert_eq!(ran.stdout.len(), 1_000_000);
    assert_eq!(ran.stderr.len(), 1_000_000);
    assert_eq!(report.stdout_total, 5_242_880);
    assert_eq!(report.stderr_total, 3_000_000);
}

#[tokio::test]
async fn a_background_grandchild_holding_the_pipe_does_not_hang_the_exec() {
    let ran = run_spec(sh("sleep 100 & echo $!")).await;
    let pid = ran.stdout();
    kill(&pid);
    assert_eq!(ran.report().exit_code, Some(0));
    assert!(
        ran.elapsed < DRAIN_DEADLINE + Duration::from_secs(3),
        "{:?}",
        ran.elapsed
    );
}

#[tokio::test]
async fn signal_death_reports_the_signal() {
    let ran = run_spec(sh("kill -TERM $$")).await;
    let report = ran.report();
    assert_eq!(report.exit_code, None);
    assert_eq!(report.signal, Some(libc::SIGTERM));
    assert!(!report.timed_out);
}

#[tokio::test]
async fn a_missing_program_says_so() {
    let err = run_spec(spec(&["ide-no-such-program-x"]))
        .await
        .result
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Internal);
    assert_eq!(
        err.message,
        "ide-no-such-program-x: command not found (not installed or not on PATH)"
    );
}

#[tokio::test]
async fn cancel_kills_the_group_and_ends_the_request() {
    let (handle, cancel) = Cancel::pair();
    let ex = executor();
    let run =
        tokio::spawn(
            async move { run_with(&ex, sh("sleep 100 & echo $!; sleep 100"), cancel).await },
        );
    tokio::time::sleep(Duration::from_millis(300)).await;
    handle.send(()).unwrap();
    let ran = run.await.unwrap();
    assert_eq!(ran.result.unwrap_err(), cancelled());
    let background = ran.stdout.clone();
    let pid = String::from_utf8_lossy(&background);
    assert!(!pid.trim().is_empty());
    assert!(
        is_gone(pid.trim()).await,
        "background sleep {pid} survived the cancel"
    );
}

#[tokio::test]
async fn the_child_sees_only_stdio() {
    let ran = run_spec(sh("ls /proc/self/fd")).await;
    // 0, 1, 2 and the fd `ls` itself opened on the directory.
    let fds: Vec<u32> = ran
        .stdout()
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect();
    assert_eq!(fds.len(), 4, "{fds:?}");
    assert!(fds.starts_with(&[0, 1, 2]), "{fds:?}");
}

#[tokio::test]
async fn the_child_leads_its_own_session() {
    let out = run_spec(sh("echo $$; cat /proc/$$/stat")).await.stdout();
    let mut lines = out.lines();
    let (pid, stat) = (lines.next().unwrap_or(""), lines.next().unwrap_or(""));
    // After the `(comm)` field: state, ppid, pgrp, session.
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(fields.get(2), Some(&pid), "pgrp in {stat}");
    assert_eq!(fields.get(3), Some(&pid), "session in {stat}");
}

#[tokio::test]
async fn the_child_starts_with_default_signals_and_none_blocked() {
    // The executor ignores SIGPIPE (Rust does) and blocks every signal for
    // the instant of the spawn; neither may reach the command.
    let status = run_spec(spec(&["cat", "/proc/self/status"])).await.stdout();
    for field in ["SigBlk:", "SigIgn:"] {
        let line = status.lines().find(|l| l.starts_with(field)).unwrap();
        assert_eq!(line, format!("{field}\t0000000000000000"), "{status}");
    }
}

#[tokio::test]
async fn a_file_without_an_interpreter_line_runs_under_sh() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("plain");
    std::fs::write(&script, "echo from-sh \"$1\"\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ran = run_spec(spec(&[script.to_str().unwrap(), "arg"])).await;
    assert_eq!(ran.stdout(), "from-sh arg\n");
}

#[tokio::test]
async fn the_path_search_skips_what_it_may_not_run_and_reports_it() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let (first, second) = (tmp.path().join("a"), tmp.path().join("b"));
    for dir in [&first, &second] {
        std::fs::create_dir(dir).unwrap();
    }
    std::fs::write(first.join("tool"), "#!/bin/sh\necho first\n").unwrap();
    std::fs::write(second.join("tool"), "#!/bin/sh\necho second\n").unwrap();
    std::fs::set_permissions(second.join("tool"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", first.display(), second.display());
    let ex = executor_with_env(vec![("PATH".into(), path.into())]);
    let (_handle, cancel) = Cancel::pair();
    let ran = run_with(&ex, spec(&["tool"]), cancel).await;
    assert_eq!(
        ran.stdout(),
        "second\n",
        "a non-executable match is skipped"
    );
    std::fs::remove_file(second.join("tool")).unwrap();
    let (_handle, cancel) = Cancel::pair();
    let err = run_with(&ex, spec(&["tool"]), cancel)
        .await
        .result
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Internal);
    assert!(
        err.message.starts_with("tool: spawn failed: "),
        "{}",
        err.message
    );
    assert!(err.message.contains("denied"), "{}", err.message);
}
