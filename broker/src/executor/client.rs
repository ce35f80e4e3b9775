//! Request multiplexing over one executor connection, and the supervisor
//! that adopts the executor a previous broker left behind, or replaces a
//! dead one.

use super::launch::{connect_rendezvous, launch, Source};
use crate::error::ShellError;
use ide_proto::frame::{encode_owned, Encoded, FrameError};
use ide_proto::{
    write_frame, FrameReader, JobEvent, JobReply, JobRequest, Reply, Request, ToBroker, ToExecutor,
    EVENT_ID, PROTOCOL_VERSION, STREAM_WINDOW,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio::sync::{mpsc, watch, Semaphore};

/// How long a call waits for a (re)started executor before giving up.
const CONNECT_WAIT: Duration = Duration::from_secs(10);
/// How long the executor has to answer the hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// Frames queued towards the executor before senders wait.
const OUTBOX: usize = 1024;
/// How long a graceful shutdown waits for the executor to stop every job.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// Where the replies of one request go, and the upload credit the executor
/// has granted it.
struct Route {
    replies: mpsc::UnboundedSender<Reply>,
    credit: Arc<Semaphore>,
}

impl Drop for Route {
    fn drop(&mut self) {
        // An uploader waiting for credit of a finished request stops.
        self.credit.close();
    }
}

/// One live connection: an outbox of encoded frames drained by a writer
/// task, and the routes of requests in flight.
struct Conn {
    outbox: mpsc::Sender<Encoded>,
    pending: Mutex<HashMap<u64, Route>>,
    next_id: AtomicU64,
}

impl Conn {
    fn routes(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Route>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Encodes and queues one frame. A frame over the protocol's cap is the
    /// caller's error (nothing is sent; the connection stays healthy).
    async fn send(&self, frame: ToExecutor) -> Result<(), ShellError> {
        let bytes = encode_owned(frame).map_err(|e| match e {
            FrameError::TooLarge(n) => ShellError::invalid(format!(
                "request too large ({n} bytes encoded; the limit is {} bytes)",
                ide_proto::MAX_FRAME_LEN
            )),
            other => ShellError::internal(other.to_string()),
        })?;
        self.outbox.send(bytes).await.map_err(|_| unavailable())
    }
}

/// The broker's handle on the executor. Cheap to share; survives executor
/// restarts.
pub struct Executor {
    current: watch::Receiver<Option<Arc<Conn>>>,
}

/// The replies to one request, in order. Dropping it before the terminal
/// reply cancels the request in the executor.
pub struct ReplyStream {
    id: u64,
    rx: mpsc::UnboundedReceiver<Reply>,
    conn: Weak<Conn>,
    credit: Arc<Semaphore>,
    finished: bool,
}

/// Sends the body of an upload for one request, never more than
/// [`STREAM_WINDOW`] frames ahead of the executor's credit.
pub struct Uploader {
    id: u64,
    conn: Weak<Conn>,
    credit: Arc<Semaphore>,
}

impl Uploader {
    /// Sends one chunk (at most [`ide_proto::CHUNK_LEN`] bytes), waiting for
    /// credit. `false` once the request has ended (stop sending).
    pub async fn send(&self, data: Vec<u8>) -> bool {
        match self.credit.acquire().await {
            Ok(permit) => permit.forget(),
            Err(_) => return false,
        }
        let Some(conn) = self.conn.upgrade() else {
            return false;
        };
        conn.send(ToExecutor {
            id: self.id,
            body: Request::Data { data },
        })
        .await
        .is_ok()
    }

    /// Sends `bytes` in chunks, then the end marker.
    pub async fn send_all(&self, bytes: &[u8]) -> bool {
        self.send_all_of(bytes).await && self.finish().await
    }

    /// Sends `bytes` in frames of at most `CHUNK_LEN`, without ending the
    /// body; false when the request already ended.
    pub async fn send_all_of(&self, bytes: &[u8]) -> bool {
        for chunk in bytes.chunks(ide_proto::CHUNK_LEN) {
            if !self.send(chunk.to_vec()).await {
                return false;
            }
        }
        true
    }

    /// Ends the upload.
    pub async fn finish(&self) -> bool {
        let Some(conn) = self.conn.upgrade() else {
            return false;
        };
        conn.send(ToExecutor {
            id: self.id,
            body: Request::DataEnd,
        })
        .await
        .is_ok()
    }
}

impl ReplyStream {
    /// The next reply. A vanished executor is `S216`.
    pub async fn next(&mut self) -> Result<Reply, ShellError> {
        match self.rx.recv().await {
            Some(reply) => {
                if is_terminal(&reply) {
                    self.finished = true;
                }
                Ok(reply)
            }
            None => {
                self.finished = true;
                Err(ShellError::internal(
                    "the executor stopped while handling the request",
                ))
            }
        }
    }
}

impl ReplyStream {
    /// Sends a follow-up frame for this request (download credit).
    pub async fn send(&self, body: Request) -> Result<(), ShellError> {
        let conn = self.conn.upgrade().ok_or_else(unavailable)?;
        conn.send(ToExecutor { id: self.id, body }).await
    }

    /// A handle that uploads this request's body.
    pub fn uploader(&self) -> Uploader {
        Uploader {
            id: self.id,
            conn: self.conn.clone(),
            credit: self.credit.clone(),
        }
    }
}

impl Drop for ReplyStream {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        if let Some(conn) = self.conn.upgrade() {
            conn.routes().remove(&self.id);
            if let Ok(bytes) = encode_owned(ToExecutor {
                id: self.id,
                body: Request::Cancel,
            }) {
                let _ = conn.outbox.try_send(bytes);
            }
        }
    }
}

fn is_terminal(reply: &Reply) -> bool {
    !matches!(
        reply,
        Reply::Output { .. }
            | Reply::Chunk { .. }
            | Reply::Credit { .. }
            | Reply::JobEvent(_)
            | Reply::Job(JobReply::Summaries(_))
    )
}

impl Executor {
    /// Starts the supervisor on the current runtime. `events` receives what
    /// the executor reports unasked (job completions).
    pub fn start(source: Source, events: mpsc::UnboundedSender<JobEvent>) -> Arc<Executor> {
        let (tx, rx) = watch::channel(None);
        tokio::spawn(supervise(source, tx, events));
        Arc::new(Executor { current: rx })
    }

    async fn conn(&self) -> Result<Arc<Conn>, ShellError> {
        let mut rx = self.current.clone();
        let wait = async move {
            rx.wait_for(|c| c.is_some())
                .await
                .ok()
                .and_then(|c| c.clone())
        };
        match tokio::time::timeout(CONNECT_WAIT, wait).await {
            Ok(Some(conn)) => Ok(conn),
            _ => Err(unavailable()),
        }
    }

    /// Sends a request and returns its reply stream.
    pub async fn request(&self, body: Request) -> Result<ReplyStream, ShellError> {
        let conn = self.conn().await?;
        let id = conn.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::unbounded_channel();
        let credit = Arc::new(Semaphore::new(STREAM_WINDOW as usize));
        conn.routes().insert(
            id,
            Route {
                replies: tx,
                credit: credit.clone(),
            },
        );
        if let Err(e) = conn.send(ToExecutor { id, body }).await {
            conn.routes().remove(&id);
            return Err(e);
        }
        Ok(ReplyStream {
            id,
            rx,
            conn: Arc::downgrade(&conn),
            credit,
            finished: false,
        })
    }

    /// The broker is shutting down on purpose: the executor stops every
    /// background job (and, if we started it, exits), so nothing lingers.
    pub async fn shutdown(&self) {
        let stop = self.call(Request::Job(JobRequest::Shutdown));
        match tokio::time::timeout(SHUTDOWN_WAIT, stop).await {
            Ok(Ok(Ok(_))) => tracing::info!("the executor stopped every background job"),
            Ok(Ok(Err(e))) => tracing::warn!("the executor refused to stop its jobs: {e}"),
            Ok(Err(e)) => tracing::warn!("cannot stop the executor's jobs: {e}"),
            Err(_) => tracing::warn!("the executor did not stop its jobs within {SHUTDOWN_WAIT:?}"),
        }
    }

    /// Sends a request and waits for its one terminal reply; an executor
    /// error comes back as `Err` for the caller to map.
    pub async fn call(
        &self,
        body: Request,
    ) -> Result<Result<Reply, ide_proto::ExecutorError>, ShellError> {
        let mut stream = self.request(body).await?;
        loop {
            match stream.next().await? {
                Reply::Error(e) => return Ok(Err(e)),
                reply if is_terminal(&reply) => return Ok(Ok(reply)),
                _ => {}
            }
        }
    }
}

fn unavailable() -> ShellError {
    ShellError::internal(
        "the executor is not available (it is restarting or cannot start; see the worker log)",
    )
}

/// The executor a previous broker left on the rendezvous socket, if one
/// answers the hello there.
async fn adopt(source: &Source) -> Option<Handshaken> {
    let Source::Spawn {
        rendezvous: Some(rendezvous),
        ..
    } = source
    else {
        return None;
    };
    let path = &rendezvous.path;
    let stream = connect_rendezvous(rendezvous).await?;
    match handshake(stream).await {
        Ok(handshaken) => {
            tracing::info!(
                pid = handshaken.pid,
                "adopted the executor left on {}; its background jobs carry on",
                path.display()
            );
            Some(handshaken)
        }
        Err(e) => {
            tracing::info!("no executor to adopt on {} ({e})", path.display());
            None
        }
    }
}

/// Adopts a waiting executor, or starts (or reaches) one and says hello.
async fn bring_up(source: &Source) -> Result<(Handshaken, Option<tokio::process::Child>), String> {
    if let Some(adopted) = adopt(source).await {
        return Ok((adopted, None));
    }
    let launched = launch(source)
        .await
        .map_err(|e| format!("cannot reach the executor: {e}"))?;
    let mut child = launched.child;
    match handshake(launched.stream).await {
        Ok(handshaken) => Ok((handshaken, child)),
        Err(e) => {
            if let Some(child) = child.as_mut() {
                let _ = child.start_kill();
                let _ = child.wait().await;
            }
            Err(e)
        }
    }
}

/// Keeps one executor connection alive for the life of the broker.
async fn supervise(
    source: Source,
    current: watch::Sender<Option<Arc<Conn>>>,
    events: mpsc::UnboundedSender<JobEvent>,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let began = Instant::now();
        match bring_up(&source).await {
            Ok((handshaken, mut child)) => {
                match serve(handshaken, &current, &events).await {
                    Ok(()) => tracing::warn!("executor connection closed; starting a new one"),
                    Err(e) => {
                        tracing::error!("executor connection failed: {e}; starting a new one")
                    }
                }
                current.send_replace(None);
                if let Some(child) = child.as_mut() {
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                }
            }
            Err(e) => tracing::error!("{e}"),
        }
        if began.elapsed() > Duration::from_secs(5) {
            backoff = Duration::from_millis(100);
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}

/// A connection whose hello was answered.
struct Handshaken {
    read: OwnedReadHalf,
    write: OwnedWriteHalf,
    reader: FrameReader,
    pid: u32,
}

/// Says hello and checks the answer.
async fn handshake(stream: UnixStream) -> Result<Handshaken, String> {
    let (mut read, mut write) = stream.into_split();
    let mut reader = FrameReader::default();
    let hello = ToExecutor {
        id: 1,
        body: Request::Hello {
            version: PROTOCOL_VERSION,
        },
    };
    write_frame(&mut write, &hello)
        .await
        .map_err(|e| e.to_string())?;
    let answer = tokio::time::timeout(HELLO_TIMEOUT, reader.read::<_, ToBroker>(&mut read))
        .await
        .map_err(|_| "executor did not answer the hello".to_owned())?
        .map_err(|e| e.to_string())?;
    match answer {
        Some(ToBroker {
            id: 1,
            body:
                Reply::Hello {
                    version,
                    executor_version,
                    pid,
                },
        }) if version == PROTOCOL_VERSION => {
            tracing::info!(pid, executor_version, "executor connected");
            Ok(Handshaken {
                read,
                write,
                reader,
                pid,
            })
        }
        other => Err(format!(
            "unexpected hello answer from the executor: {other:?}"
        )),
    }
}

/// Runs one handshaken connection: route replies until it ends.
async fn serve(
    handshaken: Handshaken,
    current: &watch::Sender<Option<Arc<Conn>>>,
    events: &mpsc::UnboundedSender<JobEvent>,
) -> Result<(), String> {
    let Handshaken {
        mut read,
        mut write,
        mut reader,
        ..
    } = handshaken;

    let (outbox, mut queue) = mpsc::channel::<Encoded>(OUTBOX);
    let conn = Arc::new(Conn {
        outbox,
        pending: Mutex::new(HashMap::new()),
        next_id: AtomicU64::new(2),
    });
    let writer = tokio::spawn(async move {
        while let Some(frame) = queue.recv().await {
            if let Err(e) = frame.write_to(&mut write).await {
                tracing::warn!("writing to the executor failed: {e}");
                break;
            }
        }
        let _ = write.shutdown().await;
    });
    current.send_replace(Some(conn.clone()));
    let result = route(&mut read, &mut reader, &conn, events).await;
    writer.abort();
    // Every caller still waiting sees its stream end: S216.
    conn.routes().clear();
    result
}

async fn route(
    read: &mut OwnedReadHalf,
    reader: &mut FrameReader,
    conn: &Conn,
    events: &mpsc::UnboundedSender<JobEvent>,
) -> Result<(), String> {
    loop {
        let frame: ToBroker = match reader.read(read).await {
            Ok(Some(frame)) => frame,
            Ok(None) => return Ok(()),
            Err(e) => return Err(format!("protocol violation: {e}")),
        };
        if frame.id == EVENT_ID {
            if let Reply::JobEvent(event) = frame.body {
                let _ = events.send(event);
            }
            continue;
        }
        let terminal = is_terminal(&frame.body);
        let mut routes = conn.routes();
        if let Reply::Credit { chunks } = frame.body {
            if let Some(route) = routes.get(&frame.id) {
                route
                    .credit
                    .add_permits((chunks as usize).min(STREAM_WINDOW as usize));
            }
            continue;
        }
        let delivered = routes
            .get(&frame.id)
            .map(|r| r.replies.send(frame.body).is_ok());
        if terminal || delivered == Some(false) {
            routes.remove(&frame.id);
        }
    }
}
