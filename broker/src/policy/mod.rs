//! The policy the broker enforces on every call: one immutable snapshot built
//! from a parsed [`Config`] and swapped whole on reload.
//!
//! Security meaning: [`Policy::build`] is the single gate between a stored
//! value and enforcement. It refuses to run unjailed without the explicit
//! `fs.allow_unjailed: true`, refuses relative roots and denylist paths, and
//! compiles every regex and glob up front, so a call never meets a half-valid
//! policy and a bad reload keeps the last-good snapshot.
#![forbid(unsafe_code)]

pub mod call;
pub mod denylist;
pub mod env;
mod globs;
pub mod jail;
mod lexical;
pub mod session;

use std::time::Duration;

use globset::GlobSet;

pub use call::CallPolicy;
pub use denylist::Denylist;
pub use env::check_call_env;
pub use jail::{Jail, PathKind};

use crate::config::{Config, ConfigError, ExecConfinement};

/// The immutable per-call policy snapshot.
#[derive(Debug, Clone)]
pub struct Policy {
    config: Config,
    jail: Jail,
    denylist: Denylist,
    default_excludes: GlobSet,
}

impl Policy {
    /// Validates `config` and compiles it; `canonical_roots` are the
    /// executor's canonical forms of `config.fs.host_roots`, in order.
    pub fn build(config: Config, canonical_roots: Vec<String>) -> Result<Policy, ConfigError> {
        if config.fs.host_roots.is_empty() && !config.fs.allow_unjailed {
            return Err(ConfigError::Policy(
                "fs.host_roots is empty and fs.allow_unjailed is not true: refusing to start unjailed (set fs.host_roots or fs.allow_unjailed: true)"
                    .into(),
            ));
        }
        if config.max_timeout_ms == 0 {
            return Err(ConfigError::Policy(
                "max_timeout_ms must be greater than 0 (it caps every foreground exec)".into(),
            ));
        }
        if config.default_timeout_ms == 0 {
            return Err(ConfigError::Policy(
                "default_timeout_ms must be greater than 0 (it applies when a call omits timeout_ms)".into(),
            ));
        }
        let jail = Jail::new(
            &config.fs.host_roots,
            &canonical_roots,
            &config.fs.denylist_paths,
            &config.code.non_accessible_globs,
        )?;
        let denylist = Denylist::compile(&config.denylist_patterns)?;
        let default_excludes = globs::compile(
            "code.default_exclude_globs",
            &config.code.default_exclude_globs,
        )?;
        Ok(Policy {
            config,
            jail,
            denylist,
            default_excludes,
        })
    }

    /// The config this snapshot was built from (for live reads such as `commit_messages`).
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Where caller paths may go.
    pub fn jail(&self) -> &Jail {
        &self.jail
    }

    /// The advisory command tripwire.
    pub fn denylist(&self) -> &Denylist {
        &self.denylist
    }

    /// Noise globs coder listings and searches skip by default.
    pub fn default_excludes(&self) -> &GlobSet {
        &self.default_excludes
    }

    /// Whether children get the worker's whole environment.
    pub fn env_inherit(&self) -> bool {
        self.config.env.inherit
    }

    /// The variables forwarded when [`Self::env_inherit`] is false.
    pub fn env_allow(&self) -> &[String] {
        &self.config.env.allow
    }

    /// The foreground timeout: the requested (or default) value capped at
    /// `max_timeout_ms`, and whether a requested value was cut down.
    pub fn effective_timeout(&self, requested: Option<u64>) -> (u64, bool) {
        let wanted = requested.unwrap_or(self.config.default_timeout_ms);
        let effective = wanted.min(self.config.max_timeout_ms);
        (effective, requested.is_some_and(|r| r > effective))
    }

    /// Bytes of stdout and of stderr kept per command.
    pub fn max_output_bytes(&self) -> u64 {
        self.config.max_output_bytes
    }

