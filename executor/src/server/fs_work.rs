//! Running one filesystem request: its streams, its blocking thread, and
//! what a cancel does to them.
//!
//! Security meaning: the operation runs on a blocking thread that only
//! learns of a cancel through its streams, so the order matters: the cancel
//! flag is raised first, then the download credit is closed (a sender
//! waiting for credit stops), and only afterwards does the server tear the
//! upload down, so an upload cut short by a cancel is never read as a
//! complete body and committed.
#![forbid(unsafe_code)]

use super::downloads::Downloads;
use crate::exec;
use crate::fs::channel::Io;
use crate::request::{Cancel, Replies, Upload};
use crate::state::Executor;
use ide_proto::{ErrorKind, ExecutorError, FsOp, FsRequest, Reply};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::Semaphore;

/// The streams of one filesystem request, opened when it arrived.
pub struct FsStreams {
    upload: Option<Upload>,
    credit: Option<Arc<Semaphore>>,
    downloads: Downloads,
}

/// True when the request streams chunks back (under credit).
pub fn downloads(request: &FsRequest) -> bool {
    matches!(
        request,
        FsRequest::Guarded {
            op: FsOp::Read { .. } | FsOp::Walk { .. } | FsOp::Grep { .. },
            ..
        }
    )
}

/// True when a body follows the request as `Data` frames.
pub fn uploads(request: &FsRequest) -> bool {
    matches!(
        request,
        FsRequest::Guarded {
            op: FsOp::Write { .. },
            ..
        }
    )
}

impl FsStreams {
    /// Streams for request `id`, opened before any of its frames is read.
    pub fn open(
        request: &FsRequest,
        id: u64,
        uploads_table: &super::uploads::Uploads,
        downloads_table: &Downloads,
    ) -> FsStreams {
        FsStreams {
            upload: uploads(request).then(|| uploads_table.open(id)),
            credit: downloads(request).then(|| downloads_table.open(id)),
            downloads: downloads_table.clone(),
        }
    }
}

/// Runs `request` to its terminal reply, or to [`exec::cancelled`].
pub async fn run(
    executor: Arc<Executor>,
    request: FsRequest,
    streams: FsStreams,
    cancel: &mut Cancel,
    id: u64,
    replies: &Replies,
) -> Result<Reply, ExecutorError> {
    let FsStreams {
        upload,
        credit,
        downloads,
    } = streams;
    let cancelled = Arc::new(AtomicBool::new(false));
    let mut io = Io::new(
        tokio::runtime::Handle::current(),
        replies.clone(),
        credit,
        upload,
        cancelled.clone(),
    );
    let blocking =
        tokio::task::spawn_blocking(move || crate::fs::handle(&executor, request, &mut io));
    let result = tokio::select! {
        joined = blocking => match joined {
            Ok(result) => result.map(Reply::Fs),
            Err(e) => Err(ExecutorError::new(ErrorKind::Internal, format!("fs task failed: {e}"))),
        },
        _ = cancel.cancelled() => {
            cancelled.store(true, Ordering::SeqCst);
            Err(exec::cancelled())
        }
    };
    downloads.end(id);
    result
}

#[cfg(test)]
mod tests {
    //! Streams of fs requests driven over a socket pair, as a broker would.
    use crate::ceiling::Ceilings;
    use crate::env::EnvSnapshot;
    use crate::server::{serve_connection, ConnectionEnd};
    use crate::state::Executor;
    use ide_proto::{
        read_frame, write_frame, FsOp, FsReply, FsRequest, ReadHeader, Reply, Request, RootedPath,
        ToBroker, ToExecutor, PROTOCOL_VERSION, STREAM_WINDOW,
    };
    use std::path::{Path, PathBuf};
    use std::sync::Arc;
    use std::time::Duration;
    use tokio::net::UnixStream;
    use tokio::task::JoinHandle;

    const LIMIT: Duration = Duration::from_secs(20);

