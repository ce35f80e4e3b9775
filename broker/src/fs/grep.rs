//! `shell::fs::grep`.
//!
//! Security meaning: the executor searches only beneath the resolved path;
//! matches in files the protected globs cover are dropped here (those files
//! are skipped silently, as if absent), and the result is bounded by
//! `max_matches` and `max_line_bytes`: once enough matches arrived the
//! request is dropped, which stops the search.
#![forbid(unsafe_code)]

use super::download::Download;
use super::path::{absolute, guarded, join_rel, resolve};
use super::request::GrepRequest;
use super::response::{GrepMatchOut, GrepResponse};
use super::search::{check, next_batch};
use crate::app::App;
use crate::error::ShellError;
use crate::policy::CallPolicy;
use ide_proto::{FsOp, GrepMatch, GrepSearch, RootedPath, WalkFilter};

/// Matches returned when the caller does not say (or says 0).
pub const DEFAULT_MAX_MATCHES: u64 = 10_000;
/// The most matches one call returns.
pub const MAX_MATCHES: u64 = 100_000;
/// Bytes of a matching line shown when the caller does not say (or says 0).
pub const DEFAULT_LINE_BYTES: u64 = 4096;
/// The longest line shown whole (longer lines are cut).
pub const MAX_LINE_BYTES: u64 = 256 * 1024;

/// `grep` on the host.
pub async fn grep(
    app: &App,
    policy: &CallPolicy,
    req: GrepRequest,
) -> Result<GrepResponse, ShellError> {
    check(&req.pattern, &req.include_glob, &req.exclude_glob)?;
    let rooted = resolve(policy, &req.path)?;
    let max_matches = match req.max_matches {
        None | Some(0) => DEFAULT_MAX_MATCHES,
        Some(n) => n.min(MAX_MATCHES),
    };
    let line_bytes = match req.max_line_bytes {
        None | Some(0) => DEFAULT_LINE_BYTES,
        Some(n) => n.min(MAX_LINE_BYTES),
    };
    let op = FsOp::Grep {
        path: rooted.clone(),
        filter: WalkFilter {
            recursive: req.recursive,
            include: req.include_glob,
            exclude: req.exclude_glob,
        },
        search: GrepSearch {
            pattern: req.pattern,
            ignore_case: req.ignore_case,
            max_line_bytes: u32::try_from(line_bytes).unwrap_or(u32::MAX),
        },
    };
    let mut download = Download::new(app.executor.request(guarded(policy, op)).await?);
    let mut matches = Vec::new();
    while let Some(batch) = next_batch::<GrepMatch>(&mut download, &req.path).await? {
        for found in batch {
            let file = RootedPath {
                rel: join_rel(&rooted.rel, &found.file),
                ..rooted.clone()
            };
            if policy.jail().is_protected(&file) {
                continue;
            }
            matches.push(GrepMatchOut {
                path: absolute(&rooted, &found.file),
                line: found.line,
                content: found.content,
            });
            if matches.len() as u64 >= max_matches {
                return Ok(GrepResponse {
                    matches,
                    truncated: true,
                });
            }
        }
    }
    Ok(GrepResponse {
        matches,
        truncated: false,
    })
}