    /// The host background job cap; `None` runs jobs until they exit or are killed.
    pub fn bg_timeout(&self) -> Option<Duration> {
        match self.config.max_bg_timeout_ms {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    /// Running background jobs allowed at once.
    pub fn max_concurrent_jobs(&self) -> usize {
        self.config.max_concurrent_jobs
    }

    /// How long a finished job stays queryable.
    pub fn job_retention(&self) -> Duration {
        Duration::from_secs(self.config.job_retention_secs)
    }

    /// The `shell::fs::read` cap in bytes; `None` is unlimited.
    pub fn fs_max_read_bytes(&self) -> Option<u64> {
        nonzero(self.config.fs.max_read_bytes)
    }

    /// The `shell::fs::write` cap in bytes; `None` is unlimited.
    pub fn fs_max_write_bytes(&self) -> Option<u64> {
        nonzero(self.config.fs.max_write_bytes)
    }

    /// Whether modes may carry setuid/setgid/sticky bits.
    pub fn allow_special_bits(&self) -> bool {
        self.config.fs.allow_special_bits
    }

    /// Whether a scoped host exec is write-confined with Landlock.
    pub fn exec_confinement(&self) -> ExecConfinement {
        self.config.fs.exec_confinement
    }

    /// Extra writable paths of a confined exec (`~/` not yet expanded).
    pub fn exec_writable(&self) -> &[String] {
        &self.config.fs.exec_writable
    }

    /// Whether `target: sandbox` calls are forwarded at all.
    pub fn sandbox_enabled(&self) -> bool {
        self.config.sandbox.enabled
    }

    /// The configured default exec working directory.
    pub fn working_dir(&self) -> Option<&str> {
        self.config.working_dir.as_deref()
    }

    /// True when `next` lets callers reach more of the host than `self`:
    /// the jail widened or was dropped, a denylisted path or protected glob
    /// was removed, or exec confinement was switched off. The reload still
    /// applies; the caller logs it as a privilege change.
    pub fn widens_jail(&self, next: &Policy) -> bool {
        let confinement_dropped = self.exec_confinement() == ExecConfinement::Landlock
            && next.exec_confinement() == ExecConfinement::Off;
        self.jail.widens_to(&next.jail) || confinement_dropped
    }
}

fn nonzero(cap: u64) -> Option<u64> {
    (cap != 0).then_some(cap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use serde_json::json;

    fn policy(value: serde_json::Value, roots: &[&str]) -> Result<Policy, ConfigError> {
        Policy::build(
            parse(&value)?,
            roots.iter().map(|r| r.to_string()).collect(),
        )
    }

    #[test]
    fn an_empty_jail_needs_the_explicit_opt_in() {
        let err = policy(json!({}), &[]).unwrap_err().to_string();
        assert_eq!(
            err,
            "fs.host_roots is empty and fs.allow_unjailed is not true: refusing to start unjailed (set fs.host_roots or fs.allow_unjailed: true)"
        );
        assert!(policy(json!({"fs": {"allow_unjailed": false}}), &[]).is_err());
        let open = policy(json!({"fs": {"allow_unjailed": true}}), &[]).unwrap();
        assert!(!open.jail().is_jailed());
        let jailed = policy(json!({"fs": {"host_roots": ["/srv"]}}), &["/srv"]).unwrap();
        assert!(jailed.jail().is_jailed());
    }

    #[test]
    fn relative_roots_and_mismatched_canonical_lists_are_refused() {
        assert!(policy(json!({"fs": {"host_roots": ["srv"]}}), &["/srv"]).is_err());
        assert!(policy(json!({"fs": {"host_roots": ["/a", "/b"]}}), &["/a"]).is_err());
    }

    #[test]
    fn bad_patterns_and_globs_are_named() {
        let base = json!({"fs": {"allow_unjailed": true}});
        let mut v = base.clone();
        v["denylist_patterns"] = json!(["ok", "(bad"]);
        assert!(policy(v, &[]).unwrap_err().to_string().contains("\"(bad\""));
        let mut v = base.clone();
        v["code"] = json!({"non_accessible_globs": ["a/["]});
        assert!(policy(v, &[])
            .unwrap_err()
            .to_string()
            .starts_with("code.non_accessible_globs"));
        let mut v = base;
        v["code"] = json!({"default_exclude_globs": ["{a"]});
        assert!(policy(v, &[])
            .unwrap_err()
            .to_string()
            .starts_with("code.default_exclude_globs"));
    }

    #[test]
    fn zero_timeouts_are_refused() {
        assert!(policy(
            json!({"fs": {"allow_unjailed": true}, "max_timeout_ms": 0}),
            &[]
        )
        .is_err());
        assert!(policy(
            json!({"fs": {"allow_unjailed": true}, "default_timeout_ms": 0}),
            &[]
        )
        .is_err());
    }

    #[test]
    fn the_timeout_is_clamped_to_the_cap() {
        let p = policy(
            json!({"fs": {"allow_unjailed": true}, "max_timeout_ms": 1000, "default_timeout_ms": 300}),
            &[],
        )
        .unwrap();
        assert_eq!(p.effective_timeout(None), (300, false));
        assert_eq!(p.effective_timeout(Some(500)), (500, false));
        assert_eq!(p.effective_timeout(Some(1000)), (1000, false));
        assert_eq!(p.effective_timeout(Some(5000)), (1000, true));
        assert_eq!(p.effective_timeout(Some(u64::MAX)), (1000, true));
        let low_cap = policy(
            json!({"fs": {"allow_unjailed": true}, "max_timeout_ms": 100}),
            &[],
        )
        .unwrap();
        assert_eq!(low_cap.effective_timeout(None), (100, false));
    }

    #[test]
    fn zero_caps_mean_unbounded() {
        let p = policy(json!({"fs": {"allow_unjailed": true}}), &[]).unwrap();
        assert_eq!(p.bg_timeout(), None);
        assert_eq!(p.fs_max_read_bytes(), None);
        assert_eq!(p.fs_max_write_bytes(), None);
        let p = policy(
            json!({"fs": {"allow_unjailed": true, "max_read_bytes": 7, "max_write_bytes": 8}, "max_bg_timeout_ms": 9}),
            &[],
        )
        .unwrap();
        assert_eq!(p.bg_timeout(), Some(Duration::from_millis(9)));
        assert_eq!(p.fs_max_read_bytes(), Some(7));
        assert_eq!(p.fs_max_write_bytes(), Some(8));
    }

    #[test]
    fn widening_includes_clearing_the_roots_and_dropping_confinement() {
        let jailed = policy(
            json!({"fs": {"host_roots": ["/srv"], "exec_confinement": "landlock"}}),
            &["/srv"],
        )
        .unwrap();
        let open = policy(
            json!({"fs": {"allow_unjailed": true, "exec_confinement": "landlock"}}),
            &[],
        )
        .unwrap();
        let unconfined = policy(json!({"fs": {"host_roots": ["/srv"]}}), &["/srv"]).unwrap();
        assert!(jailed.widens_jail(&open));
        assert!(!open.widens_jail(&jailed));
        assert!(jailed.widens_jail(&unconfined));
        assert!(!unconfined.widens_jail(&jailed));
        assert!(!jailed.widens_jail(&jailed.clone()));
    }

    #[test]
    fn the_snapshot_is_shareable_across_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Policy>();
    }
}
