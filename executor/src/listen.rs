//! The hardened install: the executor runs as its own service and listens on
//! a path socket for one broker at a time.
//!
//! Security meaning: the socket lives in a directory no group or other user
//! can even traverse (never an abstract name, which anyone in the network
//! namespace could reach), and a connection is served only when the kernel's
//! `SO_PEERCRED` uid equals the operator's `--trust-uid` exactly — so a root
//! command the executor itself spawned cannot pose as the broker. A second
//! connection while one is being served is refused.
#![forbid(unsafe_code)]

use crate::server::serve_connection;
use crate::state::Executor;
use std::fs::Permissions;
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::UnixListener;
use tokio::sync::Semaphore;

/// Binds the socket at `path`, preparing its directory: created `0700` and
/// handed to the broker's uid when missing; refused when it is anything but a
/// directory owned by us or the broker with no group/other access. A stale
/// socket is replaced; any other file at `path` is refused.
pub fn bind(path: &Path, trust_uid: u32) -> io::Result<UnixListener> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .ok_or_else(|| refuse(path, "the socket path needs a parent directory"))?;
    prepare_dir(dir, trust_uid)?;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => std::fs::remove_file(path)?,
        Ok(_) => return Err(refuse(path, "exists and is not a socket")),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(path)?;
    std::os::unix::fs::chown(path, Some(trust_uid), None)?;
    std::fs::set_permissions(path, Permissions::from_mode(0o600))?;
    Ok(listener)
}

fn prepare_dir(dir: &Path, trust_uid: u32) -> io::Result<()> {
    let meta = match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new().mode(0o700).create(dir)?;
            return std::os::unix::fs::chown(dir, Some(trust_uid), None);
        }
        other => other?,
    };
    if !meta.is_dir() {
        return Err(refuse(dir, "is not a directory (a symlink is refused too)"));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(refuse(
            dir,
            &format!(
                "is accessible to group or others (mode {:o}); it must be 0700",
                meta.mode() & 0o7777
            ),
        ));
    }
    let euid = rustix::process::geteuid().as_raw();
    if meta.uid() != euid && meta.uid() != trust_uid {
        return Err(refuse(
            dir,
            &format!("is owned by uid {}, neither us nor the broker", meta.uid()),
        ));
    }
    Ok(())
}

fn refuse(path: &Path, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("{}: {why}", path.display()),
    )
}

