//! A job's captured output: the newest bytes of stdout and stderr, filled by
//! draining its pipes for as long as it runs.
//!
//! Security meaning: the pipes are read to their end whatever the cap (so a
//! chatty job never blocks or dies of SIGPIPE), while what is kept stays
//! within the cap (see [`Tail`]), which is itself capped at
//! [`MAX_KEPT_PER_STREAM`] whatever the broker asks.
#![forbid(unsafe_code)]

use super::tail::Tail;
use ide_proto::{OutputSlice, Stream, CHUNK_LEN};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::io::{AsyncRead, AsyncReadExt};

/// The most a job keeps of one stream, whatever `max_output_bytes` says.
pub const MAX_KEPT_PER_STREAM: u64 = 256 * 1024 * 1024;

/// Both streams of one job.
#[derive(Debug)]
pub struct Output {
    stdout: Mutex<Tail>,
    stderr: Mutex<Tail>,
}

impl Output {
    /// Empty streams keeping at most `cap` bytes each.
    pub fn new(cap: u64) -> Arc<Self> {
        // At most MAX_KEPT_PER_STREAM, so it fits in usize.
        let cap = cap.min(MAX_KEPT_PER_STREAM) as usize;
        Arc::new(Self {
            stdout: Mutex::new(Tail::new(cap)),
            stderr: Mutex::new(Tail::new(cap)),
        })
    }

    fn tail(&self, stream: Stream) -> MutexGuard<'_, Tail> {
        match stream {
            Stream::Stdout => &self.stdout,
            Stream::Stderr => &self.stderr,
        }
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends bytes the job wrote (or that were reported for it).
    pub fn push(&self, stream: Stream, data: &[u8]) {
        self.tail(stream).push(data);
    }

    /// Appends an explanatory line of ours, on a line of its own.
    pub fn note(&self, stream: Stream, line: &str) {
        let mut tail = self.tail(stream);
        let (_, last) = tail.window(Some(tail.total().saturating_sub(1)), Some(1));
        if !last.is_empty() && last != b"\n" {
            tail.push(b"\n");
        }
        tail.push(line.as_bytes());
    }

    /// Bytes of `stream` no longer kept.
    pub fn dropped(&self, stream: Stream) -> u64 {
        self.tail(stream).dropped()
    }

    /// A window of `stream` (see [`Tail::window`]).
    pub fn window(
        &self,
        stream: Stream,
        offset: Option<u64>,
        max: Option<u64>,
    ) -> (OutputSlice, Vec<u8>) {
        self.tail(stream).window(offset, max)
    }
}

/// Reads `pipe` to its end into `stream` of `output`.
pub async fn drain(mut pipe: impl AsyncRead + Unpin, output: &Output, stream: Stream) {
    let mut buf = vec![0u8; CHUNK_LEN];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => output.push(stream, &buf[..n]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_pipe_is_drained_whole_and_only_the_newest_bytes_are_kept() {
        let output = Output::new(10);
        let input: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        drain(&input[..], &output, Stream::Stdout).await;
        let (slice, bytes) = output.window(Stream::Stdout, None, None);
        assert_eq!(slice.total, 100_000);
        assert_eq!(slice.dropped, 99_990);
        assert_eq!(bytes, input[99_990..]);
        assert_eq!(output.dropped(Stream::Stderr), 0);
    }

    #[test]
    fn notes_start_on_a_line_of_their_own() {
        let output = Output::new(100);
        output.note(Stream::Stderr, "first\n");
        output.push(Stream::Stderr, b"partial");
        output.note(Stream::Stderr, "second\n");
        let (_, bytes) = output.window(Stream::Stderr, None, None);
        assert_eq!(bytes, b"first\npartial\nsecond\n");
    }

    #[test]
    fn the_cap_is_floored() {
        let output = Output::new(u64::MAX);
        output.push(Stream::Stdout, b"x");
        assert_eq!(output.window(Stream::Stdout, None, None).1, b"x");
    }
}
