//! The configuration value the operator stores in the `configuration` worker.
//!
//! Security meaning: a key missing from the stored value takes the *code*
//! default below, which is deliberately narrower than the shipped seed
//! (`env.inherit: false`, `fs.allow_unjailed: false`, no denylist), so a
//! half-written config never silently boots wider than the operator asked.
//! The top level tolerates unknown keys (the engine may add some); the `env`
//! block refuses them so a half-migrated 0.6.x shape cannot slip through.
//! Every field's doc comment becomes its schema `description`, which the
//! console renders next to the knob.
#![forbid(unsafe_code)]

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The top-level keys of [`Config`]: a seed file sharing none of them is
/// someone else's file, not a misconfigured one.
pub const TOP_LEVEL_KEYS: &[&str] = &[
    "max_timeout_ms",
    "max_bg_timeout_ms",
    "default_timeout_ms",
    "max_output_bytes",
    "working_dir",
    "env",
    "denylist_patterns",
    "max_concurrent_jobs",
    "job_retention_secs",
    "fs",
    "sandbox",
    "commit_messages",
    "code",
];

/// The nested blocks of [`Config`]. serde would also accept a block written
/// as a positional list (`env: [true, []]`), so `parse` requires each one
/// present to be a mapping.
pub const BLOCKS: &[&[&str]] = &[
    &["env"],
    &["fs"],
    &["sandbox"],
    &["commit_messages"],
    &["code"],
    &["code", "templates"],
];

/// The whole operator configuration of the worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Config {
    /// Foreground exec hard cap in milliseconds; a per-call timeout_ms is clamped to this.
    pub max_timeout_ms: u64,
    /// Host background job hard cap in milliseconds; 0 = unbounded (a job runs until it exits or shell::kill).
    pub max_bg_timeout_ms: u64,
    /// Timeout in milliseconds applied when a shell::exec call omits timeout_ms (still clamped to max_timeout_ms).
    pub default_timeout_ms: u64,
    /// Bytes of stdout and of stderr kept per command; output past this sets stdout_truncated/stderr_truncated.
    pub max_output_bytes: u64,
    /// Default working directory of an exec without cwd or fs_scope; null = the worker's own cwd.
    pub working_dir: Option<String>,
    /// Which of the worker's own environment variables child commands receive.
    pub env: EnvConfig,
    /// Advisory regexes over argv.join(" "): a tripwire for catastrophic mistakes, NOT a security boundary. Patterns anchored with ^ match argv[0], tolerating a sudo/doas/nohup/env/timeout wrapper.
    pub denylist_patterns: Vec<String>,
    /// Running background jobs allowed at once; shell::exec_bg past this is rejected.
    pub max_concurrent_jobs: usize,
    /// Seconds a finished background job stays queryable before it is pruned.
    pub job_retention_secs: u64,
    /// The filesystem jail and the caps of shell::fs::* (and of coder::*, exec cwd).
    pub fs: FsConfig,
    /// Forwarding of target: sandbox calls to the iii-sandbox microVM worker.
    pub sandbox: SandboxConfig,
    /// The Commit panel's Generate button (read live on every call).
    pub commit_messages: CommitMessagesConfig,
    /// The coder::* code surface.
    pub code: CodeConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            max_timeout_ms: 30_000,
            max_bg_timeout_ms: 0,
            default_timeout_ms: 10_000,
            max_output_bytes: 1_048_576,
            working_dir: None,
            env: EnvConfig::default(),
            denylist_patterns: Vec::new(),
            max_concurrent_jobs: 16,
            job_retention_secs: 3600,
            fs: FsConfig::default(),
            sandbox: SandboxConfig::default(),
            commit_messages: CommitMessagesConfig::default(),
            code: CodeConfig::default(),
        }
    }
}

/// Environment forwarding to child commands. Per-call `env` is a separate,
/// deny-only gate that this block does not influence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct EnvConfig {
    /// true = children get the worker's whole environment; false = only the keys in allow. Per-call dangerous keys stay blocked either way.
    pub inherit: bool,
    /// Variables forwarded when inherit is false. With inherit false, git over SSH needs SSH_AUTH_SOCK here, which hands every child the agent's keys. Has no effect on per-call env.
    pub allow: Vec<String>,
}

impl Default for EnvConfig {
    fn default() -> Self {
        Self {
            inherit: false,
            allow: ["PATH", "HOME", "LANG", "LC_ALL", "TERM"]
                .map(String::from)
                .to_vec(),
        }
    }
}

