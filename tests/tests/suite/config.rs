//! The configuration lifecycle: seeding, carry-over, fail-closed boots,
//! removed keys, hot reload and `shell::config-status`.

use crate::support::*;
use serde_json::{json, Value};
use std::time::Duration;

fn registers_called_with_initial_value(world: &World) -> Vec<bool> {
    world
        .engine
        .config_calls()
        .into_iter()
        .filter(|(f, d)| f == "configuration::register" && d["id"] == "ide")
        .map(|(_, d)| d.get("initial_value").is_some())
        .collect()
}

#[tokio::test]
async fn first_boot_without_seed_stores_the_built_in_default() {
    let world = boot(Boot::default()).await;
    let stored = world.engine.stored_config("ide").expect("an ide entry");
    assert_eq!(stored["max_timeout_ms"], 120000);
    assert_eq!(stored["default_timeout_ms"], 30000);
    assert_eq!(stored["fs"]["allow_unjailed"], true);
    assert_eq!(stored["fs"]["host_roots"], json!([]));
    assert_eq!(stored["env"]["inherit"], true);
    assert_eq!(registers_called_with_initial_value(&world), [true]);
    let reg = world
        .engine
        .function_registration("shell::exec")
        .expect("registered");
    assert_eq!(
        reg["request_format"]["properties"]["command"]["type"],
        "string"
    );
    assert!(reg["request_format"]["properties"]
        .get("fs_scope")
        .is_none());
}

#[tokio::test]
async fn first_boot_with_a_seed_file_stores_the_seed() {
    let world = boot(Boot {
        seed_yaml: Some("max_timeout_ms: 4321\nfs:\n  allow_unjailed: true\n".into()),
        ..Boot::default()
    })
    .await;
    let stored = world.engine.stored_config("ide").unwrap();
    assert_eq!(stored["max_timeout_ms"], 4321);
}

#[tokio::test]
async fn the_stored_value_wins_and_is_never_clobbered_by_the_seed() {
    let world = boot(Boot {
        stored: Some(json!({"max_timeout_ms": 7000, "fs": {"allow_unjailed": true}})),
        seed_yaml: Some("max_timeout_ms: 4321\nfs:\n  allow_unjailed: true\n".into()),
        ..Boot::default()
    })
    .await;
    assert_eq!(
        world.engine.stored_config("ide").unwrap()["max_timeout_ms"],
        7000
    );
    assert_eq!(registers_called_with_initial_value(&world), [false]);
    // The live policy is the stored one: a 60 s request is clamped to 7 s.
    let r = world
        .exec(json!({"command": "true", "timeout_ms": 60000}))
        .await;
    assert_eq!(r["exit_code"], 0);
}

#[tokio::test]
async fn a_stored_shell_value_is_carried_over_once() {
    let legacy = json!({"max_timeout_ms": 2468, "fs": {"allow_unjailed": true}});
    let world = boot(Boot {
        legacy: Some(legacy.clone()),
        ..Boot::default()
    })
    .await;
    assert_eq!(
        world.engine.stored_config("ide").unwrap()["max_timeout_ms"],
        2468
    );
    assert_eq!(
        world.engine.stored_config("shell").unwrap(),
        legacy,
        "the legacy entry is left alone"
    );
}

#[tokio::test]
async fn a_shell_value_is_not_carried_over_when_ide_has_one() {
    let world = boot(Boot {
        stored: Some(json!({"max_timeout_ms": 1111, "fs": {"allow_unjailed": true}})),
        legacy: Some(json!({"max_timeout_ms": 2468, "fs": {"allow_unjailed": true}})),
        ..Boot::default()
    })
    .await;
    assert_eq!(
        world.engine.stored_config("ide").unwrap()["max_timeout_ms"],
        1111
    );
}

async fn refuses_to_boot(boot_cfg: Boot, expect_in_log: &[&str]) {
    let mut world = start(boot_cfg).await;
    let status = world.ide.wait_exit(BOOT).await;
    let logs = world.ide.logs();
    assert!(
        status.is_some_and(|s| !s.success()),
        "the worker must exit non-zero; logs:\n{logs}"
    );
    assert!(
        world
            .engine
            .functions()
            .iter()
            .all(|f| !f.starts_with("shell::")),
        "no function exposed"
    );
    for needle in expect_in_log {
        assert!(logs.contains(needle), "log lacks {needle:?}:\n{logs}");
    }
}

