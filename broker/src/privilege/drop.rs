//! Dropping the broker's root privileges once its executor runs.
//!
//! Security meaning: the broker is the process that parses everything the
//! engine sends, so it must not keep root. After the executor (which keeps
//! root) is up, the broker clears its capability bounding set, becomes the
//! broker user (no supplementary groups, real/effective/saved ids all
//! changed, process-wide), lets the kernel empty its remaining capability
//! sets, and loads [`super::filter`] on every thread (which also sets
//! `no_new_privs`). It then proves the result on every thread
//! ([`super::verify`]) and that uid 0 cannot be taken back; any failure
//! aborts the boot rather than serving half-dropped.
#![forbid(unsafe_code)]

use super::{filter, verify};
use caps::CapSet;
use nix::unistd::{Gid, Uid, User};

/// The account the broker becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

/// Looks `user` up by name, or takes it as a numeric uid (whose primary
/// group is its passwd entry's, else the same number).
pub fn resolve(user: &str) -> Result<BrokerUser, String> {
    let entry = match user.parse::<u32>() {
        Ok(uid) => User::from_uid(Uid::from_raw(uid))
            .map_err(|e| format!("broker user {user}: {e}"))?
            .map(|u| (u.name, u.uid.as_raw(), u.gid.as_raw()))
            .or(Some((user.to_owned(), uid, uid))),
        Err(_) => User::from_name(user)
            .map_err(|e| format!("broker user {user:?}: {e}"))?
            .map(|u| (u.name, u.uid.as_raw(), u.gid.as_raw())),
    };
    let (name, uid, gid) =
        entry.ok_or_else(|| format!("broker user {user:?} does not exist (see --broker-user)"))?;
    if uid == 0 || gid == 0 {
        return Err(format!(
            "broker user {user:?} is root (uid {uid}, gid {gid}); choose an unprivileged account"
        ));
    }
    Ok(BrokerUser { name, uid, gid })
}

/// Drops to `user` for good; see the module docs. Call it once the executor
/// answered, and before the engine connection is made.
pub fn drop_to(user: &BrokerUser) -> Result<(), String> {
    caps::clear(None, CapSet::Bounding).map_err(|e| format!("clearing the bounding set: {e}"))?;
    let (uid, gid) = (Uid::from_raw(user.uid), Gid::from_raw(user.gid));
    nix::unistd::setgroups(&[]).map_err(|e| format!("setgroups: {e}"))?;
    nix::unistd::setresgid(gid, gid, gid).map_err(|e| format!("setresgid: {e}"))?;
    nix::unistd::setresuid(uid, uid, uid).map_err(|e| format!("setresuid: {e}"))?;
    for set in [
        CapSet::Effective,
        CapSet::Permitted,
        CapSet::Inheritable,
        CapSet::Ambient,
    ] {
        caps::clear(None, set).map_err(|e| format!("clearing {set:?} capabilities: {e}"))?;
    }
    filter::apply().map_err(|e| format!("loading the broker's seccomp filter: {e}"))?;
    verify::all_threads(verify::Expected {
        uid: user.uid,
        gid: user.gid,
    })?;
    if nix::unistd::setresuid(Uid::from_raw(0), Uid::from_raw(0), Uid::from_raw(0)).is_ok()
        || nix::unistd::setresgid(Gid::from_raw(0), Gid::from_raw(0), Gid::from_raw(0)).is_ok()
    {
        return Err("root could be regained after the drop".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_resolve_by_name_or_number_and_root_is_refused() {
        let nobody = resolve("nobody").unwrap();
        assert_ne!(nobody.uid, 0);
        assert_eq!(resolve(&nobody.uid.to_string()).unwrap(), nobody);
        let stranger = resolve("4000000").unwrap();
        assert_eq!((stranger.uid, stranger.gid), (4_000_000, 4_000_000));
        assert!(resolve("root").unwrap_err().contains("is root"));
        assert!(resolve("0").unwrap_err().contains("is root"));
        assert!(resolve("ide-no-such-user")
            .unwrap_err()
            .contains("does not exist"));
    }

    /// Set in the child this test re-executes, which drops itself (the test
    /// process keeps its privileges).
    const CHILD_ENV: &str = "IDE_BROKER_DROP_CHILD";

    #[test]
    fn a_dropped_process_cannot_read_root_files_or_regain_root() {
        if let Some(secret) = std::env::var_os(CHILD_ENV) {
            drop_to(&resolve("nobody").unwrap()).unwrap();
            let err = std::fs::read(&secret).unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
            assert!(nix::unistd::setuid(Uid::from_raw(0)).is_err());
            assert!(std::process::Command::new("/bin/true").status().is_err());
            println!("DROPPED-CHILD-OK");
            return;
        }
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: dropping privileges needs root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, b"root only").unwrap();
        std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "privilege::drop::tests::a_dropped_process_cannot_read_root_files_or_regain_root",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &secret)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("DROPPED-CHILD-OK"),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(std::fs::read(&secret).unwrap(), b"root only");
    }
}
