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
        self.resolve_from(raw, None)
    }

    /// Resolves a caller's path with relative paths anchored at `anchor` (a
    /// session's `fs_scope.root`) instead of the primary root; the result is
    /// still confined to the jail roots.
    pub fn resolve_relative_to(&self, raw: &str, anchor: &str) -> Result<RootedPath, ShellError> {
        if !anchor.starts_with('/') || anchor.contains('\0') {
            return Err(ShellError::invalid(format!(
                "{anchor}: anchor directory must be an absolute path"
            )));
        }
        self.resolve_from(raw, Some(anchor))
    }

    fn resolve_from(&self, raw: &str, anchor: Option<&str>) -> Result<RootedPath, ShellError> {
        if raw.is_empty() {
            return Err(ShellError::invalid("path is empty"));
        }
        if raw.contains('\0') {
            return Err(ShellError::invalid("path contains a NUL byte"));
        }
        let joined = if raw.starts_with('/') {
            raw.to_owned()
        } else {
            match anchor.or_else(|| self.primary_root()) {
                Some(base) => join(base, raw),
                None => {
                    return Err(ShellError::invalid(format!(
                        "{raw}: path must be absolute (no fs.host_roots jail anchors relative paths; ~ is never expanded)"
                    )))
                }
            }
        };
        let normal = normalize(&joined);
        let (root, alias) = self.containing_root(&normal).ok_or_else(|| {
            ShellError::new(
                Class::Escape,
                format!("{raw}: path escapes the fs jail roots"),
            )
        })?;
        if self.denied.iter().any(|d| is_beneath(&normal, d)) {
            return Err(ShellError::not_found(raw));
        }
        let rel = match remainder(&joined, alias) {
            Some(own) if stays_beneath(own) => own.trim_start_matches('/'),
            _ => remainder(&normal, alias).unwrap_or_default(),
        };
        Ok(RootedPath {
            root: root.to_owned(),
            rel: rel.to_owned(),
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
        let normal = normalize(&join(&rooted.root, &rooted.rel));
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
        RootedPath {
            root: root.into(),
            rel: rel.into(),
        }
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
            assert_eq!(
                err.message,
                format!("{raw}: path escapes the fs jail roots")
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

    #[test]
    fn anchored_resolution_stays_in_the_jail() {
        let j = jailed(&["/srv/app"]);
        assert_eq!(
            j.resolve_relative_to("x", "/srv/app/sub").unwrap(),
            rooted("/srv/app", "sub/x")
        );
        assert_eq!(
            code(
                j.resolve_relative_to("../../../etc", "/srv/app/sub")
                    .unwrap_err()
            ),
            "S215"
        );
        assert_eq!(code(j.resolve_relative_to("x", "rel").unwrap_err()), "S210");
        let u = unjailed();
        assert_eq!(
            u.resolve_relative_to("x", "/work").unwrap(),
            rooted("/", "work/x")
        );
        assert_eq!(
            u.resolve_relative_to("../etc/shadow", "/work").unwrap_err(),
            ShellError::not_found("../etc/shadow")
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
