//! Confinement, attacked: the `ide-probe` binary runs as the command of a
//! real exec and tries to break out; every case checks the error it got and
//! that nothing changed (canaries, the mount table, surviving processes).
//!
//! Scoped execs are confined through the broker (`fs_scope` with
//! `fs.exec_confinement: landlock`); the finer attacks (memory, signals,
//! fds) also talk to the real `ide-executor` binary over its socket with the
//! `confine` the broker sends, so each can be aimed at a chosen write list.
//! Landlock cases skip with a printed reason on a kernel without Landlock,
//! and fail there when `IDE_REQUIRED_LANDLOCK_ABI` is set (CI sets it).

use crate::support::*;
use ide_proto::{
    read_frame, write_frame, Confinement, EnvSpec, ErrorKind, ExecSpec, ExecutorError, ExitReport,
    Reply, Request, Stdin, Stream, ToBroker, ToExecutor, PROTOCOL_VERSION,
};
use serde_json::{json, Value};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;
use tokio::net::UnixStream;

const LIMIT: Duration = Duration::from_secs(30);

/// Set by CI to the Landlock ABI the host must offer.
const REQUIRED_ABI_ENV: &str = "IDE_REQUIRED_LANDLOCK_ABI";

fn probe() -> &'static str {
    env!("CARGO_BIN_EXE_ide-probe")
}

/// The host facts, from the executor binary's own probe.
fn host_facts() -> Value {
    let out = std::process::Command::new(ide_tests::binary("ide-executor"))
        .arg("--probe")
        .output()
        .expect("run ide-executor --probe");
    serde_json::from_slice(&out.stdout).expect("probe JSON")
}

/// True when the Landlock cases can run; see the module docs.
fn landlock_or_skip() -> bool {
    let abi = host_facts()["landlock"]["abi"].as_i64().unwrap_or(0);
    if let Ok(required) = std::env::var(REQUIRED_ABI_ENV) {
        let required: i64 = required.parse().expect("a number");
        assert!(
            abi >= required,
            "{REQUIRED_ABI_ENV}={required} but the kernel offers Landlock ABI {abi}"
        );
        return true;
    }
    if abi < 1 {
        eprintln!("skipped: no Landlock on this kernel (set {REQUIRED_ABI_ENV} to fail instead)");
    }
    abi >= 1
}

fn running_as_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
}

/// A value unique to this test run.
fn unique(tag: &str) -> String {
    format!("{tag}-{}", uuid::Uuid::new_v4().simple())
}

/// Parses the probe's one line of output.
fn report(stdout: &str) -> Value {
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("probe said {stdout:?}: {e}"))
}

/// Live (non-zombie) processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
                && alive(*pid)
        })
        .collect()
}

/// A real `ide-executor`, spoken to the way the broker speaks to it.
struct DirectExecutor {
    stream: UnixStream,
    child: tokio::process::Child,
    next_id: u64,
}

