//! A cgroup v2 leaf per command, where the host offers one.
//!
//! Security meaning: the child joins its leaf before it can fork, so every
//! descendant — including ones that called `setsid` or double-forked out of
//! the process group — stays inside it, and one write to `cgroup.kill`
//! SIGKILLs the whole tree at once, with no pid to race. The leaf lives
//! beneath the executor's own cgroup (a delegated subtree under systemd);
//! where that is impossible the executor falls back to [`super::orphans`].
//! A leaf whose command is done and that holds no process is kept as a spare
//! and handed to a later command (making and removing a cgroup costs the
//! kernel more than running a short command): an empty leaf can only be
//! entered through its `cgroup.procs`, so the next command is again alone
//! in it.
#![forbid(unsafe_code)]

use rustix::fd::{AsRawFd, OwnedFd, RawFd};
use rustix::fs::{Mode, OFlags, CWD};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Set to `1` to ignore cgroups and use the subreaper fallback; read once, so
/// tests and operators can exercise the path a host without cgroup v2 takes.
pub const FORCE_FALLBACK_ENV: &str = "IDE_EXECUTOR_FORCE_NO_CGROUP";

/// Leaves that still held processes when their command was done (a
/// background process of a command that exited normally); removed once empty.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Empty leaves kept for later commands, at most [`SPARE_LEAVES`].
static SPARE: Mutex<Vec<Leaf>> = Mutex::new(Vec::new());

/// Enough for the commands that usually run at once; more are removed.
const SPARE_LEAVES: usize = 32;

/// Our own cgroup directory in a cgroup v2 hierarchy that has `cgroup.kill`
/// and lets us create children.
#[derive(Debug, Clone)]
pub struct Hierarchy {
    dir: PathBuf,
}

impl Hierarchy {
    /// Finds our cgroup v2 directory and proves a leaf can be made and
    /// killed there; `None` means the fallback.
    pub fn detect() -> Option<Hierarchy> {
        if std::env::var(FORCE_FALLBACK_ENV).as_deref() == Ok("1") {
            return None;
        }
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let dir = locate(own_path(&own)?, &v2_mounts(&mounts))?;
        let hierarchy = Hierarchy { dir };
        hierarchy.remove_stale_leaves();
        let probe = hierarchy.create_leaf().ok()?;
        let killable = probe.dir.join("cgroup.kill").exists();
        drop(probe);
        killable.then_some(hierarchy)
    }

    /// Removes the empty leaves of executors that are gone (killed before
    /// their last command's background processes ended).
    fn remove_stale_leaves(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let owner = name
                .to_str()
                .and_then(|n| n.strip_prefix("ide-"))
                .and_then(|rest| rest.split_once('-'))
                .and_then(|(pid, _)| pid.parse::<u32>().ok());
            if let Some(pid) = owner {
                if !Path::new(&format!("/proc/{pid}")).exists() {
                    // Fails, and is left alone, while processes remain.
                    let _ = std::fs::remove_dir(entry.path());
                }
            }
        }
    }

    /// The directory leaves are created in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Hands out an empty leaf, a spare or a fresh one, with its
    /// `cgroup.procs` open for the child to join.
    pub fn create_leaf(&self) -> io::Result<Leaf> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let spare = SPARE.lock().ok().and_then(|mut s| s.pop());
        if let Some(leaf) = spare.filter(|l| l.dir.starts_with(&self.dir)) {
            return Ok(leaf);
        }
        prune_pending();
        let pid = std::process::id();
        let mut last = io::Error::from(io::ErrorKind::AlreadyExists);
        for _ in 0..8 {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir = self.dir.join(format!("ide-{pid}-{n}"));
            match std::fs::create_dir(&dir) {
                Ok(()) => return Leaf::open(dir),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }
}

/// One command's cgroup.
#[derive(Debug)]
pub struct Leaf {
    dir: PathBuf,
    procs: OwnedFd,
}

