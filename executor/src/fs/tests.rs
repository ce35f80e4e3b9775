//! The filesystem operations, each run on both resolver backends, with the
//! attacks confinement-notes §6 lists (links out, hard links to denylisted
//! files, FIFOs, oversize bodies, cancelled uploads).

use super::channel::fake::Recorder;
use super::*;
use ide_proto::{FsEntry, GrepMatch, GrepSearch, ReadHeader, SedEdit, WalkFilter};
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

const BACKENDS: [Backend; 2] = [Backend::Openat2, Backend::Fallback];

/// `tmp/{outside/secret, jail/{file, dir/inner, ...}}`.
struct Fx {
    _tmp: tempfile::TempDir,
    outside: PathBuf,
    jail: PathBuf,
    ceilings: Ceilings,
}

fn fx() -> Fx {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    let jail = tmp.path().join("jail");
    std::fs::create_dir_all(outside.join("sub")).unwrap();
    std::fs::write(outside.join("secret"), b"secret").unwrap();
    std::fs::create_dir_all(jail.join("dir")).unwrap();
    std::fs::write(jail.join("file"), b"hello\n").unwrap();
    std::fs::write(jail.join("dir/inner"), b"inner\n").unwrap();
    symlink("../outside", jail.join("out_dir")).unwrap();
    symlink(outside.join("secret"), jail.join("out_abs")).unwrap();
    symlink("dir", jail.join("in_dir")).unwrap();
    Fx {
        _tmp: tmp,
        outside,
        jail,
        ceilings: Ceilings::new(&[PathBuf::from("/")]).unwrap(),
    }
}

impl Fx {
    fn at(&self, rel: &str) -> RootedPath {
        RootedPath::new(self.jail.to_str().unwrap(), rel)
    }

    fn run_io(
        &self,
        backend: Backend,
        deny: &[&Path],
        op: FsOp,
        io: &mut Recorder,
    ) -> Result<FsReply, ExecutorError> {
        let request = FsRequest::Guarded {
            deny: deny
                .iter()
                .map(|p| p.to_str().unwrap().to_owned())
                .collect(),
            op,
        };
        handle_with(&self.ceilings, backend, request, io)
    }

    fn run(&self, backend: Backend, op: FsOp) -> Result<FsReply, ErrorKind> {
        self.run_io(backend, &[], op, &mut Recorder::default())
            .map_err(|e| e.kind)
    }

    fn outside_untouched(&self) {
        assert_eq!(
            std::fs::read(self.outside.join("secret")).unwrap(),
            b"secret"
        );
        let mut names: Vec<_> = std::fs::read_dir(&self.outside)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["secret", "sub"]);
        assert_eq!(mode_of(&self.outside.join("secret")), 0o644);
    }
}

fn mode_of(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

fn listing(reply: FsReply) -> (Vec<FsEntry>, u64) {
    match reply {
        FsReply::Listing { entries, total } => (entries, total),
        other => panic!("expected a listing, got {other:?}"),
    }
}

#[test]
fn ls_sorts_pages_and_never_follows_entries() {
    let f = fx();
    for i in 0..25 {
        std::fs::write(f.jail.join(format!("dir/f{i:02}")), b"x").unwrap();
    }
    for backend in BACKENDS {
        let ls = |rel: &str, offset, limit| {
            f.run(
                backend,
                FsOp::Ls {
                    path: f.at(rel),
                    offset,
                    limit,
                },
            )
        };
        let (entries, total) = listing(ls("", 0, 100).unwrap());
        let names: Vec<_> = entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["dir", "file", "in_dir", "out_abs", "out_dir"]);
        assert_eq!(total, 5);
        let in_dir = &entries[2];
        assert!(in_dir.is_symlink && !in_dir.is_dir, "{backend:?}");
        assert!(entries[0].is_dir);
        assert_eq!(entries[1].size, 6);
        let (page, total) = listing(ls("in_dir", 10, 10).unwrap());
        assert_eq!(total, 26);
        assert_eq!(page.first().unwrap().name, "f10");
        assert_eq!(page.len(), 10);
        let (past, _) = listing(ls("dir", 1000, 10).unwrap());
        assert!(past.is_empty());
        assert_eq!(ls("file", 0, 10), Err(ErrorKind::WrongType));
        assert_eq!(ls("out_dir", 0, 10), Err(ErrorKind::Escape));
        assert_eq!(ls("missing", 0, 10), Err(ErrorKind::NotFound));
    }
}

#[test]
fn ls_of_a_denylisted_directory_reads_as_missing() {
    let f = fx();
    for backend in BACKENDS {
        let op = FsOp::Ls {
            path: f.at("in_dir"),
            offset: 0,
            limit: 10,
        };
        let err = f
            .run_io(
                backend,
                &[&f.jail.join("dir")],
                op,
                &mut Recorder::default(),
            )
            .unwrap_err();
        assert_eq!(err, crate::errno::path_error(rustix::io::Errno::NOENT));
    }
}

