//! `shell::fs::ls` and `shell::fs::stat`.
#![forbid(unsafe_code)]

use super::path::{fail, guarded, resolve};
use super::request::{LsRequest, PathRequest};
use super::response::{EntryOut, LsResponse};
use crate::app::App;
use crate::error::ShellError;
use crate::policy::CallPolicy;
use ide_proto::{FsOp, FsReply, Reply};

/// Entries per page when the caller does not say.
pub const DEFAULT_PAGE_SIZE: u32 = 500;
/// The largest page.
pub const MAX_PAGE_SIZE: u32 = 2000;

/// The page and page size applied: page 0 reads as 1, the size is clamped.
pub fn paging(page: Option<u32>, page_size: Option<u32>) -> (u32, u32) {
    let page = page.unwrap_or(1).max(1);
    let size = page_size
        .unwrap_or(DEFAULT_PAGE_SIZE)
        .clamp(1, MAX_PAGE_SIZE);
    (page, size)
}

/// `ls` on the host.
pub async fn ls(app: &App, policy: &CallPolicy, req: LsRequest) -> Result<LsResponse, ShellError> {
    let rooted = resolve(policy, &req.path)?;
    let (page, page_size) = paging(req.page, req.page_size);
    let offset = u64::from(page - 1) * u64::from(page_size);
    let op = FsOp::Ls {
        path: rooted,
        offset,
        limit: page_size,
    };
    match app.executor.call(guarded(policy, op)).await? {
        Ok(Reply::Fs(FsReply::Listing { entries, total })) => Ok(LsResponse {
            entries: entries.into_iter().map(EntryOut::from).collect(),
            total,
            page,
            page_size,
            has_more: offset + u64::from(page_size) < total,
        }),
        Ok(other) => Err(unexpected("ls", &other)),
        Err(e) => Err(fail(e, &req.path)),
    }
}

/// `stat` on the host.
pub async fn stat(
    app: &App,
    policy: &CallPolicy,
    req: PathRequest,
) -> Result<EntryOut, ShellError> {
    let rooted = resolve(policy, &req.path)?;
    match app
        .executor
        .call(guarded(policy, FsOp::Stat { path: rooted }))
        .await?
    {
        Ok(Reply::Fs(FsReply::Entry(entry))) => Ok(entry.into()),
        Ok(other) => Err(unexpected("stat", &other)),
        Err(e) => Err(fail(e, &req.path)),
    }
}

/// A reply that does not belong to the request (a broken executor).
pub fn unexpected(op: &str, reply: &Reply) -> ShellError {
    ShellError::internal(format!("unexpected executor reply to {op}: {reply:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paging_defaults_and_clamps() {
        assert_eq!(paging(None, None), (1, 500));
        assert_eq!(paging(Some(0), Some(0)), (1, 1));
        assert_eq!(paging(Some(3), Some(10_000)), (3, 2000));
        assert_eq!(paging(Some(u32::MAX), Some(7)), (u32::MAX, 7));
    }
}
