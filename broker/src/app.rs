//! The state every handler shares: the current policy snapshot, the
//! executor, and the engine client.
#![forbid(unsafe_code)]

use crate::config::status::ReloadStatus;
use crate::executor::Executor;
use crate::policy::Policy;
use arc_swap::ArcSwap;
use iii_sdk::IIIClient;
use std::sync::Arc;

/// Shared broker state. Each call takes one `policy` snapshot at its start and
/// uses it to the end, so a reload never changes the rules mid-call.
pub struct App {
    pub policy: ArcSwap<Policy>,
    pub executor: Arc<Executor>,
    pub iii: IIIClient,
    pub status: ReloadStatus,
}

impl App {
    /// The policy snapshot for one call.
    pub fn snapshot(&self) -> Arc<Policy> {
        self.policy.load_full()
    }
}
