//! The lexical fs jail: turns a caller's path into a [`RootedPath`] the
//! executor resolves beneath a root fd.
//!
//! Security meaning: this is the broker's policy layer, decided on spelling
//! alone. A path whose normalised form leaves every `fs.host_roots` entry is
//! `S215`; one under `fs.denylist_paths` reads exactly like a missing path
//! (`S211`), so a caller cannot probe for it. Errors echo only the caller's
//! own string, never a root. The executor repeats the confinement physically
//! (`RESOLVE_BENEATH`), which is why the caller's own `..` is passed through
//! whenever it stays beneath the chosen root: the kernel then resolves it the
//! way a command would, and a symlink that leaves the root fails there.
#![forbid(unsafe_code)]

use globset::GlobSet;
use ide_proto::RootedPath;

use super::globs;
use super::lexical::{is_beneath, join, normalize, remainder, stays_beneath};
use super::session::SessionScope;
use crate::config::ConfigError;
use crate::error::{Class, ShellError};

/// One jail root: the executor's canonical spelling plus the spellings a
/// caller may use for it.
#[derive(Debug, Clone)]
struct Root {
    /// Sent as [`RootedPath::root`].
    canonical: String,
    /// Normalised `canonical`.
    normal: String,
    /// Normalised canonical and configured spellings.
    aliases: Vec<String>,
}

/// The lexical jail of one policy snapshot.
#[derive(Debug, Clone)]
pub struct Jail {
    /// Empty means unjailed (the root is `/`).
    roots: Vec<Root>,
    /// Normalised `fs.denylist_paths`.
    denied: Vec<String>,
    protected: GlobSet,
    protected_sources: Vec<String>,
}

impl Jail {
    /// Builds the jail; `canonical` holds the executor's canonical form of
    /// each `configured` root, in the same order.
    pub fn new(
        configured: &[String],
        canonical: &[String],
        denylist_paths: &[String],
        protected_globs: &[String],
    ) -> Result<Jail, ConfigError> {
        if configured.len() != canonical.len() {
            return Err(ConfigError::Policy(format!(
                "got {} canonical roots for {} fs.host_roots entries",
                canonical.len(),
                configured.len()
            )));
        }
        let mut roots = Vec::with_capacity(configured.len());
        for (config_root, canonical_root) in configured.iter().zip(canonical) {
            require_absolute("fs.host_roots", config_root)?;
            require_absolute("canonical fs.host_roots", canonical_root)?;
            let normal = normalize(canonical_root);
            let mut aliases = vec![normal.clone()];
            let spelled = normalize(config_root);
            if spelled != normal {
                aliases.push(spelled);
            }
            roots.push(Root {
                canonical: canonical_root.clone(),
                normal,
                aliases,
            });
        }
        let mut denied = Vec::with_capacity(denylist_paths.len());
        for path in denylist_paths {
            require_absolute("fs.denylist_paths", path)?;
            denied.push(normalize(path));
        }
        Ok(Jail {
            roots,
            denied,
            protected: globs::compile("code.non_accessible_globs", protected_globs)?,
            protected_sources: protected_globs.to_vec(),
        })
    }

    /// False when unjailed: every absolute path is reachable, minus the denylist.
    pub fn is_jailed(&self) -> bool {
        !self.roots.is_empty()
    }

    /// The canonical jail roots, primary first (empty when unjailed).
    pub fn roots(&self) -> impl Iterator<Item = &str> {
        self.roots.iter().map(|r| r.canonical.as_str())
    }

    /// The anchor of relative paths when no session scope gives one.
    pub fn primary_root(&self) -> Option<&str> {
        self.roots.first().map(|r| r.canonical.as_str())
    }

    /// Resolves a caller's path; relative paths anchor at the primary root
    /// (and are refused when unjailed).
    pub fn resolve(&self, raw: &str) -> Result<RootedPath, ShellError> {
        self.resolve_in(raw, None, PathKind::Any)
    }