#[test]
fn stat_follows_links_inside_and_reports_the_link_flag() {
    let f = fx();
    for backend in BACKENDS {
        let stat = |rel: &str| f.run(backend, FsOp::Stat { path: f.at(rel) });
        let Ok(FsReply::Entry(e)) = stat("in_dir") else {
            panic!("stat in_dir");
        };
        assert_eq!(e.name, "dir");
        assert!(e.is_dir && e.is_symlink);
        let Ok(FsReply::Entry(e)) = stat("file") else {
            panic!("stat file");
        };
        assert_eq!((e.name.as_str(), e.size, e.is_symlink), ("file", 6, false));
        assert_eq!(stat("out_abs"), Err(ErrorKind::Escape));
        assert_eq!(stat("nope"), Err(ErrorKind::NotFound));
    }
}

#[test]
fn mkdir_sets_the_exact_mode_and_reports_existing_paths() {
    let f = fx();
    for (i, backend) in BACKENDS.into_iter().enumerate() {
        let mkdir = |rel: &str, mode, parents| {
            f.run(
                backend,
                FsOp::Mkdir {
                    path: f.at(rel),
                    mode,
                    parents,
                },
            )
        };
        let new = format!("new{i}");
        assert_eq!(
            mkdir(&new, 0o777, false),
            Ok(FsReply::Mkdir {
                created: true,
                already_existed: false
            })
        );
        assert_eq!(mode_of(&f.jail.join(&new)), 0o777);
        assert_eq!(mkdir(&new, 0o755, false), Err(ErrorKind::Exists));
        assert_eq!(
            mkdir(&new, 0o755, true),
            Ok(FsReply::Mkdir {
                created: false,
                already_existed: true
            })
        );
        assert_eq!(mkdir("file", 0o755, true), Err(ErrorKind::Exists));
        assert_eq!(mkdir("a/b", 0o755, false), Err(ErrorKind::NotFound));
        let deep = format!("in_dir/p{i}/q/../r");
        assert!(mkdir(&deep, 0o700, true).is_ok(), "{backend:?}");
        assert!(f.jail.join(format!("dir/p{i}/q")).is_dir());
        assert_eq!(mode_of(&f.jail.join(format!("dir/p{i}/r"))), 0o700);
        assert_eq!(mkdir("out_dir/x/y", 0o755, true), Err(ErrorKind::Escape));
        assert_eq!(mkdir("out_dir/x", 0o755, false), Err(ErrorKind::Escape));
        assert_eq!(mkdir("z", 0o10755, false), Err(ErrorKind::Invalid));
        assert!(mkdir("", 0o755, true).is_ok());
        f.outside_untouched();
    }
}

#[test]
fn rm_unlinks_links_and_trees_without_following_them() {
    let f = fx();
    for backend in BACKENDS {
        std::fs::create_dir_all(f.jail.join("tree/a/b")).unwrap();
        std::fs::write(f.jail.join("tree/a/b/c"), b"c").unwrap();
        symlink(&f.outside, f.jail.join("tree/a/link_out")).unwrap();
        let rm = |rel: &str, recursive| {
            f.run(
                backend,
                FsOp::Rm {
                    path: f.at(rel),
                    recursive,
                },
            )
        };
        assert_eq!(rm("tree", false), Err(ErrorKind::NotEmpty));
        assert_eq!(rm("tree/", true), Ok(FsReply::Ok));
        assert!(!f.jail.join("tree").exists());
        f.outside_untouched();
        symlink("dir", f.jail.join("link")).unwrap();
        assert_eq!(rm("link", true), Ok(FsReply::Ok));
        assert!(f.jail.join("dir/inner").exists());
        assert_eq!(rm("missing", false), Err(ErrorKind::NotFound));
        assert_eq!(rm("", true), Err(ErrorKind::Invalid));
        assert_eq!(rm("out_dir/secret", false), Err(ErrorKind::Escape));
        std::fs::create_dir(f.jail.join("empty")).unwrap();
        assert_eq!(rm("empty", false), Ok(FsReply::Ok));
        f.outside_untouched();
    }
}

#[test]
fn rm_leaves_denylisted_objects_and_their_hard_links() {
    let f = fx();
    std::fs::create_dir(f.jail.join("keep")).unwrap();
    std::fs::hard_link(f.outside.join("secret"), f.jail.join("keep/alias")).unwrap();
    let deny = [f.outside.join("secret")];
    for backend in BACKENDS {
        let op = |rel: &str| FsOp::Rm {
            path: f.at(rel),
            recursive: true,
        };
        let err = f
            .run_io(
                backend,
                &[&deny[0]],
                op("keep/alias"),
                &mut Recorder::default(),
            )
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::NotFound);
        let err = f
            .run_io(backend, &[&deny[0]], op("keep"), &mut Recorder::default())
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::NotEmpty);
        assert!(f.jail.join("keep/alias").exists());
    }
}

