//! The broker's side of the executor socket: starting or reaching the
//! executor, and multiplexing requests over one connection.
//!
//! The broker never spawns user commands or touches the jail itself; every
//! such operation is a request here. If the executor dies, calls in flight
//! fail with `S216` and the supervisor brings up a new one, so the next call
//! works. If the broker itself restarts, it adopts the executor (and its
//! background jobs) through the rendezvous socket.
#![forbid(unsafe_code)]

mod client;
mod launch;
pub mod rendezvous;

pub use client::{Executor, ReplyStream, Uploader};
pub use launch::{Rendezvous, Source};
