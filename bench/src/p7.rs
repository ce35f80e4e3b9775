//! P7: what an idle worker holds — broker plus executor resident memory
//! after boot and one call, once things have settled.
#![forbid(unsafe_code)]

use crate::row::Row;
use crate::rss::{mb, worker_rss_kib};
use crate::world::boot;
use iii_sdk::protocol::TriggerRequest;
use serde_json::json;
use std::time::Duration;

/// Idle RSS in KiB.
pub struct P7 {
    pub idle_kib: u64,
}

/// Boots, makes one exec call, waits two seconds and reads RSS.
pub async fn run() -> P7 {
    let world = boot(json!({"fs": {"allow_unjailed": true}})).await;
    let request = TriggerRequest::new("shell::exec", json!({"command": "/bin/true"}));
    world
        .caller
        .trigger(TriggerRequest {
            timeout_ms: Some(30_000),
            ..request
        })
        .await
        .expect("exec failed");
    tokio::time::sleep(Duration::from_secs(2)).await;
    P7 {
        idle_kib: worker_rss_kib(world.ide.pid()),
    }
}

impl P7 {
    /// The table row.
    pub fn row(&self) -> Row {
        Row {
            id: "P7",
            what: "idle broker + executor RSS",
            baseline: "—".into(),
            measured: mb(self.idle_kib),
            goal: "≤ 30 MB total",
            met: self.idle_kib <= 30 * 1024,
        }
    }
}
