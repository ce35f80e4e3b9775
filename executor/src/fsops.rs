//! Filesystem requests (`Request::Fs`), each built on the resolver.
//!
//! Security meaning: every path is opened beneath a root that lies under an
//! operator ceiling, through [`crate::resolve`]; errors carry only the
//! strings the broker sent, never a resolved host path — except
//! `CanonicalRoots`, whose whole purpose is to tell the broker the canonical
//! form of the roots it configured.
#![forbid(unsafe_code)]

use crate::ceiling::{open_root, open_root_canonical};
use crate::resolve::resolve;
use crate::state::Executor;
use ide_proto::{ErrorKind, ExecutorError, FsReply, FsRequest};
use rustix::fd::AsFd;
use rustix::fs::OFlags;

/// Answers one filesystem request. Blocking: run it off the async workers.
pub fn handle(executor: &Executor, request: FsRequest) -> Result<FsReply, ExecutorError> {
    match request {
        FsRequest::CheckDir { path } => {
            // A non-directory is `WrongType`; the broker words it per surface
            // (S210 for an exec cwd, S212 for fs operations).
            let root = open_root(&path.root, &executor.ceilings)?;
            resolve(root.as_fd(), &path.rel, OFlags::PATH | OFlags::DIRECTORY)?;
            Ok(FsReply::Ok)
        }
        FsRequest::CanonicalRoots { roots } => {
            let canonical = roots
                .iter()
                .map(|root| canonical_root(executor, root))
                .collect::<Result<_, _>>()?;
            Ok(FsReply::CanonicalRoots { roots: canonical })
        }
    }
}

fn canonical_root(executor: &Executor, root: &str) -> Result<String, ExecutorError> {
    let named = |e: ExecutorError| ExecutorError::new(e.kind, format!("{root}: {}", e.message));
    let (_, canonical) = open_root_canonical(root, &executor.ceilings).map_err(named)?;
    canonical.into_os_string().into_string().map_err(|_| {
        ExecutorError::new(
            ErrorKind::Internal,
            format!("{root}: canonical path is not UTF-8"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceiling::Ceilings;
    use crate::env::EnvSnapshot;
    use ide_proto::RootedPath;
    use std::path::{Path, PathBuf};

    fn executor(ceiling: &Path) -> Executor {
        Executor {
            env: EnvSnapshot::default(),
            ceilings: Ceilings::new(&[ceiling.to_path_buf()]).unwrap(),
        }
    }

    fn check_dir(ex: &Executor, root: &Path, rel: &str) -> Result<FsReply, ErrorKind> {
        let path = RootedPath {
            root: root.to_str().unwrap().into(),
            rel: rel.into(),
        };
        handle(ex, FsRequest::CheckDir { path }).map_err(|e| e.kind)
    }

    #[test]
    fn check_dir_accepts_directories_only() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("d")).unwrap();
        std::fs::write(tmp.path().join("f"), b"").unwrap();
        std::os::unix::fs::symlink("/etc", tmp.path().join("out")).unwrap();
        let ex = executor(Path::new("/"));
        assert_eq!(check_dir(&ex, tmp.path(), "d"), Ok(FsReply::Ok));
        assert_eq!(check_dir(&ex, tmp.path(), ""), Ok(FsReply::Ok));
        assert_eq!(check_dir(&ex, tmp.path(), "f"), Err(ErrorKind::WrongType));
        assert_eq!(
            check_dir(&ex, tmp.path(), "missing"),
            Err(ErrorKind::NotFound)
        );
        assert_eq!(check_dir(&ex, tmp.path(), "out"), Err(ErrorKind::Escape));
        assert_eq!(check_dir(&ex, tmp.path(), "../"), Err(ErrorKind::Escape));
    }

    #[test]
    fn canonical_roots_come_back_in_order() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("a/b")).unwrap();
        std::os::unix::fs::symlink("a/b", tmp.path().join("link")).unwrap();
        let ex = executor(tmp.path());
        let base = tmp.path().to_str().unwrap();
        let roots = vec![
            format!("{base}/link"),
            format!("{base}/a/./b/.."),
            base.to_owned(),
        ];
        let FsReply::CanonicalRoots { roots: got } =
            handle(&ex, FsRequest::CanonicalRoots { roots }).unwrap()
        else {
            panic!("wrong reply");
        };
        let canon = |p: PathBuf| {
            std::fs::canonicalize(p)
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(
            got,
            [
                canon(tmp.path().join("a/b")),
                canon(tmp.path().join("a")),
                canon(tmp.path().into())
            ]
        );
    }

    #[test]
    fn a_bad_root_is_named_as_given() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("f"), b"").unwrap();
        std::fs::create_dir(tmp.path().join("ceiling")).unwrap();
        let ex = executor(&tmp.path().join("ceiling"));
        let base = tmp.path().to_str().unwrap();
        for (root, kind) in [
            (format!("{base}/ceiling/missing"), ErrorKind::NotFound),
            (format!("{base}/f"), ErrorKind::WrongType),
            (base.to_owned(), ErrorKind::Escape),
            ("relative".to_owned(), ErrorKind::Invalid),
        ] {
            let roots = vec![format!("{base}/ceiling"), root.clone()];
            let err = handle(&ex, FsRequest::CanonicalRoots { roots }).unwrap_err();
            assert_eq!(err.kind, kind, "{root}");
            assert!(
                err.message.starts_with(&format!("{root}: ")),
                "{}",
                err.message
            );
        }
    }
}
