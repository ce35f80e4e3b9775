//! Parsing the job functions' payloads.
//!
//! Security meaning: every field is checked here and a bad one is `S210`
//! before the executor is asked anything. A caller-chosen `job_id` is only a
//! name (the executor reserves it atomically); the session owner taken from
//! the call's metadata or payload grants nothing except being killed with
//! that session.
#![forbid(unsafe_code)]

use crate::error::ShellError;
use ide_proto::OutputWindow;
use schemars::JsonSchema;
use serde_json::{Map, Value};

/// A job id chosen by the caller, or a fresh `job-<uuid>`.
pub fn job_id_for_start(input: &Value) -> Result<String, ShellError> {
    match input.get("job_id") {
        None | Some(Value::Null) => Ok(format!("job-{}", uuid::Uuid::new_v4())),
        Some(Value::String(id)) if !id.trim().is_empty() => Ok(id.clone()),
        Some(Value::String(_)) => Err(ShellError::invalid(
            "`job_id` must contain at least one non-whitespace character",
        )),
        Some(_) => Err(ShellError::invalid("`job_id` must be a string or null")),
    }
}

/// The session that owns a new job: the invocation metadata's `session_id`,
/// else a top-level `session_id` string in the payload; blank is none.
pub fn owner(input: &Value, metadata: Option<&Value>) -> Option<String> {
    let from = |v: Option<&Value>| {
        v.and_then(|v| v.get("session_id"))
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
            .map(str::to_owned)
    };
    from(metadata).or_else(|| from(Some(input)))
}

fn object<'a>(op: &str, input: &'a Value) -> Result<&'a Map<String, Value>, ShellError> {
    input
        .as_object()
        .ok_or_else(|| ShellError::invalid(format!("bad {op} payload: expected a JSON object")))
}

/// The required `job_id` of `status` and `kill`.
pub fn job_id(op: &str, input: &Value) -> Result<String, ShellError> {
    match object(op, input)?.get("job_id") {
        Some(Value::String(id)) => Ok(id.clone()),
        Some(_) => Err(ShellError::invalid(format!(
            "bad {op} payload: `job_id` must be a string"
        ))),
        None => Err(ShellError::invalid(format!(
            "bad {op} payload: missing `job_id`"
        ))),
    }
}

/// The optional output window of `status`; `None` when the caller asked for
/// no paging (the response is then exactly the spec's shape).
pub fn window(input: &Value) -> Result<Option<OutputWindow>, ShellError> {
    let obj = object("status", input)?;
    let field = |key: &str| match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| {
            ShellError::invalid(format!(
                "bad status payload: `{key}` must be a non-negative integer"
            ))
        }),
    };
    let window = OutputWindow {
        stdout_offset: field("stdout_offset")?,
        stderr_offset: field("stderr_offset")?,
        max_bytes: field("max_bytes")?,
    };
    Ok((window != OutputWindow::default()).then_some(window))
}

/// The `session_ids` of `kill-session-jobs`.
pub fn session_ids(input: &Value) -> Result<Vec<String>, ShellError> {
    let bad = || {
        ShellError::invalid(
            "bad kill-session-jobs payload: `session_ids` must be an array of strings",
        )
    };
    let items = object("kill-session-jobs", input)?
        .get("session_ids")
        .and_then(Value::as_array)
        .ok_or_else(bad)?;
    items
        .iter()
        .map(|v| v.as_str().map(str::to_owned).ok_or_else(bad))
        .collect()
}

/// `shell::status` as published. Paging fields are optional.
#[derive(JsonSchema)]
#[allow(dead_code)]
pub struct StatusRequest {
    /// The id `shell::exec_bg` returned.
    job_id: String,
    /// Return stdout from this byte offset (counted from the first byte the
    /// job ever wrote); adds the paging fields to the response.
    stdout_offset: Option<u64>,
    /// Return stderr from this byte offset; adds the paging fields.
    stderr_offset: Option<u64>,
    /// At most this many bytes per stream; adds the paging fields.
    max_bytes: Option<u64>,
}