impl DirectExecutor {
    /// Starts the executor; with `without_landlock` it runs under the
    /// probe's filter that makes Landlock look absent.
    async fn start(without_landlock: bool) -> DirectExecutor {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let theirs = OwnedFd::from(theirs);
        rustix::io::fcntl_setfd(&theirs, rustix::io::FdFlags::empty())
            .expect("let the executor inherit its socket");
        let executor = ide_tests::binary("ide-executor");
        let mut cmd = if without_landlock {
            let mut c = tokio::process::Command::new(probe());
            c.arg("without-landlock").arg(executor);
            c
        } else {
            tokio::process::Command::new(executor)
        };
        let child = cmd
            .arg("--fd")
            .arg(theirs.as_raw_fd().to_string())
            .env("RUST_LOG", "warn")
            .kill_on_drop(true)
            .spawn()
            .expect("start ide-executor");
        drop(theirs);
        ours.set_nonblocking(true).unwrap();
        let mut stream = UnixStream::from_std(ours).unwrap();
        let hello = ToExecutor {
            id: 1,
            body: Request::Hello {
                version: PROTOCOL_VERSION,
            },
        };
        write_frame(&mut stream, &hello).await.unwrap();
        let answer: Option<ToBroker> = tokio::time::timeout(LIMIT, read_frame(&mut stream))
            .await
            .unwrap()
            .unwrap();
        assert!(matches!(
            answer,
            Some(ToBroker {
                body: Reply::Hello { .. },
                ..
            })
        ));
        DirectExecutor {
            stream,
            child,
            next_id: 2,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id().expect("the executor runs")
    }

    /// Runs one command; its stdout, and how it ended or the error.
    async fn exec(&mut self, spec: ExecSpec) -> (String, Result<ExitReport, ExecutorError>) {
        let id = self.next_id;
        self.next_id += 1;
        let frame = ToExecutor {
            id,
            body: Request::Exec(spec),
        };
        write_frame(&mut self.stream, &frame).await.unwrap();
        let mut stdout = Vec::new();
        loop {
            let frame: ToBroker = tokio::time::timeout(LIMIT, read_frame(&mut self.stream))
                .await
                .expect("the executor answers")
                .unwrap()
                .expect("a frame");
            assert_eq!(frame.id, id);
            match frame.body {
                Reply::Output {
                    stream: Stream::Stdout,
                    data,
                } => stdout.extend(data),
                Reply::Output { .. } | Reply::Credit { .. } => {}
                Reply::Exited(report) => {
                    return (String::from_utf8_lossy(&stdout).into_owned(), Ok(report))
                }
                Reply::Error(e) => return (String::from_utf8_lossy(&stdout).into_owned(), Err(e)),
                other => panic!("unexpected reply {other:?}"),
            }
        }
    }
}

fn spec(argv: &[&str], writable: Option<&[&Path]>) -> ExecSpec {
    ExecSpec {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        env: EnvSpec {
            inherit: true,
            allow: vec![],
            set: vec![],
        },
        cwd: None,
        stdin: Stdin::Null,
        timeout_ms: 20_000,
        max_output_bytes: 1 << 20,
        confine: writable.map(|paths| Confinement {
            writable: paths.iter().map(|p| p.display().to_string()).collect(),
            git_dir_of: None,
        }),
    }
}

/// A directory with a canary file, and a snapshot to compare against.
struct Canary {
    dir: tempfile::TempDir,
}

impl Canary {
    fn new() -> Canary {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("canary"), b"untouched").unwrap();
        std::fs::set_permissions(
            dir.path().join("canary"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        Canary { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn file(&self) -> std::path::PathBuf {
        self.dir.path().join("canary")
    }

    fn assert_untouched(&self) {
        let names: Vec<String> = std::fs::read_dir(self.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["canary"], "something was created or removed");
        assert_eq!(std::fs::read(self.file()).unwrap(), b"untouched");
        let mode = std::fs::metadata(self.file()).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o644, "the canary's mode changed");
    }
}

#[tokio::test]
async fn the_seccomp_baseline_refuses_host_attacks_through_the_real_binaries() {
    let world = boot_with(unjailed()).await;
    let mounts_before = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let r = world
        .exec(json!({"command": probe(), "args": ["syscalls"]}))
        .await;
    let calls = report(r["stdout"].as_str().unwrap());
    for denied in [
        "mount",
        "umount2",
        "init_module",
        "finit_module",
        "delete_module",
        "kexec_load",
        "io_uring_setup",
        "unshare_user",
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "keyctl",
        "add_key",
        "setns",
        "name_to_handle_at",
        "open_by_handle_at",
    ] {
        assert_eq!(calls[denied], "EPERM", "{denied}: {calls}");
    }
    assert_eq!(calls["clone3"], "ENOSYS", "{calls}");
    if cfg!(target_arch = "x86_64") {
        assert_eq!(calls["x32_getpid"], "EPERM", "{calls}");
    }
    assert_eq!(calls["getpid"], "ok", "{calls}");
    assert_eq!(calls["unshare_mount"], "ok", "{calls}");
    let mounts_after = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert_eq!(mounts_before, mounts_after, "the mount table changed");

    let r = world
        .exec(json!({"command": probe(), "args": ["ioctls"]}))
        .await;
    let ioctls = report(r["stdout"].as_str().unwrap());
    for denied in [
        "tiocsti",
        "tiocsti_high_bits",
        "tiocsti_all_high_bits",
        "tioclinux",
    ] {
        assert_eq!(ioctls[denied], "EPERM", "{denied}: {ioctls}");
    }
    assert_eq!(
        ioctls["tcgets"], "ENOTTY",
        "other ioctls still reach the kernel"
    );

    let r = world
        .exec(json!({"command": probe(), "args": ["status"]}))
        .await;
    let status = report(r["stdout"].as_str().unwrap());
    assert_eq!(status["seccomp"], "2");
}

#[tokio::test]
async fn a_timed_out_command_leaves_no_descendant_within_a_second() {
    let world = boot_with(unjailed()).await;
    let marker = format!("1000.{}", std::process::id());
    let script = format!("setsid sleep {marker} & (sleep {marker} &) & exec sleep {marker}");
    let r = world
        .exec(json!({"command": "sh", "args": ["-c", script], "timeout_ms": 1000}))
        .await;
    assert_eq!(r["timed_out"], true, "{r}");
    let gone = eventually(Duration::from_secs(1), || {
        processes_with(&marker).is_empty()
    })
    .await;
    assert!(gone, "still running: {:?}", processes_with(&marker));
}

#[tokio::test]
async fn the_engine_token_is_held_by_the_broker_alone() {
    let token = unique("engine-token");
    let world = boot(Boot {
        stored: Some(unjailed()),
        env: vec![("III_TOKEN".into(), token.clone())],
        ..Boot::default()
    })
    .await;
    let broker = world.ide.pid();
    let executor = children(broker)
        .into_iter()
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("ide-executor"))
        })
        .expect("the broker's executor");
    let r = world
        .exec(json!({
            "command": probe(),
            "args": ["token", broker.to_string(), executor.to_string()],
            "stdin": token,
        }))
        .await;
    let found = report(r["stdout"].as_str().unwrap());
    assert_eq!(found["found"], json!([]), "{found}");
    for pid in [broker, executor] {
        for file in ["environ", "cmdline"] {
            let bytes = std::fs::read(format!("/proc/{pid}/{file}")).unwrap_or_default();
            assert!(
                !String::from_utf8_lossy(&bytes).contains(&token),
                "/proc/{pid}/{file} holds the token"
            );
        }
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap();
        for fd in fds.flatten() {
            let target = std::fs::read_link(fd.path()).unwrap_or_default();
            assert!(
                !target.to_string_lossy().contains("ide-engine-token"),
                "pid {pid} still holds the token's memfd"
            );
        }
    }
}

