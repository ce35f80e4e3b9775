//! What `grep` and `sed` share: pattern and glob checks made before the
//! executor is asked, and reading a stream of packed batches.
#![forbid(unsafe_code)]

use super::download::{Download, Step};
use super::path::fail;
use crate::error::ShellError;
use globset::GlobBuilder;
use serde::de::DeserializeOwned;

/// The longest pattern accepted (S210 beyond).
pub const MAX_PATTERN_BYTES: usize = 4096;

/// Refuses an oversized pattern and globs that do not compile, so the
/// executor only ever compiles what passed here.
pub fn check(pattern: &str, include: &[String], exclude: &[String]) -> Result<(), ShellError> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(ShellError::invalid(format!(
            "pattern is {} bytes; the limit is {MAX_PATTERN_BYTES}",
            pattern.len()
        )));
    }
    for (key, glob) in include
        .iter()
        .map(|g| ("include_glob", g))
        .chain(exclude.iter().map(|g| ("exclude_glob", g)))
    {
        GlobBuilder::new(glob)
            .literal_separator(true)
            .build()
            .map_err(|e| ShellError::invalid(format!("{key} {glob:?}: {e}")))?;
    }
    Ok(())
}

/// The next batch of a packed stream; `None` once it ended well.
pub async fn next_batch<T: DeserializeOwned>(
    download: &mut Download,
    raw: &str,
) -> Result<Option<Vec<T>>, ShellError> {
    match download.next().await? {
        Step::Chunk(bytes) => ide_proto::unpack(&bytes)
            .map(Some)
            .map_err(|e| ShellError::internal(format!("bad batch from the executor: {e}"))),
        Step::Done(_) => Ok(None),
        Step::Failed(e) => Err(fail(e, raw)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_patterns_and_bad_globs_are_s210() {
        assert!(check("a", &["*.rs".into()], &["**/target/**".into()]).is_ok());
        let long = "a".repeat(MAX_PATTERN_BYTES + 1);
        assert_eq!(
            check(&long, &[], &[]).unwrap_err().code().as_deref(),
            Some("S210")
        );
        assert!(check(&"a".repeat(MAX_PATTERN_BYTES), &[], &[]).is_ok());
        let err = check("a", &[], &["a/[".into()]).unwrap_err();
        assert_eq!(err.code().as_deref(), Some("S210"));
        assert!(err.message.starts_with("exclude_glob"));
    }
}
