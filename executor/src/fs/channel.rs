//! The streams of one filesystem request, seen from the blocking thread that
//! runs it: chunks out under the broker's credit, upload frames in, and
//! whether the request was abandoned.
//!
//! Security meaning: a download never runs more than
//! [`ide_proto::STREAM_WINDOW`] chunks ahead of what the broker consumed, so
//! neither process ever holds a whole file; and the end of an upload is told
//! apart from a cancelled request, so a write whose caller went away is never
//! committed half-received.
#![forbid(unsafe_code)]

use crate::request::{Replies, Upload};
use ide_proto::{ErrorKind, ExecutorError, Reply};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::runtime::Handle;
use tokio::sync::Semaphore;

/// What a filesystem operation may stream. Implemented by [`Io`] for real
/// requests and by recording fakes in tests.
pub trait Channel {
    /// Sends one chunk (at most one frame), waiting for the broker's credit.
    fn send(&mut self, chunk: Vec<u8>) -> Result<(), ExecutorError>;
    /// The next frame of the upload; `None` once the broker ended it.
    fn receive(&mut self) -> Result<Option<Vec<u8>>, ExecutorError>;
    /// True once the request was abandoned (stop early, commit nothing).
    fn cancelled(&self) -> bool;
}

/// The error of an abandoned request.
pub fn abandoned() -> ExecutorError {
    ExecutorError::new(ErrorKind::Internal, "cancelled")
}

/// The streams of one request on a live connection.
pub struct Io {
    runtime: Handle,
    replies: Replies,
    credit: Option<Arc<Semaphore>>,
    upload: Option<Upload>,
    cancelled: Arc<AtomicBool>,
}

impl Io {
    /// Streams for one request: `credit` when it downloads, `upload` when a
    /// body follows it; `cancelled` is set by the server before the upload is
    /// torn down, so an end of frames caused by a cancel is never mistaken
    /// for the broker's `DataEnd`.
    pub fn new(
        runtime: Handle,
        replies: Replies,
        credit: Option<Arc<Semaphore>>,
        upload: Option<Upload>,
        cancelled: Arc<AtomicBool>,
    ) -> Io {
        Io {
            runtime,
            replies,
            credit,
            upload,
            cancelled,
        }
    }
}

impl Channel for Io {
    fn send(&mut self, chunk: Vec<u8>) -> Result<(), ExecutorError> {
        let credit = self.credit.as_ref().ok_or_else(|| {
            ExecutorError::new(ErrorKind::Internal, "this request has no download stream")
        })?;
        match self.runtime.block_on(credit.acquire()) {
            Ok(permit) => permit.forget(),
            Err(_) => return Err(abandoned()),
        }
        if self.cancelled() {
            return Err(abandoned());
        }
        if self
            .runtime
            .block_on(self.replies.send(Reply::Chunk { data: chunk }))
        {
            Ok(())
        } else {
            Err(abandoned())
        }
    }

    fn receive(&mut self) -> Result<Option<Vec<u8>>, ExecutorError> {
        let upload = self
            .upload
            .as_mut()
            .ok_or_else(|| ExecutorError::new(ErrorKind::Internal, "this request has no upload"))?;
        let frame = self.runtime.block_on(upload.next(&self.replies));
        if self.cancelled() {
            return Err(abandoned());
        }
        Ok(frame)
    }

    fn cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
pub mod fake {
    //! A recording [`Channel`] for unit tests.
    use super::*;
    use std::collections::VecDeque;

    /// Records what was sent and plays back an upload.
    #[derive(Debug, Default)]
    pub struct Recorder {
        pub sent: Vec<Vec<u8>>,
        pub upload: VecDeque<Vec<u8>>,
        /// Pretend the request is abandoned once the upload runs dry.
        pub cancel_at_end: bool,
        /// Refuse sends after this many chunks (a caller that went away).
        pub send_limit: Option<usize>,
    }

    impl Recorder {
        /// A recorder that will play back `frames` as an upload.
        pub fn uploading(frames: &[&[u8]]) -> Recorder {
            Recorder {
                upload: frames.iter().map(|f| f.to_vec()).collect(),
                ..Recorder::default()
            }
        }

        /// Every packed chunk decoded as `Vec<T>` and flattened.
        pub fn unpacked<T: serde::de::DeserializeOwned>(&self) -> Vec<T> {
            self.sent
                .iter()
                .flat_map(|c| ide_proto::unpack::<Vec<T>>(c).unwrap())
                .collect()
        }
    }

    impl Channel for Recorder {
        fn send(&mut self, chunk: Vec<u8>) -> Result<(), ExecutorError> {
            assert!(chunk.len() <= ide_proto::MAX_FRAME_LEN - 64);
            if self.send_limit.is_some_and(|n| self.sent.len() >= n) {
                return Err(abandoned());
            }
            self.sent.push(chunk);
            Ok(())
        }

        fn receive(&mut self) -> Result<Option<Vec<u8>>, ExecutorError> {
            match self.upload.pop_front() {
                Some(frame) => Ok(Some(frame)),
                None if self.cancel_at_end => Err(abandoned()),
                None => Ok(None),
            }
        }

        fn cancelled(&self) -> bool {
            false
        }
    }
}
