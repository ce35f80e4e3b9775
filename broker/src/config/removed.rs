//! Keys removed from the configuration, detected before serde runs.
//!
//! Security meaning: serde ignores unknown top-level keys, so a stale 0.6.x
//! value such as `inherit_env: true` or `fs.host_root: /srv/app` would
//! otherwise boot with env forwarding off or with *no jail at all*. Every
//! removed key is therefore a hard error carrying its migration hint, and all
//! hits are reported in one message so the operator fixes them in one pass.

#![forbid(unsafe_code)]

use serde_json::Value;

/// One removed key and how to migrate away from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemovedKey {
    /// Where the key sat, outermost first.
    pub path: &'static [&'static str],
    /// The release that removed it.
    pub removed_in: &'static str,
    /// What to write instead; `None` when there is no replacement.
    pub replacement: Option<&'static str>,
}

/// Every removed key, in the order hits are reported.
pub const REMOVED_KEYS: &[RemovedKey] = &[
    RemovedKey { path: &["inherit_env"], removed_in: "0.7.0", replacement: Some("`env.inherit`") },
    RemovedKey { path: &["allowed_env"], removed_in: "0.7.0", replacement: Some("`env.allow`") },
    RemovedKey {
        path: &["env", "inherit_env"],
        removed_in: "0.7.0",
        replacement: Some("`env.inherit` (old name nested under `env:`)"),
    },
    RemovedKey {
        path: &["env", "allowed_env"],
        removed_in: "0.7.0",
        replacement: Some("`env.allow` (old name nested under `env:`)"),
    },
    RemovedKey {
        path: &["fs", "host_root"],
        removed_in: "0.7.0",
        replacement: Some("`fs.host_roots` (one-entry list)"),
    },
    RemovedKey {
        path: &["code", "base_path"],
        removed_in: "0.7.0",
        replacement: Some("nothing: `code.base_path`/`code.base_paths` never had an effect; set the jail via `fs.host_roots`"),
    },
    RemovedKey {
        path: &["code", "base_paths"],
        removed_in: "0.7.0",
        replacement: Some("nothing: `code.base_path`/`code.base_paths` never had an effect; set the jail via `fs.host_roots`"),
    },
    RemovedKey {
        path: &["migrated_from_coder"],
        removed_in: "0.7.0",
        replacement: Some("nothing: the one-shot coder migration is gone; delete the marker"),
    },
    RemovedKey { path: &["allowlist"], removed_in: "0.8.0", replacement: None },
];

/// The removed keys present in `value` (whatever their values, even `[]`).
pub fn find(value: &Value) -> Vec<&'static RemovedKey> {
    REMOVED_KEYS
        .iter()
        .filter(|k| is_present(value, k.path))
        .collect()
}

fn is_present(value: &Value, path: &[&str]) -> bool {
    match path.split_first() {
        None => true,
        Some((first, rest)) => value
            .as_object()
            .and_then(|map| map.get(*first))
            .is_some_and(|child| is_present(child, rest)),
    }
}

/// The operator-facing message for a non-empty set of hits: one sentence per
/// release, every hit named with its migration hint.
pub fn describe(hits: &[&RemovedKey]) -> String {
    let mut sentences: Vec<String> = Vec::new();
    let mut releases: Vec<&str> = hits.iter().map(|k| k.removed_in).collect();
    releases.dedup();
    for release in releases {
        let in_release: Vec<&&RemovedKey> =
            hits.iter().filter(|k| k.removed_in == release).collect();
        let with_hint: Vec<String> = in_release
            .iter()
            .filter_map(|k| {
                k.replacement
                    .map(|r| format!("`{}` -> {r}", k.path.join(".")))
            })
            .collect();
        if !with_hint.is_empty() {
            let noun = if with_hint.len() == 1 { "key" } else { "keys" };
            sentences.push(format!(
                "config {noun} removed in {release}: {}",
                with_hint.join(", ")
            ));
        }
        sentences.extend(
            in_release
                .iter()
                .filter(|k| k.replacement.is_none())
                .map(|k| {
                    format!(
                        "`{}` (removed in {release}, no replacement)",
                        k.path.join(".")
                    )
                }),
        );
    }
    format!(
        "{}; rewrite the stored configuration value (configuration::set) or the --config seed file without them (see the README's Upgrading sections)",
        sentences.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(value: Value) -> String {
        describe(&find(&value))
    }

    #[test]
    fn current_shapes_have_no_hits() {
        let value =
            json!({"env": {"inherit": true, "allow": []}, "fs": {"host_roots": []}, "code": {}});
        assert!(find(&value).is_empty());
        assert!(find(&json!(null)).is_empty());
        assert!(find(&json!([1, 2])).is_empty());
    }

    #[test]
    fn the_env_rename_is_named_with_both_hints() {
        let m = message(json!({"inherit_env": true, "allowed_env": ["PATH"]}));
        assert!(
            m.starts_with("config keys removed in 0.7.0: `inherit_env` -> `env.inherit`, `allowed_env` -> `env.allow`"),
            "{m}"
        );
    }

    #[test]
    fn the_single_root_alias_reads_like_the_spec() {
        let m = message(json!({"fs": {"host_root": "/srv/app"}}));
        assert!(
            m.starts_with(
                "config key removed in 0.7.0: `fs.host_root` -> `fs.host_roots` (one-entry list)"
            ),
            "{m}"
        );
    }

    #[test]
    fn an_empty_allowlist_still_trips() {
        let m = message(json!({"allowlist": []}));
        assert!(
            m.starts_with("`allowlist` (removed in 0.8.0, no replacement)"),
            "{m}"
        );
        assert_eq!(find(&json!({"allowlist": null})).len(), 1);
    }

    #[test]
    fn half_migrations_and_gone_keys_are_caught() {
        let value = json!({
            "env": {"inherit_env": true, "allowed_env": []},
            "code": {"base_path": "/x", "base_paths": []},
            "migrated_from_coder": true
        });
        let paths: Vec<String> = find(&value).iter().map(|k| k.path.join(".")).collect();
        assert_eq!(
            paths,
            [
                "env.inherit_env",
                "env.allowed_env",
                "code.base_path",
                "code.base_paths",
                "migrated_from_coder"
            ]
        );
        let m = message(value);
        assert!(m.contains("`code.base_path`/`code.base_paths`"), "{m}");
        assert!(m.contains("set the jail via `fs.host_roots`"), "{m}");
    }

    #[test]
    fn every_hit_lands_in_one_message() {
        let m =
            message(json!({"inherit_env": false, "fs": {"host_root": "/a"}, "allowlist": ["ls"]}));
        assert!(m.contains("`inherit_env` -> `env.inherit`"), "{m}");
        assert!(m.contains("`fs.host_root` -> `fs.host_roots`"), "{m}");
        assert!(
            m.contains("`allowlist` (removed in 0.8.0, no replacement)"),
            "{m}"
        );
    }

    #[test]
    fn a_removed_name_in_a_non_object_parent_is_not_a_hit() {
        assert!(find(&json!({"fs": ["host_root"]})).is_empty());
        assert!(find(&json!({"env": "inherit_env"})).is_empty());
    }
}
