//! The requests of one connection that have not answered yet.
//!
//! Security meaning: the table is bounded, so a broker cannot pile up
//! unbounded work, and dropping it (the connection ended) cancels every entry,
//! which kills every command the connection started.
#![forbid(unsafe_code)]

use crate::request::{Cancel, CancelHandle};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Requests one connection may have running at once.
pub const MAX_IN_FLIGHT: usize = 1024;

/// Why a request could not be registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// [`MAX_IN_FLIGHT`] requests are already running.
    Busy,
    /// The id already names a running request.
    Duplicate,
}

/// Cancel handles of running requests, by id.
#[derive(Debug, Clone, Default)]
pub struct InFlight {
    inner: Arc<Mutex<HashMap<u64, CancelHandle>>>,
}

impl InFlight {
    fn table(&self) -> MutexGuard<'_, HashMap<u64, CancelHandle>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers request `id` and returns its cancel signal.
    pub fn register(&self, id: u64) -> Result<Cancel, Refusal> {
        let mut table = self.table();
        if table.contains_key(&id) {
            return Err(Refusal::Duplicate);
        }
        if table.len() >= MAX_IN_FLIGHT {
            return Err(Refusal::Busy);
        }
        let (handle, cancel) = Cancel::pair();
        table.insert(id, handle);
        Ok(cancel)
    }

    /// Cancels request `id`; an unknown id is ignored (it may just have ended).
    pub fn cancel(&self, id: u64) {
        if let Some(handle) = self.table().remove(&id) {
            let _ = handle.send(());
        }
    }

    /// Forgets request `id`, before its terminal reply is queued, so the
    /// broker may reuse the id as soon as it sees that reply.
    pub fn finish(&self, id: u64) {
        self.table().remove(&id);
    }

    /// Cancels every running request (the connection ended).
    pub fn cancel_all(&self) {
        self.table().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn duplicates_and_overflow_are_refused() {
        let f = InFlight::default();
        let _keep: Vec<Cancel> = (0..MAX_IN_FLIGHT as u64)
            .map(|id| f.register(id).unwrap())
            .collect();
        assert_eq!(f.register(3).unwrap_err(), Refusal::Duplicate);
        assert_eq!(f.register(MAX_IN_FLIGHT as u64).unwrap_err(), Refusal::Busy);
        f.finish(3);
        assert!(f.register(3).is_ok());
    }

    #[tokio::test]
    async fn cancel_and_cancel_all_fire_the_signals() {
        let f = InFlight::default();
        let mut one = f.register(1).unwrap();
        let mut two = f.register(2).unwrap();
        f.cancel(1);
        f.cancel(99);
        tokio::time::timeout(Duration::from_secs(5), one.cancelled())
            .await
            .unwrap();
        f.cancel_all();
        tokio::time::timeout(Duration::from_secs(5), two.cancelled())
            .await
            .unwrap();
    }
}