#[tokio::test]
async fn a_root_broker_drops_to_nobody_while_the_executor_keeps_root() {
    if !running_as_root() {
        eprintln!("skipped: the privilege drop happens only when ide starts as root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let secret = dir.path().join("root-only");
    std::fs::write(&secret, b"for root").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let world = boot_with(unjailed()).await;
    assert!(
        world.ide.wait_for_log("dropped root", BOOT).await,
        "{}",
        world.ide.logs()
    );
    let broker = world.ide.pid();
    let tasks = std::fs::read_dir(format!("/proc/{broker}/task")).unwrap();
    for task in tasks.flatten() {
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        for line in [
            "Uid:\t65534\t65534\t65534\t65534",
            "CapPrm:\t0000000000000000",
            "CapEff:\t0000000000000000",
            "NoNewPrivs:\t1",
            "Seccomp:\t2",
        ] {
            assert!(
                status.lines().any(|l| l == line),
                "thread {:?} lacks {line:?}:\n{status}",
                task.file_name()
            );
        }
    }
    let executor = children(broker)[0];
    let status = std::fs::read_to_string(format!("/proc/{executor}/status")).unwrap();
    assert!(status.lines().any(|l| l == "Uid:\t0\t0\t0\t0"), "{status}");
    let r = world
        .exec(json!({"command": "cat", "args": [secret]}))
        .await;
    assert_eq!(
        r["stdout"], "for root",
        "the executor still reads root-only files"
    );
}

#[tokio::test]
async fn the_executor_runs_under_the_baseline_and_its_commands_inherit_it() {
    let world = boot_with(unjailed()).await;
    let executor = children(world.ide.pid())[0];
    let filters = |status: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("Seccomp_filters:\t"))
            .and_then(|n| n.parse::<u32>().ok())
    };
    let tasks = std::fs::read_dir(format!("/proc/{executor}/task")).unwrap();
    for task in tasks.flatten() {
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        assert!(status.lines().any(|l| l == "Seccomp:\t2"), "{status}");
        assert!(filters(&status) >= Some(2), "{status}");
    }
    let main = std::fs::read_to_string(format!("/proc/{executor}/status")).unwrap();
    let seen = filters(&main);
    // Confined commands start from one thread that alone carries the
    // confined additions and no_new_privs.
    let tasks = std::fs::read_dir(format!("/proc/{executor}/task")).unwrap();
    let spawner: Vec<String> = tasks
        .flatten()
        .map(|t| std::fs::read_to_string(t.path().join("status")).unwrap_or_default())
        .filter(|s| s.lines().any(|l| l == "Name:\tide-confined-sp"))
        .collect();
    assert_eq!(spawner.len(), 1, "{spawner:?}");
    assert_eq!(filters(&spawner[0]), seen.map(|n| n + 1), "{}", spawner[0]);
    assert!(spawner[0].lines().any(|l| l == "NoNewPrivs:\t1"));
    if running_as_root() {
        assert!(main.lines().any(|l| l == "NoNewPrivs:\t0"), "{main}");
    }
    let r = world
        .exec(json!({"command": "cat", "args": ["/proc/self/status"]}))
        .await;
    let status = r["stdout"].as_str().unwrap();
    assert_eq!(
        filters(status),
        seen,
        "an unconfined command adds no filter"
    );
    let r = world
        .exec(json!({"command": "unshare", "args": ["-U", "true"]}))
        .await;
    assert_ne!(r["exit_code"], json!(0), "{r}");
    assert!(
        r["stderr"].as_str().unwrap().contains("not permitted"),
        "{r}"
    );
}

