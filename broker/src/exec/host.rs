//! Running a command on the host: build the executor spec from one policy
//! snapshot, stream the output back, shape the spec's response.

use super::confine::confinement;
use super::request::ExecRequest;
use super::response::ExecResponse;
use crate::app::App;
use crate::error::ShellError;
use crate::executor::ReplyStream;
use crate::policy::session::SessionScope;
use crate::policy::{check_call_env, PathKind, Policy};
use crate::scope::{self, ExecScope};
use ide_proto::{
    EnvSpec, ErrorKind, ExecSpec, ExitReport, Reply, Request, RootedPath, Stdin, Stream,
};

/// Stdin up to this size travels inside the request; larger input is
/// uploaded as a flow-controlled body after it.
const INLINE_STDIN: usize = 64 * 1024;

/// A spec ready to send, plus what the request needs besides it.
pub struct Prepared {
    pub spec: ExecSpec,
    /// The caller's own `cwd` string, for error wording.
    pub cwd: Option<String>,
    /// Stdin to upload after the request.
    upload: Option<Vec<u8>>,
}

/// The working directory: per-call `cwd` (relative to the session root when
/// scoped), else the session root, else the configured `working_dir`, else
/// the executor's own. Returns the caller's string for error wording.
fn working_dir(
    policy: &Policy,
    cwd: Option<&str>,
    scope: Option<&SessionScope>,
) -> Result<Option<(RootedPath, String)>, ShellError> {
    let raw = match (cwd, scope) {
        (Some(raw), _) => raw.to_owned(),
        (None, Some(scope)) => scope.root.clone(),
        (None, None) => match policy.working_dir() {
            Some(dir) if !dir.is_empty() => dir.to_owned(),
            _ => return Ok(None),
        },
    };
    let rooted = policy.jail().resolve_in(&raw, scope, PathKind::Dir)?;
    Ok(Some((rooted, raw)))
}

/// Builds what the executor runs; every policy decision is made here. A
/// call with a session `scope` is write-confined when the scope says so
/// ([`super::confine`]).
pub fn prepare(
    policy: &Policy,
    req: &ExecRequest,
    timeout_ms: u64,
    scope: Option<&ExecScope>,
) -> Result<Prepared, ShellError> {
    check_call_env(&req.env)?;
    let cwd = working_dir(policy, req.cwd.as_deref(), scope.map(|s| &s.session))?;
    let spec = ExecSpec {
        argv: req.argv.clone(),
        env: EnvSpec {
            inherit: policy.env_inherit(),
            allow: policy.env_allow().to_vec(),
            set: req
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        },
        cwd: cwd.as_ref().map(|(rooted, _)| rooted.clone()),
        stdin: match &req.stdin {
            None => Stdin::Null,
            Some(s) if s.len() <= INLINE_STDIN => Stdin::Bytes(s.as_bytes().to_vec()),
            Some(_) => Stdin::Upload,
        },
        timeout_ms,
        max_output_bytes: policy.max_output_bytes(),
        confine: confinement(policy, scope.and_then(|s| s.write.as_ref())),
    };
    let upload = match spec.stdin {
        Stdin::Upload => req.stdin.as_ref().map(|s| s.as_bytes().to_vec()),
        _ => None,
    };
    Ok(Prepared {
        spec,
        cwd: cwd.map(|(_, raw)| raw),
        upload,
    })
}

/// Sends a prepared exec (or job start, built by `wrap`) and, when stdin is
/// uploaded, feeds it in the background under the executor's credit.
pub async fn send(
    app: &App,
    prepared: Prepared,
    wrap: impl FnOnce(ExecSpec) -> Request,
) -> Result<(ReplyStream, Option<String>), ShellError> {
    let stream = app.executor.request(wrap(prepared.spec)).await?;
    if let Some(bytes) = prepared.upload {
        let uploader = stream.uploader();
        tokio::spawn(async move { uploader.send_all(&bytes).await });
    }
    Ok((stream, prepared.cwd))
}

/// Maps an executor failure of a spawn onto the exec surface.
pub fn spawn_error(err: ide_proto::ExecutorError, cwd: Option<&str>) -> ShellError {
    match (err.kind, cwd) {
        (ErrorKind::NotFound, Some(raw)) => ShellError::from_executor(err, Some(raw)),
        _ => ShellError::from_executor(err, None),
    }
}

/// `shell::exec` on the host.
pub async fn run(app: &App, policy: &Policy, req: ExecRequest) -> Result<ExecResponse, ShellError> {
    let (timeout_ms, clamped) = policy.effective_timeout(req.timeout_ms);
    let scope = scope::for_exec(app, policy, req.fs_scope.clone()).await?;
    let prepared = prepare(policy, &req, timeout_ms, scope.as_ref())?;
    let cap = prepared.spec.max_output_bytes;
    let (mut stream, cwd) = send(app, prepared, Request::Exec).await?;
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let report: ExitReport = loop {
        match stream.next().await? {
            Reply::Output {
                stream: Stream::Stdout,
                data,
            } => stdout.extend_from_slice(&data),
            Reply::Output {
                stream: Stream::Stderr,
                data,
            } => stderr.extend_from_slice(&data),
            Reply::Exited(report) => break report,
            Reply::Error(e) => return Err(spawn_error(e, cwd.as_deref())),
            other => {
                return Err(ShellError::internal(format!(
                    "unexpected executor reply to exec: {other:?}"
                )))
            }
        }
    };
    let mut response = ExecResponse::new(&report, cap, stdout, stderr);
    if report.timed_out {
        response.note_timeout(timeout_ms, req.timeout_ms.filter(|_| clamped));
    }
    Ok(response)
}