/// Accepts brokers forever: one at a time, and only `trust_uid`. When a broker
/// disconnects its in-flight commands are killed and the next one may connect.
pub async fn serve(executor: Arc<Executor>, listener: UnixListener, trust_uid: u32) {
    let active = Arc::new(Semaphore::new(1));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let cred = match rustix::net::sockopt::socket_peercred(&stream) {
            Ok(cred) => cred,
            Err(e) => {
                tracing::warn!("refusing a connection whose peer cannot be identified: {e}");
                continue;
            }
        };
        let (peer_uid, peer_pid) = (cred.uid.as_raw(), cred.pid.as_raw_nonzero().get());
        if peer_uid != trust_uid {
            tracing::warn!(
                peer_uid,
                peer_pid,
                "refusing a connection: peer uid {peer_uid} (pid {peer_pid}) is not the trusted broker uid {trust_uid}"
            );
            continue;
        }
        let Ok(permit) = active.clone().try_acquire_owned() else {
            tracing::warn!(
                peer_uid,
                peer_pid,
                "refusing a second broker connection while one is served"
            );
            continue;
        };
        tracing::info!(peer_pid, "broker connected");
        let executor = executor.clone();
        tokio::spawn(async move {
            let end = serve_connection(executor, stream).await;
            tracing::info!(?end, "broker disconnected; waiting for the next one");
            drop(permit);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceiling::Ceilings;
    use crate::env::EnvSnapshot;
    use ide_proto::{
        read_frame, write_frame, Reply, Request, ToBroker, ToExecutor, PROTOCOL_VERSION,
    };
    use std::path::PathBuf;
    use tokio::net::UnixStream;

    const LIMIT: Duration = Duration::from_secs(20);

    fn our_uid() -> u32 {
        rustix::process::geteuid().as_raw()
    }

    /// A private directory, as an operator would prepare it.
    fn private_dir() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::set_permissions(tmp.path(), Permissions::from_mode(0o700)).unwrap();
        tmp
    }

    fn start(path: &Path, trust_uid: u32) -> tokio::task::JoinHandle<()> {
        let listener = bind(path, trust_uid).unwrap();
        let executor = Arc::new(Executor {
            env: EnvSnapshot::default(),
            ceilings: Ceilings::new(&[PathBuf::from("/")]).unwrap(),
        });
        tokio::spawn(serve(executor, listener, trust_uid))
    }

    /// Says hello; `true` when the executor answered, `false` when it closed.
    async fn greet(c: &mut UnixStream) -> bool {
        let hello = ToExecutor {
            id: 1,
            body: Request::Hello {
                version: PROTOCOL_VERSION,
            },
        };
        if write_frame(c, &hello).await.is_err() {
            return false;
        }
        let reply = tokio::time::timeout(LIMIT, read_frame::<_, ToBroker>(c))
            .await
            .unwrap();
        matches!(
            reply,
            Ok(Some(ToBroker {
                body: Reply::Hello { .. },
                ..
            }))
        )
    }

    #[tokio::test]
    async fn a_missing_directory_is_created_private() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        drop(bind(&dir.join("sock"), our_uid()).unwrap());
        let meta = std::fs::metadata(&dir).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o700);
        let sock = std::fs::symlink_metadata(dir.join("sock")).unwrap();
        assert!(sock.file_type().is_socket());
        assert_eq!(sock.mode() & 0o777, 0o600);
    }

    #[tokio::test]
    async fn an_open_directory_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        for mode in [0o770, 0o705, 0o701] {
            std::fs::set_permissions(tmp.path(), Permissions::from_mode(mode)).unwrap();
            let err = bind(&tmp.path().join("sock"), our_uid()).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::PermissionDenied, "{mode:o}");
        }
    }

    #[tokio::test]
    async fn a_directory_of_a_stranger_is_refused() {
        let tmp = private_dir();
        std::os::unix::fs::chown(tmp.path(), Some(our_uid() + 4242), None).unwrap();
        let err = bind(&tmp.path().join("sock"), our_uid()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
    }

    #[tokio::test]
    async fn a_non_socket_at_the_path_is_refused_and_a_stale_socket_replaced() {
        let tmp = private_dir();
        let path = tmp.path().join("sock");
        std::fs::write(&path, b"keep").unwrap();
        assert!(bind(&path, our_uid()).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"keep");
        std::fs::remove_file(&path).unwrap();
        drop(bind(&path, our_uid()).unwrap());
        drop(bind(&path, our_uid()).unwrap());
    }

    #[tokio::test]
    async fn a_peer_with_another_uid_is_refused() {
        let tmp = private_dir();
        let path = tmp.path().join("sock");
        let server = start(&path, our_uid() + 4242);
        let mut c = UnixStream::connect(&path).await.unwrap();
        assert!(!greet(&mut c).await);
        server.abort();
    }

    #[tokio::test]
    async fn the_trusted_uid_is_served_one_connection_at_a_time() {
        let tmp = private_dir();
        let path = tmp.path().join("sock");
        let server = start(&path, our_uid());
        let mut first = UnixStream::connect(&path).await.unwrap();
        assert!(greet(&mut first).await);
        let mut second = UnixStream::connect(&path).await.unwrap();
        assert!(!greet(&mut second).await);
        drop(first);
        // The slot frees once the first connection's teardown finishes.
        let mut served = false;
        for _ in 0..100 {
            let mut next = UnixStream::connect(&path).await.unwrap();
            if greet(&mut next).await {
                served = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(served, "no broker was served after the first one left");
        server.abort();
    }
}
