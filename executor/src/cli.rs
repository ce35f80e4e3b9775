//! The command line.
//!
//! Security meaning: the ceilings and the trusted broker uid come only from
//! here (the operator), never from the socket.
#![forbid(unsafe_code)]

use clap::{ArgGroup, Parser};
use std::path::PathBuf;

/// `ide-executor`: the privileged half of the ide worker.
#[derive(Debug, Parser)]
#[command(name = "ide-executor", version, about)]
#[command(group(ArgGroup::new("mode").required(true).args(["fd", "listen"])))]
pub struct Cli {
    /// Serve the already-connected broker socket inherited on this fd.
    #[arg(long, value_name = "N")]
    pub fd: Option<i32>,
    /// Listen on this path socket for the broker (hardened install).
    #[arg(long, value_name = "PATH", requires = "trust_uid")]
    pub listen: Option<PathBuf>,
    /// The only uid accepted as the broker in --listen mode.
    #[arg(long, value_name = "UID", requires = "listen", conflicts_with = "fd")]
    pub trust_uid: Option<u32>,
    /// Every root a request names must be this directory or beneath it
    /// (repeatable). Unjailed operation needs `/`.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub ceiling: Vec<PathBuf>,
}

/// How the executor meets its broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// The broker spawned us with one end of a socketpair on this fd.
    Inherited(i32),
    /// We listen on a path socket and accept only this uid.
    Listen { path: PathBuf, trust_uid: u32 },
}

impl Cli {
    /// The mode the arguments select (clap already enforced exactly one).
    pub fn mode(&self) -> Option<Mode> {
        match (self.fd, &self.listen, self.trust_uid) {
            (Some(fd), None, None) => Some(Mode::Inherited(fd)),
            (None, Some(path), Some(trust_uid)) => Some(Mode::Listen {
                path: path.clone(),
                trust_uid,
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("ide-executor").chain(args.iter().copied()))
    }

    #[test]
    fn fd_mode_defaults_the_ceiling_to_slash() {
        let cli = parse(&["--fd", "3"]).unwrap();
        assert_eq!(cli.mode(), Some(Mode::Inherited(3)));
        assert_eq!(cli.ceiling, [PathBuf::from("/")]);
    }

    #[test]
    fn listen_mode_needs_a_trusted_uid() {
        assert!(parse(&["--listen", "/run/ide/sock"]).is_err());
        let cli = parse(&[
            "--listen",
            "/run/ide/sock",
            "--trust-uid",
            "1000",
            "--ceiling",
            "/srv",
            "--ceiling",
            "/home",
        ])
        .unwrap();
        assert_eq!(
            cli.mode(),
            Some(Mode::Listen {
                path: "/run/ide/sock".into(),
                trust_uid: 1000
            })
        );
        assert_eq!(cli.ceiling, [PathBuf::from("/srv"), PathBuf::from("/home")]);
    }

    #[test]
    fn exactly_one_mode_is_required() {
        assert!(parse(&[]).is_err());
        assert!(parse(&["--fd", "3", "--listen", "/x", "--trust-uid", "1"]).is_err());
        assert!(parse(&["--fd", "3", "--trust-uid", "1"]).is_err());
    }
}
