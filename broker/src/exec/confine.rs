//! Which paths a write-confined exec may write.
//!
//! Security meaning: with `fs.exec_confinement: landlock`, a host exec that
//! carries a session scope may write only beneath the scope's root, its
//! grants, the root's git dir (found by the executor) and the configured
//! `fs.exec_writable` entries
//! (`~/` expanded against `$HOME`, dropped when `HOME` is unset); everything
//! else on the host is read-only to it. The executor enforces the list with
//! Landlock and refuses to run the command (S222) where it cannot. Unscoped
//! execs and sandbox targets are never confined.
#![forbid(unsafe_code)]

use crate::config::ExecConfinement;
use crate::policy::Policy;
use ide_proto::Confinement;

/// The writable part of a session scope, already validated (absolute,
/// canonical paths). The executor adds the git dir of the repository around
/// `root` (or a linked worktree's common dir) when it builds the ruleset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteScope {
    pub root: String,
    pub grants: Vec<String>,
}

/// The confinement of an exec under `policy`: `None` unless confinement is
/// on and the call is scoped.
pub fn confinement(policy: &Policy, scope: Option<&WriteScope>) -> Option<Confinement> {
    let scope = scope?;
    (policy.exec_confinement() == ExecConfinement::Landlock).then(|| Confinement {
        writable: writable_paths(
            scope,
            policy.exec_writable(),
            std::env::var("HOME").ok().as_deref(),
        ),
        git_dir_of: Some(scope.root.clone()),
    })
}

/// The scope's root and grants, then each `exec_writable` entry
/// with `~`/`~/` expanded against `home`; entries that need a missing home
/// or are not absolute are dropped, duplicates kept once. Missing paths are
/// left in: the executor skips them.
pub fn writable_paths(
    scope: &WriteScope,
    exec_writable: &[String],
    home: Option<&str>,
) -> Vec<String> {
    let home = home
        .filter(|h| h.starts_with('/'))
        .map(|h| h.trim_end_matches('/'));
    let expanded = exec_writable.iter().filter_map(|entry| {
        if entry == "~" {
            return home.map(|h| {
                if h.is_empty() {
                    "/".to_owned()
                } else {
                    h.to_owned()
                }
            });
        }
        match entry.strip_prefix("~/") {
            Some(rest) => home.map(|h| format!("{h}/{rest}")),
            None => entry.starts_with('/').then(|| entry.clone()),
        }
    });
    let mut out: Vec<String> = Vec::new();
    let candidates = std::iter::once(scope.root.clone())
        .chain(scope.grants.iter().cloned())
        .chain(expanded);
    for path in candidates {
        if !out.contains(&path) {
            out.push(path);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope() -> WriteScope {
        WriteScope {
            root: "/srv/work".into(),
            grants: vec!["/srv/shared".into(), "/srv/work".into()],
        }
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn root_grants_then_expanded_extras_without_duplicates() {
        let extras = strings(&["/tmp", "~/.cache", "~", "/tmp", "relative/dir", "~other/x"]);
        assert_eq!(
            writable_paths(&scope(), &extras, Some("/home/agent/")),
            strings(&[
                "/srv/work",
                "/srv/shared",
                "/tmp",
                "/home/agent/.cache",
                "/home/agent",
            ])
        );
    }

    #[test]
    fn home_entries_are_dropped_without_a_usable_home() {
        let extras = strings(&["~/.cargo", "/dev", "~"]);
        let none = writable_paths(&scope(), &extras, None);
        assert_eq!(none, strings(&["/srv/work", "/srv/shared", "/dev"]));
        assert_eq!(writable_paths(&scope(), &extras, Some("relative")), none);
    }

    fn policy(confinement: &str) -> Policy {
        let config = crate::config::parse(&serde_json::json!({
            "fs": {"allow_unjailed": true, "exec_confinement": confinement, "exec_writable": ["/tmp"]}
        }))
        .unwrap();
        Policy::build(config, vec![]).unwrap()
    }

    #[test]
    fn only_a_scoped_exec_under_landlock_is_confined() {
        let landlock = policy("landlock");
        let confined = confinement(&landlock, Some(&scope())).unwrap();
        assert_eq!(
            confined.writable,
            strings(&["/srv/work", "/srv/shared", "/tmp"])
        );
        assert_eq!(confined.git_dir_of.as_deref(), Some("/srv/work"));
        assert_eq!(confinement(&landlock, None), None);
        assert_eq!(confinement(&policy("off"), Some(&scope())), None);
    }
}
