//! The payloads of `shell::fs::*`, as callers send them.
//!
//! Unknown fields are tolerated (the engine adds `_caller_worker_id`; a
//! harness stamps `fs_scope`, which is accepted but not published in any
//! schema). A payload that does not deserialize is `S210` with the serde
//! reason.
#![forbid(unsafe_code)]

use crate::error::ShellError;
use crate::target::Target;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

/// A request that may name a `target`.
pub trait Targeted {
    /// The raw `target` field.
    fn target_field(&self) -> Option<&Value>;

    /// Where the call runs (absent or null: the host).
    fn target(&self) -> Result<Target, ShellError> {
        Target::parse(self.target_field())
    }

    /// Refuses what only the host can do before a sandbox call is sent.
    fn check_sandbox(&self) -> Result<(), ShellError> {
        Ok(())
    }
}

macro_rules! targeted {
    ($($ty:ty),*) => {$(
        impl Targeted for $ty {
            fn target_field(&self) -> Option<&Value> {
                self.target.as_ref()
            }
        }
    )*};
}

targeted!(
    LsRequest,
    PathRequest,
    MkdirRequest,
    RmRequest,
    ChmodRequest,
    MvRequest,
    GrepRequest,
    SedRequest
);

impl Targeted for WriteRequest {
    fn target_field(&self) -> Option<&Value> {
        self.target.as_ref()
    }

    /// The sandbox protocol takes bodies as channel references only.
    fn check_sandbox(&self) -> Result<(), ShellError> {
        let contents = self
            .content
            .iter()
            .chain(self.files.iter().flatten().map(|f| &f.content));
        if contents.into_iter().any(Value::is_string) {
            return Err(ShellError::invalid(
                "inline string content is host-only; a sandbox target needs a channel reference in content",
            ));
        }
        Ok(())
    }
}

/// Parses the payload of `op`.
pub fn parse<T: DeserializeOwned>(op: &str, input: &Value) -> Result<T, ShellError> {
    serde_json::from_value(input.clone())
        .map_err(|e| ShellError::invalid(format!("bad {op} payload: {e}")))
}

fn yes() -> bool {
    true
}

/// `shell::fs::ls`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct LsRequest {
    /// Directory to list.
    pub path: String,
    /// 1-based page (0 reads as 1).
    #[serde(default)]
    pub page: Option<u32>,
    /// Entries per page: default 500, at most 2000.
    #[serde(default)]
    pub page_size: Option<u32>,
    /// The host (default) or `{kind: "sandbox", sandbox_id}`.
    #[serde(default)]
    #[schemars(with = "Option<Target>")]
    pub target: Option<Value>,
}

/// `shell::fs::stat` and `shell::fs::read`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct PathRequest {
    pub path: String,
    /// The host (default) or `{kind: "sandbox", sandbox_id}`.
    #[serde(default)]
    #[schemars(with = "Option<Target>")]
    pub target: Option<Value>,
}

/// `shell::fs::mkdir`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct MkdirRequest {
    pub path: String,
    /// Octal mode of the new directory (default "0755"; not subject to umask).
    #[serde(default)]
    pub mode: Option<String>,
    /// Create missing parents; an existing directory is then not an error.
    #[serde(default)]
    pub parents: bool,
    #[serde(default)]
    #[schemars(with = "Option<Target>")]
    pub target: Option<Value>,
}

/// `shell::fs::rm`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RmRequest {
    pub path: String,
    /// Remove a directory and everything in it (links are removed, never followed).
    #[serde(default)]
    pub recursive: bool,
    #[serde(default)]
    #[schemars(with = "Option<Target>")]
    pub target: Option<Value>,
}

/// `shell::fs::chmod`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ChmodRequest {
    pub path: String,
    /// Octal mode, e.g. "0644".
    pub mode: String,
    /// New owner uid.
    #[serde(default)]
    pub uid: Option<u32>,
    /// New group gid.
    #[serde(default)]
    pub gid: Option<u32>,
    /// Apply to the whole tree (symlinks inside are skipped).
    #[serde(default)]
    pub recursive: bool,
    #[serde(default)]
    #[schemars(with = "Option<Target>")]
    pub target: Option<Value>,
}

/// `shell::fs::mv`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct MvRequest {
    pub src: String,
    pub dst: String,
    /// Replace an existing destination.
    #[serde(default)]
    pub overwrite: bool,
    #[serde(default)]
    #[schemars(with = "Option<Target>")]
    pub target: Option<Value>,
}

