//! The operator configuration: its model, how a stored value is parsed, the
//! shipped seed and the schema the console renders.
//!
//! Security meaning: parsing fails closed. A null stored value, a removed key
//! or a mistyped field is an error, never a silent fall back to a default
//! that could be wider than what the operator wrote.
#![forbid(unsafe_code)]

pub mod lifecycle;
mod model;
pub mod removed;
pub mod schema;
pub mod seed;
pub mod status;

pub use model::*;

use serde_json::Value;

/// Why a configuration value (stored, seeded or reloaded) was refused; the
/// `Display` text is what the operator reads in the log and config-status.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The stored value is JSON `null`.
    #[error("stored configuration value is null; refusing to fall back to the built-in default (write a config with configuration::set)")]
    Null,
    /// The value carries keys removed in an earlier release.
    #[error("{0}")]
    Removed(String),
    /// A key has the wrong type or an unknown value.
    #[error("invalid config at `{key}`: {message}")]
    Invalid {
        /// Dotted path of the offending key (`.` for the value itself).
        key: String,
        /// What serde said.
        message: String,
    },
    /// The seed file exists but cannot be read.
    #[error("seed file {path}: cannot be read: {source}")]
    SeedUnreadable {
        /// The `--config` path.
        path: String,
        /// The read error.
        source: std::io::Error,
    },
    /// The seed file is not YAML, or not a YAML mapping.
    #[error("seed file {path}: {message}")]
    SeedNotYaml {
        /// The `--config` path.
        path: String,
        /// What the YAML parser said.
        message: String,
    },
    /// The seed file is a config of ours, but an invalid one.
    #[error("seed file {path}: {source}")]
    Seed {
        /// The `--config` path.
        path: String,
        /// Why its value was refused.
        source: Box<ConfigError>,
    },
    /// The value parsed but is unsafe or inconsistent (policy validation).
    #[error("{0}")]
    Policy(String),
}

/// Parses a stored or seeded value into a [`Config`], refusing null values
/// and removed keys before serde can ignore them.
pub fn parse(value: &Value) -> Result<Config, ConfigError> {
    if value.is_null() {
        return Err(ConfigError::Null);
    }
    let hits = removed::find(value);
    if !hits.is_empty() {
        return Err(ConfigError::Removed(removed::describe(&hits)));
    }
    require_mappings(value)?;
    serde_path_to_error::deserialize(value).map_err(|err| ConfigError::Invalid {
        key: err.path().to_string(),
        message: err.into_inner().to_string(),
    })
}

/// Refuses a value, or a block of it, that is not a mapping.
fn require_mappings(value: &Value) -> Result<(), ConfigError> {
    let not_a_mapping = |key: String, found: &Value| ConfigError::Invalid {
        key,
        message: format!("expected a mapping of config keys, found {}", kind(found)),
    };
    if !value.is_object() {
        return Err(not_a_mapping(".".into(), value));
    }
    for path in BLOCKS {
        let found = path
            .iter()
            .try_fold(value, |node, key| node.as_object()?.get(*key));
        match found {
            Some(block) if !block.is_object() => return Err(not_a_mapping(path.join("."), block)),
            _ => {}
        }
    }
    Ok(())
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn null_is_refused_not_defaulted() {
        let err = parse(&Value::Null).unwrap_err();
        assert!(matches!(err, ConfigError::Null));
        assert!(err
            .to_string()
            .starts_with("stored configuration value is null; refusing to fall back"));
    }

    #[test]
    fn removed_keys_win_over_type_errors() {
        let err = parse(&json!({"inherit_env": true, "max_timeout_ms": "x"})).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("config key removed in 0.7.0: `inherit_env` -> `env.inherit`"),
            "{err}"
        );
    }

    #[test]
    fn a_type_error_names_the_key() {
        let err = parse(&json!({"fs": {"max_read_bytes": "lots"}})).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("invalid config at `fs.max_read_bytes`: invalid type: string"),
            "{text}"
        );
        let err = parse(&json!({"max_timeout_ms": -1})).unwrap_err();
        assert!(err.to_string().contains("`max_timeout_ms`"), "{err}");
    }

    #[test]
    fn an_unknown_env_key_is_refused() {
        let err = parse(&json!({"env": {"inherit": true, "forward": []}})).unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("invalid config at `env"), "{text}");
        assert!(text.contains("unknown field `forward`"), "{text}");
    }

    #[test]
    fn a_non_object_is_refused() {
        let err = parse(&json!("shell")).unwrap_err();
        assert!(matches!(err, ConfigError::Invalid { .. }), "{err}");
        assert!(parse(&json!([])).is_err());
    }

    #[test]
    fn a_block_written_as_a_list_or_null_is_refused() {
        let cases = [
            (json!({"env": [true, []]}), "invalid config at `env`: expected a mapping of config keys, found a list"),
            (json!({"fs": null}), "invalid config at `fs`: expected a mapping of config keys, found null"),
            (json!({"code": {"templates": "x"}}), "invalid config at `code.templates`: expected a mapping of config keys, found a string"),
        ];
        for (value, want) in cases {
            assert_eq!(parse(&value).unwrap_err().to_string(), want);
        }
    }

    #[test]
    fn unknown_top_level_keys_are_tolerated() {
        let config = parse(&json!({"turns": {}, "_engine": 1, "max_timeout_ms": 5})).unwrap();
        assert_eq!(config.max_timeout_ms, 5);
    }
}
