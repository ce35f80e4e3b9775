//! Lexical path arithmetic for the broker's jail and denylist decisions.
//!
//! Security meaning: these functions never touch the filesystem, so they
//! decide on the *spelling* of a path only; a symlink can make the physical
//! path differ. That is why the executor re-resolves every path beneath its
//! root fd with `RESOLVE_BENEATH` and re-checks denylisted inodes. Containment
//! is always component-wise: `/srv/app2` is not beneath `/srv/app`.
#![forbid(unsafe_code)]

/// Collapses `//`, `.` and `..` of an absolute path without following
/// anything; `..` at `/` stays at `/`. The result has no trailing slash
/// (except `/` itself).
pub fn normalize(abs: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in abs.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            name => parts.push(name),
        }
    }
    format!("/{}", parts.join("/"))
}

/// The part of normalised `path` beneath normalised `base` (empty for `base`
/// itself, never starting with `/`), or `None` when it is not beneath.
pub fn remainder<'a>(path: &'a str, base: &str) -> Option<&'a str> {
    if base == "/" {
        return path.strip_prefix('/');
    }
    match path.strip_prefix(base)? {
        "" => Some(""),
        rest => rest.strip_prefix('/'),
    }
}

/// True when normalised `path` is normalised `base` or lies beneath it.
pub fn is_beneath(path: &str, base: &str) -> bool {
    remainder(path, base).is_some()
}

/// True when a relative path never climbs above its starting directory when
/// read component by component (`a/../b` stays, `a/../../b` does not).
pub fn stays_beneath(rel: &str) -> bool {
    let mut depth: usize = 0;
    for part in rel.split('/') {
        match part {
            "" | "." => {}
            ".." => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return false,
            },
            _ => depth += 1,
        }
    }
    true
}

/// Joins a relative path onto an absolute base with exactly one `/`.
pub fn join(base: &str, rel: &str) -> String {
    format!("{}/{}", base.trim_end_matches('/'), rel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_collapses_lexically() {
        let cases = [
            ("/", "/"),
            ("//", "/"),
            ("/a//b/", "/a/b"),
            ("/a/./b/.", "/a/b"),
            ("/a/b/../c", "/a/c"),
            ("/../../etc", "/etc"),
            ("/a/..", "/"),
            ("/jail/../etc/passwd", "/etc/passwd"),
        ];
        for (input, want) in cases {
            assert_eq!(normalize(input), want, "{input}");
        }
    }

    #[test]
    fn containment_is_component_wise() {
        assert!(is_beneath("/srv/app", "/srv/app"));
        assert!(is_beneath("/srv/app/x", "/srv/app"));
        assert!(!is_beneath("/srv/app2", "/srv/app"));
        assert!(!is_beneath("/srv/ap", "/srv/app"));
        assert!(!is_beneath("/srv", "/srv/app"));
        assert!(is_beneath("/anything", "/"));
        assert!(is_beneath("/", "/"));
    }

    #[test]
    fn remainder_never_starts_with_a_slash() {
        assert_eq!(remainder("/srv/app/a/b", "/srv/app"), Some("a/b"));
        assert_eq!(remainder("/srv/app", "/srv/app"), Some(""));
        assert_eq!(remainder("/etc/x", "/"), Some("etc/x"));
        assert_eq!(remainder("/", "/"), Some(""));
        assert_eq!(remainder("/srv/app2", "/srv/app"), None);
    }

    #[test]
    fn climbing_is_detected() {
        assert!(stays_beneath(""));
        assert!(stays_beneath("a/../b"));
        assert!(stays_beneath("./a/./.."));
        assert!(!stays_beneath(".."));
        assert!(!stays_beneath("a/../../b"));
        assert!(!stays_beneath("../app/x"));
    }

    #[test]
    fn join_uses_one_separator() {
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/srv/", "a"), "/srv/a");
        assert_eq!(join("/srv", "~/x"), "/srv/~/x");
    }
}
