//! Background jobs end to end: `shell::exec_bg`, `status`, `list`, `kill`,
//! `kill-session-jobs`, `shell::on-job-finished`, paging, retention, sandbox
//! jobs, and jobs that outlive a broker killed with SIGKILL.

use crate::support::{alive, boot, caller, children, eventually, Boot, World, BOOT};
use ide_tests::{Ide, IdeOptions};
use iii_sdk::protocol::TriggerRequest;
use iii_sdk::{Deliver, IIIClient, ObserverHandle, ObserverOptions, RegisterFunction, Source};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::mpsc;

/// How long a job or a delivery may take before a test fails.
const WAIT: Duration = Duration::from_secs(20);
/// How long a test watches for a delivery that must not come.
const QUIET: Duration = Duration::from_millis(500);

/// A world whose broker keeps its rendezvous socket in a private temp dir.
/// Dropping it stops the broker gracefully, so its executor (and every job
/// a test left running) goes with it instead of lingering.
struct Jobs {
    world: World,
    state: tempfile::TempDir,
}

impl Drop for Jobs {
    fn drop(&mut self) {
        let pid = self.world.ide.pid();
        if alive(pid) && terminate(pid) {
            for _ in 0..500 {
                if !alive(pid) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// The state directory inside `state`: created by the executor for the
/// broker's (possibly dropped) uid, so its parent must be traversable.
fn state_dir(state: &tempfile::TempDir) -> std::path::PathBuf {
    state.path().join("run")
}

fn state_args(state: &tempfile::TempDir) -> Vec<String> {
    vec![
        "--state-dir".into(),
        state_dir(state).to_string_lossy().into_owned(),
    ]
}

async fn jobs_world(config: Value) -> Jobs {
    let state = tempfile::tempdir().expect("state dir");
    std::fs::set_permissions(
        state.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o711),
    )
    .expect("chmod state dir");
    let world = boot(Boot {
        stored: Some(config),
        args: state_args(&state),
        ..Boot::default()
    })
    .await;
    assert!(
        world.engine.wait_for_function("shell::exec_bg", BOOT).await,
        "exec_bg was not registered; logs:\n{}",
        world.ide.logs()
    );
    Jobs { world, state }
}

fn unjailed_with(extra: Value) -> Value {
    let mut config = json!({ "fs": { "allow_unjailed": true } });
    if let (Some(c), Some(e)) = (config.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    config
}

impl Jobs {
    async fn call(&self, id: &str, payload: Value) -> Result<Value, (String, String)> {
        self.world.call(id, payload).await
    }

    async fn start(&self, payload: Value) -> Value {
        match self.call("shell::exec_bg", payload.clone()).await {
            Ok(v) => v,
            Err(e) => panic!(
                "exec_bg {payload} failed: {e:?}\nlogs:\n{}",
                self.world.ide.logs()
            ),
        }
    }

    async fn start_err(&self, payload: Value) -> (String, String) {
        match self.call("shell::exec_bg", payload.clone()).await {
            Ok(v) => panic!("exec_bg {payload} should have failed, got {v}"),
            Err(e) => e,
        }
    }

    async fn status(&self, job_id: &str) -> Value {
        self.call("shell::status", json!({ "job_id": job_id }))
            .await
            .unwrap_or_else(|e| panic!("status {job_id}: {e:?}"))["job"]
            .clone()
    }

    /// Polls `shell::status` until the job is no longer running.
    async fn finished(&self, job_id: &str) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let job = self.status(job_id).await;
            if job["status"] != "running" {
                return job;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "job {job_id} still running: {job}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn kill(&self, job_id: &str) -> Value {
        self.call("shell::kill", json!({ "job_id": job_id }))
            .await
            .unwrap_or_else(|e| panic!("kill {job_id}: {e:?}"))
    }

    /// Waits until the job's stdout holds a first line, and returns it.
    async fn first_line(&self, job_id: &str) -> String {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let job = self.status(job_id).await;
            if let Some((line, _)) = job["stdout"].as_str().and_then(|s| s.split_once('\n')) {
                return line.to_owned();
            }
            assert!(tokio::time::Instant::now() < deadline, "no output: {job}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The executor process serving this world's broker.
    fn executor_pid(&self) -> u32 {
        let kids = children(self.world.ide.pid());
        assert_eq!(kids.len(), 1, "one executor child: {kids:?}");
        kids[0]
    }
}

/// A function on its own client that records what it is called with.
struct Sink {
    id: String,
    rx: mpsc::UnboundedReceiver<Value>,
    _client: IIIClient,
}

async fn sink(w: &World, name: &str) -> (Sink, IIIClient) {
    let client = caller(&w.engine);
    let (tx, rx) = mpsc::unbounded_channel();
    let id = format!("test::{name}");
    client.register_function(
        id.clone(),
        RegisterFunction::new(move |input: Value| {
            let _ = tx.send(input);
            Ok::<_, iii_sdk::Error>(json!({}))
        }),
    );
    assert!(w.engine.wait_for_function(&id, BOOT).await);
    let observer = caller(&w.engine);
    (
        Sink {
            id,
            rx,
            _client: client,
        },
        observer,
    )
}

impl Sink {
    async fn next(&mut self) -> Value {
        tokio::time::timeout(WAIT, self.rx.recv())
            .await
            .expect("a completion in time")
            .expect("the sink is alive")
    }

    /// Asserts nothing more arrives for a short while.
    async fn silent(&mut self) {
        if let Ok(Some(extra)) = tokio::time::timeout(QUIET, self.rx.recv()).await {
            panic!("unexpected extra delivery: {extra}");
        }
    }
}

/// Observes `shell::on-job-finished` with `args`, delivering the event itself.
async fn observe(observer: &IIIClient, args: Value, sink: &Sink) -> ObserverHandle {
    let handle = observer.observe_with(
        Source::function("shell::on-job-finished")
            .args(args)
            .deliver(Deliver::Output),
        sink.id.as_str(),
        ObserverOptions::default(),
    );
    tokio::time::timeout(WAIT, handle.ready())
        .await
        .expect("observer answered")
        .expect("observer accepted");
    handle
}

/// Sends SIGTERM to `pid`; false if it is already gone.
fn terminate(pid: u32) -> bool {
    std::process::Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status()
        .is_ok_and(|s| s.success())
}

#[tokio::test]
async fn exec_bg_returns_at_once_and_status_reports_the_full_record() {
    let j = jobs_world(unjailed_with(json!({}))).await;
    let started = j
        .start(
            json!({"command": "sh", "args": ["-c", "echo out; echo err >&2; sleep 0.2; exit 3"]}),
        )
        .await;
    let job_id = started["job_id"].as_str().unwrap().to_owned();
    assert!(uuid::Uuid::parse_str(job_id.strip_prefix("job-").unwrap()).is_ok());
    assert_eq!(
        started["argv"],
        json!(["sh", "-c", "echo out; echo err >&2; sleep 0.2; exit 3"])
    );
    assert_eq!(started.as_object().unwrap().len(), 2, "{started}");
    let job = j.finished(&job_id).await;
    assert_eq!(job["id"], job_id.as_str());
    assert_eq!(job["status"], "failed");
    assert_eq!(job["exit_code"], 3);
    assert_eq!(job["stdout"], "out\n");
    assert_eq!(job["stderr"], "err\n");
    assert_eq!(job["stdout_truncated"], false);
    assert!(job["finished_at_ms"].as_u64().unwrap() >= job["started_at_ms"].as_u64().unwrap());
    let ok = j.start(json!({"command": "cat", "stdin": "fed"})).await;
    let job = j.finished(ok["job_id"].as_str().unwrap()).await;
    assert_eq!(
        (job["status"].as_str(), job["stdout"].as_str()),
        (Some("finished"), Some("fed"))
    );
    let (code, message) = j
        .call("shell::status", json!({"job_id": "never-was"}))
        .await
        .unwrap_err();
    assert_eq!(
        (code.as_str(), message.as_str()),
        ("S211", "no such job: never-was")
    );
    assert_eq!(
        j.call("shell::status", json!({})).await.unwrap_err().0,
        "S210"
    );
}

#[tokio::test]
async fn exec_bg_applies_the_exec_gates_before_anything_runs() {
    let root = tempfile::tempdir().unwrap();
    let marker = root.path().join("ran");
    let touch = |extra: Value| {
        let mut p = json!({"command": "touch", "args": [marker.to_str().unwrap()]});
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        p
    };
    let j = jobs_world(json!({
        "fs": {"host_roots": [root.path()], "allow_unjailed": false},
        "denylist_patterns": ["^touch"],
        "sandbox": {"enabled": false}
    }))
    .await;
    let (code, message) = j.start_err(touch(json!({}))).await;
    assert_eq!(code, "invocation_failed");
    assert_eq!(message, "command matches denylist: ^touch");
    let sandbox = json!({"kind": "sandbox", "sandbox_id": "7f0c1b0e-2a40-4c53-9f0e-1d2b3c4d5e6f"});
    for (payload, want) in [
        (
            json!({"command": "true", "env": {"LD_PRELOAD": "/x.so"}}),
            "S210",
        ),
        (json!({"command": "true", "cwd": "/"}), "S215"),
        (json!({"command": "true", "cwd": "missing"}), "S211"),
        (json!({"command": "true", "target": sandbox}), "S210"),
        (json!({"command": "true", "job_id": "  "}), "S210"),
        (json!({"command": "true", "job_id": 7}), "S210"),
        (json!({"args": ["x"]}), "S210"),
    ] {
        assert_eq!(j.start_err(payload.clone()).await.0, want, "{payload}");
    }
    assert!(!marker.exists());
    let list = j.call("shell::list", json!({})).await.unwrap();
    assert_eq!(list["count"], 0, "nothing was recorded: {list}");
}

#[tokio::test]
async fn a_caller_id_is_refused_while_running_and_while_retained() {
    let j = jobs_world(unjailed_with(json!({}))).await;
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("second-ran");
    let started = j
        .start(json!({"job_id": "dup-1", "command": "sleep", "args": ["30"]}))
        .await;
    assert_eq!(started["job_id"], "dup-1");
    let again = json!({"job_id": "dup-1", "command": "touch", "args": [marker.to_str().unwrap()]});
    let (code, message) = j.start_err(again.clone()).await;
    assert_eq!(
        (code.as_str(), message.as_str()),
        ("S213", "job_id 'dup-1' already exists")
    );
    let job = j.status("dup-1").await;
    assert_eq!(
        (job["status"].as_str(), &job["argv"]),
        (Some("running"), &json!(["sleep", "30"]))
    );
    assert_eq!(j.kill("dup-1").await["killed"], true);
    assert_eq!(j.finished("dup-1").await["status"], "killed");
    assert_eq!(
        j.start_err(again).await.0,
        "S213",
        "a retained id stays taken"
    );
    assert!(!marker.exists(), "the refused command ran");
}

#[tokio::test]
async fn the_concurrency_cap_rejects_without_running() {
    let j = jobs_world(unjailed_with(json!({"max_concurrent_jobs": 2}))).await;
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("third");
    for id in ["c1", "c2"] {
        j.start(json!({"job_id": id, "command": "sleep", "args": ["30"]}))
            .await;
    }
    let third = json!({"job_id": "c3", "command": "touch", "args": [marker.to_str().unwrap()]});
    let (code, message) = j.start_err(third.clone()).await;
    assert_eq!(code, "S210");
    assert_eq!(
        message,
        "max concurrent jobs (2) reached, currently running: 2"
    );
    assert!(!marker.exists());
    assert_eq!(
        j.call("shell::status", json!({"job_id": "c3"}))
            .await
            .unwrap_err()
            .0,
        "S211"
    );
    j.kill("c1").await;
    j.finished("c1").await;
    j.start(third).await;
    assert_eq!(j.finished("c3").await["status"], "finished");
    assert!(marker.exists());
    j.kill("c2").await;
}

#[tokio::test]
async fn the_host_hard_cap_kills_a_runaway_job() {
    let j = jobs_world(unjailed_with(json!({"max_bg_timeout_ms": 300}))).await;
    let began = std::time::Instant::now();
    let id = j
        .start(json!({"command": "sleep", "args": ["30"], "timeout_ms": 60000}))
        .await["job_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let job = j.finished(&id).await;
    assert!(began.elapsed() < Duration::from_secs(15));
    assert_eq!(job["status"], "killed");
    assert!(job["exit_code"].is_null());
    assert!(
        job["stderr"]
            .as_str()
            .unwrap()
            .contains("hard cap of 300ms"),
        "{job}"
    );
}

#[tokio::test]
async fn kill_ends_the_whole_group_and_is_never_downgraded() {
    let j = jobs_world(unjailed_with(json!({}))).await;
    j.start(json!({"job_id": "grp", "command": "sh", "args": ["-c", "sleep 60 & echo $!; wait"]}))
        .await;
    let grandchild: u32 = j.first_line("grp").await.parse().unwrap();
    assert!(alive(grandchild));
    let killed = j.kill("grp").await;
    assert_eq!(
        killed,
        json!({"job_id": "grp", "killed": true, "status": "killed"})
    );
    let job = j.finished("grp").await;
    assert_eq!(job["status"], "killed");
    assert!(
        eventually(WAIT, || !alive(grandchild)).await,
        "the group survived"
    );
    let again = j.kill("grp").await;
    assert_eq!(
        again,
        json!({"job_id": "grp", "killed": false, "status": "killed", "reason": "not running"})
    );
    assert_eq!(
        j.status("grp").await["finished_at_ms"],
        job["finished_at_ms"]
    );
    let (code, _) = j
        .call("shell::kill", json!({"job_id": "nope"}))
        .await
        .unwrap_err();
    assert_eq!(code, "S211");
}

#[tokio::test]
async fn a_kill_racing_a_natural_exit_is_consistent() {
    let j = jobs_world(unjailed_with(json!({"max_concurrent_jobs": 64}))).await;
    let mut answers = HashMap::new();
    for i in 0..20 {
        let id = format!("race-{i}");
        j.start(json!({"job_id": id, "command": "true"})).await;
        answers.insert(id.clone(), j.kill(&id).await);
    }
    for (id, answer) in answers {
        let job = j.finished(&id).await;
        if answer["killed"] == true {
            assert_eq!(job["status"], "killed", "{id}: {answer} then {job}");
        } else {
            assert_eq!(answer["reason"], "not running");
            assert_eq!(job["status"], answer["status"], "{id}");
            assert_eq!(job["status"], "finished");
        }
    }
}

#[tokio::test]
async fn list_never_shows_argv_or_output() {
    let j = jobs_world(unjailed_with(json!({}))).await;
    let id = j
        .start(json!({"command": "echo", "args": ["SECRET-TOKEN-42"]}))
        .await["job_id"]
        .as_str()
        .unwrap()
        .to_owned();
    j.finished(&id).await;
    j.start(json!({"job_id": "running-one", "command": "sleep", "args": ["30"]}))
        .await;
    let list = j
        .call("shell::list", json!({"ignored": true}))
        .await
        .unwrap();
    assert_eq!(list["count"], 2);
    assert!(!list.to_string().contains("SECRET"), "{list}");
    for summary in list["jobs"].as_array().unwrap() {
        let mut keys: Vec<&str> = summary
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "exit_code",
                "finished_at_ms",
                "id",
                "started_at_ms",
                "status",
                "stderr_truncated",
                "stdout_truncated"
            ]
        );
    }
    let by_id: HashMap<&str, &Value> = list["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["id"].as_str().unwrap(), s))
        .collect();
    assert_eq!(by_id[id.as_str()]["status"], "finished");
    assert_eq!(by_id["running-one"]["status"], "running");
    j.kill("running-one").await;
}

#[tokio::test]
async fn finished_records_are_pruned_after_the_retention() {
    let j = jobs_world(unjailed_with(json!({"job_retention_secs": 1}))).await;
    j.start(json!({"job_id": "short", "command": "true"})).await;
    j.start(json!({"job_id": "long", "command": "sleep", "args": ["30"]}))
        .await;
    j.finished("short").await;
    let gone = async {
        loop {
            match j.call("shell::status", json!({"job_id": "short"})).await {
                Err((code, message)) => return (code, message),
                Ok(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    };
    let (code, message) = tokio::time::timeout(WAIT, gone)
        .await
        .expect("pruned in time");
    assert_eq!(
        (code.as_str(), message.as_str()),
        ("S211", "no such job: short")
    );
    let list = j.call("shell::list", json!({})).await.unwrap();
    assert_eq!(list["count"], 1, "{list}");
    assert_eq!(
        list["jobs"][0]["id"], "long",
        "a running job is never pruned"
    );
    // The id is free again once its record is gone.
    j.start(json!({"job_id": "short", "command": "true"})).await;
    j.kill("long").await;
}

#[tokio::test]
async fn status_pages_through_output_that_keeps_only_the_newest_bytes() {
    let j = jobs_world(unjailed_with(json!({"max_output_bytes": 1000}))).await;
    j.start(json!({
        "job_id": "chatty",
        "command": "sh",
        "args": ["-c", "head -c 3000 /dev/zero | tr '\\0' a; printf END"]
    }))
    .await;
    j.finished("chatty").await;
    let full = j
        .call("shell::status", json!({"job_id": "chatty"}))
        .await
        .unwrap();
    assert_eq!(
        full.as_object().unwrap().len(),
        1,
        "no paging fields unasked: {full}"
    );
    let stdout = full["job"]["stdout"].as_str().unwrap();
    assert_eq!(stdout.len(), 1000);
    assert!(stdout.ends_with("aaaEND"));
    assert_eq!(full["job"]["stdout_truncated"], true);
    let page = j
        .call(
            "shell::status",
            json!({"job_id": "chatty", "stdout_offset": 0, "max_bytes": 10}),
        )
        .await
        .unwrap();
    assert_eq!(page["job"]["stdout"], "aaaaaaaaaa");
    assert_eq!(page["stdout_total_bytes"], 3003);
    assert_eq!(page["stdout_dropped_bytes"], 2003);
    assert_eq!(
        page["stdout_offset"], 2003,
        "dropped bytes cannot be returned"
    );
    assert_eq!(page["stdout_next_offset"], 2013);
    assert_eq!(page["stderr_total_bytes"], 0);
    let tail = j
        .call(
            "shell::status",
            json!({"job_id": "chatty", "stdout_offset": 3000}),
        )
        .await
        .unwrap();
    assert_eq!(tail["job"]["stdout"], "END");
    assert_eq!(tail["stdout_next_offset"], 3003);
    let bad = j
        .call(
            "shell::status",
            json!({"job_id": "chatty", "max_bytes": -1}),
        )
        .await
        .unwrap_err();
    assert_eq!(bad.0, "S210");
}

#[tokio::test]
async fn session_kills_match_the_stamped_owner_only() {
    let j = jobs_world(unjailed_with(json!({}))).await;
    let with_meta = j
        .world
        .client
        .trigger(
            TriggerRequest::new(
                "shell::exec_bg",
                json!({"job_id": "meta", "command": "sleep", "args": ["30"]}),
            )
            .metadata(json!({"session_id": "s1"})),
        )
        .await
        .expect("exec_bg with metadata");
    assert_eq!(with_meta["job_id"], "meta");
    j.start(json!({"job_id": "payload", "session_id": "s2", "command": "sleep", "args": ["30"]}))
        .await;
    j.start(json!({"job_id": "nobody", "command": "sleep", "args": ["30"]}))
        .await;
    let killed = j
        .call(
            "shell::kill-session-jobs",
            json!({"session_ids": ["s1", "s2", "s3"]}),
        )
        .await
        .unwrap();
    assert_eq!(killed, json!({"killed": 2}));
    assert_eq!(j.finished("meta").await["status"], "killed");
    assert_eq!(j.finished("payload").await["status"], "killed");
    assert_eq!(j.status("nobody").await["status"], "running");
    let none = j
        .call("shell::kill-session-jobs", json!({"session_ids": []}))
        .await
        .unwrap();
    assert_eq!(none, json!({"killed": 0}));
    assert_eq!(
        j.call("shell::kill-session-jobs", json!({"session_ids": "s1"}))
            .await
            .unwrap_err()
            .0,
        "S210"
    );
    let registration = j
        .world
        .engine
        .function_registration("shell::kill-session-jobs")
        .unwrap();
    assert_eq!(registration["metadata"]["internal"], true);
    j.kill("nobody").await;
}

#[tokio::test]
async fn observers_get_live_completions_once_and_late_ones_get_the_replay() {
    let j = jobs_world(unjailed_with(json!({}))).await;
    let (mut all, observer) = sink(&j.world, "all-jobs").await;
    let _all = observe(&observer, json!({}), &all).await;
    let (mut one, _) = sink(&j.world, "one-job").await;
    let _one = observe(&observer, json!({"job_id": "chosen"}), &one).await;

    j.start(json!({"job_id": "chosen", "command": "sh", "args": ["-c", "echo hidden; exit 4"]}))
        .await;
    let event = one.next().await;
    assert_eq!(event["job_id"], "chosen");
    assert_eq!(event["argv"], json!(["sh", "-c", "echo hidden; exit 4"]));
    assert_eq!(event["status"], "failed");
    assert_eq!(event["exit_code"], 4);
    let mut keys: Vec<&str> = event
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "argv",
            "duration_ms",
            "exit_code",
            "finished_at_ms",
            "job_id",
            "started_at_ms",
            "status"
        ]
    );
    assert_eq!(
        event["duration_ms"].as_u64().unwrap(),
        event["finished_at_ms"].as_u64().unwrap() - event["started_at_ms"].as_u64().unwrap()
    );
    assert_eq!(all.next().await, event);

    // A job nobody names: only the all-jobs observer hears of it.
    j.start(json!({"job_id": "other", "command": "true"})).await;
    assert_eq!(all.next().await["job_id"], "other");
    one.silent().await;

    // Late observers of a finished job get it once; all-jobs ones never replay.
    let (mut late, _) = sink(&j.world, "late").await;
    let _late = observe(&observer, json!({"job_id": "other"}), &late).await;
    let replayed = late.next().await;
    assert_eq!(
        (replayed["job_id"].as_str(), replayed["status"].as_str()),
        (Some("other"), Some("finished"))
    );
    let (mut late_all, _) = sink(&j.world, "late-all").await;
    let _late_all = observe(&observer, json!({}), &late_all).await;
    late.silent().await;
    late_all.silent().await;
    all.silent().await;

    // Args are checked.
    let refused = observer.observe(
        Source::function("shell::on-job-finished").args(json!({"job": "typo"})),
        late.id.as_str(),
    );
    let answer = tokio::time::timeout(WAIT, refused.ready())
        .await
        .expect("answered");
    assert!(answer.is_err(), "an unknown arg was accepted");
}

#[tokio::test]
async fn a_hundred_concurrent_jobs_give_a_hundred_completions() {
    let j = jobs_world(unjailed_with(json!({"max_concurrent_jobs": 128}))).await;
    let (mut all, observer) = sink(&j.world, "hundred").await;
    let _all = observe(&observer, json!({}), &all).await;
    let starts = (0..100).map(|i| {
        let world = &j.world;
        async move {
            world
                .call(
                    "shell::exec_bg",
                    json!({"job_id": format!("many-{i}"), "command": "sh", "args": ["-c", "sleep 0.2"]}),
                )
                .await
        }
    });
    for started in futures_util::future::join_all(starts).await {
        started.expect("every start succeeds");
    }
    let mut seen: HashMap<String, usize> = HashMap::new();
    while seen.len() < 100 {
        let event = all.next().await;
        *seen
            .entry(event["job_id"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    all.silent().await;
    assert!(seen.values().all(|n| *n == 1), "duplicates: {seen:?}");
    assert!((0..100).all(|i| seen.contains_key(&format!("many-{i}"))));
}

#[tokio::test]
async fn sandbox_jobs_are_forwarded_and_only_marked_killed() {
    let j = jobs_world(unjailed_with(json!({}))).await;
    let fake = caller(&j.world.engine);
    fake.register_function(
        "sandbox::exec",
        RegisterFunction::new_async(move |input: Value| async move {
            if input["cmd"] == "slow" {
                tokio::time::sleep(Duration::from_millis(1500)).await;
            }
            if input["cmd"] == "boom" {
                return Err(iii_sdk::Error::Remote {
                    code: "S300".into(),
                    message: "no kvm".into(),
                    stacktrace: None,
                });
            }
            Ok(json!({"stdout": "vm\n", "stderr": "", "exit_code": 0, "duration_ms": 4, "timed_out": false, "success": true}))
        }),
    );
    assert!(
        j.world
            .engine
            .wait_for_function("sandbox::exec", BOOT)
            .await
    );
    let target = json!({"kind": "sandbox", "sandbox_id": "7f0c1b0e-2a40-4c53-9f0e-1d2b3c4d5e6f"});
    j.start(json!({"job_id": "vm-ok", "command": "uname", "target": target}))
        .await;
    let job = j.finished("vm-ok").await;
    assert_eq!(
        (job["status"].as_str(), job["stdout"].as_str()),
        (Some("finished"), Some("vm\n"))
    );
    assert_eq!(
        j.start_err(json!({"job_id": "vm-ok", "command": "uname", "target": target}))
            .await
            .0,
        "S213"
    );
    j.start(json!({"job_id": "vm-boom", "command": "boom", "target": target}))
        .await;
    let job = j.finished("vm-boom").await;
    assert_eq!(job["status"], "failed");
    assert!(job["stderr"].as_str().unwrap().contains("S300"), "{job}");
    j.start(json!({"job_id": "vm-slow", "command": "slow", "target": target}))
        .await;
    let killed = j.kill("vm-slow").await;
    assert_eq!(killed["killed"], true);
    assert_eq!(killed["status"], "killed");
    assert!(
        killed["reason"].as_str().unwrap().contains("timeout_ms"),
        "{killed}"
    );
    let late = async {
        loop {
            let job = j.status("vm-slow").await;
            if job["stdout"] == "vm\n" {
                return job;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let job = tokio::time::timeout(WAIT, late)
        .await
        .expect("late output captured");
    assert_eq!(
        job["status"], "killed",
        "a late end never downgrades a kill"
    );
}

#[tokio::test]
async fn an_executor_without_jobs_leaves_with_its_broker() {
    let mut j = jobs_world(unjailed_with(json!({}))).await;
    assert_eq!(
        j.world.exec(json!({"command": "true"})).await["exit_code"],
        0
    );
    let executor = j.executor_pid();
    j.world.ide.kill9();
    assert!(
        eventually(WAIT, || !alive(executor)).await,
        "an executor with nothing to keep lingered"
    );
    assert!(
        std::fs::read_dir(state_dir(&j.state))
            .unwrap()
            .next()
            .is_none(),
        "the rendezvous socket was left behind"
    );
}

#[tokio::test]
async fn jobs_survive_a_broker_killed_with_sigkill() {
    let mut j = jobs_world(unjailed_with(json!({}))).await;
    let (mut one, observer) = sink(&j.world, "restart-one").await;
    let _one = observe(&observer, json!({"job_id": "ends-while-away"}), &one).await;
    let (mut all, _) = sink(&j.world, "restart-all").await;
    let _all = observe(&observer, json!({}), &all).await;
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("go");
    j.start(json!({
        "job_id": "ticker",
        "command": "sh",
        "args": ["-c", "i=0; while [ $i -lt 3000 ]; do echo tick $i; i=$((i+1)); sleep 0.01; done"]
    }))
    .await;
    j.start(json!({
        "job_id": "ends-while-away",
        "command": "sh",
        "args": ["-c", format!("while [ ! -e {0} ]; do sleep 0.02; done; echo away", gate.display())]
    }))
    .await;
    j.first_line("ticker").await;
    let executor = j.executor_pid();
    let before = j.status("ticker").await["stdout"].as_str().unwrap().len();

    j.world.ide.kill9();
    std::fs::write(&gate, b"").unwrap();
    assert!(
        eventually(WAIT, || !j
            .world
            .engine
            .functions()
            .contains(&"shell::exec_bg".to_owned()))
        .await
    );
    assert!(alive(executor), "the executor died with the broker");

    let env = vec![("III_CONFIG_NAME".to_owned(), String::new())];
    j.world.ide = Ide::spawn(
        &j.world.engine.url(),
        IdeOptions {
            args: state_args(&j.state),
            env,
            ..IdeOptions::default()
        },
    );
    assert!(
        j.world.ide.wait_for_log("ide is serving", BOOT).await,
        "the broker did not come back; logs:\n{}",
        j.world.ide.logs()
    );
    assert!(
        j.world.ide.logs().contains("adopted the executor"),
        "{}",
        j.world.ide.logs()
    );
    assert!(
        children(j.world.ide.pid()).is_empty(),
        "a second executor was started"
    );

    // The completion that happened while no broker was connected arrives,
    // once per observer.
    let event = one.next().await;
    assert_eq!(
        (event["job_id"].as_str(), event["status"].as_str()),
        (Some("ends-while-away"), Some("finished"))
    );
    assert_eq!(all.next().await["job_id"], "ends-while-away");
    let away = j.status("ends-while-away").await;
    assert_eq!(
        (away["status"].as_str(), away["stdout"].as_str()),
        (Some("finished"), Some("away\n"))
    );

    // The running job kept running and its output kept being captured.
    let ticker = j.status("ticker").await;
    assert_eq!(ticker["status"], "running");
    let grown = async {
        loop {
            let now = j.status("ticker").await["stdout"].as_str().unwrap().len();
            if now > before + 100 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(WAIT, grown)
        .await
        .expect("output kept flowing");
    assert_eq!(j.kill("ticker").await["killed"], true);
    let event = all.next().await;
    assert_eq!(
        (event["job_id"].as_str(), event["status"].as_str()),
        (Some("ticker"), Some("killed"))
    );
    one.silent().await;
    all.silent().await;
    let list = j.call("shell::list", json!({})).await.unwrap();
    assert_eq!(list["count"], 2);

    // A graceful stop takes the executor (and every job) with it.
    j.start(json!({"job_id": "left-running", "command": "sleep", "args": ["60"]}))
        .await;
    assert!(terminate(j.world.ide.pid()));
    assert!(
        j.world.ide.wait_exit(WAIT).await.is_some(),
        "the broker did not stop"
    );
    assert!(
        eventually(WAIT, || !alive(executor)).await,
        "the executor lingered"
    );
}