/// The filesystem jail and its caps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct FsConfig {
    /// Absolute jail roots for shell::fs::*, coder::* and exec cwd; the first is primary (relative paths anchor there). Empty = unjailed, which requires allow_unjailed: true.
    pub host_roots: Vec<String>,
    /// Explicit opt-in to running with no jail root (required whenever host_roots is empty); unjailed paths are confined only by denylist_paths.
    pub allow_unjailed: bool,
    /// Largest file shell::fs::read returns, in bytes; 0 = unlimited.
    pub max_read_bytes: u64,
    /// Largest file shell::fs::write accepts, in bytes; 0 = unlimited.
    pub max_write_bytes: u64,
    /// Absolute paths (and everything beneath them) that read exactly like missing paths (S211). Primary protection while unjailed; defense in depth once host_roots is set.
    pub denylist_paths: Vec<String>,
    /// Permit setuid/setgid/sticky bits in mkdir/chmod/write modes; they are a privilege-escalation primitive when the worker runs as root.
    pub allow_special_bits: bool,
    /// "landlock" = a host exec carrying fs_scope may write only under its root, grants, git dir and exec_writable, and fails closed (S222) without Landlock; "off" = unconfined.
    pub exec_confinement: ExecConfinement,
    /// Extra writable paths for a confined exec (~/ expands against $HOME); missing paths are skipped.
    pub exec_writable: Vec<String>,
}

impl Default for FsConfig {
    fn default() -> Self {
        Self {
            host_roots: Vec::new(),
            allow_unjailed: false,
            max_read_bytes: 0,
            max_write_bytes: 0,
            denylist_paths: Vec::new(),
            allow_special_bits: false,
            exec_confinement: ExecConfinement::Off,
            exec_writable: [
                "/tmp",
                "/dev",
                "~/.cache",
                "~/.cargo",
                "~/.local/share/pnpm",
                "~/.gnupg",
            ]
            .map(String::from)
            .to_vec(),
        }
    }
}

/// Whether a scoped host exec is write-confined with Landlock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExecConfinement {
    /// Execs write wherever the worker's user may.
    #[default]
    Off,
    /// A scoped exec writes only beneath its session's roots; fails closed without Landlock.
    Landlock,
}

/// Sandbox forwarding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct SandboxConfig {
    /// false = every target: sandbox call is refused with S210.
    pub enabled: bool,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self { enabled: true }
    }
}

/// Settings of the console's commit-message generator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct CommitMessagesConfig {
    /// Router model id ("provider::model" or bare); null = the chat's default model, passed by the panel.
    pub model: Option<String>,
    /// Reasoning effort sent to the router; "default" sends no override.
    pub thinking: Thinking,
    /// Free text appended to the prompt, e.g. "Use Conventional Commits".
    pub instructions: String,
}

impl Default for CommitMessagesConfig {
    fn default() -> Self {
        Self {
            model: None,
            thinking: Thinking::Low,
            instructions: String::new(),
        }
    }
}

/// Reasoning effort for commit-message generation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Thinking {
    /// Send no reasoning override; the model's own default applies.
    Default,
    /// Minimal reasoning.
    Minimal,
    /// Low reasoning (the default).
    #[default]
    Low,
    /// Medium reasoning.
    Medium,
    /// High reasoning.
    High,
    /// Extra-high reasoning.
    Xhigh,
}

/// The coder::* surface: protection, noise filtering and response budgets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct CodeConfig {
    /// Globs (relative to a jail root; unjailed: the absolute path without its leading /) whose paths read like missing ones (S211/C211) for reads and writes; listings still show them.
    pub non_accessible_globs: Vec<String>,
    /// Noise globs that coder::tree and coder::search skip unless the caller asks for them.
    pub default_exclude_globs: Vec<String>,
    /// Largest file coder::read-file returns, in bytes.
    pub max_read_bytes: u64,
    /// Largest content coder::create-file/update-file accepts, in bytes.
    pub max_write_bytes: u64,
    /// Depth of coder::tree when the caller gives none.
    pub tree_default_depth: usize,
    /// Entries coder::tree shows per folder before eliding the rest.
    pub tree_per_folder_limit: usize,
    /// Page size of coder::list-folder when the caller gives none.
    pub list_default_page_size: usize,
    /// Largest page a coder::list-folder caller may ask for.
    pub list_max_page_size: usize,
    /// Matches coder::search returns when the caller gives no limit.
    pub search_default_max_matches: usize,
    /// Bytes kept of each matched line in coder::search results.
    pub search_default_max_line_bytes: usize,
    /// Total bytes one batched coder read may return.
    pub batch_read_budget_bytes: u64,
    /// Cap on one coder::* response body, in bytes.
    pub max_output_bytes: u64,
    /// Cap on one coder::search response, in bytes.
    pub search_response_budget_bytes: u64,
    /// Where coder::list-templates and coder::scaffold-worker find worker templates.
    pub templates: TemplatesConfig,
}

