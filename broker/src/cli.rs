//! The operator's command line.
#![forbid(unsafe_code)]

use clap::Parser;
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
}
