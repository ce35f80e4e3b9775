//! Serving one broker connection: the handshake, then concurrent requests.
//!
//! Security meaning: the broker may be compromised, so anything outside the
//! contract — a frame that does not decode, an oversized length, a first
//! frame other than `Hello` at our exact protocol version, a request id that
//! is already running or reserved for events — ends the connection with one
//! WARN and no partial state. When the connection ends for any reason, every
//! foreground command it started is killed (process group) and reaped;
//! background jobs belong to the executor ([`crate::jobs`]) and outlive it.
#![forbid(unsafe_code)]

pub mod downloads;
mod fs_work;
pub mod inflight;
pub mod uploads;
pub mod writer;

use crate::exec;
use crate::jobs::{requests as job_requests, Jobs};
use crate::request::{Cancel, Replies, Upload};
use crate::state::Executor;
use downloads::Downloads;
use fs_work::FsStreams;
use ide_proto::{
    ErrorKind, ExecSpec, ExecutorError, FrameReader, FsRequest, JobRequest, Reply, Request, Stdin,
    ToBroker, ToExecutor, EVENT_ID, PROTOCOL_VERSION,
};
use inflight::{InFlight, Refusal};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncRead;
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use uploads::Uploads;

/// How long a closed connection's requests get to stop their commands (kill
/// and reap) and flush, before they are abandoned (which still kills them).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectionEnd {
    /// The broker closed the connection at a frame boundary.
    Closed,
    /// The broker broke the contract (already logged as a WARN).
    Violation(String),
}

/// Serves `stream` until the broker closes it or breaks the contract, with
/// the process's job table ([`Jobs::process`]).
pub async fn serve_connection(executor: Arc<Executor>, stream: UnixStream) -> ConnectionEnd {
    serve_with(executor, Jobs::process(), stream).await
}

/// [`serve_connection`] with a given job table. After the hello, the
/// connection receives every completion no broker acknowledged yet.
pub async fn serve_with(
    executor: Arc<Executor>,
    jobs: Arc<Jobs>,
    stream: UnixStream,
) -> ConnectionEnd {
    let (mut rd, wr) = stream.into_split();
    let (tx, mut writer) = writer::spawn(wr);
    let mut frames = FrameReader::default();
    let end = match handshake(&mut frames, &mut rd, &tx).await {
        Ok(()) => {
            let attachment = jobs.attach(tx.clone());
            let conn = (jobs, attachment.conn());
            let end = serve_requests(executor, conn, &mut frames, &mut rd, &tx).await;
            drop(attachment);
            end
        }
        Err(end) => end,
    };
    if let ConnectionEnd::Violation(reason) = &end {
        tracing::warn!("protocol violation, closing the broker connection: {reason}");
    }
    drop(tx);
    if tokio::time::timeout(SHUTDOWN_GRACE, &mut writer)
        .await
        .is_err()
    {
        writer.abort();
    }
    end
}

async fn handshake<R: AsyncRead + Unpin>(
    frames: &mut FrameReader,
    rd: &mut R,
    tx: &mpsc::Sender<ToBroker>,
) -> Result<(), ConnectionEnd> {
    let ToExecutor { id, body } = match frames.read(rd).await {
        Ok(Some(frame)) => frame,
        Ok(None) => return Err(ConnectionEnd::Closed),
        Err(e) => return Err(ConnectionEnd::Violation(e.to_string())),
    };
    match body {
        Request::Hello { version } if version == PROTOCOL_VERSION => {
            let hello = Reply::Hello {
                version,
                executor_version: env!("CARGO_PKG_VERSION").to_owned(),
                pid: std::process::id(),
            };
            let _ = tx.send(ToBroker { id, body: hello }).await;
            Ok(())
        }
        Request::Hello { version } => Err(ConnectionEnd::Violation(format!(
            "protocol version {version}, this executor speaks {PROTOCOL_VERSION}"
        ))),
        _ => Err(ConnectionEnd::Violation(
            "the first frame is not Hello".into(),
        )),
    }
}

/// Work that runs as its own task.
enum Work {
    Exec(ExecSpec, Option<Upload>),
    Fs(FsRequest, FsStreams),
    Job(JobRequest, Option<Upload>),
}

