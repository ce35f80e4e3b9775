//! `shell::exec` on the host: argv, output, limits, the env gate, the
//! denylist, cwd confinement, sandbox gates, and executor recovery.

use crate::support::*;
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test]
async fn runs_argv_and_reports_output_and_status() {
    let world = boot_with(unjailed()).await;
    let r = world
        .exec(json!({"command": "echo", "args": ["a  b", "$HOME"]}))
        .await;
    assert_eq!(r["stdout"], "a  b $HOME\n");
    assert_eq!(r["exit_code"], 0);
    assert_eq!(r["timed_out"], false);
    assert_eq!(r["stdout_truncated"], false);
    assert_eq!(r["stderr_truncated"], false);
    assert!(r["duration_ms"].is_u64());

    let r = world
        .exec(json!({"command": "sh -c 'echo out; echo err >&2; exit 3'"}))
        .await;
    assert_eq!(r["stdout"], "out\n");
    assert_eq!(r["stderr"], "err\n");
    assert_eq!(r["exit_code"], 3);

    // `args: []` means the command string is one program name, not split.
    let (code, message) = world
        .exec_err(json!({"command": "echo 'a b'", "args": []}))
        .await;
    assert_eq!(code, "S216");
    assert!(message.contains("not found"), "{message}");

    // Unknown fields (the engine adds _caller_worker_id) are tolerated.
    let r = world
        .exec(json!({"command": "true", "something_new": 1}))
        .await;
    assert_eq!(r["exit_code"], 0);
}

#[tokio::test]
async fn malformed_requests_are_s210() {
    let world = boot_with(unjailed()).await;
    let (code, message) = world.exec_err(json!({"command": ["ls", "-l"]})).await;
    assert_eq!(code, "S210");
    assert!(message.contains("args"), "{message}");
    let (code, message) = world
        .exec_err(json!({"command": "ls", "args": ["-l", 5]}))
        .await;
    assert_eq!(code, "S210");
    assert!(message.contains("args[1]"), "{message}");
    for bad in [
        json!({}),
        json!({"command": ""}),
        json!({"command": "echo 'open"}),
        json!({"command": "ls", "stdin": 5}),
    ] {
        assert_eq!(world.exec_err(bad.clone()).await.0, "S210", "{bad}");
    }
}

#[tokio::test]
async fn stdin_is_fed_then_closed_and_defaults_to_dev_null() {
    let world = boot_with(unjailed()).await;
    let r = world
        .exec(json!({"command": "cat", "stdin": "hello\nworld"}))
        .await;
    assert_eq!(r["stdout"], "hello\nworld");
    let started = Instant::now();
    let r = world
        .exec(json!({"command": "cat", "timeout_ms": 20000}))
        .await;
    assert_eq!(r["stdout"], "");
    assert_eq!(r["exit_code"], 0);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "cat must see EOF at once"
    );
    // A child that interleaves reads and writes does not deadlock on a big stdin.
    let big = "x".repeat(2 * 1024 * 1024);
    let r = world.exec(json!({"command": "cat", "stdin": big})).await;
    assert_eq!(
        r["stdout"].as_str().unwrap().len(),
        1024 * 1024,
        "capped at max_output_bytes"
    );
    assert_eq!(r["stdout_truncated"], true);
    assert_eq!(r["exit_code"], 0);
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group() {
    let world = boot_with(json!({"fs": {"allow_unjailed": true}, "max_timeout_ms": 800})).await;
    let started = Instant::now();
    let r = world
        .exec(json!({"command": "sh", "args": ["-c", "sleep 100 & echo $!; sleep 100"], "timeout_ms": 60000}))
        .await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(r["timed_out"], true);
    assert!(r["exit_code"].is_null());
    let stderr = r["stderr"].as_str().unwrap();
    assert!(stderr.contains("timed out after 800 ms"), "{stderr}");
    assert!(stderr.contains("clamped"), "{stderr}");
    assert!(stderr.contains("shell::exec_bg"), "{stderr}");
    let bg: u32 = r["stdout"]
        .as_str()
        .unwrap()
        .trim()
        .parse()
        .expect("background pid");
    assert!(
        eventually(Duration::from_secs(5), || !alive(bg)).await,
        "background sleep {bg} survived"
    );
}

