//! The newest bytes of one output stream of a job, with a running total.
//!
//! Security meaning: a job may write without limit for as long as it runs,
//! so the executor keeps only the newest `cap` bytes per stream (and counts
//! the rest as dropped). Memory per job is bounded by the cap, never by what
//! the command writes.
#![forbid(unsafe_code)]

use ide_proto::OutputSlice;
use std::collections::VecDeque;

/// The kept end of one stream.
#[derive(Debug, Clone, Default)]
pub struct Tail {
    cap: usize,
    kept: VecDeque<u8>,
    total: u64,
}

impl Tail {
    /// A tail keeping at most `cap` bytes.
    pub fn new(cap: usize) -> Self {
        Self {
            cap,
            kept: VecDeque::new(),
            total: 0,
        }
    }

    /// Appends what the stream wrote, dropping the oldest bytes past the cap.
    pub fn push(&mut self, data: &[u8]) {
        self.total = self.total.saturating_add(data.len() as u64);
        let data = &data[data.len().saturating_sub(self.cap)..];
        // Make room first, so the buffer never grows past the cap.
        let excess = (self.kept.len() + data.len()).saturating_sub(self.cap);
        self.kept.drain(..excess);
        self.kept.extend(data);
    }

    /// Bytes written so far.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Bytes no longer kept.
    pub fn dropped(&self) -> u64 {
        self.total - self.kept.len() as u64
    }

    /// The bytes from `offset` (clamped to what is kept; `None` is the oldest
    /// kept byte), at most `max` of them, and where they sit.
    pub fn window(&self, offset: Option<u64>, max: Option<u64>) -> (OutputSlice, Vec<u8>) {
        let first = self.dropped();
        let start = offset.unwrap_or(first).clamp(first, self.total);
        let len = (self.total - start).min(max.unwrap_or(u64::MAX));
        // Both fit in usize: they index bytes held in memory.
        let from = (start - first) as usize;
        let bytes: Vec<u8> = self
            .kept
            .range(from..from + len as usize)
            .copied()
            .collect();
        let slice = OutputSlice {
            offset: start,
            len,
            total: self.total,
            dropped: first,
        };
        (slice, bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(t: &Tail) -> Vec<u8> {
        t.window(None, None).1
    }

    #[test]
    fn under_the_cap_everything_is_kept() {
        let mut t = Tail::new(10);
        t.push(b"hello");
        t.push(b" you");
        assert_eq!(all(&t), b"hello you");
        assert_eq!((t.total(), t.dropped()), (9, 0));
    }

    #[test]
    fn past_the_cap_the_newest_bytes_are_kept_and_the_rest_counted() {
        let mut t = Tail::new(4);
        t.push(b"abc");
        t.push(b"defgh");
        assert_eq!(all(&t), b"efgh");
        assert_eq!((t.total(), t.dropped()), (8, 4));
        // One chunk larger than the cap on its own.
        t.push(&[b'x'; 100]);
        assert_eq!(all(&t), b"xxxx");
        assert_eq!((t.total(), t.dropped()), (108, 104));
    }

    #[test]
    fn a_zero_cap_keeps_nothing_but_counts() {
        let mut t = Tail::new(0);
        t.push(b"abc");
        let (slice, bytes) = t.window(Some(0), None);
        assert!(bytes.is_empty());
        assert_eq!(
            slice,
            OutputSlice {
                offset: 3,
                len: 0,
                total: 3,
                dropped: 3
            }
        );
    }

    #[test]
    fn windows_page_through_what_is_kept() {
        let mut t = Tail::new(6);
        t.push(b"0123456789");
        let (slice, bytes) = t.window(Some(5), Some(2));
        assert_eq!(bytes, b"56");
        assert_eq!(
            (slice.offset, slice.len, slice.total, slice.dropped),
            (5, 2, 10, 4)
        );
        // An offset in the dropped part starts at the oldest kept byte.
        let (slice, bytes) = t.window(Some(0), Some(3));
        assert_eq!(bytes, b"456");
        assert_eq!(slice.offset, 4);
        // Past the end: nothing, positioned at the end (a tail reader's next offset).
        let (slice, bytes) = t.window(Some(99), None);
        assert!(bytes.is_empty());
        assert_eq!((slice.offset, slice.len), (10, 0));
        let (_, bytes) = t.window(Some(8), Some(0));
        assert!(bytes.is_empty());
    }

    #[test]
    fn hostile_offsets_and_sizes_never_panic() {
        let mut t = Tail::new(3);
        t.push(b"abcdef");
        for offset in [
            None,
            Some(0),
            Some(2),
            Some(3),
            Some(5),
            Some(6),
            Some(u64::MAX),
        ] {
            for max in [None, Some(0), Some(1), Some(u64::MAX)] {
                let (slice, bytes) = t.window(offset, max);
                assert_eq!(bytes.len() as u64, slice.len);
                assert!(slice.offset >= 3 && slice.offset + slice.len <= 6);
            }
        }
    }
}
