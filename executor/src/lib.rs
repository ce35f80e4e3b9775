//! `ide-executor`: the privileged half of the ide worker.
//!
//! The broker (`ide`) faces the engine and may be compromised; this process
//! owns every mechanism that touches the host — spawning commands and
//! resolving paths beneath jail roots — and keeps its own floor of the rules
//! (roots beneath operator ceilings, the env gate, bounded argv/env and
//! requests) whatever the broker claims to have checked. `unsafe` lives in
//! [`sys`] only; every other module forbids it.

pub mod ceiling;
pub mod cli;
pub mod confine;
pub mod env;
pub mod errno;
pub mod exec;
pub mod fs;
pub mod hygiene;
pub mod jobs;
pub mod listen;
pub mod request;
pub mod resolve;
pub mod server;
pub mod socket;
pub mod state;
pub mod sys;