#[test]
fn chmod_changes_entries_and_never_a_link_target() {
    let f = fx();
    std::fs::create_dir_all(f.jail.join("t/sub")).unwrap();
    std::fs::write(f.jail.join("t/sub/x"), b"x").unwrap();
    symlink(f.outside.join("secret"), f.jail.join("t/link")).unwrap();
    for backend in BACKENDS {
        let chmod = |rel: &str, mode, recursive| {
            f.run(
                backend,
                FsOp::Chmod {
                    path: f.at(rel),
                    mode,
                    uid: None,
                    gid: None,
                    recursive,
                },
            )
        };
        assert_eq!(
            chmod("file", 0o600, false),
            Ok(FsReply::Chmod { entries_changed: 1 })
        );
        assert_eq!(mode_of(&f.jail.join("file")), 0o600);
        assert_eq!(
            chmod("t", 0o750, true),
            Ok(FsReply::Chmod { entries_changed: 3 })
        );
        assert_eq!(mode_of(&f.jail.join("t/sub/x")), 0o750);
        assert_eq!(chmod("t/link", 0o777, false), Err(ErrorKind::WrongType));
        assert_eq!(chmod("in_dir", 0o777, true), Err(ErrorKind::WrongType));
        assert_eq!(chmod("out_abs", 0o777, false), Err(ErrorKind::WrongType));
        assert_eq!(
            chmod("out_dir/secret", 0o777, false),
            Err(ErrorKind::Escape)
        );
        assert_eq!(chmod("missing", 0o777, false), Err(ErrorKind::NotFound));
        f.outside_untouched();
    }
    let chown = FsOp::Chmod {
        path: f.at("file"),
        mode: 0o644,
        uid: Some(4321),
        gid: Some(4322),
        recursive: false,
    };
    assert!(f.run(Backend::Fallback, chown).is_ok());
    let meta = std::fs::metadata(f.jail.join("file")).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (4321, 4322));
}

#[test]
fn mv_renames_entries_and_refuses_to_clobber() {
    let f = fx();
    for backend in BACKENDS {
        std::fs::write(f.jail.join("a"), b"a").unwrap();
        std::fs::write(f.jail.join("b"), b"b").unwrap();
        let mv = |src: &str, dst: &str, overwrite| {
            f.run(
                backend,
                FsOp::Mv {
                    src: f.at(src),
                    dst: f.at(dst),
                    overwrite,
                },
            )
        };
        assert_eq!(mv("a", "b", false), Err(ErrorKind::Exists));
        assert_eq!(mv("a", "b", true), Ok(FsReply::Mv { overwrote: true }));
        assert_eq!(std::fs::read(f.jail.join("b")).unwrap(), b"a");
        assert_eq!(
            mv("b", "in_dir/c", false),
            Ok(FsReply::Mv { overwrote: false })
        );
        assert!(f.jail.join("dir/c").exists());
        assert_eq!(
            mv("out_abs", "moved_link", false),
            Ok(FsReply::Mv { overwrote: false })
        );
        assert!(std::fs::symlink_metadata(f.jail.join("moved_link"))
            .unwrap()
            .is_symlink());
        assert_eq!(
            mv("moved_link", "out_abs", false),
            Ok(FsReply::Mv { overwrote: false })
        );
        assert_eq!(mv("missing", "x", false), Err(ErrorKind::NotFound));
        assert_eq!(mv("dir/c", "out_dir/c", false), Err(ErrorKind::Escape));
        assert_eq!(mv("", "x", false), Err(ErrorKind::Invalid));
        std::fs::remove_file(f.jail.join("dir/c")).unwrap();
        f.outside_untouched();
    }
}

fn read_all(
    f: &Fx,
    backend: Backend,
    rel: &str,
    cap: Option<u64>,
) -> Result<(ReadHeader, Vec<u8>, usize), ErrorKind> {
    let mut io = Recorder::default();
    let op = FsOp::Read {
        path: f.at(rel),
        max_bytes: cap,
    };
    let reply = f.run_io(backend, &[], op, &mut io).map_err(|e| e.kind)?;
    assert_eq!(reply, FsReply::Ok);
    let header: ReadHeader = ide_proto::unpack(&io.sent[0]).unwrap();
    let body: Vec<u8> = io.sent[1..].concat();
    assert!(io.sent[1..]
        .iter()
        .all(|c| !c.is_empty() && c.len() <= ide_proto::CHUNK_LEN));
    Ok((header, body, io.sent.len() - 1))
}

