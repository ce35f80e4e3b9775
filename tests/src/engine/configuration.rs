//! The engine's built-in `configuration` worker: an in-memory store with the
//! real engine's semantics, codes and messages.
//!
//! Security meaning: the worker's boot and hot-reload paths are tested
//! against this store, so it must reproduce the traps of the real one:
//! `register` with an `initial_value` REPLACES the stored value, a value
//! loaded from disk has no schema (`set` answers `SCHEMA_UNAVAILABLE`), a
//! `null` left by a schema-only registration fails `get`, and `NOT_FOUND` is
//! the only "nothing stored" answer.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;

use iii_sdk::protocol::ErrorBody;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::expand::expand;
use super::schema::violations;

/// The event types the `configuration` trigger type knows.
pub(crate) const EVENT_TYPES: [&str; 3] = [
    "configuration:registered",
    "configuration:updated",
    "configuration:deleted",
];

struct Entry {
    name: Option<String>,
    description: Option<String>,
    schema: Option<Value>,
    metadata: Option<Value>,
    value: Value,
}

/// A store change to announce to `configuration` trigger subscribers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Change {
    pub event_type: &'static str,
    pub id: String,
    name: Option<String>,
    description: Option<String>,
    schema: Option<Value>,
    metadata: Option<Value>,
    old_value: Value,
    new_value: Value,
}

impl Change {
    /// The `data` a subscriber receives; values are expanded (raw when
    /// expansion fails) and the entry's `metadata` appears only when set.
    pub fn event(&self) -> Value {
        let expanded = |v: &Value| expand(v).unwrap_or_else(|_| v.clone());
        let mut event = json!({
            "type": "configuration",
            "event_type": self.event_type,
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "schema": self.schema,
            "old_value": expanded(&self.old_value),
            "new_value": expanded(&self.new_value),
        });
        if let (Some(metadata), Some(map)) = (&self.metadata, event.as_object_mut()) {
            map.insert("metadata".into(), metadata.clone());
        }
        event
    }
}

/// The result of a configuration call, and the change it made, if any.
pub(crate) type Outcome = Result<(Value, Option<Change>), ErrorBody>;

/// In-memory configuration entries keyed by id.
#[derive(Default)]
pub(crate) struct ConfigStore {
    entries: BTreeMap<String, Entry>,
}

#[derive(Deserialize)]
struct RegisterRequest {
    id: String,
    name: String,
    description: String,
    schema: Value,
    #[serde(default)]
    initial_value: Option<Value>,
    #[serde(default)]
    metadata: Option<Value>,
}

#[derive(Deserialize)]
struct GetRequest {
    id: String,
    #[serde(default)]
    raw: bool,
}

#[derive(Deserialize)]
struct SetRequest {
    id: String,
    value: Value,
}

#[derive(Deserialize)]
struct IdRequest {
    id: String,
}

fn parse<T: for<'de> Deserialize<'de>>(data: &Value) -> Result<T, ErrorBody> {
    T::deserialize(data).map_err(|e| {
        ErrorBody::new(
            "deserialization_error",
            format!("Failed to deserialize input: {e}"),
        )
    })
}