/// A leaf whose command is done: kept as a spare when empty, removed (now
/// or once it empties) otherwise.
#[derive(Debug)]
pub struct Done(Option<Leaf>);

impl From<Leaf> for Done {
    fn from(leaf: Leaf) -> Done {
        Done(Some(leaf))
    }
}

impl Done {
    /// The leaf, while it is held.
    pub fn leaf(&self) -> Option<&Leaf> {
        self.0.as_ref()
    }
}

impl Drop for Done {
    fn drop(&mut self) {
        let Some(leaf) = self.0.take() else {
            return;
        };
        if leaf.populated().is_ok_and(|p| !p) {
            if let Ok(mut spare) = SPARE.lock() {
                if spare.len() < SPARE_LEAVES {
                    spare.push(leaf);
                    return;
                }
            }
        }
        drop(leaf);
    }
}

impl Leaf {
    fn open(dir: PathBuf) -> io::Result<Leaf> {
        let procs = rustix::fs::openat(
            CWD,
            dir.join("cgroup.procs"),
            OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::empty(),
        );
        match procs {
            Ok(procs) => Ok(Leaf { dir, procs }),
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                Err(e.into())
            }
        }
    }

    /// The fd the child writes `0` to, joining the leaf.
    pub fn procs_fd(&self) -> RawFd {
        self.procs.as_raw_fd()
    }

    /// SIGKILLs every process in the leaf.
    pub fn kill(&self) -> io::Result<()> {
        std::fs::write(self.dir.join("cgroup.kill"), b"1")
    }

    /// True while any process is in the leaf.
    pub fn populated(&self) -> io::Result<bool> {
        let events = std::fs::read_to_string(self.dir.join("cgroup.events"))?;
        Ok(events.lines().any(|l| l == "populated 1"))
    }

    /// The leaf's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Leaf {
    /// Removes the leaf, or keeps it for later while processes remain.
    fn drop(&mut self) {
        if std::fs::remove_dir(&self.dir).is_err() && self.dir.exists() {
            if let Ok(mut pending) = PENDING.lock() {
                pending.push(std::mem::take(&mut self.dir));
            }
        }
    }
}

/// Removes the pending leaves that have emptied.
fn prune_pending() {
    if let Ok(mut pending) = PENDING.lock() {
        pending.retain(|dir| std::fs::remove_dir(dir).is_err() && dir.exists());
    }
}

/// True when any cgroup2 hierarchy is mounted.
pub fn v2_mounted() -> bool {
    std::fs::read_to_string("/proc/self/mountinfo").is_ok_and(|m| !v2_mounts(&m).is_empty())
}

/// The path of our cgroup in the v2 hierarchy (`0::/path` in
/// `/proc/self/cgroup`).
fn own_path(proc_self_cgroup: &str) -> Option<&str> {
    proc_self_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .filter(|p| p.starts_with('/'))
}