#[tokio::test]
async fn every_removed_key_fails_boot_with_its_hint() {
    let cases: &[(Value, &[&str])] = &[
        (
            json!({"inherit_env": true}),
            &["inherit_env", "env.inherit"],
        ),
        (
            json!({"allowed_env": ["PATH"]}),
            &["allowed_env", "env.allow"],
        ),
        (
            json!({"fs": {"host_root": "/srv"}}),
            &["fs.host_root", "fs.host_roots"],
        ),
        (json!({"env": {"inherit_env": true}}), &["inherit_env"]),
        (json!({"env": {"allowed_env": ["PATH"]}}), &["allowed_env"]),
        (
            json!({"code": {"base_path": "/srv"}}),
            &["code.base_path", "code.base_paths"],
        ),
        (
            json!({"code": {"base_paths": ["/srv"]}}),
            &["code.base_paths"],
        ),
        (
            json!({"migrated_from_coder": true}),
            &["migrated_from_coder"],
        ),
        (json!({"allowlist": []}), &["allowlist", "0.8.0"]),
    ];
    for (extra, hints) in cases {
        let mut stored = json!({"fs": {"allow_unjailed": true}});
        merge(&mut stored, extra);
        refuses_to_boot(
            Boot {
                stored: Some(stored),
                ..Boot::default()
            },
            hints,
        )
        .await;
    }
}

