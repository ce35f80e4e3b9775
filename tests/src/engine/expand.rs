//! `${VAR}` / `${VAR:default}` expansion of configuration values, as the
//! engine's `configuration::get` applies it.
//!
//! Security meaning: the worker under test sees expanded values, so tests of
//! its configuration handling run against what production hands it,
//! including placeholders that turn into numbers and unset variables that
//! make `get` fail (`EXPAND_FAILED`).

#![forbid(unsafe_code)]

use serde_json::Value;

/// Expands every placeholder inside every string of `value`, reading the
/// process environment. A string that is exactly one placeholder is re-read
/// as a YAML scalar (`"${P:8080}"` becomes `8080`). Fails with the name of a
/// variable that is unset and has no default.
pub(crate) fn expand(value: &Value) -> Result<Value, String> {
    expand_with(value, &|name| std::env::var(name).ok())
}

fn expand_with(value: &Value, env: &dyn Fn(&str) -> Option<String>) -> Result<Value, String> {
    Ok(match value {
        Value::String(s) => expand_string(s, env)?,
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| expand_with(v, env))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), expand_with(v, env)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

/// One `${...}` found in a string: byte range and its two halves.
struct Placeholder<'a> {
    start: usize,
    end: usize,
    name: &'a str,
    default: Option<&'a str>,
}

fn next_placeholder(s: &str, from: usize) -> Option<Placeholder<'_>> {
    let start = from + s.get(from..)?.find("${")?;
    let body_start = start + 2;
    let close = body_start + s[body_start..].find('}')?;
    let body = &s[body_start..close];
    let (name, default) = match body.split_once(':') {
        Some((name, default)) => (name, Some(default)),
        None => (body, None),
    };
    Some(Placeholder {
        start,
        end: close + 1,
        name,
        default,
    })
}

fn resolve(p: &Placeholder<'_>, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    env(p.name)
        .or_else(|| p.default.map(str::to_string))
        .ok_or_else(|| p.name.to_string())
}

fn expand_string(s: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Value, String> {
    if let Some(p) = next_placeholder(s, 0) {
        if p.start == 0 && p.end == s.len() {
            return Ok(yaml_scalar(resolve(&p, env)?));
        }
    }
    let mut out = String::with_capacity(s.len());
    let mut at = 0;
    while let Some(p) = next_placeholder(s, at) {
        out.push_str(&s[at..p.start]);
        out.push_str(&resolve(&p, env)?);
        at = p.end;
    }
    out.push_str(&s[at..]);
    Ok(Value::String(out))
}

/// Reads `text` as a YAML scalar; anything that is not one stays a string.
fn yaml_scalar(text: String) -> Value {
    match serde_yaml::from_str::<Value>(&text) {
        Ok(v @ (Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_))) => v,
        _ => Value::String(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(name: &str) -> Option<String> {
        match name {
            "PORT" => Some("9090".into()),
            "HOST" => Some("example.test".into()),
            "FLAG" => Some("true".into()),
            "LIST" => Some("[1, 2]".into()),
            _ => None,
        }
    }

    fn run(v: Value) -> Result<Value, String> {
        expand_with(&v, &env)
    }

    #[test]
    fn a_lone_placeholder_becomes_a_yaml_scalar() {
        assert_eq!(run(json!("${PORT}")), Ok(json!(9090)));
        assert_eq!(run(json!("${MISSING:8080}")), Ok(json!(8080)));
        assert_eq!(run(json!("${FLAG}")), Ok(json!(true)));
        assert_eq!(run(json!("${HOST}")), Ok(json!("example.test")));
    }

    #[test]
    fn a_non_scalar_yaml_text_stays_a_string() {
        assert_eq!(run(json!("${LIST}")), Ok(json!("[1, 2]")));
    }

    #[test]
    fn placeholders_inside_text_are_substituted_as_text() {
        assert_eq!(
            run(json!("http://${HOST}:${PORT}/x")),
            Ok(json!("http://example.test:9090/x"))
        );
        assert_eq!(run(json!("a${MISSING:}b")), Ok(json!("ab")));
    }

    #[test]
    fn the_environment_wins_over_the_default() {
        assert_eq!(run(json!("${PORT:1}")), Ok(json!(9090)));
    }

    #[test]
    fn nested_values_are_expanded() {
        assert_eq!(
            run(json!({"a": ["${PORT}", {"b": "${HOST}"}], "n": 3, "z": null})),
            Ok(json!({"a": [9090, {"b": "example.test"}], "n": 3, "z": null}))
        );
    }

    #[test]
    fn an_unset_variable_without_default_fails_with_its_name() {
        assert_eq!(
            run(json!({"x": "pre ${NOPE} post"})),
            Err("NOPE".to_string())
        );
    }

    #[test]
    fn unterminated_placeholders_are_literal() {
        assert_eq!(run(json!("cost ${PORT")), Ok(json!("cost ${PORT")));
        assert_eq!(run(json!("$PORT")), Ok(json!("$PORT")));
    }
}
