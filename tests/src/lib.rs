//! Test support for the `ide` worker: a protocol-faithful iii test engine,
//! real SDK clients, and a harness that builds and runs the real binaries.
//!
//! Security meaning: end-to-end tests built on this crate check the worker's
//! security behaviour (jail, env gate, redaction, confinement) through the
//! exact path production traffic takes: a real SDK client, an engine that
//! routes like the real one, and the shipped broker and executor binaries.

#![forbid(unsafe_code)]

mod client;
pub mod engine;
pub mod harness;

pub use client::{call, client, CALL_TIMEOUT_MS};
pub use engine::TestEngine;
pub use harness::{binary, Ide, IdeOptions};
