//! `shell::fs::sed`.
//!
//! Security meaning: every operand is checked (jail, protected globs)
//! before the executor edits anything, and the executor resolves every file
//! of a request before it writes any, so one bad operand fails the call
//! with nothing written. A directory operand is first walked by the
//! executor (by fd, never following links); files the protected globs cover
//! are left out here, before any edit.
#![forbid(unsafe_code)]

use super::download::Download;
use super::listing::unexpected;
use super::path::{absolute, fail, guarded, join_rel, resolve};
use super::request::SedRequest;
use super::response::{SedResponse, SedResult};
use super::search::{check, next_batch};
use crate::app::App;
use crate::error::ShellError;
use crate::policy::CallPolicy;
use ide_proto::{operand_of, FsOp, FsReply, Reply, RootedPath, SedEdit, SedOutcome, WalkFilter};

/// The size cap of an edited file when `fs.max_read_bytes` is 0.
pub const DEFAULT_FILE_CAP: u64 = 16 * 1024 * 1024;
/// Files per executor request (each request must fit one frame).
const BATCH_FILES: usize = 512;
/// Path bytes per executor request.
const BATCH_BYTES: usize = 256 * 1024;

/// One file to edit: what the results call it, and where it is.
struct Operand {
    shown: String,
    rooted: RootedPath,
}

/// `sed` on the host.
pub async fn sed(
    app: &App,
    policy: &CallPolicy,
    req: SedRequest,
) -> Result<SedResponse, ShellError> {
    check(&req.pattern, &req.include_glob, &req.exclude_glob)?;
    if !req.regex && req.pattern.is_empty() {
        return Err(ShellError::invalid("pattern is empty"));
    }
    let operands = match (req.files.is_empty(), &req.path) {
        (false, None) => req
            .files
            .iter()
            .map(|raw| {
                Ok(Operand {
                    shown: raw.clone(),
                    rooted: resolve(policy, raw)?,
                })
            })
            .collect::<Result<Vec<_>, ShellError>>()?,
        (true, Some(raw)) => walk(app, policy, raw, &req).await?,
        _ => return Err(ShellError::invalid("pass exactly one of files or path")),
    };
    let edit = SedEdit {
        pattern: req.pattern,
        replacement: req.replacement,
        regex: req.regex,
        first_only: req.first_only,
        ignore_case: req.ignore_case,
    };
    let cap = policy.fs_max_read_bytes().unwrap_or(DEFAULT_FILE_CAP);
    let mut results = Vec::with_capacity(operands.len());
    let mut total = 0;
    for batch in batches(&operands) {
        let op = FsOp::Sed {
            files: batch.iter().map(|o| o.rooted.clone()).collect(),
            edit: edit.clone(),
            max_file_bytes: cap,
        };
        let outcomes = match app.executor.call(guarded(policy, op)).await? {
            Ok(Reply::Fs(FsReply::Sed { outcomes })) if outcomes.len() == batch.len() => outcomes,
            Ok(other) => return Err(unexpected("sed", &other)),
            Err(e) => {
                return Err(match operand_of(&e) {
                    Some((i, e)) => fail(e, batch.get(i).map_or("", |o| o.shown.as_str())),
                    None => fail(e, batch.first().map_or("", |o| o.shown.as_str())),
                })
            }
        };
        for (
            operand,
            SedOutcome {
                replacements,
                error,
            },
        ) in batch.iter().zip(outcomes)
        {
            if error.is_none() {
                total += replacements;
            }
            results.push(SedResult {
                path: operand.shown.clone(),
                replacements,
                success: error.is_none(),
                error,
            });
        }
    }
    Ok(SedResponse {
        results,
        total_replacements: total,
    })
}

/// The files beneath a directory operand (or the file itself), minus
/// protected ones, named by absolute path.
async fn walk(
    app: &App,
    policy: &CallPolicy,
    raw: &str,
    req: &SedRequest,
) -> Result<Vec<Operand>, ShellError> {
    let rooted = resolve(policy, raw)?;
    let op = FsOp::Walk {
        path: rooted.clone(),
        filter: WalkFilter {
            recursive: req.recursive,
            include: req.include_glob.clone(),
            exclude: req.exclude_glob.clone(),
        },
    };
    let mut download = Download::new(app.executor.request(guarded(policy, op)).await?);
    let mut operands = Vec::new();
    while let Some(batch) = next_batch::<String>(&mut download, raw).await? {
        for file in batch {
            let file_rooted = RootedPath {
                rel: join_rel(&rooted.rel, &file),
                ..rooted.clone()
            };
            if policy.jail().is_protected(&file_rooted) {
                continue;
            }
            operands.push(Operand {
                shown: absolute(&rooted, &file),
                rooted: file_rooted,
            });
        }
    }
    Ok(operands)
}

/// Splits the operands into requests that each fit a frame.
fn batches(operands: &[Operand]) -> Vec<&[Operand]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut bytes = 0;
    for (i, operand) in operands.iter().enumerate() {
        let size = operand.rooted.root.len() + operand.rooted.rel.len() + 16;
        if i > start && (i - start >= BATCH_FILES || bytes + size > BATCH_BYTES) {
            out.push(&operands[start..i]);
            start = i;
            bytes = 0;
        }
        bytes += size;
    }
    if start < operands.len() {
        out.push(&operands[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn operand(rel_len: usize) -> Operand {
        Operand {
            shown: String::new(),
            rooted: RootedPath::new("/r", "x".repeat(rel_len)),
        }
    }

    #[test]
    fn batches_respect_count_and_bytes() {
        let many: Vec<_> = (0..1100).map(|_| operand(1)).collect();
        let sizes: Vec<_> = batches(&many).iter().map(|b| b.len()).collect();
        assert_eq!(sizes, [512, 512, 76]);
        let big: Vec<_> = (0..3).map(|_| operand(200 * 1024)).collect();
        assert_eq!(batches(&big).len(), 3);
        assert!(batches(&[]).is_empty());
    }
}
