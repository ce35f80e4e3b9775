//! Length-prefixed frames: a little-endian `u32` length, then that many bytes of
//! `postcard`. The length is checked against [`MAX_FRAME_LEN`] *before* any
//! buffer is grown, and a frame must decode with no trailing bytes, so a hostile
//! peer can neither make us allocate past the cap nor smuggle data after a
//! valid message. Bulk messages ([`crate::bulk`]) are written and read with
//! their bytes kept out of the frame buffer; the bytes on the wire are the
//! same.

use crate::bulk::{self, Bulk, BULK_MIN};
use serde::{de::DeserializeOwned, Serialize};
use std::io::IoSlice;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Hard cap on one frame's payload. Bulk data travels as [`crate::CHUNK_LEN`]
/// chunks, so nothing legitimate comes close.
pub const MAX_FRAME_LEN: usize = 1024 * 1024;

/// Why a frame could not be read or written. Every variant except
/// [`FrameError::Io`] means the peer broke the contract and the connection
/// must be dropped.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {0} bytes exceeds the {MAX_FRAME_LEN}-byte cap")]
    TooLarge(usize),
    #[error("connection closed in the middle of a frame")]
    Truncated,
    #[error("undecodable frame: {0}")]
    Decode(postcard::Error),
    #[error("frame has {0} trailing bytes after a complete message")]
    TrailingBytes(usize),
    #[error("unencodable message: {0}")]
    Encode(postcard::Error),
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}

/// A postcard output that appends byte strings with one `memcpy`
/// (postcard's own `Extend` flavor pushes them byte by byte, which showed up
/// in profiles of bulk transfers).
struct FrameFlavor(Vec<u8>);

impl postcard::ser_flavors::Flavor for FrameFlavor {
    type Output = Vec<u8>;

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.0.push(data);
        Ok(())
    }

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.0.extend_from_slice(data);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<Vec<u8>> {
        Ok(self.0)
    }
}

/// Encodes one message into a ready-to-send frame (prefix included).
pub fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>, FrameError> {
    let mut start = Vec::with_capacity(64);
    start.extend_from_slice(&[0u8; 4]);
    let mut out =
        postcard::serialize_with_flavor(msg, FrameFlavor(start)).map_err(FrameError::Encode)?;
    let len = out.len() - 4;
    if len > MAX_FRAME_LEN {
        return Err(FrameError::TooLarge(len));
    }
    out[..4].copy_from_slice(&(len as u32).to_le_bytes());
    Ok(out)
}

/// A frame ready to write: the encoded message, or for a bulk message its
/// prefix and header followed by its bytes.
#[derive(Debug)]
pub struct Encoded {
    pub head: Vec<u8>,
    pub bulk: Option<Vec<u8>>,
}

impl Encoded {
    /// Writes the frame with as few writes as the sink allows.
    pub async fn write_to<W: AsyncWrite + Unpin>(&self, w: &mut W) -> std::io::Result<()> {
        let Some(bulk) = &self.bulk else {
            return w.write_all(&self.head).await;
        };
        let mut parts = [IoSlice::new(&self.head), IoSlice::new(bulk)];
        let mut parts = &mut parts[..];
        while !parts.is_empty() {
            let n = w.write_vectored(parts).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            IoSlice::advance_slices(&mut parts, n);
        }
        Ok(())
    }
}

/// Encodes one owned message; a bulk message keeps its bytes apart.
pub fn encode_owned<T: Bulk>(msg: T) -> Result<Encoded, FrameError> {
    match msg.into_bulk() {
        Ok((id, data)) if data.len() >= BULK_MIN => {
            let header = bulk::header::<T>(id, data.len())
                .ok_or(FrameError::Encode(postcard::Error::SerializeBufferFull))?;
            let len = header.len() + data.len();
            if len > MAX_FRAME_LEN {
                return Err(FrameError::TooLarge(len));
            }
            let mut head = Vec::with_capacity(4 + header.len());
            head.extend_from_slice(&(len as u32).to_le_bytes());
            head.extend_from_slice(&header);
            Ok(Encoded {
                head,
                bulk: Some(data),
            })
        }
        Ok((id, data)) => Ok(Encoded {
            head: encode(&T::bulk(id, data))?,
            bulk: None,
        }),
        Err(msg) => Ok(Encoded {
            head: encode(&msg)?,
            bulk: None,
        }),
    }
}

