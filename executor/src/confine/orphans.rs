//! Supervision without a cgroup: the executor becomes a child subreaper and
//! sweeps process trees by hand.
//!
//! Security meaning: a descendant that calls `setsid` or double-forks leaves
//! the command's process group, so a group kill misses it. As a subreaper the
//! executor inherits such orphans instead of init, so they stay findable: a
//! kill walks the command's live tree and then kills every adopted orphan.
//! Adopted orphans carry no trace of which command made them, so this
//! fallback is coarser than a cgroup: killing one command also ends the
//! escaped daemons of the others. Reaping is careful never to steal a child
//! tokio is waiting for: every spawn registers its pid under the same lock
//! the reaper holds, so a child that exits before it is registered cannot be
//! mistaken for an orphan.
#![forbid(unsafe_code)]

use rustix::process::{Pid, Signal, WaitOptions};
use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard};

/// Upper bound on the processes one sweep visits.
const MAX_SWEEP: usize = 4096;

/// Pids of the commands we spawned and have not reaped.
static SPAWNED: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// Makes orphaned descendants our children instead of init's.
pub fn adopt_orphans() -> std::io::Result<()> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    Ok(())
}

/// The registry lock; hold it across `spawn` and [`register`] the pid
/// before letting go.
pub fn lock() -> MutexGuard<'static, BTreeSet<i32>> {
    SPAWNED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Records a spawned command's pid while the lock is held.
pub fn register(spawned: &mut MutexGuard<'static, BTreeSet<i32>>, pid: i32) {
    spawned.insert(pid);
}

/// Forgets a command once it has been reaped, and reaps dead orphans.
pub fn forget(pid: i32) {
    lock().remove(&pid);
    reap_adopted();
}

/// SIGKILLs `leader`'s whole live tree, then every adopted orphan, and reaps
/// the orphans already dead. Call it only while `leader` is unreaped.
pub fn kill_tree(leader: Pid) {
    kill_descendants(leader);
    kill_adopted();
}

/// SIGKILLs `leader` and every live descendant still linked to it.
fn kill_descendants(leader: Pid) {
    let mut tree = vec![leader.as_raw_nonzero().get()];
    let mut next = 0;
    while next < tree.len() && tree.len() < MAX_SWEEP {
        let children = children_of(tree[next]);
        tree.extend(children);
        next += 1;
    }
    for pid in tree {
        signal(pid);
    }
}

/// SIGKILLs every child of ours that is not a registered command.
fn kill_adopted() {
    let spawned = lock();
    for pid in children_of(std::process::id() as i32) {
        if !spawned.contains(&pid) {
            signal(pid);
        }
    }
    reap_locked(&spawned);
}

/// Reaps adopted orphans that have exited (never a registered command).
pub fn reap_adopted() {
    reap_locked(&lock());
}

fn reap_locked(spawned: &BTreeSet<i32>) {
    for pid in children_of(std::process::id() as i32) {
        if spawned.contains(&pid) {
            continue;
        }
        if let Some(pid) = Pid::from_raw(pid) {
            let _ = rustix::process::waitpid(Some(pid), WaitOptions::NOHANG);
        }
    }
}

fn signal(pid: i32) {
    if let Some(pid) = Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(pid, Signal::KILL);
    }
}

/// The direct children of `pid`, from every thread's `children` list.
fn children_of(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_are_read_from_every_thread() {
        let mut child = std::process::Command::new("sleep")
            .arg("100")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        assert!(children_of(std::process::id() as i32).contains(&pid));
        assert!(children_of(pid).is_empty());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(children_of(i32::MAX).is_empty());
    }

    #[test]
    fn a_tree_walk_kills_descendants_outside_the_process_group() {
        let mut leader = std::process::Command::new("sh")
            .args(["-c", "setsid sleep 100 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(leader.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let escaped: i32 = line.trim().parse().unwrap();
        kill_descendants(Pid::from_raw(leader.id() as i32).unwrap());
        leader.wait().unwrap();
        let mut gone = false;
        for _ in 0..200 {
            let state = std::fs::read_to_string(format!("/proc/{escaped}/stat"));
            let dead = state.map_or(true, |s| {
                s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            });
            if dead {
                gone = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(gone, "the setsid'd grandchild {escaped} survived");
    }
}
