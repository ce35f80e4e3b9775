//! `grep`: search the regular files of a walk with ripgrep's searcher.
//!
//! Security meaning: the pattern is compiled here with a bounded program
//! size (a bad or oversized one is `BadRegex`), files are reached only
//! through the confined walk and read through the fds it opened and
//! checked, binary files (a NUL in the first 8 KiB) are skipped,
//! and each reported line is cut to `max_line_bytes`, so one chunk always
//! fits a frame. Matches stream under the broker's credit, which is how the
//! broker stops a search once it has enough.
#![forbid(unsafe_code)]

use super::channel::Channel;
use super::guard::Guard;
use super::read::read_at;
use super::walk::{files, Batcher, FileRef, Filter};
use super::Beneath;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::sinks::Bytes;
use grep_searcher::{BinaryDetection, MmapChoice, SearcherBuilder};
use ide_proto::{ErrorKind, ExecutorError, FsReply, GrepMatch, GrepSearch, RootedPath, WalkFilter};
use rustix::fd::OwnedFd;
use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

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
    is_binary_with(file, &mut [0u8; BINARY_PROBE])
}

/// [`is_binary`] with a caller's buffer of [`BINARY_PROBE`] bytes.
fn is_binary_with(file: &OwnedFd, probe: &mut [u8; BINARY_PROBE]) -> Result<bool, ExecutorError> {
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

/// Batches walked ahead of the one whose matches are being sent.
const AHEAD: usize = 8;
/// Files per search job: one hand-off (and wake-up) per batch rather than
/// per file.
const BATCH: usize = 32;
/// How often the sending side looks for a cancelled request while it waits.
const CANCEL_POLL: Duration = Duration::from_millis(100);

/// Files for a search thread, with where their matches go.
struct Job {
    files: Vec<(String, FileRef)>,
    matches: SyncSender<Vec<GrepMatch>>,
}

/// `grep`: streams the matches of every searched file, in walk order.
///
/// The walk runs on one thread and hands files in batches of [`BATCH`] to
/// the searches, one thread per core, which open and check each file
/// themselves; the calling thread sends each batch's matches in the order
/// the walk found the files, at most [`AHEAD`] batches behind the walk; a
/// cancelled or failed send stops the walk and the searches.
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
    let stop = AtomicBool::new(false);
    let (order_tx, order_rx) = mpsc::sync_channel::<Receiver<Vec<GrepMatch>>>(AHEAD);
    let (job_tx, job_rx) = mpsc::sync_channel::<Job>(AHEAD);
    let job_rx = Mutex::new(job_rx);
    std::thread::scope(|scope| {
        for _ in 0..searchers() {
            scope.spawn(|| search_jobs(&matcher, max_line, guard, &job_rx, &stop));
        }
        let walker = scope.spawn(|| {
            let queue = |files: Vec<(String, FileRef)>| {
                let (matches, result) = mpsc::sync_channel(1);
                // Either queue closes only when the sending side stopped.
                if order_tx.send(result).is_err() || job_tx.send(Job { files, matches }).is_err() {
                    return Err(super::channel::abandoned());
                }
                Ok(())
            };
            let mut batch = Vec::with_capacity(BATCH);
            let walked = files(at, guard, path, &filter, &mut |found| {
                if stop.load(Ordering::Relaxed) {
                    return Err(super::channel::abandoned());
                }
                batch.push((found.rel.to_owned(), found.file));
                if batch.len() == BATCH {
                    queue(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)))?;
                }
                Ok(())
            });
            let walked = match walked {
                Ok(()) if !batch.is_empty() => queue(batch),
                other => other,
            };
            drop((order_tx, job_tx));
            walked
        });
        let sent = send_in_order(order_rx, io, &stop);
        if sent.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        let walked = walker
            .join()
            .unwrap_or_else(|_| Err(ExecutorError::new(ErrorKind::Internal, "the walk failed")));
        sent.and(walked).map(|()| FsReply::Ok)
    })
}

/// Search threads: one per core, at most four.
fn searchers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
}

/// Searches files from `jobs` until the walk ends; once `stop` is set the
/// remaining files are only drained, so the walk never waits on a full queue.
fn search_jobs(
    matcher: &RegexMatcher,
    max_line: usize,
    guard: &Guard,
    jobs: &Mutex<Receiver<Job>>,
    stop: &AtomicBool,
) {
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::none())
        .heap_limit(Some(HEAP_LIMIT))
        .memory_map(MmapChoice::never())
        .build();
    let mut probe = Box::new([0u8; BINARY_PROBE]);
    loop {
        let next = jobs.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok(job) = next else { return };
        let mut found = Vec::new();
        for (rel, file) in job.files {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let Some(fd) = file.open(guard) else { continue };
            let matches = search_file(&mut searcher, matcher, max_line, fd, &mut probe);
            found.extend(matches.into_iter().map(|(line, content)| GrepMatch {
                file: rel.clone(),
                line,
                content,
            }));
        }
        // The receiver is gone only when the request stopped.
        let _ = job.matches.send(found);
    }
}

/// The matches of one file as `(line, content)`; a file that cannot be
/// read or searched (a binary file, a line past the heap limit, an i/o
/// error) has none.
fn search_file(
    searcher: &mut grep_searcher::Searcher,
    matcher: &RegexMatcher,
    max_line: usize,
    file: OwnedFd,
    probe: &mut [u8; BINARY_PROBE],
) -> Vec<(u64, String)> {
    let mut found = Vec::new();
    if is_binary_with(&file, probe).unwrap_or(true) {
        return found;
    }
    let sink = Bytes(|line, bytes| {
        found.push((line, shown_line(bytes, max_line)));
        Ok(true)
    });
    let _ = searcher.search_file(matcher, &File::from(file), sink);
    found
}

/// Sends each file's matches in walk order, in batches under credit.
fn send_in_order(
    order: Receiver<Receiver<Vec<GrepMatch>>>,
    io: &mut dyn Channel,
    stop: &AtomicBool,
) -> Result<(), ExecutorError> {
    let mut batch = Batcher::new();
    loop {
        let result = match order.recv_timeout(CANCEL_POLL) {
            Ok(result) => result,
            Err(RecvTimeoutError::Timeout) => {
                if io.cancelled() {
                    return Err(super::channel::abandoned());
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let matches = loop {
            match result.recv_timeout(CANCEL_POLL) {
                Ok(matches) => break matches,
                Err(RecvTimeoutError::Timeout) if !io.cancelled() => continue,
                Err(RecvTimeoutError::Timeout) => return Err(super::channel::abandoned()),
                // Dropped unsearched: the request is stopping.
                Err(RecvTimeoutError::Disconnected) => break Vec::new(),
            }
        };
        if io.cancelled() || stop.load(Ordering::Relaxed) {
            return Err(super::channel::abandoned());
        }
        for item in matches {
            let size = item.content.len() + item.file.len();
            batch.push(item, size, io)?;
        }
    }
    batch.flush(io)
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
