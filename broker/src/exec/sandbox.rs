//! Forwarding `shell::exec` to a sandbox microVM through `sandbox::exec`.

use super::request::ExecRequest;
use super::response::ExecResponse;
use crate::app::App;
use crate::error::ShellError;
use crate::policy::Policy;
use iii_sdk::protocol::TriggerRequest;
use serde::Deserialize;
use serde_json::json;

/// Extra time the RPC gets beyond the command's own timeout.
const RPC_SLACK_MS: u64 = 30_000;

/// The gates every sandbox-targeted call passes before anything is sent.
pub fn check(policy: &Policy, req: &ExecRequest) -> Result<(), ShellError> {
    if !policy.sandbox_enabled() {
        return Err(ShellError::invalid(
            "sandbox targets are disabled on this worker (sandbox.enabled: false)",
        ));
    }
    if req.has_host_only_fields {
        return Err(ShellError::invalid(
            "cwd/env/stdin overrides are host-only; the sandbox::exec protocol does not forward them",
        ));
    }
    Ok(())
}

#[derive(Deserialize)]
struct SandboxExecResult {
    #[serde(default)]
    stdout: String,
    #[serde(default)]
    stderr: String,
    exit_code: Option<i32>,
    #[serde(default)]
    duration_ms: u64,
    #[serde(default)]
    timed_out: bool,
}

/// `shell::exec` with `target: sandbox`.
pub async fn run(
    app: &App,
    policy: &Policy,
    sandbox_id: &str,
    req: ExecRequest,
) -> Result<ExecResponse, ShellError> {
    check(policy, &req)?;
    let (timeout_ms, _) = policy.effective_timeout(req.timeout_ms);
    let payload = json!({
        "sandbox_id": sandbox_id,
        "cmd": req.argv[0],
        "args": &req.argv[1..],
        "timeout_ms": timeout_ms,
    });
    let call = TriggerRequest {
        timeout_ms: Some(timeout_ms.saturating_add(RPC_SLACK_MS)),
        ..TriggerRequest::new("sandbox::exec", payload)
    };
    match app.iii.trigger(call).await {
        Ok(value) => {
            let r: SandboxExecResult = serde_json::from_value(value)
                .map_err(|e| ShellError::internal(format!("bad sandbox::exec response: {e}")))?;
            Ok(ExecResponse {
                exit_code: if r.timed_out { None } else { r.exit_code },
                stdout: r.stdout,
                stderr: r.stderr,
                duration_ms: r.duration_ms,
                timed_out: r.timed_out,
                stdout_truncated: false,
                stderr_truncated: false,
            })
        }
        Err(iii_sdk::Error::Remote { code, message, .. })
            if code == "S200" || message.contains("timed out") =>
        {
            Ok(ExecResponse {
                exit_code: None,
                stdout: String::new(),
                stderr: String::new(),
                duration_ms: timeout_ms,
                timed_out: true,
                stdout_truncated: false,
                stderr_truncated: false,
            })
        }
        Err(iii_sdk::Error::Remote { code, message, .. }) => {
            Err(ShellError::forwarded(&code, message))
        }
        Err(e) => Err(ShellError::internal(format!("sandbox::exec failed: {e}"))),
    }
}
