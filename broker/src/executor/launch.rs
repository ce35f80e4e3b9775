//! Bringing up a connection to an executor: either spawn our own over a
//! socketpair (the default), or connect to the path socket of an executor
//! that runs as its own service (the hardened install).

use std::io;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::Stdio;
use tokio::net::UnixStream;
use tokio::process::{Child, Command};

/// Where the executor comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// Spawn this binary and hand it one end of a socketpair.
    Spawn { program: PathBuf },
    /// Connect to an executor already listening here.
    Socket { path: PathBuf },
}

/// A live connection, plus the child process when we spawned it.
pub struct Launched {
    pub stream: UnixStream,
    pub child: Option<Child>,
}

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
        Source::Spawn { program } => spawn(program),
    }
}

fn spawn(program: &PathBuf) -> io::Result<Launched> {
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
