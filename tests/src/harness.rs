//! The real binaries under test: building them once per test process and
//! running the `ide` broker with its output captured.
//!
//! Security meaning: end-to-end tests exercise the shipped binaries, not a
//! library shortcut, so privilege separation (the broker spawning its
//! executor) is part of what they test. A test's broker is always
//! SIGKILLed and reaped when its handle drops.

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;

/// The packages whose binaries the tests run.
const PACKAGES: [&str; 2] = ["ide", "ide-executor"];
/// How often `wait_exit` looks at the child.
const EXIT_POLL: Duration = Duration::from_millis(20);

/// Path of a workspace binary (`ide`, `ide-executor`).
///
/// The first call in a test process runs `cargo build -p ide -p
/// ide-executor` from the workspace root (honouring `CARGO_TARGET_DIR` and
/// every other cargo setting, since the paths come from cargo's own
/// report). Panics with the build output when the build fails or the
/// binary does not exist.
pub fn binary(name: &str) -> PathBuf {
    static BUILT: OnceLock<Result<HashMap<String, PathBuf>, String>> = OnceLock::new();
    match BUILT.get_or_init(build) {
        Ok(binaries) => match binaries.get(name) {
            Some(path) => path.clone(),
            None => panic!("no binary {name:?} among {:?}", binaries.keys()),
        },
        Err(report) => panic!("{report}"),
    }
}

fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map_or_else(|| manifest_dir.join(".."), Path::to_path_buf)
}

fn build() -> Result<HashMap<String, PathBuf>, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let mut command = Command::new(cargo);
    command
        .arg("build")
        .arg("--message-format=json-render-diagnostics");
    for package in PACKAGES {
        command.args(["-p", package]);
    }
    let output = command
        .current_dir(workspace_root())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run cargo build: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "cargo build -p ide -p ide-executor failed ({}):\n{}\n{stdout}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(executables(&stdout))
}

/// Binary name → path, from cargo's JSON messages.
fn executables(messages: &str) -> HashMap<String, PathBuf> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact")
        .filter_map(|m| {
            let name = m["target"]["name"].as_str()?.to_string();
            let path = m["executable"].as_str()?;
            Some((name, PathBuf::from(path)))
        })
        .collect()
}

/// How to run the `ide` binary.
#[derive(Debug, Clone, Default)]
pub struct IdeOptions {
    /// Passed as `--config <path>`.
    pub config_path: Option<PathBuf>,
    /// Extra arguments after the standard ones.
    pub args: Vec<String>,
    /// Extra environment (wins over the inherited one; `RUST_LOG` here
    /// replaces the default `info,ide=debug`).
    pub env: Vec<(String, String)>,
    /// Working directory; the test's own when unset.
    pub cwd: Option<PathBuf>,
    /// The `ide` binary to run instead of the debug build (benchmarks run
    /// release builds).
    pub program: Option<PathBuf>,
}

#[derive(Default)]
struct LogBuffer {
    text: Mutex<String>,
    grew: Notify,
}

impl LogBuffer {
    fn push(&self, line: &str) {
        let mut text = self.text.lock().unwrap_or_else(|e| e.into_inner());
        text.push_str(line);
        text.push('\n');
        drop(text);
        self.grew.notify_waiters();
    }

    fn snapshot(&self) -> String {
        self.text.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn contains(&self, needle: &str) -> bool {
        self.text
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(needle)
    }

    async fn wait_for(&self, needle: &str, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let grew = self.grew.notified();
            tokio::pin!(grew);
            grew.as_mut().enable();
            if self.contains(needle) {
                return true;
            }
            if tokio::time::timeout_at(deadline, grew).await.is_err() {
                return self.contains(needle);
            }
        }
    }
}

/// A running `ide` broker with stdout and stderr captured line by line.
pub struct Ide {
    child: Child,
    logs: Arc<LogBuffer>,
}

fn capture(stream: impl Read + Send + 'static, logs: Arc<LogBuffer>, pid: u32) {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    let text = String::from_utf8_lossy(&line);
                    let text = text.trim_end_matches(['\n', '\r']);
                    eprintln!("[ide {pid}] {text}");
                    logs.push(text);
                }
            }
        }
    });
}

