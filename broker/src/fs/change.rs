//! `shell::fs::mkdir`, `rm`, `chmod` and `mv`: single-entry changes.
//!
//! Security meaning: every path passes the lexical jail and the protected
//! globs here, modes pass the special-bits gate, and the executor then acts
//! on the entry itself through its resolved parent fd (never following a
//! final symlink for rm, chmod and mv).
#![forbid(unsafe_code)]

use super::listing::unexpected;
use super::mode;
use super::path::{fail, guarded, resolve};
use super::request::{ChmodRequest, MkdirRequest, MvRequest, RmRequest};
use super::response::{ChmodResponse, MkdirResponse, MvResponse, RmResponse};
use crate::app::App;
use crate::error::ShellError;
use crate::policy::CallPolicy;
use ide_proto::{ExecutorError, FsOp, FsReply, Reply, MV_DESTINATION};

/// The default mode of a new directory.
const DIR_MODE: u32 = 0o755;

/// `mkdir` on the host.
pub async fn mkdir(
    app: &App,
    policy: &CallPolicy,
    req: MkdirRequest,
) -> Result<MkdirResponse, ShellError> {
    let mode = mode::parse(policy, req.mode.as_deref(), DIR_MODE)?;
    let rooted = resolve(policy, &req.path)?;
    let op = FsOp::Mkdir {
        path: rooted,
        mode,
        parents: req.parents,
    };
    match app.executor.call(guarded(policy, op)).await? {
        Ok(Reply::Fs(FsReply::Mkdir {
            created,
            already_existed,
        })) => Ok(MkdirResponse {
            created,
            path: req.path,
            already_existed,
        }),
        Ok(other) => Err(unexpected("mkdir", &other)),
        Err(e) => Err(fail(e, &req.path)),
    }
}

/// `rm` on the host.
pub async fn rm(app: &App, policy: &CallPolicy, req: RmRequest) -> Result<RmResponse, ShellError> {
    let rooted = resolve(policy, &req.path)?;
    let op = FsOp::Rm {
        path: rooted,
        recursive: req.recursive,
    };
    match app.executor.call(guarded(policy, op)).await? {
        Ok(Reply::Fs(FsReply::Ok)) => Ok(RmResponse {
            removed: true,
            path: req.path,
            was_present: true,
        }),
        Ok(other) => Err(unexpected("rm", &other)),
        Err(e) => Err(fail(e, &req.path)),
    }
}

/// `chmod` on the host.
pub async fn chmod(
    app: &App,
    policy: &CallPolicy,
    req: ChmodRequest,
) -> Result<ChmodResponse, ShellError> {
    let mode = mode::parse(policy, Some(&req.mode), 0)?;
    let rooted = resolve(policy, &req.path)?;
    let op = FsOp::Chmod {
        path: rooted,
        mode,
        uid: req.uid,
        gid: req.gid,
        recursive: req.recursive,
    };
    match app.executor.call(guarded(policy, op)).await? {
        Ok(Reply::Fs(FsReply::Chmod { entries_changed })) => Ok(ChmodResponse {
            entries_changed,
            path: req.path,
            recursive: req.recursive,
        }),
        Ok(other) => Err(unexpected("chmod", &other)),
        Err(e) => Err(fail(e, &req.path)),
    }
}

/// `mv` on the host.
pub async fn mv(app: &App, policy: &CallPolicy, req: MvRequest) -> Result<MvResponse, ShellError> {
    let src = resolve(policy, &req.src)?;
    let dst = resolve(policy, &req.dst)?;
    let op = FsOp::Mv {
        src,
        dst,
        overwrite: req.overwrite,
    };
    match app.executor.call(guarded(policy, op)).await? {
        Ok(Reply::Fs(FsReply::Mv { overwrote })) => Ok(MvResponse {
            moved: true,
            src: req.src,
            dst: req.dst,
            overwrote,
        }),
        Ok(other) => Err(unexpected("mv", &other)),
        // The executor marks failures of the destination side.
        Err(e) => Err(match e.message.strip_prefix(MV_DESTINATION) {
            Some(rest) => fail(ExecutorError::new(e.kind, rest), &req.dst),
            None => fail(e, &req.src),
        }),
    }
}
