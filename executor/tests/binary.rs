//! The real `ide-executor` binary, started the way the broker starts it: one
//! end of a socketpair inherited as `--fd N`.

use ide_proto::{
    read_frame, write_frame, EnvSpec, ExecSpec, Reply, Request, Stream, ToBroker, ToExecutor,
    PROTOCOL_VERSION,
};
use rustix::io::{fcntl_setfd, FdFlags};
use std::os::fd::{AsFd, AsRawFd};
use std::process::ExitStatus;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio::process::{Child, Command};

const LIMIT: Duration = Duration::from_secs(20);

/// Starts the binary with `fd` inherited as `--fd`.
fn start_with(fd: impl AsFd) -> Child {
    fcntl_setfd(&fd, FdFlags::empty()).unwrap();
    Command::new(env!("CARGO_BIN_EXE_ide-executor"))
        .arg("--fd")
        .arg(fd.as_fd().as_raw_fd().to_string())
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

fn start() -> (UnixStream, Child) {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let child = start_with(&theirs);
    drop(theirs);
    ours.set_nonblocking(true).unwrap();
    (UnixStream::from_std(ours).unwrap(), child)
}

async fn exit_of(mut child: Child) -> ExitStatus {
    tokio::time::timeout(LIMIT, child.wait())
        .await
        .expect("executor did not exit")
        .unwrap()
}

async fn recv(c: &mut UnixStream) -> ToBroker {
    tokio::time::timeout(LIMIT, read_frame(c))
        .await
        .unwrap()
        .unwrap()
        .expect("a frame")
}

#[tokio::test]
async fn it_serves_the_inherited_socket_and_exits_cleanly_on_eof() {
    let (mut c, child) = start();
    let hello = ToExecutor {
        id: 1,
        body: Request::Hello {
            version: PROTOCOL_VERSION,
        },
    };
    write_frame(&mut c, &hello).await.unwrap();
    assert!(matches!(recv(&mut c).await.body, Reply::Hello { .. }));
    let spec = ExecSpec {
        argv: vec!["echo".into(), "from the binary".into()],
        env: EnvSpec {
            inherit: true,
            allow: vec![],
            set: vec![],
        },
        cwd: None,
        stdin: ide_proto::Stdin::Null,
        timeout_ms: 10_000,
        max_output_bytes: 1024,
        confine: None,
    };
    write_frame(
        &mut c,
        &ToExecutor {
            id: 2,
            body: Request::Exec(spec),
        },
    )
    .await
    .unwrap();
    assert_eq!(
        recv(&mut c).await.body,
        Reply::Output {
            stream: Stream::Stdout,
            data: b"from the binary\n".to_vec()
        }
    );
    assert!(matches!(recv(&mut c).await.body, Reply::Exited(r) if r.exit_code == Some(0)));
    drop(c);
    assert_eq!(exit_of(child).await.code(), Some(0));
}

#[tokio::test]
async fn a_protocol_violation_ends_it_with_a_failure() {
    let (mut c, child) = start();
    c.write_all(&u32::MAX.to_le_bytes()).await.unwrap();
    assert_eq!(exit_of(child).await.code(), Some(1));
}

#[tokio::test]
async fn an_fd_that_is_not_a_unix_stream_is_refused() {
    let (dgram, _peer) = std::os::unix::net::UnixDatagram::pair().unwrap();
    assert_eq!(exit_of(start_with(&dgram)).await.code(), Some(1));
    let file = tempfile::tempfile().unwrap();
    assert_eq!(exit_of(start_with(&file)).await.code(), Some(1));
}
