//! The operator's command line.
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// `ide`: Unix commands, background jobs and jailed filesystem operations for
/// the iii engine.
#[derive(Debug, Parser)]
#[command(name = "ide", version, about)]
pub struct Cli {
    /// WebSocket URL of the iii engine (the flag wins over the env var).
    #[arg(long, env = "III_URL", default_value = crate::engine::DEFAULT_URL)]
    pub url: String,

    /// Seed configuration, sent as `initial_value` on first registration only.
    #[arg(long, default_value = "./config.yaml")]
    pub config: PathBuf,

    /// The executor binary to start (default: `ide-executor` next to this binary).
    #[arg(long, conflicts_with = "executor_socket")]
    pub executor: Option<PathBuf>,

    /// Connect to an executor already listening on this socket (hardened
    /// install) instead of starting one.
    #[arg(long)]
    pub executor_socket: Option<PathBuf>,

    /// Private directory of the rendezvous socket where a restarted broker
    /// finds the executor (and the background jobs) its predecessor started
    /// [default: $XDG_RUNTIME_DIR/ide, else /run/ide as root, else /tmp/ide-<uid>].
    #[arg(long, conflicts_with = "executor_socket")]
    pub state_dir: Option<PathBuf>,

    /// The unprivileged account a broker started as root drops to once its
    /// executor runs (name or uid; a dedicated account is better than the
    /// shared `nobody`).
    #[arg(long, default_value = crate::privilege::DEFAULT_BROKER_USER)]
    pub broker_user: String,

    /// Set only by the broker itself when it re-executes with the engine
    /// token moved from `III_TOKEN` to stdin.
    #[arg(long = "engine-token-on-stdin", hide = true)]
    pub engine_token_on_stdin: bool,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Subcommands; without one, `ide` serves the engine.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Report what this host can enforce (Landlock, seccomp, cgroups, …) and
    /// whether the worker can run as configured; exits 1 when it cannot.
    Doctor {
        /// Print one JSON object instead of the table.
        #[arg(long)]
        json: bool,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("ide").chain(args.iter().copied()))
    }

    #[test]
    fn the_broker_user_defaults_to_nobody() {
        let cli = parse(&[]).unwrap();
        assert_eq!(cli.broker_user, "nobody");
        assert!(cli.command.is_none());
        assert!(!cli.engine_token_on_stdin);
        assert_eq!(parse(&["--broker-user", "ide"]).unwrap().broker_user, "ide");
    }

    #[test]
    fn doctor_takes_json_and_the_global_options_before_it() {
        let cli = parse(&[
            "--engine-token-on-stdin",
            "--config",
            "/etc/ide.yaml",
            "doctor",
            "--json",
        ])
        .unwrap();
        assert!(matches!(cli.command, Some(Command::Doctor { json: true })));
        assert!(cli.engine_token_on_stdin);
        assert_eq!(cli.config, PathBuf::from("/etc/ide.yaml"));
        assert!(matches!(
            parse(&["doctor"]).unwrap().command,
            Some(Command::Doctor { json: false })
        ));
    }
}
