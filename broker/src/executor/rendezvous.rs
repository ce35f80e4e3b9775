//! Where a broker and the executor it started meet again after the broker
//! restarts.
//!
//! Security meaning: the socket lives in a private directory (the executor
//! creates it `0700` and refuses one that group or others can reach, or
//! that a stranger owns) and the executor serves only the broker's uid on
//! it. Its name is derived from the engine URL and the configuration id,
//! so two workers on one host never adopt each other's executor; the URL is
//! hashed, never written out (it may carry credentials).
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

/// The default state directory: `$XDG_RUNTIME_DIR/ide`, else `/run/ide` as
/// root, else `/tmp/ide-<uid>`.
pub fn default_state_dir() -> PathBuf {
    let uid = rustix::process::geteuid();
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("ide"),
        None if uid.is_root() => PathBuf::from("/run/ide"),
        None => PathBuf::from(format!("/tmp/ide-{}", uid.as_raw())),
    }
}

/// The rendezvous socket of the worker that talks to `url` under
/// configuration `config_id`, inside `state_dir`.
pub fn socket_path(state_dir: &Path, url: &str, config_id: &str) -> PathBuf {
    let key = fnv1a64(&[url.as_bytes(), b"\0", config_id.as_bytes()]);
    state_dir.join(format!("executor-{key:016x}.sock"))
}

/// FNV-1a, 64-bit: stable across builds and platforms (std's hasher is not).
fn fnv1a64(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in parts.iter().flat_map(|p| p.iter()) {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_the_reference_fnv1a() {
        assert_eq!(fnv1a64(&[b""]), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(&[b"a"]), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(&[b"foobar"]), 0x85944171f73967e8);
        assert_eq!(fnv1a64(&[b"foo", b"bar"]), fnv1a64(&[b"foobar"]));
    }

    #[test]
    fn each_engine_and_configuration_gets_its_own_socket() {
        let dir = Path::new("/run/ide");
        let a = socket_path(dir, "ws://127.0.0.1:49134", "ide");
        assert_eq!(a, socket_path(dir, "ws://127.0.0.1:49134", "ide"));
        assert_ne!(a, socket_path(dir, "ws://127.0.0.1:49135", "ide"));
        assert_ne!(a, socket_path(dir, "ws://127.0.0.1:49134", "ide2"));
        assert_eq!(a.parent(), Some(dir));
    }

    #[test]
    fn the_url_never_appears_in_the_name() {
        let p = socket_path(Path::new("/d"), "wss://user:secret@engine/x", "ide");
        let name = p.file_name().unwrap().to_str().unwrap();
        assert!(
            !name.contains("secret") && !name.contains("engine"),
            "{name}"
        );
        assert!(name.starts_with("executor-") && name.ends_with(".sock"));
    }
}
