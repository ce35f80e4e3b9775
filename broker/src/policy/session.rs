//! The harness's session scope (`fs_scope`) once validated: which directory
//! anchors relative paths and, at the `workspace` boundary, which directories
//! a session may reach at all.
//!
//! Security meaning: the jail (`fs.host_roots`) stays the security ceiling
//! in both modes; a scope only narrows it. At the `workspace` boundary a path
//! outside the scope root and its grants is `S220` even when the jail would
//! allow it, and the executor resolves the path beneath the scope directory
//! it was matched to (`RootedPath::anchor`), so a symlink inside the session
//! cannot lead out of it. Every directory here has already been checked by
//! the executor (it exists, is a directory, lies in the jail and misses the
//! denylist) and is in its canonical spelling.
#![forbid(unsafe_code)]

use serde::Deserialize;

/// What a scope's `root` means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Boundary {
    /// Root plus grants is the ceiling for fs paths and exec `cwd`.
    Workspace,
    /// Root only anchors relative paths and is the default exec `cwd`;
    /// `fs.host_roots` is the jail.
    ConfiguredRoots,
}

/// A validated session scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionScope {
    pub boundary: Boundary,
    /// Canonical absolute directory.
    pub root: String,
    /// Canonical absolute directories; invalid grants were already dropped.
    pub grants: Vec<String>,
}

impl SessionScope {
    /// The root, then each grant: the directories a `workspace` session may reach.
    pub fn dirs(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.root.as_str()).chain(self.grants.iter().map(String::as_str))
    }

    /// True when paths outside [`SessionScope::dirs`] are refused.
    pub fn confines_paths(&self) -> bool {
        self.boundary == Boundary::Workspace
    }
}
