//! `grep`: search the regular files of a walk with ripgrep's searcher.
//!
//! Security meaning: the pattern is compiled here with a bounded program
//! size (a bad or oversized one is `BadRegex`), files are reached only
//! through the confined walk and read through fds opened on exactly the
//! inode the walk found, binary files (a NUL in the first 8 KiB) are skipped,
//! and each reported line is cut to `max_line_bytes`, so one chunk always
//! fits a frame. Matches stream under the broker's credit, which is how the
//! broker stops a search once it has enough.
#![forbid(unsafe_code)]

use super::channel::Channel;
use super::guard::Guard;
use super::read::{read_at, reopen_for_reading};
use super::walk::{files, Batcher, Filter};
use super::Beneath;
use grep_regex::RegexMatcherBuilder;
use grep_searcher::sinks::Bytes;
use grep_searcher::{BinaryDetection, MmapChoice, SearcherBuilder};
use ide_proto::{ErrorKind, ExecutorError, FsReply, GrepMatch, GrepSearch, RootedPath, WalkFilter};
use rustix::fd::OwnedFd;
use std::fs::File;

/// Compiled-program ceiling of a pattern, in bytes.
pub const REGEX_SIZE_LIMIT: usize = 256 * 1024;
/// Longest matching line reported whole; longer ones are cut.
pub const MAX_LINE_BYTES: u32 = 256 * 1024;
/// Bytes at the start of a file that decide whether it is binary.
pub const BINARY_PROBE: usize = 8 * 1024;
/// The most a searcher buffers for one line.
const HEAP_LIMIT: usize = 16 * 1024 * 1024;

/// True when the first [`BINARY_PROBE`] bytes hold a NUL.
pub fn is_binary(file: &OwnedFd) -> Result<bool, ExecutorError> {
    let mut probe = vec![0u8; BINARY_PROBE];
    let mut filled = 0;
    while filled < probe.len() {
        let n = read_at(file, &mut probe[filled..], filled as u64)?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    Ok(probe[..filled].contains(&0))
}

/// A line without its terminator, as lossy UTF-8 cut at a char boundary to
/// `max` bytes (with `…` appended when cut).
pub fn shown_line(bytes: &[u8], max: usize) -> String {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    let text = String::from_utf8_lossy(bytes);
    if text.len() <= max {
        return text.into_owned();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

/// `grep`: streams the matches of every searched file.
pub fn grep(
    at: &Beneath<'_>,
    guard: &Guard,
    path: &RootedPath,
    filter: &WalkFilter,
    search: &GrepSearch,
    io: &mut dyn Channel,
) -> Result<FsReply, ExecutorError> {
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(search.ignore_case)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .line_terminator(Some(b'\n'))
        .build(&search.pattern)
        .map_err(|e| ExecutorError::new(ErrorKind::BadRegex, format!("invalid regex: {e}")))?;
    let filter = Filter::new(filter)?;
    let max_line = search.max_line_bytes.clamp(1, MAX_LINE_BYTES) as usize;
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::none())
        .heap_limit(Some(HEAP_LIMIT))
        .memory_map(MmapChoice::never())
        .build();
    let mut batch = Batcher::new();
    files(at, guard, path, &filter, &mut |found| {
        if io.cancelled() {
            return Err(super::channel::abandoned());
        }
        let Ok(file) = reopen_for_reading(&found.fd) else {
            return Ok(());
        };
        if is_binary(&file)? {
            return Ok(());
        }
        let mut failed = None;
        let sink = Bytes(|line, bytes| {
            let content = shown_line(bytes, max_line);
            let size = content.len() + found.rel.len();
            let item = GrepMatch {
                file: found.rel.to_owned(),
                line,
                content,
            };
            match batch.push(item, size, io) {
                Ok(()) => Ok(true),
                Err(e) => {
                    failed = Some(e);
                    Ok(false)
                }
            }
        });
        // A file that cannot be searched (a line past the heap limit, an
        // i/o error) is skipped like an unreadable one.
        let _ = searcher.search_file(&matcher, &File::from(file), sink);
        failed.map_or(Ok(()), Err)
    })?;
    batch.flush(io)?;
    Ok(FsReply::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_lose_their_terminator_and_are_cut_at_char_boundaries() {
        assert_eq!(shown_line(b"abc\r\n", 10), "abc");
        assert_eq!(shown_line(b"abc\n", 10), "abc");
        assert_eq!(shown_line(b"abcdef", 3), "abc…");
        assert_eq!(shown_line("ééé".as_bytes(), 3), "é…");
        assert_eq!(shown_line(b"a\xffb", 10), "a\u{fffd}b");
    }
}
