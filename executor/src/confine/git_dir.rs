//! Finding the git directory a write-confined exec must be able to write.
//!
//! Security meaning: the answer only widens a Landlock write list the broker
//! already decided to grant (the session root's own repository), and the
//! search is read-only: it stats `.git` in the session directory and its
//! ancestors and reads at most two small pointer files (`.git` of a linked
//! worktree, then its `commondir`). Nothing here opens a caller path for
//! writing, and a malformed pointer file means "no git dir", never an error
//! that could describe the file's contents.
#![forbid(unsafe_code)]

use ide_proto::{ErrorKind, ExecutorError};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Largest pointer file (`.git` or `commondir`) that is read.
const MAX_POINTER_LEN: u64 = 4096;

/// The `.git` directory of the repository enclosing `dir`, or the common
/// dir of the linked worktree `dir` is in; `None` outside any repository.
pub fn git_dir(dir: &str) -> Result<Option<String>, ExecutorError> {
    if !dir.starts_with('/') || dir.contains('\0') {
        return Err(ExecutorError::new(
            ErrorKind::Invalid,
            "git dir search needs an absolute directory",
        ));
    }
    let found = Path::new(dir).ancestors().find_map(at);
    Ok(found.and_then(|p| p.into_os_string().into_string().ok()))
}

/// The git dir that `dir/.git` stands for, if it is one.
fn at(dir: &Path) -> Option<PathBuf> {
    let dot_git = dir.join(".git");
    let meta = fs::metadata(&dot_git).ok()?;
    if meta.is_dir() {
        return fs::canonicalize(&dot_git).ok();
    }
    if !meta.is_file() {
        return None;
    }
    let target = pointer(&dot_git)?
        .strip_prefix("gitdir:")?
        .trim()
        .to_owned();
    let git_dir = fs::canonicalize(dir.join(target)).ok()?;
    if !git_dir.is_dir() {
        return None;
    }
    match git_dir.join("commondir") {
        common if common.is_file() => {
            let common = fs::canonicalize(git_dir.join(pointer(&common)?.trim())).ok()?;
            common.is_dir().then_some(common)
        }
        _ => Some(git_dir),
    }
}

/// The text of a small pointer file.
fn pointer(path: &Path) -> Option<String> {
    let mut text = String::new();
    fs::File::open(path)
        .ok()?
        .take(MAX_POINTER_LEN)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(p: &Path) -> String {
        p.to_str().unwrap().to_owned()
    }

    #[test]
    fn a_plain_repository_is_found_from_a_nested_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = fs::canonicalize(tmp.path()).unwrap();
        fs::create_dir_all(repo.join(".git")).unwrap();
        fs::create_dir_all(repo.join("src/deep")).unwrap();
        assert_eq!(
            git_dir(&s(&repo.join("src/deep"))).unwrap(),
            Some(s(&repo.join(".git")))
        );
        assert_eq!(git_dir(&s(&repo)).unwrap(), Some(s(&repo.join(".git"))));
    }

    #[test]
    fn a_linked_worktree_names_the_common_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(tmp.path()).unwrap();
        let common = base.join("main/.git");
        let private = common.join("worktrees/feature");
        fs::create_dir_all(&private).unwrap();
        fs::write(private.join("commondir"), "../..\n").unwrap();
        let tree = base.join("feature");
        fs::create_dir_all(tree.join("sub")).unwrap();
        fs::write(tree.join(".git"), format!("gitdir: {}\n", s(&private))).unwrap();
        assert_eq!(git_dir(&s(&tree.join("sub"))).unwrap(), Some(s(&common)));
    }

    #[test]
    fn a_relative_gitdir_pointer_resolves_against_its_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(tmp.path()).unwrap();
        fs::create_dir_all(base.join("modules/sub")).unwrap();
        fs::create_dir_all(base.join("work")).unwrap();
        fs::write(base.join("work/.git"), "gitdir: ../modules/sub").unwrap();
        assert_eq!(
            git_dir(&s(&base.join("work"))).unwrap(),
            Some(s(&base.join("modules/sub")))
        );
    }

    #[test]
    fn junk_pointers_and_no_repository_are_none() {
        let tmp = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(tmp.path()).unwrap();
        fs::create_dir_all(base.join("a")).unwrap();
        fs::write(base.join("a/.git"), "not a pointer").unwrap();
        fs::create_dir_all(base.join("b")).unwrap();
        fs::write(base.join("b/.git"), "gitdir: /nonexistent/dir").unwrap();
        fs::create_dir_all(base.join("c")).unwrap();
        fs::write(base.join("c/.git"), vec![b'x'; 10_000]).unwrap();
        for d in ["a", "b", "c"] {
            let found = git_dir(&s(&base.join(d))).unwrap();
            assert!(
                found.as_deref().is_none_or(|f| !f.starts_with(&s(&base))),
                "{d}: {found:?}"
            );
        }
        assert_eq!(git_dir("relative").unwrap_err().kind, ErrorKind::Invalid);
    }
}