    async fn connect() -> (UnixStream, JoinHandle<ConnectionEnd>) {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let executor = Arc::new(Executor {
            env: EnvSnapshot::default(),
            ceilings: Ceilings::new(&[PathBuf::from("/")]).unwrap(),
        });
        let server = tokio::spawn(serve_connection(executor, ours));
        send(
            &mut theirs,
            1,
            Request::Hello {
                version: PROTOCOL_VERSION,
            },
        )
        .await;
        assert!(matches!(recv(&mut theirs).await.body, Reply::Hello { .. }));
        (theirs, server)
    }

    async fn send(c: &mut UnixStream, id: u64, body: Request) {
        write_frame(c, &ToExecutor { id, body }).await.unwrap();
    }

    async fn recv(c: &mut UnixStream) -> ToBroker {
        tokio::time::timeout(LIMIT, read_frame(c))
            .await
            .expect("no frame in time")
            .unwrap()
            .expect("a frame")
    }

    fn at(dir: &Path, rel: &str) -> RootedPath {
        RootedPath::new(dir.to_str().unwrap(), rel)
    }

    fn guarded(op: FsOp) -> Request {
        Request::Fs(FsRequest::Guarded { deny: vec![], op })
    }

    #[tokio::test]
    async fn a_read_never_runs_ahead_of_its_credit() {
        let tmp = tempfile::tempdir().unwrap();
        let body: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
        std::fs::write(tmp.path().join("big"), &body).unwrap();
        let (mut c, _server) = connect().await;
        let read = FsOp::Read {
            path: at(tmp.path(), "big"),
            max_bytes: None,
        };
        send(&mut c, 2, guarded(read)).await;
        let mut chunks = Vec::new();
        for _ in 0..STREAM_WINDOW {
            match recv(&mut c).await.body {
                Reply::Chunk { data } => chunks.push(data),
                other => panic!("expected a chunk, got {other:?}"),
            }
        }
        let early = tokio::time::timeout(
            Duration::from_millis(300),
            read_frame::<_, ToBroker>(&mut c),
        )
        .await;
        assert!(
            early.is_err(),
            "the executor sent past its window: {early:?}"
        );
        let header: ReadHeader = ide_proto::unpack(&chunks[0]).unwrap();
        assert_eq!(header.size, body.len() as u64);
        let mut got: Vec<u8> = chunks[1..].concat();
        let terminal = loop {
            send(&mut c, 2, Request::Credit { chunks: 1 }).await;
            match recv(&mut c).await.body {
                Reply::Chunk { data } => got.extend_from_slice(&data),
                other => break other,
            }
        };
        assert_eq!(terminal, Reply::Fs(FsReply::Ok));
        assert_eq!(got, body);
    }

    #[tokio::test]
    async fn an_upload_is_committed_only_after_its_end() {
        let tmp = tempfile::tempdir().unwrap();
        let (mut c, _server) = connect().await;
        let write = |rel: &str| FsOp::Write {
            path: at(tmp.path(), rel),
            mode: 0o600,
            parents: false,
            max_bytes: None,
        };
        send(&mut c, 2, guarded(write("done"))).await;
        send(
            &mut c,
            2,
            Request::Data {
                data: b"all ".to_vec(),
            },
        )
        .await;
        send(
            &mut c,
            2,
            Request::Data {
                data: b"here".to_vec(),
            },
        )
        .await;
        send(&mut c, 2, Request::DataEnd).await;
        let mut credited = 0;
        let terminal = loop {
            match recv(&mut c).await.body {
                Reply::Credit { chunks } => credited += chunks,
                other => break other,
            }
        };
        assert_eq!(terminal, Reply::Fs(FsReply::Written { bytes: 8 }));
        assert_eq!(credited, 0, "credit comes in batches of half the window");
        assert_eq!(std::fs::read(tmp.path().join("done")).unwrap(), b"all here");

        send(&mut c, 3, guarded(write("cut"))).await;
        let batch = ide_proto::STREAM_WINDOW / 2;
        for _ in 0..batch {
            let data = b"partial".to_vec();
            send(&mut c, 3, Request::Data { data }).await;
        }
        assert_eq!(recv(&mut c).await.body, Reply::Credit { chunks: batch });
        send(&mut c, 3, Request::Cancel).await;
        let terminal = recv(&mut c).await.body;
        assert!(
            matches!(terminal, Reply::Error(ref e) if e.message == "cancelled"),
            "{terminal:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        let names: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["done"]);
    }
}
