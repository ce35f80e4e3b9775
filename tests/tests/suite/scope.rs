//! The harness's session scope (`fs_scope`) end to end: the `workspace`
//! ceiling (`S220` inside the jail, `S215` outside it), relative anchoring,
//! the `configured_roots` boundary, the codes of a bad scope root on each
//! surface, silently dropped grants, and a symlink inside the session that
//! tries to lead out of it.

use crate::support::*;
use serde_json::{json, Value};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `tmp/jail/{ws/sub, shared/lib.txt, other/note.txt, private/}` plus a
/// file outside the jail; the jail is the only root and `private` is
/// denylisted.
struct Site {
    _tmp: tempfile::TempDir,
    jail: PathBuf,
}

impl Site {
    fn new() -> Site {
        let tmp = tempfile::tempdir().unwrap();
        let jail = std::fs::canonicalize(tmp.path()).unwrap().join("jail");
        for dir in ["ws/sub", "shared", "other", "private"] {
            std::fs::create_dir_all(jail.join(dir)).unwrap();
        }
        std::fs::write(jail.join("shared/lib.txt"), "lib").unwrap();
        std::fs::write(jail.join("other/note.txt"), "note").unwrap();
        std::fs::write(jail.join("ws/file"), "f").unwrap();
        Site { _tmp: tmp, jail }
    }

    fn at(&self, rel: &str) -> String {
        self.jail.join(rel).display().to_string()
    }

    fn config(&self) -> Value {
        json!({"fs": {
            "host_roots": [self.jail],
            "allow_unjailed": false,
            "denylist_paths": [self.jail.join("private")],
        }})
    }

    fn scope(&self, boundary: &str) -> Value {
        json!({
            "root": self.at("ws"),
            "grants": [self.at("shared"), "relative/grant", self.at("missing"), "/etc", self.at("private"), 7],
            "boundary": boundary,
        })
    }
}

async fn world(site: &Site) -> World {
    let world = boot_with(site.config()).await;
    assert!(
        world
            .engine
            .wait_for_function("shell::fs::stat", BOOT)
            .await
    );
    world
}

fn with_scope(mut payload: Value, scope: &Value) -> Value {
    payload["fs_scope"] = scope.clone();
    payload
}

/// The parsed `filesystem_access_request` hint that ends a message.
fn access_request(message: &str) -> Value {
    let (_, hint) = message
        .split_once(" filesystem_access_request=")
        .unwrap_or_else(|| panic!("no access hint in {message:?}"));
    serde_json::from_str(hint).unwrap_or_else(|e| panic!("bad hint {hint:?}: {e}"))
}

#[tokio::test]
async fn a_workspace_session_reaches_its_root_and_grants_only() {
    let site = Site::new();
    let world = world(&site).await;
    let scope = site.scope("workspace");
    let call = |op: &str, payload: Value| {
        let id = format!("shell::fs::{op}");
        let payload = with_scope(payload, &scope);
        let world = &world;
        async move { world.call(&id, payload).await }
    };

    let written = call("write", json!({"path": "new.txt", "content": "hi"})).await;
    assert!(written.is_ok(), "{written:?}");
    assert_eq!(
        std::fs::read_to_string(site.jail.join("ws/new.txt")).unwrap(),
        "hi",
        "a relative path anchors at the scope root"
    );
    assert!(call("stat", json!({"path": "sub"})).await.is_ok());
    let listed = call("ls", json!({"path": site.at("shared")}))
        .await
        .unwrap();
    assert_eq!(listed["entries"][0]["name"], "lib.txt");

    for raw in [
        site.at("other/note.txt"),
        "../other/note.txt".into(),
        site.at(""),
    ] {
        let (code, message) = call("stat", json!({"path": raw})).await.unwrap_err();
        assert_eq!(code, "S220", "{raw}: {message}");
        let hint = access_request(&message);
        assert_eq!(hint["v"], 1);
        assert_eq!(hint["attempted_path"], raw.as_str());
        assert_eq!(hint["error_code"], "S220");
    }
    let (code, message) = call("stat", json!({"path": site.at("other/note.txt")}))
        .await
        .unwrap_err();
    assert_eq!(code, "S220");
    assert_eq!(access_request(&message)["requested_root"], site.at("other"));

    let (code, _) = call(
        "write",
        json!({"path": site.at("other/new.txt"), "content": "x"}),
    )
    .await
    .unwrap_err();
    assert_eq!(code, "S220");
    assert!(
        !site.jail.join("other/new.txt").exists(),
        "a refused write left a file"
    );

    let (code, message) = call("stat", json!({"path": "/etc/hostname"}))
        .await
        .unwrap_err();
    assert_eq!(
        code, "S215",
        "grants outside the jail were dropped: {message}"
    );
    assert_eq!(access_request(&message)["error_code"], "S215");
    let (code, message) = call("stat", json!({"path": site.at("private")}))
        .await
        .unwrap_err();
    assert_eq!(code, "S211", "a denylisted grant was dropped: {message}");
    assert_eq!(
        message,
        format!(
            "{}: not found or not accessible (verify with shell::fs::ls)",
            site.at("private")
        )
    );
}

