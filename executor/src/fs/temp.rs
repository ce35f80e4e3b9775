//! Atomic replacement of a file: a sibling temp file, then a rename.
//!
//! Security meaning: the temp file is created in the already-resolved parent
//! directory with `O_CREAT | O_EXCL | O_NOFOLLOW` and mode 0600, so it can
//! neither be a pre-planted symlink nor be read by others while it fills;
//! it is fsynced and given its final mode before `renameat` puts it in place,
//! which replaces a symlink at the target instead of writing through it.
//! Until [`Temp::commit`] succeeds, dropping it removes the temp file, so no
//! error leaves a half-written file behind. While a large file fills,
//! writeback of every [`WRITEBACK_STEP`] is started at once, so the final
//! fsync waits for the tail only instead of the whole file (for a 1 GiB
//! upload here that was two seconds of a six-second write).
#![forbid(unsafe_code)]

use crate::errno::path_error;
use ide_proto::ExecutorError;
use rustix::fd::OwnedFd;
use rustix::fs::{Mode, OFlags, RenameFlags};
use std::fs::File;
use std::io::Write;

/// Bytes written between two writeback starts.
pub const WRITEBACK_STEP: u64 = 8 * 1024 * 1024;

/// A temp file beside the target, removed on drop unless committed.
pub struct Temp<'a> {
    dir: &'a OwnedFd,
    name: String,
    file: File,
    committed: bool,
    /// Bytes written so far, and the offset writeback was started up to.
    written: u64,
    flushed: u64,
}

impl<'a> Temp<'a> {
    /// Creates `<target>.tmp.<32 hex>` in `dir`.
    pub fn create(dir: &'a OwnedFd, target: &str) -> Result<Temp<'a>, ExecutorError> {
        let name = format!("{target}.tmp.{}", uuid::Uuid::new_v4().simple());
        let fd = rustix::fs::openat(
            dir,
            name.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(path_error)?;
        Ok(Temp {
            dir,
            name,
            file: File::from(fd),
            committed: false,
            written: 0,
            flushed: 0,
        })
    }

    /// Appends bytes.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), ExecutorError> {
        self.file.write_all(bytes).map_err(io_error)?;
        self.written += bytes.len() as u64;
        if self.written - self.flushed >= WRITEBACK_STEP {
            // Only a head start for the fsync in `commit`, which still
            // reports any error: a failure here changes nothing.
            let _ =
                crate::sys::start_writeback(&self.file, self.flushed, self.written - self.flushed);
            self.flushed = self.written;
        }
        Ok(())
    }

    /// The open file (for copies).
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// Flushes to disk, sets `mode` and renames over `target` (refusing an
    /// existing target when `replace` is false).
    pub fn commit(mut self, target: &str, mode: u32, replace: bool) -> Result<(), ExecutorError> {
        rustix::fs::fsync(&self.file).map_err(path_error)?;
        rustix::fs::fchmod(&self.file, Mode::from_raw_mode(mode)).map_err(path_error)?;
        let flags = if replace {
            RenameFlags::empty()
        } else {
            RenameFlags::NOREPLACE
        };
        rustix::fs::renameat_with(self.dir, self.name.as_str(), self.dir, target, flags)
            .map_err(path_error)?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for Temp<'_> {
    fn drop(&mut self) {
        if !self.committed {
            let _ =
                rustix::fs::unlinkat(self.dir, self.name.as_str(), rustix::fs::AtFlags::empty());
        }
    }
}

/// An `std::io` failure of a temp file as an executor error.
pub fn io_error(e: std::io::Error) -> ExecutorError {
    match e.raw_os_error() {
        Some(code) => path_error(rustix::io::Errno::from_raw_os_error(code)),
        None => ExecutorError::new(ide_proto::ErrorKind::Internal, format!("i/o error: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_larger_than_the_writeback_step_commits_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = rustix::fs::open(
            tmp.path(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .unwrap();
        let mut temp = Temp::create(&dir, "big").unwrap();
        let chunk: Vec<u8> = (0..64 * 1024).map(|i| (i % 251) as u8).collect();
        let chunks = (WRITEBACK_STEP as usize * 2 + 3 * chunk.len()) / chunk.len();
        for _ in 0..chunks {
            temp.write(&chunk).unwrap();
        }
        assert!(temp.flushed >= 2 * WRITEBACK_STEP && temp.flushed <= temp.written);
        temp.commit("big", 0o640, true).unwrap();
        let written = std::fs::read(tmp.path().join("big")).unwrap();
        assert_eq!(written.len(), chunks * chunk.len());
        assert!(written.chunks(chunk.len()).all(|c| c == chunk.as_slice()));
        let names: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "the temp file is gone");
    }
}
