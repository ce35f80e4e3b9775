//! The broker ↔ executor contract of the `ide` worker.
//!
//! The broker (`ide`) faces the engine and may be compromised; the executor
//! (`ide-executor`) owns every mechanism that touches the host. Everything that
//! crosses between them is a [`message`] type carried in a length-prefixed
//! `postcard` [`frame`]. Both binaries ship together, so the protocol version is
//! checked exactly on the first frame and any decode error ends the connection.
#![forbid(unsafe_code)]

pub mod bulk;
pub mod env_gate;
pub mod frame;
pub mod message;
pub mod probe;

pub use frame::{
    encode_owned, read_frame, write_frame, write_owned, Encoded, FrameError, FrameReader,
    MAX_FRAME_LEN,
};
pub use message::*;

/// Bumped on every incompatible change; the executor refuses any other value.
pub const PROTOCOL_VERSION: u32 = 2;

/// Largest payload chunk either side puts in one frame (output, file bodies),
/// well below [`MAX_FRAME_LEN`] so a chunk plus its envelope always fits.
pub const CHUNK_LEN: usize = 64 * 1024;