#[tokio::test]
async fn a_symlink_inside_the_session_cannot_lead_out_of_it() {
    let site = Site::new();
    symlink("../other", site.jail.join("ws/to_other")).unwrap();
    symlink(site.jail.join("other"), site.jail.join("ws/abs_other")).unwrap();
    let world = world(&site).await;
    let scope = site.scope("workspace");
    for link in ["to_other", "abs_other"] {
        let read = world
            .call(
                "shell::fs::stat",
                with_scope(json!({"path": format!("{link}/note.txt")}), &scope),
            )
            .await;
        assert!(read.is_err(), "{link}: reached {read:?}");
        let write = world
            .call(
                "shell::fs::write",
                with_scope(
                    json!({"path": format!("{link}/planted"), "content": "x"}),
                    &scope,
                ),
            )
            .await;
        assert!(write.is_err(), "{link}: wrote through the link: {write:?}");
    }
    assert!(!site.jail.join("other/planted").exists());
    let unscoped = world
        .call(
            "shell::fs::stat",
            json!({"path": site.at("ws/to_other/note.txt")}),
        )
        .await;
    assert!(
        unscoped.is_ok(),
        "the control: the link works unscoped: {unscoped:?}"
    );
}

#[tokio::test]
async fn configured_roots_only_anchors_relative_paths_and_the_default_cwd() {
    let site = Site::new();
    let world = world(&site).await;
    let scope = site.scope("configured_roots");
    let stat = world
        .call(
            "shell::fs::stat",
            with_scope(json!({"path": "file"}), &scope),
        )
        .await
        .unwrap();
    assert_eq!(stat["size"], 1);
    let other = world
        .call(
            "shell::fs::stat",
            with_scope(json!({"path": site.at("other/note.txt")}), &scope),
        )
        .await;
    assert!(
        other.is_ok(),
        "the jail, not the session, is the ceiling: {other:?}"
    );
    let (code, _) = world
        .call(
            "shell::fs::stat",
            with_scope(json!({"path": "/etc/hostname"}), &scope),
        )
        .await
        .unwrap_err();
    assert_eq!(code, "S215");

    let pwd = world
        .exec(with_scope(json!({"command": "pwd"}), &scope))
        .await;
    assert_eq!(pwd["stdout"], format!("{}\n", site.at("ws")));
    let pwd = world
        .exec(with_scope(json!({"command": "pwd", "cwd": "sub"}), &scope))
        .await;
    assert_eq!(pwd["stdout"], format!("{}\n", site.at("ws/sub")));
    let pwd = world
        .exec(with_scope(
            json!({"command": "pwd", "cwd": site.at("other")}),
            &scope,
        ))
        .await;
    assert_eq!(pwd["stdout"], format!("{}\n", site.at("other")));
}

