//! `shell::fs::write`: inline content or a channel stream, uploaded to the
//! executor as a flow-controlled body.
//!
//! Security meaning: every path of the call passes the jail, the protected
//! globs and the mode gate before any file is written; every body — inline
//! or streamed — travels as `Data` frames at most `STREAM_WINDOW` ahead of
//! the executor, which enforces `fs.max_write_bytes` as bytes arrive and
//! commits by rename only after the whole body, so nothing is half-written
//! on any error (the upload is cancelled by dropping the request).
#![forbid(unsafe_code)]

use super::listing::unexpected;
use super::mode;
use super::path::{fail, guarded, resolve};
use super::request::{ContentRef, WriteRequest};
use super::response::{WriteResponse, WrittenFile};
use crate::app::App;
use crate::error::{Class, ShellError};
use crate::executor::Uploader;
use crate::policy::CallPolicy;
use ide_proto::{FsOp, FsReply, Reply, RootedPath, CHUNK_LEN};
use iii_sdk::channels::{ChannelDirection, ChannelReader, StreamChannelRef};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The default mode of a written file.
const FILE_MODE: u32 = 0o644;
/// How long a streamed body may stay silent before the write fails.
const IDLE: Duration = Duration::from_secs(30);

/// Where a file's bytes come from.
#[derive(Debug, Clone)]
pub enum Body {
    Inline(String),
    Stream(ContentRef),
}

/// One file to write, as the caller gave it.
#[derive(Debug, Clone)]
pub struct Entry {
    pub path: String,
    pub body: Body,
    pub mode: Option<String>,
    pub parents: bool,
}

/// The files of a call and whether it used the batch form.
#[derive(Debug)]
pub struct Plan {
    pub entries: Vec<Entry>,
    pub batch: bool,
}

/// Reads `content`: a string is inline, an object a channel reference.
pub fn body(content: Value) -> Result<Body, ShellError> {
    match content {
        Value::String(text) => Ok(Body::Inline(text)),
        value @ Value::Object(_) => {
            let content: ContentRef = serde_json::from_value(value)
                .map_err(|e| ShellError::invalid(format!("bad write payload: content: {e}")))?;
            match content.direction.as_deref() {
                None | Some("read") | Some("write") => Ok(Body::Stream(content)),
                Some(other) => Err(ShellError::invalid(format!(
                    "bad write payload: content.direction {other:?} is not \"read\" or \"write\""
                ))),
            }
        }
        _ => Err(ShellError::invalid(
            "bad write payload: content must be a string or a channel reference",
        )),
    }
}

/// Checks the form of a write call: single (`path` + `content`) or batch
/// (`files`), never both, never an empty batch.
pub fn plan(req: WriteRequest) -> Result<Plan, ShellError> {
    match req.files {
        Some(files) => {
            if req.path.is_some()
                || req.content.is_some()
                || req.mode.is_some()
                || req.parents.is_some()
            {
                return Err(ShellError::invalid(
                    "pass either the single form (path, content, mode, parents) or files, not both",
                ));
            }
            if files.is_empty() {
                return Err(ShellError::invalid("files is empty"));
            }
            let entries = files
                .into_iter()
                .map(|f| {
                    Ok(Entry {
                        path: f.path,
                        body: body(f.content)?,
                        mode: f.mode,
                        parents: f.parents,
                    })
                })
                .collect::<Result<_, ShellError>>()?;
            Ok(Plan {
                entries,
                batch: true,
            })
        }
        None => {
            let (Some(path), Some(content)) = (req.path, req.content) else {
                return Err(ShellError::invalid(
                    "write needs path and content (or files: [...])",
                ));
            };
            Ok(Plan {
                entries: vec![Entry {
                    path,
                    body: body(content)?,
                    mode: req.mode,
                    parents: req.parents.unwrap_or(false),
                }],
                batch: false,
            })
        }
    }
}

/// `write` on the host: every entry is checked before the first is written.
pub async fn write(
    app: &App,
    policy: &CallPolicy,
    plan: Plan,
) -> Result<WriteResponse, ShellError> {
    let mut checked = Vec::with_capacity(plan.entries.len());
    for entry in &plan.entries {
        let mode = mode::parse(policy, entry.mode.as_deref(), FILE_MODE)?;
        let rooted = resolve(policy, &entry.path)?;
        if let (Body::Inline(text), Some(cap)) = (&entry.body, policy.fs_max_write_bytes()) {
            if text.len() as u64 > cap {
                return Err(too_large(&entry.path, cap));
            }
        }
        checked.push((rooted, mode));
    }
    let mut files = Vec::with_capacity(checked.len());
    for (entry, (rooted, mode)) in plan.entries.into_iter().zip(checked) {
        let bytes_written = upload(app, policy, &entry, rooted, mode).await?;
        files.push(WrittenFile {
            path: entry.path,
            bytes_written,
        });
    }
    let total = files.iter().map(|f| f.bytes_written).sum();
    Ok(if plan.batch {
        WriteResponse {
            bytes_written: total,
            path: String::new(),
            files,
        }
    } else {
        WriteResponse {
            bytes_written: total,
            path: files.pop().map(|f| f.path).unwrap_or_default(),
            files: Vec::new(),
        }
    })
}

