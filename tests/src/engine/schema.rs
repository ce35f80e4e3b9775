//! JSON Schema checks shared by the configuration store and observer args.
//!
//! Security meaning: values the engine would refuse (a configuration that
//! fails its schema, observer args that fail a function's `args_format`) are
//! refused here too, with every violation listed.

#![forbid(unsafe_code)]

use serde_json::Value;

/// Every way `value` violates `schema` (empty when valid); `Err` when the
/// schema itself does not compile.
pub(crate) fn violations(schema: &Value, value: &Value) -> Result<Vec<String>, String> {
    let validator =
        jsonschema::validator_for(schema).map_err(|e| format!("invalid schema: {e}"))?;
    Ok(validator
        .iter_errors(value)
        .map(|e| {
            let path = e.instance_path().to_string();
            if path.is_empty() {
                e.to_string()
            } else {
                format!("{path}: {e}")
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lists_every_violation_with_its_path() {
        let schema = json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}
        });
        let found = violations(&schema, &json!({"a": "x", "b": 1})).unwrap();
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().any(|v| v.starts_with("/a: ")), "{found:?}");
        assert!(violations(&schema, &json!({"a": 1})).unwrap().is_empty());
    }

    #[test]
    fn a_broken_schema_is_an_error() {
        assert!(violations(&json!({"type": 5}), &json!(1)).is_err());
    }
}