#[tokio::test]
async fn a_workspace_exec_runs_in_its_root_and_its_cwd_stays_in_the_session() {
    let site = Site::new();
    let world = world(&site).await;
    let scope = site.scope("workspace");
    let pwd = world
        .exec(with_scope(json!({"command": "pwd"}), &scope))
        .await;
    assert_eq!(pwd["stdout"], format!("{}\n", site.at("ws")));
    let pwd = world
        .exec(with_scope(
            json!({"command": "pwd", "cwd": site.at("shared")}),
            &scope,
        ))
        .await;
    assert_eq!(pwd["stdout"], format!("{}\n", site.at("shared")));
    let (code, message) = world
        .exec_err(with_scope(
            json!({"command": "pwd", "cwd": site.at("other")}),
            &scope,
        ))
        .await;
    assert_eq!(code, "S220", "{message}");
    assert_eq!(access_request(&message)["requested_root"], site.at("other"));
    let (code, _) = world
        .exec_err(with_scope(json!({"command": "pwd", "cwd": "/tmp"}), &scope))
        .await;
    assert_eq!(code, "S215");

    let started = world
        .call(
            "shell::exec_bg",
            with_scope(json!({"command": "pwd"}), &scope),
        )
        .await
        .unwrap();
    let job_id = started["job_id"].as_str().unwrap().to_owned();
    let mut job = Value::Null;
    for _ in 0..200 {
        job = world
            .call("shell::status", json!({"job_id": job_id}))
            .await
            .unwrap()["job"]
            .clone();
        if job["status"] != "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(job["stdout"], format!("{}\n", site.at("ws")), "{job}");
    let refused = world
        .call(
            "shell::exec_bg",
            with_scope(json!({"command": "pwd", "cwd": site.at("other")}), &scope),
        )
        .await
        .unwrap_err();
    assert!(
        refused.0 == "S220" || refused.1.contains("S220"),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_bad_scope_root_gets_the_code_of_its_surface() {
    let site = Site::new();
    let world = world(&site).await;
    let file = site.at("ws/file");
    let missing = site.at("nope");
    let private = site.at("private");
    let scoped = |root: &str| json!({"root": root, "boundary": "workspace"});
    let fs_code = |scope: Value| {
        let world = &world;
        async move {
            world
                .call("shell::fs::stat", json!({"path": "x", "fs_scope": scope}))
                .await
                .unwrap_err()
        }
    };
    assert_eq!(fs_code(scoped("ws")).await.0, "S210");
    assert_eq!(fs_code(scoped("")).await.0, "S210");
    assert_eq!(fs_code(scoped(&missing)).await.0, "S212");
    assert_eq!(fs_code(scoped(&file)).await.0, "S212");
    assert_eq!(fs_code(scoped("/etc")).await.0, "S215");
    assert_eq!(
        fs_code(scoped(&private)).await,
        (
            "S211".into(),
            format!("{private}: not found or not accessible (verify with shell::fs::ls)")
        )
    );
    assert_eq!(
        fs_code(json!({"root": site.at("ws")})).await.0,
        "S210",
        "boundary is required"
    );

    let exec_code = |scope: Value| {
        let world = &world;
        async move {
            world
                .exec_err(json!({"command": "true", "fs_scope": scope}))
                .await
        }
    };
    assert_eq!(exec_code(scoped("ws")).await.0, "S210");
    assert_eq!(
        exec_code(scoped(&missing)).await,
        (
            "S211".into(),
            format!("{missing}: not found or not accessible (verify with shell::fs::ls)")
        )
    );
    assert_eq!(exec_code(scoped(&file)).await.0, "S210");
    assert_eq!(exec_code(scoped(&private)).await.0, "S211");
}

#[tokio::test]
async fn a_scope_root_that_is_a_symlink_out_of_the_jail_is_an_escape() {
    let site = Site::new();
    let outside = tempfile::tempdir().unwrap();
    symlink(outside.path(), site.jail.join("ws/out")).unwrap();
    symlink(site.jail.join("private"), site.jail.join("ws/secret")).unwrap();
    let world = world(&site).await;
    let scope = |root: &Path| json!({"root": root, "boundary": "workspace"});
    let (code, _) = world
        .call(
            "shell::fs::ls",
            json!({"path": ".", "fs_scope": scope(&site.jail.join("ws/out"))}),
        )
        .await
        .unwrap_err();
    assert_eq!(code, "S215");
    let (code, _) = world
        .call(
            "shell::fs::ls",
            json!({"path": ".", "fs_scope": scope(&site.jail.join("ws/secret"))}),
        )
        .await
        .unwrap_err();
    assert_eq!(code, "S211", "a scope root aliasing a denylisted directory");
}
