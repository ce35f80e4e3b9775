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
#[command(group(ArgGroup::new("mode").required(true).multiple(true).args(["fd", "listen", "probe"])))]
pub struct Cli {
    /// Serve the already-connected broker socket inherited on this fd.
    #[arg(long, value_name = "N")]
    pub fd: Option<i32>,
    /// Listen on this path socket for the broker (hardened install). With
    /// `--fd` too, it is the rendezvous socket where the next broker finds
    /// this executor if the one that started it goes away.
    #[arg(long, value_name = "PATH", requires = "trust_uid")]
    pub listen: Option<PathBuf>,
    /// The only uid accepted as the broker on the --listen socket.
    #[arg(long, value_name = "UID", requires = "listen")]
    pub trust_uid: Option<u32>,
    /// Every root a request names must be this directory or beneath it
    /// (repeatable). Unjailed operation needs `/`.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub ceiling: Vec<PathBuf>,
    /// Drop dangerous capabilities (SYS_ADMIN, SYS_MODULE, SYS_PTRACE, …)
    /// from every command this executor runs.
    #[arg(long)]
    pub drop_capabilities: bool,
    /// Print what this host can enforce (Landlock, seccomp, cgroups, …) as
    /// one JSON object and exit; `ide doctor` reads it.
    #[arg(long, exclusive = true)]
    pub probe: bool,
}

/// How the executor meets its broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// The broker spawned us with one end of a socketpair on this fd.
    Inherited(i32),
    /// We listen on a path socket and accept only this uid.
    Listen { path: PathBuf, trust_uid: u32 },
    /// The broker spawned us on `fd`; if it goes away while jobs remain, we
    /// wait for the next broker (only this uid) on the path socket.
    Rendezvous {
        fd: i32,
        path: PathBuf,
        trust_uid: u32,
    },
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
            (Some(fd), Some(path), Some(trust_uid)) => Some(Mode::Rendezvous {
                fd,
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
    fn a_mode_is_required() {
        assert!(parse(&[]).is_err());
        assert!(parse(&["--fd", "3", "--trust-uid", "1"]).is_err());
        assert!(parse(&["--fd", "3", "--listen", "/x"]).is_err());
    }

    #[test]
    fn probe_stands_alone_and_capability_dropping_is_opt_in() {
        let cli = parse(&["--probe"]).unwrap();
        assert!(cli.probe);
        assert_eq!(cli.mode(), None);
        assert!(parse(&["--probe", "--fd", "3"]).is_err());
        assert!(!parse(&["--fd", "3"]).unwrap().drop_capabilities);
        assert!(
            parse(&["--fd", "3", "--drop-capabilities"])
                .unwrap()
                .drop_capabilities
        );
    }

    #[test]
    fn fd_with_listen_is_the_rendezvous_mode() {
        let cli = parse(&[
            "--fd",
            "3",
            "--listen",
            "/run/ide/x.sock",
            "--trust-uid",
            "7",
        ])
        .unwrap();
        assert_eq!(
            cli.mode(),
            Some(Mode::Rendezvous {
                fd: 3,
                path: "/run/ide/x.sock".into(),
                trust_uid: 7
            })
        );
    }
}
