//! The minimal bench worker for P5/P6: the least any worker can do to move
//! a file through the engine's channel relay (plain `tokio::fs`, 64 KiB
//! frames, no checks), so `shell::fs::read`/`write` are judged against the
//! relay itself rather than an absolute number.
#![forbid(unsafe_code)]

use iii_sdk::channels::{ChannelReader, ChannelWriter, StreamChannelRef};
use iii_sdk::{Error, IIIClient, RegisterFunction};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The frame size both sides use.
pub const FRAME: usize = 64 * 1024;

fn field(input: &Value, key: &str) -> Result<String, Error> {
    input[key]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| Error::Handler(format!("missing {key}")))
}

/// Registers `bench::read {path}` → `{content: reader ref}` and
/// `bench::write {path, content: reader ref}` → `{bytes_written}` on
/// `worker`, whose engine is at `url`.
pub fn register(worker: &IIIClient, url: &str) {
    let client = worker.clone();
    worker.register_function(
        "bench::read",
        RegisterFunction::new_async(move |input: Value| {
            let client = client.clone();
            async move {
                let path = field(&input, "path")?;
                let file = tokio::fs::File::open(&path)
                    .await
                    .map_err(|e| Error::Handler(e.to_string()))?;
                let channel = iii_sdk::helpers::create_channel(&client, None).await?;
                tokio::spawn(pump_file(file, channel.writer));
                Ok::<Value, Error>(json!({"content": channel.reader_ref}))
            }
        }),
    );
    let url = url.to_owned();
    worker.register_function(
        "bench::write",
        RegisterFunction::new_async(move |input: Value| {
            let url = url.clone();
            async move {
                let path = field(&input, "path")?;
                let reference: StreamChannelRef = serde_json::from_value(input["content"].clone())
                    .map_err(|e| Error::Serde(e.to_string()))?;
                let mut file = tokio::fs::File::create(&path)
                    .await
                    .map_err(|e| Error::Handler(e.to_string()))?;
                let reader = ChannelReader::new(&url, &reference);
                let mut written = 0u64;
                while let Some(chunk) = reader.next_binary().await? {
                    file.write_all(&chunk)
                        .await
                        .map_err(|e| Error::Handler(e.to_string()))?;
                    written += chunk.len() as u64;
                }
                file.flush()
                    .await
                    .map_err(|e| Error::Handler(e.to_string()))?;
                Ok::<Value, Error>(json!({"bytes_written": written}))
            }
        }),
    );
}

async fn pump_file(mut file: tokio::fs::File, writer: ChannelWriter) {
    let mut buf = vec![0u8; FRAME];
    loop {
        match file.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if writer.write(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
    let _ = writer.close().await;
}

/// Reads a channel to its end; the byte count.
pub async fn drain(url: &str, reference: &StreamChannelRef) -> u64 {
    let reader = ChannelReader::new(url, reference);
    let mut total = 0u64;
    while let Ok(Some(chunk)) = reader.next_binary().await {
        total += chunk.len() as u64;
    }
    total
}

/// Writes `total` bytes of a fixed pattern into `writer` in 64 KiB frames
/// and closes it.
pub async fn feed(writer: ChannelWriter, total: u64) {
    let frame: Vec<u8> = (0..FRAME).map(|i| (i % 251) as u8).collect();
    let mut left = total;
    while left > 0 {
        let n = left.min(FRAME as u64) as usize;
        if writer.write(&frame[..n]).await.is_err() {
            return;
        }
        left -= n as u64;
    }
    let _ = writer.close().await;
}
