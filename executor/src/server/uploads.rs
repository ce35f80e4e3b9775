//! Bodies that follow a request as `Data` frames (exec stdin, file writes).
//!
//! Security meaning: the broker may keep at most `STREAM_WINDOW` frames of
//! one upload in flight before the executor credits them; a frame past that
//! window is a protocol violation, so a broker cannot make the executor
//! buffer more than one window per upload.
#![forbid(unsafe_code)]

use crate::request::Upload;
use ide_proto::STREAM_WINDOW;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::mpsc;

/// The open uploads of one connection, by request id.
#[derive(Debug, Clone, Default)]
pub struct Uploads {
    inner: Arc<Mutex<HashMap<u64, mpsc::Sender<Vec<u8>>>>>,
}

/// A `Data` frame the contract does not allow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overrun(pub u64);

impl Uploads {
    fn table(&self) -> MutexGuard<'_, HashMap<u64, mpsc::Sender<Vec<u8>>>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens the upload of request `id`.
    pub fn open(&self, id: u64) -> Upload {
        let (tx, rx) = mpsc::channel(STREAM_WINDOW as usize);
        self.table().insert(id, tx);
        Upload::new(rx)
    }

    /// Delivers one frame. Frames for an unknown id are dropped (the request
    /// may have ended before reading everything); a frame beyond the window
    /// is an overrun.
    pub fn push(&self, id: u64, data: Vec<u8>) -> Result<(), Overrun> {
        let mut table = self.table();
        let Some(tx) = table.get(&id) else {
            return Ok(());
        };
        match tx.try_send(data) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                table.remove(&id);
                Ok(())
            }
            Err(mpsc::error::TrySendError::Full(_)) => Err(Overrun(id)),
        }
    }

    /// Ends the upload of request `id` (its reader sees EOF).
    pub fn end(&self, id: u64) {
        self.table().remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_arrive_in_order_and_end_closes() {
        let uploads = Uploads::default();
        let mut up = uploads.open(3);
        uploads.push(3, vec![1]).unwrap();
        uploads.push(3, vec![2]).unwrap();
        uploads.end(3);
        assert_eq!(up.recv().await, Some(vec![1]));
        assert_eq!(up.recv().await, Some(vec![2]));
        assert_eq!(up.recv().await, None);
    }

    #[test]
    fn a_frame_beyond_the_window_is_an_overrun() {
        let uploads = Uploads::default();
        let _up = uploads.open(1);
        for _ in 0..STREAM_WINDOW {
            uploads.push(1, vec![0]).unwrap();
        }
        assert_eq!(uploads.push(1, vec![0]), Err(Overrun(1)));
    }

    #[test]
    fn frames_for_unknown_or_finished_uploads_are_dropped() {
        let uploads = Uploads::default();
        assert_eq!(uploads.push(9, vec![0]), Ok(()));
        let up = uploads.open(2);
        drop(up);
        assert_eq!(uploads.push(2, vec![0]), Ok(()));
    }
}
