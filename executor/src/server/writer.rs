//! The one task that writes frames to the broker.
//!
//! Security meaning: every reply of every request goes through this single
//! bounded queue, so frames never interleave on the socket and a broker that
//! stops reading slows the commands down instead of growing our memory.
#![forbid(unsafe_code)]

use ide_proto::{write_owned, FrameError, ToBroker};
use tokio::io::AsyncWrite;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Frames queued for the writer before senders wait.
pub const WRITE_QUEUE: usize = 64;

/// Starts the writer on `sink`; it ends when every sender is dropped or the
/// socket fails.
pub fn spawn<W>(mut sink: W) -> (mpsc::Sender<ToBroker>, JoinHandle<()>)
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel::<ToBroker>(WRITE_QUEUE);
    let task = tokio::spawn(async move {
        while let Some(msg) = rx.recv().await {
            let id = msg.id;
            match write_owned(&mut sink, msg).await {
                Ok(()) => {}
                Err(FrameError::Io(e)) => {
                    tracing::debug!("the broker connection cannot be written: {e}");
                    break;
                }
                Err(e) => tracing::error!(id, "reply dropped: {e}"),
            }
        }
    });
    (tx, task)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ide_proto::{read_frame, Reply};

    #[tokio::test]
    async fn frames_arrive_whole_and_in_order() {
        let (a, mut b) = tokio::io::duplex(1 << 16);
        let (tx, task) = spawn(a);
        for id in 1..=3u64 {
            tx.send(ToBroker {
                id,
                body: Reply::Chunk {
                    data: vec![id as u8; 100_000],
                },
            })
            .await
            .unwrap();
        }
        drop(tx);
        for id in 1..=3u64 {
            let got: ToBroker = read_frame(&mut b).await.unwrap().unwrap();
            assert_eq!(
                got,
                ToBroker {
                    id,
                    body: Reply::Chunk {
                        data: vec![id as u8; 100_000]
                    }
                }
            );
        }
        task.await.unwrap();
        assert!(read_frame::<_, ToBroker>(&mut b).await.unwrap().is_none());
    }
}
