//! The first-registration seed: the shipped `config.yaml` (built in) or the
//! operator's `--config` file.
//!
//! Security meaning: only a genuinely missing seed file falls through to the
//! permissive built-in seed. A file that exists but is unreadable, is not
//! YAML, or is a config of ours that fails to parse (say, one still carrying
//! 0.6.x keys) aborts boot instead of silently seeding the wide default. A
//! YAML mapping that shares no key with the schema is someone else's file
//! (e.g. the engine's project file in the same directory) and is ignored.
//! Reading this file is the broker reading its operator's config, not the jail.
#![forbid(unsafe_code)]

use std::path::Path;

use serde_json::Value;

use super::{parse, removed, ConfigError, TOP_LEVEL_KEYS};

/// The shipped default, byte for byte the built-in zero-config seed.
pub const SHIPPED_CONFIG: &str = include_str!("../../../config.yaml");

/// The built-in seed as the JSON value sent as `initial_value`.
pub fn builtin_seed() -> Value {
    serde_yaml::from_str(SHIPPED_CONFIG)
        .expect("the shipped config.yaml is valid YAML (checked by a unit test)")
}

/// Loads the `--config` seed: `Ok(None)` when the file is missing or foreign,
/// the parsed value when it is a valid config of ours, and an error (which
/// aborts boot) otherwise.
pub fn load_seed_file(path: &Path) -> Result<Option<Value>, ConfigError> {
    let shown = path.display().to_string();
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ConfigError::SeedUnreadable {
                path: shown,
                source,
            })
        }
    };
    let value: Value = serde_yaml::from_str(&text).map_err(|err| ConfigError::SeedNotYaml {
        path: shown.clone(),
        message: err.to_string(),
    })?;
    let Some(map) = value.as_object() else {
        return Err(ConfigError::SeedNotYaml {
            path: shown,
            message: "not a YAML mapping of config keys".into(),
        });
    };
    let shares_a_key = map.keys().any(|k| TOP_LEVEL_KEYS.contains(&k.as_str()));
    if !shares_a_key && removed::find(&value).is_empty() {
        tracing::warn!(
            path = %shown,
            "seed file shares no key with the ide config schema; ignoring it as a foreign file"
        );
        return Ok(None);
    }
    parse(&value).map_err(|err| ConfigError::Seed {
        path: shown,
        source: Box::new(err),
    })?;
    Ok(Some(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn seed_file(text: &str) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        file
    }

    #[test]
    fn the_builtin_seed_is_the_shipped_file() {
        let from_file: Value = serde_yaml::from_str(SHIPPED_CONFIG).unwrap();
        assert_eq!(builtin_seed(), from_file);
        assert!(builtin_seed().is_object());
    }

    #[test]
    fn the_seed_parses_and_builds_a_policy() {
        let config = parse(&builtin_seed()).unwrap();
        let policy = crate::policy::Policy::build(config, Vec::new()).unwrap();
        assert!(!policy.jail().is_jailed());
        let shutdown = ["sudo", "shutdown", "-h", "now"].map(String::from);
        assert_eq!(
            policy.denylist().check(&shutdown),
            Some(r"(?i)^(\S*/)?shutdown\b")
        );
    }

    #[test]
    fn the_seed_holds_the_specs_values() {
        let c = parse(&builtin_seed()).unwrap();
        assert_eq!(
            (c.max_timeout_ms, c.max_bg_timeout_ms, c.default_timeout_ms),
            (120_000, 0, 30_000)
        );
        assert_eq!(c.max_output_bytes, 1_048_576);
        assert_eq!(c.working_dir, None);
        assert!(c.env.inherit);
        assert_eq!(c.env.allow, ["PATH", "HOME", "LANG", "LC_ALL", "TERM"]);
        assert_eq!(
            c.denylist_patterns,
            [
                r"rm\s+-rf\s+/",
                r":\(\)\s*\{\s*:\|",
                r"(?i)^(\S*/)?mkfs",
                r"(?i)^(\S*/)?dd\s+if=",
                r"(?i)^(\S*/)?shutdown\b",
                r"(?i)^(\S*/)?reboot\b",
                "/etc/shadow",
            ]
        );
        assert_eq!((c.max_concurrent_jobs, c.job_retention_secs), (16, 3600));
        assert!(c.fs.host_roots.is_empty());
        assert!(c.fs.allow_unjailed);
        assert_eq!(
            (c.fs.max_read_bytes, c.fs.max_write_bytes),
            (16_777_216, 16_777_216)
        );
        assert_eq!(c.fs.denylist_paths, ["/etc/passwd", "/etc/shadow"]);
        assert!(!c.fs.allow_special_bits);
        assert_eq!(c.fs.exec_confinement, crate::config::ExecConfinement::Off);
        assert_eq!(
            c.fs.exec_writable,
            [
                "/tmp",
                "/dev",
                "~/.cache",
                "~/.cargo",
                "~/.local/share/pnpm",
                "~/.gnupg"
            ]
        );
        assert!(c.sandbox.enabled);
        assert_eq!(c.commit_messages.model, None);
        assert_eq!(c.commit_messages.thinking, crate::config::Thinking::Low);
        assert_eq!(c.commit_messages.instructions, "");
        assert_eq!(
            c.code.non_accessible_globs,
            [
                "**/.env",
                "**/.env.*",
                "**/*.pem",
                "**/*.key",
                "**/secrets/**"
            ]
        );
        assert_eq!(
            c.code,
            crate::config::CodeConfig {
                non_accessible_globs: c.code.non_accessible_globs.clone(),
                ..Default::default()
            }
        );
    }

    /// Every property path of the schema, at every depth.
    fn schema_paths(node: &Value, prefix: &str, out: &mut Vec<String>) {
        if let Some(props) = node.get("properties").and_then(Value::as_object) {
            for (name, prop) in props {
                let path = if prefix.is_empty() {
                    name.clone()
                } else {
                    format!("{prefix}.{name}")
                };
                out.push(path.clone());
                schema_paths(prop, &path, out);
            }
        }
    }

    #[test]
    fn every_schema_key_appears_in_the_seed() {
        let seed = builtin_seed();
        let mut paths = Vec::new();
        schema_paths(&crate::config::schema::config_schema(), "", &mut paths);
        assert!(paths.len() > 40, "{paths:?}");
        let missing: Vec<&String> = paths
            .iter()
            .filter(|p| {
                p.split('.')
                    .try_fold(&seed, |node, key| node.get(key))
                    .is_none()
            })
            .collect();
        assert!(
            missing.is_empty(),
            "schema keys missing from config.yaml: {missing:?}"
        );
    }

    #[test]
    fn a_missing_file_falls_through() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load_seed_file(&dir.path().join("config.yaml"))
            .unwrap()
            .is_none());
    }

    #[test]
    fn a_valid_seed_is_returned_as_json() {
        let file = seed_file("fs:\n  host_roots: [/srv]\nmax_timeout_ms: 5\n");
        let value = load_seed_file(file.path()).unwrap().unwrap();
        assert_eq!(value["fs"]["host_roots"][0], "/srv");
        assert_eq!(value["max_timeout_ms"], 5);
    }

    #[test]
    fn a_foreign_mapping_is_ignored() {
        let file = seed_file("workers:\n  - name: ide\nmodules: []\n");
        assert!(load_seed_file(file.path()).unwrap().is_none());
    }

    #[test]
    fn removed_keys_alone_are_ours_and_abort() {
        let file = seed_file("inherit_env: true\nallowed_env: [PATH]\n");
        let err = load_seed_file(file.path()).unwrap_err().to_string();
        assert!(err.contains("config keys removed in 0.7.0"), "{err}");
        let file = seed_file("allowlist: []\n");
        let err = load_seed_file(file.path()).unwrap_err().to_string();
        assert!(
            err.contains("`allowlist` (removed in 0.8.0, no replacement)"),
            "{err}"
        );
    }

    #[test]
    fn a_shell_shaped_file_that_fails_to_parse_aborts() {
        let file = seed_file("max_timeout_ms: soon\n");
        let err = load_seed_file(file.path()).unwrap_err().to_string();
        assert!(err.starts_with("seed file "), "{err}");
        assert!(err.contains("`max_timeout_ms`"), "{err}");
    }

    #[test]
    fn broken_yaml_and_non_mappings_abort() {
        for text in ["fs: [unclosed\n", "- a\n- b\n", "", "just a string\n"] {
            let file = seed_file(text);
            assert!(
                matches!(
                    load_seed_file(file.path()),
                    Err(ConfigError::SeedNotYaml { .. })
                ),
                "{text:?}"
            );
        }
    }

    #[test]
    fn an_unreadable_path_aborts() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            load_seed_file(dir.path()),
            Err(ConfigError::SeedUnreadable { .. })
        ));
    }
}
