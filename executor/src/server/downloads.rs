//! Credit for bodies the executor streams to the broker (file reads, grep
//! matches, walk listings).
//!
//! Security meaning: a download may have at most `STREAM_WINDOW` chunks
//! unacknowledged; the broker's `Credit` frames refill that window and never
//! widen it, so a broker that stops reading stops the stream instead of
//! growing either process's memory. Ending a download closes its credit,
//! which wakes and stops a sender still waiting for it.
#![forbid(unsafe_code)]

use ide_proto::STREAM_WINDOW;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::Semaphore;

/// The open downloads of one connection, by request id.
#[derive(Debug, Clone, Default)]
pub struct Downloads {
    inner: Arc<Mutex<HashMap<u64, Arc<Semaphore>>>>,
}

impl Downloads {
    fn table(&self) -> MutexGuard<'_, HashMap<u64, Arc<Semaphore>>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens the download of request `id` with a full window of credit.
    pub fn open(&self, id: u64) -> Arc<Semaphore> {
        let credit = Arc::new(Semaphore::new(STREAM_WINDOW as usize));
        self.table().insert(id, credit.clone());
        credit
    }

    /// The broker consumed `chunks` chunks of request `id`; credit for an
    /// unknown id is ignored (the download may just have ended).
    pub fn grant(&self, id: u64, chunks: u32) {
        if let Some(credit) = self.table().get(&id) {
            let room = (STREAM_WINDOW as usize).saturating_sub(credit.available_permits());
            credit.add_permits((chunks as usize).min(room));
        }
    }

    /// Ends the download of request `id`; a sender waiting for credit stops.
    pub fn end(&self, id: u64) {
        if let Some(credit) = self.table().remove(&id) {
            credit.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credit_refills_the_window_but_never_widens_it() {
        let downloads = Downloads::default();
        let credit = downloads.open(4);
        assert_eq!(credit.available_permits(), STREAM_WINDOW as usize);
        credit.try_acquire_many(3).unwrap().forget();
        downloads.grant(4, 1000);
        assert_eq!(credit.available_permits(), STREAM_WINDOW as usize);
        credit.try_acquire_many(STREAM_WINDOW).unwrap().forget();
        downloads.grant(4, 2);
        assert_eq!(credit.available_permits(), 2);
        downloads.grant(99, 5);
    }

    #[tokio::test]
    async fn ending_stops_a_waiting_sender() {
        let downloads = Downloads::default();
        let credit = downloads.open(1);
        credit.try_acquire_many(STREAM_WINDOW).unwrap().forget();
        let waiter = tokio::spawn(async move { credit.acquire().await.is_err() });
        downloads.end(1);
        let stopped = tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
        assert!(stopped);
    }
}