#[test]
fn read_streams_a_header_then_the_bytes() {
    let f = fx();
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(f.jail.join("big"), &big).unwrap();
    std::fs::write(f.jail.join("empty"), b"").unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        f.jail.join("fifo").as_path(),
        rustix::fs::FileType::Fifo,
        Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    for backend in BACKENDS {
        let (header, body, chunks) = read_all(&f, backend, "in_dir/../big", None).unwrap();
        assert_eq!(header.size, 200_000);
        assert_eq!(header.mode, 0o644);
        assert_eq!(body, big);
        assert_eq!(chunks, 4);
        let (header, body, chunks) = read_all(&f, backend, "empty", None).unwrap();
        assert_eq!((header.size, body.len(), chunks), (0, 0, 0));
        assert_eq!(
            read_all(&f, backend, "big", Some(199_999)).unwrap_err(),
            ErrorKind::TooLarge
        );
        assert!(read_all(&f, backend, "big", Some(200_000)).is_ok());
        assert_eq!(
            read_all(&f, backend, "dir", None).unwrap_err(),
            ErrorKind::WrongType
        );
        assert_eq!(
            read_all(&f, backend, "fifo", None).unwrap_err(),
            ErrorKind::WrongType
        );
        assert_eq!(
            read_all(&f, backend, "out_abs", None).unwrap_err(),
            ErrorKind::Escape
        );
        assert_eq!(
            read_all(&f, backend, "out_dir/secret", None).unwrap_err(),
            ErrorKind::Escape
        );
    }
}

#[test]
fn read_refuses_hard_links_to_denylisted_files_like_missing_ones() {
    let f = fx();
    std::fs::hard_link(f.outside.join("secret"), f.jail.join("alias")).unwrap();
    for backend in BACKENDS {
        let mut io = Recorder::default();
        let op = FsOp::Read {
            path: f.at("alias"),
            max_bytes: None,
        };
        let denied = f
            .run_io(backend, &[&f.outside.join("secret")], op, &mut io)
            .unwrap_err();
        let missing = f
            .run_io(
                backend,
                &[],
                FsOp::Read {
                    path: f.at("nothing"),
                    max_bytes: None,
                },
                &mut io,
            )
            .unwrap_err();
        assert_eq!(denied, missing);
        assert!(io.sent.is_empty());
    }
}

#[test]
fn read_stops_when_the_caller_goes_away() {
    let f = fx();
    std::fs::write(f.jail.join("big"), vec![1u8; 500_000]).unwrap();
    let mut io = Recorder {
        send_limit: Some(2),
        ..Recorder::default()
    };
    let op = FsOp::Read {
        path: f.at("big"),
        max_bytes: None,
    };
    let err = f.run_io(Backend::Openat2, &[], op, &mut io).unwrap_err();
    assert_eq!(err, channel::abandoned());
    assert_eq!(io.sent.len(), 2);
}

fn write_op(f: &Fx, rel: &str, mode: u32, parents: bool, cap: Option<u64>) -> FsOp {
    FsOp::Write {
        path: f.at(rel),
        mode,
        parents,
        max_bytes: cap,
    }
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp."))
        .collect()
}

#[test]
fn write_commits_the_whole_upload_atomically() {
    let f = fx();
    for backend in BACKENDS {
        let mut io = Recorder::uploading(&[b"new ", b"body"]);
        let reply = f.run_io(
            backend,
            &[],
            write_op(&f, "file", 0o640, false, None),
            &mut io,
        );
        assert_eq!(reply, Ok(FsReply::Written { bytes: 8 }));
        assert_eq!(std::fs::read(f.jail.join("file")).unwrap(), b"new body");
        assert_eq!(mode_of(&f.jail.join("file")), 0o640);
        let mut io = Recorder::default();
        let reply = f.run_io(
            backend,
            &[],
            write_op(&f, "in_dir/deep/er/x", 0o644, true, None),
            &mut io,
        );
        assert_eq!(reply, Ok(FsReply::Written { bytes: 0 }));
        assert_eq!(std::fs::read(f.jail.join("dir/deep/er/x")).unwrap(), b"");
        assert!(leftovers(&f.jail).is_empty());
        std::fs::write(f.jail.join("file"), b"hello\n").unwrap();
    }
}

#[test]
fn a_failed_or_cancelled_write_leaves_nothing_behind() {
    let f = fx();
    for backend in BACKENDS {
        let mut io = Recorder::uploading(&[b"12345", b"67890"]);
        let err = f
            .run_io(
                backend,
                &[],
                write_op(&f, "file", 0o644, false, Some(9)),
                &mut io,
            )
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::TooLarge);
        let mut io = Recorder::uploading(&[b"partial"]);
        io.cancel_at_end = true;
        let err = f
            .run_io(
                backend,
                &[],
                write_op(&f, "file", 0o644, false, None),
                &mut io,
            )
            .unwrap_err();
        assert_eq!(err, channel::abandoned());
        assert_eq!(std::fs::read(f.jail.join("file")).unwrap(), b"hello\n");
        assert!(leftovers(&f.jail).is_empty());
        for (rel, kind) in [
            ("dir", ErrorKind::WrongType),
            ("", ErrorKind::WrongType),
            ("out_dir/new", ErrorKind::Escape),
            ("out_abs", ErrorKind::Escape),
            ("missing/x", ErrorKind::NotFound),
        ] {
            let mut io = Recorder::uploading(&[b"x"]);
            let err = f
                .run_io(backend, &[], write_op(&f, rel, 0o644, false, None), &mut io)
                .unwrap_err();
            assert_eq!(err.kind, kind, "{backend:?} {rel}");
        }
        f.outside_untouched();
    }
}

