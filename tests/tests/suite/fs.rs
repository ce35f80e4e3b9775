//! `shell::fs::*` end to end: every operation, the jail and its attacks,
//! byte-identical redaction, streamed reads and writes, and a symlink-swap
//! race — each run against both executor resolver backends (`openat2` and
//! the userspace walk the executor is forced onto with
//! `IDE_EXECUTOR_FORCE_FALLBACK=1`).

use crate::support::*;
use iii_sdk::channels::{ChannelReader, StreamChannelRef};
use serde_json::{json, Value};
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The executor's resolver backends, by the name its start-up log uses.
const BACKENDS: [&str; 2] = ["Openat2", "Fallback"];

/// Boots a world whose executor uses `backend`, and waits for the fs surface.
async fn fs_world(backend: &str, config: Value) -> World {
    let env = match backend {
        "Fallback" => vec![("IDE_EXECUTOR_FORCE_FALLBACK".to_owned(), "1".to_owned())],
        _ => vec![],
    };
    let world = boot(Boot {
        stored: Some(config),
        env,
        ..Boot::default()
    })
    .await;
    for id in ["shell::fs::ls", "shell::fs::read", "shell::fs::write"] {
        assert!(
            world.engine.wait_for_function(id, BOOT).await,
            "{id} not registered"
        );
    }
    // The executor's start-up line names its resolver (possibly coloured).
    assert!(world.ide.wait_for_log("resolver", BOOT).await);
    let logs = world.ide.logs();
    let line = logs
        .lines()
        .find(|l| l.contains("resolver"))
        .unwrap_or_default();
    assert!(
        line.trim_end().ends_with(backend),
        "the executor does not use the {backend} resolver: {line}"
    );
    world
}

/// `tmp/{outside/secret, jail/}` with the jail as the only root.
struct Tree {
    _tmp: tempfile::TempDir,
    jail: PathBuf,
    outside: PathBuf,
}

fn tree() -> Tree {
    let tmp = tempfile::tempdir().unwrap();
    let jail = tmp.path().join("jail");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&jail).unwrap();
    std::fs::create_dir_all(outside.join("sub")).unwrap();
    std::fs::write(outside.join("secret"), b"SECRET").unwrap();
    Tree {
        _tmp: tmp,
        jail: std::fs::canonicalize(jail).unwrap(),
        outside: std::fs::canonicalize(outside).unwrap(),
    }
}

impl Tree {
    fn p(&self, rel: &str) -> String {
        format!("{}/{rel}", self.jail.display())
    }

    fn outside_untouched(&self) {
        assert_eq!(
            std::fs::read(self.outside.join("secret")).unwrap(),
            b"SECRET"
        );
        let mut names: Vec<_> = std::fs::read_dir(&self.outside)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["secret", "sub"]);
    }
}