/// `shell::fs::grep`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GrepRequest {
    /// File or directory to search.
    pub path: String,
    /// A Rust regex (at most 4096 bytes).
    pub pattern: String,
    /// Search directories recursively (default true).
    #[serde(default = "yes")]
    pub recursive: bool,
    #[serde(default)]
    pub ignore_case: bool,
    /// Only files matching one of these globs (no `/`: basename; with `/`: path relative to `path`).
    #[serde(default)]
    pub include_glob: Vec<String>,
    /// Skip files (and prune directories) matching one of these globs.
    #[serde(default)]
    pub exclude_glob: Vec<String>,
    /// Stop after this many matches (default 10000; 0 = default).
    #[serde(default)]
    pub max_matches: Option<u64>,
    /// Cut longer matching lines (default 4096; 0 = default).
    #[serde(default)]
    pub max_line_bytes: Option<u64>,
    #[serde(default)]
    #[schemars(with = "Option<Target>")]
    pub target: Option<Value>,
}

/// `shell::fs::sed`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SedRequest {
    /// Files to edit (exactly one of `files` / `path`).
    #[serde(default)]
    pub files: Vec<String>,
    /// A file or a directory to walk (exactly one of `files` / `path`).
    #[serde(default)]
    pub path: Option<String>,
    /// Walk directories recursively (default true).
    #[serde(default = "yes")]
    pub recursive: bool,
    #[serde(default)]
    pub include_glob: Vec<String>,
    #[serde(default)]
    pub exclude_glob: Vec<String>,
    /// Regex (or literal with `regex: false`), at most 4096 bytes.
    pub pattern: String,
    /// Replacement; in regex mode `$1` and `${name}` expand.
    pub replacement: String,
    /// False: `pattern` is a literal string (default true).
    #[serde(default = "yes")]
    pub regex: bool,
    /// Replace only the first match of each line.
    #[serde(default)]
    pub first_only: bool,
    #[serde(default)]
    pub ignore_case: bool,
    #[serde(default)]
    #[schemars(with = "Option<Target>")]
    pub target: Option<Value>,
}

/// One file of a batch `shell::fs::write`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteFile {
    pub path: String,
    /// Inline text, or a channel reference `{channel_id, access_key, direction}` to stream from.
    #[schemars(with = "ContentSchema")]
    pub content: Value,
    /// Octal mode (default "0644").
    #[serde(default)]
    pub mode: Option<String>,
    /// Create missing parent directories.
    #[serde(default)]
    pub parents: bool,
}

/// `shell::fs::write`: the single form (`path`, `content`, …) or the batch
/// form (`files`), never both.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteRequest {
    #[serde(default)]
    pub path: Option<String>,
    /// Inline text (host only), or a channel reference to stream from.
    #[serde(default)]
    #[schemars(with = "Option<ContentSchema>")]
    pub content: Option<Value>,
    /// Octal mode (default "0644").
    #[serde(default)]
    pub mode: Option<String>,
    /// Create missing parent directories.
    #[serde(default)]
    pub parents: Option<bool>,
    /// Batch form: several files in one call.
    #[serde(default)]
    pub files: Option<Vec<WriteFile>>,
    #[serde(default)]
    #[schemars(with = "Option<Target>")]
    pub target: Option<Value>,
}

/// What `content` may be (for the published schema).
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum ContentSchema {
    /// The file's text.
    Inline(String),
    /// A channel the bytes are read from.
    Stream(ContentRef),
}

/// A channel reference to read a body from (`direction` defaults to "read").
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ContentRef {
    pub channel_id: String,
    pub access_key: String,
    #[serde(default)]
    pub direction: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_are_tolerated_and_defaults_apply() {
        let r: GrepRequest = parse(
            "grep",
            &json!({"path": "/x", "pattern": "a", "_caller_worker_id": "w", "fs_scope": {"root": "/"}}),
        )
        .unwrap();
        assert!(r.recursive && !r.ignore_case);
        assert!(r.include_glob.is_empty());
        let r: SedRequest = parse(
            "sed",
            &json!({"path": "/x", "pattern": "a", "replacement": "b"}),
        )
        .unwrap();
        assert!(r.regex && r.recursive && r.files.is_empty());
    }

    #[test]
    fn a_bad_payload_is_s210_naming_the_op() {
        let err = parse::<RmRequest>("rm", &json!({"recursive": true})).unwrap_err();
        assert_eq!(err.code().as_deref(), Some("S210"));
        assert!(
            err.message.starts_with("bad rm payload: "),
            "{}",
            err.message
        );
        let err = parse::<LsRequest>("ls", &json!({"path": "/", "page": -1})).unwrap_err();
        assert!(
            err.message.starts_with("bad ls payload: "),
            "{}",
            err.message
        );
    }

    #[test]
    fn fs_scope_is_not_published() {
        for schema in [
            crate::engine::schema_for::<LsRequest>(),
            crate::engine::schema_for::<WriteRequest>(),
            crate::engine::schema_for::<SedRequest>(),
        ] {
            let text = schema.to_string();
            assert!(!text.contains("fs_scope"), "{text}");
            assert!(text.contains("\"target\""), "{text}");
        }
    }
}
