//! `shell::fs::read`: the bytes go out through an SDK channel, never in the
//! response.
//!
//! Security meaning: the executor opens, checks and measures the file before
//! a channel exists, so a refused read (missing, denied, too large, not a
//! regular file) costs no channel; the bytes then flow executor → broker →
//! channel under credit, so neither process holds the file.
#![forbid(unsafe_code)]

use super::download::{Download, Step};
use super::mode::show;
use super::path::{fail, guarded, resolve};
use super::request::PathRequest;
use super::response::{ReadRef, ReadResponse};
use crate::app::App;
use crate::error::ShellError;
use crate::policy::CallPolicy;
use ide_proto::{FsOp, ReadHeader};
use iii_sdk::channels::ChannelWriter;
use serde_json::json;

/// `read` on the host.
pub async fn read(
    app: &App,
    policy: &CallPolicy,
    req: PathRequest,
) -> Result<ReadResponse, ShellError> {
    let rooted = resolve(policy, &req.path)?;
    let op = FsOp::Read {
        path: rooted,
        max_bytes: policy.fs_max_read_bytes(),
    };
    let mut download = Download::new(app.executor.request(guarded(policy, op)).await?);
    let header: ReadHeader = match download.next().await? {
        Step::Chunk(bytes) => ide_proto::unpack(&bytes)
            .map_err(|e| ShellError::internal(format!("bad read header from the executor: {e}")))?,
        Step::Failed(e) => return Err(fail(e, &req.path)),
        Step::Done(reply) => {
            return Err(ShellError::internal(format!(
                "the executor ended a read without a header: {reply:?}"
            )))
        }
    };
    let channel = iii_sdk::helpers::create_channel(&app.iii, None)
        .await
        .map_err(|e| ShellError::internal(format!("cannot create the read channel: {e}")))?;
    tokio::spawn(pump(channel.writer, download, header.size));
    let reader = channel.reader_ref;
    Ok(ReadResponse {
        content: ReadRef {
            channel_id: reader.channel_id,
            access_key: reader.access_key,
            direction: reader.direction,
        },
        size: header.size,
        mode: show(header.mode),
        mtime: header.mtime,
    })
}

/// Copies the file's chunks into the channel. The writer connects before the
/// first byte (an empty file still connects, so its reader sees a clean
/// end); a failure mid-stream is reported as one `{"error": …}` text frame
/// before the close, since a bare close would read like a complete file.
async fn pump(writer: ChannelWriter, mut download: Download, size: u64) {
    if writer.write(&[]).await.is_err() {
        return;
    }
    let mut sent = 0u64;
    let failure = loop {
        match download.next().await {
            Ok(Step::Chunk(bytes)) => {
                sent += bytes.len() as u64;
                if writer.write(&bytes).await.is_err() {
                    return;
                }
            }
            Ok(Step::Done(_)) if sent == size => break None,
            Ok(Step::Done(_)) => {
                break Some(format!(
                    "the file changed size while it was read ({sent} of {size} bytes)"
                ))
            }
            Ok(Step::Failed(e)) => break Some(e.message),
            Err(e) => break Some(e.message),
        }
    };
    if let Some(message) = failure {
        let _ = writer
            .send_message(&json!({ "error": message }).to_string())
            .await;
    }
    let _ = writer.close().await;
}