#[tokio::test]
async fn a_confined_command_cannot_write_outside_its_paths() {
    if !landlock_or_skip() {
        return;
    }
    let (inside, outside) = (Canary::new(), Canary::new());
    let mut executor = DirectExecutor::start(false).await;
    let writable = [inside.path()];
    let outside_dir = outside.path().display().to_string();
    let outside_file = outside.file().display().to_string();
    let (stdout, ended) = executor
        .exec(spec(
            &[probe(), "writes", &outside_dir, &outside_file],
            Some(&writable),
        ))
        .await;
    assert_eq!(ended.unwrap().exit_code, Some(0));
    let attempts = report(&stdout);
    for (attempt, errno) in attempts.as_object().unwrap() {
        assert_ne!(errno, "ok", "{attempt} outside succeeded: {attempts}");
    }
    assert_eq!(attempts["chmod_setuid"], "EPERM", "{attempts}");
    outside.assert_untouched();

    let inside_dir = inside.path().display().to_string();
    let inside_file = inside.file().display().to_string();
    let (stdout, _) = executor
        .exec(spec(
            &[probe(), "writes", &inside_dir, &inside_file],
            Some(&writable),
        ))
        .await;
    let attempts = report(&stdout);
    // The probe renames the canary before it links or truncates it.
    for attempt in [
        "create",
        "open_write",
        "open_trunc",
        "mkdir",
        "rename",
        "symlink",
        "mkfifo",
    ] {
        assert_eq!(
            attempts[attempt], "ok",
            "{attempt} inside failed: {attempts}"
        );
    }
    assert_eq!(
        attempts["chmod_setuid"], "EPERM",
        "no set-uid bits even inside"
    );
}