#[test]
fn write_replaces_a_link_instead_of_writing_through_it() {
    let f = fx();
    for backend in BACKENDS {
        symlink("dir/inner", f.jail.join("to_inner")).unwrap();
        let mut io = Recorder::uploading(&[b"replaced"]);
        f.run_io(
            backend,
            &[],
            write_op(&f, "to_inner", 0o644, false, None),
            &mut io,
        )
        .unwrap();
        assert_eq!(std::fs::read(f.jail.join("dir/inner")).unwrap(), b"inner\n");
        assert!(!std::fs::symlink_metadata(f.jail.join("to_inner"))
            .unwrap()
            .is_symlink());
        std::fs::remove_file(f.jail.join("to_inner")).unwrap();
        symlink("../outside/new", f.jail.join("dangling_out")).unwrap();
        let mut io = Recorder::uploading(&[b"x"]);
        let err = f
            .run_io(
                backend,
                &[],
                write_op(&f, "dangling_out", 0o644, false, None),
                &mut io,
            )
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Escape);
        std::fs::remove_file(f.jail.join("dangling_out")).unwrap();
        f.outside_untouched();
    }
}

fn tree_fixture(f: &Fx) {
    std::fs::create_dir_all(f.jail.join("src/nested")).unwrap();
    std::fs::create_dir_all(f.jail.join("src/skip")).unwrap();
    std::fs::write(f.jail.join("src/a.rs"), "fn main() {}\nlet needle = 1;\n").unwrap();
    std::fs::write(f.jail.join("src/nested/b.rs"), "NEEDLE\r\nneedle needle\n").unwrap();
    std::fs::write(f.jail.join("src/nested/c.txt"), "needle\n").unwrap();
    std::fs::write(f.jail.join("src/skip/d.rs"), "needle\n").unwrap();
    std::fs::write(f.jail.join("src/bin.rs"), b"needle\0binary\n").unwrap();
    symlink(&f.outside, f.jail.join("src/out")).unwrap();
    std::fs::write(f.outside.join("sub/trap.rs"), "needle\n").unwrap();
}

fn grep_op(f: &Fx, rel: &str, pattern: &str, filter: WalkFilter, ignore_case: bool) -> FsOp {
    FsOp::Grep {
        path: f.at(rel),
        filter,
        search: GrepSearch {
            pattern: pattern.into(),
            ignore_case,
            max_line_bytes: 8,
        },
    }
}

fn filter(include: &[&str], exclude: &[&str]) -> WalkFilter {
    WalkFilter {
        recursive: true,
        include: include.iter().map(|s| s.to_string()).collect(),
        exclude: exclude.iter().map(|s| s.to_string()).collect(),
    }
}

#[test]
fn grep_walks_by_fd_with_globs_and_skips_binaries_and_links() {
    let f = fx();
    tree_fixture(&f);
    for backend in BACKENDS {
        let mut io = Recorder::default();
        let op = grep_op(&f, "src", "needle", filter(&["*.rs"], &["skip"]), true);
        assert_eq!(f.run_io(backend, &[], op, &mut io), Ok(FsReply::Ok));
        let found: Vec<GrepMatch> = io.unpacked();
        let got: Vec<_> = found
            .iter()
            .map(|m| (m.file.as_str(), m.line, m.content.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("a.rs", 2, "let need…"),
                ("nested/b.rs", 1, "NEEDLE"),
                ("nested/b.rs", 2, "needle n…"),
            ],
            "{backend:?}"
        );
        let mut io = Recorder::default();
        let op = grep_op(
            &f,
            "src/nested/c.txt",
            "needle",
            filter(&["*.rs"], &[]),
            false,
        );
        f.run_io(backend, &[], op, &mut io).unwrap();
        let found: Vec<GrepMatch> = io.unpacked();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].file, "");
        let mut io = Recorder::default();
        let op = grep_op(&f, "src", "needle", filter(&["nested/**"], &[]), false);
        f.run_io(backend, &[], op, &mut io).unwrap();
        let files: Vec<String> = io
            .unpacked::<GrepMatch>()
            .into_iter()
            .map(|m| m.file)
            .collect();
        assert_eq!(files, ["nested/b.rs", "nested/c.txt"]);
    }
}