/// `(root, mount point)` of every cgroup2 mount in `/proc/self/mountinfo`.
fn v2_mounts(mountinfo: &str) -> Vec<(String, PathBuf)> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (fields, fs) = line.split_once(" - ")?;
            if fs.split(' ').next() != Some("cgroup2") {
                return None;
            }
            let mut f = fields.split(' ');
            let root = f.nth(3)?;
            let mount_point = f.next()?;
            Some((unescape(root), PathBuf::from(unescape(mount_point))))
        })
        .collect()
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)))
            .and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok());
        match octal {
            Some(b) => {
                out.push(b);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where our cgroup `own` appears in one of the `mounts`.
fn locate(own: &str, mounts: &[(String, PathBuf)]) -> Option<PathBuf> {
    mounts.iter().find_map(|(root, mount_point)| {
        let rest = Path::new(own).strip_prefix(root).ok()?;
        let dir = if rest.as_os_str().is_empty() {
            mount_point.clone()
        } else {
            mount_point.join(rest)
        };
        dir.is_dir().then_some(dir)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
50 31 0:40 /sub /mnt/with\\040space rw - cgroup2 cgroup2 rw";

    #[test]
    fn the_v2_entry_of_proc_self_cgroup_is_found() {
        assert_eq!(
            own_path("4:memory:/x\n0::/system.slice/ide.service\n"),
            Some("/system.slice/ide.service")
        );
        assert_eq!(own_path("1:cpu:/\n"), None);
        assert_eq!(own_path("0::relative\n"), None);
    }

    #[test]
    fn only_cgroup2_mounts_are_read_and_escapes_are_undone() {
        assert_eq!(
            v2_mounts(MOUNTINFO),
            [
                ("/".to_owned(), PathBuf::from("/sys/fs/cgroup/unified")),
                ("/sub".to_owned(), PathBuf::from("/mnt/with space")),
            ]
        );
        assert_eq!(unescape("a\\040b\\\\c\\9"), "a b\\\\c\\9");
    }

    #[test]
    fn our_directory_is_the_mount_point_joined_with_the_rest() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("svc/inner")).unwrap();
        let mounts = [("/".to_owned(), tmp.path().to_path_buf())];
        assert_eq!(
            locate("/svc/inner", &mounts),
            Some(tmp.path().join("svc/inner"))
        );
        assert_eq!(locate("/", &mounts), Some(tmp.path().to_path_buf()));
        assert_eq!(locate("/missing", &mounts), None);
        let other_root = [("/elsewhere".to_owned(), tmp.path().to_path_buf())];
        assert_eq!(locate("/svc", &other_root), None);
    }

    #[test]
    fn the_empty_leaves_of_dead_executors_are_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let dead = tmp.path().join(format!("ide-{}-1", u32::MAX - 1));
        let ours = tmp.path().join(format!("ide-{}-1", std::process::id()));
        let foreign = tmp.path().join("other-1");
        for d in [&dead, &ours, &foreign] {
            std::fs::create_dir(d).unwrap();
        }
        Hierarchy {
            dir: tmp.path().to_path_buf(),
        }
        .remove_stale_leaves();
        assert!(!dead.exists());
        assert!(ours.exists() && foreign.exists());
    }

    #[test]
    fn a_leaf_kills_everything_in_it_and_only_an_empty_one_is_reused() {
        let Some(hierarchy) = Hierarchy::detect() else {
            eprintln!("skipped: no usable cgroup v2 hierarchy with cgroup.kill here");
            return;
        };
        let leaf = hierarchy.create_leaf().unwrap();
        let dir = leaf.dir().to_path_buf();
        assert!(dir.starts_with(hierarchy.dir()));
        assert!(!leaf.populated().unwrap());
        let mut child = std::process::Command::new("sleep")
            .arg("100")
            .spawn()
            .unwrap();
        std::fs::write(dir.join("cgroup.procs"), child.id().to_string()).unwrap();
        assert!(leaf.populated().unwrap());
        leaf.kill().unwrap();
        let status = child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
        let mut emptied = false;
        for _ in 0..100 {
            if !leaf.populated().unwrap() {
                emptied = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(emptied);
        drop(Done::from(leaf));
        assert!(dir.exists(), "an empty leaf is kept as a spare");
        let again = hierarchy.create_leaf().unwrap();
        assert!(!again.populated().unwrap());
        let busy = hierarchy.create_leaf().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("100")
            .spawn()
            .unwrap();
        std::fs::write(busy.dir().join("cgroup.procs"), child.id().to_string()).unwrap();
        let busy_dir = busy.dir().to_path_buf();
        drop(Done::from(busy));
        let next = hierarchy.create_leaf().unwrap();
        assert_ne!(
            next.dir(),
            busy_dir,
            "a leaf that holds a process is never reused"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        drop((again, next));
    }
}
