//! Byte-stream channels (`engine::channels::create` and
//! `/ws/channels/{id}?key=..&dir=read|write`), with engine 0.23's semantics.
//!
//! Security meaning: the access key is checked before the upgrade (404 on an
//! unknown id or a wrong key, 400 on a missing key or direction), the first
//! writer and the first reader own their ends for good (later ones get an
//! immediate Close), the buffer is bounded in items so a stalled reader
//! stalls the writer, and the reader sees Close only once the writer is gone
//! and the buffer is drained, so a truncated stream looks like the real one.

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::WebSocketStream;
use uuid::Uuid;

/// Items a channel holds when the creator does not say.
const DEFAULT_BUFFER: usize = 64;
/// The most items a channel may hold.
const MAX_BUFFER: usize = 1024;
/// How long a closing writer's late frames are waited for.
const WRITER_DRAIN: Duration = Duration::from_millis(10);

struct Channel {
    key: String,
    sender: Option<mpsc::Sender<WsMessage>>,
    receiver: Option<mpsc::Receiver<WsMessage>>,
}

/// Every channel created since the engine started.
#[derive(Default)]
pub(crate) struct Channels {
    map: HashMap<String, Channel>,
}

/// What a channel socket gets to do.
pub(crate) enum End {
    Writer(mpsc::Sender<WsMessage>),
    Reader(mpsc::Receiver<WsMessage>),
    /// That end is already owned: close at once.
    Taken,
}