fn check_id(id: &str) -> Result<(), ErrorBody> {
    let valid = (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if valid {
        Ok(())
    } else {
        Err(ErrorBody::new(
            "INVALID_ID",
            format!("invalid configuration id '{id}': must match [a-z0-9_-]{{1,64}}"),
        ))
    }
}

fn not_found(id: &str) -> ErrorBody {
    ErrorBody::new("NOT_FOUND", format!("configuration '{id}' not found"))
}

fn schema_invalid(violations: Vec<String>) -> ErrorBody {
    ErrorBody::new(
        "SCHEMA_INVALID",
        format!("schema validation failed: {}", violations.join("; ")),
    )
}

/// Validates `value` against `schema` with every violation listed.
fn validate(schema: &Value, value: &Value) -> Result<(), ErrorBody> {
    match violations(schema, value) {
        Ok(found) if found.is_empty() => Ok(()),
        Ok(found) => Err(schema_invalid(found)),
        Err(broken) => Err(schema_invalid(vec![broken])),
    }
}

fn expanded(value: &Value) -> Result<Value, ErrorBody> {
    expand(value).map_err(|var| {
        ErrorBody::new(
            "EXPAND_FAILED",
            format!("environment variable '{var}' is not set and has no default"),
        )
    })
}

/// Validates the value a caller wants stored (after expansion, as `get`
/// will see it).
fn validate_stored(schema: &Value, value: &Value) -> Result<(), ErrorBody> {
    validate(schema, &expanded(value)?)
}

impl ConfigStore {
    /// Serves `configuration::<function>`; `None` when no such function exists.
    pub fn call(&mut self, function: &str, data: &Value) -> Option<Outcome> {
        Some(match function {
            "register" => self.register(data),
            "get" => self.get(data).map(|v| (v, None)),
            "set" => self.set(data),
            "list" => self.list(data).map(|v| (v, None)),
            "schema" => self.schema(data).map(|v| (v, None)),
            _ => return None,
        })
    }

    /// Stores `value` with no schema, as the fs adapter reloads it at boot.
    pub fn preload(&mut self, id: &str, value: Value) {
        self.entries.insert(
            id.to_string(),
            Entry {
                name: None,
                description: None,
                schema: None,
                metadata: None,
                value,
            },
        );
    }

    /// Replaces the stored value unvalidated, as an operator editing the
    /// adapter's file does, and returns the `configuration:updated` change.
    pub fn external_set(&mut self, id: &str, value: Value) -> Change {
        let entry = self.entries.entry(id.to_string()).or_insert(Entry {
            name: None,
            description: None,
            schema: None,
            metadata: None,
            value: Value::Null,
        });
        let old_value = std::mem::replace(&mut entry.value, value);
        Self::change("configuration:updated", id, entry, old_value)
    }

    /// The raw stored value; `None` when there is no entry.
    pub fn raw(&self, id: &str) -> Option<Value> {
        self.entries.get(id).map(|e| e.value.clone())
    }

    fn change(event_type: &'static str, id: &str, entry: &Entry, old_value: Value) -> Change {
        Change {
            event_type,
            id: id.to_string(),
            name: entry.name.clone(),
            description: entry.description.clone(),
            schema: entry.schema.clone(),
            metadata: entry.metadata.clone(),
            old_value,
            new_value: entry.value.clone(),
        }
    }

    fn register(&mut self, data: &Value) -> Outcome {
        let req: RegisterRequest = parse(data)?;
        check_id(&req.id)?;
        if let Some(initial) = &req.initial_value {
            validate_stored(&req.schema, initial)?;
        } else if let Err(broken) = violations(&req.schema, &Value::Null) {
            return Err(schema_invalid(vec![broken]));
        }
        let existed = self.entries.get(&req.id).map(|e| e.value.clone());
        let value = req
            .initial_value
            .or_else(|| existed.clone())
            .unwrap_or(Value::Null);
        let entry = Entry {
            name: Some(req.name),
            description: Some(req.description),
            schema: Some(req.schema),
            metadata: req.metadata,
            value,
        };
        let (event_type, old_value) = match existed {
            Some(old) => ("configuration:updated", old),
            None => ("configuration:registered", Value::Null),
        };
        let change = Self::change(event_type, &req.id, &entry, old_value);
        let result = describe(&req.id, &entry, true);
        self.entries.insert(req.id, entry);
        Ok((result, Some(change)))
    }

    fn get(&self, data: &Value) -> Result<Value, ErrorBody> {
        let req: GetRequest = parse(data)?;
        let entry = self
            .entries
            .get(&req.id)
            .ok_or_else(|| not_found(&req.id))?;
        let value = if req.raw {
            entry.value.clone()
        } else {
            let value = expanded(&entry.value)?;
            if let Some(schema) = &entry.schema {
                validate(schema, &value)?;
            }
            value
        };
        Ok(json!({ "id": req.id, "value": value }))
    }

    fn set(&mut self, data: &Value) -> Outcome {
        let req: SetRequest = parse(data)?;
        check_id(&req.id)?;
        let entry = self.entries.get_mut(&req.id).ok_or_else(|| {
            ErrorBody::new(
                "NOT_REGISTERED",
                format!(
                    "configuration '{}' is not registered; call configuration::register first",
                    req.id
                ),
            )
        })?;
        let schema = entry.schema.as_ref().ok_or_else(|| {
            ErrorBody::new(
                "SCHEMA_UNAVAILABLE",
                format!(
                    "configuration '{}' has no schema since the engine restarted; call configuration::register first",
                    req.id
                ),
            )
        })?;
        validate_stored(schema, &req.value)?;
        let old_value = std::mem::replace(&mut entry.value, req.value.clone());
        let change = Self::change("configuration:updated", &req.id, entry, old_value.clone());
        Ok((
            json!({ "old_value": old_value, "new_value": req.value }),
            Some(change),
        ))
    }

    fn list(&self, data: &Value) -> Result<Value, ErrorBody> {
        if !data.is_object() {
            return Err(ErrorBody::new(
                "deserialization_error",
                "Failed to deserialize input: expected an object",
            ));
        }
        let configurations: Vec<Value> = self
            .entries
            .iter()
            .filter(|(_, e)| e.schema.is_some())
            .map(|(id, e)| describe(id, e, false))
            .collect();
        Ok(json!({ "configurations": configurations }))
    }

    fn schema(&self, data: &Value) -> Result<Value, ErrorBody> {
        let req: IdRequest = parse(data)?;
        match self.entries.get(&req.id) {
            Some(e) if e.schema.is_some() => Ok(describe(&req.id, e, false)),
            _ => Err(not_found(&req.id)),
        }
    }
}

/// `{id, name, description, schema, value?, metadata?}` of one entry.
fn describe(id: &str, entry: &Entry, with_value: bool) -> Value {
    let mut map = Map::new();
    map.insert("id".into(), json!(id));
    map.insert("name".into(), json!(entry.name));
    map.insert("description".into(), json!(entry.description));
    map.insert("schema".into(), json!(entry.schema));
    if with_value {
        map.insert("value".into(), entry.value.clone());
    }
    if let Some(metadata) = &entry.metadata {
        map.insert("metadata".into(), metadata.clone());
    }
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "required": ["port"],
            "properties": { "port": { "type": "integer" } }
        })
    }

    fn register(store: &mut ConfigStore, initial: Option<Value>) -> Outcome {
        let mut data = json!({
            "id": "ide", "name": "IDE", "description": "d", "schema": schema(),
            "_caller_worker_id": "w"
        });
        if let Some(v) = initial {
            data["initial_value"] = v;
        }
        store.call("register", &data).expect("known function")
    }

    fn call(store: &mut ConfigStore, f: &str, data: Value) -> Outcome {
        store.call(f, &data).expect("known function")
    }

    fn code(outcome: Outcome) -> String {
        outcome.expect_err("must fail").code
    }

    #[test]
    fn get_of_a_missing_entry_is_not_found() {
        let mut s = ConfigStore::default();
        let err = call(&mut s, "get", json!({"id": "ide"})).unwrap_err();
        assert_eq!(err.code, "NOT_FOUND");
        assert_eq!(err.message, "configuration 'ide' not found");
    }

    #[test]
    fn register_without_initial_value_stores_null_and_get_then_fails_validation() {
        let mut s = ConfigStore::default();
        let (result, change) = register(&mut s, None).unwrap();
        assert_eq!(result["value"], Value::Null);
        assert_eq!(change.unwrap().event_type, "configuration:registered");
        assert_eq!(s.raw("ide"), Some(Value::Null));
        assert_eq!(
            code(call(&mut s, "get", json!({"id": "ide"}))),
            "SCHEMA_INVALID"
        );
        let raw = call(&mut s, "get", json!({"id": "ide", "raw": true}))
            .unwrap()
            .0;
        assert_eq!(raw, json!({"id": "ide", "value": null}));
    }

    #[test]
    fn register_with_initial_value_replaces_the_stored_value() {
        let mut s = ConfigStore::default();
        register(&mut s, Some(json!({"port": 1}))).unwrap();
        call(&mut s, "set", json!({"id": "ide", "value": {"port": 2}})).unwrap();
        let (_, change) = register(&mut s, Some(json!({"port": 3}))).unwrap();
        assert_eq!(s.raw("ide"), Some(json!({"port": 3})));
        let change = change.unwrap();
        assert_eq!(change.event_type, "configuration:updated");
        assert_eq!(change.event()["old_value"], json!({"port": 2}));
        assert_eq!(change.event()["new_value"], json!({"port": 3}));
    }

    #[test]
    fn register_without_initial_value_keeps_the_stored_value() {
        let mut s = ConfigStore::default();
        register(&mut s, Some(json!({"port": 1}))).unwrap();
        register(&mut s, None).unwrap();
        assert_eq!(s.raw("ide"), Some(json!({"port": 1})));
    }

    #[test]
    fn an_invalid_initial_value_is_refused_and_nothing_is_stored() {
        let mut s = ConfigStore::default();
        let err = register(&mut s, Some(json!({"port": "x"}))).unwrap_err();
        assert_eq!(err.code, "SCHEMA_INVALID");
        assert!(
            err.message.starts_with("schema validation failed: "),
            "{}",
            err.message
        );
        assert_eq!(s.raw("ide"), None);
    }

    #[test]
    fn a_preloaded_entry_reads_but_refuses_set_until_registered() {
        let mut s = ConfigStore::default();
        s.preload("ide", json!({"port": 5}));
        let got = call(&mut s, "get", json!({"id": "ide"})).unwrap().0;
        assert_eq!(got["value"], json!({"port": 5}));
        assert_eq!(
            code(call(
                &mut s,
                "set",
                json!({"id": "ide", "value": {"port": 6}})
            )),
            "SCHEMA_UNAVAILABLE"
        );
        let (_, change) = register(&mut s, None).unwrap();
        assert_eq!(change.unwrap().event_type, "configuration:updated");
        assert_eq!(s.raw("ide"), Some(json!({"port": 5})));
        call(&mut s, "set", json!({"id": "ide", "value": {"port": 6}})).unwrap();
    }

    #[test]
    fn set_reports_old_and_new_and_validates() {
        let mut s = ConfigStore::default();
        assert_eq!(
            code(call(&mut s, "set", json!({"id": "ide", "value": {}}))),
            "NOT_REGISTERED"
        );
        register(&mut s, None).unwrap();
        let (result, change) =
            call(&mut s, "set", json!({"id": "ide", "value": {"port": 7}})).unwrap();
        assert_eq!(result, json!({"old_value": null, "new_value": {"port": 7}}));
        assert_eq!(change.unwrap().event_type, "configuration:updated");
        assert_eq!(
            code(call(
                &mut s,
                "set",
                json!({"id": "ide", "value": {"port": -1.5}})
            )),
            "SCHEMA_INVALID"
        );
        assert_eq!(s.raw("ide"), Some(json!({"port": 7})));
    }

    #[test]
    fn ids_are_checked_on_register_and_set_only() {
        let mut s = ConfigStore::default();
        let data = json!({"id": "Bad Id", "name": "n", "description": "d", "schema": {}});
        let err = call(&mut s, "register", data).unwrap_err();
        assert_eq!(err.code, "INVALID_ID");
        assert_eq!(
            err.message,
            "invalid configuration id 'Bad Id': must match [a-z0-9_-]{1,64}"
        );
        let long = "a".repeat(65);
        assert_eq!(
            code(call(&mut s, "set", json!({"id": long, "value": 1}))),
            "INVALID_ID"
        );
        assert_eq!(
            code(call(&mut s, "get", json!({"id": "Bad Id"}))),
            "NOT_FOUND"
        );
    }

    #[test]
    fn get_expands_and_validates_the_expanded_value() {
        let mut s = ConfigStore::default();
        register(
            &mut s,
            Some(json!({"port": "${IDE_TESTS_UNSET_PORT_VAR:8080}"})),
        )
        .unwrap();
        let got = call(&mut s, "get", json!({"id": "ide"})).unwrap().0;
        assert_eq!(got["value"], json!({"port": 8080}));
        let raw = call(&mut s, "get", json!({"id": "ide", "raw": true}))
            .unwrap()
            .0;
        assert_eq!(
            raw["value"],
            json!({"port": "${IDE_TESTS_UNSET_PORT_VAR:8080}"})
        );
        s.external_set("ide", json!({"port": "${IDE_TESTS_UNSET_PORT_VAR}"}));
        assert_eq!(
            code(call(&mut s, "get", json!({"id": "ide"}))),
            "EXPAND_FAILED"
        );
    }

    #[test]
    fn malformed_input_is_a_deserialization_error() {
        let mut s = ConfigStore::default();
        assert_eq!(
            code(call(&mut s, "get", json!({"raw": true}))),
            "deserialization_error"
        );
        assert_eq!(
            code(call(&mut s, "list", json!([]))),
            "deserialization_error"
        );
        assert!(s.call("delete-everything", &json!({})).is_none());
    }

    #[test]
    fn list_and_schema_show_registered_entries_without_values() {
        let mut s = ConfigStore::default();
        s.preload("zzz", json!(1));
        register(&mut s, Some(json!({"port": 1}))).unwrap();
        let listed = call(&mut s, "list", json!({})).unwrap().0;
        assert_eq!(
            listed,
            json!({"configurations": [{"id": "ide", "name": "IDE", "description": "d", "schema": schema()}]})
        );
        let described = call(&mut s, "schema", json!({"id": "ide"})).unwrap().0;
        assert_eq!(described["schema"], schema());
        assert!(described.get("value").is_none());
        assert_eq!(
            code(call(&mut s, "schema", json!({"id": "zzz"}))),
            "NOT_FOUND"
        );
    }

    #[test]
    fn events_carry_entry_metadata_only_when_present() {
        let mut s = ConfigStore::default();
        let change = s.external_set("x", json!(1));
        let event = change.event();
        assert_eq!(event["type"], "configuration");
        assert_eq!(event["event_type"], "configuration:updated");
        assert!(event.get("metadata").is_none());
        let data = json!({"id": "y", "name": "n", "description": "d", "schema": {},
                          "metadata": {"ui_form": "ide"}});
        let (_, change) = call(&mut s, "register", data).unwrap();
        assert_eq!(
            change.unwrap().event()["metadata"],
            json!({"ui_form": "ide"})
        );
    }
}
