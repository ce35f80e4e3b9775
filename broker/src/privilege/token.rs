//! Keeping the engine token out of every environment.
//!
//! Security meaning: a variable's value stays readable in
//! `/proc/<pid>/environ` for the life of the process image, even after the
//! process unsets it, and root processes (every command the executor runs)
//! can read that file. So at start-up, before anything else, a broker that
//! finds `III_TOKEN` in its environment re-executes itself without it,
//! handing the value over on stdin (an anonymous memfd that nothing else
//! holds). The new image reads it, puts `/dev/null` back on stdin, and keeps
//! the token only in memory, from where it reaches the engine as an
//! `Authorization: Bearer` handshake header. The executor is spawned from
//! the cleaned environment, so neither it nor any command ever sees it.
#![forbid(unsafe_code)]

use rustix::fs::MemfdFlags;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// The variable the engine token arrives in.
pub const TOKEN_ENV: &str = "III_TOKEN";

/// The hidden flag that tells the re-executed broker its token is on stdin.
pub const TOKEN_ON_STDIN_FLAG: &str = "--engine-token-on-stdin";

/// When `III_TOKEN` is set and not blank, re-executes this binary (same pid,
/// same arguments plus [`TOKEN_ON_STDIN_FLAG`]) without it in the
/// environment. Returns only when there is nothing to move, or with the
/// error that stopped the re-exec.
pub fn move_out_of_environment() -> io::Result<()> {
    let Some(token) = std::env::var_os(TOKEN_ENV) else {
        return Ok(());
    };
    let memfd = rustix::fs::memfd_create("ide-engine-token", MemfdFlags::CLOEXEC)?;
    let mut file = File::from(memfd);
    file.write_all(token.as_encoded_bytes())?;
    file.seek(SeekFrom::Start(0))?;
    drop(token);
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_else(|| OsString::from("ide"));
    let err = Command::new("/proc/self/exe")
        .arg0(argv0)
        .arg(TOKEN_ON_STDIN_FLAG)
        .args(args)
        .env_remove(TOKEN_ENV)
        .stdin(Stdio::from(file))
        .exec();
    Err(err)
}

/// Reads the token the previous image left on stdin and puts `/dev/null`
/// there instead. `None` for a blank token.
pub fn take_from_stdin() -> io::Result<Option<String>> {
    let mut token = String::new();
    io::stdin().lock().read_to_string(&mut token)?;
    rustix::stdio::dup2_stdin(File::open("/dev/null")?)?;
    Ok(normalize(token))
}

/// The token as the SDK would use it: trimmed, `None` when blank.
fn normalize(token: String) -> Option<String> {
    let trimmed = token.trim();
    (!trimmed.is_empty()).then(|| trimmed.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_tokens_are_no_token_and_others_are_trimmed() {
        assert_eq!(normalize(String::new()), None);
        assert_eq!(normalize(" \n\t".into()), None);
        assert_eq!(normalize(" secret\n".into()), Some("secret".into()));
    }
}
