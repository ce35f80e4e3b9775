//! Real spawns through [`prepare`] and [`Prepared::spawn`]: the test process
//! itself is never confined, only the children it starts.

use super::*;
use crate::exec::spawn::{spawn, Leader};
use ide_proto::Confinement;
use ide_proto::ExecSpec;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;
use tokio::io::AsyncReadExt;

const LIMIT: Duration = Duration::from_secs(20);

/// Set by CI to the Landlock ABI the host must offer: below it the tests
/// fail instead of skipping.
pub const REQUIRED_ABI_ENV: &str = "IDE_REQUIRED_LANDLOCK_ABI";

/// True when Landlock tests can run here; prints why they skip otherwise,
/// and panics when CI requires an ABI this kernel lacks.
pub fn landlock_or_skip() -> bool {
    let abi = sys::landlock_abi().unwrap_or(0);
    if let Ok(required) = std::env::var(REQUIRED_ABI_ENV) {
        let required: i32 = required
            .parse()
            .unwrap_or_else(|_| panic!("{REQUIRED_ABI_ENV}={required} is not a number"));
        assert!(
            abi >= required,
            "{REQUIRED_ABI_ENV}={required} but the kernel offers Landlock ABI {abi}"
        );
        return true;
    }
    if abi < 1 {
        eprintln!("skipped: this kernel has no Landlock (set {REQUIRED_ABI_ENV} to fail instead)");
    }
    abi >= 1
}

struct Ran {
    stdout: String,
    stderr: String,
    code: Option<i32>,
}

/// Spawns `argv` through the real spawn path (stdin `/dev/null`, the test
/// process's environment).
fn start(
    argv: &[&str],
    confine: Option<Confinement>,
) -> Result<(Leader, crate::exec::spawn::Pipes), ExecutorError> {
    let spec = ExecSpec {
        confine,
        ..crate::exec::tests::spec(argv)
    };
    spawn(&spec, std::env::vars_os().collect(), None)
}

async fn run(argv: &[&str], confine: Option<Confinement>) -> Result<Ran, ExecutorError> {
    let (mut leader, mut pipes) = start(argv, confine)?;
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let ran = async {
        let (out, err) = tokio::join!(
            pipes.stdout.read_to_end(&mut stdout),
            pipes.stderr.read_to_end(&mut stderr)
        );
        out.and(err).unwrap();
        leader.wait().await.unwrap()
    };
    let status = tokio::time::timeout(LIMIT, ran)
        .await
        .expect("the command did not finish");
    Ok(Ran {
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        code: status.code(),
    })
}

fn writable(paths: &[&Path]) -> Option<Confinement> {
    Some(Confinement {
        writable: paths.iter().map(|p| p.display().to_string()).collect(),
        git_dir_of: None,
    })
}

fn status_field(status: &str, key: &str) -> Option<String> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .map(|v| v.trim().to_owned())
}

#[tokio::test]
async fn every_command_gets_the_seccomp_baseline() {
    let ran = run(&["cat", "/proc/self/status"], None).await.unwrap();
    assert_eq!(status_field(&ran.stdout, "Seccomp:").as_deref(), Some("2"));
    let ran = run(&["unshare", "-U", "true"], None).await.unwrap();
    assert_ne!(ran.code, Some(0), "unshare -U worked: {}", ran.stderr);
    assert!(ran.stderr.contains("not permitted"), "{}", ran.stderr);
}

