//! The system under test: the test engine, the release `ide` binary next to
//! this one, and an `iii-sdk` caller.
#![forbid(unsafe_code)]

use ide_tests::{client, Ide, IdeOptions, TestEngine};
use iii_sdk::IIIClient;
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

/// Engine + worker + caller.
pub struct World {
    pub engine: TestEngine,
    pub ide: Ide,
    pub caller: IIIClient,
    _dir: tempfile::TempDir,
}

/// A binary that sits next to this benchmark (the same build profile).
pub fn sibling(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join(name)))
        .filter(|p| p.exists())
        .unwrap_or_else(|| {
            panic!(
                "{name} must be built next to ide-bench (cargo build --release --workspace --bins)"
            )
        })
}

/// Boots the worker with `config` stored and waits for `shell::exec`.
pub async fn boot(config: Value) -> World {
    let engine = TestEngine::start().await;
    engine.preload_config("ide", config);
    let dir = tempfile::tempdir().expect("tempdir");
    let ide = Ide::spawn(
        &engine.url(),
        IdeOptions {
            config_path: Some(dir.path().join("none.yaml")),
            // The baseline workers run with the SDK's OpenTelemetry export
            // off; so does the worker under test, so the figures compare
            // like with like (README.md reports what the export adds).
            env: vec![
                ("RUST_LOG".into(), "warn".into()),
                ("OTEL_ENABLED".into(), "false".into()),
            ],
            cwd: Some(dir.path().to_owned()),
            program: Some(sibling("ide")),
            ..IdeOptions::default()
        },
    );
    assert!(
        engine
            .wait_for_function("shell::exec", Duration::from_secs(60))
            .await,
        "ide did not boot:\n{}",
        ide.logs()
    );
    let caller = client(&engine.url(), "bench-caller");
    World {
        engine,
        ide,
        caller,
        _dir: dir,
    }
}