    /// Resolves a caller's path for a call that may carry a session scope:
    /// relative paths anchor at the scope root, and at the `workspace`
    /// boundary the path must lie beneath the scope root or a grant (`S220`
    /// otherwise) and is anchored there for the executor. `kind` only
    /// shapes the access hint of a refusal.
    pub fn resolve_in(
        &self,
        raw: &str,
        scope: Option<&SessionScope>,
        kind: PathKind,
    ) -> Result<RootedPath, ShellError> {
        if raw.is_empty() {
            return Err(ShellError::invalid("path is empty"));
        }
        if raw.contains('\0') {
            return Err(ShellError::invalid("path contains a NUL byte"));
        }
        let joined = if raw.starts_with('/') {
            raw.to_owned()
        } else {
            match scope.map(|s| s.root.as_str()).or_else(|| self.primary_root()) {
                Some(base) => join(base, raw),
                None => {
                    return Err(ShellError::invalid(format!(
                        "{raw}: path must be absolute (no fs.host_roots jail anchors relative paths; ~ is never expanded)"
                    )))
                }
            }
        };
        let normal = normalize(&joined);
        let Some((root, alias)) = self.containing_root(&normal) else {
            let roots: Vec<&str> = self.roots().collect();
            return Err(ShellError::outside(
                Class::Escape,
                raw,
                &format!(
                    "path escapes the fs jail roots (allowed: {})",
                    roots.join(", ")
                ),
                &requested_dir(&normal, raw, kind),
            ));
        };
        if self.denied.iter().any(|d| is_beneath(&normal, d)) {
            return Err(ShellError::not_found(raw));
        }
        let rel_of = |base: &str| match remainder(&joined, base) {
            Some(own) if stays_beneath(own) => own.trim_start_matches('/').to_owned(),
            _ => remainder(&normal, base).unwrap_or_default().to_owned(),
        };
        let Some(scope) = scope.filter(|s| s.confines_paths()) else {
            return Ok(RootedPath::new(root, rel_of(alias)));
        };
        // Scope directories are canonical: compare in the root's canonical spelling.
        let root_normal = normalize(root);
        let canonical = join(&root_normal, remainder(&normal, alias).unwrap_or_default());
        let canonical = normalize(&canonical);
        let Some(dir) = scope
            .dirs()
            .filter(|d| is_beneath(&canonical, d))
            .max_by_key(|d| d.len())
        else {
            let dirs: Vec<&str> = scope.dirs().collect();
            return Err(ShellError::outside(
                Class::OutsideScope,
                raw,
                &format!(
                    "path is outside this session's fs_scope (root and grants: {})",
                    dirs.join(", ")
                ),
                &requested_dir(&canonical, raw, kind),
            ));
        };
        let anchor = remainder(dir, &root_normal).ok_or_else(|| {
            ShellError::internal("a session directory lies outside its jail root")
        })?;
        Ok(RootedPath {
            root: root.to_owned(),
            anchor: anchor.to_owned(),
            rel: remainder(&canonical, dir).unwrap_or_default().to_owned(),
        })
    }

    /// The root (canonical spelling) and matched alias with the longest
    /// match for a normalised path; unjailed, always `/`.
    fn containing_root(&self, normal: &str) -> Option<(&str, &str)> {
        if !self.is_jailed() {
            return Some(("/", "/"));
        }
        self.roots
            .iter()
            .flat_map(|r| {
                r.aliases
                    .iter()
                    .map(move |a| (r.canonical.as_str(), a.as_str()))
            })
            .filter(|(_, alias)| is_beneath(normal, alias))
            .max_by_key(|(_, alias)| alias.len())
    }

