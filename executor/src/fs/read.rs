//! `read`: stream a regular file out under the broker's credit.
//!
//! Security meaning: the object is first opened `O_PATH` (which cannot
//! trigger a device's open side effects or block on a FIFO), checked by the
//! guard and required to be a regular file; only then is exactly that inode
//! reopened for reading through its own fd (`/proc/self/fd/N`), so a swap of
//! the name in between cannot substitute another object. The stream stops at
//! the size the file had when it was opened, so a file that grows cannot
//! make the read endless or exceed the cap checked against that size.
#![forbid(unsafe_code)]

use super::channel::Channel;
use super::guard::Guard;
use super::Beneath;
use crate::errno::path_error;
use ide_proto::{ErrorKind, ExecutorError, FsReply, ReadHeader, RootedPath, CHUNK_LEN};
use rustix::fd::{AsRawFd, OwnedFd};
use rustix::fs::{FileType, Mode, OFlags, Stat, CWD};
use rustix::io::Errno;

/// Refuses anything but a regular file: a directory, FIFO, socket or device
/// is the wrong type for a byte read.
pub fn require_regular(st: &Stat) -> Result<(), ExecutorError> {
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => Ok(()),
        FileType::Directory => Err(ExecutorError::new(ErrorKind::WrongType, "is a directory")),
        _ => Err(ExecutorError::new(
            ErrorKind::WrongType,
            "not a regular file",
        )),
    }
}

/// Reopens the regular file an `O_PATH` fd refers to, for reading.
pub fn reopen_for_reading(fd: &OwnedFd) -> Result<OwnedFd, ExecutorError> {
    let own = format!("/proc/self/fd/{}", fd.as_raw_fd());
    rustix::fs::openat(
        CWD,
        own.as_str(),
        OFlags::RDONLY | OFlags::NOCTTY | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| ExecutorError::new(ErrorKind::Internal, format!("cannot reopen the file: {e}")))
}

/// Reads up to `buf.len()` bytes at `offset`, retrying interrupted calls.
pub fn read_at(fd: &OwnedFd, buf: &mut [u8], offset: u64) -> Result<usize, ExecutorError> {
    loop {
        match rustix::io::pread(fd, &mut *buf, offset) {
            Ok(n) => return Ok(n),
            Err(Errno::INTR) => continue,
            Err(e) => return Err(path_error(e)),
        }
    }
}

/// `read`: a [`ReadHeader`] chunk, then the bytes, then `Ok`. `max_bytes`
/// is checked against the size before anything is streamed.
pub fn read(
    at: &Beneath<'_>,
    guard: &Guard,
    path: &RootedPath,
    max_bytes: Option<u64>,
    io: &mut dyn Channel,
) -> Result<FsReply, ExecutorError> {
    let object = at.open(path, OFlags::PATH)?;
    guard.check(&object)?;
    let st = rustix::fs::fstat(&object).map_err(path_error)?;
    require_regular(&st)?;
    let size = u64::try_from(st.st_size).unwrap_or(0);
    if let Some(cap) = max_bytes.filter(|cap| size > *cap) {
        return Err(ExecutorError::new(
            ErrorKind::TooLarge,
            format!("file is {size} bytes, over fs.max_read_bytes ({cap})"),
        ));
    }
    let file = reopen_for_reading(&object)?;
    let header = ReadHeader {
        size,
        mode: st.st_mode & 0o7777,
        mtime: st.st_mtime,
    };
    let header = ide_proto::pack(&header)
        .map_err(|e| ExecutorError::new(ErrorKind::Internal, format!("cannot encode: {e}")))?;
    io.send(header)?;
    let mut sent = 0u64;
    let mut buf = vec![0u8; CHUNK_LEN];
    while sent < size {
        let want = usize::try_from(size - sent)
            .unwrap_or(CHUNK_LEN)
            .min(CHUNK_LEN);
        let n = read_at(&file, &mut buf[..want], sent)?;
        if n == 0 {
            break;
        }
        io.send(buf[..n].to_vec())?;
        sent += n as u64;
    }
    Ok(FsReply::Ok)
}
