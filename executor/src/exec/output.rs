//! Streaming a command's output to the broker under a per-stream cap.
//!
//! Security meaning: the cap bounds what the executor forwards and holds,
//! not what the child may write: past the cap the pipe is still read and the
//! bytes are discarded while counted, because closing it early would SIGPIPE
//! the child (losing its real exit code) or block it on a full pipe (a false
//! timeout).
#![forbid(unsafe_code)]

use crate::request::Replies;
use ide_proto::{Reply, Stream, CHUNK_LEN};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Reads `pipe` to its end, forwarding at most `cap` bytes as
/// [`Reply::Output`] chunks of at most [`CHUNK_LEN`], and counting every byte
/// into `total` as it goes (so a caller that stops waiting still has the
/// count so far).
pub async fn pump(
    mut pipe: impl AsyncRead + Unpin,
    stream: Stream,
    cap: u64,
    replies: &Replies,
    total: &mut u64,
) {
    // Read into spare capacity: a zeroed 64 KiB buffer per stream per
    // command showed up in profiles of short commands.
    let mut buf = Vec::with_capacity(CHUNK_LEN);
    loop {
        buf.clear();
        let n = match pipe.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let room = cap.saturating_sub(*total);
        *total = total.saturating_add(n as u64);
        let keep = room.min(n as u64) as usize;
        if keep > 0 {
            replies
                .send(Reply::Output {
                    stream,
                    data: buf[..keep].to_vec(),
                })
                .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::mpsc;

    async fn run(input: Vec<u8>, cap: u64) -> (Vec<Vec<u8>>, u64) {
        let (tx, mut rx) = mpsc::channel(1024);
        let replies = Replies::new(1, tx);
        let mut total = 0;
        pump(&input[..], Stream::Stdout, cap, &replies, &mut total).await;
        drop(replies);
        let mut chunks = Vec::new();
        while let Some(msg) = rx.recv().await {
            match msg.body {
                Reply::Output {
                    stream: Stream::Stdout,
                    data,
                } => chunks.push(data),
                other => panic!("unexpected {other:?}"),
            }
        }
        (chunks, total)
    }

    #[tokio::test]
    async fn the_cap_is_exact_and_the_rest_is_counted() {
        let input: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
        let (chunks, total) = run(input.clone(), 100_001).await;
        assert_eq!(total, 300_000);
        assert!(chunks.iter().all(|c| c.len() <= CHUNK_LEN && !c.is_empty()));
        assert_eq!(chunks.concat(), input[..100_001]);
    }

    #[tokio::test]
    async fn a_zero_cap_forwards_nothing() {
        let (chunks, total) = run(vec![1; 1000], 0).await;
        assert!(chunks.is_empty());
        assert_eq!(total, 1000);
    }

    #[tokio::test]
    async fn under_the_cap_everything_is_forwarded() {
        let (chunks, total) = run(b"hello".to_vec(), 1 << 20).await;
        assert_eq!(chunks.concat(), b"hello");
        assert_eq!(total, 5);
    }
}
