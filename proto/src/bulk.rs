//! Bulk frames: the one message of each direction that carries a file's
//! bytes (`Request::Data`, `Reply::Chunk`) is written and read without
//! copying those bytes through a frame buffer.
//!
//! The wire format is unchanged: postcard lays such a message out as
//! `varint(id) varint(variant) varint(len)` followed by the `len` bytes, so
//! a sender writes that short header and the bytes with one vectored write,
//! and a receiver that recognises the header reads the bytes straight into
//! their own buffer. Anything else, or a header that does not account for
//! exactly the rest of the frame, takes the ordinary decode path, which
//! applies every check (so a hostile peer gains nothing here).

use crate::message::{Reply, Request, ToBroker, ToExecutor};
use serde::{de::DeserializeOwned, Serialize};

/// Frames smaller than this are never worth the split.
pub const BULK_MIN: usize = 512;

/// A frame type with one bulk variant `{ id, Variant { data } }`.
pub trait Bulk: Serialize + DeserializeOwned + Sized {
    /// The postcard variant index of the bulk variant (its position in the
    /// enum; a unit test checks it against postcard's own output).
    const VARIANT: u32;
    /// The bulk message.
    fn bulk(id: u64, data: Vec<u8>) -> Self;
    /// The id and bytes of a bulk message; the message back otherwise.
    fn into_bulk(self) -> Result<(u64, Vec<u8>), Self>;
}

impl Bulk for ToExecutor {
    const VARIANT: u32 = 2;

    fn bulk(id: u64, data: Vec<u8>) -> Self {
        ToExecutor {
            id,
            body: Request::Data { data },
        }
    }

    fn into_bulk(self) -> Result<(u64, Vec<u8>), Self> {
        match self.body {
            Request::Data { data } => Ok((self.id, data)),
            body => Err(ToExecutor { id: self.id, body }),
        }
    }
}

impl Bulk for ToBroker {
    const VARIANT: u32 = 2;

    fn bulk(id: u64, data: Vec<u8>) -> Self {
        ToBroker {
            id,
            body: Reply::Chunk { data },
        }
    }

    fn into_bulk(self) -> Result<(u64, Vec<u8>), Self> {
        match self.body {
            Reply::Chunk { data } => Ok((self.id, data)),
            body => Err(ToBroker { id: self.id, body }),
        }
    }
}

/// The header postcard writes before `len` bulk bytes of message `id`.
pub fn header<T: Bulk>(id: u64, len: usize) -> Option<Vec<u8>> {
    postcard::to_allocvec(&(id, T::VARIANT, len as u64)).ok()
}

/// The id, header length and bulk length when `head` (the start of a frame
/// of `frame_len` bytes) is the header of `T`'s bulk variant whose bytes are
/// exactly the rest of the frame.
pub fn parse<T: Bulk>(head: &[u8], frame_len: usize) -> Option<(u64, usize, usize)> {
    let ((id, tag, len), rest) = postcard::take_from_bytes::<(u64, u32, u64)>(head).ok()?;
    let header_len = head.len() - rest.len();
    let len = usize::try_from(len).ok()?;
    (tag == T::VARIANT && header_len.checked_add(len)? == frame_len)
        .then_some((id, header_len, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full<T: Bulk>(msg: T) -> Vec<u8> {
        postcard::to_allocvec(&msg).unwrap()
    }

    /// The variant index postcard writes for `T`'s bulk variant.
    fn written_variant<T: Bulk>() -> u32 {
        let sample = full(T::bulk(0, Vec::new()));
        let ((_, tag, _), rest) = postcard::take_from_bytes::<(u64, u32, u64)>(&sample).unwrap();
        assert!(rest.is_empty());
        tag
    }

    #[test]
    fn the_declared_variant_is_the_one_postcard_writes() {
        assert_eq!(written_variant::<ToExecutor>(), ToExecutor::VARIANT);
        assert_eq!(written_variant::<ToBroker>(), ToBroker::VARIANT);
    }

    #[test]
    fn the_header_and_the_bytes_are_exactly_what_postcard_writes() {
        for len in [0usize, 1, 127, 128, 511, 16_383, 16_384, 65_536, 200_000] {
            for id in [0u64, 1, 300, u64::MAX] {
                let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
                let mut split = header::<ToExecutor>(id, len).unwrap();
                split.extend_from_slice(&data);
                assert_eq!(
                    split,
                    full(ToExecutor::bulk(id, data.clone())),
                    "{id} {len}"
                );
                let mut split = header::<ToBroker>(id, len).unwrap();
                split.extend_from_slice(&data);
                assert_eq!(split, full(ToBroker::bulk(id, data)), "{id} {len}");
            }
        }
    }

    #[test]
    fn only_a_bulk_header_that_spans_the_frame_is_recognised() {
        let head = header::<ToExecutor>(9, 1000).unwrap();
        let frame = head.len() + 1000;
        assert_eq!(
            parse::<ToExecutor>(&head, frame),
            Some((9, head.len(), 1000))
        );
        assert_eq!(parse::<ToExecutor>(&head, frame + 1), None);
        assert_eq!(parse::<ToExecutor>(&head, frame - 1), None);
        // The same shape with another variant index is not bulk.
        let cancel = full(ToExecutor {
            id: 9,
            body: Request::Cancel,
        });
        assert_eq!(parse::<ToExecutor>(&cancel, cancel.len()), None);
        assert_eq!(parse::<ToExecutor>(&[], 10), None);
        assert_eq!(parse::<ToExecutor>(&[0xff; 16], 10), None);
    }

    #[test]
    fn into_bulk_hands_back_other_messages_untouched() {
        let other = ToBroker {
            id: 4,
            body: Reply::Credit { chunks: 2 },
        };
        assert_eq!(other.clone().into_bulk(), Err(other));
        assert_eq!(
            ToBroker::bulk(4, vec![1, 2]).into_bulk(),
            Ok((4, vec![1, 2]))
        );
    }
}