/// The job table and this connection's number in it.
type JobConn = (Arc<Jobs>, u64);

async fn serve_requests<R: AsyncRead + Unpin>(
    executor: Arc<Executor>,
    jobs: JobConn,
    frames: &mut FrameReader,
    rd: &mut R,
    tx: &mpsc::Sender<ToBroker>,
) -> ConnectionEnd {
    let inflight = InFlight::default();
    let uploads = Uploads::default();
    let downloads = Downloads::default();
    let mut tasks = JoinSet::new();
    let end = loop {
        while tasks.try_join_next().is_some() {}
        let ToExecutor { id, body } = match frames.read(rd).await {
            Ok(Some(frame)) => frame,
            Ok(None) => break ConnectionEnd::Closed,
            Err(e) => break ConnectionEnd::Violation(e.to_string()),
        };
        let work = match body {
            Request::Cancel => {
                inflight.cancel(id);
                continue;
            }
            Request::Data { data } => match uploads.push(id, data) {
                Ok(()) => continue,
                Err(overrun) => {
                    break ConnectionEnd::Violation(format!(
                        "upload {} sent more than {} frames ahead of its credit",
                        overrun.0,
                        ide_proto::STREAM_WINDOW
                    ))
                }
            },
            Request::DataEnd => {
                uploads.end(id);
                continue;
            }
            Request::Credit { chunks } => {
                downloads.grant(id, chunks);
                continue;
            }
            Request::Hello { .. } => {
                let err = ExecutorError::new(ErrorKind::Invalid, "hello was already exchanged");
                let _ = tx
                    .send(ToBroker {
                        id,
                        body: Reply::Error(err),
                    })
                    .await;
                continue;
            }
            Request::Job(request) => {
                let upload = matches!(
                    &request,
                    JobRequest::Start { spec, .. } if spec.stdin == Stdin::Upload
                )
                .then(|| uploads.open(id));
                Work::Job(request, upload)
            }
            Request::Exec(spec) => {
                let upload = (spec.stdin == Stdin::Upload).then(|| uploads.open(id));
                Work::Exec(spec, upload)
            }
            Request::Fs(request) => {
                let streams = FsStreams::open(&request, id, &uploads, &downloads);
                Work::Fs(request, streams)
            }
        };
        if id == EVENT_ID {
            break ConnectionEnd::Violation(format!(
                "request id {EVENT_ID} is reserved for events"
            ));
        }
        let cancel = match inflight.register(id) {
            Ok(cancel) => cancel,
            Err(Refusal::Duplicate) => {
                break ConnectionEnd::Violation(format!("request id {id} is already in flight"))
            }
            Err(Refusal::Busy) => {
                let err = ExecutorError::new(ErrorKind::Internal, "executor busy");
                let _ = tx
                    .send(ToBroker {
                        id,
                        body: Reply::Error(err),
                    })
                    .await;
                continue;
            }
        };
        let replies = Replies::new(id, tx.clone());
        tasks.spawn(run_request(
            (executor.clone(), jobs.clone()),
            work,
            cancel,
            (inflight.clone(), uploads.clone()),
            id,
            replies,
        ));
    };
    inflight.cancel_all();
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!("requests did not stop in time after the connection ended; abandoning them");
    }
    end
}

/// Runs one request and sends its terminal reply.
async fn run_request(
    (executor, (jobs, conn)): (Arc<Executor>, JobConn),
    work: Work,
    mut cancel: Cancel,
    (inflight, uploads): (InFlight, Uploads),
    id: u64,
    replies: Replies,
) {
    let result = match work {
        Work::Exec(spec, upload) => exec::run(&executor, spec, upload, &mut cancel, &replies)
            .await
            .map(Reply::Exited),
        Work::Fs(request, streams) => {
            fs_work::run(executor, request, streams, &mut cancel, id, &replies).await
        }
        Work::Job(request, upload) => {
            let handled = job_requests::handle(&executor, &jobs, conn, request, upload, &replies);
            tokio::select! {
                result = handled => result,
                _ = cancel.cancelled() => Err(exec::cancelled()),
            }
        }
    };
    inflight.finish(id);
    uploads.end(id);
    replies.send(result.unwrap_or_else(Reply::Error)).await;
}

#[cfg(test)]
mod tests;