impl Ide {
    /// Starts `<target>/debug/ide --url <url> [--config <path>] <args…>`.
    ///
    /// Panics when the binary cannot be built or started.
    pub fn spawn(url: &str, opts: IdeOptions) -> Ide {
        let program = opts.program.clone().unwrap_or_else(|| binary("ide"));
        let mut command = Command::new(program);
        command.arg("--url").arg(url);
        if let Some(config) = &opts.config_path {
            command.arg("--config").arg(config);
        }
        command.args(&opts.args);
        if !opts.env.iter().any(|(key, _)| key == "RUST_LOG") {
            command.env("RUST_LOG", "info,ide=debug");
        }
        command.envs(opts.env.iter().map(|(k, v)| (k, v)));
        if let Some(cwd) = &opts.cwd {
            command.current_dir(cwd);
        }
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(error) => panic!("cannot start the ide binary: {error}"),
        };
        let logs = Arc::new(LogBuffer::default());
        let pid = child.id();
        if let Some(stdout) = child.stdout.take() {
            capture(stdout, logs.clone(), pid);
        }
        if let Some(stderr) = child.stderr.take() {
            capture(stderr, logs.clone(), pid);
        }
        Ide { child, logs }
    }

    /// The broker's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the broker printed so far, one line per line.
    pub fn logs(&self) -> String {
        self.logs.snapshot()
    }

    /// Waits until the output contains `needle`; false after `within`.
    pub async fn wait_for_log(&self, needle: &str, within: Duration) -> bool {
        self.logs.wait_for(needle, within).await
    }

    /// Waits for the broker to exit on its own; `None` after `within`.
    pub async fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(EXIT_POLL).await;
        }
    }

    /// SIGKILLs the broker alone (its executor is a separate process) and
    /// reaps it.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long a dropped worker gets to stop on SIGTERM before it is killed.
const STOP_WAIT: Duration = Duration::from_secs(5);

impl Ide {
    /// Stops the worker the way a service manager does: SIGTERM, on which
    /// the broker stops its executor and every job, then SIGKILL if it has
    /// not exited within [`STOP_WAIT`]. A test that `kill9`ed the broker on
    /// purpose leaves its executor to the executor's own linger rules.
    pub fn stop(&mut self) {
        if let (Ok(None), Some(pid)) = (
            self.child.try_wait(),
            rustix::process::Pid::from_raw(self.child.id() as i32),
        ) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            let deadline = std::time::Instant::now() + STOP_WAIT;
            while std::time::Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(EXIT_POLL);
            }
        }
        self.kill9();
    }
}

impl Drop for Ide {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executables_are_read_from_cargo_messages() {
        let messages = concat!(
            r#"{"reason":"compiler-artifact","target":{"name":"ide"},"executable":"/t/debug/ide"}"#,
            "\n",
            r#"{"reason":"compiler-artifact","target":{"name":"ide_proto"},"executable":null}"#,
            "\n",
            r#"{"reason":"build-finished","success":true}"#,
            "\nnot json\n"
        );
        let found = executables(messages);
        assert_eq!(found.len(), 1);
        assert_eq!(found["ide"], PathBuf::from("/t/debug/ide"));
    }

    #[test]
    fn the_executor_binary_is_built_and_exists() {
        let path = binary("ide-executor");
        assert!(path.is_file(), "{} is not a file", path.display());
        assert!(binary("ide").is_file());
    }

    #[tokio::test]
    async fn log_waits_see_lines_pushed_later_and_time_out_otherwise() {
        let logs = Arc::new(LogBuffer::default());
        let writer = logs.clone();
        let late = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            writer.push("ready: serving");
        });
        assert!(logs.wait_for("ready", Duration::from_secs(5)).await);
        assert!(!logs.wait_for("never", Duration::from_millis(30)).await);
        assert_eq!(logs.snapshot(), "ready: serving\n");
        late.await.unwrap();
    }
}