#[test]
fn grep_refuses_bad_patterns_globs_and_unrecursive_directories() {
    let f = fx();
    tree_fixture(&f);
    for backend in BACKENDS {
        let run = |op| f.run(backend, op);
        assert_eq!(
            run(grep_op(&f, "src", "(", filter(&[], &[]), false)),
            Err(ErrorKind::BadRegex)
        );
        assert_eq!(
            run(grep_op(&f, "src", "a\nb", filter(&[], &[]), false)),
            Err(ErrorKind::BadRegex)
        );
        assert_eq!(
            run(grep_op(&f, "src", "x", filter(&["a/["], &[]), false)),
            Err(ErrorKind::Invalid)
        );
        let mut flat = filter(&[], &[]);
        flat.recursive = false;
        assert_eq!(
            run(grep_op(&f, "src", "x", flat, false)),
            Err(ErrorKind::Invalid)
        );
        assert_eq!(
            run(grep_op(&f, "src/out", "x", filter(&[], &[]), false)),
            Err(ErrorKind::Escape)
        );
    }
}

#[test]
fn walk_lists_files_and_skips_denylisted_ones() {
    let f = fx();
    tree_fixture(&f);
    for backend in BACKENDS {
        let mut io = Recorder::default();
        let op = FsOp::Walk {
            path: f.at("src"),
            filter: filter(&[], &["*.txt"]),
        };
        let deny = f.jail.join("src/skip/d.rs");
        f.run_io(backend, &[&deny], op, &mut io).unwrap();
        let files: Vec<String> = io.unpacked();
        assert_eq!(files, ["a.rs", "bin.rs", "nested/b.rs"]);
    }
}