#[tokio::test]
async fn the_default_timeout_applies_when_none_is_asked() {
    let world = boot_with(json!({"fs": {"allow_unjailed": true}, "default_timeout_ms": 300})).await;
    let r = world
        .exec(json!({"command": "sleep", "args": ["30"]}))
        .await;
    assert_eq!(r["timed_out"], true);
    assert!(r["stderr"].as_str().unwrap().contains("300 ms"));
    assert!(!r["stderr"].as_str().unwrap().contains("clamped"));
}

#[tokio::test]
async fn a_signal_death_has_a_null_exit_code() {
    let world = boot_with(unjailed()).await;
    let r = world
        .exec(json!({"command": "sh", "args": ["-c", "kill -9 $$"]}))
        .await;
    assert!(r["exit_code"].is_null());
    assert_eq!(r["timed_out"], false);
}

#[tokio::test]
async fn output_past_the_cap_is_truncated_while_the_pipe_keeps_draining() {
    let world = boot_with(json!({"fs": {"allow_unjailed": true}, "max_output_bytes": 1000})).await;
    let r = world
        .exec(json!({"command": "sh", "args": ["-c", "head -c 3000000 /dev/zero | tr '\\0' a; echo done >&2; exit 7"]}))
        .await;
    assert_eq!(r["stdout"].as_str().unwrap().len(), 1000);
    assert_eq!(r["stdout_truncated"], true);
    assert_eq!(r["stderr"], "done\n");
    assert_eq!(r["stderr_truncated"], false);
    assert_eq!(
        r["exit_code"], 7,
        "the real exit code survives the cap (no SIGPIPE)"
    );
}

