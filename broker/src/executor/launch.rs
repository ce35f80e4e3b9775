//! Bringing up a connection to an executor: either spawn our own over a
//! socketpair (the default), or connect to the path socket of an executor
//! that runs as its own service (the hardened install). A spawned executor
//! also gets a rendezvous socket, where the next broker adopts it if this
//! one goes away (see [`super::rendezvous`]).

use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::net::UnixStream;
use tokio::process::{Child, Command};

/// Where the executor comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// Spawn this binary and hand it one end of a socketpair; with a
    /// rendezvous socket, first try to adopt the executor waiting there.
    Spawn {
        program: PathBuf,
        rendezvous: Option<Rendezvous>,
    },
    /// Connect to an executor already listening here.
    Socket { path: PathBuf },
}

/// Where a spawned executor waits for the next broker, and the one uid it
/// accepts there: the account the broker serves as (after any drop of root),
/// never root itself when the broker drops, so a root command cannot pose
/// as the broker.
#[derive(Debug, Clone)]
pub struct Rendezvous {
    pub path: PathBuf,
    pub trust_uid: u32,
}

/// A live connection, plus the child process when we spawned it.
pub struct Launched {
    pub stream: UnixStream,
    pub child: Option<Child>,
}

/// How long connecting to a rendezvous socket may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Environment variables the executor (and so every child) must never see:
/// the broker is the only holder of the engine token.
const WITHHELD_ENV: &[&str] = &["III_TOKEN"];

/// Starts or reaches an executor.
pub async fn launch(source: &Source) -> io::Result<Launched> {
    match source {
        Source::Socket { path } => Ok(Launched {
            stream: UnixStream::connect(path).await?,
            child: None,
        }),
        Source::Spawn {
            program,
            rendezvous,
        } => spawn(program, rendezvous.as_ref()),
    }
}

/// Connects to an executor waiting on a rendezvous socket, if one is there,
/// as the trusted uid (see [`connect_as`]).
pub async fn connect_rendezvous(rendezvous: &Rendezvous) -> Option<UnixStream> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let (path, uid) = (rendezvous.path.clone(), rendezvous.trust_uid);
    std::thread::Builder::new()
        .name("ide-rendezvous".into())
        .spawn(move || {
            let _ = tx.send(connect_as(&path, uid));
        })
        .ok()?;
    match tokio::time::timeout(CONNECT_TIMEOUT, rx).await {
        Ok(Ok(Ok(stream))) => {
            stream.set_nonblocking(true).ok()?;
            UnixStream::from_std(stream).ok()
        }
        Ok(Ok(Err(e))) => {
            tracing::debug!("no executor on {}: {e}", rendezvous.path.display());
            None
        }
        _ => None,
    }
}

/// Connects to `path` with effective uid `uid`, from the calling thread
/// only: the kernel records the connecting credentials, and the executor
/// serves nobody but `uid`. Call it from a thread of its own that ends
/// right after (Linux credentials are per thread; the process keeps its own).
fn connect_as(path: &Path, uid: u32) -> io::Result<std::os::unix::net::UnixStream> {
    let uid = rustix::process::Uid::from_raw(uid);
    if rustix::process::geteuid() != uid {
        rustix::thread::set_thread_res_uid(None, uid, None)?;
    }
    std::os::unix::net::UnixStream::connect(path)
}

fn spawn(program: &PathBuf, rendezvous: Option<&Rendezvous>) -> io::Result<Launched> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    // The executor's end must survive exec; ours stays close-on-exec. The
    // broker spawns nothing else, so no other child can inherit it.
    rustix::io::fcntl_setfd(&theirs, rustix::io::FdFlags::empty())?;
    let mut cmd = Command::new(program);
    cmd.arg("--fd")
        .arg(theirs.as_raw_fd().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    if let Some(rendezvous) = rendezvous {
        cmd.arg("--listen")
            .arg(&rendezvous.path)
            .arg("--trust-uid")
            .arg(rendezvous.trust_uid.to_string());
    }
    for key in WITHHELD_ENV {
        cmd.env_remove(key);
    }
    let child = cmd.spawn().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot start executor {}: {e}", program.display()),
        )
    })?;
    drop(theirs);
    ours.set_nonblocking(true)?;
    Ok(Launched {
        stream: UnixStream::from_std(ours)?,
        child: Some(child),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[tokio::test]
    async fn the_rendezvous_is_reached_as_the_trusted_uid_from_its_own_thread() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        let path = dir.path().join("sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let me = rustix::process::geteuid();
        let trusted = if me.is_root() { 65534 } else { me.as_raw() };
        let rendezvous = Rendezvous {
            path: path.clone(),
            trust_uid: trusted,
        };
        let stream = connect_rendezvous(&rendezvous).await.expect("connected");
        let (peer, _) = listener.accept().unwrap();
        let cred = rustix::net::sockopt::socket_peercred(&peer).unwrap();
        assert_eq!(
            cred.uid.as_raw(),
            trusted,
            "the executor sees the trusted uid"
        );
        assert_eq!(
            rustix::process::geteuid(),
            me,
            "the process kept its own uid"
        );
        drop((stream, peer, listener));
        std::fs::remove_file(&path).unwrap();
        assert!(
            connect_rendezvous(&rendezvous).await.is_none(),
            "nothing listens"
        );
    }
}
