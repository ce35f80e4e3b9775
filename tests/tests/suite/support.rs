//! Shared set-up for the behaviour tests: an engine, the real worker, a
//! caller, and helpers that read the spec's error envelope.

use ide_tests::{call, client, Ide, IdeOptions, TestEngine};
use iii_sdk::IIIClient;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// How long a worker gets to boot and register its functions.
pub const BOOT: Duration = Duration::from_secs(30);

/// A running engine + worker + caller, torn down on drop.
pub struct World {
    pub engine: TestEngine,
    pub ide: Ide,
    pub client: IIIClient,
    /// Holds the seed file and the worker's cwd for the life of the world.
    _dir: tempfile::TempDir,
}

/// How to boot a world.
#[derive(Default)]
pub struct Boot {
    /// Stored `ide` value the engine already holds (as if from disk).
    pub stored: Option<Value>,
    /// Stored `shell` value (the legacy entry).
    pub legacy: Option<Value>,
    /// Text of the `--config` seed file; absent: a path that does not exist.
    pub seed_yaml: Option<String>,
    /// Extra environment for the worker.
    pub env: Vec<(String, String)>,
    /// Extra arguments for the worker.
    pub args: Vec<String>,
}

static CLIENTS: AtomicUsize = AtomicUsize::new(0);

/// A fresh caller on `engine`.
pub fn caller(engine: &TestEngine) -> IIIClient {
    let n = CLIENTS.fetch_add(1, Ordering::Relaxed);
    client(
        &engine.url(),
        &format!("test-caller-{}-{n}", std::process::id()),
    )
}

/// Starts an engine and the worker, without waiting for it to serve.
pub async fn start(boot: Boot) -> World {
    let engine = TestEngine::start().await;
    if let Some(v) = boot.stored {
        engine.preload_config("ide", v);
    }
    if let Some(v) = boot.legacy {
        engine.preload_config("shell", v);
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let config_path = dir.path().join("seed.yaml");
    if let Some(text) = &boot.seed_yaml {
        std::fs::write(&config_path, text).expect("write seed");
    }
    let mut env = vec![("III_CONFIG_NAME".to_owned(), String::new())];
    env.extend(boot.env);
    let ide = Ide::spawn(
        &engine.url(),
        IdeOptions {
            config_path: Some(config_path),
            args: boot.args,
            env,
            cwd: Some(dir.path().to_owned()),
            ..IdeOptions::default()
        },
    );
    let client = caller(&engine);
    World {
        engine,
        ide,
        client,
        _dir: dir,
    }
}

/// Starts a world and waits until `shell::exec` is registered.
pub async fn boot(boot: Boot) -> World {
    let world = start(boot).await;
    for id in ["shell::exec", "shell::config-status"] {
        assert!(
            world.engine.wait_for_function(id, BOOT).await,
            "the worker did not register {id}; logs:\n{}",
            world.ide.logs()
        );
    }
    world
}

/// Boots with a stored configuration value.
pub async fn boot_with(stored: Value) -> World {
    boot(Boot {
        stored: Some(stored),
        ..Boot::default()
    })
    .await
}

/// A configuration jailed to `root` (code defaults for everything else).
pub fn jailed(root: &Path) -> Value {
    json!({ "fs": { "host_roots": [root], "allow_unjailed": false } })
}

/// An unjailed configuration (code defaults for everything else).
pub fn unjailed() -> Value {
    json!({ "fs": { "allow_unjailed": true } })
}

impl World {
    /// Calls a function and returns the result or the error body.
    pub async fn call(&self, id: &str, payload: Value) -> Result<Value, (String, String)> {
        call(&self.client, id, payload).await.map_err(|e| match e {
            iii_sdk::Error::Remote { code, message, .. } => (code, message),
            other => ("<sdk>".to_owned(), other.to_string()),
        })
    }

    /// `shell::exec` that must succeed.
    pub async fn exec(&self, payload: Value) -> Value {
        self.call("shell::exec", payload.clone())
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "shell::exec {} failed: {e:?}\nlogs:\n{}",
                    brief(&payload),
                    self.ide.logs()
                )
            })
    }

    /// `shell::exec` that must fail; returns `(code, message)`.
    pub async fn exec_err(&self, payload: Value) -> (String, String) {
        match self.call("shell::exec", payload.clone()).await {
            Ok(v) => panic!(
                "shell::exec {} should have failed, got {}",
                brief(&payload),
                brief(&v)
            ),
            Err(e) => e,
        }
    }
}

/// Polls `check` every 20 ms until it holds or `within` passes.
pub async fn eventually(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if check() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// True while a process with this pid exists (and is not a zombie).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

/// Direct children of `pid`.
pub fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
                out.extend(
                    list.split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                );
            }
        }
    }
    out
}

/// A value cut short for assertion messages.
pub fn brief(v: &Value) -> String {
    let mut s = v.to_string();
    if s.len() > 300 {
        let mut cut = 300;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}