    /// True when `code.non_accessible_globs` protects the path (or one of its
    /// ancestors): matched relative to every containing root, or unjailed
    /// against the absolute path without its leading `/`.
    pub fn is_protected(&self, rooted: &RootedPath) -> bool {
        if self.protected.is_empty() {
            return false;
        }
        let beneath = join(&rooted.anchor, &rooted.rel);
        let normal = normalize(&join(&rooted.root, &beneath));
        let mut candidates: Vec<&str> = vec![rooted.rel.trim_matches('/')];
        if self.is_jailed() {
            candidates.extend(
                self.roots
                    .iter()
                    .flat_map(|r| &r.aliases)
                    .filter_map(|alias| remainder(&normal, alias)),
            );
        } else {
            candidates.extend(remainder(&normal, "/"));
        }
        candidates.into_iter().any(|c| self.protects_or_ancestor(c))
    }

    fn protects_or_ancestor(&self, rel: &str) -> bool {
        if rel.is_empty() {
            return false;
        }
        let ancestors = rel.match_indices('/').map(|(i, _)| &rel[..i]);
        ancestors
            .chain([rel])
            .any(|p| !p.is_empty() && self.protected.is_match(p))
    }

    /// True when `next` lets a caller reach something this jail did not:
    /// unjailed now but jailed before, a root outside every old root, a
    /// denylisted path no longer covered, or a protected glob dropped.
    pub fn widens_to(&self, next: &Jail) -> bool {
        let roots_widen = self.is_jailed()
            && (!next.is_jailed()
                || next
                    .roots
                    .iter()
                    .any(|n| !self.roots.iter().any(|o| is_beneath(&n.normal, &o.normal))));
        let denylist_shrinks = self
            .denied
            .iter()
            .any(|d| !next.denied.iter().any(|n| is_beneath(d, n)));
        let globs_dropped = self
            .protected_sources
            .iter()
            .any(|g| !next.protected_sources.contains(g));
        roots_widen || denylist_shrinks || globs_dropped
    }
}

/// What a path names, for the access hint of a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    /// A working directory: access to the directory itself is what is needed.
    Dir,
    /// Any entry: its parent directory is what is needed (unless the caller
    /// spelled it with a trailing `/`).
    Any,
}

/// The directory a harness should ask access for after a refusal of the
/// normalised path `normal`. Decided on spelling: the broker never touches
/// the filesystem, and probing outside the jail would be an oracle.
fn requested_dir(normal: &str, raw: &str, kind: PathKind) -> String {
    if kind == PathKind::Dir || raw.ends_with('/') || normal == "/" {
        return normal.to_owned();
    }
    match normal.rfind('/') {
        Some(0) | None => "/".to_owned(),
        Some(i) => normal[..i].to_owned(),
    }
}

