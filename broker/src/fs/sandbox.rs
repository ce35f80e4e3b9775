//! Forwarding `shell::fs::*` with `target: sandbox` to the `iii-sandbox`
//! worker as `sandbox::fs::<op>`.
//!
//! Security meaning: nothing of a sandbox call touches the host. The gates
//! run first (`sandbox.enabled`, no inline content — the sandbox protocol
//! takes bodies only as channel references), the hidden `fs_scope` and the
//! engine's own `_`-prefixed fields are not passed on, and the sandbox's
//! error codes come back verbatim only when they are known ones.
#![forbid(unsafe_code)]

use super::listing::paging;
use crate::app::App;
use crate::error::ShellError;
use crate::policy::Policy;
use iii_sdk::protocol::TriggerRequest;
use serde_json::{Map, Value};

/// The gate every sandbox-targeted fs call passes before anything is sent.
pub fn check(policy: &Policy) -> Result<(), ShellError> {
    if policy.sandbox_enabled() {
        Ok(())
    } else {
        Err(ShellError::invalid(
            "sandbox targets are disabled on this worker (sandbox.enabled: false)",
        ))
    }
}

/// The payload sent on: the caller's fields minus `target`, `fs_scope` and
/// engine-private ones, plus `sandbox_id`.
pub fn payload(input: &Value, sandbox_id: &str) -> Value {
    let mut out: Map<String, Value> = input
        .as_object()
        .map(|obj| {
            obj.iter()
                .filter(|(k, _)| {
                    k.as_str() != "target" && k.as_str() != "fs_scope" && !k.starts_with('_')
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    out.insert("sandbox_id".into(), Value::String(sandbox_id.to_owned()));
    Value::Object(out)
}

/// Calls `sandbox::fs::<op>` and shapes its answer like the host's.
pub async fn forward(
    app: &App,
    policy: &Policy,
    op: &str,
    input: &Value,
    sandbox_id: &str,
) -> Result<Value, ShellError> {
    check(policy)?;
    let function = format!("sandbox::fs::{op}");
    match app
        .iii
        .trigger(TriggerRequest::new(&function, payload(input, sandbox_id)))
        .await
    {
        Ok(value) => Ok(shape(op, input, value)),
        Err(iii_sdk::Error::Remote { code, message, .. }) => {
            Err(ShellError::forwarded(&code, message))
        }
        Err(e) => Err(ShellError::internal(format!("{function} failed: {e}"))),
    }
}

/// `ls` is sorted and paginated here, as on the host; `mkdir` answers that
/// carry only `created` get the other fields' defaults.
fn shape(op: &str, input: &Value, mut value: Value) -> Value {
    match op {
        "ls" => {
            let mut entries = value
                .get_mut("entries")
                .and_then(Value::as_array_mut)
                .map(std::mem::take)
                .unwrap_or_default();
            entries.sort_by(|a, b| {
                let name = |v: &Value| {
                    v.get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned()
                };
                name(a).cmp(&name(b))
            });
            let number = |key: &str| {
                input
                    .get(key)
                    .and_then(Value::as_u64)
                    .and_then(|n| u32::try_from(n).ok())
            };
            let (page, page_size) = paging(number("page"), number("page_size"));
            let total = entries.len() as u64;
            let offset = u64::from(page - 1) * u64::from(page_size);
            let start = usize::try_from(offset)
                .unwrap_or(usize::MAX)
                .min(entries.len());
            let page_entries: Vec<Value> = entries
                .into_iter()
                .skip(start)
                .take(page_size as usize)
                .collect();
            serde_json::json!({
                "entries": page_entries,
                "total": total,
                "page": page,
                "page_size": page_size,
                "has_more": offset + u64::from(page_size) < total,
            })
        }
        "mkdir" => {
            if let Some(obj) = value.as_object_mut() {
                obj.entry("path").or_insert(Value::String(String::new()));
                obj.entry("already_existed").or_insert(Value::Bool(false));
            }
            value
        }
        _ => value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_payload_drops_the_target_and_hidden_fields() {
        let input = json!({"path": "/x", "target": {"kind": "sandbox"}, "fs_scope": {}, "_caller_worker_id": "w"});
        assert_eq!(
            payload(&input, "id"),
            json!({"path": "/x", "sandbox_id": "id"})
        );
    }

    #[test]
    fn sandbox_listings_are_sorted_and_paged_here() {
        let value = json!({"entries": [{"name": "c"}, {"name": "a"}, {"name": "b"}]});
        let shaped = shape("ls", &json!({"page": 2, "page_size": 2}), value);
        assert_eq!(shaped["entries"], json!([{"name": "c"}]));
        assert_eq!(shaped["total"], 3);
        assert_eq!(shaped["has_more"], false);
        let shaped = shape("mkdir", &json!({}), json!({"created": true}));
        assert_eq!(
            shaped,
            json!({"created": true, "path": "", "already_existed": false})
        );
    }
}