/// An HTTP status refusing a channel upgrade, and its body.
pub(crate) type Refusal = (StatusCode, &'static str);

impl Channels {
    /// Creates a channel; `data` is `{"buffer_size": n|null}`.
    pub fn create(&mut self, data: &Value) -> Value {
        let requested = data
            .get("buffer_size")
            .and_then(Value::as_u64)
            .map(|n| usize::try_from(n).unwrap_or(MAX_BUFFER));
        let capacity = requested.unwrap_or(DEFAULT_BUFFER).clamp(1, MAX_BUFFER);
        let (sender, receiver) = mpsc::channel(capacity);
        let id = Uuid::new_v4().to_string();
        let key = Uuid::new_v4().to_string();
        self.map.insert(
            id.clone(),
            Channel {
                key: key.clone(),
                sender: Some(sender),
                receiver: Some(receiver),
            },
        );
        let end =
            |direction: &str| json!({"channel_id": id, "access_key": key, "direction": direction});
        json!({ "writer": end("write"), "reader": end("read") })
    }

    /// Checks a channel request (`id` from the path, `query` raw) and hands
    /// out the end it asks for.
    pub fn open(&mut self, id: &str, query: &str) -> Result<End, Refusal> {
        let mut key = None;
        let mut dir = None;
        for (name, value) in form_urlencoded::parse(query.as_bytes()) {
            match name.as_ref() {
                "key" => key = Some(value.into_owned()),
                "dir" => dir = Some(value.into_owned()),
                _ => {}
            }
        }
        let bad = (StatusCode::BAD_REQUEST, "missing or invalid key or dir");
        let key = key.ok_or(bad)?;
        let write = match dir.as_deref() {
            Some("write") => true,
            Some("read") => false,
            _ => return Err(bad),
        };
        let channel = self
            .map
            .get_mut(id)
            .filter(|c| c.key == key)
            .ok_or((StatusCode::NOT_FOUND, "Channel not found"))?;
        Ok(if write {
            channel.sender.take().map_or(End::Taken, End::Writer)
        } else {
            channel.receiver.take().map_or(End::Taken, End::Reader)
        })
    }
}

/// Runs one upgraded channel socket until its end is done.
pub(crate) async fn serve(mut ws: WebSocketStream<TcpStream>, end: End) {
    match end {
        End::Writer(sender) => write_side(&mut ws, sender).await,
        End::Reader(receiver) => read_side(&mut ws, receiver).await,
        End::Taken => {}
    }
    let _ = ws.close(None).await;
}

/// Each Text or Binary frame becomes one item; Close, an error or EOF drops
/// the sender, which ends the stream once the reader drained it.
async fn write_side(ws: &mut WebSocketStream<TcpStream>, sender: mpsc::Sender<WsMessage>) {
    while let Some(frame) = ws.next().await {
        match frame {
            Ok(item @ (WsMessage::Text(_) | WsMessage::Binary(_))) => {
                if sender.send(item).await.is_err() {
                    return;
                }
            }
            Ok(WsMessage::Close(_)) => {
                tokio::time::sleep(WRITER_DRAIN).await;
                return;
            }
            Ok(_) => {}
            Err(_) => return,
        }
    }
}

/// Sends items with their frame kind kept; Close once the writer is gone and
/// nothing is left.
async fn read_side(ws: &mut WebSocketStream<TcpStream>, mut receiver: mpsc::Receiver<WsMessage>) {
    loop {
        tokio::select! {
            item = receiver.recv() => match item {
                Some(item) => {
                    if ws.send(item).await.is_err() {
                        return;
                    }
                }
                None => return,
            },
            inbound = ws.next() => match inbound {
                Some(Ok(WsMessage::Close(_)) | Err(_)) | None => return,
                Some(Ok(_)) => {}
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(channels: &mut Channels, data: Value) -> (String, String) {
        let created = channels.create(&data);
        assert_eq!(created["writer"]["direction"], "write");
        assert_eq!(created["reader"]["direction"], "read");
        assert_eq!(
            created["writer"]["channel_id"],
            created["reader"]["channel_id"]
        );
        assert_eq!(
            created["writer"]["access_key"],
            created["reader"]["access_key"]
        );
        let id = created["reader"]["channel_id"]
            .as_str()
            .unwrap()
            .to_string();
        let key = created["reader"]["access_key"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(Uuid::parse_str(&id).is_ok() && Uuid::parse_str(&key).is_ok());
        (id, key)
    }

    fn capacity(end: End) -> usize {
        match end {
            End::Writer(s) => s.max_capacity(),
            _ => panic!("expected a writer"),
        }
    }

    fn status(result: Result<End, Refusal>) -> StatusCode {
        match result {
            Err((status, _)) => status,
            Ok(_) => panic!("expected a refusal"),
        }
    }

    #[test]
    fn buffer_size_defaults_to_64_and_is_clamped_to_1_to_1024() {
        let mut c = Channels::default();
        for (data, expected) in [
            (json!({"buffer_size": null}), 64),
            (json!({}), 64),
            (json!({"buffer_size": 0}), 1),
            (json!({"buffer_size": 5}), 5),
            (json!({"buffer_size": 100000}), 1024),
        ] {
            let (id, key) = refs(&mut c, data);
            let end = c.open(&id, &format!("key={key}&dir=write")).ok().unwrap();
            assert_eq!(capacity(end), expected);
        }
    }

    #[test]
    fn wrong_key_or_id_is_404_and_missing_key_or_dir_is_400() {
        let mut c = Channels::default();
        let (id, key) = refs(&mut c, json!({}));
        assert_eq!(
            status(c.open(&id, "key=nope&dir=read")),
            StatusCode::NOT_FOUND
        );
        let unknown = Uuid::new_v4().to_string();
        assert_eq!(
            status(c.open(&unknown, &format!("key={key}&dir=read"))),
            StatusCode::NOT_FOUND
        );
        assert_eq!(status(c.open(&id, "dir=read")), StatusCode::BAD_REQUEST);
        assert_eq!(
            status(c.open(&id, &format!("key={key}"))),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            status(c.open(&id, &format!("key={key}&dir=sideways"))),
            StatusCode::BAD_REQUEST
        );
    }

    #[test]
    fn the_first_writer_and_reader_win_and_later_ones_are_closed() {
        let mut c = Channels::default();
        let (id, key) = refs(&mut c, json!({}));
        let encoded = key.replace('-', "%2D");
        assert!(matches!(
            c.open(&id, &format!("key={encoded}&dir=read")),
            Ok(End::Reader(_))
        ));
        assert!(matches!(
            c.open(&id, &format!("key={key}&dir=read")),
            Ok(End::Taken)
        ));
        assert!(matches!(
            c.open(&id, &format!("key={key}&dir=write")),
            Ok(End::Writer(_))
        ));
        assert!(matches!(
            c.open(&id, &format!("key={key}&dir=write")),
            Ok(End::Taken)
        ));
    }
}