#[tokio::test]
async fn a_confined_command_cannot_read_the_memory_of_or_signal_other_processes() {
    if !landlock_or_skip() {
        return;
    }
    let mut bystander = tokio::process::Command::new("sleep")
        .arg("30")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let bystander_pid = bystander.id().unwrap().to_string();
    let mut executor = DirectExecutor::start(false).await;
    let executor_pid = executor.pid().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let writable = [tmp.path()];
    let needle = Stdin::Bytes(unique("not-a-secret").into_bytes());

    let mut unconfined = spec(&[probe(), "token", &bystander_pid], None);
    unconfined.stdin = needle.clone();
    let (stdout, _) = executor.exec(unconfined).await;
    let control = report(&stdout);
    assert_eq!(
        control["access"][format!("{bystander_pid}/mem")],
        "ok",
        "the control: unconfined, root opens other processes' memory: {control}"
    );

    let mut confined = spec(
        &[probe(), "token", &bystander_pid, &executor_pid],
        Some(&writable),
    );
    confined.stdin = needle;
    let (stdout, _) = executor.exec(confined).await;
    let found = report(&stdout);
    for pid in [&bystander_pid, &executor_pid] {
        assert_eq!(found["access"][format!("{pid}/mem")], "EACCES", "{found}");
    }
    for pid in [&bystander_pid, &executor_pid] {
        let (stdout, _) = executor
            .exec(spec(&[probe(), "processes", pid], Some(&writable)))
            .await;
        let r = report(&stdout);
        assert_eq!(r["kill0"], "EPERM", "signal scope: {r}");
        assert_eq!(r["ptrace_attach"], "EPERM", "{r}");
    }
    assert!(
        bystander.try_wait().unwrap().is_none(),
        "the bystander was hurt"
    );
}

#[tokio::test]
async fn a_confined_command_holds_only_stdio_and_no_new_privileges() {
    if !landlock_or_skip() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut executor = DirectExecutor::start(false).await;
    let (stdout, _) = executor
        .exec(spec(&[probe(), "status"], Some(&[tmp.path()])))
        .await;
    let status = report(&stdout);
    assert_eq!(status["no_new_privs"], "1", "{status}");
    assert_eq!(status["seccomp"], "2", "{status}");
    // 0-2, plus the directory the probe itself opened to list them.
    assert_eq!(status["fds"].as_array().unwrap().len(), 4, "{status}");
}

#[tokio::test]
async fn a_confined_command_that_times_out_leaves_nothing_behind() {
    if !landlock_or_skip() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut executor = DirectExecutor::start(false).await;
    let marker = format!("1000.{}{}", std::process::id(), line!());
    let script = format!("setsid sleep {marker} & (sleep {marker} &) & exec sleep {marker}");
    let mut s = spec(&["sh", "-c", &script], Some(&[tmp.path()]));
    s.timeout_ms = 1000;
    let (_, ended) = executor.exec(s).await;
    assert!(ended.unwrap().timed_out);
    let gone = eventually(Duration::from_secs(1), || {
        processes_with(&marker).is_empty()
    })
    .await;
    assert!(gone, "still running: {:?}", processes_with(&marker));
}

