//! Attacks on the resolver, each run on both backends.

use super::*;
use rustix::fd::AsFd;
use rustix::fs::Mode;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

const BACKENDS: [Backend; 2] = [Backend::Openat2, Backend::Fallback];

/// `tmp/{outside/secret, jail/…}` with the links every case needs.
struct Fixture {
    _tmp: tempfile::TempDir,
    outside: PathBuf,
    jail: PathBuf,
    root: OwnedFd,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    let jail = tmp.path().join("jail");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret"), b"secret").unwrap();
    std::fs::create_dir_all(jail.join("dir/sub")).unwrap();
    std::fs::write(jail.join("file"), b"file").unwrap();
    let links: &[(&str, &str)] = &[
        ("inside_link", "dir/sub"),
        ("file_link", "file"),
        ("abs_etc", "/etc"),
        ("dir/climb", "../../outside"),
        ("c1", "dir/c2"),
        ("dir/c2", "../../outside/secret"),
        ("loop_a", "loop_b"),
        ("loop_b", "loop_a"),
        ("proc_root", "/proc/self/root"),
        ("proc_fd", "/proc/self/fd/0"),
        (
            "proc_fd_rel",
            "../../../../../../../../../../../../proc/self/fd/0",
        ),
        (
            "proc_rel",
            "../../../../../../../../../../../../proc/self/root",
        ),
        ("dangle_abs", "/nonexistent-ide-test/x"),
        ("dangle_rel", "../outside/missing"),
        ("dangle_in", "missing"),
    ];
    for (link, target) in links {
        symlink(target, jail.join(link)).unwrap();
    }
    symlink(outside.join("secret"), jail.join("abs_outside")).unwrap();
    let root = rustix::fs::open(
        &jail,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .unwrap();
    Fixture {
        _tmp: tmp,
        outside,
        jail,
        root,
    }
}

fn kind(backend: Backend, root: &OwnedFd, rel: &str) -> Result<OwnedFd, ErrorKind> {
    backend
        .resolve(root.as_fd(), rel, OFlags::PATH)
        .map_err(|e| e.kind)
}

fn is_same(fd: &OwnedFd, path: &Path) -> bool {
    let a = rustix::fs::fstat(fd).unwrap();
    let b = rustix::fs::stat(path).unwrap();
    (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
}

fn assert_kind(rel: &str, want: ErrorKind) {
    let f = fixture();
    for backend in BACKENDS {
        match kind(backend, &f.root, rel) {
            Err(got) => assert_eq!(got, want, "{backend:?} {rel}"),
            Ok(_) => panic!("{backend:?} {rel}: resolved, expected {want:?}"),
        }
    }
}

#[test]
fn climbing_out_with_dotdot_is_an_escape() {
    assert_kind("../../etc/passwd", ErrorKind::Escape);
    assert_kind("dir/../../outside/secret", ErrorKind::Escape);
    assert_kind("dir/sub/../../..", ErrorKind::Escape);
}

#[test]
fn an_absolute_rel_is_an_escape() {
    assert_kind("/etc/passwd", ErrorKind::Escape);
}

#[test]
fn absolute_symlinks_out_are_escapes() {
    assert_kind("abs_etc", ErrorKind::Escape);
    assert_kind("abs_etc/passwd", ErrorKind::Escape);
    assert_kind("abs_outside", ErrorKind::Escape);
}

#[test]
fn relative_symlink_chains_that_climb_out_are_escapes() {
    assert_kind("dir/climb/secret", ErrorKind::Escape);
    assert_kind("c1", ErrorKind::Escape);
}

#[test]
fn magic_links_reached_through_a_jail_symlink_are_refused() {
    assert_kind("proc_root/etc/passwd", ErrorKind::Escape);
    assert_kind("proc_rel/etc/passwd", ErrorKind::Escape);
    assert_kind("proc_fd", ErrorKind::Escape);
    assert_kind("proc_fd_rel", ErrorKind::Escape);
}

#[test]
fn dangling_symlinks_out_are_escapes_and_inside_are_missing() {
    assert_kind("dangle_abs", ErrorKind::Escape);
    assert_kind("dangle_rel", ErrorKind::Escape);
    assert_kind("dangle_in", ErrorKind::NotFound);
}

#[test]
fn a_symlink_loop_reads_as_missing() {
    assert_kind("loop_a", ErrorKind::NotFound);
    assert_kind("loop_a/x", ErrorKind::NotFound);
}

#[test]
fn missing_and_wrong_type_get_their_classes() {
    assert_kind("missing", ErrorKind::NotFound);
    assert_kind("dir/missing/x", ErrorKind::NotFound);
    assert_kind("file/x", ErrorKind::WrongType);
    assert_kind("file/", ErrorKind::WrongType);
    assert_kind("a\0b", ErrorKind::Invalid);
}

#[test]
fn symlinks_that_stay_inside_resolve_to_their_target() {
    let f = fixture();
    for backend in BACKENDS {
        let fd = kind(backend, &f.root, "inside_link").unwrap();
        assert!(is_same(&fd, &f.jail.join("dir/sub")), "{backend:?}");
        let fd = kind(backend, &f.root, "inside_link/../sub/./").unwrap();
        assert!(is_same(&fd, &f.jail.join("dir/sub")), "{backend:?}");
        let fd = kind(backend, &f.root, "file_link").unwrap();
        assert!(is_same(&fd, &f.jail.join("file")), "{backend:?}");
    }
}

#[test]
fn empty_and_dot_are_the_root_itself() {
    let f = fixture();
    for backend in BACKENDS {
        for rel in ["", ".", "dir/..", "dir/sub/../.."] {
            let fd = kind(backend, &f.root, rel).unwrap();
            assert!(is_same(&fd, &f.jail), "{backend:?} {rel:?}");
        }
    }
}

#[test]
fn nofollow_opens_the_final_link_itself() {
    let f = fixture();
    for backend in BACKENDS {
        let fd = backend
            .resolve(f.root.as_fd(), "abs_etc", OFlags::PATH | OFlags::NOFOLLOW)
            .unwrap();
        let st = rustix::fs::fstat(&fd).unwrap();
        assert_eq!(
            rustix::fs::FileType::from_raw_mode(st.st_mode),
            rustix::fs::FileType::Symlink
        );
    }
}

#[test]
fn a_directory_open_of_a_file_link_is_wrong_type() {
    let f = fixture();
    for backend in BACKENDS {
        let err = backend
            .resolve(
                f.root.as_fd(),
                "file_link",
                OFlags::PATH | OFlags::DIRECTORY,
            )
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::WrongType, "{backend:?}");
    }
}

#[test]
fn a_readable_open_yields_the_contents() {
    let f = fixture();
    for backend in BACKENDS {
        let fd = backend
            .resolve(f.root.as_fd(), "file_link", OFlags::RDONLY)
            .unwrap();
        let mut buf = [0u8; 16];
        let n = rustix::io::read(&fd, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"file", "{backend:?}");
    }
}

#[test]
fn long_symlink_chains_stop_like_the_kernel() {
    let f = fixture();
    for i in 0..50 {
        symlink(format!("chain{}", i + 1), f.jail.join(format!("chain{i}"))).unwrap();
    }
    symlink("dir", f.jail.join("chain50")).unwrap();
    for backend in BACKENDS {
        assert!(kind(backend, &f.root, "chain45").is_ok(), "{backend:?}");
        assert_eq!(
            kind(backend, &f.root, "chain0").unwrap_err(),
            ErrorKind::NotFound,
            "{backend:?}"
        );
    }
}

#[test]
fn creation_flags_are_refused() {
    let f = fixture();
    for backend in BACKENDS {
        let err = backend
            .resolve(f.root.as_fd(), "new", OFlags::WRONLY | OFlags::CREATE)
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Internal);
        assert!(!f.jail.join("new").exists());
    }
}