#[test]
fn walks_skip_denylisted_dirs_hard_links_fifos_and_sockets_without_blocking() {
    let f = fx();
    tree_fixture(&f);
    std::fs::create_dir_all(f.jail.join("src/secret/inner")).unwrap();
    std::fs::write(f.jail.join("src/secret/inner/key.rs"), "needle\n").unwrap();
    std::fs::write(f.outside.join("token.rs"), "needle\n").unwrap();
    std::fs::hard_link(f.outside.join("token.rs"), f.jail.join("src/alias.rs")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        f.jail.join("src/pipe.rs"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(f.jail.join("src/sock.rs")).unwrap();
    let deny = [f.jail.join("src/secret"), f.outside.join("token.rs")];
    let deny: Vec<&Path> = deny.iter().map(|p| p.as_path()).collect();
    for backend in BACKENDS {
        let mut io = Recorder::default();
        let op = FsOp::Walk {
            path: f.at("src"),
            filter: filter(&[], &["*.txt"]),
        };
        f.run_io(backend, &deny, op, &mut io).unwrap();
        let files: Vec<String> = io.unpacked();
        assert_eq!(
            files,
            ["a.rs", "bin.rs", "nested/b.rs", "skip/d.rs"],
            "{backend:?}"
        );
        let mut io = Recorder::default();
        let op = grep_op(&f, "src", "needle", filter(&["*.rs"], &[]), false);
        f.run_io(backend, &deny, op, &mut io).unwrap();
        let files: Vec<String> = io
            .unpacked::<GrepMatch>()
            .into_iter()
            .map(|m| m.file)
            .collect();
        assert_eq!(files, ["a.rs", "nested/b.rs", "skip/d.rs"], "{backend:?}");
    }
}

fn sed_op(f: &Fx, rels: &[&str], pattern: &str, replacement: &str, cap: u64) -> FsOp {
    FsOp::Sed {
        files: rels.iter().map(|r| f.at(r)).collect(),
        edit: SedEdit {
            pattern: pattern.into(),
            replacement: replacement.into(),
            regex: true,
            first_only: false,
            ignore_case: false,
        },
        max_file_bytes: cap,
    }
}

#[test]
fn sed_edits_files_in_place_and_reports_skips() {
    let f = fx();
    tree_fixture(&f);
    std::fs::set_permissions(
        f.jail.join("src/a.rs"),
        std::fs::Permissions::from_mode(0o751),
    )
    .unwrap();
    symlink("a.rs", f.jail.join("src/link.rs")).unwrap();
    let op = sed_op(
        &f,
        &[
            "src/a.rs",
            "src/bin.rs",
            "src/link.rs",
            "src/nested/b.rs",
            "src/nested/c.txt",
        ],
        "needle",
        "pin",
        30,
    );
    let Ok(FsReply::Sed { outcomes }) = f.run(Backend::Fallback, op) else {
        panic!("sed failed");
    };
    let got: Vec<_> = outcomes
        .iter()
        .map(|o| {
            (
                o.replacements,
                o.error.as_deref().map(|e| e.split(':').next().unwrap_or(e)),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (1, None),
            (0, Some("skipped")),
            (0, Some("skipped")),
            (2, None),
            (1, None),
        ]
    );
    assert!(outcomes[1].error.as_deref().unwrap().contains("binary"));
    assert!(outcomes[2].error.as_deref().unwrap().contains("symlink"));
    assert_eq!(
        std::fs::read_to_string(f.jail.join("src/a.rs")).unwrap(),
        "fn main() {}\nlet pin = 1;\n"
    );
    assert_eq!(mode_of(&f.jail.join("src/a.rs")), 0o751);
    assert_eq!(
        std::fs::read_to_string(f.jail.join("src/nested/b.rs")).unwrap(),
        "NEEDLE\r\npin pin\n"
    );
    let op = sed_op(&f, &["src/nested/c.txt"], "pin", "x", 2);
    let Ok(FsReply::Sed { outcomes }) = f.run(Backend::Openat2, op) else {
        panic!("sed failed");
    };
    assert!(outcomes[0]
        .error
        .as_deref()
        .unwrap()
        .contains("over the 2-byte limit"));
    assert!(leftovers(&f.jail.join("src")).is_empty());
}

#[test]
fn one_bad_sed_operand_fails_the_call_before_anything_is_written() {
    let f = fx();
    tree_fixture(&f);
    for backend in BACKENDS {
        for (bad, kind) in [
            ("src/out/sub/trap.rs", ErrorKind::Escape),
            ("src/missing.rs", ErrorKind::NotFound),
        ] {
            let op = sed_op(&f, &["src/a.rs", bad], "needle", "pin", 1000);
            assert_eq!(f.run(backend, op), Err(kind));
            assert!(std::fs::read_to_string(f.jail.join("src/a.rs"))
                .unwrap()
                .contains("needle"));
        }
        let op = sed_op(&f, &["src/a.rs"], "(", "x", 1000);
        assert_eq!(f.run(backend, op), Err(ErrorKind::BadRegex));
    }
    assert_eq!(
        std::fs::read_to_string(f.outside.join("sub/trap.rs")).unwrap(),
        "needle\n"
    );
}

#[test]
fn absolute_links_inside_the_root_work_for_every_operation() {
    let f = fx();
    std::fs::create_dir_all(f.jail.join("releases/v2")).unwrap();
    std::fs::write(f.jail.join("releases/v2/app.txt"), b"v2\n").unwrap();
    symlink(f.jail.join("releases/v2"), f.jail.join("current")).unwrap();
    for backend in BACKENDS {
        let (_, body, _) = read_all(&f, backend, "current/app.txt", None).unwrap();
        assert_eq!(body, b"v2\n");
        let (entries, _) = listing(
            f.run(
                backend,
                FsOp::Ls {
                    path: f.at("current"),
                    offset: 0,
                    limit: 10,
                },
            )
            .unwrap(),
        );
        assert_eq!(entries.len(), 1);
        let mut io = Recorder::uploading(&[b"w"]);
        f.run_io(
            backend,
            &[],
            write_op(&f, "current/w.txt", 0o644, false, None),
            &mut io,
        )
        .unwrap();
        assert!(f.jail.join("releases/v2/w.txt").exists());
        std::fs::remove_file(f.jail.join("releases/v2/w.txt")).unwrap();
        let check = FsRequest::CheckDir {
            path: f.at("current"),
        };
        assert_eq!(
            handle_with(&f.ceilings, backend, check, &mut Recorder::default()),
            Ok(FsReply::Ok)
        );
    }
}

#[test]
fn check_dir_accepts_directories_only() {
    let f = fx();
    for backend in BACKENDS {
        let check = |rel: &str| {
            handle_with(
                &f.ceilings,
                backend,
                FsRequest::CheckDir { path: f.at(rel) },
                &mut Recorder::default(),
            )
            .map_err(|e| e.kind)
        };
        assert_eq!(check("dir"), Ok(FsReply::Ok));
        assert_eq!(check(""), Ok(FsReply::Ok));
        assert_eq!(check("file"), Err(ErrorKind::WrongType));
        assert_eq!(check("missing"), Err(ErrorKind::NotFound));
        assert_eq!(check("out_dir"), Err(ErrorKind::Escape));
        assert_eq!(check("../"), Err(ErrorKind::Escape));
    }
}

#[test]
fn canonical_roots_come_back_in_order_and_bad_ones_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("a/b")).unwrap();
    std::fs::write(tmp.path().join("f"), b"").unwrap();
    symlink("a/b", tmp.path().join("link")).unwrap();
    let ceilings = Ceilings::new(&[tmp.path().join("a")]).unwrap();
    let base = tmp.path().to_str().unwrap();
    let canon = |p: PathBuf| {
        std::fs::canonicalize(p)
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned()
    };
    let roots = vec![format!("{base}/link"), format!("{base}/a/./b/..")];
    let got = handle_with(
        &ceilings,
        Backend::Openat2,
        FsRequest::CanonicalRoots { roots },
        &mut Recorder::default(),
    );
    assert_eq!(
        got,
        Ok(FsReply::CanonicalRoots {
            roots: vec![canon(tmp.path().join("a/b")), canon(tmp.path().join("a"))]
        })
    );
    for (root, kind) in [
        (format!("{base}/a/missing"), ErrorKind::NotFound),
        (format!("{base}/f"), ErrorKind::WrongType),
        (base.to_owned(), ErrorKind::Escape),
        ("relative".to_owned(), ErrorKind::Invalid),
    ] {
        let roots = vec![format!("{base}/a"), root.clone()];
        let err = handle_with(
            &ceilings,
            Backend::Openat2,
            FsRequest::CanonicalRoots { roots },
            &mut Recorder::default(),
        )
        .unwrap_err();
        assert_eq!(err.kind, kind, "{root}");
        assert!(
            err.message.starts_with(&format!("{root}: ")),
            "{}",
            err.message
        );
    }
}

#[test]
fn mv_marks_failures_of_the_destination() {
    let f = fx();
    for backend in BACKENDS {
        let err = f
            .run_io(
                backend,
                &[],
                FsOp::Mv {
                    src: f.at("file"),
                    dst: f.at("out_dir/x"),
                    overwrite: false,
                },
                &mut Recorder::default(),
            )
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Escape);
        assert!(
            err.message.starts_with(ide_proto::MV_DESTINATION),
            "{}",
            err.message
        );
        let err = f
            .run_io(
                backend,
                &[],
                FsOp::Mv {
                    src: f.at("nope"),
                    dst: f.at("x"),
                    overwrite: false,
                },
                &mut Recorder::default(),
            )
            .unwrap_err();
        assert!(!err.message.starts_with(ide_proto::MV_DESTINATION));
    }
}