#[tokio::test]
async fn a_confined_command_has_no_new_privs_and_its_writes_stay_inside() {
    if !landlock_or_skip() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let inside = tmp.path().join("inside");
    std::fs::create_dir(&inside).unwrap();
    let canary = tmp.path().join("canary");
    std::fs::write(&canary, b"keep").unwrap();
    std::fs::set_permissions(&canary, std::fs::Permissions::from_mode(0o644)).unwrap();
    let script = format!(
        "grep NoNewPrivs /proc/self/status
         echo in > {inside}/file && echo wrote-inside
         echo x > /dev/null && echo wrote-null
         echo out > {tmp}/new || echo refused-create
         echo out >> {canary} || echo refused-append
         mkdir {tmp}/dir || echo refused-mkdir
         ln {canary} {tmp}/hard || echo refused-link
         mv {canary} {inside}/moved || echo refused-rename
         truncate -s 0 {canary} || echo refused-truncate
         chmod 4755 {canary} || echo refused-setuid",
        inside = inside.display(),
        tmp = tmp.path().display(),
        canary = canary.display(),
    );
    let ran = run(&["sh", "-c", &script], writable(&[&inside]))
        .await
        .unwrap();
    for expected in [
        "NoNewPrivs:\t1",
        "wrote-inside",
        "wrote-null",
        "refused-create",
        "refused-append",
        "refused-mkdir",
        "refused-link",
        "refused-rename",
        "refused-truncate",
        "refused-setuid",
    ] {
        assert!(
            ran.stdout.contains(expected),
            "{expected} missing:\n{}\n{}",
            ran.stdout,
            ran.stderr
        );
    }
    assert_eq!(std::fs::read(&canary).unwrap(), b"keep");
    let mode = std::fs::metadata(&canary).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o644);
    assert_eq!(std::fs::read(inside.join("file")).unwrap(), b"in\n");
    for made in ["new", "dir", "hard"] {
        assert!(!tmp.path().join(made).exists(), "{made}");
    }
    assert!(!inside.join("moved").exists());
}

#[tokio::test]
async fn a_missing_writable_path_is_skipped() {
    if !landlock_or_skip() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing");
    let ran = run(&["true"], writable(&[&missing, tmp.path()]))
        .await
        .unwrap();
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
}

#[tokio::test]
async fn a_killed_tree_leaves_no_escaped_descendant() {
    let marker = format!("100{}.{}", std::process::id(), line!());
    let script = format!("setsid sleep {marker} & (sleep {marker} &) & exec sleep {marker}");
    let (mut leader, _pipes) = start(&["sh", "-c", &script], None).unwrap();
    let running = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
                let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
                let zombie = stat
                    .rsplit(')')
                    .next()
                    .is_some_and(|s| s.trim_start().starts_with('Z'));
                !zombie && String::from_utf8_lossy(&cmdline).contains(&marker)
            })
            .count()
    };
    let mut all_started = false;
    for _ in 0..200 {
        if running() == 3 {
            all_started = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(all_started, "expected three sleeps, saw {}", running());
    leader.kill_group();
    tokio::time::timeout(LIMIT, leader.wait())
        .await
        .unwrap()
        .unwrap();
    let mut gone = false;
    for _ in 0..100 {
        if running() == 0 {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(gone, "{} sleeps survived the kill", running());
}

#[test]
fn step_failures_map_to_the_spec_codes() {
    use sequence::{Step, StepError};
    let raw = |step, errno| io::Error::from_raw_os_error(StepError { step, errno }.encode());
    let e = spawn_error(&raw(Step::Landlock, rustix::io::Errno::TOOBIG), true).unwrap();
    assert_eq!(e.kind, ErrorKind::Unconfinable);
    assert!(e.message.contains("16 Landlock domains"), "{}", e.message);
    assert!(
        e.message.ends_with("the command did not run"),
        "{}",
        e.message
    );
    let e = spawn_error(&raw(Step::Seccomp, rustix::io::Errno::INVAL), false).unwrap();
    assert_eq!(e.kind, ErrorKind::Internal);
    let e = spawn_error(&raw(Step::EnterCwd, rustix::io::Errno::NOENT), true).unwrap();
    assert_eq!(e.kind, ErrorKind::Internal);
    assert!(spawn_error(&io::Error::from_raw_os_error(libc::ENOENT), true).is_none());
    assert!(spawn_error(&io::Error::other("x"), true).is_none());
}
