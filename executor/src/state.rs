//! State that belongs to the executor process, not to one broker connection.
//!
//! Security meaning: everything here comes from the executor's own start-up
//! (command line, environment), never from the socket, so a broker can only
//! ask for work within it. It outlives connections, which is where
//! background jobs that survive a broker restart belong.
#![forbid(unsafe_code)]

use crate::ceiling::Ceilings;
use crate::env::EnvSnapshot;

/// The process-wide state shared by every connection.
#[derive(Debug)]
pub struct Executor {
    /// The environment as it was at start; children's environments derive from it.
    pub env: EnvSnapshot,
    /// Operator ceilings every root must lie beneath.
    pub ceilings: Ceilings,
}