#[test]
fn a_failed_sed_operand_is_named_by_its_index() {
    let f = fx();
    let op = sed_op(&f, &["file", "dir/inner", "out_dir/secret"], "e", "E", 1000);
    let err = f
        .run_io(Backend::Openat2, &[], op, &mut Recorder::default())
        .unwrap_err();
    let (index, inner) = ide_proto::operand_of(&err).unwrap();
    assert_eq!((index, inner.kind), (2, ErrorKind::Escape));
    assert_eq!(std::fs::read(f.jail.join("file")).unwrap(), b"hello\n");
}

mod anchored {
    //! Session-scoped paths: `rel` stays beneath the anchor, and the anchor
    //! itself stays beneath the root, on both backends.
    use super::*;

    fn anchored(fx: &Fx, anchor: &str, rel: &str) -> RootedPath {
        RootedPath {
            anchor: anchor.into(),
            ..fx.at(rel)
        }
    }

    fn stat(fx: &Fx, backend: Backend, path: RootedPath) -> Result<FsReply, ErrorKind> {
        fx.run(backend, FsOp::Stat { path })
    }

    #[test]
    fn a_path_inside_the_anchor_is_reached() {
        let fx = fx();
        for backend in BACKENDS {
            assert!(stat(&fx, backend, anchored(&fx, "dir", "inner")).is_ok());
            assert!(stat(&fx, backend, anchored(&fx, "in_dir", "inner")).is_ok());
        }
    }

    #[test]
    fn leaving_the_anchor_is_an_escape_even_inside_the_root() {
        let fx = fx();
        symlink("../file", fx.jail.join("dir/up")).unwrap();
        std::fs::create_dir(fx.jail.join("dir/sub")).unwrap();
        for backend in BACKENDS {
            for rel in ["../file", "up", "sub/../../file"] {
                assert_eq!(
                    stat(&fx, backend, anchored(&fx, "dir", rel)),
                    Err(ErrorKind::Escape),
                    "{backend:?} {rel}"
                );
            }
        }
    }

    #[test]
    fn an_anchor_that_leads_out_of_the_root_is_an_escape() {
        let fx = fx();
        for backend in BACKENDS {
            for anchor in ["out_dir", "..", "dir/../../outside"] {
                assert_eq!(
                    stat(&fx, backend, anchored(&fx, anchor, "secret")),
                    Err(ErrorKind::Escape),
                    "{backend:?} {anchor}"
                );
            }
            let mut sink = Recorder::default();
            let write = FsOp::Write {
                path: anchored(&fx, "out_dir", "planted"),
                mode: 0o644,
                parents: false,
                max_bytes: None,
            };
            assert!(fx.run_io(backend, &[], write, &mut sink).is_err());
        }
        fx.outside_untouched();
    }

    #[test]
    fn a_missing_or_file_anchor_is_refused() {
        let fx = fx();
        for backend in BACKENDS {
            assert_eq!(
                stat(&fx, backend, anchored(&fx, "missing", "")),
                Err(ErrorKind::NotFound)
            );
            assert_eq!(
                stat(&fx, backend, anchored(&fx, "file", "")),
                Err(ErrorKind::WrongType)
            );
        }
    }
}