/// Decodes one frame payload, refusing trailing bytes.
pub fn decode<T: DeserializeOwned>(payload: &[u8]) -> Result<T, FrameError> {
    let (msg, rest) = postcard::take_from_bytes(payload).map_err(FrameError::Decode)?;
    if !rest.is_empty() {
        return Err(FrameError::TrailingBytes(rest.len()));
    }
    Ok(msg)
}

/// Writes one message as a frame.
pub async fn write_frame<W, T>(w: &mut W, msg: &T) -> Result<(), FrameError>
where
    W: AsyncWrite + Unpin,
    T: Serialize,
{
    let bytes = encode(msg)?;
    w.write_all(&bytes).await?;
    Ok(())
}

/// Writes one owned message as a frame (bulk bytes are not copied).
pub async fn write_owned<W, T>(w: &mut W, msg: T) -> Result<(), FrameError>
where
    W: AsyncWrite + Unpin,
    T: Bulk,
{
    encode_owned(msg)?.write_to(w).await?;
    Ok(())
}

/// Reads one message. `Ok(None)` is a clean end of stream at a frame boundary.
pub async fn read_frame<R, T>(r: &mut R) -> Result<Option<T>, FrameError>
where
    R: AsyncRead + Unpin,
    T: Bulk,
{
    FrameReader::default().read(r).await
}

/// Reads frames while reusing one buffer, so a busy connection does not
/// allocate per message.
#[derive(Default)]
pub struct FrameReader {
    buf: Vec<u8>,
}

impl FrameReader {
    /// Reads one message; see [`read_frame`].
    pub async fn read<R, T>(&mut self, r: &mut R) -> Result<Option<T>, FrameError>
    where
        R: AsyncRead + Unpin,
        T: Bulk,
    {
        let mut prefix = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            let n = r.read(&mut prefix[got..]).await?;
            if n == 0 {
                return if got == 0 {
                    Ok(None)
                } else {
                    Err(FrameError::Truncated)
                };
            }
            got += n;
        }
        let len = u32::from_le_bytes(prefix) as usize;
        if len > MAX_FRAME_LEN {
            return Err(FrameError::TooLarge(len));
        }
        // Read into reserved capacity: zero-filling every 64 KiB data frame
        // first showed up in profiles of bulk transfers.
        self.buf.clear();
        self.buf.reserve(len);
        if len >= BULK_MIN {
            // Enough for any bulk header (three varints).
            let mut head = [0u8; 32];
            read_all(r, &mut head).await?;
            if let Some((id, header_len, n)) = bulk::parse::<T>(&head, len) {
                let mut data = Vec::with_capacity(n);
                data.extend_from_slice(&head[header_len..]);
                read_rest(r, &mut data, n).await?;
                return Ok(Some(T::bulk(id, data)));
            }
            self.buf.extend_from_slice(&head);
        }
        read_rest(r, &mut self.buf, len).await?;
        let msg = decode(&self.buf);
        if self.buf.capacity() > 4 * crate::CHUNK_LEN {
            self.buf = Vec::new();
        }
        msg.map(Some)
    }
}

/// Fills `buf`; an early end is a truncated frame.
async fn read_all<R: AsyncRead + Unpin>(r: &mut R, buf: &mut [u8]) -> Result<(), FrameError> {
    match r.read_exact(buf).await {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(FrameError::Truncated),
        Err(e) => Err(e.into()),
    }
}