#[tokio::test]
async fn a_backgrounded_grandchild_does_not_hang_the_call() {
    let world = boot_with(unjailed()).await;
    let started = Instant::now();
    let r = world
        .exec(json!({"command": "sh", "args": ["-c", "sleep 30 & echo started"]}))
        .await;
    assert_eq!(r["stdout"], "started\n");
    assert_eq!(r["exit_code"], 0);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn the_env_gate_refuses_the_whole_call_and_names_the_key() {
    let world = boot_with(unjailed()).await;
    for key in [
        "PATH",
        "HOME",
        "LD_PRELOAD",
        "LD_WHATEVER",
        "DYLD_INSERT_LIBRARIES",
        "BASH_ENV",
        "NODE_OPTIONS",
        "IFS",
    ] {
        let (code, message) = world
            .exec_err(json!({"command": "true", "env": {"OK": "1", key: "/tmp/evil"}}))
            .await;
        assert_eq!(code, "S210", "{key}");
        assert!(message.contains(key), "{key}: {message}");
    }
    for key in ["PATH=/tmp/evil", "A-B", "1A", ""] {
        let (code, _) = world
            .exec_err(json!({"command": "true", "env": {key: "x"}}))
            .await;
        assert_eq!(code, "S210", "{key:?}");
    }
    let r = world
        .exec(json!({"command": "sh", "args": ["-c", "echo $NODE_ENV-$LANG_X"], "env": {"NODE_ENV": "test", "LANG_X": "y"}}))
        .await;
    assert_eq!(r["stdout"], "test-y\n");
}

#[tokio::test]
async fn env_forwarding_follows_inherit_and_allow_and_never_leaks_the_token() {
    let world = boot(Boot {
        stored: Some(json!({"fs": {"allow_unjailed": true}, "env": {"inherit": false, "allow": ["PATH", "IDE_TEST_ALLOWED"]}})),
        env: vec![
            ("IDE_TEST_ALLOWED".into(), "yes".into()),
            ("IDE_TEST_HIDDEN".into(), "no".into()),
            ("III_TOKEN".into(), "secret-token-value".into()),
        ],
        ..Boot::default()
    })
    .await;
    let r = world
        .exec(json!({"command": "env", "env": {"PER_CALL": "1"}}))
        .await;
    let out = r["stdout"].as_str().unwrap();
    assert!(out.contains("IDE_TEST_ALLOWED=yes"), "{out}");
    assert!(out.contains("PER_CALL=1"), "{out}");
    assert!(out.contains("PATH="), "{out}");
    assert!(!out.contains("IDE_TEST_HIDDEN"), "{out}");
    assert!(!out.contains("secret-token-value"), "{out}");

    let world = boot(Boot {
        stored: Some(json!({"fs": {"allow_unjailed": true}, "env": {"inherit": true}})),
        env: vec![
            ("IDE_TEST_HIDDEN".into(), "inherited".into()),
            ("III_TOKEN".into(), "secret-token-value".into()),
        ],
        ..Boot::default()
    })
    .await;
    let out = world.exec(json!({"command": "env"})).await["stdout"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(out.contains("IDE_TEST_HIDDEN=inherited"), "{out}");
    assert!(!out.contains("secret-token-value"), "{out}");
}

#[tokio::test]
async fn the_denylist_is_a_plain_message_anchored_to_the_command() {
    let world = boot(Boot::default()).await;
    for argv in [
        json!(["sudo", "shutdown", "-h", "now"]),
        json!(["/sbin/reboot"]),
        json!(["rm", "-rf", "/"]),
    ] {
        let cmd = argv[0].clone();
        let args = json!(argv.as_array().unwrap()[1..]);
        let (code, message) = world.exec_err(json!({"command": cmd, "args": args})).await;
        assert!(
            message.starts_with("command matches denylist: "),
            "{argv}: {message}"
        );
        assert_eq!(
            code, "invocation_failed",
            "{argv}: a denylist hit carries no S-code"
        );
    }
    let r = world
        .exec(json!({"command": "sh", "args": ["-c", "echo shutdown"]}))
        .await;
    assert_eq!(r["stdout"], "shutdown\n");
    let r = world
        .exec(json!({"command": "grep", "args": ["-c", "shutdown", "/dev/null"]}))
        .await;
    assert_eq!(r["exit_code"], 1, "grep ran (no match)");
}

#[tokio::test]
async fn cwd_is_confined_to_the_jail() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    std::fs::create_dir(root_path.join("sub")).unwrap();
    std::fs::write(root_path.join("file"), "x").unwrap();
    std::os::unix::fs::symlink(outside.path(), root_path.join("out-link")).unwrap();
    std::os::unix::fs::symlink("sub", root_path.join("in-link")).unwrap();
    std::fs::create_dir(root_path.join("secret")).unwrap();
    let mut cfg = jailed(&root_path);
    cfg["fs"]["denylist_paths"] = json!([root_path.join("secret")]);
    let world = boot_with(cfg).await;

    let pwd = |r: serde_json::Value| r["stdout"].as_str().unwrap().trim().to_owned();
    assert_eq!(
        pwd(world.exec(json!({"command": "pwd", "cwd": "sub"})).await),
        root_path.join("sub").to_str().unwrap()
    );
    assert_eq!(
        pwd(world
            .exec(json!({"command": "pwd", "cwd": root_path.join("sub")}))
            .await),
        root_path.join("sub").to_str().unwrap()
    );
    let r = world
        .exec(json!({"command": "pwd", "cwd": "in-link"}))
        .await;
    assert_eq!(r["exit_code"], 0);

    assert_eq!(
        world
            .exec_err(json!({"command": "pwd", "cwd": "/etc"}))
            .await
            .0,
        "S215"
    );
    assert_eq!(
        world
            .exec_err(json!({"command": "pwd", "cwd": "../.."}))
            .await
            .0,
        "S215"
    );
    assert_eq!(
        world
            .exec_err(json!({"command": "pwd", "cwd": "out-link"}))
            .await
            .0,
        "S215"
    );
    assert_eq!(
        world
            .exec_err(json!({"command": "pwd", "cwd": "file"}))
            .await
            .0,
        "S210"
    );

    let missing = world
        .exec_err(json!({"command": "pwd", "cwd": "nope"}))
        .await;
    let denied = world
        .exec_err(json!({"command": "pwd", "cwd": "secret"}))
        .await;
    assert_eq!(missing.0, "S211");
    assert_eq!(denied.0, "S211");
    assert_eq!(
        missing.1.replace("nope", "X"),
        denied.1.replace("secret", "X"),
        "redaction: same wording"
    );
    assert!(
        !denied.1.contains(root_path.to_str().unwrap()),
        "no resolved path in errors: {}",
        denied.1
    );
}

#[tokio::test]
async fn unjailed_cwd_must_be_absolute() {
    let world = boot_with(unjailed()).await;
    assert_eq!(
        world
            .exec_err(json!({"command": "pwd", "cwd": "tmp"}))
            .await
            .0,
        "S210"
    );
    assert_eq!(
        world
            .exec_err(json!({"command": "pwd", "cwd": "~"}))
            .await
            .0,
        "S210"
    );
    let r = world.exec(json!({"command": "pwd", "cwd": "/"})).await;
    assert_eq!(r["stdout"], "/\n");
    // The operator denylist holds unjailed, also through a magic link.
    assert_eq!(
        world
            .exec_err(json!({"command": "pwd", "cwd": "/proc/self/root/tmp"}))
            .await
            .0,
        "S211"
    );
}

#[tokio::test]
async fn sandbox_targets_are_gated_before_anything_is_sent() {
    let sandbox = json!({"kind": "sandbox", "sandbox_id": "7f0c1b0e-2a40-4c53-9f0e-1d2b3c4d5e6f"});
    let world =
        boot_with(json!({"fs": {"allow_unjailed": true}, "sandbox": {"enabled": false}})).await;
    assert_eq!(
        world
            .exec_err(json!({"command": "ls", "target": sandbox}))
            .await
            .0,
        "S210"
    );
    let world = boot_with(unjailed()).await;
    for extra in [
        json!({"cwd": "/tmp"}),
        json!({"env": {"A": "1"}}),
        json!({"stdin": "x"}),
    ] {
        let mut req = json!({"command": "ls", "target": sandbox});
        req.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let (code, message) = world.exec_err(req).await;
        assert_eq!(code, "S210");
        assert!(message.contains("host-only"), "{message}");
    }
    for bad in [
        json!({"kind": "sandbox", "sandbox_id": "not-a-uuid"}),
        json!({"kind": "vm"}),
    ] {
        assert_eq!(
            world
                .exec_err(json!({"command": "ls", "target": bad}))
                .await
                .0,
            "S210"
        );
    }
}

#[tokio::test]
async fn sandbox_targets_are_forwarded_to_sandbox_exec() {
    let world = boot_with(unjailed()).await;
    let fake = caller(&world.engine);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    fake.register_function(
        "sandbox::exec",
        iii_sdk::RegisterFunction::new_async(move |input: serde_json::Value| {
            let record = record.clone();
            async move {
                record.lock().unwrap().push(input.clone());
                match input["cmd"].as_str() {
                    Some("boom") => Err(iii_sdk::Error::Remote { code: "S300".into(), message: "no kvm".into(), stacktrace: None }),
                    Some("weird") => Err(iii_sdk::Error::Remote { code: "X999".into(), message: "odd".into(), stacktrace: None }),
                    Some("slow") => Err(iii_sdk::Error::Remote { code: "S200".into(), message: "timed out".into(), stacktrace: None }),
                    _ => Ok(json!({"stdout": "vm\n", "stderr": "", "exit_code": 0, "duration_ms": 4, "timed_out": false, "success": true})),
                }
            }
        }),
    );
    assert!(world.engine.wait_for_function("sandbox::exec", BOOT).await);
    let target = json!({"kind": "sandbox", "sandbox_id": "7f0c1b0e-2a40-4c53-9f0e-1d2b3c4d5e6f"});
    let r = world
        .exec(json!({"command": "uname", "args": ["-a"], "target": target, "timeout_ms": 5000}))
        .await;
    assert_eq!(r["stdout"], "vm\n");
    assert_eq!(r["exit_code"], 0);
    let sent = seen.lock().unwrap()[0].clone();
    assert_eq!(sent["sandbox_id"], target["sandbox_id"]);
    assert_eq!(sent["cmd"], "uname");
    assert_eq!(sent["args"], json!(["-a"]));
    assert_eq!(sent["timeout_ms"], 5000);
    let scoped = json!({"command": "uname", "target": target,
        "fs_scope": {"root": "/no/such/session", "boundary": "workspace"}});
    assert_eq!(
        world.exec(scoped).await["stdout"],
        "vm\n",
        "a sandbox target drops the harness's host scope"
    );
    assert_eq!(
        world
            .exec_err(json!({"command": "boom", "target": target}))
            .await
            .0,
        "S300"
    );
    assert_eq!(
        world
            .exec_err(json!({"command": "weird", "target": target}))
            .await
            .0,
        "S216"
    );
    let r = world
        .exec(json!({"command": "slow", "target": target, "timeout_ms": 1234}))
        .await;
    assert_eq!(r["timed_out"], true);
    assert!(r["exit_code"].is_null());
    assert_eq!(r["duration_ms"], 1234);
}

#[tokio::test]
async fn a_killed_executor_fails_calls_in_flight_with_s216_and_is_replaced() {
    // A broker that dropped root cannot start a root executor again (it is
    // restarted by its service manager instead); one that keeps root can.
    let world = boot(Boot {
        stored: Some(unjailed()),
        args: vec!["--broker-user".into(), "root".into()],
        ..Boot::default()
    })
    .await;
    assert_eq!(world.exec(json!({"command": "true"})).await["exit_code"], 0);
    let executors = children(world.ide.pid());
    assert_eq!(executors.len(), 1, "one executor child: {executors:?}");
    let executor = executors[0];
    let in_flight = {
        let client = caller(&world.engine);
        tokio::spawn(async move {
            ide_tests::call(
                &client,
                "shell::exec",
                json!({"command": "sleep", "args": ["20"]}),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let killed = std::process::Command::new("kill")
        .arg("-9")
        .arg(executor.to_string())
        .status()
        .unwrap();
    assert!(killed.success());
    let result = tokio::time::timeout(Duration::from_secs(15), in_flight)
        .await
        .expect("in-flight call ends")
        .unwrap();
    match result {
        Err(iii_sdk::Error::Remote { code, .. }) => assert_eq!(code, "S216"),
        other => panic!("expected S216, got {other:?}"),
    }
    let r = world
        .exec(json!({"command": "echo", "args": ["back"]}))
        .await;
    assert_eq!(r["stdout"], "back\n");
    assert!(children(world.ide.pid()).iter().all(|p| *p != executor));
}

#[tokio::test]
async fn the_hardened_install_connects_to_a_running_executor() {
    let dir = tempfile::tempdir().unwrap();
    let sock_dir = dir.path().join("run");
    let sock = sock_dir.join("executor.sock");
    let uid = std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
        .unwrap();
    let mut executor = std::process::Command::new(ide_tests::binary("ide-executor"))
        .arg("--listen")
        .arg(&sock)
        .arg("--trust-uid")
        .arg(uid.to_string())
        .spawn()
        .expect("start the executor service");
    assert!(
        eventually(Duration::from_secs(10), || sock.exists()).await,
        "the executor did not listen"
    );
    let world = boot(Boot {
        stored: Some(unjailed()),
        args: vec![
            "--executor-socket".into(),
            sock.to_string_lossy().into_owned(),
        ],
        ..Boot::default()
    })
    .await;
    let r = world
        .exec(json!({"command": "echo", "args": ["via socket"]}))
        .await;
    assert_eq!(r["stdout"], "via socket\n");
    assert!(
        children(world.ide.pid()).is_empty(),
        "the broker started no executor of its own"
    );
    let _ = executor.kill();
    let _ = executor.wait();
}