/// `shell::kill` as published.
#[derive(JsonSchema)]
#[allow(dead_code)]
pub struct KillRequest {
    /// The id `shell::exec_bg` returned.
    job_id: String,
}

/// `shell::kill-session-jobs` as published.
#[derive(JsonSchema)]
#[allow(dead_code)]
pub struct KillSessionJobsRequest {
    /// Sessions whose running jobs are killed.
    session_ids: Vec<String>,
}

/// `shell::list` as published: no fields.
#[derive(JsonSchema)]
pub struct ListRequest {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_start_id_is_chosen_or_generated() {
        assert_eq!(
            job_id_for_start(&json!({"job_id": "mine"})).unwrap(),
            "mine"
        );
        for absent in [json!({}), json!({"job_id": null})] {
            let id = job_id_for_start(&absent).unwrap();
            let uuid = id.strip_prefix("job-").unwrap();
            assert!(uuid::Uuid::parse_str(uuid).is_ok(), "{id}");
        }
        assert_ne!(
            job_id_for_start(&json!({})).unwrap(),
            job_id_for_start(&json!({})).unwrap()
        );
        for bad in [
            json!({"job_id": ""}),
            json!({"job_id": " \t"}),
            json!({"job_id": 5}),
        ] {
            assert_eq!(
                job_id_for_start(&bad).unwrap_err().code().as_deref(),
                Some("S210"),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_owner_comes_from_metadata_first() {
        let input = json!({"session_id": "from-payload"});
        let meta = json!({"session_id": "from-meta"});
        assert_eq!(owner(&input, Some(&meta)).as_deref(), Some("from-meta"));
        assert_eq!(owner(&input, None).as_deref(), Some("from-payload"));
        assert_eq!(
            owner(&input, Some(&json!({"other": 1}))).as_deref(),
            Some("from-payload")
        );
        assert_eq!(owner(&json!({"session_id": 3}), None), None);
        assert_eq!(
            owner(
                &json!({"session_id": "  "}),
                Some(&json!({"session_id": ""}))
            ),
            None
        );
        assert_eq!(owner(&json!({}), None), None);
    }

    #[test]
    fn status_and_kill_need_a_string_id() {
        assert_eq!(job_id("status", &json!({"job_id": "j"})).unwrap(), "j");
        for bad in [json!({}), json!({"job_id": 1}), json!("j"), json!(null)] {
            assert_eq!(
                job_id("status", &bad).unwrap_err().code().as_deref(),
                Some("S210"),
                "{bad}"
            );
        }
    }

    #[test]
    fn paging_is_absent_unless_asked_and_strictly_typed() {
        assert_eq!(window(&json!({"job_id": "j"})).unwrap(), None);
        assert_eq!(
            window(&json!({"job_id": "j", "max_bytes": null})).unwrap(),
            None
        );
        assert_eq!(
            window(&json!({"job_id": "j", "stdout_offset": 5, "max_bytes": 0})).unwrap(),
            Some(OutputWindow {
                stdout_offset: Some(5),
                stderr_offset: None,
                max_bytes: Some(0)
            })
        );
        for bad in [json!(-1), json!(1.5), json!("5")] {
            assert!(window(&json!({"job_id": "j", "stderr_offset": bad})).is_err());
        }
    }

    #[test]
    fn session_ids_must_be_strings() {
        assert_eq!(
            session_ids(&json!({"session_ids": ["a", "b"]})).unwrap(),
            ["a", "b"]
        );
        assert!(session_ids(&json!({"session_ids": []})).unwrap().is_empty());
        for bad in [
            json!({}),
            json!({"session_ids": "a"}),
            json!({"session_ids": [1]}),
        ] {
            assert_eq!(
                session_ids(&bad).unwrap_err().code().as_deref(),
                Some("S210"),
                "{bad}"
            );
        }
    }
}