fn require_absolute(key: &str, path: &str) -> Result<(), ConfigError> {
    if path.starts_with('/') && !path.contains('\0') {
        Ok(())
    } else {
        Err(ConfigError::Policy(format!(
            "{key} entry {path:?} is not an absolute path (~ is never expanded)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::session::Boundary;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn jailed(roots: &[&str]) -> Jail {
        Jail::new(
            &strings(roots),
            &strings(roots),
            &strings(&["/srv/app/private", "/etc/shadow"]),
            &[],
        )
        .unwrap()
    }

    fn unjailed() -> Jail {
        Jail::new(&[], &[], &strings(&["/etc/passwd", "/etc/shadow"]), &[]).unwrap()
    }

    fn rooted(root: &str, rel: &str) -> RootedPath {
        RootedPath::new(root, rel)
    }

    fn code(err: ShellError) -> String {
        err.code().unwrap_or_default()
    }

    #[test]
    fn paths_inside_the_jail_keep_the_callers_remainder() {
        let j = jailed(&["/srv/app"]);
        assert_eq!(
            j.resolve("/srv/app/a/b").unwrap(),
            rooted("/srv/app", "a/b")
        );
        assert_eq!(j.resolve("/srv/app").unwrap(), rooted("/srv/app", ""));
        assert_eq!(j.resolve("/srv/app/").unwrap(), rooted("/srv/app", ""));
        assert_eq!(
            j.resolve("/srv/app/dir/").unwrap(),
            rooted("/srv/app", "dir/")
        );
        assert_eq!(j.resolve("/srv/app//a").unwrap(), rooted("/srv/app", "a"));
        assert_eq!(
            j.resolve("/srv/app/link/../x").unwrap(),
            rooted("/srv/app", "link/../x")
        );
    }

    #[test]
    fn climbing_out_is_an_escape_that_names_no_root() {
        let j = jailed(&["/srv/app"]);
        for raw in [
            "/srv/app/..",
            "/srv/app/../etc",
            "/srv/app/../../etc/passwd",
            "/srv/app/a/../../x",
            "/etc",
            "/",
            "../x",
            "a/../../x",
        ] {
            let err = j.resolve(raw).unwrap_err();
            assert_eq!(err.code().as_deref(), Some("S215"), "{raw}");
            assert!(
                err.message.starts_with(&format!(
                    "{raw}: path escapes the fs jail roots (allowed: /srv/app) filesystem_access_request="
                )),
                "{}",
                err.message
            );
        }
    }

    #[test]
    fn a_prefix_string_of_a_sibling_is_not_containment() {
        let j = jailed(&["/srv/app"]);
        assert_eq!(code(j.resolve("/srv/app2/x").unwrap_err()), "S215");
        assert_eq!(code(j.resolve("/srv/ap").unwrap_err()), "S215");
        assert_eq!(code(j.resolve("/srv/app/../app2").unwrap_err()), "S215");
    }

    #[test]
    fn lexical_detours_that_stay_inside_are_normalised() {
        let j = jailed(&["/srv/app"]);
        assert_eq!(
            j.resolve("/srv/app/../app/x").unwrap(),
            rooted("/srv/app", "x")
        );
        assert_eq!(
            j.resolve("//srv//app/./x").unwrap(),
            rooted("/srv/app", "x")
        );
        assert_eq!(
            j.resolve("/srv/../srv/app/x").unwrap(),
            rooted("/srv/app", "x")
        );
        assert_eq!(j.resolve("/srv/app/.").unwrap(), rooted("/srv/app", "."));
    }

    #[test]
    fn relative_paths_anchor_at_the_primary_root_when_jailed() {
        let j = jailed(&["/srv/app", "/data"]);
        assert_eq!(
            j.resolve("src/main.rs").unwrap(),
            rooted("/srv/app", "src/main.rs")
        );
        assert_eq!(j.resolve(".").unwrap(), rooted("/srv/app", "."));
        assert_eq!(j.resolve("~/x").unwrap(), rooted("/srv/app", "~/x"));
        assert_eq!(code(j.resolve("..").unwrap_err()), "S215");
        assert_eq!(j.resolve("../../data/x").unwrap(), rooted("/data", "x"));
    }

    #[test]
    fn relative_paths_are_refused_when_unjailed() {
        let j = unjailed();
        for raw in ["x", "~/x", ".", "./etc"] {
            let err = j.resolve(raw).unwrap_err();
            assert_eq!(err.code().as_deref(), Some("S210"), "{raw}");
            assert!(err.message.contains("must be absolute"), "{}", err.message);
        }
    }

    #[test]
    fn unjailed_paths_root_at_slash() {
        let j = unjailed();
        assert_eq!(j.resolve("/home/u/x").unwrap(), rooted("/", "home/u/x"));
        assert_eq!(j.resolve("/").unwrap(), rooted("/", ""));
        assert_eq!(j.resolve("/tmp/l/../x").unwrap(), rooted("/", "tmp/l/../x"));
        assert_eq!(j.resolve("/../tmp").unwrap(), rooted("/", "tmp"));
        assert_eq!(j.resolve("//tmp").unwrap(), rooted("/", "tmp"));
    }

    #[test]
    fn empty_and_nul_are_invalid() {
        for j in [jailed(&["/srv/app"]), unjailed()] {
            assert_eq!(code(j.resolve("").unwrap_err()), "S210");
            assert_eq!(code(j.resolve("/srv/app/a\0b").unwrap_err()), "S210");
            assert_eq!(code(j.resolve("\0").unwrap_err()), "S210");
        }
    }

    #[test]
    fn denylisted_paths_read_exactly_like_missing_ones() {
        let j = unjailed();
        for raw in [
            "/etc/shadow",
            "/etc/x/../shadow",
            "/etc/shadow/",
            "//etc//shadow",
            "/etc/./passwd",
            "/etc/passwd/x",
        ] {
            assert_eq!(
                j.resolve(raw).unwrap_err(),
                ShellError::not_found(raw),
                "{raw}"
            );
        }
        assert!(j.resolve("/etc/passwd2").is_ok());
        assert!(j.resolve("/etc").is_ok());
        let j = jailed(&["/srv/app"]);
        assert_eq!(
            j.resolve("private/key").unwrap_err(),
            ShellError::not_found("private/key")
        );
        assert_eq!(
            j.resolve("x/../private").unwrap_err(),
            ShellError::not_found("x/../private")
        );
        assert!(j.resolve("private2").is_ok());
    }

    #[test]
    fn nested_roots_pick_the_longest() {
        let j = jailed(&["/srv", "/srv/app"]);
        assert_eq!(j.resolve("/srv/app/x").unwrap(), rooted("/srv/app", "x"));
        assert_eq!(j.resolve("/srv/other").unwrap(), rooted("/srv", "other"));
        assert_eq!(j.resolve("app/x").unwrap(), rooted("/srv/app", "x"));
        assert_eq!(
            j.resolve("/srv/app/../x").unwrap(),
            rooted("/srv", "app/../x")
        );
        assert_eq!(
            j.resolve("/srv/app/../../srv/x").unwrap(),
            rooted("/srv", "x")
        );
    }

    #[test]
    fn a_configured_spelling_maps_to_the_canonical_root() {
        let j = Jail::new(&strings(&["/link/app"]), &strings(&["/real/app"]), &[], &[]).unwrap();
        assert_eq!(j.resolve("/link/app/x").unwrap(), rooted("/real/app", "x"));
        assert_eq!(j.resolve("/real/app/x").unwrap(), rooted("/real/app", "x"));
        assert_eq!(j.resolve("x").unwrap(), rooted("/real/app", "x"));
        assert_eq!(code(j.resolve("/link/x").unwrap_err()), "S215");
    }

    fn scope(boundary: Boundary, root: &str, grants: &[&str]) -> SessionScope {
        SessionScope {
            boundary,
            root: root.into(),
            grants: strings(grants),
        }
    }

    fn anchored(root: &str, anchor: &str, rel: &str) -> RootedPath {
        RootedPath {
            root: root.into(),
            anchor: anchor.into(),
            rel: rel.into(),
        }
    }

    #[test]
    fn configured_roots_only_anchors_relative_paths() {
        let j = jailed(&["/srv/app"]);
        let s = scope(Boundary::ConfiguredRoots, "/srv/app/sub", &[]);
        let any = PathKind::Any;
        assert_eq!(
            j.resolve_in("x", Some(&s), any).unwrap(),
            rooted("/srv/app", "sub/x")
        );
        assert_eq!(
            j.resolve_in("/srv/app/other", Some(&s), any).unwrap(),
            rooted("/srv/app", "other")
        );
        assert_eq!(
            code(j.resolve_in("../../../etc", Some(&s), any).unwrap_err()),
            "S215"
        );
        let u = unjailed();
        let s = scope(Boundary::ConfiguredRoots, "/work", &[]);
        assert_eq!(
            u.resolve_in("x", Some(&s), any).unwrap(),
            rooted("/", "work/x")
        );
        assert_eq!(
            u.resolve_in("../etc/shadow", Some(&s), any).unwrap_err(),
            ShellError::not_found("../etc/shadow")
        );
    }

    #[test]
    fn a_workspace_session_is_anchored_beneath_its_root_or_a_grant() {
        let j = jailed(&["/srv/app"]);
        let s = scope(Boundary::Workspace, "/srv/app/ws", &["/srv/app/shared/lib"]);
        let any = PathKind::Any;
        assert_eq!(
            j.resolve_in("src/a.rs", Some(&s), any).unwrap(),
            anchored("/srv/app", "ws", "src/a.rs")
        );
        assert_eq!(
            j.resolve_in("/srv/app/ws", Some(&s), any).unwrap(),
            anchored("/srv/app", "ws", "")
        );
        assert_eq!(
            j.resolve_in("../shared/lib/x/../y", Some(&s), any).unwrap(),
            anchored("/srv/app", "shared/lib", "y")
        );
    }

    #[test]
    fn leaving_a_workspace_session_is_s220_inside_the_jail_and_s215_outside() {
        let j = jailed(&["/srv/app"]);
        let s = scope(Boundary::Workspace, "/srv/app/ws", &["/srv/app/shared"]);
        let any = PathKind::Any;
        for raw in [
            "../other/f",
            "/srv/app/other/f",
            "/srv/app/ws2",
            "/srv/app",
            "sub/../../x",
        ] {
            let e = j.resolve_in(raw, Some(&s), any).unwrap_err();
            assert_eq!(e.code().as_deref(), Some("S220"), "{raw}");
            assert!(
                e.message.ends_with(&format!(
                    r#""attempted_path":"{raw}","error_code":"S220"}}"#
                )),
                "{}",
                e.message
            );
        }
        for raw in ["/etc/passwd", "../../../etc", "/srv"] {
            let e = j.resolve_in(raw, Some(&s), any).unwrap_err();
            assert_eq!(e.code().as_deref(), Some("S215"), "{raw}");
        }
        assert_eq!(
            j.resolve_in("/srv/app/private/k", Some(&s), any)
                .unwrap_err(),
            ShellError::not_found("/srv/app/private/k")
        );
        let u = unjailed();
        let s = scope(Boundary::Workspace, "/work", &[]);
        let e = u.resolve_in("/etc/hosts", Some(&s), any).unwrap_err();
        assert_eq!(e.code().as_deref(), Some("S220"));
    }

    #[test]
    fn the_access_hint_names_the_directory_to_ask_for() {
        let j = jailed(&["/srv/app"]);
        let s = scope(Boundary::Workspace, "/srv/app/ws", &[]);
        let hint = |raw: &str, kind| {
            let e = j.resolve_in(raw, Some(&s), kind).unwrap_err();
            let (_, json) = e.message.split_once("filesystem_access_request=").unwrap();
            let v: serde_json::Value = serde_json::from_str(json).unwrap();
            v["requested_root"].as_str().unwrap().to_owned()
        };
        assert_eq!(hint("/srv/app/lib/a.rs", PathKind::Any), "/srv/app/lib");
        assert_eq!(hint("/srv/app/lib/", PathKind::Any), "/srv/app/lib");
        assert_eq!(hint("/srv/app/lib", PathKind::Dir), "/srv/app/lib");
        assert_eq!(hint("/etc/x/../passwd", PathKind::Any), "/etc");
    }

    #[test]
    fn a_jail_alias_is_compared_in_canonical_spelling() {
        let j = Jail::new(&strings(&["/link/app"]), &strings(&["/real/app"]), &[], &[]).unwrap();
        let s = scope(Boundary::Workspace, "/real/app/ws", &[]);
        assert_eq!(
            j.resolve_in("/link/app/ws/f", Some(&s), PathKind::Any)
                .unwrap(),
            anchored("/real/app", "ws", "f")
        );
    }

    #[test]
    fn bad_roots_and_denylist_entries_refuse_the_config() {
        assert!(Jail::new(&strings(&["srv"]), &strings(&["/srv"]), &[], &[]).is_err());
        assert!(Jail::new(&strings(&["/srv"]), &strings(&["srv"]), &[], &[]).is_err());
        assert!(Jail::new(&strings(&["/srv"]), &[], &[], &[]).is_err());
        let err = Jail::new(&[], &[], &strings(&["~/.ssh"]), &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("fs.denylist_paths entry \"~/.ssh\" is not an absolute path"),
            "{err}"
        );
    }

    fn protected(roots: &[&str]) -> Jail {
        let globs = strings(&["**/.env", "**/secrets/**", "private"]);
        Jail::new(&strings(roots), &strings(roots), &[], &globs).unwrap()
    }

    #[test]
    fn protected_globs_match_relative_to_the_root() {
        let j = protected(&["/srv/app"]);
        for rel in [
            ".env",
            "a/.env",
            "secrets/k",
            "a/secrets/b/c",
            "private",
            "private/x",
            ".env/inner",
        ] {
            assert!(j.is_protected(&rooted("/srv/app", rel)), "{rel}");
        }
        for rel in ["", "a/.envrc", "secrets", "a/private", "src/main.rs"] {
            assert!(!j.is_protected(&rooted("/srv/app", rel)), "{rel}");
        }
    }

    #[test]
    fn protected_globs_see_through_dot_dot_and_slashes() {
        let j = protected(&["/srv/app"]);
        assert!(j.is_protected(&rooted("/srv/app", "x/../.env")));
        assert!(j.is_protected(&rooted("/srv/app", "a/./.env/")));
        assert!(j.is_protected(&rooted("/srv/app", "x/../private")));
    }

    #[test]
    fn protected_globs_match_against_every_containing_root() {
        let j = protected(&["/srv", "/srv/app"]);
        assert!(j.is_protected(&rooted("/srv/app", "private/k")));
        assert!(j.is_protected(&rooted("/srv", "app/private/k")));
    }

    #[test]
    fn unjailed_protection_uses_the_absolute_path_without_its_slash() {
        let globs = strings(&["**/.env", "home/*/notes"]);
        let j = Jail::new(&[], &[], &[], &globs).unwrap();
        assert!(j.is_protected(&rooted("/", "home/u/.env")));
        assert!(j.is_protected(&rooted("/", "home/u/notes/today")));
        assert!(!j.is_protected(&rooted("/", "srv/home/u/notes")));
    }

    #[test]
    fn widening_is_detected() {
        let denied = strings(&["/etc/shadow"]);
        let make = |roots: &[&str], denied: &[String], globs: &[&str]| {
            Jail::new(&strings(roots), &strings(roots), denied, &strings(globs)).unwrap()
        };
        let base = make(&["/srv/app"], &denied, &["**/.env"]);
        assert!(!base.widens_to(&make(&["/srv/app"], &denied, &["**/.env"])));
        assert!(!base.widens_to(&make(&["/srv/app/sub"], &denied, &["**/.env", "x"])));
        assert!(!base.widens_to(&make(&["/srv/app"], &strings(&["/etc"]), &["**/.env"])));
        assert!(base.widens_to(&make(&[], &denied, &["**/.env"])));
        assert!(base.widens_to(&make(&["/srv/app", "/srv/app2"], &denied, &["**/.env"])));
        assert!(base.widens_to(&make(&["/srv"], &denied, &["**/.env"])));
        assert!(base.widens_to(&make(&["/srv/app"], &[], &["**/.env"])));
        assert!(base.widens_to(&make(
            &["/srv/app"],
            &strings(&["/etc/shadow/x"]),
            &["**/.env"]
        )));
        assert!(base.widens_to(&make(&["/srv/app"], &denied, &[])));
        let open = make(&[], &denied, &[]);
        assert!(!open.widens_to(&make(&["/srv"], &denied, &[])));
    }
}
