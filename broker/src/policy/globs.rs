//! Compiling the configured path globs (`code.non_accessible_globs`,
//! `code.default_exclude_globs`).
//!
//! Security meaning: a protected glob that silently failed to compile would
//! expose what it was meant to hide, so a bad glob refuses the whole config.
//! `*` never crosses a `/` (only `**` does), matching gitignore habits.
#![forbid(unsafe_code)]

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::config::ConfigError;

/// Compiles `globs` into one set; the error names the config key and glob.
pub fn compile(key: &str, globs: &[String]) -> Result<GlobSet, ConfigError> {
    let mut set = GlobSetBuilder::new();
    for glob in globs {
        let compiled = GlobBuilder::new(glob)
            .literal_separator(true)
            .build()
            .map_err(|err| {
                ConfigError::Policy(format!("{key}: glob {glob:?} does not compile: {err}"))
            })?;
        set.add(compiled);
    }
    set.build()
        .map_err(|err| ConfigError::Policy(format!("{key}: globs do not compile: {err}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(globs: &[&str]) -> GlobSet {
        compile(
            "k",
            &globs.iter().map(|g| g.to_string()).collect::<Vec<_>>(),
        )
        .unwrap()
    }

    #[test]
    fn double_star_matches_at_any_depth_including_the_top() {
        let s = set(&["**/.env", "**/secrets/**", "**/*.pem"]);
        for hit in [
            ".env",
            "a/b/.env",
            "secrets/x",
            "a/secrets/b/c",
            "k.pem",
            "a/b/k.pem",
        ] {
            assert!(s.is_match(hit), "{hit}");
        }
        for miss in [".envrc", "a/.env.bak", "secretsx/y", "a/pem"] {
            assert!(!s.is_match(miss), "{miss}");
        }
    }

    #[test]
    fn a_single_star_stays_in_one_component() {
        let s = set(&["*.key"]);
        assert!(s.is_match("a.key"));
        assert!(!s.is_match("dir/a.key"));
    }

    #[test]
    fn a_bad_glob_names_key_and_glob() {
        let err = compile("code.non_accessible_globs", &["a/[".to_string()])
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("code.non_accessible_globs: glob \"a/[\" does not compile"),
            "{err}"
        );
    }
}