/// Reads until `buf` holds `len` bytes, into its spare capacity.
async fn read_rest<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    len: usize,
) -> Result<(), FrameError> {
    let missing = len.saturating_sub(buf.len());
    (&mut *r).take(missing as u64).read_to_end(buf).await?;
    if buf.len() < len {
        return Err(FrameError::Truncated);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bulk::Bulk;
    use crate::message::{Reply, Request, Stream, ToBroker, ToExecutor};

    async fn roundtrip(bytes: Vec<u8>) -> Result<Option<ToExecutor>, FrameError> {
        let mut r = std::io::Cursor::new(bytes);
        read_frame(&mut r).await
    }

    fn hello() -> ToExecutor {
        ToExecutor {
            id: 7,
            body: Request::Hello {
                version: crate::PROTOCOL_VERSION,
            },
        }
    }

    #[tokio::test]
    async fn a_frame_round_trips() {
        let got = roundtrip(encode(&hello()).unwrap()).await.unwrap();
        assert_eq!(got, Some(hello()));
    }

    #[tokio::test]
    async fn empty_stream_is_a_clean_end() {
        assert!(roundtrip(vec![]).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn u32_max_length_is_refused_before_allocation() {
        let err = roundtrip(u32::MAX.to_le_bytes().to_vec())
            .await
            .unwrap_err();
        assert!(matches!(err, FrameError::TooLarge(n) if n == u32::MAX as usize));
    }

    #[tokio::test]
    async fn one_past_the_cap_is_refused() {
        let err = roundtrip(((MAX_FRAME_LEN + 1) as u32).to_le_bytes().to_vec())
            .await
            .unwrap_err();
        assert!(matches!(err, FrameError::TooLarge(_)));
    }

    fn output(len: usize) -> ToBroker {
        ToBroker {
            id: 1,
            body: Reply::Output {
                stream: Stream::Stdout,
                data: vec![b'x'; len],
            },
        }
    }

    #[tokio::test]
    async fn a_frame_exactly_at_the_cap_is_accepted() {
        let overhead = postcard::to_allocvec(&output(MAX_FRAME_LEN - 64))
            .unwrap()
            .len()
            - (MAX_FRAME_LEN - 64);
        let msg = output(MAX_FRAME_LEN - overhead);
        let bytes = encode(&msg).unwrap();
        assert_eq!(bytes.len(), MAX_FRAME_LEN + 4);
        let mut r = std::io::Cursor::new(bytes);
        let got: Option<ToBroker> = read_frame(&mut r).await.unwrap();
        assert_eq!(got, Some(msg));
    }

    #[tokio::test]
    async fn an_oversized_message_cannot_be_encoded() {
        let m = output(MAX_FRAME_LEN);
        assert!(matches!(encode(&m), Err(FrameError::TooLarge(_))));
    }

    #[tokio::test]
    async fn truncated_prefix_and_body_are_errors() {
        assert!(matches!(
            roundtrip(vec![1, 0]).await,
            Err(FrameError::Truncated)
        ));
        let mut bytes = encode(&hello()).unwrap();
        bytes.pop();
        assert!(matches!(roundtrip(bytes).await, Err(FrameError::Truncated)));
    }

    #[tokio::test]
    async fn trailing_bytes_are_refused() {
        let mut payload = postcard::to_allocvec(&hello()).unwrap();
        payload.push(0);
        let mut bytes = (payload.len() as u32).to_le_bytes().to_vec();
        bytes.extend(payload);
        assert!(matches!(
            roundtrip(bytes).await,
            Err(FrameError::TrailingBytes(1))
        ));
    }

    #[tokio::test]
    async fn unknown_variant_is_a_decode_error() {
        // id 1, then variant index 200 (no such request).
        let payload = vec![1u8, 200, 1];
        let mut bytes = (payload.len() as u32).to_le_bytes().to_vec();
        bytes.extend(payload);
        assert!(matches!(roundtrip(bytes).await, Err(FrameError::Decode(_))));
    }

    /// Every byte of an encoded frame, as one buffer.
    fn concat(encoded: Encoded) -> Vec<u8> {
        let mut all = encoded.head;
        all.extend(encoded.bulk.unwrap_or_default());
        all
    }

    /// Hands out at most `step` bytes per read, to exercise partial reads.
    struct Trickle {
        bytes: Vec<u8>,
        at: usize,
        step: usize,
    }

    impl AsyncRead for Trickle {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            let n = self
                .step
                .min(buf.remaining())
                .min(self.bytes.len() - self.at);
            let at = self.at;
            buf.put_slice(&self.bytes[at..at + n]);
            self.at += n;
            std::task::Poll::Ready(Ok(()))
        }
    }

    fn chunk(id: u64, len: usize) -> ToBroker {
        ToBroker {
            id,
            body: Reply::Chunk {
                data: (0..len).map(|i| (i * 7) as u8).collect(),
            },
        }
    }

    #[tokio::test]
    async fn bulk_and_other_frames_round_trip_through_partial_reads() {
        let msgs = vec![
            chunk(1, 0),
            chunk(2, BULK_MIN - 1),
            chunk(3, BULK_MIN),
            output(70_000),
            chunk(u64::MAX, crate::CHUNK_LEN),
            ToBroker {
                id: 5,
                body: Reply::Credit { chunks: 3 },
            },
        ];
        let mut wire = Vec::new();
        for m in &msgs {
            let encoded = encode_owned(m.clone()).unwrap();
            assert_eq!(
                encoded.bulk.is_some(),
                matches!(&m.body, Reply::Chunk { data } if data.len() >= BULK_MIN)
            );
            let whole = concat(encoded);
            assert_eq!(whole, encode(m).unwrap(), "the wire bytes are unchanged");
            wire.extend(whole);
        }
        for step in [1, 7, 4096, usize::MAX] {
            let mut r = Trickle {
                bytes: wire.clone(),
                at: 0,
                step,
            };
            let mut reader = FrameReader::default();
            for m in &msgs {
                let got: ToBroker = reader.read(&mut r).await.unwrap().unwrap();
                assert_eq!(&got, m, "step {step}");
            }
            assert!(reader.read::<_, ToBroker>(&mut r).await.unwrap().is_none());
        }
    }

    #[tokio::test]
    async fn a_bulk_frame_cut_short_or_padded_is_refused() {
        let whole = concat(encode_owned(ToExecutor::bulk(3, vec![9; 4000])).unwrap());
        let mut cut = whole.clone();
        cut.truncate(whole.len() - 1);
        assert!(matches!(roundtrip(cut).await, Err(FrameError::Truncated)));
        // The prefix claims one byte more than the message: not a bulk
        // frame, and the ordinary decode refuses the trailing byte.
        let mut padded = whole.clone();
        padded.push(0);
        let len = u32::from_le_bytes(padded[..4].try_into().unwrap()) + 1;
        padded[..4].copy_from_slice(&len.to_le_bytes());
        assert!(matches!(
            roundtrip(padded).await,
            Err(FrameError::TrailingBytes(1))
        ));
    }

    #[tokio::test]
    async fn write_owned_writes_what_read_frame_reads() {
        let (mut a, mut b) = tokio::io::duplex(1024);
        let msg = ToExecutor::bulk(11, vec![5; 100_000]);
        let sent = msg.clone();
        let writer = tokio::spawn(async move { write_owned(&mut a, sent).await.unwrap() });
        let got: ToExecutor = read_frame(&mut b).await.unwrap().unwrap();
        writer.await.unwrap();
        assert_eq!(got, msg);
    }

    #[tokio::test]
    async fn garbage_never_panics() {
        // Deterministic pseudo-random payloads of every small length.
        let mut seed = 0x9e37_79b9_u32;
        for len in 0..512usize {
            let payload: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 17;
                    seed ^= seed << 5;
                    seed as u8
                })
                .collect();
            let mut bytes = (len as u32).to_le_bytes().to_vec();
            bytes.extend(payload);
            let _ = roundtrip(bytes).await;
        }
    }
}
