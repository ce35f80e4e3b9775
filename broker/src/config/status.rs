//! `shell::config-status`: whether the policy being enforced is the one the
//! central store holds, and what confinement this host can enforce. A
//! rejected reload keeps the last good policy, so without this report the
//! divergence would be silent; likewise a host without Landlock would only
//! show itself by failing confined execs.
#![forbid(unsafe_code)]

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Mutex;

/// Outcome of the most recent configuration load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Applied,
    Rejected,
}

/// What `shell::config-status` returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ConfigStatus {
    /// `applied` or `rejected`: the outcome of the last reload (boot counts as applied).
    pub last_outcome: Outcome,
    /// Why the last reload was rejected; null after an applied one.
    pub last_error: Option<String>,
    /// Reloads rejected since boot; never reset.
    pub rejected_reloads: u64,
    /// What this host can enforce, as `ide doctor --json` reports it under
    /// `host` (probed by the executor binary at boot); `{"probe_error": …}`
    /// when the probe failed.
    pub confinement: Value,
}

/// The live status; also serialises reloads so two events cannot apply out
/// of order.
pub struct ReloadStatus {
    inner: Mutex<ConfigStatus>,
    /// Held for the whole of one reload.
    pub reload_lock: tokio::sync::Mutex<()>,
}

impl Default for ReloadStatus {
    fn default() -> Self {
        Self {
            inner: Mutex::new(ConfigStatus {
                last_outcome: Outcome::Applied,
                last_error: None,
                rejected_reloads: 0,
                confinement: Value::Object(Default::default()),
            }),
            reload_lock: tokio::sync::Mutex::new(()),
        }
    }
}

impl ReloadStatus {
    fn with<R>(&self, f: impl FnOnce(&mut ConfigStatus) -> R) -> R {
        f(&mut self.inner.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The current report.
    pub fn snapshot(&self) -> ConfigStatus {
        self.with(|s| s.clone())
    }

    /// Records an applied reload (clears the error, keeps the count).
    pub fn applied(&self) {
        self.with(|s| {
            s.last_outcome = Outcome::Applied;
            s.last_error = None;
        })
    }

    /// Records what the host can enforce (once, at boot).
    pub fn set_confinement(&self, facts: Value) {
        self.with(|s| s.confinement = facts)
    }

    /// Records a rejected reload.
    pub fn rejected(&self, error: String) {
        self.with(|s| {
            s.last_outcome = Outcome::Rejected;
            s.last_error = Some(error);
            s.rejected_reloads += 1;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_success_clears_the_error_but_not_the_count() {
        let s = ReloadStatus::default();
        assert_eq!(s.snapshot().last_outcome, Outcome::Applied);
        s.rejected("bad".into());
        s.rejected("worse".into());
        let r = s.snapshot();
        assert_eq!(
            (r.last_outcome, r.last_error.as_deref(), r.rejected_reloads),
            (Outcome::Rejected, Some("worse"), 2)
        );
        s.applied();
        let r = s.snapshot();
        assert_eq!(
            (r.last_outcome, r.last_error, r.rejected_reloads),
            (Outcome::Applied, None, 2)
        );
    }

    #[test]
    fn the_wire_shape_is_the_spec() {
        let v = serde_json::to_value(ReloadStatus::default().snapshot()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"last_outcome": "applied", "last_error": null, "rejected_reloads": 0, "confinement": {}})
        );
    }

    #[test]
    fn the_confinement_facts_are_kept_across_reloads() {
        let s = ReloadStatus::default();
        s.set_confinement(serde_json::json!({"landlock": {"abi": 7}}));
        s.rejected("bad".into());
        s.applied();
        assert_eq!(s.snapshot().confinement["landlock"]["abi"], 7);
    }
}
