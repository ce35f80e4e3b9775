//! The JSON Schema registered with the `configuration` worker.
//!
//! Subschemas are inlined so the console can render each block as a form
//! without resolving `$ref`s, and every property carries its field's doc
//! comment as `description` (a unit test enforces it), so each security knob
//! is documented where the operator changes it.
#![forbid(unsafe_code)]

use schemars::gen::SchemaSettings;
use serde_json::Value;

use super::Config;

/// The draft-07 schema of [`Config`].
pub fn config_schema() -> Value {
    let schema = SchemaSettings::draft07()
        .with(|s| s.inline_subschemas = true)
        .into_generator()
        .into_root_schema_for::<Config>();
    serde_json::to_value(schema).expect("a derived JSON schema always serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Collects `(path, description)` for every property at every depth.
    fn properties(node: &Value, path: &str, out: &mut Vec<(String, Option<String>)>) {
        match node {
            Value::Object(map) => {
                if let Some(Value::Object(props)) = map.get("properties") {
                    for (name, prop) in props {
                        let here = if path.is_empty() {
                            name.clone()
                        } else {
                            format!("{path}.{name}")
                        };
                        let description = prop
                            .get("description")
                            .and_then(Value::as_str)
                            .map(str::to_owned);
                        out.push((here.clone(), description));
                        properties(prop, &here, out);
                    }
                }
                for (key, child) in map {
                    if key != "properties" {
                        properties(child, path, out);
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| properties(item, path, out)),
            _ => {}
        }
    }

    #[test]
    fn every_property_at_every_depth_has_a_description() {
        let mut found = Vec::new();
        properties(&config_schema(), "", &mut found);
        assert!(found.len() > 40, "only {} properties found", found.len());
        let missing: Vec<&String> = found
            .iter()
            .filter(|(_, d)| d.as_deref().is_none_or(|d| d.trim().is_empty()))
            .map(|(p, _)| p)
            .collect();
        assert!(
            missing.is_empty(),
            "properties without a description: {missing:?}"
        );
    }

    #[test]
    fn the_blocks_parse_checks_are_the_schemas_objects() {
        fn objects(node: &Value, prefix: &str, out: &mut Vec<String>) {
            let Some(props) = node.get("properties").and_then(Value::as_object) else {
                return;
            };
            for (name, prop) in props {
                let path = if prefix.is_empty() {
                    name.clone()
                } else {
                    format!("{prefix}.{name}")
                };
                if prop["type"] == "object" {
                    out.push(path.clone());
                }
                objects(prop, &path, out);
            }
        }
        let mut found = Vec::new();
        objects(&config_schema(), "", &mut found);
        let mut listed: Vec<String> = crate::config::BLOCKS.iter().map(|p| p.join(".")).collect();
        found.sort();
        listed.sort();
        assert_eq!(found, listed);
    }

    #[test]
    fn it_is_draft_07_with_no_references() {
        let schema = config_schema();
        assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
        assert!(!schema.to_string().contains("$ref"));
        assert_eq!(schema["properties"]["env"]["additionalProperties"], false);
        assert_eq!(
            schema["properties"]["fs"]["properties"]["host_roots"]["type"],
            "array"
        );
    }

    #[test]
    fn the_wire_names_are_used() {
        let schema = config_schema();
        let templates = &schema["properties"]["code"]["properties"]["templates"]["properties"];
        assert!(templates.get("ref").is_some());
        assert!(templates.get("git_ref").is_none());
    }
}