#[tokio::test]
async fn without_landlock_a_confined_exec_fails_closed_and_nothing_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("ran");
    let mut executor = DirectExecutor::start(true).await;
    let (_, ended) = executor
        .exec(spec(
            &["touch", marker.to_str().unwrap()],
            Some(&[tmp.path()]),
        ))
        .await;
    let err = ended.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unconfinable, "{err:?}");
    assert!(err.message.contains("did not run"), "{}", err.message);
    assert!(!marker.exists(), "the command ran");
    let (_, ended) = executor
        .exec(spec(&["touch", marker.to_str().unwrap()], None))
        .await;
    assert_eq!(
        ended.unwrap().exit_code,
        Some(0),
        "unconfined execs still run"
    );
    assert!(marker.exists());
}

/// A world whose scoped execs are write-confined, unjailed so the canaries
/// can live anywhere.
fn landlock_config() -> Value {
    json!({"fs": {"allow_unjailed": true, "exec_confinement": "landlock", "exec_writable": []}})
}

/// `tmp/{.git/, ws/}`: a session root inside a repository.
fn repository() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = std::fs::canonicalize(tmp.path()).unwrap();
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(repo.join("ws")).unwrap();
    (tmp, repo)
}

#[tokio::test]
async fn a_scoped_exec_through_the_broker_writes_only_its_session_and_git_dir() {
    if !landlock_or_skip() {
        return;
    }
    let (_tmp, repo) = repository();
    let outside = Canary::new();
    let world = boot_with(landlock_config()).await;
    let scope = json!({"root": repo.join("ws"), "boundary": "configured_roots"});
    let outside_dir = outside.path().display().to_string();
    let outside_file = outside.file().display().to_string();
    let r = world
        .exec(json!({
            "command": probe(), "args": ["writes", outside_dir, outside_file], "fs_scope": scope,
        }))
        .await;
    let attempts = report(r["stdout"].as_str().unwrap());
    for (attempt, errno) in attempts.as_object().unwrap() {
        assert_ne!(errno, "ok", "{attempt} outside succeeded: {attempts}");
    }
    outside.assert_untouched();

    let touch = |path: std::path::PathBuf, scoped: bool| {
        let mut payload = json!({"command": "touch", "args": [path]});
        if scoped {
            payload["fs_scope"] = scope.clone();
        }
        let world = &world;
        async move { world.exec(payload).await["exit_code"].clone() }
    };
    assert_eq!(touch(repo.join("ws/made"), true).await, 0);
    assert_eq!(
        touch(repo.join(".git/index.lock"), true).await,
        0,
        "the git dir is writable"
    );
    assert_ne!(touch(repo.join("sibling"), true).await, 0);
    assert!(
        !repo.join("sibling").exists(),
        "a confined exec wrote beside its session"
    );
    assert_eq!(
        touch(repo.join("sibling"), false).await,
        0,
        "unscoped execs are never confined"
    );
}

#[tokio::test]
async fn without_landlock_a_scoped_exec_through_the_broker_is_s222_and_does_not_run() {
    let (_tmp, repo) = repository();
    let wrapper_dir = tempfile::tempdir().unwrap();
    let wrapper = wrapper_dir.path().join("executor-without-landlock");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec '{}' without-landlock '{}' \"$@\"\n",
            probe(),
            ide_tests::binary("ide-executor").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let world = boot(Boot {
        stored: Some(landlock_config()),
        args: vec!["--executor".into(), wrapper.display().to_string()],
        ..Boot::default()
    })
    .await;
    let marker = repo.join("ws/ran");
    let scope = json!({"root": repo.join("ws"), "boundary": "workspace"});
    let (code, message) = world
        .exec_err(json!({"command": "touch", "args": [marker], "fs_scope": scope}))
        .await;
    assert_eq!(code, "S222", "{message}");
    assert!(!marker.exists(), "the command ran unconfined");
    let r = world
        .exec(json!({"command": "touch", "args": [marker]}))
        .await;
    assert_eq!(r["exit_code"], 0, "unscoped execs still run");
    assert!(marker.exists());
}