#[test]
fn no_fd_is_opened_without_cloexec() {
    let f = fixture();
    for backend in BACKENDS {
        let fd = kind(backend, &f.root, "inside_link").unwrap();
        let flags = rustix::io::fcntl_getfd(&fd).unwrap();
        assert!(flags.contains(rustix::io::FdFlags::CLOEXEC), "{backend:?}");
    }
}

fn host_root() -> OwnedFd {
    rustix::fs::open(
        "/",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .unwrap()
}

#[test]
fn magic_links_with_the_host_root_are_refused() {
    let root = host_root();
    let file = std::fs::File::open("/proc/self/status").unwrap();
    let fd_rel = format!("proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&file));
    for backend in BACKENDS {
        for rel in [
            "proc/self/root/etc/passwd",
            "proc/self/root",
            "proc/self/cwd",
            fd_rel.as_str(),
        ] {
            assert_eq!(
                kind(backend, &root, rel).unwrap_err(),
                ErrorKind::NotFound,
                "{backend:?} {rel}"
            );
        }
        // Ordinary procfs links (`/proc/self`) still work.
        assert!(
            kind(backend, &root, "proc/self/status").is_ok(),
            "{backend:?}"
        );
    }
}

#[test]
fn the_host_root_resolves_absolute_links_like_the_host_does() {
    let f = fixture();
    let root = host_root();
    let via_link = f.jail.join("abs_outside");
    let rel = via_link.to_str().unwrap().trim_start_matches('/');
    for backend in BACKENDS {
        let fd = kind(backend, &root, rel).unwrap();
        assert!(is_same(&fd, &f.outside.join("secret")), "{backend:?}");
        let fd = kind(backend, &root, "../../etc").unwrap();
        assert!(is_same(&fd, Path::new("/etc")), "{backend:?}");
    }
}

#[test]
fn resolve_parent_splits_off_a_plain_name() {
    let f = fixture();
    for backend in BACKENDS {
        let (dir, name) = backend
            .resolve_parent(f.root.as_fd(), "inside_link/new")
            .unwrap();
        assert!(is_same(&dir, &f.jail.join("dir/sub")), "{backend:?}");
        assert_eq!(name, "new");
        let (dir, name) = backend.resolve_parent(f.root.as_fd(), "top").unwrap();
        assert!(is_same(&dir, &f.jail), "{backend:?}");
        assert_eq!(name, "top");
    }
}

#[test]
fn resolve_parent_refuses_names_that_are_not_names() {
    let f = fixture();
    for backend in BACKENDS {
        for rel in ["", ".", "..", "dir/", "dir/.", "dir/..", "dir/a\0b"] {
            let err = backend.resolve_parent(f.root.as_fd(), rel).unwrap_err();
            assert_eq!(err.kind, ErrorKind::Invalid, "{backend:?} {rel:?}");
        }
        for rel in ["/x", "../x", "abs_etc/x", "dir/climb/x"] {
            let err = backend.resolve_parent(f.root.as_fd(), rel).unwrap_err();
            assert_eq!(err.kind, ErrorKind::Escape, "{backend:?} {rel:?}");
        }
    }
}

#[test]
fn the_anchor_is_recognised_by_identity() {
    let f = fixture();
    assert_eq!(Anchor::of(f.root.as_fd()), Ok(Anchor::Jail));
    assert_eq!(Anchor::of(host_root().as_fd()), Ok(Anchor::HostRoot));
}

#[test]
fn a_swap_race_never_reaches_outside() {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    let f = fixture();
    std::fs::create_dir(f.jail.join("a")).unwrap();
    std::fs::write(f.jail.join("a/secret"), b"inside").unwrap();
    symlink("../outside", f.jail.join("b")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, jail) = (stop.clone(), f.jail.clone());
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                let _ = rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    jail.join("a").as_path(),
                    rustix::fs::CWD,
                    jail.join("b").as_path(),
                    rustix::fs::RenameFlags::EXCHANGE,
                );
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut opened = 0;
    for i in 0..2000 {
        if Instant::now() > deadline {
            break;
        }
        let backend = BACKENDS[i % 2];
        if let Ok(fd) = backend.resolve(f.root.as_fd(), "a/secret", OFlags::RDONLY) {
            let mut buf = [0u8; 16];
            let n = rustix::io::read(&fd, &mut buf).unwrap();
            assert_eq!(&buf[..n], b"inside", "{backend:?} read outside the jail");
            opened += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(opened > 0, "the race never let a legitimate open through");
}

#[test]
fn absolute_symlinks_that_stay_inside_are_re_anchored_at_the_root() {
    let f = fixture();
    let jail = f.jail.to_str().unwrap();
    std::fs::create_dir_all(f.jail.join("releases/v2")).unwrap();
    std::fs::write(f.jail.join("releases/v2/app.txt"), b"v2").unwrap();
    let links = [
        ("current", format!("{jail}/releases/v2")),
        ("current_file", format!("{jail}/releases/v2/app.txt")),
        ("root_itself", jail.to_owned()),
        ("spelled", format!("/{jail}//./releases/../releases/v2")),
        ("hop", format!("{jail}/current")),
    ];
    for (link, target) in &links {
        symlink(target, f.jail.join(link)).unwrap();
    }
    for backend in BACKENDS {
        for (rel, want) in [
            ("current", "releases/v2"),
            ("current/app.txt", "releases/v2/app.txt"),
            ("current_file", "releases/v2/app.txt"),
            ("root_itself", ""),
            ("root_itself/file", "file"),
            ("spelled/app.txt", "releases/v2/app.txt"),
            ("hop/app.txt", "releases/v2/app.txt"),
            ("dir/../current/../v2/app.txt", "releases/v2/app.txt"),
        ] {
            let fd =
                kind(backend, &f.root, rel).unwrap_or_else(|e| panic!("{backend:?} {rel}: {e:?}"));
            assert!(is_same(&fd, &f.jail.join(want)), "{backend:?} {rel}");
        }
        let (dir, name) = backend
            .resolve_parent(f.root.as_fd(), "current/new")
            .unwrap();
        assert!(is_same(&dir, &f.jail.join("releases/v2")), "{backend:?}");
        assert_eq!(name, "new");
    }
}

#[test]
fn absolute_symlinks_that_only_look_inside_are_escapes() {
    let f = fixture();
    let jail = f.jail.to_str().unwrap();
    std::fs::create_dir_all(format!("{jail}2")).unwrap();
    let links = [
        ("up", format!("{jail}/../outside/secret")),
        ("climb", format!("{jail}/dir/../../outside/secret")),
        ("sibling", format!("{jail}2")),
        ("prefix", jail[..jail.len() - 1].to_owned()),
        ("inside_then_out", format!("{jail}/dir/climb/secret")),
    ];
    for (link, target) in &links {
        symlink(target, f.jail.join(link)).unwrap();
    }
    for backend in BACKENDS {
        for (link, _) in &links {
            let got = kind(backend, &f.root, link).map(|_| ());
            assert_eq!(got, Err(ErrorKind::Escape), "{backend:?} {link}");
        }
    }
    std::fs::remove_dir(format!("{jail}2")).unwrap();
}

#[test]
fn the_root_prefix_is_compared_component_by_component() {
    use fallback::beneath;
    assert_eq!(beneath(b"/srv/app/x", b"/srv/app"), Some(&b"x"[..]));
    assert_eq!(beneath(b"/srv/app", b"/srv/app"), Some(&b""[..]));
    assert_eq!(beneath(b"//srv/./app//x", b"/srv/app"), Some(&b"/x"[..]));
    assert_eq!(beneath(b"/srv/app2/x", b"/srv/app"), None);
    assert_eq!(beneath(b"/srv/ap", b"/srv/app"), None);
    assert_eq!(beneath(b"/srv/../srv/app/x", b"/srv/app"), None);
    assert_eq!(beneath(b"/srv", b"/srv/app"), None);
}