fn too_large(raw: &str, cap: u64) -> ShellError {
    ShellError::new(
        Class::TooLarge,
        format!("{raw}: content exceeds fs.max_write_bytes ({cap} bytes)"),
    )
}

/// Writes one file: the request, then its body, while watching for an
/// early answer (the executor refuses or fails before the body ends).
async fn upload(
    app: &App,
    policy: &CallPolicy,
    entry: &Entry,
    rooted: RootedPath,
    mode: u32,
) -> Result<u64, ShellError> {
    let op = FsOp::Write {
        path: rooted,
        mode,
        parents: entry.parents,
        max_bytes: policy.fs_max_write_bytes(),
    };
    let mut stream = app.executor.request(guarded(policy, op)).await?;
    let uploader = stream.uploader();
    let feed = feed(app, &entry.body, &uploader);
    tokio::pin!(feed);
    let mut fed = false;
    loop {
        tokio::select! {
            reply = stream.next() => {
                return match reply? {
                    Reply::Fs(FsReply::Written { bytes }) => Ok(bytes),
                    Reply::Error(e) => Err(fail(e, &entry.path)),
                    other => Err(unexpected("write", &other)),
                };
            }
            result = &mut feed, if !fed => {
                // A feed that failed returns here, dropping the request:
                // the executor removes its temp file.
                result?;
                fed = true;
            }
        }
    }
}

/// Sends the body and its end.
async fn feed(app: &App, body: &Body, uploader: &Uploader) -> Result<(), ShellError> {
    match body {
        Body::Inline(text) => {
            uploader.send_all(text.as_bytes()).await;
            Ok(())
        }
        Body::Stream(content) => {
            let channel = StreamChannelRef {
                channel_id: content.channel_id.clone(),
                access_key: content.access_key.clone(),
                direction: ChannelDirection::Read,
            };
            let reader = ChannelReader::new(app.iii.address(), &channel);
            let reported: Arc<Mutex<Option<String>>> = Arc::default();
            let sink = reported.clone();
            reader
                .on_message(move |text| {
                    if let Ok(mut slot) = sink.lock() {
                        slot.get_or_insert(text);
                    }
                })
                .await;
            loop {
                let next = tokio::time::timeout(IDLE, reader.next_binary())
                    .await
                    .map_err(|_| {
                        ShellError::internal(format!(
                            "the content channel sent nothing for {}s",
                            IDLE.as_secs()
                        ))
                    })?
                    .map_err(|e| {
                        ShellError::internal(format!("the content channel failed: {e}"))
                    })?;
                if let Some(text) = reported.lock().ok().and_then(|mut slot| slot.take()) {
                    return Err(ShellError::internal(format!(
                        "the content channel reported an error: {text}"
                    )));
                }
                let Some(chunk) = next else { break };
                // A chunk that fits one frame is moved, not copied.
                let sent = if chunk.len() <= CHUNK_LEN {
                    uploader.send(chunk).await
                } else {
                    uploader.send_all_of(&chunk).await
                };
                if !sent {
                    // The request already ended; its reply says why.
                    return Ok(());
                }
            }
            uploader.finish().await;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(v: Value) -> WriteRequest {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_single_and_batch_forms_are_exclusive() {
        let p = plan(req(json!({"path": "a", "content": "x"}))).unwrap();
        assert!(!p.batch && p.entries.len() == 1);
        let p = plan(req(json!({"files": [{"path": "a", "content": "x"}]}))).unwrap();
        assert!(p.batch);
        for bad in [
            json!({"files": [{"path": "a", "content": "x"}], "path": "b"}),
            json!({"files": [{"path": "a", "content": "x"}], "mode": "0644"}),
            json!({"files": []}),
            json!({"path": "a"}),
            json!({"content": "x"}),
            json!({"path": "a", "content": 5}),
            json!({"path": "a", "content": {"channel_id": "c"}}),
            json!({"path": "a", "content": {"channel_id": "c", "access_key": "k", "direction": "up"}}),
        ] {
            let err = plan(req(bad.clone())).unwrap_err();
            assert_eq!(err.code().as_deref(), Some("S210"), "{bad}");
        }
    }

    #[test]
    fn content_is_inline_text_or_a_channel_reference() {
        assert!(matches!(body(json!("text")), Ok(Body::Inline(t)) if t == "text"));
        let r = body(json!({"channel_id": "c", "access_key": "k"})).unwrap();
        assert!(matches!(r, Body::Stream(c) if c.channel_id == "c" && c.direction.is_none()));
    }
}
