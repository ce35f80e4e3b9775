//! The optional `target` every exec and fs call accepts: the host (default)
//! or a sandbox microVM reached through the `iii-sandbox` worker.
#![forbid(unsafe_code)]

use crate::error::ShellError;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// Where a call runs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    /// This machine (the default when `target` is absent or null).
    Host,
    /// A microVM managed by the `iii-sandbox` worker.
    Sandbox {
        /// The sandbox's UUID.
        sandbox_id: String,
    },
}

impl Target {
    /// Parses the `target` field; anything but the two shapes is `S210`.
    pub fn parse(value: Option<&Value>) -> Result<Target, ShellError> {
        let value = match value {
            None | Some(Value::Null) => return Ok(Target::Host),
            Some(v) => v,
        };
        let target: Target = serde_json::from_value(value.clone())
            .map_err(|e| ShellError::invalid(format!("bad target: {e}")))?;
        if let Target::Sandbox { sandbox_id } = &target {
            if uuid::Uuid::parse_str(sandbox_id).is_err() {
                return Err(ShellError::invalid(format!(
                    "bad target: sandbox_id {sandbox_id:?} is not a UUID"
                )));
            }
        }
        Ok(target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn absent_and_null_are_the_host() {
        assert_eq!(Target::parse(None), Ok(Target::Host));
        assert_eq!(Target::parse(Some(&Value::Null)), Ok(Target::Host));
        assert_eq!(
            Target::parse(Some(&json!({"kind": "host"}))),
            Ok(Target::Host)
        );
    }

    #[test]
    fn a_sandbox_needs_a_uuid() {
        let id = "7f0c1b0e-2a40-4c53-9f0e-1d2b3c4d5e6f";
        assert_eq!(
            Target::parse(Some(&json!({"kind": "sandbox", "sandbox_id": id}))),
            Ok(Target::Sandbox {
                sandbox_id: id.into()
            })
        );
        for bad in [
            json!({"kind": "sandbox", "sandbox_id": "nope"}),
            json!({"kind": "sandbox"}),
            json!({"kind": "vm"}),
            json!("host"),
        ] {
            let err = Target::parse(Some(&bad)).unwrap_err();
            assert_eq!(err.code().as_deref(), Some("S210"), "{bad}");
        }
    }
}