fn merge(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

#[tokio::test]
async fn an_env_block_with_an_unknown_key_fails_boot() {
    refuses_to_boot(
        Boot {
            stored: Some(json!({"fs": {"allow_unjailed": true}, "env": {"inherrit": true}})),
            ..Boot::default()
        },
        &["inherrit"],
    )
    .await;
}

#[tokio::test]
async fn a_seed_file_with_a_removed_key_aborts_boot() {
    refuses_to_boot(
        Boot {
            seed_yaml: Some("allowlist: []\nfs:\n  allow_unjailed: true\n".into()),
            ..Boot::default()
        },
        &["allowlist"],
    )
    .await;
}

#[tokio::test]
async fn an_unparseable_seed_file_aborts_boot() {
    refuses_to_boot(
        Boot {
            seed_yaml: Some("max_timeout_ms: [unclosed\n".into()),
            ..Boot::default()
        },
        &["--config"],
    )
    .await;
}

#[tokio::test]
async fn a_foreign_seed_file_is_ignored() {
    let world = boot(Boot {
        seed_yaml: Some("workers:\n  - name: other\n".into()),
        ..Boot::default()
    })
    .await;
    assert_eq!(
        world.engine.stored_config("ide").unwrap()["max_timeout_ms"],
        120000
    );
}

#[tokio::test]
async fn empty_roots_without_the_opt_in_fail_closed() {
    refuses_to_boot(
        Boot {
            stored: Some(json!({"fs": {"host_roots": []}})),
            ..Boot::default()
        },
        &["fs.host_roots", "allow_unjailed"],
    )
    .await;
}

#[tokio::test]
async fn a_nulled_stored_value_fails_closed() {
    refuses_to_boot(
        Boot {
            stored: Some(Value::Null),
            ..Boot::default()
        },
        &["refusing to start"],
    )
    .await;
}

#[tokio::test]
async fn a_missing_jail_root_fails_closed() {
    refuses_to_boot(
        Boot {
            stored: Some(json!({"fs": {"host_roots": ["/nonexistent/ide-root"]}})),
            ..Boot::default()
        },
        &["host_roots"],
    )
    .await;
}

async fn status(world: &World) -> Value {
    world
        .call("shell::config-status", json!({}))
        .await
        .expect("config-status")
}

#[tokio::test]
async fn hot_reload_applies_good_values_and_keeps_the_last_good_on_bad_ones() {
    let world = boot_with(unjailed()).await;
    let s = status(&world).await;
    assert_eq!(
        (&s["last_outcome"], &s["last_error"], &s["rejected_reloads"]),
        (&json!("applied"), &Value::Null, &json!(0))
    );
    assert!(s["confinement"].is_object(), "{s}");
    assert_eq!(
        world
            .exec(json!({"command": "echo", "args": ["forbidden-word"]}))
            .await["exit_code"],
        0
    );

    // A good reload takes effect.
    world
        .engine
        .external_set(
            "ide",
            json!({"fs": {"allow_unjailed": true}, "denylist_patterns": ["forbidden-word"]}),
        )
        .await;
    let denied = || async {
        world
            .call(
                "shell::exec",
                json!({"command": "echo", "args": ["forbidden-word"]}),
            )
            .await
            .is_err()
    };
    let mut applied = false;
    for _ in 0..100 {
        if denied().await {
            applied = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        applied,
        "the reload was not applied; logs:\n{}",
        world.ide.logs()
    );
    let (code, message) = world
        .exec_err(json!({"command": "echo", "args": ["forbidden-word"]}))
        .await;
    assert_eq!(message, "command matches denylist: forbidden-word");
    assert_ne!(code, "S210");

    // A bad reload is rejected, reported, and the last good policy stays.
    world
        .engine
        .external_set(
            "ide",
            json!({"fs": {"allow_unjailed": true}, "allowlist": []}),
        )
        .await;
    let mut s = status(&world).await;
    for _ in 0..100 {
        if s["last_outcome"] == "rejected" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        s = status(&world).await;
    }
    assert_eq!(s["last_outcome"], "rejected");
    assert_eq!(s["rejected_reloads"], 1);
    assert!(
        s["last_error"].as_str().unwrap().contains("allowlist"),
        "{s}"
    );
    assert!(world
        .call(
            "shell::exec",
            json!({"command": "echo", "args": ["forbidden-word"]})
        )
        .await
        .is_err());

    // An unsafe one (unjailed without the opt-in) too; nulled as well.
    world
        .engine
        .external_set("ide", json!({"fs": {"host_roots": []}}))
        .await;
    world.engine.external_set("ide", Value::Null).await;
    let s = status_when(&world, |s| s["rejected_reloads"] == 3).await;
    assert_eq!(s["rejected_reloads"], 3, "{s}");

    // A later good reload clears the error but not the count.
    world.engine.external_set("ide", unjailed()).await;
    let s = status_when(&world, |s| s["last_outcome"] == "applied").await;
    assert_eq!(
        (&s["last_outcome"], &s["last_error"], &s["rejected_reloads"]),
        (&json!("applied"), &Value::Null, &json!(3))
    );
    assert_eq!(
        world
            .exec(json!({"command": "echo", "args": ["forbidden-word"]}))
            .await["exit_code"],
        0
    );
}

#[tokio::test]
async fn a_reload_that_widens_the_jail_is_logged_as_a_privilege_change() {
    let root = tempfile::tempdir().unwrap();
    let world = boot_with(jailed(root.path())).await;
    world.engine.external_set("ide", unjailed()).await;
    assert!(
        world
            .ide
            .wait_for_log("privilege change", Duration::from_secs(10))
            .await,
        "{}",
        world.ide.logs()
    );
}

#[tokio::test]
async fn config_status_is_internal() {
    let world = boot(Boot::default()).await;
    assert!(
        world
            .engine
            .wait_for_function("shell::config-status", BOOT)
            .await
    );
    let reg = world
        .engine
        .function_registration("shell::config-status")
        .unwrap();
    assert_eq!(reg["metadata"]["internal"], true);
}

#[tokio::test]
async fn an_unreachable_engine_logs_one_error_and_the_worker_keeps_trying() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dir = tempfile::tempdir().unwrap();
    let mut ide = ide_tests::Ide::spawn(
        &format!("ws://127.0.0.1:{port}"),
        ide_tests::IdeOptions {
            config_path: Some(dir.path().join("none.yaml")),
            cwd: Some(dir.path().to_owned()),
            ..Default::default()
        },
    );
    let needle = format!("engine unreachable at 127.0.0.1:{port}");
    assert!(
        ide.wait_for_log(&needle, Duration::from_secs(15)).await,
        "{}",
        ide.logs()
    );
    assert!(ide.logs().contains("III_URL"));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(ide.logs().matches(&needle).count(), 1, "{}", ide.logs());
    assert!(
        ide.wait_exit(Duration::from_millis(100)).await.is_none(),
        "the worker must not exit"
    );
}

/// Polls `shell::config-status` (bounded: 5 s) until `done` holds; returns
/// the last report.
async fn status_when(world: &World, done: impl Fn(&Value) -> bool) -> Value {
    let mut s = status(world).await;
    for _ in 0..100 {
        if done(&s) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        s = status(world).await;
    }
    s
}
