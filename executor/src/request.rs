//! What one request's handler is given: a sink for its replies and the signal
//! that it was cancelled.
//!
//! Security meaning: replies only ever carry the id of the request they
//! answer, and the cancel signal also fires when the broker's connection is
//! gone (the sender is dropped), so no command outlives the connection that
//! asked for it.
#![forbid(unsafe_code)]

use ide_proto::{Reply, ToBroker, STREAM_WINDOW};
use tokio::sync::{mpsc, oneshot};

/// Sends replies for one request id into the connection's single writer.
#[derive(Debug, Clone)]
pub struct Replies {
    id: u64,
    tx: mpsc::Sender<ToBroker>,
}

impl Replies {
    /// A sink for request `id` feeding the writer behind `tx`.
    pub fn new(id: u64, tx: mpsc::Sender<ToBroker>) -> Self {
        Self { id, tx }
    }

    /// Queues one reply, waiting while the writer is behind (backpressure on
    /// the command's output). False when the connection is gone.
    pub async fn send(&self, body: Reply) -> bool {
        self.tx.send(ToBroker { id: self.id, body }).await.is_ok()
    }
}

/// Frames credited back to the broker at once: half the window, so the
/// broker always has room to send while a credit is on its way, at one
/// credit frame per batch instead of one per data frame.
const CREDIT_BATCH: u32 = STREAM_WINDOW / 2;

/// The body of one upload, frame by frame. Frames taken are credited back
/// to the broker through [`Upload::next`], which keeps the window moving.
#[derive(Debug)]
pub struct Upload {
    rx: mpsc::Receiver<Vec<u8>>,
    uncredited: u32,
}

impl Upload {
    /// Wraps the receiving end of an upload channel.
    pub fn new(rx: mpsc::Receiver<Vec<u8>>) -> Self {
        Self { rx, uncredited: 0 }
    }

    /// The next frame without crediting it (for tests and for readers that
    /// credit in batches).
    pub async fn recv(&mut self) -> Option<Vec<u8>> {
        self.rx.recv().await
    }

    /// The next frame; every [`CREDIT_BATCH`] frames taken are credited to
    /// the broker. `None` at the end.
    pub async fn next(&mut self, replies: &Replies) -> Option<Vec<u8>> {
        let data = self.rx.recv().await?;
        self.uncredited += 1;
        if self.uncredited >= CREDIT_BATCH {
            let chunks = std::mem::take(&mut self.uncredited);
            replies.send(Reply::Credit { chunks }).await;
        }
        Some(data)
    }
}

/// Fires once when the request is cancelled or its connection ends.
#[derive(Debug)]
pub struct Cancel {
    rx: Option<oneshot::Receiver<()>>,
}

/// Cancels the paired [`Cancel`] when sent to or dropped.
pub type CancelHandle = oneshot::Sender<()>;

impl Cancel {
    /// A linked handle and signal.
    pub fn pair() -> (CancelHandle, Cancel) {
        let (tx, rx) = oneshot::channel();
        (tx, Cancel { rx: Some(rx) })
    }

    /// Resolves once cancelled; safe to await again afterwards (it returns at
    /// once).
    pub async fn cancelled(&mut self) {
        if let Some(rx) = self.rx.as_mut() {
            let _ = rx.await;
            self.rx = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn dropping_the_handle_cancels_and_stays_cancelled() {
        let (handle, mut cancel) = Cancel::pair();
        drop(handle);
        tokio::time::timeout(Duration::from_secs(5), cancel.cancelled())
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(5), cancel.cancelled())
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn an_untouched_handle_does_not_cancel() {
        let (_handle, mut cancel) = Cancel::pair();
        let waited = tokio::time::timeout(Duration::from_millis(50), cancel.cancelled()).await;
        assert!(waited.is_err());
    }

    #[tokio::test]
    async fn replies_carry_their_request_id() {
        let (tx, mut rx) = mpsc::channel(4);
        assert!(
            Replies::new(9, tx)
                .send(Reply::Chunk { data: vec![1] })
                .await
        );
        assert_eq!(
            rx.recv().await.unwrap(),
            ToBroker {
                id: 9,
                body: Reply::Chunk { data: vec![1] }
            }
        );
    }
}