fn mode_of(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

impl World {
    async fn fs(&self, op: &str, payload: Value) -> Value {
        let id = format!("shell::fs::{op}");
        match self.call(&id, payload.clone()).await {
            Ok(v) => v,
            Err(e) => panic!(
                "{id} {} failed: {e:?}\nlogs:\n{}",
                brief(&payload),
                self.ide.logs()
            ),
        }
    }

    async fn fs_err(&self, op: &str, payload: Value) -> (String, String) {
        let id = format!("shell::fs::{op}");
        match self.call(&id, payload.clone()).await {
            Ok(v) => panic!(
                "{id} {} should have failed, got {}",
                brief(&payload),
                brief(&v)
            ),
            Err(e) => e,
        }
    }

    /// Reads a file through `shell::fs::read` and its channel: the
    /// response, the bytes, and any text frame the stream carried.
    async fn read_bytes(&self, path: &str) -> (Value, Vec<u8>, Vec<String>) {
        let response = self.fs("read", json!({ "path": path })).await;
        let reference: StreamChannelRef =
            serde_json::from_value(response["content"].clone()).unwrap();
        let reader = ChannelReader::new(&self.engine.url(), &reference);
        let texts = Arc::new(Mutex::new(Vec::new()));
        let sink = texts.clone();
        reader
            .on_message(move |t| sink.lock().unwrap().push(t))
            .await;
        let bytes = tokio::time::timeout(Duration::from_secs(60), reader.read_all())
            .await
            .expect("the read stream did not end")
            .unwrap();
        let texts = texts.lock().unwrap().clone();
        (response, bytes, texts)
    }

    /// Streams `bytes` into a fresh channel and returns its reader reference.
    async fn stream_in(&self, bytes: Vec<u8>) -> Value {
        let channel = iii_sdk::helpers::create_channel(&self.client, None)
            .await
            .unwrap();
        let writer = channel.writer;
        // The worker may stop reading early (a cap): then the writes fail.
        tokio::spawn(async move {
            if writer.write(&[]).await.is_err() {
                return;
            }
            for piece in bytes.chunks(100_000) {
                if writer.write(piece).await.is_err() {
                    return;
                }
            }
            let _ = writer.close().await;
        });
        serde_json::to_value(channel.reader_ref).unwrap()
    }
}

#[tokio::test]
async fn every_operation_works_on_both_backends() {
    for backend in BACKENDS {
        let t = tree();
        let w = fs_world(backend, jailed(&t.jail)).await;
        let r = w
            .fs(
                "mkdir",
                json!({"path": t.p("a/b"), "parents": true, "mode": "0700"}),
            )
            .await;
        assert_eq!(
            r,
            json!({"created": true, "path": t.p("a/b"), "already_existed": false})
        );
        assert_eq!(mode_of(&t.jail.join("a/b")), 0o700);
        let r = w.fs("mkdir", json!({"path": "a/b", "parents": true})).await;
        assert_eq!(
            r,
            json!({"created": false, "path": "a/b", "already_existed": true})
        );
        assert_eq!(w.fs_err("mkdir", json!({"path": "a/b"})).await.0, "S213");

        let r = w
            .fs(
                "write",
                json!({"path": "a/b/f.txt", "content": "hello needle\nbye\n", "mode": "0640"}),
            )
            .await;
        assert_eq!(
            r,
            json!({"bytes_written": 17, "path": "a/b/f.txt", "files": []})
        );
        assert_eq!(mode_of(&t.jail.join("a/b/f.txt")), 0o640);
        let r = w
            .fs("write", json!({"files": [{"path": "x/1", "content": "one", "parents": true}, {"path": "x/2", "content": "two!"}]}))
            .await;
        assert_eq!(
            r,
            json!({"bytes_written": 7, "path": "", "files": [{"path": "x/1", "bytes_written": 3}, {"path": "x/2", "bytes_written": 4}]})
        );

        let r = w.fs("stat", json!({"path": "a/b/f.txt"})).await;
        assert_eq!(r["name"], "f.txt");
        assert_eq!(r["size"], 17);
        assert_eq!(r["mode"], "0640");
        assert_eq!(
            (r["is_dir"].clone(), r["is_symlink"].clone()),
            (json!(false), json!(false))
        );
        assert!(r["mtime"].as_i64().unwrap() > 1_600_000_000);

        let r = w.fs("ls", json!({"path": "x"})).await;
        assert_eq!(r["total"], 2);
        assert_eq!(r["page"], 1);
        assert_eq!(r["page_size"], 500);
        assert_eq!(r["has_more"], false);
        let names: Vec<_> = r["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].clone())
            .collect();
        assert_eq!(names, [json!("1"), json!("2")]);
        assert_eq!(r["entries"][0]["mode"], "0644");

        let (meta, bytes, texts) = w.read_bytes("a/b/f.txt").await;
        assert_eq!(bytes, b"hello needle\nbye\n");
        assert!(texts.is_empty());
        assert_eq!(meta["size"], 17);
        assert_eq!(meta["mode"], "0640");
        assert_eq!(meta["content"]["direction"], "read");

        let r = w
            .fs(
                "grep",
                json!({"path": ".", "pattern": "NEEDLE", "ignore_case": true}),
            )
            .await;
        assert_eq!(
            r,
            json!({"matches": [{"path": t.p("a/b/f.txt"), "line": 1, "content": "hello needle"}], "truncated": false})
        );
        let r = w
            .fs(
                "sed",
                json!({"path": "a", "pattern": "n(ee)dle", "replacement": "p${1}r"}),
            )
            .await;
        assert_eq!(
            r,
            json!({"results": [{"path": t.p("a/b/f.txt"), "replacements": 1, "success": true}], "total_replacements": 1})
        );
        assert_eq!(
            std::fs::read_to_string(t.jail.join("a/b/f.txt")).unwrap(),
            "hello peer\nbye\n"
        );
        assert_eq!(mode_of(&t.jail.join("a/b/f.txt")), 0o640);
        let r = w.fs("sed", json!({"files": ["x/1", "x/2"], "pattern": "o", "replacement": "0", "regex": false})).await;
        assert_eq!(r["total_replacements"], 2);

        let r = w
            .fs(
                "chmod",
                json!({"path": "x", "mode": "0750", "recursive": true}),
            )
            .await;
        assert_eq!(
            r,
            json!({"entries_changed": 3, "path": "x", "recursive": true})
        );
        assert_eq!(mode_of(&t.jail.join("x/2")), 0o750);
        let r = w
            .fs(
                "chmod",
                json!({"path": "x/1", "mode": "600", "uid": 4242, "gid": 4343}),
            )
            .await;
        assert_eq!(r["entries_changed"], 1);
        let meta = std::fs::metadata(t.jail.join("x/1")).unwrap();
        assert_eq!(
            (meta.uid(), meta.gid(), meta.mode() & 0o7777),
            (4242, 4343, 0o600)
        );

        assert_eq!(
            w.fs_err("mv", json!({"src": "x/1", "dst": "x/2"})).await.0,
            "S213"
        );
        let r = w
            .fs("mv", json!({"src": "x/1", "dst": "x/2", "overwrite": true}))
            .await;
        assert_eq!(
            r,
            json!({"moved": true, "src": "x/1", "dst": "x/2", "overwrote": true})
        );
        let r = w.fs("mv", json!({"src": "x/2", "dst": "a/moved"})).await;
        assert_eq!(r["overwrote"], false);

        assert_eq!(w.fs_err("rm", json!({"path": "a"})).await.0, "S214");
        let r = w.fs("rm", json!({"path": "a", "recursive": true})).await;
        assert_eq!(
            r,
            json!({"removed": true, "path": "a", "was_present": true})
        );
        assert!(!t.jail.join("a").exists());
        assert_eq!(w.fs_err("rm", json!({"path": "a"})).await.0, "S211");
        t.outside_untouched();
    }
}

#[tokio::test]
async fn the_jail_holds_against_links_dot_dot_and_magic_links() {
    for backend in BACKENDS {
        let t = tree();
        std::fs::create_dir(t.jail.join("dir")).unwrap();
        symlink(t.outside.join("secret"), t.jail.join("file_out")).unwrap();
        symlink(&t.outside, t.jail.join("dir_out")).unwrap();
        symlink("../outside", t.jail.join("rel_out")).unwrap();
        symlink(t.outside.join("nothing-here"), t.jail.join("dangling_out")).unwrap();
        symlink("missing", t.jail.join("dangling_in")).unwrap();
        symlink("/proc/self/root", t.jail.join("proc_root")).unwrap();
        symlink("/proc/self/fd/0", t.jail.join("proc_fd")).unwrap();
        let w = fs_world(backend, jailed(&t.jail)).await;
        let escapes = [
            ("read", json!({"path": "file_out"})),
            ("read", json!({"path": "dir_out/secret"})),
            ("read", json!({"path": "rel_out/secret"})),
            ("read", json!({"path": "dir/../../outside/secret"})),
            (
                "read",
                json!({"path": format!("{}/secret", t.outside.display())}),
            ),
            ("read", json!({"path": "proc_root/etc/passwd"})),
            ("read", json!({"path": "proc_fd"})),
            ("write", json!({"path": "dangling_out", "content": "x"})),
            ("write", json!({"path": "dir_out/new", "content": "x"})),
            ("mkdir", json!({"path": "dir_out/new", "parents": true})),
            ("ls", json!({"path": "dir_out"})),
            ("stat", json!({"path": "file_out"})),
            ("rm", json!({"path": "rel_out/secret"})),
            ("chmod", json!({"path": "dir_out/secret", "mode": "0777"})),
            ("mv", json!({"src": "dir_out/secret", "dst": "stolen"})),
            ("mv", json!({"src": "dir", "dst": "dir_out/dir"})),
            ("grep", json!({"path": "dir_out", "pattern": "SECRET"})),
            (
                "sed",
                json!({"files": ["dir_out/secret"], "pattern": "S", "replacement": "x"}),
            ),
        ];
        for (op, payload) in escapes {
            let (code, message) = w.fs_err(op, payload.clone()).await;
            assert_eq!(code, "S215", "{backend} {op} {payload}: {message}");
            // The access hint names the caller's own path, normalised; the
            // text before it never names what a link resolved to.
            let text = message
                .split(" filesystem_access_request=")
                .next()
                .unwrap_or_default();
            assert!(
                !text.contains(t.outside.to_str().unwrap())
                    || payload.to_string().contains(t.outside.to_str().unwrap()),
                "{message}"
            );
            assert!(message.contains("escapes"), "{message}");
        }
        // A dangling link that stays inside reads as missing; the grep of the
        // jail never follows the links out.
        assert_eq!(
            w.fs_err("read", json!({"path": "dangling_in"})).await.0,
            "S211"
        );
        let r = w
            .fs("grep", json!({"path": ".", "pattern": "SECRET"}))
            .await;
        assert_eq!(r["matches"], json!([]));
        // rm of a link to outside removes the link only.
        w.fs("rm", json!({"path": "dir_out", "recursive": true}))
            .await;
        assert!(!t.jail.join("dir_out").exists());
        t.outside_untouched();
        // `~` is a plain name relative to the root.
        w.fs(
            "write",
            json!({"path": "~/x", "content": "t", "parents": true}),
        )
        .await;
        assert!(t.jail.join("~/x").exists());
    }
}

#[tokio::test]
async fn denied_missing_and_protected_paths_read_exactly_alike() {
    for backend in BACKENDS {
        let t = tree();
        std::fs::create_dir(t.jail.join("private")).unwrap();
        std::fs::write(t.jail.join("private/key"), b"k").unwrap();
        std::fs::write(t.jail.join(".env"), b"TOKEN=1").unwrap();
        std::fs::write(t.jail.join("denied.txt"), b"d").unwrap();
        std::fs::hard_link(t.jail.join("denied.txt"), t.jail.join("alias.txt")).unwrap();
        symlink("private/key", t.jail.join("key_link")).unwrap();
        let mut config = jailed(&t.jail);
        config["fs"]["denylist_paths"] = json!([t.p("private"), t.p("denied.txt")]);
        config["code"] = json!({"non_accessible_globs": ["**/.env"]});
        let w = fs_world(backend, config).await;
        let template =
            |raw: &str| format!("{raw}: not found or not accessible (verify with shell::fs::ls)");
        // A link into a denylisted directory is denied when followed; the
        // link itself is not denylisted, so it is only read and stat'ed here.
        let every = ["read", "stat", "rm", "chmod"];
        let cases = [
            ("missing.txt", &every[..]),
            ("private/key", &every[..]),
            ("private/../private/key", &every[..]),
            (".env", &every[..]),
            ("denied.txt", &every[..]),
            ("alias.txt", &every[..]),
            ("key_link", &every[..2]),
        ];
        for (raw, ops) in cases {
            for op in ops {
                let payload = match *op {
                    "chmod" => json!({"path": raw, "mode": "0600"}),
                    _ => json!({ "path": raw }),
                };
                let (code, message) = w.fs_err(op, payload).await;
                assert_eq!(
                    (code.as_str(), message.clone()),
                    ("S211", template(raw)),
                    "{backend} {op} {raw}"
                );
            }
        }
        // The protected file is still listed; the denylisted directory is not readable.
        let r = w.fs("ls", json!({"path": "."})).await;
        let names: Vec<_> = r["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_owned())
            .collect();
        assert!(names.contains(&".env".to_owned()), "{names:?}");
        assert_eq!(
            w.fs_err("ls", json!({"path": "private"})).await,
            ("S211".to_owned(), template("private"))
        );
        // grep over the jail skips the protected and denylisted files silently.
        let r = w.fs("grep", json!({"path": ".", "pattern": "."})).await;
        let files: Vec<_> = r["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["path"].as_str().unwrap().to_owned())
            .collect();
        assert!(
            files.iter().all(|f| !f.ends_with(".env")
                && !f.contains("private")
                && !f.ends_with("denied.txt")),
            "{files:?}"
        );
        assert!(std::fs::read(t.jail.join("alias.txt")).is_ok());
    }
}

#[tokio::test]
async fn unjailed_mode_holds_the_denylist_against_aliases() {
    let t = tree();
    std::fs::hard_link(t.outside.join("secret"), t.jail.join("hard")).unwrap();
    symlink(t.outside.join("secret"), t.jail.join("soft")).unwrap();
    let secret = t.outside.join("secret").display().to_string();
    let config = json!({"fs": {"allow_unjailed": true, "denylist_paths": [secret]}});
    for backend in BACKENDS {
        let w = fs_world(backend, config.clone()).await;
        for raw in [
            secret.clone(),
            format!("/proc/self/root{secret}"),
            format!("{}/../outside/secret", t.jail.display()),
            t.p("hard"),
            t.p("soft"),
        ] {
            let (code, message) = w.fs_err("read", json!({ "path": raw })).await;
            assert_eq!(code, "S211", "{backend} {raw}: {message}");
            assert_eq!(
                message,
                format!("{raw}: not found or not accessible (verify with shell::fs::ls)")
            );
        }
        // Permission denied (sysfs refuses new files even to root) reads the same.
        let (code, message) = w
            .fs_err(
                "write",
                json!({"path": "/sys/kernel/ide-test", "content": "x"}),
            )
            .await;
        assert_eq!(
            (code.as_str(), message.as_str()),
            (
                "S211",
                "/sys/kernel/ide-test: not found or not accessible (verify with shell::fs::ls)"
            )
        );
        assert_eq!(w.fs_err("ls", json!({"path": "relative"})).await.0, "S210");
        let r = w.fs("stat", json!({"path": t.p("")})).await;
        assert_eq!(r["is_dir"], true);
        t.outside_untouched();
    }
}

#[tokio::test]
async fn absolute_symlinks_inside_the_root_work_and_outside_ones_escape() {
    for backend in BACKENDS {
        let t = tree();
        std::fs::create_dir_all(t.jail.join("releases/v2")).unwrap();
        std::fs::write(t.jail.join("releases/v2/app.txt"), b"v2").unwrap();
        symlink(t.jail.join("releases/v2"), t.jail.join("current")).unwrap();
        symlink(t.jail.join("releases/v2/app.txt"), t.jail.join("app")).unwrap();
        symlink(
            format!("{}/../outside", t.jail.display()),
            t.jail.join("sneaky"),
        )
        .unwrap();
        symlink(format!("{}2", t.jail.display()), t.jail.join("sibling")).unwrap();
        let w = fs_world(backend, jailed(&t.jail)).await;
        let (_, bytes, _) = w.read_bytes("app").await;
        assert_eq!(bytes, b"v2");
        let (_, bytes, _) = w.read_bytes("current/app.txt").await;
        assert_eq!(bytes, b"v2");
        let r = w.fs("ls", json!({"path": "current"})).await;
        assert_eq!(r["entries"][0]["name"], "app.txt");
        w.fs("write", json!({"path": "current/new.txt", "content": "n"}))
            .await;
        assert!(t.jail.join("releases/v2/new.txt").exists());
        let r = w
            .exec(json!({"command": "pwd", "args": ["-P"], "cwd": "current"}))
            .await;
        assert_eq!(
            r["stdout"],
            format!("{}\n", t.jail.join("releases/v2").display())
        );
        for raw in ["sneaky/secret", "sibling/x"] {
            assert_eq!(
                w.fs_err("read", json!({ "path": raw })).await.0,
                "S215",
                "{backend} {raw}"
            );
        }
        assert_eq!(
            w.exec_err(json!({"command": "pwd", "cwd": "sneaky"}))
                .await
                .0,
            "S215"
        );
        t.outside_untouched();
    }
}

#[tokio::test]
async fn streams_round_trip_and_caps_hold() {
    for backend in BACKENDS {
        let t = tree();
        let mut config = jailed(&t.jail);
        config["fs"]["max_read_bytes"] = json!(9 * 1024 * 1024);
        config["fs"]["max_write_bytes"] = json!(9 * 1024 * 1024);
        let w = fs_world(backend, config).await;
        let big: Vec<u8> = (0..8 * 1024 * 1024u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        let content = w.stream_in(big.clone()).await;
        let r = w
            .fs("write", json!({"path": "big.bin", "content": content}))
            .await;
        assert_eq!(r["bytes_written"], big.len());
        assert!(std::fs::read(t.jail.join("big.bin")).unwrap() == big);
        let (meta, bytes, texts) = w.read_bytes("big.bin").await;
        assert_eq!(meta["size"], big.len());
        assert!(bytes == big, "the streamed read differs");
        assert!(texts.is_empty());

        let empty = w.stream_in(Vec::new()).await;
        assert_eq!(
            w.fs("write", json!({"path": "empty", "content": empty}))
                .await["bytes_written"],
            0
        );
        let (meta, bytes, _) = w.read_bytes("empty").await;
        assert_eq!((meta["size"].clone(), bytes.len()), (json!(0), 0));

        // Caps: inline is refused up front, a stream as it grows; nothing is left.
        let too_big = "x".repeat(9 * 1024 * 1024 + 1);
        assert_eq!(
            w.fs_err("write", json!({"path": "big.bin", "content": too_big}))
                .await
                .0,
            "S218"
        );
        let content = w.stream_in(vec![7u8; 9 * 1024 * 1024 + 1]).await;
        assert_eq!(
            w.fs_err("write", json!({"path": "big.bin", "content": content}))
                .await
                .0,
            "S218"
        );
        assert!(std::fs::read(t.jail.join("big.bin")).unwrap() == big);
        std::fs::write(t.jail.join("huge"), vec![0u8; 9 * 1024 * 1024 + 1]).unwrap();
        assert_eq!(w.fs_err("read", json!({"path": "huge"})).await.0, "S218");
        let leftovers: Vec<_> = std::fs::read_dir(&t.jail)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp."))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        assert_eq!(w.fs_err("read", json!({"path": "."})).await.0, "S212");
        // Inline content larger than one protocol frame travels as a body.
        let two_mib = "y".repeat(2 * 1024 * 1024);
        assert_eq!(
            w.fs("write", json!({"path": "inline", "content": two_mib}))
                .await["bytes_written"],
            2 * 1024 * 1024
        );
        assert_eq!(
            std::fs::metadata(t.jail.join("inline")).unwrap().len(),
            2 * 1024 * 1024
        );
    }
}

#[tokio::test]
async fn huge_directories_are_paginated() {
    let t = tree();
    std::fs::create_dir(t.jail.join("many")).unwrap();
    for i in 0..5000 {
        std::fs::write(t.jail.join(format!("many/{i:05}")), b"").unwrap();
    }
    for backend in BACKENDS {
        let w = fs_world(backend, jailed(&t.jail)).await;
        let r = w
            .fs("ls", json!({"path": "many", "page": 3, "page_size": 9999}))
            .await;
        assert_eq!(
            (
                r["total"].clone(),
                r["page_size"].clone(),
                r["has_more"].clone()
            ),
            (json!(5000), json!(2000), json!(false))
        );
        let entries = r["entries"].as_array().unwrap();
        assert_eq!(entries.len(), 1000);
        assert_eq!(entries[0]["name"], "04000");
        let r = w
            .fs("ls", json!({"path": "many", "page": 0, "page_size": 10}))
            .await;
        assert_eq!(
            (r["page"].clone(), r["has_more"].clone()),
            (json!(1), json!(true))
        );
        assert_eq!(r["entries"][9]["name"], "00009");
        let r = w
            .fs("ls", json!({"path": "many", "page": 600, "page_size": 10}))
            .await;
        assert_eq!(
            (r["entries"].clone(), r["has_more"].clone()),
            (json!([]), json!(false))
        );
    }
}

#[tokio::test]
async fn bad_input_gets_the_spec_codes() {
    let t = tree();
    std::fs::write(t.jail.join("f.txt"), b"one\n").unwrap();
    std::fs::write(t.jail.join("g.txt"), b"two\n").unwrap();
    for backend in BACKENDS {
        let w = fs_world(backend, jailed(&t.jail)).await;
        let invalid = [
            ("ls", json!({})),
            ("ls", json!({"path": ""})),
            ("rm", json!({"path": 5})),
            ("mkdir", json!({"path": "m", "mode": "4755"})),
            ("mkdir", json!({"path": "m", "mode": "999"})),
            ("chmod", json!({"path": "f.txt", "mode": "2755"})),
            (
                "write",
                json!({"path": "w", "content": "x", "mode": "1777"}),
            ),
            (
                "write",
                json!({"path": "w", "content": "x", "files": [{"path": "v", "content": "y"}]}),
            ),
            ("write", json!({"files": []})),
            ("write", json!({"path": "w"})),
            ("grep", json!({"path": ".", "pattern": "a".repeat(4097)})),
            (
                "grep",
                json!({"path": ".", "pattern": "a", "recursive": false}),
            ),
            (
                "grep",
                json!({"path": ".", "pattern": "a", "include_glob": ["a/["]}),
            ),
            (
                "sed",
                json!({"path": ".", "files": ["f.txt"], "pattern": "a", "replacement": "b"}),
            ),
            ("sed", json!({"pattern": "a", "replacement": "b"})),
            (
                "sed",
                json!({"files": ["f.txt"], "pattern": "", "replacement": "b", "regex": false}),
            ),
            ("stat", json!({"path": "f.txt", "target": {"kind": "vm"}})),
        ];
        for (op, payload) in invalid {
            let (code, message) = w.fs_err(op, payload.clone()).await;
            assert_eq!(code, "S210", "{backend} {op} {payload}: {message}");
        }
        let (code, message) = w.fs_err("rm", json!({"recursive": true})).await;
        assert_eq!(code, "S210");
        assert!(message.starts_with("bad rm payload: "), "{message}");
        for (op, payload) in [
            ("grep", json!({"path": ".", "pattern": "("})),
            (
                "sed",
                json!({"files": ["f.txt"], "pattern": "(", "replacement": "x"}),
            ),
            ("grep", json!({"path": ".", "pattern": "(\\w{1000}){100}"})),
        ] {
            assert_eq!(w.fs_err(op, payload).await.0, "S217", "{backend} {op}");
        }
        assert_eq!(w.fs_err("ls", json!({"path": "f.txt"})).await.0, "S212");
        // One bad sed operand fails the call with nothing written.
        let (code, message) = w
            .fs_err("sed", json!({"files": ["f.txt", "missing.txt", "g.txt"], "pattern": "o", "replacement": "0"}))
            .await;
        assert_eq!(
            (code.as_str(), message.as_str()),
            (
                "S211",
                "missing.txt: not found or not accessible (verify with shell::fs::ls)"
            )
        );
        assert_eq!(
            std::fs::read_to_string(t.jail.join("f.txt")).unwrap(),
            "one\n"
        );
        // Unknown fields (the engine's own) and a harness scope are accepted.
        let scope = json!({"root": t.jail, "boundary": "workspace"});
        let r = w
            .fs(
                "stat",
                json!({"path": "f.txt", "_caller_worker_id": "w", "fs_scope": scope}),
            )
            .await;
        assert_eq!(r["size"], 4);
    }
}

#[tokio::test]
async fn fs_scope_is_accepted_but_never_published() {
    let t = tree();
    let w = fs_world("Openat2", jailed(&t.jail)).await;
    for op in [
        "ls", "stat", "mkdir", "rm", "chmod", "mv", "grep", "sed", "write", "read",
    ] {
        let id = format!("shell::fs::{op}");
        let registration = w
            .engine
            .function_registration(&id)
            .unwrap_or_else(|| panic!("{id} missing"));
        let text = registration.to_string();
        assert!(!text.contains("fs_scope"), "{id} publishes fs_scope");
        assert!(text.contains("target"), "{id} does not publish target");
    }
}

#[tokio::test]
async fn sandbox_targets_are_validated_then_forwarded() {
    let t = tree();
    let sandbox = json!({"kind": "sandbox", "sandbox_id": "7f0c1b0e-2a40-4c53-9f0e-1d2b3c4d5e6f"});
    let w = fs_world("Openat2", jailed(&t.jail)).await;
    let (code, message) = w
        .fs_err(
            "write",
            json!({"path": "/x", "content": "inline", "target": sandbox}),
        )
        .await;
    assert_eq!(code, "S210");
    assert!(message.contains("channel reference"), "{message}");
    assert_eq!(
        w.fs_err(
            "stat",
            json!({"path": "/x", "target": {"kind": "sandbox", "sandbox_id": "nope"}})
        )
        .await
        .0,
        "S210"
    );
    let fake = caller(&w.engine);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    fake.register_function(
        "sandbox::fs::stat",
        iii_sdk::RegisterFunction::new_async(move |input: Value| {
            let record = record.clone();
            async move {
                record.lock().unwrap().push(input.clone());
                match input["path"].as_str() {
                    Some("/down") => Err(iii_sdk::Error::Remote { code: "S301".into(), message: "adapter not connected".into(), stacktrace: None }),
                    _ => Ok(json!({"name": "x", "is_dir": false, "size": 1, "mode": "0644", "mtime": 0, "is_symlink": false})),
                }
            }
        }),
    );
    assert!(w.engine.wait_for_function("sandbox::fs::stat", BOOT).await);
    let r = w
        .fs(
            "stat",
            json!({"path": "/x", "target": sandbox, "fs_scope": {"root": "/"}}),
        )
        .await;
    assert_eq!(r["name"], "x");
    // Only the engine's own `_caller_worker_id` (naming the worker) is added.
    let mut sent = seen.lock().unwrap()[0].clone();
    sent.as_object_mut()
        .unwrap()
        .retain(|k, _| !k.starts_with('_'));
    assert_eq!(
        sent,
        json!({"path": "/x", "sandbox_id": sandbox["sandbox_id"]})
    );
    assert_eq!(
        w.fs_err("stat", json!({"path": "/down", "target": sandbox}))
            .await
            .0,
        "S301"
    );
    let off = fs_world("Openat2", json!({"fs": {"host_roots": [t.jail], "allow_unjailed": false}, "sandbox": {"enabled": false}})).await;
    assert_eq!(
        off.fs_err("ls", json!({"path": "/x", "target": sandbox}))
            .await
            .0,
        "S210"
    );
}

/// What an escape through the race could touch, recorded before it.
struct Canary {
    file: PathBuf,
    bytes: Vec<u8>,
    mode: u32,
    mtime: i64,
    atime: i64,
}

impl Canary {
    fn plant(dir: &Path) -> Canary {
        let file = dir.join("canary");
        std::fs::write(&file, b"OUTSIDE-CANARY").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o444)).unwrap();
        std::fs::write(dir.join("only-outside"), b"marker").unwrap();
        // An atime two days old: with relatime any read moves it.
        let old = std::time::SystemTime::now() - Duration::from_secs(2 * 86_400);
        std::fs::File::options()
            .write(true)
            .open(&file)
            .or_else(|_| std::fs::File::open(&file))
            .unwrap()
            .set_times(std::fs::FileTimes::new().set_accessed(old))
            .unwrap();
        let meta = std::fs::metadata(&file).unwrap();
        Canary {
            file,
            bytes: b"OUTSIDE-CANARY".to_vec(),
            mode: 0o444,
            mtime: meta.mtime(),
            atime: meta.atime(),
        }
    }

    fn assert_untouched(&self, dir: &Path) {
        // Metadata first: reading the bytes here moves the atime.
        let meta = std::fs::metadata(&self.file).expect("the canary is gone");
        assert_eq!(meta.atime(), self.atime, "the canary was read");
        assert_eq!(meta.mode() & 0o7777, self.mode, "the canary's mode changed");
        assert_eq!(meta.mtime(), self.mtime, "the canary was written");
        assert_eq!(
            std::fs::read(&self.file).unwrap(),
            self.bytes,
            "the canary changed"
        );
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["canary", "only-outside"],
            "something appeared outside"
        );
    }
}

#[tokio::test]
async fn a_symlink_swap_race_never_reaches_outside_the_jail() {
    for backend in BACKENDS {
        let t = tree();
        let outside = t.outside.join("race");
        std::fs::create_dir(&outside).unwrap();
        let canary = Canary::plant(&outside);
        // `d` flips between a real directory mirroring the outside path and
        // a symlink to `/`, so `d/<outside path>` names the canary only
        // through an escape.
        let mirror = outside.strip_prefix("/").unwrap();
        let inside = t.jail.join("d").join(mirror);
        std::fs::create_dir_all(&inside).unwrap();
        std::fs::write(inside.join("canary"), b"inside").unwrap();
        symlink("/", t.jail.join("flip")).unwrap();
        let w = fs_world(backend, jailed(&t.jail)).await;
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let swapper = {
            let (stop, jail) = (stop.clone(), t.jail.clone());
            std::thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(60);
                let mut swaps = 0u64;
                let (d, flip, parked) = (jail.join("d"), jail.join("flip"), jail.join("parked"));
                while !stop.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < deadline
                {
                    // d <-> flip through a parking name: `d` is a directory,
                    // missing, or the link to `/`, in turn.
                    let _ = std::fs::rename(&d, &parked);
                    let _ = std::fs::rename(&flip, &d);
                    let _ = std::fs::rename(&parked, &flip);
                    swaps += 1;
                }
                swaps
            })
        };
        let base = format!("d/{}", mirror.display());
        let deadline = Instant::now() + Duration::from_secs(25);
        let mut done = 0;
        let mut succeeded = 0;
        let mut tasks = Vec::new();
        for worker in 0..4usize {
            let client = caller(&w.engine);
            let base = base.clone();
            tasks.push(tokio::spawn(async move {
                let mut outcomes = Vec::new();
                for i in 0..500usize {
                    if Instant::now() > deadline {
                        break;
                    }
                    let (op, payload) = match (i + worker) % 8 {
                        0 => ("read", json!({"path": format!("{base}/canary")})),
                        1 => ("write", json!({"path": format!("{base}/canary"), "content": "w"})),
                        2 => ("ls", json!({"path": base})),
                        3 => ("mv", json!({"src": format!("{base}/canary"), "dst": format!("{base}/moved"), "overwrite": true})),
                        4 => ("rm", json!({"path": format!("{base}/moved")})),
                        5 => ("chmod", json!({"path": format!("{base}/canary"), "mode": "0600"})),
                        6 => ("mkdir", json!({"path": format!("{base}/made"), "parents": true})),
                        _ => ("stat", json!({"path": format!("{base}/canary")})),
                    };
                    let result = ide_tests::call(&client, &format!("shell::fs::{op}"), payload).await;
                    outcomes.push((op, result));
                }
                outcomes
            }));
        }
        for task in tasks {
            for (op, result) in task.await.unwrap() {
                done += 1;
                match result {
                    Ok(v) => {
                        succeeded += 1;
                        let text = v.to_string();
                        assert!(
                            !text.contains("only-outside"),
                            "{backend} {op} listed outside: {text}"
                        );
                        assert!(
                            !text.contains(&format!("\"size\":{}", canary.bytes.len())),
                            "{backend} {op} saw the canary: {text}"
                        );
                    }
                    Err(iii_sdk::Error::Remote { code, message, .. }) => {
                        assert!(
                            ["S211", "S212", "S213", "S214", "S215", "S216"]
                                .contains(&code.as_str()),
                            "{backend} {op}: {code} {message}"
                        );
                        // Every message starts with the caller's own path.
                        assert!(message.starts_with("d/"), "{backend} {op}: {message}");
                    }
                    Err(e) => panic!("{backend} {op}: {e}"),
                }
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let swaps = swapper.join().unwrap();
        assert!(done >= 100, "{backend}: only {done} calls ran");
        assert!(succeeded > 0, "{backend}: no call ever succeeded");
        assert!(swaps > 0);
        canary.assert_untouched(&outside);
        t.outside_untouched_but(&["race"]);
    }
}

impl Tree {
    fn outside_untouched_but(&self, extra: &[&str]) {
        assert_eq!(
            std::fs::read(self.outside.join("secret")).unwrap(),
            b"SECRET"
        );
        let mut names: Vec<String> = std::fs::read_dir(&self.outside)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let mut want: Vec<String> = ["secret", "sub"]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect();
        want.sort();
        assert_eq!(names, want);
    }
}