impl Default for CodeConfig {
    fn default() -> Self {
        Self {
            non_accessible_globs: Vec::new(),
            default_exclude_globs: [
                "**/.git/**",
                "**/node_modules/**",
                "**/target/**",
                "**/dist/**",
                "**/.venv/**",
                "**/__pycache__/**",
            ]
            .map(String::from)
            .to_vec(),
            max_read_bytes: 10_485_760,
            max_write_bytes: 10_485_760,
            tree_default_depth: 4,
            tree_per_folder_limit: 50,
            list_default_page_size: 100,
            list_max_page_size: 1000,
            search_default_max_matches: 1000,
            search_default_max_line_bytes: 4096,
            batch_read_budget_bytes: 1_048_576,
            max_output_bytes: 131_072,
            search_response_budget_bytes: 262_144,
            templates: TemplatesConfig::default(),
        }
    }
}

/// The worker-templates source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct TemplatesConfig {
    /// Local templates checkout (repo root or its iii/ dir), read on every call; III_TEMPLATE_DIR overrides. null = clone url.
    pub dir: Option<String>,
    /// Git URL shallow-cloned when dir is unset; III_TEMPLATE_URL overrides.
    pub url: String,
    /// Branch or tag to clone.
    #[serde(rename = "ref")]
    pub git_ref: String,
    /// Clone cache directory; a relative path resolves against III_COMPOSE_DIR.
    pub cache_dir: String,
    /// Seconds after which the clone is fetched again (coder::list-templates refresh: true forces it).
    pub refresh_secs: u64,
}

impl Default for TemplatesConfig {
    fn default() -> Self {
        Self {
            dir: None,
            url: "https://github.com/iii-hq/templates.git".into(),
            git_ref: "main".into(),
            cache_dir: "data/shell/templates".into(),
            refresh_secs: 600,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn missing_keys_take_the_narrow_code_defaults() {
        let c: Config = serde_json::from_value(json!({})).unwrap();
        assert_eq!(c.max_timeout_ms, 30_000);
        assert_eq!(c.default_timeout_ms, 10_000);
        assert!(!c.env.inherit);
        assert!(!c.fs.allow_unjailed);
        assert!(c.denylist_patterns.is_empty());
        assert_eq!(c.fs.max_read_bytes, 0);
        assert_eq!(c.fs.exec_confinement, ExecConfinement::Off);
        assert_eq!(c.commit_messages.thinking, Thinking::Low);
        assert_eq!(c.code.templates.git_ref, "main");
        assert_eq!(c.code.default_exclude_globs.len(), 6);
    }

    #[test]
    fn a_partial_block_keeps_the_defaults_of_its_other_keys() {
        let c: Config = serde_json::from_value(json!({"fs": {"host_roots": ["/srv"]}})).unwrap();
        assert_eq!(c.fs.host_roots, ["/srv"]);
        assert!(!c.fs.allow_unjailed);
        assert_eq!(c.fs.exec_writable.len(), 6);
    }

    #[test]
    fn the_top_level_tolerates_unknown_keys_but_env_does_not() {
        assert!(serde_json::from_value::<Config>(json!({"turns": {"data_dir": "x"}})).is_ok());
        assert!(
            serde_json::from_value::<Config>(json!({"env": {"inherit": true, "x": 1}})).is_err()
        );
    }

    #[test]
    fn enums_use_the_wire_spelling() {
        let c: Config = serde_json::from_value(json!({
            "fs": {"exec_confinement": "landlock"},
            "commit_messages": {"thinking": "xhigh"}
        }))
        .unwrap();
        assert_eq!(c.fs.exec_confinement, ExecConfinement::Landlock);
        assert_eq!(c.commit_messages.thinking, Thinking::Xhigh);
        assert!(
            serde_json::from_value::<Config>(json!({"fs": {"exec_confinement": "on"}})).is_err()
        );
    }

    #[test]
    fn top_level_keys_are_exactly_the_serialized_fields() {
        let value = serde_json::to_value(Config::default()).unwrap();
        let mut keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut listed = TOP_LEVEL_KEYS.to_vec();
        keys.sort_unstable();
        listed.sort_unstable();
        assert_eq!(keys, listed);
    }
}
