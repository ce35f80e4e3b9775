//! Consuming a stream the executor sends under credit.
//!
//! Security meaning: the broker acknowledges chunks only as it consumes
//! them, so the executor never runs more than `STREAM_WINDOW` chunks ahead
//! and a slow engine-side reader slows the file read down instead of
//! growing the broker's memory.
#![forbid(unsafe_code)]

use crate::error::ShellError;
use crate::executor::ReplyStream;
use ide_proto::{ExecutorError, FsReply, Reply, Request, STREAM_WINDOW};

/// Chunks consumed before they are credited back in one frame.
const CREDIT_BATCH: u32 = STREAM_WINDOW / 2;

/// What a download produced next.
#[derive(Debug)]
pub enum Step {
    Chunk(Vec<u8>),
    Done(FsReply),
    Failed(ExecutorError),
}

/// A download in progress. Dropping it cancels the request.
pub struct Download {
    stream: ReplyStream,
    unacknowledged: u32,
}

impl Download {
    /// Wraps the reply stream of a downloading request.
    pub fn new(stream: ReplyStream) -> Download {
        Download {
            stream,
            unacknowledged: 0,
        }
    }

    /// The next step; chunks are credited back as they are consumed.
    pub async fn next(&mut self) -> Result<Step, ShellError> {
        if self.unacknowledged >= CREDIT_BATCH {
            let chunks = std::mem::take(&mut self.unacknowledged);
            self.stream.send(Request::Credit { chunks }).await?;
        }
        match self.stream.next().await? {
            Reply::Chunk { data } => {
                self.unacknowledged += 1;
                Ok(Step::Chunk(data))
            }
            Reply::Fs(reply) => Ok(Step::Done(reply)),
            Reply::Error(e) => Ok(Step::Failed(e)),
            other => Err(ShellError::internal(format!(
                "unexpected executor reply to a stream: {other:?}"
            ))),
        }
    }
}
